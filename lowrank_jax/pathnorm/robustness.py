"""Clean and adversarial error of a trained ``ShallowNet``: the error
rate, the PGD-ℓ∞ attack (Madry et al. 2018) as in the paper's evaluation, and the error on its
examples."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from lowrank_jax import _checks
from lowrank_jax.pathnorm.network import EVAL, ShallowNet, _nan_unless_finite
from lowrank_jax.precision import full_precision


def _bounds(bounds, name: str, args=None):
    """``bounds`` as (lo, hi) floats with lo < hi, or (None, None) for None (no clipping)."""
    if bounds is None:
        return None, None
    arr = None if isinstance(bounds, (str, bytes)) else np.asarray(bounds)
    if arr is None or arr.shape != (2,) or arr.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be None or a pair (lo, hi) of numbers, got {bounds!r}")
    lo, hi = float(arr[0]), float(arr[1])
    if not lo < hi:
        raise ValueError(f"{name} must satisfy lo < hi, got {bounds!r}")
    return lo, hi


def _inside(args) -> jax.Array:
    """Whether every entry of X lies in ``bounds`` (always, for no bounds)."""
    lo, hi = args["bounds"]
    if lo is None:
        return jnp.asarray(True)
    X = args["X"]
    return (jnp.min(X) >= lo) & (jnp.max(X) <= hi)


def _outside_message(args) -> str:
    X = np.asarray(args["X"])
    lo, hi = args["bounds"]
    return (
        f"X has values in [{float(X.min()):.3g}, {float(X.max()):.3g}], "
        f"outside bounds = ({lo:g}, {hi:g}), the input range the attack clips to: "
        "pass the range of your inputs as bounds=(lo, hi), "
        "or bounds=None for unbounded inputs (standardised features)"
    )


# What the attack takes besides the evaluation's (model, X, y). A concrete X outside ``bounds`` is
# refused: the clip would move it even at ε = 0, so the "attack" would not start from X. Under
# jit/vmap over X it is clipped unchecked.
_ATTACK = {
    "eps": _checks.Hyper(ndim=0, dtype_of="X"),
    "key": _checks.Key(),
    "steps": _checks.Count(minimum=0),
    "bounds": _checks.Convert(_bounds),
}
_INSIDE = _checks.Rule(_inside, _checks.Message(_outside_message), uses=("X",))


@full_precision
@_checks.validate(
    _INSIDE,
    **EVAL,
    **_ATTACK,
    lr=_checks.Hyper(ndim=0, dtype_of="X", optional=True),
)
def pgd_attack(
    model: ShallowNet, X, y, eps, *, key=None, steps: int = 40, lr=None, bounds=(0.0, 1.0)
):
    """Adversarial examples of ``model`` by untargeted PGD in the ℓ∞ ball of radius ε.

        x⁰ = clip(x + u),  u ~ Uniform[−ε, ε]^inputs,
        x^{t+1} = clip(Π_{‖z − x‖∞ ≤ ε}(x^t + a · sign ∇_x CE(model(x^t), y))),

    with a = ``lr`` and clip the clipping to the input range ``bounds`` (Madry et al. 2018, as in
    the evaluation of Latorre, Rolland, Hallak, Cevher 2020).

    Args:
      model: a ``ShallowNet``.
      X: (samples, inputs) examples, one per row, inside ``bounds`` (checked when X is concrete;
        under ``jit``/``vmap`` over X it is clipped unchecked).
      y: (samples,) integer labels below the model's number of outputs.
      eps: the radius ε ≥ 0 (scalar; may be traced).
      key: ``jax.random`` key or integer seed of the random start (default key(0)).
      steps: the number of ascent steps (≥ 0; default 40).
      lr: the ascent step a ≥ 0 (scalar); default None, ε/20.
      bounds: the input range (lo, hi) to clip to, lo < hi (default (0, 1), pixels); None: no
        clipping (unbounded inputs, standardised features).

    Returns:
      The (samples, inputs) adversarial examples, in X's dtype (half precision is computed and
      returned in float32).
    """
    return _pgd(model, X, y, eps, steps, lr, key, bounds)


def _pgd(model, X, y, eps, steps, lr, key, bounds):
    a = eps / 20 if lr is None else lr
    grad_x = jax.grad(
        lambda Z: jnp.sum(optax.softmax_cross_entropy_with_integer_labels(model(Z), y))
    )
    clip = (lambda Z: Z) if bounds[0] is None else (lambda Z: jnp.clip(Z, *bounds))
    Z = clip(X + jax.random.uniform(key, X.shape, X.dtype, -eps, eps))

    def step(_, Z):
        Z = Z + a * jnp.sign(grad_x(Z))
        return clip(jnp.clip(Z, X - eps, X + eps))

    return jax.lax.fori_loop(0, steps, step, Z)


@full_precision
@_checks.validate(**EVAL)
def error_rate(model: ShallowNet, X, y) -> jax.Array:
    """The share of examples that ``model`` misclassifies.

        err = (1/N) #{n : argmax_k h(x_n)_k ≠ y_n}

    Args:
      model: a ``ShallowNet``.
      X: (samples, inputs) examples, one per row.
      y: (samples,) integer labels below the model's number of outputs.

    Returns:
      The scalar error rate in [0, 1]; NaN for a model with a non-finite parameter (a diverged
      run), whose NaN logits would otherwise all predict class 0.
    """
    return _error_rate(model, X, y)


def _error_rate(model, X, y):
    return _nan_unless_finite(model, jnp.mean(jnp.argmax(model(X), axis=-1) != y))


@full_precision
@_checks.validate(_INSIDE, **EVAL, **_ATTACK)
def robust_error(
    model: ShallowNet, X, y, eps, *, key=None, steps: int = 40, bounds=(0.0, 1.0)
) -> jax.Array:
    """The error rate of ``model`` on its PGD-ℓ∞ adversarial examples.

        err_ε = error_rate(model, pgd_attack(model, X, y, ε), y)   (ε = 0: clean)

    with the attack's default step ε/20.

    Args:
      model, X, y, eps, key, steps, bounds: as in ``pgd_attack`` (``key`` default key(0),
        ``steps`` default 40, ``bounds`` default (0, 1)).

    Returns:
      The scalar robust error in [0, 1]; NaN for a model with a non-finite parameter, as
      ``error_rate``, or for a traced invalid ε.
    """
    err = _error_rate(model, _pgd(model, X, y, eps, steps, None, key, bounds), y)
    # a traced invalid ε is NaN here (_checks.Hyper): the error rate of NaN examples would read as
    # a number
    return jnp.where(_checks.any_nan(eps), jnp.nan, err)
