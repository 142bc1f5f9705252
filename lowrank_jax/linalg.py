"""Dense linear algebra shared by every family: truncated SVDs, balanced factors, small SPD solves,
the Frobenius norm and the relative error.

Conventions: a truncated SVD returns ``(U, s, V)`` with ``U`` of shape (m, r), ``s`` of shape (r,)
in decreasing order and ``V`` of shape (n, r), so that ``A ≈ U @ diag(s) @ V.T``. ``V`` (not
``V.T``) is returned because the low-rank solvers work with the factor pair (L, R), A ≈ L Rᵀ.

Cost: a full ``jnp.linalg.svd`` of an n × n matrix is O(n³) work inside one LAPACK call, while the
randomized range finder (``randomized_svd``) needs a handful of thin matrix products and QR
factorisations of (n, r + p) blocks, O(n² (r + p)) work.

Precision: the factorisations built from matrix products (``gram_svd``,
``gram_rank_factors``, ``randomized_svd``, ``best_rank_approximation``,
``low_rank_factors``, ``projected_factors``) trace them at full float32 precision unless the
caller chose one (``lowrank_jax.precision``), as ``jnp.linalg.svd`` is full precision on every
backend; a GPU's default TF32 products (relative error ~1e-3) would carry into σ and the vectors.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from lowrank_jax import _checks
from lowrank_jax.precision import full_precision


class SVDResult(NamedTuple):
    """Thin truncated SVD ``A ≈ U @ diag(s) @ V.T`` with ``s`` decreasing.

    Attributes:
      U: (m, r) left singular vectors (orthonormal columns).
      s: (r,) singular values, non-negative and decreasing.
      V: (n, r) right singular vectors (orthonormal columns).
    """

    U: jax.Array  # (m, r)
    s: jax.Array  # (r,)
    V: jax.Array  # (n, r)


def _lapack_float(A):
    """A as an array LAPACK can factor: integer and boolean data in the default float, float16 and
    bfloat16 in float32 (LAPACK has no half precision), the rest as it is."""
    A = jnp.asarray(A)
    return A.astype(_checks.compute_dtype(A.dtype))


def _svd_input(A, rank, name: str):
    """(A as a LAPACK float matrix, rank checked against its shape) for the SVD helpers."""
    A = _lapack_float(A)
    if A.ndim != 2:
        raise ValueError(f"{name} needs a matrix, got shape {A.shape}")
    return A, _checks.check_rank(rank, A.shape)


def after(x: jax.Array, *deps) -> jax.Array:
    """``x`` with a data dependency on every array in ``deps``: same values, same derivative.

    The result is x + Σ_d 0·d₀, with d₀ one entry of each d (taken as 0 where it is not finite, and
    without derivative), so whatever consumes it cannot start before ``deps`` are computed. Its
    values are those of ``x`` (a −0.0 becomes +0.0). XLA does not fold 0·d for floats (0·NaN is
    NaN), so the dependency survives compilation.

    Why: XLA's CPU backend runs independent kernels of one program at the same time, and under
    ``vmap`` jaxlib (0.10) splits each batched LAPACK kernel (SVD, QR, eigh, Cholesky, LU,
    triangular solves) over the process's intra-op thread pool and blocks a pool thread until its
    part is done. Two such kernels at once can block every thread of a small pool (two threads on a
    2-core machine) and hang the program. A factorisation that reads ``after(M, previous_result)``
    waits for the previous one instead. ``lax.optimization_barrier`` does not give this ordering:
    XLA expands it before the CPU runtime orders its kernels.

    Args:
      x: the array passed through (any array-like).
      *deps: arrays that must be computed before the result is used, each with at least one entry.

    Returns:
      ``jnp.asarray(x)`` plus a zero that depends on ``deps``: x's shape, dtype and values.
    """
    x = jnp.asarray(x)
    tie = jnp.zeros((), x.dtype)
    for d in deps:
        d0 = jax.lax.stop_gradient(jnp.ravel(jnp.asarray(d))[0])
        tie = tie + (0 * jnp.where(jnp.isfinite(d0), d0, 0)).astype(x.dtype)
    return x + tie


def qr(A: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Reduced QR factorisation ``jnp.linalg.qr(A)`` whose R cannot be used before Q is finished.

    A QR's R comes from LAPACK's ``geqrf`` and its Q from a second kernel (``orgqr``), so an SVD of
    R, the usual next step, could run beside that kernel and hang a ``vmap``ped solver on a CPU (see
    ``after``). The returned R is ``after(R, Q)``.

    Args:
      A: (m, n) matrix.

    Returns:
      ``(Q, R)`` with A = Q R, k = min(m, n): Q (m, k) with orthonormal columns, R (k, n) upper
      triangular.
    """
    Q, R = jnp.linalg.qr(A)
    return Q, after(R, Q)


def _thin_svd(A: jax.Array) -> SVDResult:
    """Thin SVD of A (m, n): all k = min(m, n) triplets, the long side first reduced by a QR
    factorisation (A = Q B, SVD of the small B) when it is at least twice the short one (much
    cheaper on CPU)."""
    A = _lapack_float(A)
    m, n = A.shape
    if m >= 2 * n:
        Q, B = qr(A)
        Ub, s, Vt = jnp.linalg.svd(B, full_matrices=False)
        return SVDResult(Q @ Ub, s, Vt.T)
    if n >= 2 * m:
        Q, B = qr(A.T)
        Ub, s, Vt = jnp.linalg.svd(B, full_matrices=False)
        return SVDResult(Vt.T, s, Q @ Ub)
    U, s, Vt = jnp.linalg.svd(A, full_matrices=False)
    return SVDResult(U, s, Vt.T)


