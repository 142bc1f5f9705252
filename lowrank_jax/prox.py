"""Proximal operators and projections: one signature, ``op(x, strength_or_param) -> x``.

Thresholds broadcast against ``x`` (a scalar, a per-row column vector, ...). Operators are pure and
``jit``/``vmap``-friendly; they are differentiable where the mathematics is (soft thresholding in
both ``x`` and the threshold, hard thresholding in ``x``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import _checks, linalg
from lowrank_jax.selection import kth_largest


def soft_threshold(x: jax.Array, t) -> jax.Array:
    """Soft thresholding (shrinkage), the prox of t‖·‖₁.

        [S_t(x)]_i = sign(x_i) · max(|x_i| − t, 0)  =  x_i − clip(x_i, −t, t).

    Written with ``clip`` so that XLA fuses it and so that E = S_t(D) − D = −clip(D, −t, t) costs
    one pass. ∂/∂t = −sign(x) on |x| ≥ t and 0 elsewhere (``clip_symmetric``'s rule, which takes
    the t-branch at the tie |x| = t). On a pytree of weights (the prox of t Σ_leaves ‖·‖₁):
    ``jax.tree.map(lambda w: soft_threshold(w, t), params)``.

    Args:
      x: array of any shape. Integer and bool ``x`` are shrunk in the default float; a floating
        ``x`` keeps its dtype under a Python-number ``t``.
      t: the threshold, ≥ 0 (+inf allowed: every entry 0), a number or an array broadcastable
        against ``x``. A concrete ``t`` with a negative or NaN entry raises ``ValueError`` naming
        ``t`` (x − clip(x, −t, t) at t < 0 would shift every entry away from 0 by |t|). A traced
        ``t`` is used as it is: this is the inner step of the solvers, which validate their
        thresholds at their public boundary (a traced invalid one reaches this step as NaN).

    Returns:
      S_t(x), an array of the broadcast shape of ``x`` and ``t``.
    """
    x = jnp.asarray(x)
    if _checks.is_concrete(t):
        # validation only: a JAX t keeps its own dtype below
        _checks.as_hyper(t, "t", allow_inf=True)
        if not isinstance(t, jax.Array) and type(t) is not float:  # (np.float64 subclasses float)
            # a NumPy t in x's dtype, as the other thresholds take it: an integer one went through
            # jnp's int32 (x64 off, 2**32 wrapped to 0), a float64 one promoted a float32 x (x64 on)
            t = np.asarray(t, np.float64).astype(jnp.result_type(x, float))
    return x - clip_symmetric(x, t)


@jax.custom_jvp
def clip_symmetric(x: jax.Array, t) -> jax.Array:
    """clip(x, −t, t) = x − S_t(x), with its derivative written out.

        ∂/∂x = 1[|x| < t],   ∂/∂t = sign(x) · 1[|x| ≥ t]   (one fused pass).

    ``jnp.clip``'s own rule splits ties between its ``max`` and ``min`` and costs several passes
    over x in reverse mode; at |x| = t exactly (measure zero) this rule takes the t-branch.

    Args:
      x: array of any shape.
      t: the bound, ≥ 0, a number or an array broadcastable against ``x`` (not checked).

    Returns:
      clip(x, −t, t), an array of the broadcast shape of ``x`` and ``t``.
    """
    return jnp.clip(x, -t, t)


@clip_symmetric.defjvp
def _clip_symmetric_jvp(primals, tangents):
    x, t = primals
    out = clip_symmetric(x, t)
    # An integer x (or t) has a float0 "no tangent": it contributes 0, in the output's dtype. A
    # Python-number tangent (jax.jvp(f, (0.1,), (1.0,))) has no dtype yet.
    tangents = (d if hasattr(d, "dtype") else jnp.asarray(d) for d in tangents)
    dx, dt = (jnp.zeros((), out.dtype) if d.dtype == jax.dtypes.float0 else d for d in tangents)
    inside = jnp.abs(x) < t
    return out, jnp.broadcast_to(jnp.where(inside, dx, jnp.sign(x) * dt), out.shape).astype(
        out.dtype
    )


def group_soft_threshold(x: jax.Array, t, axis: int = 0) -> jax.Array:
    """Group soft thresholding, the prox of t Σ_g ‖x_g‖₂ over the slices x_g along ``axis``.

        x_g ↦ max(1 − t/‖x_g‖₂, 0) · x_g,

    so a group with ‖x_g‖₂ ≤ t becomes 0 and every other keeps its direction and loses t in norm.
    For a matrix and ``axis=0`` the groups are the columns (the ℓ2,1 norm). Computed as x_g − t·u_g
    where ‖x_g‖₂ > t (0 elsewhere), with the unit direction u_g = y/‖y‖₂ of y = x_g/m, m = max|x_g|,
    and ‖x_g‖₂ = m‖y‖₂: everything at unit scale, so neither the value nor the derivative (which
    involves 1/‖x_g‖, never 1/‖x_g‖²) under- or overflows, also for float32 groups near 1e-20. The
    derivative at a zero group is that of the operator there: 0 for t > 0, the identity for t = 0.

    Args:
      x: array of any shape (a list or a NumPy array is taken in JAX's default float).
      t: the threshold, ≥ 0, a scalar or an array broadcastable against the group norms (the shape
        of ``x`` with ``axis`` kept as 1). A concrete negative or NaN ``t`` raises ``ValueError``
        naming it; a traced one (a sweep point) gives NaN entries.
      axis: the axis along which each group lies (default 0).

    Returns:
      An array of the shape of ``x``, in its floating dtype.
    """
    x = jnp.asarray(x)  # a list or a NumPy array (float64 ones: in JAX's default float)
    t = _checks.as_hyper(t, "t", dtype=jnp.result_type(x.dtype, float))
    # m held constant for the derivative: u_g and m‖y‖₂ do not depend on the scale m (homogeneity),
    # and differentiating through it forms x/m², which flushes to 0 or inf for tiny float32 groups.
    m = jax.lax.stop_gradient(jnp.max(jnp.abs(x), axis=axis, keepdims=True))
    y = x / jnp.where(m > 0, m, 1.0)
    ss = jnp.sum(jnp.square(y), axis=axis, keepdims=True)
    nonzero = ss > 0
    root = jnp.sqrt(jnp.where(nonzero, ss, 1.0))  # ‖y‖ where non-zero (safe sqrt)
    # a zero group is kept (as 0) at t = 0
    keep = jnp.where(nonzero, m * root > t, jnp.asarray(t) <= 0)
    # A traced invalid t arrives as NaN (as_hyper); every comparison with it is False, which zeroed
    # every group, a plausible answer. It gives NaN, as in soft_threshold and hard_threshold.
    return jnp.where(jnp.isnan(t), jnp.nan, jnp.where(keep, x - t * (y / root), 0.0))


def hard_threshold(x: jax.Array, t) -> jax.Array:
    """Hard thresholding, the prox of t²/2 · ‖·‖₀: keep x_i where |x_i| > t, zero elsewhere.

    Args:
      x: array of any shape.
      t: the threshold, ≥ 0 (+inf allowed: every entry 0), a scalar or an array broadcastable
        against ``x``. A concrete negative or NaN ``t`` raises ``ValueError`` naming it (a negative
        one would keep every entry); a traced NaN ``t`` (a solver's threshold from an invalid traced
        hyperparameter) gives NaN entries, not the all-zero result a comparison with NaN would.

    Returns:
      An array of the broadcast shape of ``x`` and ``t``.
    """
    x = jnp.asarray(x)
    if _checks.is_concrete(t):
        _checks.as_hyper(t, "t", allow_inf=True)  # validation only, as in soft_threshold
    return jnp.where(jnp.isnan(t), jnp.nan, jnp.where(jnp.abs(x) > t, x, jnp.zeros_like(x)))


def project_rank(x: jax.Array, rank: int, *, method: str = "exact", key=None) -> jax.Array:
    """Euclidean projection onto the matrices of rank ≤ ``rank`` (Eckart–Young): U_r Σ_r V_rᵀ.

    Computed by ``lowrank_jax.linalg.best_rank_approximation``. Every method carries the
    projection's own derivative, finite wherever σᵣ > σᵣ₊₁, also where singular values tie (a
    multiple of the identity, diag(3, 3, 1), the repeated zeros of a rank-deficient x), where
    differentiating the singular vectors would give NaN; ``"randomized"`` differentiates the
    projection of its sketch Q Qᵀx (exact when rank x ≤ rank + 10).

    Args:
      x: (m, n) matrix.
      rank: the rank r, an integer with 1 ≤ r ≤ min(m, n) (static).
      method: ``"exact"`` (default: the thin SVD), ``"gram"`` (thin or wide x) or ``"randomized"``.
      key: ``"randomized"`` only: a ``jax.random`` key or an integer seed for the sketch; default
        ``jax.random.key(0)``.

    Returns:
      The projection, an (m, n) array.
    """
    return linalg.best_rank_approximation(x, rank, method=method, key=key)


def top_fraction_count(alpha, n: int) -> jax.Array:
    """k = ⌊α n⌋, robust to the rounding of α (0.1 · 1000 gives 100, not 99).

    α n is rounded down after a relative slack of 8 ulp of α's precision (at least float32):
    relative to α n, so that α = 0 gives 0 for any n, and at least float32, so that a bfloat16 α
    does not gain whole entries.

    Args:
      alpha: the fraction α in [0, 1], a number or a (traced) array.
      n: the number of entries, a Python integer.

    Returns:
      ⌊α n⌋ as an int32 array of ``alpha``'s shape.
    """
    alpha = jnp.asarray(alpha)
    # At least float32: the slack is relative to α's precision, and bfloat16's eps (2⁻⁷) times n
    # would add whole entries (0.25 · 100 gave 31).
    dtype = (
        jnp.promote_types(alpha.dtype, jnp.float32)
        if jnp.issubdtype(alpha.dtype, jnp.floating)
        else jnp.float32
    )
    # Relative to α n (not n): an absolute slack of 8 ulp · n added an entry at α = 0 once n ≈ 10⁶.
    return jnp.floor(alpha.astype(dtype) * n * (1 + 8 * jnp.finfo(dtype).eps)).astype(jnp.int32)


# A square M up to this many entries has its row and column cut-offs found by one selection over the
# rows of [M; Mᵀ]: one compiled selection instead of two (ScaledGD's first call at 300 × 300 to
# 700 × 700: 3.2-3.9 s against 5.0-6.4 s; its runs as fast or faster, 16 against 20 ms at
# 200 × 200). Above it the transposed copy costs more than it saves (1000 × 1000: 260-270 against
# 195-225 ms).
_JOINT_SELECTION_MAX = 1 << 19


def top_fraction_thresholds(
    magnitude: jax.Array, alpha, *, row_guess=None, col_guess=None, gather=True
):
    """Per-row and per-column cut-offs of ScaledGD's sparsifier T_α.

    row_cut[i] is the ⌊α n2⌋-th largest entry of row i of ``magnitude`` and col_cut[j] the ⌊α n1⌋-th
    largest of column j (+inf when that count is 0). Exact; computed by
    ``lowrank_jax.selection.kth_largest``: on a CPU its counting selection (no sort), which
    takes the previous iteration's cut-offs as warm starts; on GPUs and TPUs a sort, which ignores
    them. A square ``magnitude`` of at most 2¹⁹ entries is selected as the rows of [M; Mᵀ] in one
    call (half the compiled program; the guesses are used when both are given).

    Args:
      magnitude: (n1, n2) non-negative matrix (typically |M|).
      alpha: the fraction α in [0, 1]; may be a traced array (``vmap`` over α).
      row_guess: optional warm start for the row cut-offs, broadcastable to (n1,).
      col_guess: optional warm start for the column cut-offs, broadcastable to (n2,).
      gather: as in ``kth_largest``: ``False`` for a one-off call inside a larger program.

    Returns:
      ``(row_cut, col_cut)``: arrays of shapes (n1,) and (n2,) in ``magnitude``'s dtype.
    """
    n1, n2 = magnitude.shape
    if n1 == n2 and n1 * n2 <= _JOINT_SELECTION_MAX:
        guess = None
        if row_guess is not None and col_guess is not None:
            guess = jnp.concatenate(
                [
                    jnp.broadcast_to(jnp.asarray(g, magnitude.dtype), (n1,))
                    for g in (row_guess, col_guess)
                ]
            )
        cuts = kth_largest(
            jnp.concatenate([magnitude, magnitude.T]),
            top_fraction_count(alpha, n1),
            axis=1,
            guess=guess,
            gather=gather,
        )
        return cuts[:n1], cuts[n1:]
    row_cut = kth_largest(
        magnitude, top_fraction_count(alpha, n2), axis=1, guess=row_guess, gather=gather
    )
    col_cut = kth_largest(
        magnitude, top_fraction_count(alpha, n1), axis=0, guess=col_guess, gather=gather
    )
    return row_cut, col_cut


def _check_fraction(alpha, name: str = "alpha") -> None:
    """Refuse a concrete ``alpha`` that is not a real number in [0, 1] (NaN included), by name. A
    traced one cannot be checked here (see ``sparsify_top_fraction``)."""
    if not _checks.is_concrete(alpha):
        return
    value = _checks.as_real(alpha)
    if value is None:
        raise ValueError(f"{name} must be a real number in [0, 1], got {alpha!r}")
    if not 0.0 <= value <= 1.0:
        raise ValueError(
            f"{name} must lie in [0, 1] (the fraction of each row and column kept), got {value}"
        )


def sparsify_top_fraction(x: jax.Array, alpha, *, gather: bool = True) -> jax.Array:
    """ScaledGD's sparsification operator T_α (Tong, Ma, Chi 2021; LRPCA paper eq. 4).

        [T_α(M)]_ij = M_ij  if |M_ij| ≥ |M[i, :]|₍ₖ₎ with k = ⌊α n2⌋
                               and |M_ij| ≥ |M[:, j]|₍ₖ₎ with k = ⌊α n1⌋,
                      0     otherwise,

    where |v|₍ₖ₎ is the k-th largest magnitude of v: an entry survives only if it is among the
    largest α-fraction of both its row and its column (ties at the cut-off are kept).

    Args:
      x: (n1, n2) matrix; integer and bool ``x`` are ranked and returned in the default float.
      alpha: the fraction α in [0, 1], a number or a traced scalar. A concrete α outside [0, 1] (or
        NaN) raises ``ValueError`` naming ``alpha`` (α < 0 would zero everything, α > 1 keep
        everything); a traced one outside it gives an all-NaN result.
      gather: ``False`` compiles a smaller program that runs longer on a CPU (see
        ``lowrank_jax.selection.kth_largest``): for a one-off call inside a larger program, such
        as ScaledGD's initialisation. The result is the same. Default True.

    Returns:
      T_α(x), an (n1, n2) array in x's floating dtype.
    """
    _check_fraction(alpha)
    x = _checks.as_floating(x)
    if x.ndim != 2:
        raise ValueError(f"x must be a 2-D matrix (n1, n2), got shape {tuple(x.shape)}")
    return _sparsify_top_fraction(x, alpha, gather=_checks.check_flag(gather, "gather"))


@functools.partial(jax.jit, static_argnames=("gather",))
def _sparsify_top_fraction(x, alpha, gather=True):
    mag = jnp.abs(x)
    row_cut, col_cut = top_fraction_thresholds(mag, alpha, gather=gather)
    out = apply_top_fraction(x, mag, row_cut, col_cut)
    return jnp.where((alpha >= 0) & (alpha <= 1), out, jnp.nan)  # one select, fused with the mask


def apply_top_fraction(x, magnitude, row_cut, col_cut):
    """Zero the entries of ``x`` below either cut-off: the masking half of T_α.

    Entry (i, j) is kept where magnitude[i, j] ≥ row_cut[i] and magnitude[i, j] ≥ col_cut[j].

    Args:
      x: (n1, n2) matrix.
      magnitude: (n1, n2) magnitudes the cut-offs refer to (typically |x|).
      row_cut: (n1,) per-row cut-offs, as from ``top_fraction_thresholds``.
      col_cut: (n2,) per-column cut-offs.

    Returns:
      An (n1, n2) array: ``x`` where kept, 0 elsewhere.
    """
    keep = (magnitude >= row_cut[:, None]) & (magnitude >= col_cut[None, :])
    return jnp.where(keep, x, jnp.zeros_like(x))
