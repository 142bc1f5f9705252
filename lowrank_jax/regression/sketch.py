"""Randomized row sampling of tall matrices: leverage scores (exact, or fast through a CountSketch)
and the sampled Gram matrix Aᵀ D̃ A used by sketched Newton (the "SubSample" of the rescaled
softmax regression paper, Gao, Song, Yin, Lemma 6.4, which the paper cites without an algorithm).

For X = diag(√D) A (n × d, D > 0) with leverage scores τ_i = ‖e_iᵀ U‖² (U an orthonormal basis of
X's column space, Σ τ_i = rank X, d for full column rank), drawing m rows i.i.d. with probabilities
p_i and weighting D̃_i = D_i · count_i/(m p_i) gives E[Aᵀ D̃ A] = Aᵀ D A, and with p_i ≥ β τ_i/d the
matrix Chernoff bound gives (1 − ε) AᵀDA ⪯ AᵀD̃A ⪯ (1 + ε) AᵀDA with probability ≥ 1 − δ
once m ≥ (8/3) (d/β) log(2d/δ)/ε² (``sketch_size``).

Fast approximate scores (Drineas, Magdon-Ismail, Mahoney, Woodruff 2012; Clarkson–Woodruff 2013):
a CountSketch S (k × n, one ±1 per column, O(nnz) to apply) gives SX = Q'R' with R' a constant-
factor preconditioner of X; then τ_i ≈ ‖e_iᵀ X (((SX)ᵀ SX)⁺)^(1/2) G‖² with a Gaussian G (d × t)/√t,
t = O(log n), the matrix root V Σ⁺ Vᵀ from the SVD R' = U Σ Vᵀ (see ``approx_leverage_scores``).
Cost O(nnz(A) · t + k d² + d³) instead of the O(n d²) of a QR of X.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from lowrank_jax import _checks, linalg
from lowrank_jax.precision import full_precision
from lowrank_jax.regression import design

# Non-negative row weights D, one per row of A, in A's dtype (maybe traced).
_ROW_WEIGHTS = _checks.Hyper(ndim=1, length=("A", 0), dtype_of="A", optional=True)


@full_precision
@_checks.validate(A=design.DESIGN, row_weights=_ROW_WEIGHTS)
@_checks.compiled
def leverage_scores(A, row_weights=None):
    """Exact leverage scores of X = diag(√row_weights) A, in O(n d²).

        τ_i = ‖e_iᵀ U_k‖²,   Σ_i τ_i = rank(X),

    with U_k the left singular vectors of X for its k = rank(X) non-negligible singular values
    (computed as X = QR, R = U_R Σ Vᵀ, U = Q U_R). A plain QR would be wrong for a rank-deficient
    X: its Q still has d columns, and the d − k that span no direction of X are arbitrary and add
    spurious scores (close to 1 for a row they happen to favour).

    Args:
      A: (n, d) design: dense, ``BCOO``, ``scipy.sparse`` or
        ``lowrank_jax.regression.design.RowSparse`` (densified).
      row_weights: (n,) non-negative weights D of the rows (default None: all 1).

    Returns:
      (n,) array τ.
    """
    X = A.todense() if isinstance(A, design.RowSparse) else A
    if row_weights is not None:
        X = jnp.sqrt(row_weights)[:, None] * X
    Q, R = linalg.qr(X)  # Q finished before the SVD of R starts (see linalg.qr)
    U, s, _ = jnp.linalg.svd(R, full_matrices=False)
    W = Q @ (U * linalg.above_rounding(s, max(X.shape)))
    return jnp.sum(W * W, axis=1)


def _sketch_rows(value, name: str, args: dict) -> int:
    """k, the rows of the CountSketch: a static integer ≥ 1, by default 8d."""
    if value is None:
        return 8 * args["A"].shape[1]
    return _checks.check_positive_int(value, name)


@full_precision
@_checks.validate(
    _checks.Rule(
        lambda a: a["sketch_rows"] >= a["A"].shape[1],
        "sketch_rows = {sketch_rows} < d = {A.shape[1]}: a CountSketch needs at least d rows to "
        "keep the column space (default 8d)",
        uses=(),
    ),
    key=_checks.Key(),
    A=design.DESIGN,
    row_weights=_ROW_WEIGHTS,
    sketch_rows=_checks.Convert(_sketch_rows),
    jl_cols=_checks.Count(optional=True),
)
@_checks.compiled
def approx_leverage_scores(
    key, A, row_weights=None, *, sketch_rows: int | None = None, jl_cols: int | None = None
):
    """Leverage scores of X = diag(√row_weights) A up to a constant factor, in O(nnz(A) · t + k d²).

    A CountSketch S (k × n; Clarkson, Woodruff 2013) then a Gaussian JL projection G (d × t)/√t
    (Drineas, Magdon-Ismail, Mahoney, Woodruff 2012): with SX = Q'R' and R' = U Σ Vᵀ,

        τ_i ≈ ‖e_iᵀ X V Σ⁺ Vᵀ G‖²,   V Σ⁺ Vᵀ = (((SX)ᵀ SX)⁺)^(1/2),

    whose expectation over G is e_iᵀ X ((SX)ᵀ SX)⁺ Xᵀ e_i, the score the sketch estimates. Σ⁺ keeps
    only the non-negligible singular values: for a rank-deficient X (a zero or repeated column) it
    drops the directions that X lacks, whose near-zero pivots would otherwise inflate every score.
    The matrix depends on (SX)ᵀ SX alone, not on which QR factor or which singular vectors LAPACK
    returns (signs, and rotations where a pivot is zero, differ between builds and between a
    batched and a single factorisation), so the scores do not depend on those choices.

    Args:
      key: ``jax.random`` key or integer seed of the CountSketch and the Gaussian projection.
      A: (n, d) design: dense, ``BCOO``, ``scipy.sparse`` or
        ``lowrank_jax.regression.design.RowSparse``.
      row_weights: (n,) non-negative weights D of the rows (default None: all 1).
      sketch_rows: k, the rows of the CountSketch (static, ≥ d; default 8d).
      jl_cols: t, the columns of the Gaussian projection (static, ≥ 1; default 16). Constant-factor
        scores suffice, they only shape the sampling distribution; with t columns each score
        carries a χ²_t/t factor (1 % quantile 0.36 at t = 16).

    Returns:
      (n,) array of the approximate scores.
    """
    n = A.shape[0]
    t = 16 if jl_cols is None else jl_cols
    dtype = A.dtype
    scale = jnp.ones(n, dtype) if row_weights is None else jnp.sqrt(row_weights)
    k_sketch, kg = jax.random.split(key)
    SX = design.count_sketch(k_sketch, A, scale, sketch_rows)
    R = jnp.linalg.qr(SX, mode="r")
    _, s, Vt = jnp.linalg.svd(R, full_matrices=False)
    keep = linalg.above_rounding(s, max(SX.shape))
    inv_s = jnp.where(keep, 1.0 / jnp.where(keep, s, 1.0), 0.0)
    G = jax.random.normal(kg, (s.shape[0], t), dtype) / jnp.sqrt(jnp.asarray(t, dtype))
    RG = (Vt.T * inv_s) @ (Vt @ G)  # (((SX)ᵀ SX)⁺)^(1/2) G (d, t): no factor's choice enters
    Z = scale[:, None] * design.matmat(A, RG)
    return jnp.sum(Z * Z, axis=1)


def _real(value, name: str, args: dict) -> float:
    """A real number (Python, NumPy or a concrete 0-d array) as a Python float."""
    real = _checks.as_real(value)
    if real is None:
        raise ValueError(f"{name} must be a real number, got {value!r}")
    return real


_REAL = _checks.Convert(_real)


@_checks.validate(
    _checks.Rule(
        lambda a: 0 < a["eps"] < math.inf and 0 < a["delta"] < 1 and 0 < a["beta"] <= 1,
        "need 0 < eps < inf, 0 < delta < 1, 0 < beta <= 1; got {eps}, {delta}, {beta}",
        uses=(),
    ),
    d=_checks.Count(),
    eps=_REAL,
    delta=_REAL,
    beta=_REAL,
)
def sketch_size(d: int, eps: float, delta: float = 0.01, beta: float = 1.0) -> int:
    """Sampled rows m for a (1 ± ε) Gram matrix with probability ≥ 1 − δ (matrix Chernoff bound).

    With scores that are β-approximate (p_i ≥ β τ_i / d), the matrix Bernstein bound gives
    (1 − ε) AᵀDA ⪯ AᵀD̃A ⪯ (1 + ε) AᵀDA once

        m = ⌈2(1 + ε/3) (d/β) log(2d/δ) / ε²⌉,

    with the factor 2(1 + ε/3) taken at its ε = 1 value 8/3 for every ε ≤ 1 (the usual statement)
    and as is above, where 8/3 would fall short.

    Args:
      d: columns of A (≥ 1).
      eps: the relative accuracy ε, > 0.
      delta: the failure probability δ, in (0, 1) (default 0.01).
      beta: the scores' approximation factor β, in (0, 1] (default 1: exact scores).

    Returns:
      int m.
    """
    factor = 2 * (1 + max(eps, 1.0) / 3)
    return math.ceil(factor * d / beta * math.log(2 * d / delta) / eps**2)


def _active(value, name: str, args: dict):
    """``active``: an integer, maybe traced, returned as given (its range is a rule)."""
    if not jnp.issubdtype(jnp.result_type(value), jnp.integer):
        raise ValueError(f"{name} must be an integer (a number of draws), got {value!r}")
    return value


@_checks.validate(
    _checks.Rule(
        lambda a: a["scores"].shape[0] > 0,
        "scores must have at least one entry (one per row to sample from), got none",
        uses=(),
    ),
    # Concrete only: a traced active above m is read as m (only m draws exist), and one below 1
    # uses no draw; there is no floating argument whose NaN would stand for it.
    _checks.Rule(
        lambda a: a["active"] is None or ((1 <= a["active"]) & (a["active"] <= a["m"])),
        "active must satisfy 1 <= active <= m = {m} (the draws there are), got {active}",
        uses=("active",),
    ),
    m=_checks.Count(),
    key=_checks.Key(),
    scores=_checks.Hyper(ndim=1),
    active=_checks.Convert(_active, optional=True),
)
@_checks.compiled
def sample_rows(key, scores, m: int, active=None):
    """m row indices drawn i.i.d. with p ∝ scores, and their unbiased weights 1/(m p_i).

    A row drawn twice appears twice, so Σ_j weight_j f(idx_j) is an unbiased estimate of Σ_i f(i).
    Scores that are all 0 (a zero matrix, or D = 0) sample uniformly instead of dividing by 0;
    negative or non-finite scores are refused (concrete).

    Args:
      key: ``jax.random`` key or integer seed of the draws.
      scores: (n,) non-negative sampling scores, n ≥ 1.
      m: number of draws (static, ≥ 1).
      active: integer, 1 ≤ active ≤ m (may be traced; default None: all m): use only the first
        ``active`` draws, with weights 1/(active p_i) there and 0 after. The first ``active`` of m
        i.i.d. draws are an i.i.d. sample of that size, so a sweep over sample sizes runs as one
        program with the static capacity m. An ``active`` above m is refused when concrete and read
        as m when traced, since only m draws exist.

    Returns:
      (idx, weight, p): the (m,) row indices, their (m,) weights and the (n,) probabilities.
    """
    top = jnp.max(scores)
    scaled = scores / jnp.where(top > 0, top, 1.0)  # no overflow of the sum (float32 scores ~1e38)
    total = jnp.sum(scaled)
    p = jnp.where(total > 0, scaled / jnp.where(total > 0, total, 1.0), 1.0 / scores.shape[0])
    idx = jax.random.choice(key, scores.shape[0], (m,), p=p)
    if active is None:
        return idx, 1.0 / (m * p[idx]), p
    active = jnp.minimum(active, m)
    used = jnp.arange(m) < active
    return idx, jnp.where(used, 1.0 / (active * p[idx]), 0.0), p


@full_precision
@_checks.validate(
    key=_checks.Key(),
    A=design.DESIGN,
    D=_checks.Hyper(ndim=1, length=("A", 0), dtype_of="A"),
    m=_checks.Count(),
    method=_checks.Choice("approx", "exact"),
    # one per row: JAX's gather clamps an index past the end, so a longer array sampled row n−1
    scores=_checks.Hyper(ndim=1, length=("A", 0), dtype_of="A", optional=True),
)
@_checks.compiled
def sampled_gram(key, A, D, m: int, *, method: str = "approx", scores=None, active=None):
    """The sampled Gram matrix Aᵀ D̃ A of leverage-score row sampling of diag(√D) A, in O(m d²).

    The SubSample of Gao, Song, Yin (Lemma 6.4): m rows i drawn i.i.d. with p ∝ τ_i (the leverage
    scores of diag(√D) A) and weighted D̃_i = D_i · count_i / (m p_i), so E[Aᵀ D̃ A] = Aᵀ D A and
    nnz(D̃) ≤ m; ``sketch_size`` gives the m for a (1 ± ε) approximation.

    Args:
      key: ``jax.random`` key or integer seed of the scores and the draws.
      A: (n, d) design: dense, ``BCOO``, ``scipy.sparse`` or
        ``lowrank_jax.regression.design.RowSparse``.
      D: (n,) non-negative row weights (> 0 for Lemma 6.4).
      m: number of draws (static, ≥ 1).
      method: the scores, "approx" (``approx_leverage_scores``, default) or "exact"
        (``leverage_scores``); ignored when ``scores`` is given.
      scores: (n,) sampling scores to use instead (default None).
      active: the number of draws used, as in ``sample_rows`` (default None: all m).

    Returns:
      (d, d) array Aᵀ D̃ A.
    """
    k_scores, k_draw = jax.random.split(key)
    if scores is None:
        scores = (
            approx_leverage_scores(k_scores, A, D) if method == "approx" else leverage_scores(A, D)
        )
    idx, weight, _ = sample_rows(k_draw, scores, m, active)
    return design.gram(design.take_rows(A, idx), D[idx] * weight)


__all__ = [
    "approx_leverage_scores",
    "leverage_scores",
    "sample_rows",
    "sampled_gram",
    "sketch_size",
]