def truncated_svd(A: jax.Array, rank: int) -> SVDResult:
    """Exact top-``rank`` singular triplets of ``A``, differentiated through the kept triplets only.

    The triplets come from the thin SVD A = U Σ Vᵀ (k = min(m, n) triplets; the long side is first
    reduced by a QR factorisation, A = Q B, when it is at least twice the short one). Derivatives
    (forward and reverse mode) are those of the first r triplets alone. With P = Uᵀ dA V_r and
    Q = Vᵀ dAᵀ U_r (k × r):

        dσ_i = P_ii,
        Uᵀ dU_r = F ∘ (P Σ_r + Σ Q),   Vᵀ dV_r = F ∘ (Q Σ_r + Σ P),
        F_ji = 1 / (σ_i² − σ_j²) (j ≠ i),
        plus (I − U Uᵀ) dA V_r Σ_r⁻¹ in dU_r when m > k
        and (I − V Vᵀ) dAᵀ U_r Σ_r⁻¹ in dV_r when n > k.

    Only pairs with a kept index i enter. Autodiff through the full SVD would also form
    1 / (σ_j² − σ_l²) for pairs of discarded values and 1/σ_j for discarded zeros. Those terms
    multiply zero cotangents, but a tie or a zero among the discarded values, as in any matrix of
    rank below min(m, n), makes them NaN. Here the derivative is finite wherever it exists: the kept
    values distinct and positive, and σᵣ > σᵣ₊₁.

    Args:
      A: (m, n) matrix, any array-like; integer and bool data are factored in the default float,
        float16 and bfloat16 in float32.
      rank: the number r of triplets kept, an integer with 1 ≤ r ≤ min(m, n) (static).

    Returns:
      ``SVDResult`` ``(U (m, r), s (r,), V (n, r))``, s decreasing, A ≈ U diag(s) Vᵀ.
    """
    # An array first: the rule's function takes A as a pytree, and a list reached it as numbers.
    return _truncated_svd(_lapack_float(A), rank)


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _truncated_svd(A: jax.Array, rank: int) -> SVDResult:
    rank = _checks.check_rank(rank, A.shape)
    U, s, V = _thin_svd(A)
    return SVDResult(U[:, :rank], s[:rank], V[:, :rank])


@_truncated_svd.defjvp
# traced when a caller's jit is differentiated, after the solver's context has closed
@full_precision
def _truncated_svd_jvp(rank, primals, tangents):
    (A,), (dA,) = primals, tangents
    m, n = A.shape
    rank = _checks.check_rank(rank, A.shape)
    U, s, V = _thin_svd(A)
    k = s.shape[0]
    out = SVDResult(U[:, :rank], s[:rank], V[:, :rank])
    sr = out.s
    dAV = dA @ out.V  # (m, r)
    dAtU = (out.U.T @ dA).T  # (n, r)
    P = U.T @ dAV  # P_ji = u_jᵀ dA v_i
    Q = V.T @ dAtU  # Q_ji = v_jᵀ dAᵀ u_i
    off = jnp.arange(k)[:, None] != jnp.arange(sr.shape[0])[None, :]
    gap = jnp.square(sr)[None, :] - jnp.square(s)[:, None]
    F = jnp.where(off, 1.0 / jnp.where(off, gap, 1.0), 0.0)
    dU = U @ (F * (P * sr + s[:, None] * Q))
    dV = V @ (F * (Q * sr + s[:, None] * P))
    if m > k:
        dU = dU + (dAV - U @ P) / sr
    if n > k:
        dV = dV + (dAtU - V @ Q) / sr
    return out, SVDResult(dU, jnp.diagonal(P[: sr.shape[0]]), dV)


@full_precision
def best_rank_approximation(
    A: jax.Array,
    rank: int,
    *,
    method: str = "exact",
    key: jax.Array | None = None,
    oversample: int = 10,
    power_iters: int = 4,
) -> jax.Array:
    """The best rank-``rank`` approximation P_r(A) = U_r Σ_r V_rᵀ of ``A`` (Eckart–Young).

    Its derivative exists wherever σᵣ > σᵣ₊₁, ties among the kept values included, and each
    method carries it in that form, not through its singular vectors (which have no derivative
    within a tie: the product rule through ``truncated_svd``'s factors gives NaN at a multiple
    of the identity, or at diag(3, 3, 1) with r = 2). With a thin SVD A = U Σ Vᵀ (k columns) and
    T = Uᵀ dA V (k × k):

        dP = U D Vᵀ + (I − U Uᵀ) dA V_r V_rᵀ + U_r U_rᵀ dA (I − V Vᵀ),
        D_ij = T_ij                                       i, j < r (both kept),
        D_ij = σ_p (σ_p T_ij + σ_q T_ji) / (σ_p² − σ_q²)  one kept index p, one
                                                          discarded index q,
        D_ij = 0                                          i, j ≥ r (both discarded).

    Only pairs across the gap enter a denominator. ``"exact"`` applies it to the thin SVD
    (k = min(m, n); the last two terms vanish where U or V is square). ``"randomized"`` applies it
    to the sketch's k = min(r + oversample, m, n) triplets, i.e. differentiates the projection of
    Q Qᵀ A (Q the sketch's range): exact when rank A ≤ k, otherwise as accurate as the sketch.
    ``"gram"`` writes P_r(A) = A V_r V_rᵀ (m ≥ n; transposed otherwise) with V_r a basis of the
    top-r eigenspace of AᵀA, differentiated as that span (``top_eigenspace``). At σᵣ = σᵣ₊₁ the
    projection itself is not unique and the derivative is inf/NaN.

    Args:
      A: (m, n) matrix, any array-like (integer and half-precision data as in
        ``truncated_svd``).
      rank: the rank r, an integer with 1 ≤ r ≤ min(m, n) (static).
      method: ``"exact"`` (default: the thin SVD), ``"gram"`` (the eigendecomposition of the small
        Gram matrix, ``gram_rank_factors``; for thin or wide A) or ``"randomized"``
        (``randomized_svd``); anything else raises ``ValueError``.
      key: ``"randomized"`` only: a ``jax.random`` key or an integer seed for the sketch; default
        ``jax.random.key(0)``.
      oversample: ``"randomized"`` only: extra sketch columns p, an integer ≥ 0 (default 10).
      power_iters: ``"randomized"`` only: power iterations q, an integer ≥ 0 (default 4).

    Returns:
      P_r(A), an (m, n) array in A's floating dtype.
    """
    # outside the rules: autodiff casts back
    A, rank = _svd_input(A, rank, "best_rank_approximation")
    if method == "exact":
        return _best_rank(A, rank)
    if method == "gram":
        L, V = gram_rank_factors(A, rank)
        return L @ V.T
    if method == "randomized":
        key = _sketch_key(key)
        oversample = _checks.check_positive_int(oversample, "oversample", minimum=0)
        power_iters = _checks.check_positive_int(power_iters, "power_iters", minimum=0)
        return _best_rank_sketched(A, key, rank, oversample, power_iters)
    raise ValueError(f"method must be 'exact', 'gram' or 'randomized', got {method!r}")


def _gap_map(T, s, rank):
    """T ↦ D of ``best_rank_approximation``'s rule, for a (k, k) T and k ≥ rank singular
    values s. The map is its own transpose (⟨M, D(T)⟩ = ⟨D(M), T⟩), so reverse mode applies it
    too."""
    k = s.shape[0]
    kept = jnp.arange(k) < rank
    p_row = kept[:, None] & ~kept[None, :]  # (i, j) with i kept, j discarded
    p_col = ~kept[:, None] & kept[None, :]
    sp = jnp.where(p_row, s[:, None], s[None, :])  # σ of the kept index of the pair
    sq = jnp.where(p_row, s[None, :], s[:, None])  # σ of the discarded one
    across = p_row | p_col
    gap = jnp.where(across, jnp.square(sp) - jnp.square(sq), 1.0)
    return jnp.where(
        across, sp * (sp * T + sq * T.T) / gap, jnp.where(kept[:, None] & kept[None, :], T, 0.0)
    )


