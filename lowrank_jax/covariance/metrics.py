"""Metrics of a low-rank + sparse split Σ ≈ L + S of a symmetric matrix
(Baes et al. 2021, Sec. III).

The paper's threshold ϵ = 0.01 (called ``tol`` here; not the smoothing ε of the loss nor a gradient
tolerance) enters two of them:

    r(L)          = #{ i : λ_i(L) > ϵ }            (λ_i: the eigenvalues of L)
    s(S)          = #{ (i, j) : |S_ij| < ϵ } / n²   (the share of near-zero entries)
    rel.error(X)  = ‖X − X₀‖_F / ‖X₀‖_F             (against the planted L₀ or S₀)

(rel.error is ``lowrank_jax.linalg.relative_error``, also exported here). On real data there
is no ground truth; the figure captions use instead (with the 1/√n shrinkage
shrink(S)_ij = sign(S_ij) max(|S_ij| − 1/√n, 0) that the paper applies to S before plotting, the
soft thresholding ``lowrank_jax.prox.soft_threshold`` at t = 1/√n)

    ‖Σ − L‖_F / ‖L‖_F,   ‖Σ − (L + shrink(S))‖_F / ‖Σ‖_F,   s(shrink(S)).

FPCP's S is that shrinkage already (S = shrink(Σ − L, 1/√n), ``lowrank_jax.covariance.fpcp``),
and shrinking it again gives shrink(Σ − L, 2/√n): ``real_data_errors`` and ``report``
recognise such an S and use it as it is (``S_shrunk``).

Differences from the authors' code (documented, not copied): their r(L) is
``np.linalg.matrix_rank(L, tol=0.01)``, which counts *singular* values > 0.01, i.e. |λ_i| > 0.01,
and differs from the paper's definition when L has negative eigenvalues (IALM, FPCP on
non-PSD input): ``rank_above(..., signed=False)`` gives the code's count. Their sparsity counts
|x| ≤ 0.01 as zero; the paper says "smaller than 0.01", which ``sparsity`` follows (the two
differ only on entries exactly at ±0.01; ``strict=False`` gives the code's rule).

All functions are pure ``jax.numpy`` (``jit``/``vmap``-able) except ``report`` and
``check_symmetric``, which work at the Python boundary.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import _checks
from lowrank_jax.covariance._common import (
    SIGMA,
    SYMMETRIC,
    THRESHOLD,
    THRESHOLDS,
    sigma,
    square_matrix,
    symmetric,
)
from lowrank_jax.linalg import relative_error
from lowrank_jax.precision import full_precision
from lowrank_jax.prox import soft_threshold

EPSILON = 0.01  # the paper's metric threshold ϵ


@_checks.validate(
    symmetric(rtol="rtol", label="name"),
    rtol=THRESHOLD,
    Sigma=_checks.Convert(lambda x, _, args: sigma(x, args["name"])),
)
def check_symmetric(Sigma, name: str = "Sigma", rtol: float = 1e-6) -> jax.Array:
    """``Sigma`` as a floating JAX array, after checking it is a square, finite, symmetric matrix.

    Symmetry is relative: max_ij |Σ_ij − Σ_ji| ≤ ``rtol`` · max_ij |Σ_ij|, loose enough for float32
    round-off of a product such as MMᵀ, tight enough to reject a non-symmetric input. Only shape
    and dtype are checked when ``Sigma`` is a tracer. A matrix that is not 2-D, empty, not square,
    not finite, not symmetric, or at a scale whose sums of squares overflow or underflow its
    dtype is a ``ValueError`` naming ``name``.

    Args:
      Sigma: the (n, n) matrix (array-like).
      name: the argument's name in the errors, default "Sigma".
      rtol: the relative symmetry tolerance ≥ 0, default 1e-6.

    Returns:
      Σ, an (n, n) floating ``jax.Array``.
    """
    return Sigma


_SQUARE = _checks.Convert(square_matrix)


@_checks.validate(L=_SQUARE)
def eigenvalues(L) -> jax.Array:
    """The eigenvalues of the symmetric part (L + Lᵀ)/2 of a square L, ascending.

    Args:
      L: (n, n) matrix; another shape is a ``ValueError`` naming ``L``.

    Returns:
      (n,) the eigenvalues λ_1 ≤ … ≤ λ_n.
    """
    return _eigenvalues(L)


def _eigenvalues(L) -> jax.Array:
    return jnp.linalg.eigvalsh(0.5 * (L + L.T))


@_checks.validate(tol=THRESHOLD, signed=_checks.Flag(), L=_SQUARE)
def rank_above(L, tol=EPSILON, *, signed: bool = True) -> jax.Array:
    """The paper's rank of a symmetric L: r(L) = #{i : λ_i(L) > tol}.

    λ_i are the eigenvalues of (L + Lᵀ)/2 (the outputs of the baselines are symmetric only up to
    round-off). With ``signed=False`` it counts |λ_i| > tol instead, i.e. the singular values of
    the symmetric matrix: the authors' ``np.linalg.matrix_rank(L, tol=0.01)``.

    Args:
      L: (n, n) matrix.
      tol: the threshold ϵ, a scalar ≥ 0 (``ValueError`` for a negative or NaN one), default 0.01.
      signed: count λ_i > tol (True, default, the paper) or |λ_i| > tol (False, the code).

    Returns:
      int32 scalar, the count.
    """
    lam = _eigenvalues(L)
    lam = lam if signed else jnp.abs(lam)
    return jnp.sum(lam > tol).astype(jnp.int32)


@_checks.validate(tol=THRESHOLD, strict=_checks.Flag())
def sparsity(S, tol=EPSILON, *, strict: bool = True) -> jax.Array:
    """The paper's sparsity: the fraction of (numerically) zero entries of S.

        s(S) = #{(i, j) : |S_ij| < tol} / (number of entries)

    Strict ``<`` as in the paper's text ("smaller than 0.01"); ``strict=False`` uses the authors'
    code's |S_ij| ≤ tol. s = 0.95 means 95 % zeros.

    Args:
      S: array (any shape).
      tol: the threshold ϵ, a scalar ≥ 0 (``ValueError`` for a negative or NaN one), default 0.01.
      strict: count |S_ij| < tol (True, default) or |S_ij| ≤ tol (False).

    Returns:
      A scalar in [0, 1], in S's floating dtype.
    """
    return _sparsity(S, tol, strict)


def _sparsity(S, tol, strict: bool = True) -> jax.Array:
    mag = jnp.abs(jnp.asarray(S))
    zero = mag < tol if strict else mag <= tol
    return jnp.mean(zero.astype(mag.dtype))


@_checks.validate(n=_checks.Count())
def default_shrink(n: int) -> float:
    """The paper's shrinkage level 1/√n for an n × n matrix.

    Args:
      n: the matrix size, a positive integer.

    Returns:
      1/√n, a Python float.
    """
    return _shrink_level(n)


def _shrink_level(n: int) -> float:
    return 1.0 / float(np.sqrt(n))


class RealDataErrors(NamedTuple):
    """The figure-caption metrics of a split (L, S) of a real Σ, which has no ground truth.

    S̃ is the shrunk sparse part: shrink(S, t), or S itself when S is already shrunk
    (``real_data_errors``).

    Attributes:
      fit_L: float scalar, ‖Σ − L‖_F / ‖L‖_F (Fig. 1's "‖Σ − L‖/‖L‖"; the denominator is
        ‖L‖).
      fit_shrunk: float scalar, ‖Σ − (L + S̃)‖_F / ‖Σ‖_F ("relative error of L + S vs Σ", S
        shrunk).
      sparsity_shrunk: float scalar, s(S̃) at the threshold ϵ (0.01 by default): the share of
        entries of S̃ below ϵ in magnitude.
    """

    fit_L: jax.Array
    fit_shrunk: jax.Array
    sparsity_shrunk: jax.Array


def _shrunk_flag(S_shrunk, name: str, args=None):
    """``S_shrunk`` is None (recognise), True or False; anything else is a ``ValueError`` naming it
    (a truthy string or array must not pick a branch)."""
    if S_shrunk is None or isinstance(S_shrunk, (bool, np.bool_)):
        return None if S_shrunk is None else bool(S_shrunk)
    raise ValueError(
        f"{name} must be None (recognise an S that is already shrink(Σ − L, t)), True or False, "
        f"got {S_shrunk!r}"
    )


def _like_sigma(x, name: str, args) -> jax.Array:
    """``x`` as an array of Σ's shape (any values: a NaN part gives NaN metrics)."""
    x = jnp.asarray(x)
    _checks.check_same_shape(args["Sigma"], x, "Sigma", name)
    return x


