"""The network, its losses and regularisers: ``ShallowNet``, the cross-entropy, the penalty g,
its prox, the Lipschitz bounds, and the share of non-zero weights.

    h(x) = W_out · elu(W_in x + b_in) + b_out,
    W_in (hidden, inputs),   W_out (outputs, hidden).
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

        h(x) = W_out · elu(W_in x + b_in) + b_out,
        W_in (hidden, inputs),   W_out (outputs, hidden)

    (Latorre, Rolland, Hallak, Cevher, ICML 2020). Both layers are ``equinox.nn.Linear``,
    initialised as PyTorch's ``nn.Linear`` (uniform ±1/√fan_in). The constructor
    ``ShallowNet(inputs=784, hidden=200, outputs=10, *, key=None, dtype=None)`` takes the sizes
    (``hidden``: the width), ``key`` (a ``jax.random`` key or an integer seed of the
    initialisation; default key(0)) and the weights' ``dtype`` (default JAX's default float,
    float64 with x64 on; ``train`` builds its network in the data's
    dtype). Called on X (samples, inputs) it returns the logits (samples, outputs); on one example
    (inputs,), (outputs,).

    Attributes:
      hidden: the hidden layer, weight W_in (hidden, inputs) and bias b_in (hidden,).
      out: the output layer, weight W_out (outputs, hidden) and bias b_out (outputs,).
    """

    hidden: eqx.nn.Linear
    out: eqx.nn.Linear

    @_checks.validate(
        inputs=_checks.Count(), hidden=_checks.Count(), outputs=_checks.Count(), key=_checks.Key()
    )
    def __init__(
        self, inputs: int = 784, hidden: int = 200, outputs: int = 10, *, key=None, dtype=None
    ):
        k1, k2 = jax.random.split(key)
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


# Argument declarations of the family (``lowrank_jax._checks.validate``).
REG = _checks.Choice(*REGULARIZERS)
METHOD = _checks.Choice(*METHODS)


def shallow_net(model, name: str, args=None) -> ShallowNet:
    """``model`` itself when it is a ``ShallowNet``, else a ``ValueError`` naming ``name``.

    Args:
      model: the value to check.
      name: the argument's name, for the message.
      args: the arguments of a declared function (not used; the signature of
        ``_checks.Convert``).

    Returns:
      ``model``.
    """
    if not isinstance(model, ShallowNet):
        raise ValueError(f"{name} must be a ShallowNet, got {type(model).__name__}")
    return model


MODEL = _checks.Convert(shallow_net)


def check_inputs(model: ShallowNet, X) -> None:
    """Refuse an X whose columns are not the inputs of ``model`` (examples are rows).

    Args:
      model: the ``ShallowNet``.
      X: (samples, inputs) examples, one per row.

    Returns:
      None; raises ``ValueError`` when X's columns are not ``model``'s inputs.
    """
    inputs = model.hidden.weight.shape[-1]
    if X.shape[1] != inputs:
        raise ValueError(
            f"model takes {inputs} inputs but X has {X.shape[1]} columns (examples are rows)"
        )


def inputs_of(X, name: str, args) -> jax.Array:
    """X (``lowrank_jax._checks.as_matrix``) with the columns of the argument ``model``, which
    is declared before it.

    Args:
      X: (samples, inputs) examples, one per row.
      name: the argument's name, for the messages.
      args: the arguments of the declared function (``args["model"]`` the network).

    Returns:
      X as a checked float matrix.
    """
    X = _checks.as_matrix(X, name)
    check_inputs(args["model"], X)
    return X


def outputs_of(model: ShallowNet) -> int:
    """The number of outputs of ``model``.

    Args:
      model: the ``ShallowNet``.

    Returns:
      Its number of outputs (classes), an int.
    """
    return model.out.weight.shape[-2]


def _concrete_labels(y, n: int, outputs):
    return _checks.class_labels(y, n, outputs, what="X has {n} rows (examples are rows)")