def _projection_tangent(U, s, V, rank, dA):
    """dP_r of ``best_rank_approximation``'s rule from a thin SVD (U, s, V) with k ≥ rank
    columns; the terms outside U's and V's span are added where they are not square."""
    k = s.shape[0]
    Ur, Vr = U[:, :rank], V[:, :rank]
    T = U.T @ dA @ V
    dP = U @ _gap_map(T, s, rank) @ V.T
    if U.shape[0] > k:
        dP = dP + (dA @ Vr - U @ T[:, :rank]) @ Vr.T
    if V.shape[0] > k:
        dP = dP + Ur @ (Ur.T @ dA - T[:rank] @ V.T)
    return dP


def _rank_product(U, s, V, rank):
    return (U[:, :rank] * s[:rank]) @ V[:, :rank].T


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _best_rank(A, rank):
    svd = truncated_svd(A, rank)
    return (svd.U * svd.s) @ svd.V.T


@_best_rank.defjvp
@full_precision
def _best_rank_jvp(rank, primals, tangents):
    (A,), (dA,) = primals, tangents
    U, s, V = _thin_svd(A)
    return _rank_product(U, s, V, rank), _projection_tangent(U, s, V, rank, dA)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3, 4))
def _best_rank_sketched(A, key, rank, oversample, power_iters):
    return _rank_product(*_sketched_svd(A, key, rank, oversample, power_iters), rank)


@_best_rank_sketched.defjvp
@full_precision
def _best_rank_sketched_jvp(rank, oversample, power_iters, primals, tangents):
    (A, key), (dA, _) = primals, tangents
    U, s, V = _sketched_svd(A, key, rank, oversample, power_iters)
    return _rank_product(U, s, V, rank), _projection_tangent(U, s, V, rank, dA)


def _sketch_key(key):
    """The key of a randomized method: ``jax.random.key(0)`` when None (the sketch is a numerical
    device; with a spectral gap its outcome does not depend on the key beyond working precision),
    an integer taken as a seed."""
    return jax.random.key(0) if key is None else _checks.as_key(key)


def _sketched_svd(A, key, rank, oversample, power_iters) -> SVDResult:
    """All k = min(rank + oversample, m, n) triplets of ``randomized_svd``'s sketch."""
    k = min(rank + oversample, *A.shape)
    return randomized_svd(A, k, key, oversample=rank + oversample - k, power_iters=power_iters)


@full_precision
def randomized_svd(
    A: jax.Array,
    rank: int,
    key: jax.Array | None = None,
    *,
    oversample: int = 10,
    power_iters: int = 4,
    start: jax.Array | None = None,
    axis_name: str | None = None,
    rows: int | None = None,
) -> SVDResult:
    """Randomized truncated SVD (Halko, Martinsson, Tropp 2011, Alg. 4.4 + 5.1).

    With l = rank + oversample and a Gaussian test matrix Ω (n, l): Q = orth(A Ω); repeat
    ``power_iters`` times: Q = orth(A orth(Aᵀ Q)); then B = Qᵀ A (l, n) is factorised through a QR
    of Bᵀ and an (l, l) SVD. Each power iteration sharpens the spectrum by (σⱼ/σₗ₊₁)², so the
    top ``rank`` triplets agree with the exact ones to working precision when the spectrum has a gap
    after ``rank`` (as a rank-r matrix plus sparse noise has).

    Args:
      A: (m, n) matrix (under ``axis_name``: this device's rows of it).
      rank: the number of triplets returned, an integer with 1 ≤ rank ≤ min(m, n) (static).
      key: ``jax.random`` key for Ω (an integer is taken as a seed); required unless ``start`` is
        given (there is no default draw: a ``ValueError`` says so).
      oversample: extra columns p of the sketch, an integer ≥ 0 (static; default 10). The sketch has
        min(rank + p, m, n) columns.
      power_iters: power iterations q, an integer ≥ 0 (static; default 4).
      start: optional (n, l) block with l ≥ rank replacing Ω — a warm start such as the ``V`` of the
        previous call of an iterative solver whose matrix changes slowly (subspace iteration); then
        ``key`` is not used.
      axis_name: inside ``shard_map`` with A split by rows over that mesh axis: the row-split
        products A Ω, A W stay local and are orthonormalised by ``tsqr``; the column-side
        products Aᵀ Q = Σ_i A_iᵀ Q_i and B = Qᵀ A are summed across devices. Same Ω, hence the same
        subspace up to rounding. Default None: no sharding.
      rows: with ``axis_name``, the global number of rows m (static; required there).

    Returns:
      ``SVDResult`` ``(U (m, rank), s (rank,), V (n, rank))``, s decreasing. Under
      ``axis_name`` U comes back split by rows like A, s and V replicated.

    Example:
        ```python
        import jax, jax.numpy as jnp
        from lowrank_jax import linalg

        k1, k2 = jax.random.split(jax.random.key(0))
        A = jax.random.normal(k1, (500, 10)) @ jax.random.normal(k2, (10, 300))
        U, s, V = linalg.randomized_svd(A, 10, jax.random.key(1))  # A ≈ U diag(s) Vᵀ
        # A has rank 10: the relative error is rounding, ≈ 1e-6 in float32
        print(jnp.linalg.norm(A - (U * s) @ V.T) / jnp.linalg.norm(A))
        ```
    """
    A = _lapack_float(A)
    if A.ndim != 2:
        raise ValueError(f"randomized_svd needs a matrix, got shape {A.shape}")
    m, n = A.shape
    rank = _checks.check_rank(rank, (m if rows is None else rows, n))
    oversample = _checks.check_positive_int(oversample, "oversample", minimum=0)
    power_iters = _checks.check_positive_int(power_iters, "power_iters", minimum=0)
    orth_rows: Callable[[jax.Array], tuple[jax.Array, jax.Array]]
    if axis_name is None:
        orth_rows, total = jnp.linalg.qr, (lambda x: x)
    else:
        if rows is None:
            raise ValueError(
                "randomized_svd with axis_name needs rows= (the global number of rows)"
            )
        m = rows
        orth_rows = lambda Y: tsqr(Y, axis_name)  # noqa: E731
        total = lambda x: jax.lax.psum(x, axis_name)  # noqa: E731
    if start is not None:
        start = jnp.asarray(start)
        if start.ndim != 2 or start.shape[0] != n or start.shape[1] < rank:
            raise ValueError(
                f"start must be an (n, l) block with n = {n} (A's columns) and l >= rank = {rank}, "
                f"got shape {start.shape}"
            )
        omega = start.astype(A.dtype)
    else:
        if key is None:
            raise ValueError("randomized_svd needs a key (or a start block)")
        key = _checks.as_key(key)  # an integer is a seed
        omega = jax.random.normal(key, (n, min(rank + oversample, m, n)), A.dtype)
    # Products with Aᵀ are written (Qᵀ A)ᵀ: XLA's CPU dot transposes A for Aᵀ Q (~4x slower).
    Q, _ = orth_rows(A @ omega)
    for _ in range(power_iters):
        W, _ = jnp.linalg.qr(total((Q.T @ A).T))
        Q, _ = orth_rows(A @ W)
    Bt = total((Q.T @ A).T)  # (n, l)
    Q2, R2 = qr(Bt)  # B = R2ᵀ Q2ᵀ
    Ub, s, Vbt = jnp.linalg.svd(R2.T)
    return SVDResult((Q @ Ub)[:, :rank], s[:rank], (Q2 @ Vbt.T)[:, :rank])


