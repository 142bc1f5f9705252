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
        return path_norm(W_in, W_out)
    if reg == "l1":
        return jnp.sum(jnp.abs(W_in)) + jnp.sum(jnp.abs(W_out))
    if reg == "layer":
        return jnp.max(jnp.sum(jnp.abs(W_in), axis=1)) + jnp.max(jnp.sum(jnp.abs(W_out), axis=1))
    raise ValueError(f"reg must be one of {REGULARIZERS}, got {reg!r}")


def loss_fn(model, X, y, reg: str, method: str, lam):
    """What the optimizer differentiates: the mean cross-entropy CE of ``model`` on X (N, inputs),
    y (N,), plus λ g (:func:`penalty`) for ``method="sgd"`` (Prox-SGD applies g through its
    prox)."""
    ce = cross_entropy(model, X, y)
    return ce + lam * penalty(model, reg) if method == "sgd" else ce


def lipschitz_bounds(model: ShallowNet) -> dict:
    """Upper bounds on the ℓ∞→ℓ1 Lipschitz constant (Theorem 1):
    path ≤ product ‖vec W_out‖₁ ‖W_in‖_∞."""
    W_in, W_out = model.weights
    return {
        "path": path_norm(W_in, W_out),
        "product": jnp.sum(jnp.abs(W_out)) * jnp.max(jnp.sum(jnp.abs(W_in), axis=1)),
    }


def prox_step(model: ShallowNet, strength, reg: str) -> ShallowNet:
    """The prox (or projection) of the regulariser on the weights; biases untouched.

    "path": exact prox of strength·P; "l1": soft thresholding at strength; "layer": projection of
    every row of both weight matrices onto the ℓ1 ball of radius 1/strength (pass strength = λ).
    ``strength`` ≥ 0 (+inf: "l1" and "layer" give W = 0; "path" refuses it); a negative or NaN value
    is refused by name when concrete and makes the weights NaN when traced."""
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
    """Share of weights that are non-zero, counting a hidden unit whose outgoing or incoming weights
    are all zero as entirely zero (it computes nothing; the paper's end-of-training rule, App. C).
    Biases are not counted. NaN for a model with a non-finite parameter (see
    :func:`lowrank_jax.pathnorm.error_rate`)."""
    W_in, W_out = model.weights
    alive = jnp.any(W_in != 0, axis=1) & jnp.any(W_out != 0, axis=0)  # (hidden,)
    nnz = jnp.sum((W_in != 0) & alive[:, None]) + jnp.sum((W_out != 0) & alive[None, :])
    return _nan_unless_finite(model, nnz / (W_in.size + W_out.size))


def _nan_unless_finite(model, value):
    """``value``, or NaN where a parameter of ``model`` is not finite. A diverged network (a sweep's
    point with too large a step, run with ``throw=False``) has NaN logits, whose argmax is class 0,
    and NaN weights, which count as non-zero: its error rate and non-zero share read as plausible
    numbers (0.675 and 1.0 on one test set) unless they are made NaN."""
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
