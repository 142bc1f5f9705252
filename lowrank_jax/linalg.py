"""Dense linear algebra shared by every family: truncated SVDs, balanced factors, small SPD solves,
the Frobenius norm and the relative error.

Conventions: a truncated SVD returns ``(U, s, V)`` with ``U`` of shape (m, r), ``s`` of shape (r,)
in decreasing order and ``V`` of shape (n, r), so that ``A ≈ U @ diag(s) @ V.T``. ``V`` (not
``V.T``) is returned because the low-rank solvers work with the factor pair (L, R), A ≈ L Rᵀ.

Speed notes for XLA on CPU (see the project's performance notes): a full ``jnp.linalg.svd`` of a
1000 x 1000 matrix costs ~300 ms, while the randomized range finder below needs a handful of
thin matrix products and QR factorisations of (n, r + p) blocks and costs a few milliseconds.

Precision: the factorisations built from matrix products (:func:`gram_svd`,
:func:`gram_rank_factors`, :func:`randomized_svd`, :func:`best_rank_approximation`,
:func:`low_rank_factors`) trace them at full float32 precision unless the caller chose one
(:mod:`lowrank_jax.precision`), as ``jnp.linalg.svd`` is full precision on every backend: on a GPU's
default TF32 products the Gram route moved σ₁ by 1.5e-4 (relative) between A and 10⁻³⁰ A.
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
    """Thin truncated SVD: ``A ≈ U @ diag(s) @ V.T`` with ``s`` decreasing."""

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
    """``x`` with a data dependency on every array in ``deps``: x + Σ 0·d₀ (d₀ one entry of each d,
    taken as 0 where it is not finite, and without derivative), so whatever consumes the result
    cannot start before ``deps`` are computed. Same values as ``x`` (a −0.0 becomes +0.0), same
    derivative.

    Why: XLA's CPU backend runs independent kernels of one program at the same time, and under
    ``vmap`` jaxlib (0.10) splits each batched LAPACK kernel (SVD, QR, eigh, Cholesky, LU,
    triangular solves) over the process's intra-op thread pool and blocks a pool thread until its
    part is done. Two such kernels at once on a 2-thread pool (a 2-core machine) blocked both
    threads and the program hung (a 64-point ``vmap`` of ScaledGD on one CPU device, now and then).
    A factorisation that reads ``after(M, previous_result)`` waits for the previous one instead. XLA
    does not fold 0·d for floats (0·NaN is NaN), and ``lax.optimization_barrier`` did not do this:
    XLA expands it before the CPU runtime orders its kernels.
    """
    x = jnp.asarray(x)
    tie = jnp.zeros((), x.dtype)
    for d in deps:
        d0 = jax.lax.stop_gradient(jnp.ravel(jnp.asarray(d))[0])
        tie = tie + (0 * jnp.where(jnp.isfinite(d0), d0, 0)).astype(x.dtype)
    return x + tie


def qr(A: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``jnp.linalg.qr(A)`` (reduced) whose Q is finished before R can be used.

    A QR's R comes from LAPACK's ``geqrf`` and its Q from a second kernel (``orgqr``), so an SVD of
    R, the usual next step, ran beside that kernel and could hang a ``vmap``ped solver on a CPU
    (see :func:`after`). The returned R is ``after(R, Q)``.
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
    """Exact top-``rank`` singular triplets of ``A`` (shape (m, n); any array-like), from its thin
    SVD (:func:`_thin_svd`). ``rank`` is static.

    Derivatives (forward and reverse mode) are those of the kept triplets alone. With the thin SVD
    A = U Σ Vᵀ (k = min(m, n) triplets, the first r kept), P = Uᵀ dA V_r and Q = Vᵀ dAᵀ U_r (k × r):

        dσ_i = P_ii,
        Uᵀ dU_r = F ∘ (P Σ_r + Σ Q),   Vᵀ dV_r = F ∘ (Q Σ_r + Σ P),
        F_ji = 1 / (σ_i² − σ_j²) (j ≠ i),
        plus (I − U Uᵀ) dA V_r Σ_r⁻¹ in dU_r when m > k
        and (I − V Vᵀ) dAᵀ U_r Σ_r⁻¹ in dV_r when n > k.

    Only pairs with a kept index i enter. Autodiff through the full SVD would also form
    1 / (σ_j² − σ_l²) for pairs of discarded values and 1/σ_j for discarded zeros. Those terms
    multiply zero cotangents, but a tie or a zero among the discarded values, as in any matrix of
    rank below min(m, n), makes them NaN. Here the derivative is finite wherever it exists: the kept
    values distinct and positive, and σ_r > σ_{r+1}.
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
    """The best rank-``rank`` approximation P_r(A) = U_r Σ_r V_rᵀ of ``A`` (m, n) (Eckart–Young).
    ``rank`` is static. ``method``: ``"exact"`` (the thin SVD), ``"gram"`` (the eigendecomposition
    of the small Gram matrix, :func:`gram_svd`; for thin or wide A) or ``"randomized"``
    (:func:`randomized_svd` with ``key``, default ``jax.random.key(0)``, ``oversample``,
    ``power_iters``).

    Its derivative exists wherever σ_r > σ_{r+1}, ties among the kept values included, and each
    method carries it in that form, not through its singular vectors (which have no derivative
    within a tie: the product rule through :func:`truncated_svd`'s factors gives NaN at a multiple
    of the identity, or at diag(3, 3, 1) with r = 2). With a thin SVD A = U Σ Vᵀ (k columns) and
    T = Uᵀ dA V (k × k):

        dP = U D Vᵀ + (I − U Uᵀ) dA V_r V_rᵀ + U_r U_rᵀ dA (I − V Vᵀ),
        D_ij = T_ij                                        i, j < r (both kept),
        D_ij = σ_p (σ_p T_ij + σ_q T_ji) / (σ_p² − σ_q²)   one kept index p, the other q,
        D_ij = 0                                           i, j ≥ r (both discarded).

    Only pairs across the gap enter a denominator. ``"exact"`` applies it to the thin SVD (k =
    min(m, n); the last two terms vanish where U or V is square). ``"randomized"`` applies it to
    the sketch's k = min(r + oversample, m, n) triplets, i.e. differentiates the projection of
    Q Qᵀ A (Q the sketch's range): exact when rank A ≤ k, otherwise as accurate as the sketch.
    ``"gram"`` writes P_r(A) = A V_r V_rᵀ (m ≥ n; transposed otherwise) with V_r a basis of the
    top-r eigenspace of AᵀA, differentiated as that span (:func:`top_eigenspace`). At
    σ_r = σ_{r+1} the projection itself is not unique and the derivative is inf/NaN.
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
    """T ↦ D of :func:`best_rank_approximation`'s rule, for a (k, k) T and k ≥ rank singular
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
    """dP_r of :func:`best_rank_approximation`'s rule from a thin SVD (U, s, V) with k ≥ rank
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
    """All k = min(rank + oversample, m, n) triplets of :func:`randomized_svd`'s sketch."""
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

    With l = rank + oversample and a Gaussian test matrix Ω (n, l):
    Q = orth(A Ω); repeat ``power_iters`` times: Q = orth(A orth(Aᵀ Q)); then B = Qᵀ A (l, n) is
    factorised through a QR of Bᵀ and an (l, l) SVD. Each power iteration sharpens the spectrum by
    (σ_j/σ_{l+1})², so the top ``rank`` triplets agree with the exact ones to working precision
    when the spectrum has a gap after ``rank`` (as a rank-r matrix plus sparse noise has).

    Args:
      A: (m, n) matrix.
      rank: number of triplets returned (static).
      key: ``jax.random`` key for Ω (an integer is taken as a seed); required unless ``start`` is
        given (there is no default draw: a ``ValueError`` says so).
      oversample: extra columns p of the sketch (static).
      power_iters: power iterations q (static).
      start: optional (n, l) block replacing Ω — a warm start such as the ``V`` of the previous
        call of an iterative solver whose matrix changes slowly (subspace iteration); then ``key``
        is not used.
      axis_name: inside ``shard_map`` with A split by rows over that mesh axis (``rows`` = the
        global m, static): the row-split products A Ω, A W stay local and are orthonormalised by
        :func:`tsqr`; the column-side products Aᵀ Q = Σ_i A_iᵀ Q_i and B = Qᵀ A are summed across
        devices. Same Ω, hence the same subspace up to rounding; U comes back split by rows like A,
        s and V replicated.

    Example:
        ```python
        import jax, jax.numpy as jnp
        from lowrank_jax import linalg

        k1, k2 = jax.random.split(jax.random.key(0))
        A = jax.random.normal(k1, (500, 10)) @ jax.random.normal(k2, (10, 300))   # rank 10
        U, s, V = linalg.randomized_svd(A, 10, jax.random.key(1))                 # A ≈ U diag(s) Vᵀ
        print(jnp.linalg.norm(A - (U * s) @ V.T) / jnp.linalg.norm(A))            # ≈ 6e-7 (float32)
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
    """QR of a tall matrix split by rows over a ``shard_map`` mesh axis (TSQR, one reduction).

    Each device factors its block Y_i = Q_i R_i (n_i ≥ l rows), the l × l R_i are gathered
    (D l² numbers: the only communication), [R_1; …; R_D] = Q̂ R is factored on every device, and
    device i returns its rows Q_i Q̂_i of Q. Householder-stable, unlike Cholesky-QR of the summed
    Gram. Returns (Q_local (n_i, l), R (l, l), replicated).
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
    """The ``rank`` largest eigenpairs of a symmetric G (n × n):
    (λ (rank,) decreasing, V (n, rank)).

    For a Gram matrix G = AᵀA these are the squared singular values and right singular vectors of A,
    so A V Vᵀ is A's rank-r Eckart–Young projection (:func:`gram_svd`, and the SDL solver that forms
    G without A).
    """
    lam, V = jnp.linalg.eigh(G)
    return lam[::-1][:rank], V[:, ::-1][:, :rank]


def top_eigenspace(G: jax.Array, rank: int) -> jax.Array:
    """An orthonormal basis V_r (n, rank) of the span of the ``rank`` top eigenvectors of a
    symmetric G (n × n), as :func:`top_eigh`'s, carrying the derivative of the span rather than of
    the vectors.

    The span (the projector Π = V_r V_rᵀ) is differentiable wherever λ_r > λ_{r+1}, ties among the
    kept eigenvalues included; the eigenvectors within a tie are not (``eigh``'s derivative is NaN
    there, and reverse mode through it is NaN whenever two eigenvalues tie, kept or not, e.g. the
    zeros of a rank-deficient Gram matrix). The tangent given here is the part of dV_r outside the
    span, with T = V_dᵀ dG V_r (V_d the other eigenvectors):

        dV_r[:, p] = Σ_q v_q T_qp / (λ_p − λ_q)    (p kept, q not),

    which drops the rotation within the span (a gauge term). So it is exact for any function of V_r
    V_rᵀ — dΠ = dV_r V_rᵀ + V_r dV_rᵀ — such as C ↦ C V_r V_rᵀ, and must not be used where a result
    depends on the individual vectors.
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
    """(A V_r, V_r) for A (m, n) with m ≥ n, V_r a basis of the top-r eigenspace of AᵀA (the right
    singular vectors of A): A V_r V_rᵀ = U_r Σ_r V_rᵀ is A's best rank-r approximation, from one
    product AᵀA and an n × n ``eigh`` as in :func:`gram_svd`. For m < n: (U_r, Aᵀ U_r) with
    U_r U_rᵀ A the same projection. Differentiated as the span (:func:`top_eigenspace`): the
    derivative of the product is exact wherever σ_r > σ_{r+1}, at tied singular values too.
    A is scaled by a power of two before it is squared, as in :func:`gram_svd`.
    """
    A, rank = _svd_input(A, rank, "gram_rank_factors")
    if A.shape[0] < A.shape[1]:
        V, L = gram_rank_factors(A.T, rank)
        return L, V
    B = A / power_of_two_scale(A)  # the eigenspace of (cA)ᵀ(cA) is that of AᵀA
    V = top_eigenspace(B.T @ B, rank)
    return A @ V, V


def above_rounding(values: jax.Array, size: float) -> jax.Array:
    """Mask of the singular values or eigenvalues that are not rounding: |v| > size·ε·max|v|, the
    numerical-rank cut-off of ``numpy.linalg.matrix_rank`` (``size`` = the matrix's larger
    dimension) for a matrix known to working precision; for a Gram matrix formed from sums, see
    :func:`gram_rounding_size`. All False when every value is 0."""
    mag = jnp.abs(values)
    return mag > size * jnp.finfo(mag.dtype).eps * jnp.max(mag)


def gram_rounding_size(d: int, n: int) -> float:
    """``size`` for :func:`above_rounding` (and ``transforms.newton_direction``) on the eigenvalues
    of a d × d matrix formed from n-term sums, such as G = AᵀDA for an A of n rows: d·√n.

    Each entry of the formed G carries rounding of about √n·ε·‖G‖ (the typical error of an n-term
    sum), so its eigenvalues about d·√n·ε·‖G‖. The zero eigenvalue of G for an A without full column
    rank came out at up to 7·ε·max|μ| (float64, d = 3, n = 7129, this CPU) and 4.2·ε·max|μ| (an
    H200), above the d·ε·max|μ| of ``matrix_rank``; counted as signal, it let Newton iterates drift
    along null(A) and let SDL's supervised codes run off to infinity."""
    return d * math.sqrt(n)


def power_of_two_scale(x: jax.Array) -> jax.Array:
    """c = 2ᵉ with 2ᵉ⁻¹ ≤ max|x| < 2ᵉ (1 when x is all zero or not finite), held constant for
    autodiff. Dividing by c is exact, so a positively homogeneous map f (f(cx) = c f(x): singular
    values, the path-norm prox) can be computed as c·f(x/c) at unit scale, where squares neither
    underflow nor overflow, with the same derivative (Euler's identity: none flows through c).

    e is at most the dtype's largest exponent less 3 (2¹²⁵ in float32), so that 1/c is a normal
    number: XLA:CPU divides by multiplying with the reciprocal, and a subnormal one is flushed to 0
    (float32 weights of 1e38 came back as zeros from the path-norm prox, and c = 2¹²⁸ = inf gave
    NaN from 1.7e38 up). Near the top of the range x/c is then below 8 instead of 1."""
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
    """Top-``rank`` singular triplets of a thin (or wide) A from the eigendecomposition of its small
    Gram matrix: AᵀA = V Λ Vᵀ (n × n for m ≥ n), σ = √λ, U = A V / σ.

    One matrix product of A with itself (compute-bound, BLAS-3) and an n × n ``eigh``: for m ≫ n
    this is several times cheaper than a QR of A on CPU (12 626 × 128, float64: 18 ms against
    82 ms).
    Squaring costs accuracy only below the kept spectrum: σ_j is accurate to ~ε σ₁²/σ_j, so the
    top-r triplets are exact to working precision unless σ_r < √ε σ₁. Columns of U for σ = 0 are 0.
    A is scaled by the power of two nearest its largest entry before it is squared (exact, undone on
    σ), so AᵀA neither underflows nor overflows (float32 A of 1e-30 gave σ = 0, of 1e30 NaN).
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
    """Dispatch to :func:`truncated_svd` (``method="exact"``), :func:`gram_svd` (``"gram"``, for
    thin matrices) or :func:`randomized_svd`.

    ``key`` defaults to ``jax.random.key(0)``: the sketch is a numerical device whose outcome does
    not depend on the key beyond working precision when the spectrum has a gap. ``oversample`` and
    ``power_iters`` (power iterations) as in :func:`randomized_svd`, used by it only. Returns the
    :class:`SVDResult` U (m, r), s (r,), V (n, r) of A (m, n).
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
    """Balanced factors L = U Σ^{1/2}, R = V Σ^{1/2}, so that L Rᵀ = U Σ Vᵀ and LᵀL = RᵀR = Σ."""
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
    """Balanced factors (L, R) = (UΣ^{1/2}, VΣ^{1/2}) of the best rank-r approximation of A.

    ``method="exact"``: the exact truncated SVD with the kept-triplet derivative of
    :func:`truncated_svd` (exact gradient wherever it exists, slow at large n).
    ``method="randomized"`` (``"gram"``): the randomized SVD (Gram eigendecomposition) with the
    projection rule of :func:`_projected_factors` in reverse mode: for losses of X = L Rᵀ, the
    derivative of the projection of the sketch Q Qᵀ A (exact when rank A ≤ rank + oversample, and
    as accurate as the sketch otherwise); ``"gram"``: the derivative of P_r(A) itself, exact
    wherever σ_r > σ_{r+1}.
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
    """:func:`low_rank_factors` with the rank-r projection's derivative in reverse mode for every
    ``method`` (see :func:`_projected_factors`), ``"exact"`` included: for callers whose loss
    depends on (L, R) only through X = L Rᵀ (the RPCA solvers). With ``"exact"`` the rule takes all
    min(m, n) triplets of the thin SVD and is the exact derivative of P_r(A) wherever
    σ_r > σ_{r+1}, also where kept singular values tie (σ₁ = σ₂: the kept-triplet derivative of
    ``low_rank_factors(method="exact")`` divides by σ₁² − σ₂² there and gave NaN in float32).
    No forward mode."""
    # outside the custom rules: autodiff casts back
    A, rank = _svd_input(A, rank, "projected_factors")
    if method not in ("exact", "gram", "randomized"):
        raise ValueError(f"method must be 'exact', 'gram' or 'randomized', got {method!r}")
    oversample = _checks.check_positive_int(oversample, "oversample", minimum=0)
    power_iters = _checks.check_positive_int(power_iters, "power_iters", minimum=0)
    return _projected_factors(A, rank, method, key, oversample, power_iters)


def _factor_svd(A, rank, method, key, oversample, power_iters, *, for_gradient=False) -> SVDResult:
    """The triplets behind :func:`_projected_factors`: the sketch's k = min(rank + oversample, m, n)
    for ``"randomized"`` (its first ``rank`` are :func:`randomized_svd`'s); for ``"gram"`` and
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
    derivative of the rank-r projection X = P_r(A) (:func:`best_rank_approximation`'s rule)
    instead of differentiating the SVD routine. The cotangents (L̄, R̄) = (X̄ R, X̄ᵀ L) give
    X̄ V_r = L̄ Σ_r^{-1/2} and U_rᵀ X̄ = (R̄ Σ_r^{-1/2})ᵀ, and these hold every entry of M = Uᵀ X̄ V
    that the rule needs (two kept indices, or one kept and one discarded), so with the k triplets
    (U, s, V) of the factorisation

        Ā = U D(M) Vᵀ + (I − U Uᵀ) X̄ V_r V_rᵀ + U_r U_rᵀ X̄ (I − V Vᵀ),

    D the rule's gap map (its own transpose). With the randomized sketch's k = rank + oversample
    triplets this is the derivative of the projection of Q Qᵀ A, exact when rank A ≤ k. It costs
    a few thin products and avoids the 1/(σ_i² − σ_j²) factors between all pairs and the QR
    adjoints of autodiff through a randomized SVD (about 100 ms and erratic in float32 at
    n = 1000). ``"gram"`` has all the triplets but not accurate left vectors for small σ (A V / σ
    after squaring), so it differentiates X = A V_r V_rᵀ through the span instead
    (:func:`_gram_projection_cotangent`), where the left vectors only enter as A V. Do not use it
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


def small_spd_inverse(G: jax.Array) -> jax.Array:
    """G⁻¹ for a small SPD (r, r) G (r ≤ :data:`SMALL_SPD`, static) by an unrolled Cholesky
    G = CCᵀ and C⁻¹ by forward substitution, G⁻¹ = C⁻ᵀC⁻¹, in plain array operations.

    Why not LAPACK: on CPU each LAPACK call is an opaque custom call (under ``vmap`` a loop of tiny
    calls, 1–2 ms for 64 batched 5 × 5 solves) and leaves OpenBLAS's threads spinning, which slows
    the XLA operations that follow; r ≤ 16 costs O(r³) flops in a few fused kernels instead."""
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


def spd_solve(G: jax.Array, B: jax.Array, *, right: bool = False) -> jax.Array:
    """Solve with a small symmetric positive (semi-)definite Gram matrix ``G`` (r, r).

    ``right=False`` returns G⁻¹ B for B of shape (r, k); ``right=True`` returns B G⁻¹ for B of shape
    (k, r) — the form of ScaledGD's preconditioned gradients ∇_L f (RᵀR)⁻¹.

    A Cholesky factorisation is used with a ridge δ = 16·eps·(tr G / r) added to the diagonal (the
    authors' MATLAB code adds eps·I for the same reason): it changes a well-conditioned solve by a
    relative ~16·eps/λ_min(G/(tr G / r)) (2e-6 in float32 for G = I), and keeps a rank-deficient G
    (a collapsed factor) from producing inf/NaN.
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


def frob(X) -> jax.Array:
    """‖X‖_F, computed as m·‖X/m‖_F with m = max|X_ij| so that squaring neither underflows nor
    overflows (a plain sum of squares of float32 entries near 1e-20 or 1e20 is 0 or inf); inf and
    NaN entries propagate.
    Complex X gives the real ‖X‖_F; the gradient at X = 0 is 0 (a subgradient)."""
    X = jnp.asarray(X)
    if X.size == 0:
        return jnp.zeros((), X.dtype if jnp.issubdtype(X.dtype, jnp.inexact) else jnp.float32)
    m = jnp.max(jnp.abs(X))
    safe = jnp.where((m > 0) & jnp.isfinite(m), m, 1.0)
    ss = jnp.sum(jnp.square(jnp.abs(X / safe)))  # |·|²: real for complex X too
    norm = safe * jnp.sqrt(jnp.where(ss > 0, ss, 1.0))  # safe sqrt: a zero gradient at X = 0
    return jnp.where(jnp.isfinite(m), jnp.where(ss > 0, norm, 0.0), m)


def relative_error(X, X0) -> jax.Array:
    """‖X − X₀‖_F / ‖X₀‖_F, the relative error of ``X`` against the reference ``X0`` (a 0-d array;
    traceable and differentiable).

    Zero reference (X₀ = 0): 0 when X = 0 too, +inf otherwise (no relative scale exists; an
    absolute error there would read as a relative one). NaN in X or X₀ gives NaN. Both norms are
    :func:`frob`'s scaled ones, exact at float32's extremes. Raises ``ValueError`` naming ``X0``
    when its shape is not X's (shapes are static: also under ``jit``)."""
    X, X0 = jnp.asarray(X), jnp.asarray(X0)
    _checks.check_same_shape(X, X0, "X", "X0")
    num, den = frob(X - X0), frob(X0)
    safe = jnp.where(den > 0, den, 1.0)
    out = jnp.where(den > 0, num / safe, jnp.where(num > 0, jnp.inf, 0.0))
    return jnp.where(jnp.isnan(num) | jnp.isnan(den), jnp.nan, out)
