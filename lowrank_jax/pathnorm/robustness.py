"""Clean and adversarial error of a trained :class:`~lowrank_jax.pathnorm.ShallowNet`: the error
rate, the PGD-ℓ∞ attack (Madry et al. 2018) as in the paper's evaluation, and the error on its
examples."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax

from lowrank_jax import _checks
from lowrank_jax.pathnorm.network import ShallowNet, _labels, _model_outputs, _nan_unless_finite
from lowrank_jax.precision import full_precision


def _check_eval(model, X, y):
    """Validated (X, y) for evaluating ``model``: X (N, inputs) a finite float matrix (integers are
    converted), y (N,) integer labels below the model's number of outputs. Labels that are traced
    (inside ``jit``/``vmap``) are checked for shape and dtype only."""
    X = _checks.as_matrix(X, "X")
    outputs = _model_outputs(model, X)
    return X, _labels(y, X.shape[0], outputs)[0]


def _check_attack(X, eps, steps, lr, key, bounds):
    """(eps, steps, lr, key, (lo, hi)) in X's dtype; a concrete X outside ``bounds`` is refused (the
    clip would move it even at ε = 0, so the "attack" would not start from X)."""
    eps = _checks.as_hyper(eps, "eps", ndim=0, dtype=X.dtype)
    steps = _checks.check_positive_int(steps, "steps", minimum=0)
    lr = None if lr is None else _checks.as_hyper(lr, "lr", ndim=0, dtype=X.dtype)
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
                raise ValueError(
                    f"X has values in [{x_min:.3g}, {x_max:.3g}], "
                    f"outside bounds = ({lo:g}, {hi:g}), the input range the attack clips to: "
                    "pass the range of your inputs as bounds=(lo, hi), "
                    "or bounds=None for unbounded inputs (standardised features)"
                )
    return eps, steps, lr, _checks.as_key(key), (lo, hi)


@full_precision
def pgd_attack(
    model: ShallowNet, X, y, eps, *, key=None, steps: int = 40, lr=None, bounds=(0.0, 1.0)
):
    """Adversarial examples of ``model`` by untargeted PGD in the ℓ∞ ball of radius ε.

        x⁰ = clip(x + u),  u ~ Uniform[−ε, ε]^inputs,
        x^{t+1} = clip(Π_{‖z − x‖_∞ ≤ ε}(x^t + a · sign ∇_x CE(model(x^t), y))),

    with a = ``lr`` and clip the clipping to the input range ``bounds`` (Madry et al. 2018, as in
    the evaluation of Latorre, Rolland, Hallak, Cevher 2020).

    Args:
      model: a :class:`~lowrank_jax.pathnorm.ShallowNet`.
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
    X, y = _check_eval(model, X, y)
    return _pgd(model, X, y, *_check_attack(X, eps, steps, lr, key, bounds))


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
def error_rate(model: ShallowNet, X, y) -> jax.Array:
    """The share of examples that ``model`` misclassifies.

        err = (1/N) #{n : argmax_k h(x_n)_k ≠ y_n}

    Args:
      model: a :class:`~lowrank_jax.pathnorm.ShallowNet`.
      X: (samples, inputs) examples, one per row.
      y: (samples,) integer labels below the model's number of outputs.

    Returns:
      The scalar error rate in [0, 1]; NaN for a model with a non-finite parameter (a diverged
      run), whose NaN logits would otherwise all predict class 0.
    """
    X, y = _check_eval(model, X, y)
    return _error_rate(model, X, y)


def _error_rate(model, X, y):
    return _nan_unless_finite(model, jnp.mean(jnp.argmax(model(X), axis=-1) != y))


@full_precision
def robust_error(
    model: ShallowNet, X, y, eps, *, key=None, steps: int = 40, bounds=(0.0, 1.0)
) -> jax.Array:
    """The error rate of ``model`` on its PGD-ℓ∞ adversarial examples.

        err_ε = error_rate(model, pgd_attack(model, X, y, ε), y)      (ε = 0: the clean error)

    with the attack's default step ε/20.

    Args:
      model, X, y, eps, key, steps, bounds: as in :func:`pgd_attack` (``key`` default key(0),
        ``steps`` default 40, ``bounds`` default (0, 1)).

    Returns:
      The scalar robust error in [0, 1]; NaN for a model with a non-finite parameter, as
      :func:`error_rate`, or for a traced invalid ε.
    """
    X, y = _check_eval(model, X, y)
    eps, steps, lr, key, bounds = _check_attack(X, eps, steps, None, key, bounds)
    err = _error_rate(model, _pgd(model, X, y, eps, steps, lr, key, bounds), y)
    # a traced invalid ε is NaN here (as_hyper): the error rate of NaN examples would read as a
    # number
    return jnp.where(jnp.isnan(eps), jnp.nan, err)