def labels(y, n: int, outputs):
    """(y as int32 labels, outputs): y (n,) below ``outputs`` (default max(y) + 1). Labels with
    values are checked by ``lowrank_jax._checks.class_labels``; traced labels (inside
    ``jit``/``vmap``) for their shape and dtype only, and they need ``outputs``.

    Args:
      y: (n,) integer labels.
      n: the number of examples.
      outputs: the number of classes, or None (max(y) + 1; needs labels with values).

    Returns:
      ``(labels, outputs)``: y as int32 labels and the number of classes.
    """
    checked = _checks.when_concrete(lambda v: _concrete_labels(v, n, outputs), y)
    if checked is not None:
        count = int(checked.max()) + 1 if outputs is None else outputs
        # converted eagerly: concrete also where the call is traced (labels closed over in a jit)
        return _checks.when_concrete(lambda v: jnp.asarray(v, jnp.int32), checked), count
    if outputs is None:
        raise ValueError("pass outputs= (the number of classes) when y is traced")
    if y.shape != (n,) or not jnp.issubdtype(y.dtype, jnp.integer):
        raise ValueError(f"y must be ({n},) integer labels, got {y.shape} {y.dtype}")
    return y, outputs


def eval_labels(y, name: str, args) -> jax.Array:
    """y as int32 labels, one per row of the argument ``X``, below the outputs of ``model``.

    Args:
      y: (samples,) integer labels.
      name: the argument's name (the messages name y).
      args: the arguments of the declared function (``X`` and ``model`` declared before y).

    Returns:
      y as int32 labels.
    """
    return labels(y, args["X"].shape[0], outputs_of(args["model"]))[0]


# What an evaluation of a network on labelled examples takes: a ShallowNet, examples X (rows) of its
# inputs, and labels y below its outputs.
EVAL = {
    "model": MODEL,
    "X": _checks.Convert(inputs_of),
    "y": _checks.Convert(eval_labels),
}


@_checks.validate(model=MODEL)
def cross_entropy(model: ShallowNet, X, y) -> jax.Array:
    """The mean softmax cross-entropy of ``model`` on labelled examples.

        CE = −(1/N) Σ_n log softmax(h(x_n))_{y_n}

    Args:
      model: a ``ShallowNet``.
      X: (samples, inputs) examples, one per row.
      y: (samples,) integer labels in [0, outputs).

    Returns:
      The scalar CE.
    """
    return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(model(X), y))


@_checks.validate(model=MODEL, reg=REG)
def penalty(model: ShallowNet, reg: str) -> jax.Array:
    """The regulariser g(W_in, W_out) of ``model``'s weights (biases are not regularised).

        "path":  g = Σ_i ‖W_out[:, i]‖₁ ‖W_in[i, :]‖₁            (the 1-path-norm)
        "l1":    g = ‖vec W_in‖₁ + ‖vec W_out‖₁
        "layer": g = ‖W_in‖∞ + ‖W_out‖∞                     (max row ℓ1 norms)

    "layer" is the penalty that method "sgd" differentiates (as the authors' code does); method
    "prox" enforces the constraint ‖W‖∞ ≤ 1/λ instead (``prox_step``).

    Args:
      model: a ``ShallowNet``.
      reg: ``"path"``, ``"l1"`` or ``"layer"`` (``REGULARIZERS``).

    Returns:
      The scalar g.
    """
    W_in, W_out = model.weights
    if reg == "path":
        return path_norm(W_in, W_out)
    if reg == "l1":
        return jnp.sum(jnp.abs(W_in)) + jnp.sum(jnp.abs(W_out))
    return jnp.max(jnp.sum(jnp.abs(W_in), axis=1)) + jnp.max(jnp.sum(jnp.abs(W_out), axis=1))


@_checks.validate(model=MODEL, reg=REG, method=METHOD)
def loss_fn(model, X, y, reg: str, method: str, lam):
    """The loss the optimizer differentiates: CE + λ g for ``"sgd"``, CE alone for ``"prox"``.

        "sgd":  F = CE(model; X, y) + λ g(W_in, W_out)
        "prox": F = CE(model; X, y)          (g enters through the prox, ``prox_step``)

    with CE the mean cross-entropy (``cross_entropy``) and g the regulariser
    (``penalty``).

    Args:
      model: a ``ShallowNet``.
      X: (samples, inputs) examples, one per row.
      y: (samples,) integer labels in [0, outputs).
      reg: ``"path"``, ``"l1"`` or ``"layer"`` (``REGULARIZERS``).
      method: ``"sgd"`` or ``"prox"`` (``METHODS``).
      lam: the regularisation weight λ ≥ 0 (scalar; may be traced).

    Returns:
      The scalar F.
    """
    ce = cross_entropy(model, X, y)
    return ce + lam * penalty(model, reg) if method == "sgd" else ce


