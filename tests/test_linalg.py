import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lowrank_jax import linalg, prox


def known_spectrum(rng, m, n, s):
    """A = U diag(s) Vᵀ with random orthonormal U, V."""
    U, _ = np.linalg.qr(rng.standard_normal((m, len(s))))
    V, _ = np.linalg.qr(rng.standard_normal((n, len(s))))
    return (U * s) @ V.T, U, V


def subspace_gap(A, B):
    """sin of the largest principal angle between the column spaces of A and B (orthonormal)."""
    return np.linalg.norm(A - B @ (B.T @ A), 2)


@pytest.mark.parametrize("shape", [(60, 40), (40, 60), (200, 30), (30, 200)])
def test_truncated_svd_matches_numpy(x64, shape):
    rng = np.random.default_rng(0)
    A = rng.standard_normal(shape)
    r = 7
    out = linalg.truncated_svd(jnp.asarray(A), r)
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    np.testing.assert_allclose(out.s, s[:r], rtol=1e-12)
    assert out.U.shape == (shape[0], r) and out.V.shape == (shape[1], r)
    np.testing.assert_allclose(
        (np.asarray(out.U) * out.s) @ np.asarray(out.V).T, (U[:, :r] * s[:r]) @ Vt[:r], atol=1e-11
    )


def test_randomized_svd_recovers_known_spectrum(x64):
    rng = np.random.default_rng(1)
    s = np.concatenate([[10.0, 7.0, 5.0, 3.0, 2.0], 1e-3 * 0.5 ** np.arange(35)])
    A, U, V = known_spectrum(rng, 300, 200, s)
    out = linalg.randomized_svd(jnp.asarray(A), 5, jax.random.key(3), oversample=10, power_iters=4)
    np.testing.assert_allclose(out.s, s[:5], rtol=1e-10)
    assert subspace_gap(np.asarray(out.U), U[:, :5]) < 1e-8
    assert subspace_gap(np.asarray(out.V), V[:, :5]) < 1e-8


def test_randomized_svd_warm_start_equals_exact_on_exact_low_rank(x64):
    rng = np.random.default_rng(2)
    A, _, _ = known_spectrum(rng, 120, 90, np.array([4.0, 3.0, 1.0]))
    exact = linalg.truncated_svd(jnp.asarray(A), 3)
    start = jnp.asarray(rng.standard_normal((90, 6)))
    warm = linalg.randomized_svd(jnp.asarray(A), 3, start=start, power_iters=0)
    np.testing.assert_allclose(warm.s, exact.s, rtol=1e-12)
    with pytest.raises(ValueError, match="key"):
        linalg.randomized_svd(jnp.asarray(A), 3)


def test_balanced_factors(x64):
    rng = np.random.default_rng(3)
    A = jnp.asarray(rng.standard_normal((50, 40)))
    svd = linalg.truncated_svd(A, 4)
    L, R = linalg.balanced_factors(svd)
    np.testing.assert_allclose(L.T @ L, np.diag(svd.s), atol=1e-12)
    np.testing.assert_allclose(R.T @ R, np.diag(svd.s), atol=1e-12)
    np.testing.assert_allclose(L @ R.T, (svd.U * svd.s) @ svd.V.T, atol=1e-12)


def test_spd_solve_left_and_right(x64):
    rng = np.random.default_rng(4)
    F = rng.standard_normal((30, 5))
    G = F.T @ F
    B = rng.standard_normal((5, 7))
    np.testing.assert_allclose(
        linalg.spd_solve(jnp.asarray(G), jnp.asarray(B)), np.linalg.solve(G, B), rtol=1e-10
    )
    np.testing.assert_allclose(
        linalg.spd_solve(jnp.asarray(G), jnp.asarray(B.T), right=True),
        B.T @ np.linalg.inv(G),
        rtol=1e-10,
    )


def test_spd_solve_singular_gram_stays_finite():
    G = jnp.zeros((3, 3), jnp.float32)
    out = linalg.spd_solve(G, jnp.ones((3, 2), jnp.float32))
    assert bool(jnp.all(jnp.isfinite(out)))
    F = jnp.asarray(np.random.default_rng(5).standard_normal((10, 2)), jnp.float32)
    rank_deficient = jnp.concatenate([F, F[:, :1]], axis=1)
    assert bool(
        jnp.all(jnp.isfinite(linalg.spd_solve(rank_deficient.T @ rank_deficient, jnp.ones((3, 1)))))
    )


def test_low_rank_svd_rejects_unknown_method():
    with pytest.raises(ValueError, match="method"):
        linalg.low_rank_svd(jnp.ones((4, 4)), 1, method="lanczos")