def _matrix_like_sigma(x, name: str, args) -> jax.Array:
    """``x`` as a finite matrix (``lowrank_jax._checks.as_matrix``) of Σ's shape."""
    x = _checks.as_matrix(x, name)
    _checks.check_same_shape(args["Sigma"], x, "Sigma", name)
    return x


def _square_sigma(x, name: str, args=None) -> jax.Array:
    """Σ as ``lowrank_jax.covariance._common.sigma`` makes it, first refusing any shape that is
    not a square matrix by that fact (not by the first rule it breaks)."""
    shape = tuple(jnp.shape(x))
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {shape}")
    return sigma(x, name)


_SHRUNK_FLAG = _checks.Convert(_shrunk_flag)
_SHRINK_T = _checks.Convert(THRESHOLDS.fn, optional=True)  # None: 1/√n
_LIKE_SIGMA = _checks.Convert(_like_sigma)


@_checks.validate(t=THRESHOLDS)
def is_shrunk(Sigma, L, S, t) -> jax.Array:
    """Whether S already is the shrunk residual shrink(Σ − L, t), up to round-off.

    True for FPCP's S at its default λ = t = 1/√n. The test is

        max_ij |S_ij − shrink(Σ − L, t)_ij| ≤ 8 ε (max|Σ| + max|L|),

    ε the machine epsilon of the least precise of Σ, L, S: forming Σ − L and subtracting t round by
    ε·max(|Σ|, |L|) per entry, also when the caller recomputed Σ, L or t in another precision than
    the method did. It only decides anything when shrinking matters: otherwise shrink(S, t) = S to
    that tolerance. An S = Σ − L (the network's, IALM's up to its tolerance) differs from
    shrink(Σ − L, t) by min(|Σ − L|, t) per entry, so it is taken as shrunk only when Σ − L is
    itself round-off, where S and shrink(S, t) agree. NaN anywhere gives False.

    Args:
      Sigma: (n, n) the matrix split.
      L: (n, n) the low-rank part.
      S: (n, n) the sparse part.
      t: the shrinkage level ≥ 0 (a scalar or an array broadcasting against S).

    Returns:
      A bool scalar (traceable).
    """
    return _is_shrunk(Sigma, L, S, t)


