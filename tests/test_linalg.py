import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lowrank_jax import linalg


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
    np.testing.assert_allclose((np.asarray(out.U) * out.s) @ np.asarray(out.V).T, (U[:, :r] * s[:r]) @ Vt[:r],
                               atol=1e-11)


def test_randomized_svd_recovers_known_spectrum(x64):
    rng = np.random.default_rng(1)
    s = np.concatenate([[10.0, 7.0, 5.0, 3.0, 2.0], 1e-3 * 0.5 ** np.arange(35)])
    A, U, V = known_spectrum(rng, 300, 200, s)
    out = linalg.randomized_svd(jnp.asarray(A), 5, jax.random.key(3), oversample=10, n_iter=4)
    np.testing.assert_allclose(out.s, s[:5], rtol=1e-10)
    assert subspace_gap(np.asarray(out.U), U[:, :5]) < 1e-8
    assert subspace_gap(np.asarray(out.V), V[:, :5]) < 1e-8


def test_randomized_svd_warm_start_equals_exact_on_exact_low_rank(x64):
    rng = np.random.default_rng(2)
    A, _, _ = known_spectrum(rng, 120, 90, np.array([4.0, 3.0, 1.0]))
    exact = linalg.truncated_svd(jnp.asarray(A), 3)
    start = jnp.asarray(rng.standard_normal((90, 6)))
    warm = linalg.randomized_svd(jnp.asarray(A), 3, start=start, n_iter=0)
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
    np.testing.assert_allclose(linalg.spd_solve(jnp.asarray(G), jnp.asarray(B)), np.linalg.solve(G, B), rtol=1e-10)
    np.testing.assert_allclose(linalg.spd_solve(jnp.asarray(G), jnp.asarray(B.T), right=True),
                               B.T @ np.linalg.inv(G), rtol=1e-10)


def test_spd_solve_singular_gram_stays_finite():
    G = jnp.zeros((3, 3), jnp.float32)
    out = linalg.spd_solve(G, jnp.ones((3, 2), jnp.float32))
    assert bool(jnp.all(jnp.isfinite(out)))
    F = jnp.asarray(np.random.default_rng(5).standard_normal((10, 2)), jnp.float32)
    rank_deficient = jnp.concatenate([F, F[:, :1]], axis=1)
    assert bool(jnp.all(jnp.isfinite(linalg.spd_solve(rank_deficient.T @ rank_deficient, jnp.ones((3, 1))))))


def test_low_rank_svd_rejects_unknown_method():
    with pytest.raises(ValueError, match="method"):
        linalg.low_rank_svd(jnp.ones((4, 4)), 1, method="lanczos")
