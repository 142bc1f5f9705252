"""Argument declarations shared by the covariance solvers and metrics
(``lowrank_jax._checks.validate``): Σ as a square, finite, symmetric matrix, and the metrics'
thresholds."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import _checks

SYMMETRY_RTOL = 1e-6  # max|Σ − Σᵀ| ≤ rtol · max|Σ|: float32 round-off of MMᵀ passes


def threshold(x, name: str, args=None, *, scalar: bool = True):
    """Check a threshold (``tol``, ``rtol``, a shrinkage level): a real number (or, with ``scalar``
    False, an array) ≥ 0, not NaN; +inf is allowed (everything counts as zero, or is shrunk to 0).
    A negative or NaN threshold gave wrong counts and fits without an error (a negative ``tol`` made
    r(L) = n and s(S) = 0). Raises ``ValueError``/``TypeError`` naming ``name``; only the shape and
    dtype of a tracer are checked. Returns ``x`` itself, so that a Python float keeps its weak type
    and its exact value (0.01 must not become float32's 0.0099999998)."""
    _checks.as_hyper(x, name, ndim=0 if scalar else None, allow_inf=True)
    return x


THRESHOLD = _checks.Convert(threshold)
# a scalar or an array broadcasting against the matrix it shrinks
THRESHOLDS = _checks.Convert(functools.partial(threshold, scalar=False))


def square_matrix(x, name: str, args=None) -> jax.Array:
    """``x`` as a 2-D floating JAX array (``lowrank_jax._checks.as_matrix``: finite, non-empty)
    with as many rows as columns, or a ``ValueError`` naming ``name``."""
    return _square(_checks.as_matrix(x, name), name)


def _square(x: jax.Array, name: str) -> jax.Array:
    if x.shape[0] != x.shape[1]:
        raise ValueError(f"{name} must be square, got shape {tuple(x.shape)}")
    return x


def sigma(x, name: str, args=None) -> jax.Array:
    """Σ as ``square_matrix`` makes it, after also refusing a scale whose sums of squares
    overflow or underflow its dtype (``lowrank_jax._checks.check_scale``). Its symmetry is the
    rule ``symmetric``."""
    x = _checks.as_matrix(x, name)
    _checks.check_scale(x, name)
    return _square(x, name)


@jax.jit
def _asymmetric(S, rtol) -> jax.Array:
    """max|Σ − Σᵀ| > rtol · max|Σ|, one compiled program per shape."""
    return jnp.max(jnp.abs(S - S.T)) > rtol * jnp.max(jnp.abs(S))


def symmetric(rtol: str | None = None, label: str | None = None) -> _checks.Rule:
    """The rule that Σ (the argument ``Sigma``) is symmetric to a relative tolerance:
    max_ij |Σ_ij − Σ_ji| ≤ rtol · max_ij |Σ_ij|, loose enough for float32 round-off of a product
    such as MMᵀ, tight enough to reject a non-symmetric input. ``rtol`` and ``label`` name the
    arguments holding the tolerance and the name used in the message; by default
    ``SYMMETRY_RTOL`` and "Sigma". Checked where Σ is concrete; a traced Σ is checked for its
    shape only (by its spec)."""
    tolerance = (lambda a: a[rtol]) if rtol else (lambda a: SYMMETRY_RTOL)
    name = (lambda a: a[label]) if label else (lambda a: "Sigma")

    def message(a) -> str:
        S = np.asarray(a["Sigma"])
        gap, scale, r = float(np.max(np.abs(S - S.T))), float(np.max(np.abs(S))), tolerance(a)
        return (
            f"{name(a)} must be symmetric: max|Σ − Σᵀ| = {gap:.3g} exceeds "
            f"{r:g} · max|Σ| = {r * scale:.3g}"
        )

    return _checks.Rule(
        lambda a: ~_asymmetric(a["Sigma"], tolerance(a)),
        _checks.Message(message),
        uses=("Sigma",) if rtol is None else ("Sigma", rtol),
    )


# Σ of every solver: a square, finite, symmetric matrix at a scale its dtype holds.
SIGMA = {"Sigma": _checks.Convert(sigma)}
SYMMETRIC = symmetric()
