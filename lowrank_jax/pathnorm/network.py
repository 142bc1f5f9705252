"""The network, its losses and regularisers: :class:`ShallowNet`, the cross-entropy, the penalty g,
its prox, the Lipschitz bounds, and the share of non-zero weights.

    h(x) = W_out · elu(W_in x + b_in) + b_out,   W_in (hidden, inputs), W_out (outputs, hidden).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from lowrank_jax import _checks, prox
from lowrank_jax.pathnorm.prox import path_norm, path_norm_prox, project_l1_ball_rows

REGULARIZERS = ("path", "l1", "layer")
METHODS = ("sgd", "prox")


class ShallowNet(eqx.Module):
    """A network with one hidden ELU layer, the model of the 1-path-norm family.

        h(x) = W_out · elu(W_in x + b_in) + b_out,   W_in (hidden, inputs), W_out (outputs, hidden)

    (Latorre, Rolland, Hallak, Cevher, ICML 2020). Both layers are ``equinox.nn.Linear``,
    initialised as PyTorch's ``nn.Linear`` (uniform ±1/√fan_in). The constructor
    ``ShallowNet(inputs=784, hidden=200, outputs=10, *, key=None, dtype=None)`` takes the sizes
    (``hidden``: the width), ``key`` (a ``jax.random`` key or an integer seed of the
    initialisation; default key(0)) and the weights' ``dtype`` (default JAX's default float,
    float64 with x64 on; :func:`~lowrank_jax.pathnorm.train` builds its network in the data's
    dtype). Called on X (samples, inputs) it returns the logits (samples, outputs); on one example
    (inputs,), (outputs,).

    Attributes:
      hidden: the hidden layer, weight W_in (hidden, inputs) and bias b_in (hidden,).
      out: the output layer, weight W_out (outputs, hidden) and bias b_out (outputs,).
    """

    hidden: eqx.nn.Linear
    out: eqx.nn.Linear

    def __init__(
        self, inputs: int = 784, hidden: int = 200, outputs: int = 10, *, key=None, dtype=None
    ):
        k1, k2 = jax.random.split(_checks.as_key(key))
        self.hidden = eqx.nn.Linear(inputs, hidden, key=k1, dtype=dtype)
        self.out = eqx.nn.Linear(hidden, outputs, key=k2, dtype=dtype)

    def __call__(self, X):
        """The logits W_out · elu(W_in x + b_in) + b_out of every row x of X.

        Args:
          X: (samples, inputs) batch, or one example (inputs,).

        Returns:
          (samples, outputs) logits, or (outputs,) for one example.
        """
        H = jax.nn.elu(X @ self.hidden.weight.T + self.hidden.bias)
        return H @ self.out.weight.T + self.out.bias

    @property
    def weights(self):
        """(W_in (hidden, inputs), W_out (outputs, hidden)), the two weight matrices."""
        return self.hidden.weight, self.out.weight


def _with_weights(model: ShallowNet, W_in, W_out) -> ShallowNet:
    return eqx.tree_at(lambda m: (m.hidden.weight, m.out.weight), model, (W_in, W_out))


def cross_entropy(model: ShallowNet, X, y) -> jax.Array:
    """The mean softmax cross-entropy of ``model`` on labelled examples.

        CE = −(1/N) Σ_n log softmax(h(x_n))_{y_n}

    Args:
      model: a :class:`ShallowNet`.
      X: (samples, inputs) examples, one per row.
      y: (samples,) integer labels in [0, outputs).

    Returns:
      The scalar CE.
    """
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(model(X), y))


def penalty(model: ShallowNet, reg: str) -> jax.Array:
    """The regulariser g(W_in, W_out) of ``model``'s weights (biases are not regularised).

        "path":  g = Σ_i ‖W_out[:, i]‖₁ ‖W_in[i, :]‖₁            (the 1-path-norm)
        "l1":    g = ‖vec W_in‖₁ + ‖vec W_out‖₁
        "layer": g = ‖W_in‖_∞ + ‖W_out‖_∞                     (max row ℓ1 norms)

    "layer" is the penalty that method "sgd" differentiates (as the authors' code does); method
    "prox" enforces the constraint ‖W‖_∞ ≤ 1/λ instead (:func:`prox_step`).

    Args:
      model: a :class:`ShallowNet`.
      reg: ``"path"``, ``"l1"`` or ``"layer"`` (:data:`REGULARIZERS`).

    Returns:
      The scalar g.
    """
    W_in, W_out = model.weights
    if reg == "path":
        return path_norm(W_in, W_out)
    if reg == "l1":
        return jnp.sum(jnp.abs(W_in)) + jnp.sum(jnp.abs(W_out))
    if reg == "layer":
        return jnp.max(jnp.sum(jnp.abs(W_in), axis=1)) + jnp.max(jnp.sum(jnp.abs(W_out), axis=1))
    raise ValueError(f"reg must be one of {REGULARIZERS}, got {reg!r}")


def loss_fn(model, X, y, reg: str, method: str, lam):
    """The loss the optimizer differentiates: CE + λ g for ``"sgd"``, CE alone for ``"prox"``.

        "sgd":  F = CE(model; X, y) + λ g(W_in, W_out)
        "prox": F = CE(model; X, y)          (g enters through the prox, :func:`prox_step`)

    with CE the mean cross-entropy (:func:`cross_entropy`) and g the regulariser
    (:func:`penalty`).

    Args:
      model: a :class:`ShallowNet`.
      X: (samples, inputs) examples, one per row.
      y: (samples,) integer labels in [0, outputs).
      reg: ``"path"``, ``"l1"`` or ``"layer"`` (:data:`REGULARIZERS`).
      method: ``"sgd"`` or ``"prox"`` (:data:`METHODS`).
      lam: the regularisation weight λ ≥ 0 (scalar; may be traced).

    Returns:
      The scalar F.
    """
    ce = cross_entropy(model, X, y)
    return ce + lam * penalty(model, reg) if method == "sgd" else ce


def lipschitz_bounds(model: ShallowNet) -> dict:
    """Two upper bounds on the ℓ∞ → ℓ1 Lipschitz constant of ``model``'s logits.

        Lip_{∞→1}(h) ≤ P(W_in, W_out) ≤ ‖vec W_out‖₁ ‖W_in‖_∞

    (Latorre, Rolland, Hallak, Cevher 2020, Theorem 1; ELU is 1-Lipschitz), with P the 1-path-norm
    and ‖W_in‖_∞ the largest row ℓ1 norm.

    Args:
      model: a :class:`ShallowNet`.

    Returns:
      A dict of scalars: ``"path"``, P(W_in, W_out), and ``"product"``, ‖vec W_out‖₁ ‖W_in‖_∞.
    """
    W_in, W_out = model.weights
    return {
        "path": path_norm(W_in, W_out),
        "product": jnp.sum(jnp.abs(W_out)) * jnp.max(jnp.sum(jnp.abs(W_in), axis=1)),
    }


def prox_step(model: ShallowNet, strength, reg: str) -> ShallowNet:
    """The prox of the regulariser (for ``"layer"``, the projection) applied to the weights.

        "path":  (W_in, W_out) ← prox_{s·P}(W_in, W_out)              (:func:`path_norm_prox`)
        "l1":    W ← sign(W) max(|W| − s, 0)  for W_in and W_out
        "layer": every row of W_in and W_out ← its projection on {u : ‖u‖₁ ≤ 1/s}

    with s = ``strength``; biases are untouched. Prox-SGD passes s = lr·λ for ``"path"`` and
    ``"l1"`` and s = λ for ``"layer"`` (radius 1/λ, the paper's constraint;
    :func:`~lowrank_jax.pathnorm.optimizer`).

    Args:
      model: a :class:`ShallowNet`.
      strength: s ≥ 0 (scalar; may be traced). +inf is allowed for ``"l1"`` and ``"layer"``
        (W = 0), not for ``"path"``; s = 0 returns the weights unchanged. A negative or NaN value
        is refused by name when concrete and makes the weights NaN when traced.
      reg: ``"path"``, ``"l1"`` or ``"layer"`` (:data:`REGULARIZERS`).

    Returns:
      The :class:`ShallowNet` with the new weights.
    """
    W_in, W_out = model.weights
    strength = _checks.as_hyper(strength, "strength", allow_inf=reg != "path", dtype=W_in.dtype)
    if reg == "path":
        W_in, W_out = path_norm_prox(W_in, W_out, strength)
    elif reg == "l1":
        W_in, W_out = prox.soft_threshold(W_in, strength), prox.soft_threshold(W_out, strength)
    elif reg == "layer":
        radius = 1.0 / jnp.asarray(strength)  # λ = 0: an infinite ball, no constraint
        W_in, W_out = project_l1_ball_rows(W_in, radius), project_l1_ball_rows(W_out, radius)
    else:
        raise ValueError(f"reg must be one of {REGULARIZERS}, got {reg!r}")
    return _with_weights(model, W_in, W_out)


def _check_choice(reg, method):
    """Refuse a ``reg`` outside :data:`REGULARIZERS` or a ``method`` outside :data:`METHODS`."""
    if reg not in REGULARIZERS:
        raise ValueError(f"reg must be one of {REGULARIZERS}, got {reg!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")


def nonzero_fraction(model: ShallowNet) -> jax.Array:
    """The share of the weights that are non-zero, a dead hidden unit counted as all zero.

        alive_i = [W_in[i, :] ≠ 0 and W_out[:, i] ≠ 0]     (a non-zero weight in and out),
        nnz = Σ_i alive_i (#{j : W_in[i, j] ≠ 0} + #{k : W_out[k, i] ≠ 0}) / (|W_in| + |W_out|)

    with |W| the number of entries of W. A unit whose incoming or outgoing weights are all zero
    computes nothing (the paper's end-of-training rule, App. C). Biases are not counted.

    Args:
      model: a :class:`ShallowNet`.

    Returns:
      The scalar share in [0, 1]; NaN for a model with a non-finite parameter (a diverged run), as
      :func:`lowrank_jax.pathnorm.error_rate`.
    """
    W_in, W_out = model.weights
    alive = jnp.any(W_in != 0, axis=1) & jnp.any(W_out != 0, axis=0)  # (hidden,)
    nnz = jnp.sum((W_in != 0) & alive[:, None]) + jnp.sum((W_out != 0) & alive[None, :])
    return _nan_unless_finite(model, nnz / (W_in.size + W_out.size))


def _nan_unless_finite(model, value):
    """``value``, or NaN where a parameter of ``model`` is not finite. A diverged network (a sweep's
    point with too large a step, run with ``throw=False``) has NaN logits, whose argmax is class 0,
    and NaN weights, which count as non-zero: its error rate and non-zero share would read as
    plausible numbers unless they are made NaN."""
    finite = _checks._all_finite(jax.tree.leaves(eqx.filter(model, eqx.is_inexact_array)))
    return jnp.where(finite, value, jnp.nan)


def _model_outputs(model, X) -> int:
    """The number of outputs of ``model``, after checking it is a ShallowNet that takes X's
    columns."""
    if not isinstance(model, ShallowNet):
        raise ValueError(f"model must be a ShallowNet, got {type(model).__name__}")
    inputs = model.hidden.weight.shape[-1]
    if X.shape[1] != inputs:
        raise ValueError(
            f"model takes {inputs} inputs but X has {X.shape[1]} columns (examples are rows)"
        )
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