def _is_shrunk(Sigma, L, S, t) -> jax.Array:
    Sigma, L, S = (_checks.as_floating(a) for a in (Sigma, L, S))
    eps = max(float(jnp.finfo(a.dtype).eps) for a in (Sigma, L, S))
    gap = jnp.max(jnp.abs(S - soft_threshold(Sigma - L, t)))
    scale = jnp.max(jnp.abs(Sigma)) + jnp.max(jnp.abs(L))
    return gap <= 8 * eps * scale


@full_precision
@_checks.validate(
    SYMMETRIC,
    tol=THRESHOLD,
    shrink_t=_SHRINK_T,
    S_shrunk=_SHRUNK_FLAG,
    Sigma=_checks.Convert(_square_sigma),
    L=_LIKE_SIGMA,
    S=_LIKE_SIGMA,
)
def real_data_errors(Sigma, L, S, shrink_t=None, tol=EPSILON, *, S_shrunk=None) -> RealDataErrors:
    """The real-data metrics of a split (L, S) of Σ (``RealDataErrors``).

        fit_L = ‖Σ − L‖_F / ‖L‖_F,
        fit_shrunk = ‖Σ − (L + S̃)‖_F / ‖Σ‖_F,
        sparsity_shrunk = s(S̃)

    The shrunk part is S̃ = shrink(S, t), except for an S that is already shrunk:

        S_shrunk=None (default)  S̃ = S when S = shrink(Σ − L, t) to round-off
                                 (``is_shrunk``; FPCP's S at its default λ = 1/√n),
                                 else shrink(S, t)
        S_shrunk=True            S̃ = S (e.g. FPCP run with another λ, whose S the
                                 caller takes as its sparse part as it is)
        S_shrunk=False           S̃ = shrink(S, t) always

    Shrinking FPCP's S again would score shrink(Σ − L, 2t) instead of FPCP's own pair.

    Args:
      Sigma: (n, n) symmetric, checked as ``report`` checks it (``check_symmetric``:
        square, finite, symmetric to 1e-6 · max|Σ|; only its shape under ``jit``).
      L: (n, n) the low-rank part.
      S: (n, n) the sparse part.
      shrink_t: t ≥ 0 of the shrinkage (a scalar or an array broadcasting against S); default
        None, 1/√n.
      tol: the sparsity threshold ϵ ≥ 0, default 0.01.
      S_shrunk: None, True or False, as above.

    Returns:
      ``RealDataErrors`` (fit_L, fit_shrunk, sparsity_shrunk), scalars. A negative or NaN
      ``shrink_t`` or ``tol``, or an ``L`` or ``S`` not of Σ's shape, is a ``ValueError`` naming
      it.
    """
    return _real_data_errors(Sigma, L, S, shrink_t, tol, S_shrunk)


def _real_data_errors(Sigma, L, S, shrink_t, tol, S_shrunk) -> RealDataErrors:
    t = _shrink_level(Sigma.shape[0]) if shrink_t is None else shrink_t
    S_t = soft_threshold(S, t)
    if S_shrunk is None:
        S_t = jnp.where(_is_shrunk(Sigma, L, S, t), S, S_t)
    elif S_shrunk:
        S_t = S
    return RealDataErrors(
        fit_L=relative_error(Sigma, L),
        fit_shrunk=relative_error(L + S_t, Sigma),
        sparsity_shrunk=_sparsity(S_t, tol),
    )