def test_gram_svd_matches_the_exact_truncated_svd(x64):
    A = jax.random.normal(jax.random.key(11), (300, 20), jnp.float64) @ jnp.diag(
        jnp.logspace(0, -3, 20)
    )
    for M in (A, A.T):
        g, e = linalg.gram_svd(M, 5), linalg.truncated_svd(M, 5)
        np.testing.assert_allclose(g.s, e.s, rtol=1e-12)
        np.testing.assert_allclose((g.U * g.s) @ g.V.T, (e.U * e.s) @ e.V.T, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(g.U.T @ g.U, np.eye(5), atol=1e-12)
    # Rank-deficient input: the missing directions come back as zero columns, not NaN.
    low = A[:, :3] @ jnp.ones((3, 20))
    g = linalg.gram_svd(low, 5)
    assert bool(jnp.all(jnp.isfinite(g.U)))
    np.testing.assert_allclose(prox.project_rank(low, 5, method="gram"), low, atol=1e-10)


def test_gram_svd_is_scale_equivariant_at_float32_extremes():
    """σ(cA) = c σ(A): AᵀA of a float32 A near 1e-30 underflowed (σ = 0) and near 1e30 overflowed
    (NaN); A is scaled by a power of two first. The gradient is that of the unscaled problem."""
    A = jax.random.normal(jax.random.key(3), (200, 12)) @ jnp.diag(jnp.linspace(3.0, 1.0, 12))
    ref = linalg.gram_svd(A, 4)
    for c in (1e-30, 1e-20, 2.0**40, 1e30):
        g = linalg.gram_svd(A * c, 4)
        np.testing.assert_allclose(np.asarray(g.s) / c, ref.s, rtol=1e-5)
        np.testing.assert_allclose(jnp.abs(g.U.T @ ref.U), np.eye(4), atol=1e-4)
    f = lambda M: jnp.sum(linalg.gram_svd(M, 4).s)  # noqa: E731
    # ∂Σσ_i/∂A = U Vᵀ (formed at full precision, as gram_svd's own products: a GPU's default TF32
    # was 3e-5 off)
    np.testing.assert_allclose(
        jax.grad(f)(A), jnp.matmul(ref.U, ref.V.T, precision="highest"), rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize("r", [1, 2, 7, linalg.SMALL_SPD])
def test_small_spd_inverse_equals_numpy_inverse(x64, r):
    A = np.random.default_rng(r).standard_normal((r + 4, r))
    G = A.T @ A
    np.testing.assert_allclose(
        np.asarray(jax.jit(linalg.small_spd_inverse)(jnp.asarray(G))),
        np.linalg.inv(G),
        rtol=1e-9,
        atol=1e-12,
    )


def test_spd_solve_paths_agree_across_the_small_threshold(x64):
    # r = SMALL_SPD takes the unrolled inverse, r = SMALL_SPD + 1 the LAPACK Cholesky: both solve
    # exactly.
    rng = np.random.default_rng(3)
    solve = jax.jit(linalg.spd_solve, static_argnames="right")  # one program, not op by op
    for r in (linalg.SMALL_SPD, linalg.SMALL_SPD + 1):
        A = rng.standard_normal((r + 5, r))
        G, B = A.T @ A, rng.standard_normal((9, r))
        np.testing.assert_allclose(
            np.asarray(solve(jnp.asarray(G), jnp.asarray(B), right=True)),
            np.linalg.solve(G, B.T).T,
            rtol=1e-8,
            atol=1e-10,
        )
    # under vmap (a batch of Gram matrices), as in a sweep
    Gs = jnp.stack([jnp.eye(4) * (k + 1.0) for k in range(3)])
    out = jax.vmap(lambda G: linalg.spd_solve(G, jnp.ones((2, 4)), right=True))(Gs)
    np.testing.assert_allclose(np.asarray(out[:, 0, 0]), [1.0, 0.5, 1 / 3], rtol=1e-12)


@pytest.mark.parametrize("shape", [(30, 20), (20, 30), (80, 12), (12, 80)])
def test_truncated_svd_derivative_equals_autodiff_of_the_full_svd(x64, shape):
    """Where the thin SVD has distinct, non-zero values, the kept-triplet JVP is autodiff's own."""
    rng = np.random.default_rng(4)
    A, dA = (jnp.asarray(rng.standard_normal(shape)) for _ in range(2))

    def autodiff(A):
        U, s, V = linalg._thin_svd(A)  # same primal (and signs) as truncated_svd, plain JAX rules
        return U[:, :4], s[:4], V[:, :4]

    _, ours = jax.jvp(lambda A: linalg.truncated_svd(A, 4), (A,), (dA,))
    _, ref = jax.jvp(autodiff, (A,), (dA,))
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_truncated_svd_gradient_is_finite_for_rank_deficient_matrices(x64):
    """A matrix with zero columns has tied zero singular values below the kept ones. Autodiff of the
    full SVD gives NaN there (1/(σ_j² − σ_l²) between discarded values); the kept-triplet rule
    gives the gradient, checked against central differences of the loss."""
    rng = np.random.default_rng(5)
    A = rng.standard_normal((40, 5)) @ rng.standard_normal((5, 30))
    A[:, :6] = 0.0
    A, C, E = (
        jnp.asarray(A),
        jnp.asarray(rng.standard_normal(A.shape)),
        jnp.asarray(rng.standard_normal(A.shape)),
    )

    def loss(A):
        L, R = linalg.low_rank_factors(A, 3, method="exact")
        return jnp.sum(C * (L @ R.T)) + jnp.sum(L**2)

    g = np.asarray(jax.jit(jax.grad(loss))(A))  # one program each, not op by op
    assert np.isfinite(g).all()
    h, loss = 1e-6, jax.jit(loss)
    fd = (loss(A + h * E) - loss(A - h * E)) / (2 * h)
    np.testing.assert_allclose(np.sum(g * np.asarray(E)), fd, rtol=1e-7)


def test_core_helpers_name_bad_arguments(x64):
    """randomized_svd of an integer matrix failed inside jax.random (an integer dtype for Ω) and an
    integer key was refused by jax.random. An integer matrix is now computed in the default float,
    and an integer key is a seed."""
    A = np.arange(12 * 8).reshape(12, 8) % 5
    out = linalg.randomized_svd(jnp.asarray(A), 2, 3)
    ref = linalg.randomized_svd(jnp.asarray(A, jnp.float64), 2, jax.random.key(3))
    np.testing.assert_allclose(out.s, ref.s, rtol=1e-12)
    # Every SVD helper checks its rank: randomized_svd and gram_svd sliced with it (rank = −1 gave
    # 4 triplets, 0 none, 7 the 5 there are), and so did low_rank_svd / low_rank_factors.
    helpers = [
        linalg.truncated_svd,
        linalg.gram_svd,
        lambda A, r: linalg.randomized_svd(A, r, 0),
        lambda A, r: linalg.low_rank_svd(A, r),
        lambda A, r: linalg.low_rank_factors(A, r, "gram"),
        linalg.gram_rank_factors,
        lambda A, r: linalg.top_eigenspace(A[:5], r),
        lambda A, r: linalg.low_rank_factors(A, r),
        lambda A, r: linalg.low_rank_factors(A, r, "exact"),
    ]
    helpers += [
        lambda A, r, m=m: linalg.best_rank_approximation(A, r, method=m)
        for m in ("exact", "gram", "randomized")
    ]
    for helper in helpers:
        for rank in (0, -1, 7, 2.0):
            with pytest.raises(
                ValueError, match="rank must (be an integer|satisfy 1 <= rank <= 5)"
            ):
                helper(jnp.ones((6, 5)), rank)
    with pytest.raises(
        ValueError, match="method must be 'exact', 'gram' or 'randomized', got 'svd'"
    ):
        linalg.best_rank_approximation(jnp.ones((6, 5)), 2, method="svd")
    for bad in (dict(oversample=-1), dict(power_iters=-2), dict(power_iters=1.5)):
        name = next(iter(bad))
        with pytest.raises(ValueError, match=f"{name} must be an integer >= 0"):
            linalg.randomized_svd(jnp.ones((6, 5)), 2, 0, **bad)
        with pytest.raises(ValueError, match=f"{name} must be an integer >= 0"):
            linalg.best_rank_approximation(jnp.ones((6, 5)), 2, method="randomized", **bad)
        with pytest.raises(ValueError, match=f"{name} must be an integer >= 0"):
            linalg.low_rank_factors(jnp.ones((6, 5)), 2, **bad)
    with pytest.raises(
        ValueError, match="method must be 'exact', 'gram' or 'randomized', got 'qr'"
    ):
        linalg.low_rank_factors(jnp.ones((6, 5)), 2, "qr")
    with pytest.raises(ValueError, match="top_eigenspace needs a square matrix"):
        linalg.top_eigenspace(jnp.ones((6, 5)), 2)
    with pytest.raises(ValueError, match="start must be an .n, l. block"):
        linalg.randomized_svd(jnp.ones((6, 5)), 3, start=jnp.ones((5, 2)))


def test_svd_helpers_take_ranks_given_as_0d_arrays():
    """A rank read from a config or a sweep grid arrives as np.array(3) or jnp.int32(3); every
    helper reads it as the int it names, and truncated_svd's derivative rule (which gets the rank as
    a nondiff argument) sees the same int."""
    A = jnp.asarray(np.random.default_rng(1).standard_normal((9, 6)), jnp.float32)
    helpers = [
        linalg.truncated_svd,
        linalg.gram_svd,
        lambda A, r: linalg.randomized_svd(A, r, 0),
        lambda A, r: linalg.low_rank_svd(A, r, method="exact"),
    ]
    for helper in helpers:
        want = helper(A, 3)
        for rank in (np.array(3), jnp.int32(3), np.int64(3)):
            got = helper(A, rank)
            assert got.s.shape == (3,)
            np.testing.assert_array_equal(got.s, want.s)
    # and the derivative rule still sees the int
    g = jax.grad(lambda A: jnp.sum(linalg.truncated_svd(A, np.array(2)).s))(A)
    np.testing.assert_allclose(
        g, jax.grad(lambda A: jnp.sum(linalg.truncated_svd(A, 2).s))(A), rtol=1e-6
    )


def test_svd_helpers_compute_half_precision_in_float32():
    """LAPACK has no float16: the helpers failed with "Unsupported dtype float16", unlike the
    solvers, which compute half precision in float32. They now do the same, and gradients come back
    in the input's dtype."""
    A = jnp.asarray(np.random.default_rng(0).standard_normal((8, 6)), jnp.float16)
    A32 = A.astype(jnp.float32)
    for f in (
        lambda A: linalg.truncated_svd(A, 2).s,
        lambda A: linalg.gram_svd(A, 2).s,
        lambda A: linalg.randomized_svd(A, 2, 0).s,
        lambda A: linalg.low_rank_factors(A, 2)[0],
        lambda A: linalg.gram_rank_factors(A, 2)[0],
        lambda A: linalg.best_rank_approximation(A, 2, method="gram"),
        lambda A: linalg.best_rank_approximation(A, 2, method="randomized"),
    ):
        f = jax.jit(f)  # (one compilation per dtype instead of one per operation)
        out = f(A)
        assert out.dtype == jnp.float32
        np.testing.assert_allclose(out, f(A32), rtol=1e-6)
    grads = [
        jax.grad(lambda A, m=m: jnp.sum(linalg.best_rank_approximation(A, 2, method=m)))
        for m in ("exact", "gram", "randomized")
    ]
    grads.append(jax.grad(lambda A: jnp.sum(linalg.low_rank_factors(A, 2)[0])))
    for gradient in jax.jit(lambda A: [g(A) for g in grads])(A):
        assert gradient.dtype == jnp.float16
    G = A32.T @ A32
    G20 = jnp.kron(jnp.eye(4), G)[:20, :20]  # r > 16: the LAPACK path
    for M in (G, G20):
        B = jnp.ones((M.shape[0], 2))
        np.testing.assert_allclose(
            linalg.spd_solve(M.astype(jnp.float16), B.astype(jnp.float16)),
            linalg.spd_solve(M.astype(jnp.float16).astype(jnp.float32), B),
            rtol=1e-6,
        )


def test_randomized_svd_triplets_pair_up_without_power_iterations(x64):
    """A v_i = σ_i u_i and Aᵀ u_i = σ_i v_i for the returned triplets, from a warm start with no
    power iteration (the case where the small SVD's right factor is far from symmetric: a transposed
    Vᵀ kept s exact and turned V into another basis)."""
    rng = np.random.default_rng(0)
    A = jnp.asarray(rng.standard_normal((60, 4)) @ rng.standard_normal((4, 40)))
    out = linalg.randomized_svd(
        A, 3, start=jnp.asarray(rng.standard_normal((40, 8))), power_iters=0
    )
    np.testing.assert_allclose(A @ out.V, out.U * out.s, atol=1e-10)
    np.testing.assert_allclose(A.T @ out.U, out.V * out.s, atol=1e-10)


def test_randomized_factors_reverse_mode_is_the_tangent_projection(x64):
    """For an exactly rank-r A and a loss ⟨C, L Rᵀ⟩ the randomized factors' reverse mode must give
    the projection onto the tangent space of rank-r matrices, P_T(C) = UUᵀC + CVVᵀ − UUᵀCVVᵀ (closed
    form; the rule's (I − VVᵀ) factor is what removes the double-counted UUᵀCVVᵀ)."""
    rng = np.random.default_rng(0)
    A = jnp.asarray(rng.standard_normal((30, 3)) @ rng.standard_normal((3, 20)))
    C = jnp.asarray(rng.standard_normal((30, 20)))
    U, _, Vt = np.linalg.svd(np.asarray(A), full_matrices=False)
    Pu, Pv = U[:, :3] @ U[:, :3].T, Vt[:3].T @ Vt[:3]
    C_np = np.asarray(C)
    expected = Pu @ C_np + C_np @ Pv - Pu @ C_np @ Pv

    def loss(A):
        L, R = linalg.low_rank_factors(A, 3, "randomized", key=jax.random.key(0))
        return jnp.sum(C * (L @ R.T))

    np.testing.assert_allclose(jax.grad(loss)(A), expected, atol=1e-9)


def L_R_product(A, rank):
    U, s, Vt = np.linalg.svd(np.asarray(A), full_matrices=False)
    return jnp.asarray((U[:, :rank] * s[:rank]) @ Vt[:rank])


def _tangent_space_cotangent(A, rank, X_bar):
    """P_T(X̄) = Pu X̄ + X̄ Pv − Pu X̄ Pv at A's rank-r approximation: the tangent-space part of the
    projection's derivative, which misses the coupling with the discarded singular values."""
    U, _, Vt = np.linalg.svd(np.asarray(A), full_matrices=False)
    Pu, Pv, Xb = U[:, :rank] @ U[:, :rank].T, Vt[:rank].T @ Vt[:rank], np.asarray(X_bar)
    return Pu @ Xb + Xb @ Pv - Pu @ Xb @ Pv


@pytest.mark.parametrize("shape", [(30, 20), (20, 30)])
def test_gram_factors_reverse_mode_is_exact_for_losses_of_the_product(x64, shape):
    """low_rank_factors(method="gram") kept only the tangent-space part P_T(X̄) in reverse mode, off
    by O(σ_{r+1}/σ_r): 8 % here. It now differentiates X = A V_r V_rᵀ through the eigenspace, with
    every eigenpair of the Gram matrix: central differences of a nonlinear loss of X = L Rᵀ, tall
    and wide (through the transpose), at σ₄/σ₃ = 0.5 and with a zero column block (repeated zero σ
    among the discarded ones, whose left vectors the Gram route cannot give)."""
    rng = np.random.default_rng(9)
    A = _with_spectrum(rng, (5.0, 4.0, 3.0, 1.5, 1.0, 0.7, 0.5, 0.3), shape)
    A = A.at[:, -3:].set(0.0) if shape[0] > shape[1] else A.at[-3:].set(0.0)
    C, E = (jnp.asarray(rng.standard_normal(shape)) for _ in range(2))

    def loss(A):
        L, R = linalg.low_rank_factors(A, 3, "gram")
        return jnp.sum(C * jnp.sin(L @ R.T))

    h = 1e-6
    fd = (loss(A + h * E) - loss(A - h * E)) / (2 * h)
    g = jax.jit(jax.grad(loss))(A)
    assert np.isfinite(np.asarray(g)).all()
    np.testing.assert_allclose(jnp.sum(g * E), fd, rtol=1e-7)


def test_gram_factors_reverse_mode_at_float32_extremes():
    """X(cA) = c X(A), so the gradient of A' ↦ f(X(A')/c) at A' = cA is that of f∘X at A over c. At
    c = 1e30 (σ² overflows float32) and 1e-30 (underflows) the gram rule must give it, finite."""
    rng = np.random.default_rng(3)
    A = jnp.asarray(_with_spectrum(rng, (5.0, 4.0, 3.0, 1.5, 1.0, 0.7), (30, 20)), jnp.float32)
    C = jnp.asarray(rng.standard_normal((30, 20)), jnp.float32)

    def loss(A, c):
        L, R = linalg.low_rank_factors(A, 3, "gram")
        return jnp.sum(C * jnp.sin(jnp.matmul(L, R.T, precision="highest") / c))

    g = jax.grad(loss)(A, 1.0)
    for c in (1e30, 1e-30):
        gc = jax.grad(loss)(A * c, c)
        assert np.isfinite(np.asarray(gc)).all(), c
        np.testing.assert_allclose(np.asarray(gc) * c, g, atol=1e-4 * float(jnp.max(jnp.abs(g))))


def test_randomized_factors_reverse_mode_is_exact_for_losses_of_the_product(x64):
    """A of rank 8 with σ₄/σ₃ = 0.5 and a nonlinear loss of X = L Rᵀ: the sketch (k = 3 + 10 ≥ 8)
    holds A's range, so the randomized factors' reverse mode, the projection rule on the sketch's
    triplets, must equal central differences of the loss; the tangent-space part alone (the rule
    with k = rank, which method="gram" used) misses the coupling with σ₄, σ₅, … by far more. The
    factors themselves are randomized_svd's."""
    rng = np.random.default_rng(9)
    A = _with_spectrum(rng, (5.0, 4.0, 3.0, 1.5, 1.0, 0.7, 0.5, 0.3), (30, 20))
    C, E = (jnp.asarray(rng.standard_normal((30, 20))) for _ in range(2))

    def loss(A, method):
        L, R = linalg.low_rank_factors(A, 3, method, key=jax.random.key(4))
        return jnp.sum(C * jnp.sin(L @ R.T))

    h = 1e-6
    fd = (loss(A + h * E, "randomized") - loss(A - h * E, "randomized")) / (2 * h)
    g = jax.jit(jax.grad(loss), static_argnums=1)
    np.testing.assert_allclose(jnp.sum(g(A, "randomized") * E), fd, rtol=1e-7)
    tangent_part = _tangent_space_cotangent(
        A, 3, jax.grad(lambda X: jnp.sum(C * jnp.sin(X)))(L_R_product(A, 3))
    )
    assert abs(float(jnp.sum(tangent_part * E) - fd)) > 1e-2 * abs(float(fd))
    L, R = linalg.low_rank_factors(A, 3, "randomized", key=jax.random.key(4))
    ref = linalg.randomized_svd(A, 3, jax.random.key(4))
    np.testing.assert_allclose(L @ R.T, (ref.U * ref.s) @ ref.V.T, atol=1e-12)


def test_above_rounding_is_strict_relative_and_by_magnitude(x64):
    """|v| > size·ε·max|v|: a value exactly at the cut-off is rounding, negative eigenvalues count
    by their magnitude, all zeros are all rounding; gram_rounding_size(d, n) is d·√n."""
    eps = np.finfo(np.float64).eps
    v = jnp.array([-1.0, 3 * eps, 3 * eps * (1 + 1e-3), -4 * eps, 0.0])
    np.testing.assert_array_equal(linalg.above_rounding(v, 3), [True, False, True, True, False])
    np.testing.assert_array_equal(linalg.above_rounding(jnp.zeros(3), 3), [False] * 3)
    np.testing.assert_array_equal(
        linalg.above_rounding(v, linalg.gram_rounding_size(3, 4)),
        [True, False, False, False, False],
    )  # cut-off 6ε
    assert linalg.gram_rounding_size(3, 100) == 30.0


def test_power_of_two_scale_brackets_the_largest_magnitude():
    """c = 2ᵉ with 2ᵉ⁻¹ ≤ max|x| < 2ᵉ, so x / c is exact and in [½, 1) at the top; 1 for all-zero or
    non-finite x; no derivative flows through c."""
    for top, c in ((0.75, 1.0), (1.0, 2.0), (3.0, 4.0), (2.0**-30, 2.0**-29), (-5.0, 8.0)):
        x = jnp.array([0.1 * top, top], jnp.float32)
        assert float(linalg.power_of_two_scale(x)) == c
        np.testing.assert_array_equal(np.asarray(x / c) * c, np.asarray(x))
    for x in (jnp.zeros(3), jnp.array([1.0, jnp.nan]), jnp.array([jnp.inf, 2.0])):
        assert float(linalg.power_of_two_scale(x)) == 1.0
    np.testing.assert_array_equal(
        jax.grad(lambda x: linalg.power_of_two_scale(x))(jnp.array([0.3, -3.0])), [0.0, 0.0]
    )


def _orthogonal(rng, n):
    return np.linalg.qr(rng.standard_normal((n, n)))[0]


def _product_rule(A, rank):
    U, s, V = linalg.truncated_svd(A, rank)
    return (U * s) @ V.T


@functools.partial(jax.jit, static_argnums=(0, 1))
def _derivatives(f, rank, A, dA, C):
    """(jvp of f(·, rank) at A along dA, ⟨grad of ⟨C, f(·, rank)⟩, dA⟩,
    central difference along dA)."""
    _, jvp = jax.jvp(lambda A: f(A, rank), (A,), (dA,))
    g = jax.grad(lambda A: jnp.sum(C * f(A, rank)))(A)
    h = 1e-6
    fd = (f(A + h * dA, rank) - f(A - h * dA, rank)) / (2 * h)
    return jvp, jnp.sum(g * dA), fd


@pytest.mark.parametrize("shape", [(9, 6), (6, 9), (7, 7)])
def test_best_rank_approximation_derivative_equals_that_of_the_kept_triplets(x64, shape):
    """With distinct singular values both rules are the derivative of U_r Σ_r V_rᵀ: the projection's
    own rule must equal the product rule through truncated_svd's factors, forward and reverse."""
    rng = np.random.default_rng(11)
    A, dA, C = (jnp.asarray(rng.standard_normal(shape)) for _ in range(3))
    ours = _derivatives(linalg.best_rank_approximation, 3, A, dA, C)
    ref = _derivatives(_product_rule, 3, A, dA, C)
    np.testing.assert_allclose(
        linalg.best_rank_approximation(A, 3), _product_rule(A, 3), atol=1e-12
    )
    for a, b in zip(ours[:2], ref[:2]):
        np.testing.assert_allclose(a, b, atol=1e-10)


def _with_spectrum(rng, spectrum, shape):
    m, n = shape
    k = len(spectrum)
    return jnp.asarray(
        _orthogonal(rng, m)[:, :k] @ np.diag(spectrum) @ _orthogonal(rng, n)[:, :k].T
    )


_TIED = [
    ((3.0, 3.0, 1.0), 2, (3, 3)),  # a tie among the kept values
    ((2.0, 2.0, 2.0, 0.5, 0.5), 3, (7, 5)),  # all kept values equal, discarded ones tied too
    ((4.0, 1.0, 1.0, 0.0), 1, (4, 6)),  # discarded values tied, one of them zero
]


@pytest.mark.parametrize("method", ["exact", "gram", "randomized"])
@pytest.mark.parametrize("spectrum, rank, shape", _TIED)
def test_project_rank_derivative_is_finite_and_right_at_tied_singular_values(
    x64, spectrum, rank, shape, method
):
    """At tied kept singular values the singular vectors have no derivative (the product rule
    through them is NaN or rounding noise) but the projection does: project_rank's JVP and gradient
    must equal central differences of the projection itself, which is smooth there (σ_r > σ_{r+1}).
    Every method (at these sizes the randomized sketch spans all of A's columns, so its rule is
    exact)."""
    rng = np.random.default_rng(12)
    A = _with_spectrum(rng, spectrum, shape)
    dA, C = (jnp.asarray(rng.standard_normal(shape)) for _ in range(2))
    f = lambda A, rank: prox.project_rank(A, rank, method=method)  # noqa: E731
    jvp, g_dA, fd = _derivatives(f, rank, A, dA, C)
    assert np.isfinite(np.asarray(jvp)).all()
    np.testing.assert_allclose(jvp, fd, atol=1e-7)
    # (float64: a wrong rule is off by O(1); on an H200 even the exact rule's came to 1.06e-7)
    np.testing.assert_allclose(g_dA, jnp.sum(C * fd), rtol=1e-6)
    if method == "exact" and len(set(spectrum[:rank])) < rank:  # the situation the rule is for
        wrong = np.asarray(_derivatives(_product_rule, rank, A, dA, C)[0])
        assert not np.allclose(wrong, fd, atol=1e-2)


@pytest.mark.parametrize("method", ["gram", "randomized"])
def test_project_rank_gradient_is_finite_at_the_repeated_zeros_of_a_rank_deficient_matrix(
    x64, method
):
    """A matrix of rank 3 with 5 columns (exact zero columns): its Gram matrix has the eigenvalue 0
    twice, where reverse mode through ``eigh`` is NaN (0 · ∞ on the discarded pair), and the
    randomized sketch A Ω is rank-deficient, where the QR's derivative is NaN. The projection is
    smooth there (σ_2 = 2 > σ_3 = 1): gradients must be finite and equal the exact method's."""
    A = jnp.zeros((8, 5)).at[:3, :3].set(jnp.diag(jnp.array([3.0, 2.0, 1.0])))
    C = jnp.asarray(np.random.default_rng(3).standard_normal((8, 5)))
    # each gradient as one compiled program (op by op, each small op compiles on its own)
    grad = lambda m: jax.jit(jax.grad(lambda A: jnp.sum(C * prox.project_rank(A, 2, method=m))))(A)  # noqa: E731
    g = grad(method)
    assert np.isfinite(np.asarray(g)).all()
    np.testing.assert_allclose(g, grad("exact"), atol=1e-10)


def test_randomized_projection_derivative_is_exact_when_the_sketch_holds_the_range(x64):
    """rank A = 6 ≤ k = rank + oversample = 12 < min(m, n): Q Qᵀ A = A, so the sketch's rule is the
    projection's exact derivative (tied kept values included); at a generic A (full rank, a gap
    after r) it is the derivative of Q Qᵀ A's projection, close to the exact one after power
    iterations."""
    rng = np.random.default_rng(5)
    A = _with_spectrum(rng, (5.0, 5.0, 3.0, 1.0, 0.5, 0.2), (40, 30))
    dA, C = (jnp.asarray(rng.standard_normal((40, 30))) for _ in range(2))
    f = lambda A, rank: prox.project_rank(A, rank, method="randomized", key=jax.random.key(1))  # noqa: E731
    jvp, g_dA, fd = _derivatives(f, 2, A, dA, C)
    np.testing.assert_allclose(jvp, fd, atol=1e-7)
    np.testing.assert_allclose(g_dA, jnp.sum(C * fd), rtol=1e-7)
    spectrum = np.concatenate([[10.0, 8.0, 6.0], 0.3 * 0.8 ** np.arange(27)])
    A = _with_spectrum(rng, tuple(spectrum), (40, 30))
    ours = _derivatives(f, 3, A, dA, C)[0]
    exact = _derivatives(prox.project_rank, 3, A, dA, C)[0]
    # (the tail beyond the sketch, σ ≤ 0.03 against σ_3 = 6, enters the exact rule's gap terms)
    assert float(jnp.linalg.norm(ours - exact) / jnp.linalg.norm(exact)) < 1e-2


@pytest.mark.parametrize("rank", [2, 6])
def test_top_eigenspace_projector_derivative_at_tied_eigenvalues(x64, rank):
    """Π = V_r V_rᵀ of G = [Q diag(4, 4, 1) Qᵀ, 0; 0, 0] (6 × 6; eigenvalues 4, 4, 1 and an exact
    triple 0): eigh's vectors have no derivative within the ties, the projector does. The JVP and
    gradient of G ↦ Π through top_eigenspace must equal central differences; through top_eigh the
    JVP is wrong and the gradient NaN (0 · ∞ on the repeated zeros). With rank = n the span is
    everything and the derivative 0."""
    rng = np.random.default_rng(8)
    Q = _orthogonal(rng, 3)
    G = jnp.zeros((6, 6)).at[:3, :3].set(jnp.asarray(Q @ np.diag([4.0, 4.0, 1.0]) @ Q.T))
    dG, C = (jnp.asarray(rng.standard_normal((6, 6))) for _ in range(2))
    dG = dG + dG.T
    projector = lambda G, rank: (lambda V: V @ V.T)(linalg.top_eigenspace(G, rank))  # noqa: E731
    jvp, g_dG, fd = _derivatives(projector, rank, G, dG, C)
    np.testing.assert_allclose(jvp, fd, atol=1e-7)
    np.testing.assert_allclose(g_dG, jnp.sum(C * fd), rtol=1e-7, atol=1e-8)
    if rank < 6:
        assert float(jnp.max(jnp.abs(fd))) > 0.1
        through_eigh = lambda G, rank: (lambda V: V @ V.T)(linalg.top_eigh(G, rank)[1])  # noqa: E731
        jvp_eigh, g_eigh, _ = _derivatives(through_eigh, rank, G, dG, C)
        assert not np.allclose(jvp_eigh, fd, atol=1e-3)
        assert not np.isfinite(float(g_eigh))
    else:
        np.testing.assert_allclose(jvp, 0.0, atol=1e-12)


def _concurrent_lapack_kernels(hlo: str) -> list[tuple[str, str]]:
    """Pairs of batched LAPACK custom calls (a result of rank ≥ 3: a batch of matrices) of a
    compiled HLO module with no data path between them, within each computation: kernels that XLA's
    CPU runtime may run at the same time, each blocking a pool thread while its batch is shared
    out. (An unbatched kernel runs on its caller's thread and blocks none.)"""
    pairs = []
    for computation in re.split(r"\n(?=\S.*\{\n)", hlo):
        operands, kernels = {}, []
        for line in computation.splitlines():
            m = re.match(r"\s*(?:ROOT )?%([\w.\-]+) = [^=]*?\((.*)", line)
            if not m:
                continue
            operands[m.group(1)] = set(re.findall(r"%([\w.\-]+)", m.group(2)))
            target = re.search(r'custom_call_target="(lapack_[^"]+)"', line)
            first = re.search(r" = \(?\w+\[([\d,]*)\]", line)
            if target and first and first.group(1).count(",") >= 2:
                kernels.append((m.group(1), target.group(1)))

        @functools.cache
        def upstream(name):
            out = set()
            for o in operands.get(name, ()):
                out |= {o} | upstream(o)
            return frozenset(out)

        pairs += [
            (ta, tb)
            for i, (a, ta) in enumerate(kernels)
            for b, tb in kernels[i + 1 :]
            if a not in upstream(b) and b not in upstream(a)
        ]
    return pairs


@pytest.mark.skipif(
    jax.default_backend() != "cpu", reason="jaxlib's CPU LAPACK kernels and thread pool"
)
def test_no_two_lapack_kernels_of_a_vmapped_solver_can_run_at_once():
    """A 64-point vmap of ScaledGD on one CPU device hung now and then on a 2-core machine: the SVD
    of a QR's R ran beside the kernel forming its Q, each batched kernel blocked one of the two pool
    threads waiting for its share of the batch, and no thread was left (gdb: lapack_sgesdd_ffi and
    lapack_sorgqr_ffi both in jax::ParallelBatchMap's wait). linalg.qr orders them, and linalg.after
    the Cholesky / eigvalsh / LU / eigh of Newton's direction (whose derivative rule adds only one
    eigh, after them), the spectral norms of SDL's BCD, and under a vmap over SDL's data the start's
    SVD, the safe step's eigenvalues and BCD's first norms.
    Checked on the compiled programs: every two batched LAPACK kernels of each are joined by a data
    path."""
    from lowrank_jax import regression as rg
    from lowrank_jax import rpca, sdl, transforms
    from lowrank_jax.datasets import rpca as rdata
    from lowrank_jax.regression import sketch

    Y = rdata.rpca_problem(jax.random.key(0), 40, 40, 2, 0.1).Y
    zeta, eta = jnp.full(4, 0.5), jnp.full(3, 0.5)
    rng = np.random.default_rng(0)
    Xs, ys = jnp.asarray(rng.standard_normal((60, 12)).T, jnp.float32), jnp.arange(12) % 2
    A = jnp.asarray(rng.standard_normal((4, 80, 6)), jnp.float32)
    programs = {
        "scaledgd": (
            jax.vmap(lambda a: rpca.scaledgd(Y, 2, a, tol=None, max_iter=3).X),
            (jnp.full(4, 0.1),),
        ),
        "lrpca": (jax.vmap(lambda s: rpca.lrpca(Y, 2, s * zeta, eta).X), (jnp.ones(4),)),
        "sdl.fit": (
            jax.vmap(lambda lam: sdl.fit(Xs, ys, 2, lam=lam, max_iter=3, tol=None).theta),
            (jnp.full(4, 1e-2),),
        ),
        "truncated_svd": (jax.vmap(lambda a: linalg.truncated_svd(a, 2)), (A,)),
        "randomized_svd": (jax.vmap(lambda a: linalg.randomized_svd(a, 2, 0)), (A,)),
        "leverage_scores": (jax.vmap(sketch.leverage_scores), (A,)),
        "sdl bcd H": (
            jax.vmap(lambda lam: sdl.fit(Xs, ys, 2, lam=lam, max_iter=3, solver="bcd").theta),
            (jnp.full(4, 1e-2),),
        ),
        "sdl bcd W": (
            jax.vmap(
                lambda lam: sdl.fit(Xs, ys, 2, model="W", lam=lam, max_iter=3, solver="bcd").theta
            ),
            (jnp.full(4, 1e-2),),
        ),
        # vmap over the data (one fit per split): the start's SVD of X is batched too
        **{
            f"sdl.fit {solver} {model} over X": (
                jax.vmap(
                    lambda X, m=model, s=solver: (
                        sdl.fit(X, ys, 2, model=m, max_iter=3, tol=None, solver=s).theta
                    )
                ),
                (jnp.stack([Xs, 2 * Xs, Xs[::-1]]),),
            )
            for solver in ("lpgd", "bcd")
            for model in ("H", "W")
        },
        "newton_direction": (
            jax.vmap(transforms.newton_direction),
            (A[:, :6] @ jnp.swapaxes(A[:, :6], 1, 2), A[:, 0]),
        ),
        "newton_direction reverse": (
            jax.vmap(jax.grad(lambda H, g: transforms.newton_direction(H, g).sum(), (0, 1))),
            (A[:, :6] @ jnp.swapaxes(A[:, :6], 1, 2), A[:, 0]),
        ),
        "newton_direction forward": (
            jax.vmap(lambda H, g: jax.jvp(transforms.newton_direction, (H, g), (H, g))),
            (A[:, :6] @ jnp.swapaxes(A[:, :6], 1, 2), A[:, 0]),
        ),
    }
    for method in ("exact", "diagonal"):
        programs["newton " + method] = (
            jax.vmap(
                lambda w: (
                    rg.newton_solve(
                        A[0] / 10,
                        jnp.full(80, 1 / 80),
                        w,
                        jnp.zeros(6),
                        "exp",
                        method,
                        max_iter=2,
                        tol=None,
                    ).x
                )
            ),
            (jnp.linspace(4.0, 8.0, 4),),
        )
    for name, (fn, args) in programs.items():
        hlo = jax.jit(fn).lower(*args).compile().as_text()
        # it has batched kernels to see
        assert re.search(r"= \(?f32\[\d+,\d+,\d+\][^\n]*lapack_", hlo), name
        assert not _concurrent_lapack_kernels(hlo), (name, _concurrent_lapack_kernels(hlo))


def test_relative_error_ordinary_case_and_zero_reference(x64):
    """‖X − X₀‖_F/‖X₀‖_F; against X₀ = 0 it is 0 for X = 0 and +inf otherwise (not the absolute
    error ‖X‖_F); NaN stays NaN; jit gives the same values, the gradient is the closed form (0 at
    X = X₀), and a shape mismatch is refused."""
    X0 = np.array([[3.0, 0.0], [0.0, 4.0]])
    X = X0 + np.array([[0.0, 1.0], [0.0, 0.0]])
    assert float(linalg.relative_error(X, X0)) == pytest.approx(0.2)  # ‖[[0, 1], [0, 0]]‖ / 5
    assert float(jax.jit(linalg.relative_error)(X, X0)) == pytest.approx(0.2)
    zero = np.zeros((2, 2))
    assert float(linalg.relative_error(zero, zero)) == 0.0
    assert float(linalg.relative_error(X, zero)) == np.inf
    assert float(jax.jit(linalg.relative_error)(X, zero)) == np.inf
    assert np.isnan(float(linalg.relative_error(np.full((2, 2), np.nan), X0)))
    # d/dX ‖X − X₀‖/‖X₀‖ = (X − X₀)/(‖X − X₀‖ ‖X₀‖), and 0 (finite) at X = X₀
    g = jax.grad(linalg.relative_error)(X, X0)
    np.testing.assert_allclose(g, (X - X0) / 5.0, rtol=1e-12)
    np.testing.assert_array_equal(jax.grad(linalg.relative_error)(X0, X0), zero)
    with pytest.raises(ValueError, match=r"X0 must have the shape of X \(2, 2\), got \(2,\)"):
        linalg.relative_error(X, np.ones(2))
