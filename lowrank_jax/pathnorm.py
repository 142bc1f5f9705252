"""Shallow networks regularised by the 1-path-norm, ℓ1, or a layer-wise constraint; Prox-SGD; PGD.

Latorre, Rolland, Hallak, Cevher, ICML 2020 (project note ``path_norm_prox.md``). The network is

    h(x) = W_out · elu(W_in x + b_in) + b_out,   W_in (hidden, inputs), W_out (outputs, hidden),

an ``equinox`` module initialised like PyTorch's ``nn.Linear`` (uniform ±1/√fan_in, as the
authors' code). Training minimises mean cross-entropy + λ g(W_in, W_out), biases unregularised:

    "path":  g = Σ_i ‖W_out[:, i]‖₁ ‖W_in[i, :]‖₁        (bounds the ℓ∞→ℓ1 Lipschitz constant)
    "l1":    g = ‖W_in‖₁ + ‖W_out‖₁
    "layer": ‖W_in‖_∞ ≤ 1/λ and ‖W_out‖_∞ ≤ 1/λ (max row ℓ1 norms; Cisse et al. 2017)

each in two ways (``method``): "sgd", plain SGD on the penalised loss with autodiff (sub)gradients
(the paper's "SGD"; for "layer" the penalty λ Σ_layers max-row-ℓ1, as the authors' code), and
"prox", SGD on the cross-entropy followed by the prox of (learning rate × λ) g — the exact global
path-norm prox, soft thresholding — or, for "layer", the projection onto the constraint (radius
1/λ as the paper says; the authors' code passes lr·λ). All are
``transforms.proximal(optax.sgd(lr), ...)`` or ``optax.sgd`` and run under one ``jit``; λ and the
learning rate are traced, so :func:`train` ``vmap``s over them (:func:`sweep`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from lowrank_jax import _checks, prox, transforms
from lowrank_jax import progress as progress_bar
from lowrank_jax.precision import full_precision

REGULARIZERS = ("path", "l1", "layer")
METHODS = ("sgd", "prox")


class ShallowNet(eqx.Module):
    """One hidden layer with ELU, logits = W_out elu(W_in x + b_in) + b_out: the layers ``hidden``
    (weight W_in (hidden, inputs)) and ``out`` (W_out (outputs, hidden)), ``equinox.nn.Linear``.
    The constructor takes the sizes (the ``hidden`` argument is the width), ``key`` (a
    ``jax.random`` key, required: it initialises both layers) and ``dtype`` of the weights
    (default: JAX's default float, float64 with x64 on); ``train`` builds its network in the data's
    dtype."""

    hidden: eqx.nn.Linear
    out: eqx.nn.Linear

    def __init__(self, inputs: int = 784, hidden: int = 200, outputs: int = 10, *, key, dtype=None):
        k1, k2 = jax.random.split(key)
        self.hidden = eqx.nn.Linear(inputs, hidden, key=k1, dtype=dtype)
        self.out = eqx.nn.Linear(hidden, outputs, key=k2, dtype=dtype)

    def __call__(self, X):
        """Logits of a batch X (N, inputs) → (N, outputs) (or of one example (inputs,))."""
        H = jax.nn.elu(X @ self.hidden.weight.T + self.hidden.bias)
        return H @ self.out.weight.T + self.out.bias

    @property
    def weights(self):
        return self.hidden.weight, self.out.weight


def _with_weights(model: ShallowNet, W_in, W_out) -> ShallowNet:
    return eqx.tree_at(lambda m: (m.hidden.weight, m.out.weight), model, (W_in, W_out))


def cross_entropy(model: ShallowNet, X, y) -> jax.Array:
    """Mean softmax cross-entropy of ``model`` on X (N, inputs) with integer labels y (N,)."""
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(model(X), y))


def penalty(model: ShallowNet, reg: str) -> jax.Array:
    """g(W_in, W_out) of the regulariser (for "layer": Σ_layers max-row-ℓ1, the SGD variant's)."""
    W_in, W_out = model.weights
    if reg == "path":
        return prox.path_norm(W_in, W_out)
    if reg == "l1":
        return jnp.sum(jnp.abs(W_in)) + jnp.sum(jnp.abs(W_out))
    if reg == "layer":
        return jnp.max(jnp.sum(jnp.abs(W_in), axis=1)) + jnp.max(jnp.sum(jnp.abs(W_out), axis=1))
    raise ValueError(f"reg must be one of {REGULARIZERS}, got {reg!r}")


def lipschitz_bounds(model: ShallowNet) -> dict:
    """Upper bounds on the ℓ∞→ℓ1 Lipschitz constant (Theorem 1): path ≤ product ‖vec W_out‖₁ ‖W_in‖_∞."""
    W_in, W_out = model.weights
    return {"path": prox.path_norm(W_in, W_out),
            "product": jnp.sum(jnp.abs(W_out)) * jnp.max(jnp.sum(jnp.abs(W_in), axis=1))}


def prox_step(model: ShallowNet, strength, reg: str) -> ShallowNet:
    """The prox (or projection) of the regulariser on the weights; biases untouched.

    "path": exact prox of strength·P; "l1": soft thresholding at strength; "layer": projection of
    every row of both weight matrices onto the ℓ1 ball of radius 1/strength (pass strength = λ).
    ``strength`` ≥ 0 (+inf: "l1" and "layer" give W = 0; "path" refuses it); a negative or NaN value
    is refused by name when concrete and makes the weights NaN when traced."""
    W_in, W_out = model.weights
    strength = _checks.as_hyper(strength, "strength", allow_inf=reg != "path", dtype=W_in.dtype)
    if reg == "path":
        W_in, W_out = prox.path_norm_prox(W_in, W_out, strength)
    elif reg == "l1":
        W_in, W_out = prox.soft_threshold(W_in, strength), prox.soft_threshold(W_out, strength)
    elif reg == "layer":
        radius = 1.0 / jnp.asarray(strength)          # λ = 0: an infinite ball, no constraint
        W_in, W_out = prox.project_l1_ball_rows(W_in, radius), prox.project_l1_ball_rows(W_out, radius)
    else:
        raise ValueError(f"reg must be one of {REGULARIZERS}, got {reg!r}")
    return _with_weights(model, W_in, W_out)


def optimizer(reg: str, method: str, learning_rate, lam) -> optax.GradientTransformation:
    """The training rule: "sgd" → ``optax.sgd(lr)`` (the penalty goes into the loss, see
    :func:`loss_fn`); "prox" → ``proximal(optax.sgd(lr), prox, lr·λ)`` ("layer": strength λ)."""
    _check_choice(reg, method)
    if method == "sgd":
        return optax.sgd(learning_rate)
    strength = lam if reg == "layer" else learning_rate * lam

    def prox_fn(params, s):
        return prox_step(params, s, reg)

    return transforms.proximal(optax.sgd(learning_rate), prox_fn, strength)


def loss_fn(model, X, y, reg: str, method: str, lam):
    """What the optimizer differentiates: the mean cross-entropy CE of ``model`` on X (N, inputs),
    y (N,), plus λ g (:func:`penalty`) for ``method="sgd"`` (Prox-SGD applies g through its prox)."""
    ce = cross_entropy(model, X, y)
    return ce + lam * penalty(model, reg) if method == "sgd" else ce


def _check_choice(reg, method):
    if reg not in REGULARIZERS:
        raise ValueError(f"reg must be one of {REGULARIZERS}, got {reg!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")


# -- sparsity and robustness ---------------------------------------------------------------------

def nonzero_fraction(model: ShallowNet) -> jax.Array:
    """Share of weights that are non-zero, counting a hidden unit whose outgoing or incoming weights
    are all zero as entirely zero (it computes nothing; the paper's end-of-training rule, App. C).
    Biases are not counted. NaN for a model with a non-finite parameter (see :func:`error_rate`)."""
    W_in, W_out = model.weights
    alive = jnp.any(W_in != 0, axis=1) & jnp.any(W_out != 0, axis=0)          # (hidden,)
    nnz = jnp.sum((W_in != 0) & alive[:, None]) + jnp.sum((W_out != 0) & alive[None, :])
    return _nan_unless_finite(model, nnz / (W_in.size + W_out.size))


def _nan_unless_finite(model, value):
    """``value``, or NaN where a parameter of ``model`` is not finite. A diverged network (a sweep's
    point with too large a step, under ``jit`` or ``vmap``, where nothing can raise) has NaN logits,
    whose argmax is class 0, and NaN weights, which count as non-zero: its error rate and non-zero
    share read as plausible numbers (0.675 and 1.0 on one test set) unless they are made NaN."""
    finite = _checks._all_finite(jax.tree.leaves(eqx.filter(model, eqx.is_inexact_array)))
    return jnp.where(finite, value, jnp.nan)


def _check_eval(model, X, y):
    """Validated (X, y) for evaluating ``model``: X (N, inputs) a finite float matrix (integers are
    converted), y (N,) integer labels below the model's number of outputs. Labels that are traced
    (inside ``jit``/``vmap``) are checked for shape and dtype only."""
    X = _checks.as_matrix(X, "X")
    outputs = _model_outputs(model, X)
    return X, _labels(y, X.shape[0], outputs)[0]


def _model_outputs(model, X) -> int:
    """The number of outputs of ``model``, after checking it is a ShallowNet that takes X's columns."""
    if not isinstance(model, ShallowNet):
        raise ValueError(f"model must be a ShallowNet, got {type(model).__name__}")
    inputs = model.hidden.weight.shape[-1]
    if X.shape[1] != inputs:
        raise ValueError(f"model takes {inputs} inputs but X has {X.shape[1]} columns (examples are rows)")
    return model.out.weight.shape[-2]


def _labels(y, n: int, outputs):
    """(y as int32 labels, outputs): y (n,) below ``outputs`` (default max(y) + 1). Traced labels
    (inside ``jit``/``vmap``) are checked for shape and dtype only and need ``outputs``."""
    if isinstance(y, jax.core.Tracer):
        if outputs is None:
            raise ValueError("pass outputs= (the number of classes) when y is traced")
        if y.shape != (n,) or not jnp.issubdtype(y.dtype, jnp.integer):
            raise ValueError(f"y must be ({n},) integer labels, got {y.shape} {y.dtype}")
        return y, outputs
    y_np = _checks.class_labels(y, n, outputs, what="X has {n} rows (examples are rows)")
    return jnp.asarray(y_np, jnp.int32), int(y_np.max()) + 1 if outputs is None else outputs


def _check_attack(X, eps, steps, step_size, key, bounds):
    """(eps, steps, step_size, key, (lo, hi)) in X's dtype; a concrete X outside ``bounds`` is refused
    (the clip would move it even at ε = 0, so the "attack" would not start from X)."""
    eps = _checks.as_hyper(eps, "eps", ndim=0, dtype=X.dtype)
    steps = _checks.check_positive_int(steps, "steps", minimum=0)
    step_size = None if step_size is None else _checks.as_hyper(step_size, "step_size", ndim=0, dtype=X.dtype)
    if bounds is None:
        lo = hi = None
    else:
        arr = None if isinstance(bounds, (str, bytes)) else np.asarray(bounds)
        if arr is None or arr.shape != (2,) or arr.dtype.kind not in "iuf":
            raise ValueError(f"bounds must be None or a pair (lo, hi) of numbers, got {bounds!r}")
        lo, hi = float(arr[0]), float(arr[1])
        if not lo < hi:
            raise ValueError(f"bounds must satisfy lo < hi, got {bounds!r}")
        if _checks.is_concrete(X):
            with jax.ensure_compile_time_eval():
                x_min, x_max = float(jnp.min(X)), float(jnp.max(X))
            if x_min < lo or x_max > hi:
                raise ValueError(f"X has values in [{x_min:.3g}, {x_max:.3g}], outside bounds = ({lo:g}, {hi:g}), the "
                                 "input range the attack clips to: pass the range of your inputs as bounds=(lo, hi), "
                                 "or bounds=None for unbounded inputs (standardised features)")
    return eps, steps, step_size, _checks.as_key(key), (lo, hi)


@full_precision
def pgd_attack(model: ShallowNet, X, y, eps, *, key, steps: int = 40, step_size=None, bounds=(0.0, 1.0)):
    """Untargeted PGD in the ℓ∞ ball (Madry et al. 2018) as in the paper's evaluation: a uniform
    random start in [−ε, ε], ``steps`` ascent steps x ← Π(x + a · sign ∇_x CE) of size a
    (``step_size``, by default ε/20),
    projected back on the ball around X and clipped to the input range ``bounds`` (the pixel range
    [0, 1] by default; ``None``: no clipping). X (N, inputs) inside ``bounds`` (checked when X is
    concrete; under ``jit``/``vmap`` over X it is clipped unchecked), y (N,) labels below the
    model's outputs, ε ≥ 0; ``key`` a PRNG key or an integer seed. Returns the examples (N, inputs)
    in X's dtype (half precision is computed and returned in float32)."""
    X, y = _check_eval(model, X, y)
    return _pgd(model, X, y, *_check_attack(X, eps, steps, step_size, key, bounds))


def _pgd(model, X, y, eps, steps, step_size, key, bounds):
    a = eps / 20 if step_size is None else step_size
    grad_x = jax.grad(lambda Z: jnp.sum(optax.softmax_cross_entropy_with_integer_labels(model(Z), y)))
    clip = (lambda Z: Z) if bounds[0] is None else (lambda Z: jnp.clip(Z, *bounds))
    Z = clip(X + jax.random.uniform(key, X.shape, X.dtype, -eps, eps))

    def step(_, Z):
        Z = Z + a * jnp.sign(grad_x(Z))
        return clip(jnp.clip(Z, X - eps, X + eps))

    return jax.lax.fori_loop(0, steps, step, Z)


@full_precision
def error_rate(model: ShallowNet, X, y) -> jax.Array:
    """Share of the rows of X (N, inputs) whose predicted class differs from y (N,). NaN for a
    model with a non-finite parameter (a diverged run), not the share of labels that are not 0."""
    X, y = _check_eval(model, X, y)
    return _error_rate(model, X, y)


def _error_rate(model, X, y):
    return _nan_unless_finite(model, jnp.mean(jnp.argmax(model(X), axis=-1) != y))


@full_precision
def robust_error(model: ShallowNet, X, y, eps, *, key, steps: int = 40, bounds=(0.0, 1.0)) -> jax.Array:
    """Error on PGD-ℓ∞ examples (ε = 0 gives the clean error); arguments as :func:`pgd_attack`. NaN
    for a model with a non-finite parameter, as :func:`error_rate`."""
    X, y = _check_eval(model, X, y)
    eps, steps, step_size, key, bounds = _check_attack(X, eps, steps, None, key, bounds)
    err = _error_rate(model, _pgd(model, X, y, eps, steps, step_size, key, bounds), y)
    # a traced invalid ε is NaN here (as_hyper): the error rate of NaN examples would read as a number
    return jnp.where(jnp.isnan(eps), jnp.nan, err)


# -- training ------------------------------------------------------------------------------------

class TrainResult(NamedTuple):
    """What :func:`train` and :func:`sweep` return: the trained ``model`` and, per epoch and log
    point, the minibatch regularised ``loss`` CE + λ g and the ``nonzero`` share of weights (both
    (epochs, logs_per_epoch); :func:`sweep` adds its leading seed and grid axes to every leaf)."""

    model: ShallowNet
    loss: jax.Array          # (epochs, logs_per_epoch) minibatch regularised loss CE + λ g
    nonzero: jax.Array       # (epochs, logs_per_epoch) nonzero_fraction


@full_precision
def train(key, X, y, *, reg: str, method: str, lr, lam, epochs: int = 20, batch: int = 100,
          hidden: int = 200, logs_per_epoch: int = 10, model: ShallowNet | None = None,
          outputs: int | None = None, progress: bool = False) -> TrainResult:
    """Train a :class:`ShallowNet` on (X (N, inputs) in [0, 1], y (N,) integer labels 0, 1, …)
    with minibatch SGD or Prox-SGD, constant learning rate (lr > 0, λ ≥ 0), reshuffled every epoch.
    An integer X is converted to float, not rescaled: divide raw pixels by 255 first. An epoch runs
    ⌊⌊N/batch⌋/logs_per_epoch⌋ · logs_per_epoch minibatches; the few examples left over are a
    different random set each epoch. One jitted program; ``key``, ``lr`` and ``lam`` are traced, so a
    ``vmap`` over them trains many networks in one call (:func:`sweep`).

    The objective is CE(W) + λ g(W) (Latorre, Rolland, Hallak, Cevher 2020: §3 and the experiments of §7):

      ``reg``: g, one of "path" (the 1-path-norm Σ_{k,j,i} |W_out[k, j]| |W_in[j, i]|), "l1"
        (Σ|W_in| + Σ|W_out|) or "layer" (layer-wise: each row of W_in and W_out in the ℓ1 ball of
        radius 1/λ for "prox"; Σ_layers max-row-ℓ1 as a penalty for "sgd"; :func:`penalty`).
      ``method``: "sgd" — W ← W − lr ∇(CE + λ g) with g's subgradient; "prox" (Prox-SGD) —
        W ← prox_{lr·λ·g}(W − lr ∇CE) with the exact prox (:func:`prox_step`; for "path" the global
        prox of :func:`lowrank_jax.prox.path_norm_prox`; for "layer" the projection onto the
        balls), which sets weights exactly to zero.
      ``hidden``: width of the hidden layer of a new network; ``model``: a :class:`ShallowNet` to
        start from instead (its sizes then rule, and ``hidden`` is not used).

    ``outputs`` (classes) defaults to max(y) + 1 (needs a concrete y). Logs, ``logs_per_epoch`` times
    per epoch, the minibatch regularised loss CE + λ g and the share of non-zero weights.
    ``progress=True`` shows a tqdm bar of epochs (from inside the compiled program, through
    ``jax.debug.callback``). Called directly, training whose weights become non-finite raises
    ``FloatingPointError``; inside ``jit``/``vmap``/:func:`lowrank_jax.sweep.run` the NaN is returned.

    Example:
        ```python
        import jax, jax.numpy as jnp
        from sklearn.datasets import load_digits
        from lowrank_jax import pathnorm

        d = load_digits()
        X, y = jnp.asarray(d.data / 16, jnp.float32), jnp.asarray(d.target)
        res = pathnorm.train(jax.random.key(0), X[:1400], y[:1400], reg="path", method="prox", lr=0.1, lam=3e-3,
                             epochs=5, hidden=64)
        print(pathnorm.error_rate(res.model, X[1400:], y[1400:]),   # clean test error ≈ 0.26
              pathnorm.nonzero_fraction(res.model),                 # ≈ 0.94: Prox-SGD sets exact zeros
              pathnorm.robust_error(res.model, X[1400:], y[1400:], eps=0.05, key=jax.random.key(1)))   # ≈ 0.38
        ```
    """
    X, y, outputs, batch, logs_per_epoch = _check_data(X, y, reg, method, batch, logs_per_epoch, outputs, model)
    key, epochs, hidden = _check_run(key, epochs, hidden, model)
    lr = _checks.as_hyper(lr, "lr", ndim=0, positive=True, dtype=X.dtype)
    lam = _checks.as_hyper(lam, "lam", ndim=0, dtype=X.dtype)
    progress = progress_bar.wanted(progress, key, X, y, lr, lam)
    with progress_bar.CompiledBar(epochs, f"training ({reg}/{method})", "epoch", progress, channel="training"):
        out = _train(key, X, y, lr, lam, model, reg=reg, method=method,
                     epochs=epochs, batch=batch, hidden=hidden, logs_per_epoch=logs_per_epoch, outputs=outputs,
                     progress=progress)
        if progress:
            jax.block_until_ready(out)      # the bar closes when the epochs are done, not at dispatch
    _checks.raise_if_diverged(out.model, lambda: f"training diverged (non-finite weights): lower lr (got "
                                                 f"{float(lr):.3g}) or, with method='sgd', λ (got {float(lam):.3g})")
    return out


def _check_run(key, epochs, hidden, model):
    """(key, epochs, hidden) for :func:`train` and :func:`sweep`: an integer key is a seed, at least
    one epoch, and at least one hidden unit when the network is built here."""
    epochs = _checks.check_positive_int(epochs, "epochs")
    if model is None:
        hidden = _checks.check_positive_int(hidden, "hidden")
    return _checks.as_key(key), epochs, hidden


def _check_data(X, y, reg, method, batch, logs_per_epoch, outputs, model=None):
    """Validated (X, y, outputs, batch, logs_per_epoch) for :func:`train` and :func:`sweep`: X as a
    finite float matrix (integer pixels are converted, not scaled), y integer labels below the number
    of outputs (that of ``model`` when one is given, else ``outputs``, else max(y) + 1), and the counts
    as Python ints (the compiled training slices with them, so they must be static)."""
    _check_choice(reg, method)
    batch = _checks.check_positive_int(batch, "batch")
    logs_per_epoch = _checks.check_positive_int(logs_per_epoch, "logs_per_epoch")
    X = _checks.as_matrix(X, "X")
    if outputs is not None:
        outputs = _checks.check_positive_int(outputs, "outputs")
    if model is not None:
        model_outputs = _model_outputs(model, X)
        if outputs is not None and outputs != model_outputs:
            raise ValueError(f"outputs = {outputs} but model has {model_outputs} outputs")
        outputs = model_outputs
    y, outputs = _labels(y, X.shape[0], outputs)
    if X.shape[0] // batch < logs_per_epoch:
        raise ValueError(f"need at least {logs_per_epoch} minibatches of {batch} per epoch, got {X.shape[0]} examples")
    return X, y, outputs, batch, logs_per_epoch


@eqx.filter_jit
def _train(key, X, y, lr, lam, model, *, reg, method, epochs, batch, hidden, logs_per_epoch, outputs,
           progress=False):
    k_init, k_data = jax.random.split(key)
    if model is None:
        # in X's dtype (as lr and λ are): with x64 on, float32 data trained a float64 network
        model = ShallowNet(X.shape[1], hidden, outputs, key=k_init, dtype=X.dtype)
    params, static = eqx.partition(model, eqx.is_array)
    opt = optimizer(reg, method, lr, lam)
    state = opt.init(params)
    steps = X.shape[0] // batch
    per_log = steps // logs_per_epoch

    def sgd_step(carry, idx):
        params, state = carry
        m = eqx.combine(params, static)
        loss, g = jax.value_and_grad(lambda p: loss_fn(eqx.combine(p, static), X[idx], y[idx], reg, method, lam))(params)
        upd, state = opt.update(g, state, params)
        params = optax.apply_updates(params, upd)
        reg_loss = loss if method == "sgd" else loss + lam * penalty(m, reg)
        return (params, state), reg_loss

    def epoch(carry, ke):
        k, e = ke
        used = per_log * logs_per_epoch * batch
        perm = jax.random.permutation(k, X.shape[0])[:used].reshape(logs_per_epoch, per_log, batch)

        def chunk(carry, idxs):
            carry, losses = jax.lax.scan(sgd_step, carry, idxs)
            return carry, (losses[-1], nonzero_fraction(eqx.combine(carry[0], static)))

        carry, logs = jax.lax.scan(chunk, carry, perm)
        if progress:
            jax.debug.callback(functools.partial(progress_bar.CompiledBar.reach, channel="training"), e + 1)
        return carry, logs

    (params, _), (loss, nnz) = jax.lax.scan(epoch, (params, state),
                                            (jax.random.split(k_data, epochs), jnp.arange(epochs)))
    return TrainResult(eqx.combine(params, static), loss, nnz)


@full_precision
def sweep(key, X, y, *, reg: str, method: str, lrs, lams, seeds: int = 1, epochs: int = 20, batch: int = 100,
          hidden: int = 200, logs_per_epoch: int = 10, model: ShallowNet | None = None,
          outputs: int | None = None, progress: bool = False) -> TrainResult:
    """Train one network per (seed, lr, λ) in one ``vmap``ped, jitted call: ``lrs`` and ``lams`` are
    1-D arrays of equal length (one configuration each; use ``jnp.meshgrid`` for a grid); the other
    arguments as :func:`train`. Seed s trains from ``jax.random.split(key, seeds)[s]``, so even
    ``seeds=1`` differs from ``train(key, …)``: it equals ``train(jax.random.split(key, 1)[0], …)``.
    Returns a :class:`TrainResult` whose leaves carry leading axes (seeds, configurations)."""
    X, y, outputs, batch, logs_per_epoch = _check_data(X, y, reg, method, batch, logs_per_epoch, outputs, model)
    key, epochs, hidden = _check_run(key, epochs, hidden, model)
    lrs = jnp.atleast_1d(_checks.as_hyper(lrs, "lrs", positive=True, dtype=X.dtype))
    lams = jnp.atleast_1d(_checks.as_hyper(lams, "lams", dtype=X.dtype))
    if lrs.shape != lams.shape or lrs.ndim != 1:
        raise ValueError(f"lrs and lams must be 1-D of equal length, got {lrs.shape} and {lams.shape}")
    seeds = _checks.check_positive_int(seeds, "seeds")

    progress = progress_bar.wanted(progress, key, X, y, lrs, lams)

    def one(k, lr, lam):
        return _train(k, X, y, lr, lam, model, reg=reg, method=method, epochs=epochs,
                      batch=batch, hidden=hidden, logs_per_epoch=logs_per_epoch, outputs=outputs, progress=progress)

    with progress_bar.CompiledBar(epochs, f"training ({reg}/{method}, {seeds * lrs.shape[0]} networks)", "epoch",
                                  progress, channel="training"):
        out = jax.vmap(jax.vmap(one, in_axes=(None, 0, 0)), in_axes=(0, None, None))(
            jax.random.split(key, seeds), lrs, lams)
        if progress:
            jax.block_until_ready(out)
        return out


__all__ = ["METHODS", "REGULARIZERS", "ShallowNet", "TrainResult", "cross_entropy", "error_rate",
           "lipschitz_bounds", "loss_fn", "nonzero_fraction", "optimizer", "penalty", "pgd_attack",
           "prox_step", "robust_error", "sweep", "train"]