def tsqr(Y_local: jax.Array, axis_name: str) -> tuple[jax.Array, jax.Array]:
    """QR factorisation of a tall matrix split by rows over a ``shard_map`` mesh axis (TSQR).

    Each device factors its block Y_i = Q_i R_i (n_i ≥ l rows), the l × l R_i are gathered (D l²
    numbers for D devices: the only communication), [R_1; …; R_D] = Q̂ R is factored on every
    device, and device i returns its rows Q_i Q̂_i of Q. Householder-stable, unlike Cholesky-QR of
    the summed Gram matrix.

    Args:
      Y_local: (n_i, l) this device's rows of Y, n_i ≥ l (else ``ValueError``: use fewer devices).
      axis_name: the mesh axis that splits Y's rows.

    Returns:
      ``(Q_local, R)`` with Y = Q R: Q_local (n_i, l) this device's rows of Q (orthonormal columns
      across devices), R (l, l) upper triangular, replicated.
    """
    n_i, l = Y_local.shape
    if n_i < l:
        raise ValueError(
            f"tsqr needs at least l = {l} rows per device, got {n_i}: use fewer devices"
        )
    Q1, R1 = qr(Y_local)  # the second QR starts once Q1 is done (see qr)
    Q2, R = jnp.linalg.qr(jax.lax.all_gather(R1, axis_name).reshape(-1, l))
    block = jax.lax.dynamic_slice_in_dim(Q2, jax.lax.axis_index(axis_name) * l, l)
    return Q1 @ block, R


def top_eigh(G: jax.Array, rank: int) -> tuple[jax.Array, jax.Array]:
    """The ``rank`` largest eigenpairs of a symmetric matrix ``G``.

    For a Gram matrix G = AᵀA these are the squared singular values and right singular vectors of A,
    so A V Vᵀ is A's rank-r Eckart–Young projection (``gram_svd``, and the SDL solver that forms
    G without A).

    Args:
      G: (n, n) symmetric matrix.
      rank: the number of eigenpairs, an integer with 1 ≤ rank ≤ n (static).

    Returns:
      ``(λ, V)``: λ (rank,) decreasing eigenvalues, V (n, rank) orthonormal eigenvectors.
    """
    lam, V = jnp.linalg.eigh(G)
    return lam[::-1][:rank], V[:, ::-1][:, :rank]


def top_eigenspace(G: jax.Array, rank: int) -> jax.Array:
    """Orthonormal basis of the top-``rank`` eigenspace of a symmetric G, differentiated as a span.

    The basis is ``top_eigh``'s vectors V_r. The span (the projector Π = V_r V_rᵀ) is
    differentiable wherever λᵣ > λᵣ₊₁, ties among the kept eigenvalues included; the
    eigenvectors within a tie are not (``eigh``'s derivative is NaN there, and reverse mode through
    it is NaN whenever two eigenvalues tie, kept or not, e.g. the zeros of a rank-deficient Gram
    matrix). The tangent given here is the part of dV_r outside the span, with T = V_dᵀ dG V_r (V_d
    the other eigenvectors):

        dV_r[:, p] = Σ_q v_q T_qp / (λ_p − λ_q)    (p kept, q not),

    which drops the rotation within the span (a gauge term). So it is exact for any function of
    V_r V_rᵀ — dΠ = dV_r V_rᵀ + V_r dV_rᵀ — such as C ↦ C V_r V_rᵀ, and must not be used where a
    result depends on the individual vectors.

    Args:
      G: (n, n) symmetric matrix (other shapes raise ``ValueError``).
      rank: the dimension r of the eigenspace, an integer with 1 ≤ r ≤ n (static).

    Returns:
      V_r, an (n, r) array with orthonormal columns.
    """
    G = jnp.asarray(G)
    if G.ndim != 2 or G.shape[0] != G.shape[1]:
        raise ValueError(f"top_eigenspace needs a square matrix, got shape {G.shape}")
    return _top_eigenspace(G, _checks.check_rank(rank, G.shape))


@functools.partial(jax.custom_jvp, nondiff_argnums=(1,))
def _top_eigenspace(G, rank):
    return top_eigh(G, rank)[1]


@_top_eigenspace.defjvp
@full_precision
def _top_eigenspace_jvp(rank, primals, tangents):
    (G,), (dG,) = primals, tangents
    lam, V = jnp.linalg.eigh(G)  # increasing; eigh symmetrises G
    rest = G.shape[0] - rank
    Vr, lr = V[:, rest:][:, ::-1], lam[rest:][::-1]
    Vd, ld = V[:, :rest], lam[:rest]
    T = Vd.T @ (0.5 * (dG + dG.T)) @ Vr  # (n − r, r)
    return Vr, Vd @ (T / (lr[None, :] - ld[:, None]))


