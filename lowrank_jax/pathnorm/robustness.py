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


def _check_attack(X, eps, steps, step_size, key, bounds):
    """(eps, steps, step_size, key, (lo, hi)) in X's dtype; a concrete X outside ``bounds`` is
    refused (the clip would move it even at ε = 0, so the "attack" would not start from X)."""
    eps = _checks.as_hyper(eps, "eps", ndim=0, dtype=X.dtype)
    steps = _checks.check_positive_int(steps, "steps", minimum=0)
    step_size = (
        None
        if step_size is None
        else _checks.as_hyper(step_size, "step_size", ndim=0, dtype=X.dtype)
    )
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
    return eps, steps, step_size, _checks.as_key(key), (lo, hi)


@full_precision
def pgd_attack(
    model: ShallowNet, X, y, eps, *, key, steps: int = 40, step_size=None, bounds=(0.0, 1.0)
):
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
    """Share of the rows of X (N, inputs) whose predicted class differs from y (N,). NaN for a
    model with a non-finite parameter (a diverged run), not the share of labels that are not 0."""
    X, y = _check_eval(model, X, y)
    return _error_rate(model, X, y)


def _error_rate(model, X, y):
    return _nan_unless_finite(model, jnp.mean(jnp.argmax(model(X), axis=-1) != y))


@full_precision
def robust_error(
    model: ShallowNet, X, y, eps, *, key, steps: int = 40, bounds=(0.0, 1.0)
) -> jax.Array:
    """Error on PGD-ℓ∞ examples (ε = 0 gives the clean error); arguments as :func:`pgd_attack`. NaN
    for a model with a non-finite parameter, as :func:`error_rate`."""
    X, y = _check_eval(model, X, y)
    eps, steps, step_size, key, bounds = _check_attack(X, eps, steps, None, key, bounds)
    err = _error_rate(model, _pgd(model, X, y, eps, steps, step_size, key, bounds), y)
    # a traced invalid ε is NaN here (as_hyper): the error rate of NaN examples would read as a
    # number
    return jnp.where(jnp.isnan(eps), jnp.nan, err)