@_checks.validate(model=MODEL)
def lipschitz_bounds(model: ShallowNet) -> dict:
    """Two upper bounds on the ℓ∞ → ℓ1 Lipschitz constant of ``model``'s logits.

        Lip_{∞→1}(h) ≤ P(W_in, W_out) ≤ ‖vec W_out‖₁ ‖W_in‖∞

    (Latorre, Rolland, Hallak, Cevher 2020, Theorem 1; ELU is 1-Lipschitz), with P the 1-path-norm
    and ‖W_in‖∞ the largest row ℓ1 norm.

    Args:
      model: a ``ShallowNet``.

    Returns:
      A dict of scalars: ``"path"``, P(W_in, W_out), and ``"product"``, ‖vec W_out‖₁ ‖W_in‖∞.
    """
    W_in, W_out = model.weights
    return {
        "path": path_norm(W_in, W_out),
        "product": jnp.sum(jnp.abs(W_out)) * jnp.max(jnp.sum(jnp.abs(W_in), axis=1)),
    }


def _strength(strength, name: str, args) -> jax.Array:
    """s ≥ 0 in the weights' dtype; +inf only where the prox of ``reg`` allows it (not "path")."""
    dtype = args["model"].hidden.weight.dtype
    return _checks.as_hyper(strength, name, allow_inf=args["reg"] != "path", dtype=dtype)


@_checks.validate(model=MODEL, reg=REG, strength=_checks.Convert(_strength))
def prox_step(model: ShallowNet, strength, reg: str) -> ShallowNet:
    """The prox of the regulariser (for ``"layer"``, the projection) applied to the weights.

        "path":  (W_in, W_out) ← prox of s·P at (W_in, W_out)   (``path_norm_prox``)
        "l1":    W ← sign(W) max(|W| − s, 0)  for W_in and W_out
        "layer": every row of W_in and W_out ← its projection on {u : ‖u‖₁ ≤ 1/s}

    with s = ``strength``; biases are untouched. Prox-SGD passes s = lr·λ for ``"path"`` and
    ``"l1"`` and s = λ for ``"layer"`` (radius 1/λ, the paper's constraint;
    ``optimizer``).

    Args:
      model: a ``ShallowNet``.
      strength: s ≥ 0 (scalar; may be traced). +inf is allowed for ``"l1"`` and ``"layer"``
        (W = 0), not for ``"path"``; s = 0 returns the weights unchanged. A negative or NaN value
        is refused by name when concrete and makes the weights NaN when traced.
      reg: ``"path"``, ``"l1"`` or ``"layer"`` (``REGULARIZERS``).

    Returns:
      The ``ShallowNet`` with the new weights.
    """
    W_in, W_out = model.weights
    if reg == "path":
        W_in, W_out = path_norm_prox(W_in, W_out, strength)
    elif reg == "l1":
        W_in, W_out = prox.soft_threshold(W_in, strength), prox.soft_threshold(W_out, strength)
    else:  # "layer"
        radius = 1.0 / jnp.asarray(strength)  # λ = 0: an infinite ball, no constraint
        W_in, W_out = project_l1_ball_rows(W_in, radius), project_l1_ball_rows(W_out, radius)
    return _with_weights(model, W_in, W_out)


@_checks.validate(model=MODEL)
def nonzero_fraction(model: ShallowNet) -> jax.Array:
    """The share of the weights that are non-zero, a dead hidden unit counted as all zero.

        alive_i = [W_in[i, :] ≠ 0 and W_out[:, i] ≠ 0]   (a non-zero weight in and out),
        nnz = Σ_i alive_i (#{j : W_in[i, j] ≠ 0} + #{k : W_out[k, i] ≠ 0})
              / (|W_in| + |W_out|)

    with |W| the number of entries of W. A unit whose incoming or outgoing weights are all zero
    computes nothing (the paper's end-of-training rule, App. C). Biases are not counted.

    Args:
      model: a ``ShallowNet``.

    Returns:
      The scalar share in [0, 1]; NaN for a model with a non-finite parameter (a diverged run), as
      ``lowrank_jax.pathnorm.error_rate``.
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