@full_precision
def gram_rank_factors(A: jax.Array, rank: int) -> tuple[jax.Array, jax.Array]:
    """Factors (L, R) with L Rᵀ = A's best rank-r approximation, from the Gram of A's short side.

    For A (m, n) with m ≥ n: (A V_r, V_r) with V_r a basis of the top-r eigenspace of AᵀA (the right
    singular vectors of A), so that A V_r V_rᵀ = U_r Σ_r V_rᵀ, from one product AᵀA and an n × n
    ``eigh`` as in ``gram_svd``. For m < n: (U_r, Aᵀ U_r) with U_r U_rᵀ A the same projection.
    Differentiated as the span (``top_eigenspace``): the derivative of the product is exact
    wherever σᵣ > σᵣ₊₁, at tied singular values too. A is scaled by a power of two before it is
    squared, as in ``gram_svd``.

    Args:
      A: (m, n) matrix, any array-like (integer and half-precision data as in
        ``truncated_svd``).
      rank: the rank r, an integer with 1 ≤ r ≤ min(m, n) (static).

    Returns:
      ``(L, R)``, L (m, r) and R (n, r), with L Rᵀ = P_r(A): (A V_r, V_r) for m ≥ n, (U_r, Aᵀ U_r)
      for m < n.
    """
    A, rank = _svd_input(A, rank, "gram_rank_factors")
    if A.shape[0] < A.shape[1]:
        V, L = gram_rank_factors(A.T, rank)
        return L, V
    B = A / power_of_two_scale(A)  # the eigenspace of (cA)ᵀ(cA) is that of AᵀA
    V = top_eigenspace(B.T @ B, rank)
    return A @ V, V


def above_rounding(values: jax.Array, size: float) -> jax.Array:
    """Mask of the singular values or eigenvalues that are not rounding: |v| > size·ε·max|v|.

    With ``size`` the matrix's larger dimension this is the numerical-rank cut-off of
    ``numpy.linalg.matrix_rank``, for a matrix known to working precision; for a Gram matrix formed
    from sums, take ``size`` from ``gram_rounding_size``.

    Args:
      values: array of singular values or eigenvalues (the maximum is taken over all its entries).
      size: the cut-off's multiple of ε, a positive number.

    Returns:
      Boolean array of ``values``' shape; all False when every value is 0.
    """
    mag = jnp.abs(values)
    return mag > size * jnp.finfo(mag.dtype).eps * jnp.max(mag)


def gram_rounding_size(d: int, n: int) -> float:
    """The ``size`` of ``above_rounding`` for a d × d matrix formed from n-term sums: d·√n.

    Each entry of a formed G = AᵀDA (A with n rows) carries rounding of about √n·ε·‖G‖, the typical
    error of an n-term sum, so its eigenvalues carry about d·√n·ε·‖G‖: more than the d·ε·max|μ| of
    ``numpy.linalg.matrix_rank``. The zero eigenvalues of G for an A without full column rank can
    exceed that smaller cut-off; counted as signal, they let Newton iterates
    (``transforms.newton_direction``) drift along null(A) and SDL's supervised codes grow without
    bound.

    Args:
      d: the dimension of G, an integer ≥ 1.
      n: the number of terms in each sum (the rows of A), an integer ≥ 1.

    Returns:
      d·√n, a Python float.
    """
    return d * math.sqrt(n)


def power_of_two_scale(x: jax.Array) -> jax.Array:
    """A power of two c near max|x|, so that f(x) = c·f(x/c) can be computed at unit scale.

    c = 2ᵉ with 2ᵉ⁻¹ ≤ max|x| < 2ᵉ (1 when x is all zero or not finite), held constant for autodiff.
    Dividing by c is exact, so a positively homogeneous map f (f(cx) = c f(x): singular values, the
    path-norm prox) can be computed as c·f(x/c), where squares neither underflow nor overflow, with
    the same derivative (Euler's identity: none flows through c).

    e is at most the dtype's largest exponent less 3 (2¹²⁵ in float32), so that 1/c is a normal
    number: XLA:CPU divides by multiplying with the reciprocal and flushes a subnormal one to 0, and
    2¹²⁸ is inf in float32. Near the top of the range x/c is then below 8 instead of 1.

    Args:
      x: floating-point array of any shape.

    Returns:
      c, a 0-d array of x's dtype, without derivative.
    """
    top = jnp.max(jnp.abs(x))
    usable = (top > 0) & jnp.isfinite(top)
    _, exponent = jnp.frexp(jnp.where(usable, top, jnp.ones_like(top)))
    exponent = jnp.minimum(exponent, jnp.finfo(top.dtype).maxexp - 3)
    # (frexp(1) gives 2¹, which the guard's stand-in must not leak: 1 for all-zero or non-finite x)
    return jax.lax.stop_gradient(
        jnp.where(usable, jnp.ldexp(jnp.ones_like(top), exponent), jnp.ones_like(top))
    )


@full_precision
def gram_svd(A: jax.Array, rank: int) -> SVDResult:
    """Top-``rank`` singular triplets of a thin (or wide) ``A`` from its small Gram matrix.

    AᵀA = V Λ Vᵀ (n × n for m ≥ n; A Aᵀ for m < n), σ = √λ, U = A V / σ: one matrix product of A
    with itself (compute-bound, BLAS-3) and an n × n ``eigh``, cheaper on a CPU than a QR of A when
    m ≫ n. Squaring costs accuracy only below the kept spectrum: σ_j is accurate to ~ε σ₁²/σ_j, so
    the top-r triplets are exact to working precision unless σ_r < √ε σ₁. Columns of U for σ = 0 are
    0. A is scaled by the power of two nearest its largest entry before it is squared (exact, undone
    on σ, ``power_of_two_scale``), so AᵀA neither underflows nor overflows where the squares of
    A's entries would (float32 entries of 1e-30 or 1e30).

    Args:
      A: (m, n) matrix, any array-like (integer and half-precision data as in
        ``truncated_svd``).
      rank: the number r of triplets, an integer with 1 ≤ r ≤ min(m, n) (static).

    Returns:
      ``SVDResult`` ``(U (m, r), s (r,), V (n, r))``, s decreasing.
    """
    A, rank = _svd_input(A, rank, "gram_svd")
    m, n = A.shape
    if m < n:
        t = gram_svd(A.T, rank)
        return SVDResult(t.V, t.s, t.U)
    c = power_of_two_scale(A)  # σ(cA) = cσ(A)
    A = A / c
    lam, V = top_eigh(A.T @ A, rank)
    s = jnp.sqrt(jnp.maximum(lam, 0.0))
    AV = A @ V
    U = AV / jnp.where(s > 0, s, 1.0)
    return SVDResult(U, s * c, V)


