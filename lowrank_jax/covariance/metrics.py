"""Metrics of a low-rank + sparse split Σ ≈ L + S of a symmetric matrix
(Baes et al. 2021, Sec. III).

The paper's threshold ϵ = 0.01 (called ``tol`` here; not the smoothing ε of the loss nor a gradient
tolerance) enters two of them:

    r(L)          = #{ i : λ_i(L) > ϵ }                      eigenvalues of the symmetric L
    s(S)          = #{ (i, j) : |S_ij| < ϵ } / n²             fraction of (numerically) zero entries
    rel.error(X)  = ‖X − X₀‖_F / ‖X₀‖_F                       against the planted L₀ or S₀

(rel.error is :func:`lowrank_jax.linalg.relative_error`, also exported here). On real data there
is no ground truth; the figure captions use instead (with the 1/√n shrinkage
shrink(S)_ij = sign(S_ij) max(|S_ij| − 1/√n, 0) that the paper applies to S before plotting, the
soft thresholding :func:`lowrank_jax.prox.soft_threshold` at t = 1/√n)

    ‖Σ − L‖_F / ‖L‖_F,   ‖Σ − (L + shrink(S))‖_F / ‖Σ‖_F,   s(shrink(S)).

FPCP's S is that shrinkage already (S = shrink(Σ − L, 1/√n), :func:`lowrank_jax.covariance.fpcp`),
and shrinking it again gives shrink(Σ − L, 2/√n): :func:`real_data_errors` and :func:`report`
recognise such an S and use it as it is (``S_shrunk``).

Differences from the authors' code (documented, not copied): their r(L) is
``np.linalg.matrix_rank(L, tol=0.01)``, which counts *singular* values > 0.01, i.e. |λ_i| > 0.01,
and differs from the paper's definition when L has negative eigenvalues (IALM, FPCP on
non-PSD input): ``rank_above(..., signed=False)`` gives the code's count. Their sparsity counts
|x| ≤ 0.01 as zero; the paper says "smaller than 0.01", which :func:`sparsity` follows (the two
differ only on entries exactly at ±0.01; ``strict=False`` gives the code's rule).

All functions are pure ``jax.numpy`` (``jit``/``vmap``-able) except :func:`report` and
:func:`check_symmetric`, which work at the Python boundary.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import _checks
from lowrank_jax.linalg import relative_error
from lowrank_jax.precision import full_precision
from lowrank_jax.prox import soft_threshold

EPSILON = 0.01  # the paper's metric threshold ϵ


def _threshold(x, name: str, *, scalar: bool = True):
    """Check a threshold (``tol``, ``rtol``, a shrinkage level): a real number (or, with ``scalar``
    False, an array) ≥ 0, not NaN; +inf is allowed (everything counts as zero, or is shrunk to 0).
    A negative or NaN threshold gave wrong counts and fits without an error (a negative ``tol`` made
    r(L) = n and s(S) = 0). Raises ``ValueError``/``TypeError`` naming ``name``; only the shape and
    dtype of a tracer are checked. Returns ``x`` itself, so that a Python float keeps its weak type
    and its exact value (0.01 must not become float32's 0.0099999998)."""
    _checks.as_hyper(x, name, ndim=0 if scalar else None, allow_inf=True)
    return x


def check_symmetric(Sigma, name: str = "Sigma", rtol: float = 1e-6) -> jax.Array:
    """Return ``Sigma`` as a floating JAX array after checking it is a square, finite, symmetric
    matrix.

    Symmetry is relative: max_ij |Σ_ij − Σ_ji| ≤ ``rtol`` · max_ij |Σ_ij| (``rtol`` = 1e-6 by
    default, loose enough for float32 round-off of a product such as MMᵀ, tight enough to reject a
    non-symmetric input). Only shape and dtype are checked when ``Sigma`` is a tracer.

    Raises:
      ValueError: not 2-D, empty, not square, non-finite entries, not symmetric, or at a scale whose
        sums of squares overflow or underflow (:func:`lowrank_jax._checks.check_scale`); ``rtol``
        negative or NaN.
    """
    rtol = _threshold(rtol, "rtol")
    Sigma = _checks.as_matrix(Sigma, name)
    _checks.check_scale(Sigma, name)
    if Sigma.shape[0] != Sigma.shape[1]:
        raise ValueError(f"{name} must be square, got shape {tuple(Sigma.shape)}")
    if _checks.is_concrete(Sigma):
        a = np.asarray(Sigma)
        gap = float(np.max(np.abs(a - a.T)))
        scale = float(np.max(np.abs(a)))
        if gap > rtol * scale:
            raise ValueError(
                f"{name} must be symmetric: max|Σ − Σᵀ| = {gap:.3g} exceeds "
                f"{rtol:g} · max|Σ| = {rtol * scale:.3g}"
            )
    return Sigma


def eigenvalues(L) -> jax.Array:
    """Eigenvalues (ascending) of the symmetric part (L + Lᵀ)/2 of a square ``L`` (``ValueError``
    naming ``L`` for another shape)."""
    L = _checks.as_matrix(L, "L")
    if L.shape[0] != L.shape[1]:
        raise ValueError(f"L must be square, got shape {tuple(L.shape)}")
    return jnp.linalg.eigvalsh(0.5 * (L + L.T))


def rank_above(L, tol=EPSILON, *, signed: bool = True) -> jax.Array:
    """r(L) = #{i : λ_i(L) > tol}, the paper's rank of a symmetric L (int32 scalar).

    λ_i are the eigenvalues of (L + Lᵀ)/2 (the outputs of the baselines are symmetric only up to
    round-off). With ``signed=False`` counts |λ_i| > tol instead, i.e. the singular values of the
    symmetric matrix: the authors' ``np.linalg.matrix_rank(L, tol=0.01)``. ``tol`` must be a scalar
    ≥ 0 (``ValueError`` for a negative or NaN one).
    """
    tol = _threshold(tol, "tol")
    signed = _checks.check_flag(signed, "signed")
    lam = eigenvalues(L)
    lam = lam if signed else jnp.abs(lam)
    return jnp.sum(lam > tol).astype(jnp.int32)


def sparsity(S, tol=EPSILON, *, strict: bool = True) -> jax.Array:
    """s(S) = #{(i, j) : |S_ij| < tol} / (number of entries): the fraction of zeros at threshold
    ``tol``.

    Strict ``<`` as in the paper's text ("smaller than 0.01"); ``strict=False`` uses the authors'
    code's |S_ij| ≤ tol. s = 0.95 means 95 % zeros. ``tol`` must be a scalar ≥ 0 (``ValueError`` for
    a negative or NaN one).
    """
    tol = _threshold(tol, "tol")
    mag = jnp.abs(jnp.asarray(S))
    zero = mag < tol if _checks.check_flag(strict, "strict") else mag <= tol
    return jnp.mean(zero.astype(mag.dtype))


def default_shrink(n: int) -> float:
    """The paper's shrinkage level 1/√n for an n × n matrix (n a positive integer)."""
    n = _checks.check_positive_int(n, "n")
    return 1.0 / float(np.sqrt(n))


class RealDataErrors(NamedTuple):
    """Figure-caption metrics of a split of a real Σ (no ground truth), with S̃ the shrunk sparse
    part (S̃ = shrink(S, t), or S itself when S is already shrunk: :func:`real_data_errors`):

    fit_L        = ‖Σ − L‖_F / ‖L‖_F           (Fig. 1: "‖Σ − L‖/‖L‖"; the denominator is ‖L‖)
    fit_shrunk   = ‖Σ − (L + S̃)‖_F / ‖Σ‖_F    ("relative error of L + S vs Σ", S shrunk)
    sparsity_shrunk = s(S̃) at threshold ϵ = 0.01
    """

    fit_L: jax.Array
    fit_shrunk: jax.Array
    sparsity_shrunk: jax.Array


def _check_shrunk_flag(S_shrunk):
    """``S_shrunk`` is None (recognise), True or False; anything else is a ``ValueError`` naming it
    (a truthy string or array must not pick a branch)."""
    if S_shrunk is None or isinstance(S_shrunk, (bool, np.bool_)):
        return None if S_shrunk is None else bool(S_shrunk)
    raise ValueError(
        f"S_shrunk must be None (recognise an S that is already shrink(Σ − L, t)), True or False, "
        f"got {S_shrunk!r}"
    )


def is_shrunk(Sigma, L, S, t) -> jax.Array:
    """Whether S already is the shrunk residual shrink(Σ − L, t), up to round-off (a bool scalar;
    traceable). True for FPCP's S at its default λ = t = 1/√n.

    The test is max_ij |S_ij − shrink(Σ − L, t)_ij| ≤ 8 ε (max|Σ| + max|L|), ε the machine epsilon
    of the least precise of Σ, L, S: forming Σ − L and subtracting t round by ε·max(|Σ|, |L|) per
    entry, also when the caller recomputed Σ, L or t in another precision than the method did. It
    only decides anything when shrinking matters: otherwise shrink(S, t) = S to that tolerance. An
    S = Σ − L (the network's, IALM's up to its tolerance) differs from shrink(Σ − L, t) by
    min(|Σ − L|, t) per entry, so it is taken as shrunk only when Σ − L is itself round-off, where S
    and shrink(S, t) agree. NaN anywhere gives False.
    """
    Sigma, L, S = (_checks.as_floating(a) for a in (Sigma, L, S))
    eps = max(float(jnp.finfo(a.dtype).eps) for a in (Sigma, L, S))
    t = _threshold(t, "t", scalar=False)
    gap = jnp.max(jnp.abs(S - soft_threshold(Sigma - L, t)))
    scale = jnp.max(jnp.abs(Sigma)) + jnp.max(jnp.abs(L))
    return gap <= 8 * eps * scale


@full_precision
def real_data_errors(Sigma, L, S, shrink_t=None, tol=EPSILON, *, S_shrunk=None) -> RealDataErrors:
    """:class:`RealDataErrors` of (L, S) for Σ; ``shrink_t`` (t) defaults to 1/√n.

    The shrunk part is S̃ = shrink(S, t), except for an S that is already shrunk:

        S_shrunk=None (default)  S̃ = S when S = shrink(Σ − L, t) to round-off (:func:`is_shrunk`;
                                 FPCP's S at its default λ = 1/√n), else shrink(S, t)
        S_shrunk=True            S̃ = S (e.g. FPCP run with another λ, whose S the caller takes as
                                 its sparse part as it is)
        S_shrunk=False           S̃ = shrink(S, t) always

    Shrinking FPCP's S again gave S̃ = shrink(Σ − L, 2t): on ``datasets.sp500_demo_matrix()`` with
    rank 3, fit_shrunk 0.216 and sparsity_shrunk 0.985 instead of its (L, S)'s 0.158 and 0.95.

    ``shrink_t`` and ``tol`` must be ≥ 0 (``ValueError`` naming them for a negative or NaN value: a
    negative shrinkage inflated S and gave a wrong fit_shrunk and sparsity_shrunk = 0). Σ is checked
    as :func:`report` checks it (:func:`check_symmetric`: square, finite, symmetric to
    1e-6 · max|Σ|; only its shape under ``jit``). Raises ``ValueError`` naming ``Sigma`` unless it
    is a square matrix, and ``L`` or ``S`` unless of its shape."""
    tol = _threshold(tol, "tol")
    if shrink_t is not None:
        shrink_t = _threshold(shrink_t, "shrink_t", scalar=False)
    S_shrunk = _check_shrunk_flag(S_shrunk)
    Sigma, L, S = jnp.asarray(Sigma), jnp.asarray(L), jnp.asarray(S)
    if Sigma.ndim != 2 or Sigma.shape[0] != Sigma.shape[1]:
        raise ValueError(f"Sigma must be a square matrix, got shape {tuple(Sigma.shape)}")
    Sigma = check_symmetric(Sigma)
    _checks.check_same_shape(Sigma, L, "Sigma", "L")
    _checks.check_same_shape(Sigma, S, "Sigma", "S")
    t = default_shrink(Sigma.shape[0]) if shrink_t is None else shrink_t
    S_t = soft_threshold(S, t)
    if S_shrunk is None:
        S_t = jnp.where(is_shrunk(Sigma, L, S, t), S, S_t)
    elif S_shrunk:
        S_t = S
    return RealDataErrors(
        fit_L=relative_error(Sigma, L),
        fit_shrunk=relative_error(L + S_t, Sigma),
        sparsity_shrunk=sparsity(S_t, tol),
    )


@_checks.host_function("covariance.report")
@full_precision
def report(
    Sigma, L, S, L0=None, S0=None, *, tol=EPSILON, shrink_t=None, S_shrunk=None
) -> dict[str, float]:
    """Table II metrics of a split (L, S) of Σ as a dict of Python numbers.

    Keys (always): ``r_L`` = r(L) (paper: #λ > ϵ), ``r_L_code`` (#|λ| > ϵ, the code's
    ``matrix_rank``), ``s_S`` = s(S) (strict < ϵ), ``min_eig_L`` (λ_min(L): < 0 means L is not PSD),
    ``residual`` = ‖Σ − L − S‖_F/‖Σ‖_F, the :class:`RealDataErrors` fields ``fit_L``,
    ``fit_shrunk``, ``sparsity_shrunk`` (shrinkage ``shrink_t``, default 1/√n), and ``S_shrunk``
    (bool): whether S was used as the shrunk part S̃ as it is instead of being shrunk again.
    With ground truth: ``rel_error_L`` = ‖L − L₀‖_F/‖L₀‖_F, ``rel_error_S`` = ‖S − S₀‖_F/‖S₀‖_F.
    ``tol`` = ϵ, an absolute threshold: the paper's 0.01 suits correlation matrices (entries ≤ 1);
    for a Σ at another scale pass ϵ at that scale (0.01 · max_i Σ_ii, say), or r(L) and s(S)
    count rounding as rank (or everything as zero).

    Works with any (L, S) pair: a ``Decomposition`` of :mod:`lowrank_jax.covariance.nn` (pass
    ``d.L, d.S``) or a baseline result (``r.L, r.S``). FPCP's S is already shrink(Σ − L, 1/√n); it
    is recognised and not shrunk twice (``S_shrunk`` as in :func:`real_data_errors`: None recognises
    it, True or False forces either reading). Every matrix must be finite and of Σ's (square) shape;
    ``tol`` a scalar ≥ 0 and ``shrink_t`` ≥ 0 (``ValueError`` naming them otherwise, NaN included).
    """
    tol = _threshold(tol, "tol")
    if shrink_t is not None:
        shrink_t = _threshold(shrink_t, "shrink_t", scalar=False)
    S_shrunk = _check_shrunk_flag(S_shrunk)
    Sigma = np.asarray(check_symmetric(Sigma))
    named = {"L": L, "S": S, "L0": L0, "S0": S0}
    for name, a in named.items():
        if a is not None:
            named[name] = np.asarray(_checks.as_matrix(a, name))
            _checks.check_same_shape(Sigma, named[name], "Sigma", name)
    L, S, L0, S0 = named.values()
    if S_shrunk is None:
        t = default_shrink(Sigma.shape[0]) if shrink_t is None else shrink_t
        S_shrunk = bool(is_shrunk(Sigma, L, S, t))
    lam = np.asarray(eigenvalues(L))
    out = {
        "r_L": int(np.sum(lam > tol)),
        "r_L_code": int(np.sum(np.abs(lam) > tol)),
        "s_S": float(sparsity(S, tol)),
        "min_eig_L": float(lam[0]),
        "residual": float(relative_error(L + S, Sigma)),
    }
    errors = real_data_errors(Sigma, L, S, shrink_t, tol, S_shrunk=S_shrunk)
    out.update({k: float(v) for k, v in errors._asdict().items()})
    out["S_shrunk"] = S_shrunk
    if L0 is not None:
        out["rel_error_L"] = float(relative_error(L, np.asarray(L0)))
    if S0 is not None:
        out["rel_error_S"] = float(relative_error(S, np.asarray(S0)))
    return out