_MATRIX_LIKE_SIGMA = _checks.Convert(_matrix_like_sigma)


@_checks.host_function("covariance.report")
@full_precision
@_checks.validate(
    SYMMETRIC,
    tol=THRESHOLD,
    shrink_t=_SHRINK_T,
    S_shrunk=_SHRUNK_FLAG,
    **SIGMA,
    L=_MATRIX_LIKE_SIGMA,
    S=_MATRIX_LIKE_SIGMA,
    L0=_checks.Convert(_matrix_like_sigma, optional=True),
    S0=_checks.Convert(_matrix_like_sigma, optional=True),
)
def report(
    Sigma, L, S, L0=None, S0=None, *, tol=EPSILON, shrink_t=None, S_shrunk=None
) -> dict[str, float]:
    """The paper's Table II metrics of a split (L, S) of Σ, as a dict of Python numbers.

        r(L) = #{i : λ_i(L) > ϵ},   s(S) = #{(i, j) : |S_ij| < ϵ} / n²,
        rel.error(X) = ‖X − X₀‖_F / ‖X₀‖_F

    Works with any (L, S) pair: a ``Decomposition`` (pass
    ``d.L, d.S``) or a baseline result (``r.L, r.S``). FPCP's S is already shrink(Σ − L, 1/√n); it
    is recognised and not shrunk twice (``S_shrunk`` as in ``real_data_errors``). ϵ = ``tol``
    is an absolute threshold: the paper's 0.01 suits correlation matrices (entries ≤ 1); for a Σ at
    another scale pass ϵ at that scale (0.01 · max_i Σ_ii, say), or r(L) and s(S) count rounding
    as rank (or everything as zero).

    Args:
      Sigma: (n, n) symmetric (to 1e-6 · max|Σ|), finite.
      L: (n, n) the low-rank part, finite.
      S: (n, n) the sparse part, finite.
      L0: (n, n) the planted low-rank part, or None (default) without ground truth.
      S0: (n, n) the planted sparse part, or None (default).
      tol: ϵ, a scalar ≥ 0, default 0.01.
      shrink_t: t ≥ 0 of the shrinkage in the real-data metrics; default None, 1/√n.
      S_shrunk: None (recognise an already shrunk S, default), True or False (force either
        reading).

    Returns:
      dict with ``r_L`` = r(L), ``r_L_code`` (#|λ| > ϵ, the code's ``matrix_rank``), ``s_S`` =
      s(S) (strict < ϵ), ``min_eig_L`` (λ_min(L): < 0 means L is not PSD), ``residual`` =
      ‖Σ − L − S‖_F/‖Σ‖_F, the ``RealDataErrors`` fields ``fit_L``, ``fit_shrunk``,
      ``sparsity_shrunk``, and ``S_shrunk`` (bool: whether S was used as the shrunk part as it is);
      with ground truth also ``rel_error_L`` and ``rel_error_S``. A matrix of another shape, a
      non-finite one, or a negative or NaN ``tol``/``shrink_t`` is a ``ValueError`` naming it.

    Example:
        ```python
        from lowrank_jax import covariance, datasets

        p = datasets.lrs_problem(0, 30, 3, 0.95)  # Σ = L₀ + S₀
        res = covariance.fpcp(p.Sigma, 3, max_iter=5)
        rep = covariance.report(p.Sigma, res.L, res.S, p.L0, p.S0)
        # 3, 0.95, 0.017, True
        print(rep["r_L"], rep["s_S"], rep["rel_error_L"], rep["S_shrunk"])
        ```
    """
    Sigma, L, S = np.asarray(Sigma), np.asarray(L), np.asarray(S)
    if S_shrunk is None:
        t = _shrink_level(Sigma.shape[0]) if shrink_t is None else shrink_t
        S_shrunk = bool(_is_shrunk(Sigma, L, S, t))
    lam = np.asarray(_eigenvalues(L))
    out = {
        "r_L": int(np.sum(lam > tol)),
        "r_L_code": int(np.sum(np.abs(lam) > tol)),
        "s_S": float(_sparsity(S, tol)),
        "min_eig_L": float(lam[0]),
        "residual": float(relative_error(L + S, Sigma)),
    }
    errors = _real_data_errors(Sigma, L, S, shrink_t, tol, S_shrunk)
    out.update({k: float(v) for k, v in errors._asdict().items()})
    out["S_shrunk"] = S_shrunk
    if L0 is not None:
        out["rel_error_L"] = float(relative_error(L, np.asarray(L0)))
    if S0 is not None:
        out["rel_error_S"] = float(relative_error(S, np.asarray(S0)))
    return out