def low_rank_svd(
    A: jax.Array,
    rank: int,
    *,
    method: str = "randomized",
    key: jax.Array | None = None,
    oversample: int = 10,
    power_iters: int = 4,
) -> SVDResult:
    """Top-``rank`` singular triplets of ``A`` by an exact, Gram or randomized method.

    Dispatches to ``truncated_svd`` (``method="exact"``), ``gram_svd`` (``"gram"``, for thin
    or wide matrices) or ``randomized_svd`` (``"randomized"``).

    Args:
      A: (m, n) matrix.
      rank: the number r of triplets, an integer with 1 ≤ r ≤ min(m, n) (static).
      method: ``"randomized"`` (default), ``"exact"`` or ``"gram"``; anything else raises
        ``ValueError``.
      key: ``"randomized"`` only: a ``jax.random`` key or an integer seed; default
        ``jax.random.key(0)`` (the sketch is a numerical device whose outcome does not depend on the
        key beyond working precision when the spectrum has a gap).
      oversample: ``"randomized"`` only: extra sketch columns, an integer ≥ 0 (default 10).
      power_iters: ``"randomized"`` only: power iterations, an integer ≥ 0 (default 4).

    Returns:
      ``SVDResult`` ``(U (m, r), s (r,), V (n, r))``, s decreasing.
    """
    if method == "exact":
        return truncated_svd(A, rank)
    if method == "gram":
        return gram_svd(A, rank)
    if method == "randomized":
        return randomized_svd(
            A, rank, _sketch_key(key), oversample=oversample, power_iters=power_iters
        )
    raise ValueError(f"method must be 'exact', 'gram' or 'randomized', got {method!r}")


def balanced_factors(svd: SVDResult) -> tuple[jax.Array, jax.Array]:
    """Balanced factors L = U Σ^(1/2), R = V Σ^(1/2) of a truncated SVD.

    Then L Rᵀ = U Σ Vᵀ and LᵀL = RᵀR = Σ.

    Args:
      svd: an ``SVDResult`` ``(U (m, r), s (r,), V (n, r))``.

    Returns:
      ``(L, R)``: L (m, r) and R (n, r).
    """
    root = jnp.sqrt(svd.s)
    return svd.U * root, svd.V * root


@full_precision
def low_rank_factors(
    A: jax.Array,
    rank: int,
    method: str = "randomized",
    key: jax.Array | None = None,
    oversample: int = 10,
    power_iters: int = 4,
) -> tuple[jax.Array, jax.Array]:
    """Balanced factors (L, R) = (U_r Σ_r^(1/2), V_r Σ_r^(1/2)) of A's best rank-r approximation.

    ``method="exact"``: the exact truncated SVD, differentiated through the kept triplets
    (``truncated_svd``: exact wherever that derivative exists, forward and reverse mode).
    ``"randomized"`` and ``"gram"``: as ``projected_factors``, whose reverse mode is the
    derivative of the rank-r projection, for losses of X = L Rᵀ: of the projection of the sketch
    Q Qᵀ A for ``"randomized"`` (exact when rank A ≤ rank + oversample, as accurate as the sketch
    otherwise), of P_r(A) itself for ``"gram"`` (exact wherever σᵣ > σᵣ₊₁); no forward mode.

    Args:
      A: (m, n) matrix, any array-like (integer and half-precision data as in
        ``truncated_svd``).
      rank: the rank r, an integer with 1 ≤ r ≤ min(m, n) (static).
      method: ``"randomized"`` (default), ``"exact"`` or ``"gram"``; anything else raises
        ``ValueError``.
      key: ``"randomized"`` only: a ``jax.random`` key or an integer seed; default
        ``jax.random.key(0)``.
      oversample: ``"randomized"`` only: extra sketch columns, an integer ≥ 0 (default 10).
      power_iters: ``"randomized"`` only: power iterations, an integer ≥ 0 (default 4).

    Returns:
      ``(L, R)``: L (m, r) and R (n, r) with L Rᵀ = P_r(A) (up to the sketch for ``"randomized"``)
      and LᵀL = RᵀR = Σ_r.
    """
    if method == "exact":
        # outside the custom rules: autodiff casts back
        A, rank = _svd_input(A, rank, "low_rank_factors")
        return balanced_factors(truncated_svd(A, rank))
    return projected_factors(A, rank, method, key, oversample, power_iters)


@full_precision
def projected_factors(
    A: jax.Array,
    rank: int,
    method: str = "randomized",
    key: jax.Array | None = None,
    oversample: int = 10,
    power_iters: int = 4,
) -> tuple[jax.Array, jax.Array]:
    """Balanced rank-r factors of A whose reverse mode is the rank-r projection's derivative.

    For callers whose loss depends on (L, R) only through X = L Rᵀ (the RPCA solvers: scaled
    gradient descent is equivariant under (L, R) → (LQ, RQ⁻ᵀ)). Reverse mode uses the derivative of
    X = P_r(A) (``best_rank_approximation``'s rule) instead of differentiating the SVD routine.
    The cotangents (L̄, R̄) = (X̄ R, X̄ᵀ L) give X̄ V_r = L̄ Σ_r^(−1/2) and
    U_rᵀ X̄ = (R̄ Σ_r^(−1/2))ᵀ, which hold every entry of M = Uᵀ X̄ V the rule needs, so with the k
    triplets (U, s, V) of the factorisation

        Ā = U D(M) Vᵀ + (I − U Uᵀ) X̄ V_r V_rᵀ + U_r U_rᵀ X̄ (I − V Vᵀ),

    D the rule's gap map. ``"exact"`` takes all k = min(m, n) triplets of the thin SVD: the exact
    derivative of P_r(A) wherever σᵣ > σᵣ₊₁, also where kept singular values tie (where the
    kept-triplet derivative of ``low_rank_factors(method="exact")`` divides by σ₁² − σ₂² and is not
    finite). ``"randomized"`` takes the sketch's k = min(r + oversample, m, n) triplets: the
    derivative of the projection of Q Qᵀ A, exact when rank A ≤ k. ``"gram"`` has all the triplets
    but not accurate left vectors for small σ (A V / σ after squaring), so it differentiates
    X = A V_r V_rᵀ through the span of the top-r eigenspace of AᵀA, where the left vectors only
    enter as A V. Reverse mode only (no ``jvp``); do not use it where a loss depends on the gauge of
    L and R.

    Args:
      A: (m, n) matrix, any array-like (integer and half-precision data as in
        ``truncated_svd``).
      rank: the rank r, an integer with 1 ≤ r ≤ min(m, n) (static).
      method: ``"randomized"`` (default), ``"exact"`` or ``"gram"``; anything else raises
        ``ValueError``.
      key: ``"randomized"`` only: a ``jax.random`` key or an integer seed; default
        ``jax.random.key(0)``.
      oversample: ``"randomized"`` only: extra sketch columns, an integer ≥ 0 (default 10).
      power_iters: ``"randomized"`` only: power iterations, an integer ≥ 0 (default 4).

    Returns:
      ``(L, R)``: L (m, r) and R (n, r), balanced as in ``low_rank_factors``.
    """
    # outside the custom rules: autodiff casts back
    A, rank = _svd_input(A, rank, "projected_factors")
    if method not in ("exact", "gram", "randomized"):
        raise ValueError(f"method must be 'exact', 'gram' or 'randomized', got {method!r}")
    oversample = _checks.check_positive_int(oversample, "oversample", minimum=0)
    power_iters = _checks.check_positive_int(power_iters, "power_iters", minimum=0)
    return _projected_factors(A, rank, method, key, oversample, power_iters)


def _factor_svd(A, rank, method, key, oversample, power_iters, *, for_gradient=False) -> SVDResult:
    """The triplets behind ``_projected_factors``: the sketch's k = min(rank + oversample, m, n)
    for ``"randomized"`` (its first ``rank`` are ``randomized_svd``'s); for ``"gram"`` and
    ``"exact"`` all min(m, n) when ``for_gradient`` (the eigendecomposition has them all; the
    reverse rule needs them), else ``rank``."""
    if method == "randomized":
        return _sketched_svd(A, _sketch_key(key), rank, oversample, power_iters)
    if method == "gram" and for_gradient:
        return gram_svd(A, min(A.shape))
    if method == "exact" and for_gradient:
        return _thin_svd(A)
    return low_rank_svd(
        A, rank, method=method, key=key, oversample=oversample, power_iters=power_iters
    )


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2, 4, 5))
def _projected_factors(A, rank, method, key, oversample, power_iters):
    """Balanced rank-r factors whose reverse mode is the rank-r projection's derivative.

    For methods whose later steps depend on (L, R) only through X = L Rᵀ (such as scaled
    gradient descent, which is equivariant under (L, R) → (LQ, RQ⁻ᵀ)), reverse mode uses the
    derivative of the rank-r projection X = P_r(A) (``best_rank_approximation``'s rule)
    instead of differentiating the SVD routine. The cotangents (L̄, R̄) = (X̄ R, X̄ᵀ L) give
    X̄ V_r = L̄ Σ_r^{-1/2} and U_rᵀ X̄ = (R̄ Σ_r^{-1/2})ᵀ, and these hold every entry of M = Uᵀ X̄ V
    that the rule needs (two kept indices, or one kept and one discarded), so with the k triplets
    (U, s, V) of the factorisation

        Ā = U D(M) Vᵀ + (I − U Uᵀ) X̄ V_r V_rᵀ + U_r U_rᵀ X̄ (I − V Vᵀ),

    D the rule's gap map (its own transpose). With the randomized sketch's k = rank + oversample
    triplets this is the derivative of the projection of Q Qᵀ A, exact when rank A ≤ k. It costs
    a few thin products and avoids the 1/(σ_i² − σ_j²) factors between all pairs and the QR
    adjoints of autodiff through a randomized SVD (costly, and erratic in float32).
    ``"gram"`` has all the triplets but not accurate left vectors for small σ (A V / σ
    after squaring), so it differentiates X = A V_r V_rᵀ through the span instead
    (``_gram_projection_cotangent``), where the left vectors only enter as A V. Do not use it
    where a loss depends on the gauge of L and R.
    """
    U, s, V = _factor_svd(A, rank, method, key, oversample, power_iters)
    return balanced_factors(SVDResult(U[:, :rank], s[:rank], V[:, :rank]))


# traced when a caller's jit is differentiated, after the solver's context has closed
@full_precision
def _projected_factors_fwd(A, rank, method, key, oversample, power_iters):
    svd = _factor_svd(A, rank, method, key, oversample, power_iters, for_gradient=True)
    U, s, V = svd
    return balanced_factors(SVDResult(U[:, :rank], s[:rank], V[:, :rank])), svd


def _inverse_root(s):
    """s^{-1/2} with 0 for s = 0 (the factors' columns are 0 there)."""
    return jnp.where(s > 0, 1.0 / jnp.sqrt(jnp.where(s > 0, s, 1.0)), 0.0)


def _gram_projection_cotangent(U, s, V, rank, L_bar, R_bar):
    """Ā for a loss of X = L Rᵀ = A Π, Π = V_r V_rᵀ the top-r eigenspace of AᵀA, from all the
    triplets of a Gram eigendecomposition of a tall A (m ≥ n: V square) and the cotangents
    (L̄, R̄) = (X̄ R, X̄ᵀ L).

    With μ = σ² the eigenvalues of W = AᵀA, dW = dAᵀA + AᵀdA and (p kept, q not)

        dΠ = Σ (v_q v_pᵀ + v_p v_qᵀ) v_qᵀ dW v_p / (μ_p − μ_q),

    ⟨X̄, A dΠ⟩ = ⟨AᵀX̄, dΠ⟩ needs K = Vᵀ AᵀX̄ V at the pairs (q, p) and (p, q) only:
    K_qp = (A v_q)ᵀ X̄ v_p with X̄ V_r = L̄ Σ_r^{-1/2}, and K_pq = σ_p u_pᵀ X̄ v_q with U_rᵀ X̄ =
    (R̄ Σ_r^{-1/2})ᵀ. With S_qp = (K_qp + K_pq)/(μ_p − μ_q),

        Ā = X̄ V_r V_rᵀ + A V_d S V_rᵀ + A V_r Sᵀ V_dᵀ.

    The discarded left vectors enter only as A V_d = U_d Σ_d, which the squaring does not spoil.
    Computed with σ/σ₁ (no μ overflows or underflows)."""
    Ur, sr, Vr = U[:, :rank], s[:rank], V[:, :rank]
    Ud, sd, Vd = U[:, rank:], s[rank:], V[:, rank:]
    top = jnp.where(s[0] > 0, s[0], 1.0)
    XV = L_bar * _inverse_root(sr)  # X̄ V_r (m, r)
    AVd, AVr = Ud * (sd / top), Ur * (sr / top)  # A V / σ₁
    K = AVd.T @ XV + Vd.T @ (R_bar * (jnp.sqrt(sr) / top))  # (K_qp + K_pq) / σ₁, (n − r, r)
    S = K / (jnp.square(sr / top)[None, :] - jnp.square(sd / top)[:, None])
    return XV @ Vr.T + (AVd @ S) @ Vr.T + (AVr @ S.T) @ Vd.T


@full_precision  # traced when the gradient is taken, after the solver's context has closed
def _projected_factors_bwd(rank, method, oversample, power_iters, svd, cts):
    U, s, V = svd
    L_bar, R_bar = cts
    if method == "gram":
        if U.shape[0] >= V.shape[0]:
            return _gram_projection_cotangent(U, s, V, rank, L_bar, R_bar), None
        return _gram_projection_cotangent(
            V, s, U, rank, R_bar, L_bar
        ).T, None  # Aᵀ = V Σ Uᵀ, Xᵀ = R Lᵀ
    Ur, Vr, sr = U[:, :rank], V[:, :rank], s[:rank]
    inv_root = _inverse_root(sr)
    XV = L_bar * inv_root  # X̄ V_r (m, r)
    UX = (R_bar * inv_root).T  # U_rᵀ X̄ (r, n)
    k = s.shape[0]
    UXV, UtXV = UX @ V, U.T @ XV  # rows < rank and columns < rank of M
    M = jnp.zeros((k, k), U.dtype).at[:rank].set(UXV).at[:, :rank].set(UtXV)
    A_bar = U @ _gap_map(M, s, rank) @ V.T + (XV - U @ UtXV) @ Vr.T + Ur @ (UX - UXV @ V.T)
    return A_bar, None


_projected_factors.defvjp(_projected_factors_fwd, _projected_factors_bwd)


SMALL_SPD = 16


@jax.jit
def small_spd_inverse(G: jax.Array) -> jax.Array:
    """G⁻¹ of a small symmetric positive definite G by an unrolled Cholesky factorisation.

    G = CCᵀ column by column and C⁻¹ by forward substitution, G⁻¹ = C⁻ᵀC⁻¹, in plain array
    operations. Why not LAPACK: on a CPU each LAPACK call is an opaque custom call (under ``vmap`` a
    loop of tiny calls) and leaves OpenBLAS's threads spinning, which slows the XLA operations that
    follow; for r ≤ 16 the O(r³) flops run in a few fused kernels instead.

    Args:
      G: (r, r) symmetric positive definite matrix, r ≤ ``SMALL_SPD`` (r is static and
        unrolled). A G that is not positive definite gives NaN or inf entries.

    Returns:
      G⁻¹, an (r, r) array of G's dtype.
    """
    r = G.shape[-1]
    # The first column and row have no products (0-size ones, which add nothing, failed inside XLA
    # in an eager shard_map: "'func.call' op expected at least one operand … GlobalToLocalShape").
    C = jnp.zeros_like(G)
    for j in range(r):  # column j of C: r − j entries at once
        v = G[j:, j] - C[j:, :j] @ C[j, :j] if j else G[:, 0]
        C = C.at[j:, j].set(v / jnp.sqrt(v[0]))
    eye = jnp.eye(r, dtype=G.dtype)
    X = jnp.zeros_like(G)
    for i in range(r):  # row i of C⁻¹ by forward substitution
        X = X.at[i].set((eye[i] - C[i, :i] @ X[:i] if i else eye[0]) / C[i, i])
    return X.T @ X


@functools.partial(jax.jit, static_argnames="right")
def spd_solve(G: jax.Array, B: jax.Array, *, right: bool = False) -> jax.Array:
    """Solve with a small symmetric positive (semi-)definite Gram matrix ``G``.

    A Cholesky factorisation is used with a ridge δ = 16·eps·(tr G / r) added to the diagonal (the
    authors' MATLAB code of ScaledGD adds eps·I for the same reason): it changes a well-conditioned
    solve by a relative ~16·eps/λ_min(G/(tr G / r)) (2e-6 in float32 for G = I), and keeps a
    rank-deficient G (a collapsed factor) from producing inf/NaN. For r ≤ ``SMALL_SPD`` the
    inverse comes from ``small_spd_inverse``, otherwise from ``jax.scipy.linalg.cho_solve``.

    Args:
      G: (r, r) symmetric positive semi-definite matrix.
      B: (r, k) right-hand side, or (k, r) with ``right=True``.
      right: False (default) for G⁻¹ B, True for B G⁻¹ — the form of ScaledGD's preconditioned
        gradients ∇_L f (RᵀR)⁻¹.

    Returns:
      (G + δI)⁻¹ B (shape (r, k)) or B (G + δI)⁻¹ (shape (k, r)), in the floating dtype of G and B.
    """
    right = _checks.check_flag(right, "right")
    G, B = _lapack_float(G), _lapack_float(B)
    r = G.shape[-1]
    eps = jnp.finfo(G.dtype).eps
    scale = jnp.trace(G) / r
    ridge = 16 * eps * jnp.where(scale > 0, scale, 1.0)
    Gr = G + ridge * jnp.eye(r, dtype=G.dtype)
    if r <= SMALL_SPD:
        inv = small_spd_inverse(Gr)
        return B @ inv if right else inv @ B
    chol = jax.scipy.linalg.cho_factor(Gr, lower=True)
    if right:
        return jax.scipy.linalg.cho_solve(chol, B.T).T
    return jax.scipy.linalg.cho_solve(chol, B)


@jax.jit
def frob(X) -> jax.Array:
    """‖X‖_F, computed at unit scale so that squaring neither underflows nor overflows.

    ‖X‖_F = m·‖X/m‖_F with m = max|X_ij|: a plain sum of squares of float32 entries near 1e-20 or
    1e20 is 0 or inf. inf and NaN entries propagate. The gradient at X = 0 is 0 (a subgradient).

    Args:
      X: array-like of any shape, real or complex.

    Returns:
      A 0-d real array (0 for an empty X).
    """
    X = jnp.asarray(X)
    if X.size == 0:
        return jnp.zeros((), X.dtype if jnp.issubdtype(X.dtype, jnp.inexact) else jnp.float32)
    m = jnp.max(jnp.abs(X))
    safe = jnp.where((m > 0) & jnp.isfinite(m), m, 1.0)
    ss = jnp.sum(jnp.square(jnp.abs(X / safe)))  # |·|²: real for complex X too
    norm = safe * jnp.sqrt(jnp.where(ss > 0, ss, 1.0))  # safe sqrt: a zero gradient at X = 0
    return jnp.where(jnp.isfinite(m), jnp.where(ss > 0, norm, 0.0), m)


@jax.jit
def relative_error(X, X0) -> jax.Array:
    """‖X − X₀‖_F / ‖X₀‖_F, the relative error of ``X`` against the reference ``X0``.

    Traceable and differentiable. For a zero reference (X₀ = 0) it is 0 when X = 0 too and +inf
    otherwise (no relative scale exists; an absolute error there would read as a relative one). NaN
    in X or X₀ gives NaN. Both norms are ``frob``'s scaled ones, exact at float32's extremes.

    Args:
      X: array-like, the estimate.
      X0: array-like of X's shape, the reference; another shape raises ``ValueError`` naming ``X0``
        (shapes are static: also under ``jit``).

    Returns:
      A 0-d array.
    """
    X, X0 = jnp.asarray(X), jnp.asarray(X0)
    _checks.check_same_shape(X, X0, "X", "X0")
    num, den = frob(X - X0), frob(X0)
    safe = jnp.where(den > 0, den, 1.0)
    out = jnp.where(den > 0, num / safe, jnp.where(num > 0, jnp.inf, 0.0))
    return jnp.where(jnp.isnan(num) | jnp.isnan(den), jnp.nan, out)
