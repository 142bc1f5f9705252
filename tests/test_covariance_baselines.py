"""Covariance low-rank + sparse: metrics on hand-made matrices, the paper's synthetic generator, the
IALM / FPCP / RPCA-GD baselines (exact recovery of planted pairs, KKT residual, rank bounds),
argument checks, and the real-data correlation loaders (skipped unless `make data` has run)."""

import bz2
import gzip
import hashlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lowrank_jax import Status, linalg, prox
from lowrank_jax.covariance import baselines, metrics
from lowrank_jax.datasets import covariance as cov


def planted(seed, n=60, rank=2, frac=0.05, low=5.0, high=10.0):
    """Σ = UUᵀ + S₀: U ~ N(0, 1)^{n×rank}; S₀ symmetric, a fraction ``frac`` of the off-diagonal
    entries (in symmetric pairs, distinct) with magnitudes U[low, high] and random signs: large
    sparse spikes."""
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((n, rank))
    L0 = U @ U.T
    iu, ju = np.triu_indices(n, 1)
    m = int(frac * n * n / 2)
    pick = rng.choice(len(iu), m, replace=False)
    S0 = np.zeros((n, n))
    S0[iu[pick], ju[pick]] = rng.uniform(low, high, m) * rng.choice([-1.0, 1.0], m)
    S0 = S0 + S0.T
    return L0 + S0, L0, S0


def top_fraction_numpy(R, alpha):
    """Reference T_α: keep R_ij when |R_ij| is at least the ⌊α n⌋-th largest |·| of row i and of
    column j."""
    mag = np.abs(R)
    k = int(np.floor(alpha * R.shape[1] + 1e-9))
    row = -np.sort(-mag, axis=1)[:, k - 1]
    col = -np.sort(-mag, axis=0)[k - 1, :]
    return np.where((mag >= row[:, None]) & (mag >= col[None, :]), R, 0.0)


def rotated(eigs, seed=0):
    n = len(eigs)
    Q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
    A = (Q * np.asarray(eigs, float)) @ Q.T
    return 0.5 * (A + A.T)


# --- metrics --------------------------------------------------------------------------------------


def test_rank_above_counts_eigenvalues_strictly_above_the_threshold(x64):
    L = rotated([2.0, 0.5, 0.02, 0.009, 0.005, 0.0, -3.0])
    assert int(metrics.rank_above(L)) == 3  # −3 is not counted
    assert int(metrics.rank_above(L, signed=False)) == 4  # the code's matrix_rank counts |λ| = 3
    assert int(metrics.rank_above(L, tol=0.004)) == 5
    assert int(metrics.rank_above(np.diag([1.0, 0.01, 0.0]))) == 1  # exactly 0.01 is not > 0.01
    assert int(metrics.rank_above(np.zeros((4, 4)))) == 0


def test_frobenius_metrics_survive_extreme_scales():
    """In float32 ‖X‖_F of entries near 1e-25 squared to 0 (relative_error 0/0 → 0 for a 100 %
    error) and near 1e25 to inf; the scaled norm is exact there, and inf / NaN entries still
    propagate."""
    X0 = jnp.ones((10, 10), jnp.float32)
    for scale in (1e-25, 1.0, 1e25):
        np.testing.assert_allclose(linalg.frob(scale * X0), 10 * scale, rtol=1e-6)
        np.testing.assert_allclose(
            metrics.relative_error(2 * scale * X0, scale * X0), 1.0, rtol=1e-6
        )
    assert float(linalg.frob(X0.at[0, 0].set(jnp.inf))) == np.inf
    assert np.isnan(float(linalg.frob(X0.at[0, 0].set(jnp.nan))))
    assert float(linalg.frob(jnp.zeros((3, 3)))) == 0.0
    # complex input has a real norm; the derivative at 0 is a finite subgradient (0), not NaN
    assert float(linalg.frob(jnp.array([3 + 4j]))) == pytest.approx(5.0)
    np.testing.assert_array_equal(jax.grad(linalg.frob)(jnp.zeros((2, 2))), np.zeros((2, 2)))
    X = jnp.array([[1.0, -2.0], [2.0, 4.0]])
    np.testing.assert_allclose(jax.grad(linalg.frob)(X), X / 5.0, rtol=1e-6)


def test_sparsity_uses_a_strict_threshold(x64):
    S = np.array([[0.0, 0.01, -0.01], [0.0099, 0.5, -2.0]])
    assert float(metrics.sparsity(S)) == pytest.approx(2 / 6)  # |x| < 0.01: 0 and 0.0099
    # the code's |x| <= 0.01
    assert float(metrics.sparsity(S, strict=False)) == pytest.approx(4 / 6)
    assert float(metrics.sparsity(S, tol=1.0)) == pytest.approx(5 / 6)
    assert float(metrics.sparsity(np.zeros((3, 3)))) == 1.0


def test_soft_threshold_and_relative_errors_closed_forms(x64):
    S = np.array([[3.0, -0.05], [-0.2, 0.1]])
    np.testing.assert_allclose(prox.soft_threshold(S, 0.1), [[2.9, 0.0], [-0.1, 0.0]], atol=1e-15)
    assert metrics.default_shrink(100) == pytest.approx(0.1)
    X0 = np.array([[3.0, 0.0], [0.0, 4.0]])
    assert float(
        metrics.relative_error(X0 + np.array([[0.0, 1.0], [0.0, 0.0]]), X0)
    ) == pytest.approx(0.2)
    assert float(metrics.relative_error(np.zeros((2, 2)), np.zeros((2, 2)))) == 0.0
    assert float(metrics.relative_error(np.ones((2, 2)), np.zeros((2, 2)))) == np.inf


def test_real_data_errors_and_report_by_hand(x64):
    Sigma = np.array([[2.0, 1.0], [1.0, 2.0]])
    L = np.ones((2, 2))
    S = np.array([[1.5, 0.0], [0.0, 0.2]])
    e = metrics.real_data_errors(Sigma, L, S, shrink_t=0.5)
    assert float(e.fit_L) == pytest.approx(np.sqrt(2) / 2)  # ‖Σ − L‖ = ‖I‖ = √2, ‖L‖ = 2
    # L + shrink(S, 0.5) = [[2, 1], [1, 1]]: residual 1, ‖Σ‖ = √10; shrink(S) has 3 zeros of 4.
    assert float(e.fit_shrunk) == pytest.approx(1 / np.sqrt(10))
    assert float(e.sparsity_shrunk) == pytest.approx(0.75)
    d = metrics.real_data_errors(Sigma, L, S)  # default t = 1/√2
    assert float(d.sparsity_shrunk) == pytest.approx(0.75)
    rep = metrics.report(Sigma, L, S, L0=L, S0=Sigma - L, shrink_t=0.5)
    assert rep["r_L"] == 1 and rep["r_L_code"] == 1 and rep["s_S"] == 0.5
    assert rep["min_eig_L"] == pytest.approx(0.0, abs=1e-12)
    assert rep["rel_error_L"] == 0.0
    assert rep["rel_error_S"] == pytest.approx(np.sqrt(0.25 + 0.64) / np.sqrt(2))
    assert rep["residual"] == pytest.approx(np.sqrt(0.25 + 0.64) / np.sqrt(10))
    assert rep["fit_shrunk"] == pytest.approx(float(e.fit_shrunk))
    assert "rel_error_L" not in metrics.report(Sigma, L, S)
    # Shapes that broadcast (a scalar L, an (n, 1) S, a cropped L0) gave numbers; a NaN L read as a
    # perfect fit_L = 0. Each is now refused by name, and the ratios keep a NaN.
    for kw, match in [
        (dict(L=0.0), "L must be a 2-D"),
        (dict(S=np.zeros((2, 1))), "S must have the shape"),
        (dict(L0=L[:1]), "L0 must have the shape"),
        (dict(L=np.full((2, 2), np.nan)), "L has non-finite"),
        (dict(Sigma=np.ones(2)), "Sigma must be a 2-D"),
    ]:
        args = dict(Sigma=Sigma, L=L, S=S) | kw
        with pytest.raises(ValueError, match=match):
            metrics.report(**args)
    assert np.isnan(metrics.real_data_errors(Sigma, np.full((2, 2), np.nan), S).fit_L)
    assert np.isnan(metrics.relative_error(np.full((2, 2), np.nan), np.full((2, 2), np.nan)))


_SIGMA_2, _L_2, _S_2 = (
    np.array([[2.0, 1.0], [1.0, 2.0]]),
    np.ones((2, 2)),
    np.array([[1.5, 0.0], [0.0, 0.2]]),
)
_MISMATCHED = {
    "real_data_errors": (
        metrics.real_data_errors,
        [
            (
                (_SIGMA_2, _L_2[:, :1], _S_2),
                r"L must have the shape of Sigma \(2, 2\), got \(2, 1\)",
            ),
            ((_SIGMA_2, _L_2, 0.0), r"S must have the shape of Sigma \(2, 2\), got \(\)"),
            ((_SIGMA_2, _L_2, _S_2[:1]), r"S must have the shape of Sigma \(2, 2\), got \(1, 2\)"),
            ((_SIGMA_2, 1.0, _S_2), r"L must have the shape of Sigma"),
            (
                (np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 3))),
                r"Sigma must be a square matrix, got shape \(2, 3\)",
            ),
            (
                (np.ones(2), np.ones(2), np.ones(2)),
                r"Sigma must be a square matrix, got shape \(2,\)",
            ),
        ],
    ),
    "relative_error": (
        metrics.relative_error,
        [
            ((np.ones((3, 3)), np.ones(3)), r"X0 must have the shape of X \(3, 3\), got \(3,\)"),
            ((np.ones(3), np.ones((3, 3))), r"X0 must have the shape of X \(3,\), got \(3, 3\)"),
            ((np.ones((2, 2)), 0.0), r"X0 must have the shape of X \(2, 2\), got \(\)"),
            (
                (np.ones((2, 3)), np.ones((3, 2))),
                r"X0 must have the shape of X \(2, 3\), got \(3, 2\)",
            ),
        ],
    ),
}


@pytest.mark.parametrize("name", _MISMATCHED)
def test_real_data_errors_and_relative_error_refuse_mismatched_shapes(name):
    """Shapes that would broadcast into plausible numbers (an (n, 1) L or a scalar S in
    real_data_errors, ones((3, 3)) against ones(3) in relative_error) raise report's ValueError
    naming the argument, also under jit (shapes are static)."""
    fn, cases = _MISMATCHED[name]
    for args, match in cases:
        with pytest.raises(ValueError, match=match):
            fn(*args)
        with pytest.raises(ValueError, match=match):
            jax.jit(fn)(*args)


def test_real_data_errors_and_relative_error_keep_their_values_for_matching_shapes(x64):
    """Matching shapes give the by-hand values of test_real_data_errors_and_report_by_hand, for any
    shape relative_error's two arguments share."""
    X0 = np.array([[3.0, 0.0], [0.0, 4.0]])
    e, r2, r1 = jax.jit(
        lambda: (
            metrics.real_data_errors(_SIGMA_2, _L_2, _S_2, 0.5),  # one compiled program
            metrics.relative_error(X0 + np.array([[0.0, 1.0], [0.0, 0.0]]), X0),
            metrics.relative_error(np.ones(3), 2 * np.ones(3)),
        )
    )()
    np.testing.assert_allclose(e, [np.sqrt(2) / 2, 1 / np.sqrt(10), 0.75], rtol=1e-12)
    np.testing.assert_allclose([r2, r1], [0.2, 0.5], rtol=1e-12)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda A, L, S: metrics.report(A, L, S, tol=-1.0), "tol must be non-negative"),
        (lambda A, L, S: metrics.report(A, L, S, tol=float("nan")), "tol"),
        (lambda A, L, S: metrics.report(A, L, S, shrink_t=-0.5), "shrink_t must be non-negative"),
        (lambda A, L, S: metrics.report(A, L, S, shrink_t=np.nan), "shrink_t"),
        (lambda A, L, S: metrics.report(A, L, S, tol=np.array([0.01, 0.02])), "tol"),
        (lambda A, L, S: metrics.real_data_errors(A, L, S, tol=-0.01), "tol must be non-negative"),
        (
            lambda A, L, S: metrics.real_data_errors(A, L, S, shrink_t=-0.5),
            "shrink_t must be non-negative",
        ),
        (lambda A, L, S: metrics.real_data_errors(A, L, S, shrink_t=jnp.nan), "shrink_t"),
        (lambda A, L, S: metrics.rank_above(L, tol=-1.0), "tol must be non-negative"),
        (lambda A, L, S: metrics.rank_above(L, tol=np.nan), "tol"),
        (lambda A, L, S: metrics.sparsity(S, tol=-1.0), "tol must be non-negative"),
        (lambda A, L, S: prox.soft_threshold(S, -0.5), "t must be non-negative"),
        (lambda A, L, S: metrics.check_symmetric(A, rtol=-1.0), "rtol must be non-negative"),
        (
            lambda A, L, S: metrics.check_symmetric(
                A + 1e-3 * np.triu(np.ones((2, 2)), 1), rtol=np.nan
            ),
            "rtol",
        ),
        (lambda A, L, S: metrics.default_shrink(0), "n must be"),
    ],
)
def test_metrics_refuse_negative_or_nan_thresholds(call, match):
    """A negative or NaN threshold gave wrong metrics without an error: report(tol=-1) counted every
    eigenvalue (r_L = n) and no zero entry (s_S = 0), a negative shrink_t inflated S
    (sparsity_shrunk 0, fit_shrunk tripled), a NaN rtol let a non-symmetric Σ through
    check_symmetric, and default_shrink(0) raised ZeroDivisionError. Each is now a ValueError naming
    the argument."""
    Sigma = np.array([[2.0, 1.0], [1.0, 2.0]])
    L = np.ones((2, 2))
    S = np.array([[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match=match):
        call(Sigma, L, S)


def test_metric_thresholds_zero_inf_and_traced_still_work(x64):
    """The checks refuse only negative and NaN thresholds: 0 and +inf are the limits of the
    metrics' definitions, and a traced tol (jit, vmap over a grid of thresholds) is checked for its
    shape only and gives the same counts as the concrete one."""
    Sigma = np.array([[2.0, 1.0], [1.0, 2.0]])
    # eigenvalues 0 and 2, exactly on every backend (a GPU's eigh put ones((2, 2))'s 0 at 1e-16,
    # which tol = 0 counts)
    L = np.diag([2.0, 0.0])
    S = np.array([[1.5, 0.0], [0.0, 0.2]])
    rep = metrics.report(Sigma, L, S, tol=0.0, shrink_t=0.0)
    assert rep["r_L"] == 1 and rep["s_S"] == 0.0  # |x| < 0 holds for no entry
    assert rep["fit_shrunk"] == pytest.approx(rep["residual"])  # no shrinkage
    rep = metrics.report(Sigma, L, S, tol=np.inf, shrink_t=np.inf)
    assert rep["r_L"] == 0 and rep["s_S"] == 1.0 and rep["sparsity_shrunk"] == 1.0
    assert rep["fit_shrunk"] == pytest.approx(
        rep["fit_L"] * np.linalg.norm(L) / np.linalg.norm(Sigma)
    )
    tols = jnp.array([0.0, 0.1, 1.0, 3.0])
    ranks = jax.vmap(lambda t: metrics.rank_above(L, t))(tols)
    zeros = jax.jit(jax.vmap(lambda t: metrics.sparsity(S, t)))(tols)
    assert [int(r) for r in ranks] == [int(metrics.rank_above(L, float(t))) for t in tols]
    np.testing.assert_array_equal(zeros, [float(metrics.sparsity(S, float(t))) for t in tols])
    # monotone in tol
    assert np.all(np.diff(np.asarray(ranks)) <= 0) and np.all(np.diff(np.asarray(zeros)) >= 0)
    assert (
        float(prox.soft_threshold(S, np.array([[0.0, 0.0], [0.0, 0.5]]))[1, 1]) == 0.0
    )  # an array t


def test_check_symmetric_rejects_bad_input():
    good = np.eye(3)
    assert metrics.check_symmetric(good).shape == (3, 3)
    metrics.check_symmetric(good + 1e-8 * np.triu(np.ones((3, 3)), 1))  # within 1e-6 · max|Σ|
    with pytest.raises(ValueError, match="square"):
        metrics.check_symmetric(np.ones((2, 3)))
    with pytest.raises(ValueError, match="2-D"):
        metrics.check_symmetric(np.ones(3))
    with pytest.raises(ValueError, match="symmetric"):
        metrics.check_symmetric(good + 1e-3 * np.triu(np.ones((3, 3)), 1))
    with pytest.raises(ValueError, match="non-finite"):
        metrics.check_symmetric(np.diag([1.0, np.nan, 1.0]))


# --- synthetic generator --------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["code", "paper"])
def test_generator_structure(variant):
    n, k0, s0 = 80, 4, 0.95
    Sigma, L0, S0 = cov.lrs_problem(3, n, k0, s0, variant)
    for A in (Sigma, L0, S0):
        assert A.shape == (n, n) and A.dtype == np.float64
        np.testing.assert_array_equal(A, A.T)
    np.testing.assert_array_equal(Sigma, L0 + S0)
    assert np.linalg.matrix_rank(L0) == k0
    assert np.linalg.eigvalsh(S0)[0] >= -1e-12  # a sum of PSD 2 × 2 blocks
    assert np.linalg.eigvalsh(Sigma)[0] >= -1e-9 * np.abs(Sigma).max()
    # stops as soon as the sparsity (|x| < 0.01) is <= s0: one block changes at most 4 entries
    s = float(metrics.sparsity(S0))
    assert s0 - 4 / n**2 < s <= s0
    assert np.all(np.diag(S0) >= 0)
    off = S0[~np.eye(n, dtype=bool)]
    if variant == "paper":  # distinct pairs: each off-diagonal entry is a single b ∈ [−1, 1]
        assert np.abs(off).max() <= 1.0
        # every block adds b to both (i, j) and (j, i) and a >= |b| to the diagonal
        assert np.all(np.diag(S0) >= np.abs(S0 - np.diag(np.diag(S0))).max(axis=1) - 1e-12)


def test_generator_determinism_and_variants():
    a = cov.lrs_problem(7, 50, 3, 0.9, "code")
    b = cov.lrs_problem(7, 50, 3, 0.9, "code")
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    c = cov.lrs_problem(8, 50, 3, 0.9, "code")
    assert not np.array_equal(a.L0, c.L0)
    p = cov.lrs_problem(7, 50, 3, 0.9, "paper")
    np.testing.assert_array_equal(a.L0, p.L0)  # M is drawn first: same L0 for one seed
    assert not np.array_equal(a.S0, p.S0)
    key = jax.random.key(5)  # a JAX key works and is deterministic too
    np.testing.assert_array_equal(
        cov.lrs_problem(key, 20, 2, 0.9).Sigma, cov.lrs_problem(key, 20, 2, 0.9).Sigma
    )
    rng = np.random.default_rng(0)
    assert cov.as_generator(rng) is rng


def test_generator_matches_the_notes_checks():
    """[CHECK] of the note §4.1 at n = 100, k0 = 10, s0 = 0.95: ‖S0‖/‖L0‖ ≈ 0.12-0.13 for the code's
    pair process and ≈ 0.11 for uniform distinct pairs, with about 210 blocks; the code's process
    favours low indices (j ~ U{1..n−1}, then i < j)."""
    ratio = {"code": [], "paper": []}
    blocks = []
    for seed in range(6):
        for variant in ratio:
            Sigma, L0, S0 = cov.lrs_problem(seed, 100, 10, 0.95, variant)
            ratio[variant].append(np.linalg.norm(S0) / np.linalg.norm(L0))
        rng = np.random.default_rng(seed)
        rng.standard_normal((100, 10))
        S0, count = cov.sparse_psd_blocks(rng, 100, 0.95, "code")
        np.testing.assert_array_equal(S0, cov.lrs_problem(seed, 100, 10, 0.95, "code").S0)
        blocks.append(count)
    assert 0.11 < np.mean(ratio["code"]) < 0.135
    assert 0.10 < np.mean(ratio["paper"]) < 0.12
    assert np.mean(ratio["code"]) > np.mean(ratio["paper"])
    assert 190 < np.mean(blocks) < 230
    S0 = cov.lrs_problem(0, 100, 10, 0.95, "code").S0
    nz = np.abs(S0) >= 0.01
    assert nz[:20].sum() > 1.5 * nz[-20:].sum()


def test_generator_stops_at_the_first_block_that_reaches_s0():
    """The stop compared nonzeros with n²(1 − s₀) = 500.00000000000045 at n = 100, s₀ = 0.95, so it
    never stopped at exactly 500 non-zeros (sparsity = s₀) and added one block too many in about
    half the instances. The rule is the authors' sparsity > s₀: the sparsity ends ≤ s₀, and at s₀
    exactly whenever the last block lands there."""
    nonzeros = []
    for seed in range(12):
        S0, _ = cov.sparse_psd_blocks(np.random.default_rng(seed), 100, 0.95, "code")
        nonzeros.append(int(np.sum(np.abs(S0) >= 0.01)))
    assert all(500 <= z <= 504 for z in nonzeros) and 500 in nonzeros


def test_generator_rejects_bad_arguments():
    for args, match in [
        ((10, 11, 0.9), "k0"),
        ((10, 0, 0.9), "k0"),
        ((1, 1, 0.9), "n"),
        ((10, 2, 1.5), "s0"),
        ((10, 2, -0.1), "s0"),
    ]:
        with pytest.raises(ValueError, match=match):
            cov.lrs_problem(0, *args)
    with pytest.raises(ValueError, match="variant"):
        cov.lrs_problem(0, 10, 2, 0.9, "uniform")
    with pytest.raises(TypeError, match="seed"):
        cov.lrs_problem("seed", 10, 2, 0.9)
    # at threshold 2 no off-diagonal b ∈ [−1, 1] of a distinct pair ever counts: s0 = 0 is
    # unreachable
    with pytest.raises(ValueError, match="distinct pairs"):
        cov.sparse_psd_blocks(np.random.default_rng(0), 3, 0.0, "paper", threshold=2.0)


def test_generator_takes_numpy_scalars_and_zero_d_arrays():
    """Counts given as 0-d integer arrays (np.array(20), as the toolkit's solvers accept) were
    refused ("n must be a positive integer, got array(20)"), and s0 = np.array(0.9) was refused with
    the misleading "must lie in [0, 1], got array(0.9)"; the seed and sparse_psd_blocks likewise.
    They now give the same problem as the Python numbers, and each bad argument is named."""
    ref = cov.lrs_problem(0, 20, 3, 0.9)
    for args in [
        (np.array(0), np.array(20), np.array(3), np.array(0.9)),
        (0, np.int64(20), jnp.int32(3), np.float64(0.9)),
        (np.uint32(0), np.array(20, np.int32), 3, 0.9),
    ]:
        for x, y in zip(ref, cov.lrs_problem(*args)):
            np.testing.assert_array_equal(x, y)
    s0 = jnp.float32(0.9)  # a JAX scalar: its own (float32) value is the target
    assert (
        float(s0) - 4 / 20**2
        < float(metrics.sparsity(cov.lrs_problem(0, jnp.int32(20), 3, s0).S0))
        <= float(s0)
    )
    S_ref, blocks = cov.sparse_psd_blocks(np.random.default_rng(1), 12, 0.9, "paper")
    S_arr, blocks_arr = cov.sparse_psd_blocks(
        np.random.default_rng(1), np.array(12), np.array(0.9), "paper", threshold=np.array(0.01)
    )
    np.testing.assert_array_equal(S_ref, S_arr)
    assert blocks == blocks_arr and float(metrics.sparsity(S_arr)) <= 0.9
    for args, match in [
        ((0, 20, 3, np.array(1.2)), "s0 .* must lie in \\[0, 1\\], got 1.2"),
        ((0, 20, 3, np.array([0.9])), "s0"),
        ((0, 20, 3, True), "s0"),
        ((0, 20, 3, np.nan), "s0"),
        ((0, np.array(20.0), 3, 0.9), "n must be an integer"),
        ((0, 20, np.array(21), 0.9), "k0"),
        ((np.array(-1), 20, 3, 0.9), "key: a seed must be non-negative"),
    ]:
        with pytest.raises(ValueError, match=match):
            cov.lrs_problem(*args)
    # the first argument is `key`, as in every other generator
    with pytest.raises(TypeError, match="key_or_seed"):
        cov.lrs_problem(key_or_seed=0, n=20, k0=3, s0=0.9)
    np.testing.assert_array_equal(
        cov.lrs_problem(0, n=20, k0=3, s0=0.9).Sigma,
        cov.lrs_problem(key=0, n=20, k0=3, s0=0.9).Sigma,
    )
    with pytest.raises(TypeError, match="rng must be an int seed"):
        cov.sparse_psd_blocks("seed", 12, 0.9)
    rng = np.random.default_rng(0)
    for kw, match in [
        (dict(n=np.array(1)), "n must be >= 2"),
        (dict(s0=-0.1), "s0"),
        (dict(variant="uniform"), "variant"),
        (dict(threshold=0.0), "threshold"),
        (dict(threshold=-0.01), "threshold"),
        (dict(threshold=np.nan), "threshold"),
    ]:
        with pytest.raises(ValueError, match=match):
            cov.sparse_psd_blocks(rng, **(dict(n=10, s0=0.9) | kw))


# --- baselines on planted low-rank + sparse pairs -------------------------------------------------


def test_ialm_recovers_planted_pair_and_meets_its_residual_tolerance(x64):
    Sigma, L0, S0 = planted(0)
    tol = 1e-7
    out = baselines.ialm(Sigma, tol=tol)
    k = int(out.n_iter)
    assert 0 < k < 100
    assert float(metrics.relative_error(out.L, L0)) < 1e-5
    assert float(metrics.relative_error(out.S, S0)) < 1e-5
    # exit criterion, recomputed from the returned pair: ‖Σ − L − S‖_F/‖Σ‖_F ≤ tol
    assert float(metrics.relative_error(out.L + out.S, Sigma)) <= tol
    hist = np.asarray(out.history["residual"])
    assert int(out.status) == Status.CONVERGED and float(out.residual) == hist[k - 1]
    assert float(out.residual) <= tol and np.all(np.isnan(hist[k:]))
    assert np.all(hist[: k - 1] >= tol)
    assert int(out.rank) == 2 == int(metrics.rank_above(out.L))
    # S = shrink(·, λ/μ) puts its non-zeros on the spikes and nowhere else: S's support is S0's
    big = np.abs(np.asarray(out.S)) > 1e-6 * np.abs(np.asarray(S0)).max()
    np.testing.assert_array_equal(big, np.asarray(S0) != 0)


def test_ialm_on_the_papers_generator(x64):
    """With LRSLibrary's tolerance 1e-7, as the Table II experiment passes it, and the default."""
    Sigma, L0, S0 = cov.lrs_problem(0, 100, 10, 0.95, "code")
    for tol in (1e-7, None):
        out = baselines.ialm(Sigma) if tol is None else baselines.ialm(Sigma, tol=tol)
        rep = metrics.report(Sigma, out.L, out.S, L0, S0)
        assert rep["r_L"] == 10 and rep["rel_error_L"] < 1e-4 and rep["rel_error_S"] < 1e-3
        assert rep["residual"] < (tol or 1e-6) and int(out.status) == Status.CONVERGED


def test_fpcp_rank_and_recovery(x64):
    Sigma, L0, S0 = planted(1)
    n = Sigma.shape[0]
    two = baselines.fpcp(Sigma, 2)
    many = baselines.fpcp(Sigma, 2, max_iter=60)
    for out, loops in ((two, 2), (many, 60)):
        s = np.linalg.svd(np.asarray(out.L), compute_uv=False)
        assert s[2] <= 1e-10 * s[0]  # rank L <= k
        assert int(out.n_iter) == loops and out.history["residual"].shape == (loops,)
        assert int(out.status) == Status.MAX_ITER and float(out.residual) == float(
            out.history["residual"][-1]
        )
        np.testing.assert_allclose(
            out.residual, metrics.relative_error(out.L + out.S, Sigma), rtol=1e-10
        )
        # the method's S is the 1/√n shrinkage of Σ − L (λ = 1/√n)
        np.testing.assert_allclose(
            out.S, prox.soft_threshold(Sigma - out.L, 1 / np.sqrt(n)), atol=1e-12
        )
    err_two, err_many = (float(metrics.relative_error(o.L, L0)) for o in (two, many))
    # the fixed point is close to L0 (λ-bias only)
    assert err_many < 0.02 and err_many < err_two / 10
    assert float(metrics.relative_error(many.S, S0)) < 0.05
    # rank growth (LRSLibrary's rule) with k as the maximum: rank0 ≤ rank ≤ k, one step per loop
    grown = baselines.fpcp(Sigma, 5, max_iter=3, grow=True)
    assert int(grown.rank) == 3  # 1 → 2 → 3
    assert np.linalg.matrix_rank(np.asarray(grown.L), tol=1e-8 * np.abs(Sigma).max()) <= 3
    capped = baselines.fpcp(Sigma, 2, max_iter=10, grow=True)
    assert int(capped.rank) == 2
    rnd = baselines.fpcp(Sigma, 2, max_iter=60, svd="randomized")
    np.testing.assert_allclose(rnd.L, many.L, atol=1e-7 * np.abs(Sigma).max())


def _soft_numpy(x, t):
    """Soft thresholding at t in NumPy."""
    return np.sign(x) * np.maximum(np.abs(x) - t, 0)


def _fastpcp_growth_numpy(V, lam, loops, k, threshold=0.01, lam_factor=1.0):
    """LRSLibrary's rank growth (``fastpcp.m``) in NumPy with full SVDs, capped at k: the flag is
    set afresh after every loop from σ_r / Σ_{i<r} σ_i, and λ ← λ · lam_factor with every rank
    increase. Returns (L, final rank, flags, final λ)."""
    rank, flag, flags = 1, True, []
    U, s, Vt = np.linalg.svd(V)
    L = (U[:, :rank] * s[:rank]) @ Vt[:rank]
    S = _soft_numpy(V - L, lam)
    for _ in range(loops - 1):
        if flag and rank < k:
            rank, lam = rank + 1, lam * lam_factor
        U, s, Vt = np.linalg.svd(V - S)
        flag = rank == 1 or s[rank - 1] / s[: rank - 1].sum() > threshold
        flags.append(flag)
        L = (U[:, :rank] * s[:rank]) @ Vt[:rank]
        S = _soft_numpy(V - L, lam)
    return L, rank, flags, lam


def test_fpcp_growth_resumes_after_a_failed_test_as_lrslibrary(x64):
    """The growth flag is re-tested every loop: on the paper's generator (n = 100, k₀ = 10,
    s₀ = 0.95) the test fails at one loop and passes at the next, and the rank grows on to 9, the
    paper's Table II value (stopping the growth at the first failure left it at 8)."""
    Sigma, _, _ = cov.lrs_problem(0, 100, 10, 0.95, "code")
    lam = 1 / np.sqrt(100)
    L_ref, rank_ref, flags, _ = _fastpcp_growth_numpy(np.asarray(Sigma), lam, 10, 10)
    first_fail = flags.index(False)
    assert True in flags[first_fail:]  # this instance does fail, then pass again
    out = baselines.fpcp(Sigma, 10, max_iter=10, grow=True)
    assert int(out.rank) == rank_ref == 9
    np.testing.assert_allclose(out.L, L_ref, atol=1e-8 * np.abs(np.asarray(Sigma)).max())


def test_fpcp_hyperparameters_are_arrays(x64):
    Sigma, _, _ = planted(2, n=30)
    lams = jnp.array([0.1, 0.3])
    batched = jax.vmap(lambda lam: baselines.fpcp(Sigma, 2, lam=lam, max_iter=5).L)(lams)
    for i, lam in enumerate([0.1, 0.3]):
        np.testing.assert_allclose(
            batched[i], baselines.fpcp(Sigma, 2, lam=lam, max_iter=5).L, atol=1e-10
        )


def test_rpca_gd_recovers_planted_pair_with_psd_factor(x64):
    Sigma, L0, S0 = planted(0)
    out, U = baselines.rpca_gd(Sigma, 2, alpha=0.1, max_iter=300, tol=1e-9, return_factor=True)
    assert U.shape == (60, 2)
    np.testing.assert_allclose(out.L, U @ U.T, atol=1e-12)  # L = UUᵀ: PSD, rank ≤ k
    assert float(metrics.relative_error(out.L, L0)) < 1e-6
    assert float(metrics.relative_error(out.S, S0)) < 1e-6
    np.testing.assert_array_equal(out.L, out.L.T)
    # T_α̃(Σ − L), α̃ = 2α
    np.testing.assert_array_equal(out.S, top_fraction_numpy(Sigma - np.asarray(out.L), 0.2))
    hist = np.asarray(out.history["residual"][: int(out.n_iter)])
    assert hist[-1] < 1e-7 and hist[-1] < 1e-5 * hist[0]
    np.testing.assert_array_equal(out.U, U)
    # too small an α misses the rows with more spikes: a much worse fit
    low = baselines.rpca_gd(Sigma, 2, alpha=0.03, max_iter=300)
    assert float(metrics.relative_error(low.L, L0)) > 1e-3


def test_rpca_gd_on_the_papers_generator(x64):
    Sigma, L0, S0 = cov.lrs_problem(0, 100, 10, 0.95, "code")
    out = baselines.rpca_gd(Sigma, 10, alpha=0.1, max_iter=500)
    rep = metrics.report(Sigma, out.L, out.S, L0, S0)
    assert rep["r_L"] == 10 and rep["min_eig_L"] > -1e-12 * np.abs(Sigma).max()  # PSD: L = UUᵀ
    assert rep["rel_error_L"] < 1e-3 and rep["rel_error_S"] < 1e-2


def test_rpca_gd_on_a_far_from_psd_sigma_stays_finite_and_raises_when_it_diverges(x64):
    """On −Σ (negative definite plus spikes) λ₁(Σ − S_init) is far below ‖Σ − S_init‖₂; a step
    normalised by λ₁ diverged to NaN (residual 0.62 → 3e13 → NaN) with no error. With
    σ₁ = ‖Σ − S_init‖₂ (Yi et al.'s top singular value) the run stays finite and its residual
    ‖UUᵀ + S − Σ‖/‖Σ‖ falls. A step that does diverge raises RuntimeError when called directly and
    under jit; with throw=False the run stops there and reports DIVERGED."""
    Sigma = -cov.lrs_problem(0, 20, 3, 0.9).Sigma
    out = baselines.rpca_gd(Sigma, 3, max_iter=300)
    assert np.all(np.isfinite(out.L)) and np.all(np.isfinite(out.S))
    res = np.asarray(out.history["residual"][: int(out.n_iter)])
    assert np.all(np.isfinite(res)) and res[-1] < 0.5 * res[0]
    assert int(out.status) in (Status.CONVERGED, Status.MAX_ITER)
    Sigma_pos = -Sigma
    with pytest.raises(RuntimeError, match="RPCA-GD diverged.*lower lr"):
        baselines.rpca_gd(Sigma_pos, 3, lr=50.0, max_iter=300)
    with pytest.raises(RuntimeError, match="RPCA-GD diverged.*lower lr"):
        jax.block_until_ready(
            jax.jit(lambda s: baselines.rpca_gd(Sigma_pos, 3, lr=s, max_iter=300).L)(50.0)
        )
    quiet = jax.jit(lambda s: baselines.rpca_gd(Sigma_pos, 3, lr=s, max_iter=300, throw=False))(
        50.0
    )
    assert int(quiet.status) == Status.DIVERGED and int(quiet.n_iter) < 300


def _dc_numpy(s, mu, gamma, start):
    """The γ-norm DC steps in NumPy, for the hand-made references below."""
    sig = start.copy()
    for _ in range(100):
        new = np.maximum(s - (1 + gamma) * gamma / (gamma + sig) ** 2 / mu, 0.0)
        done = np.sum((new - sig) ** 2) < 1e-6
        sig = new
        if done:
            break
    return sig


def test_gamma_norm_shrink_descends_to_a_stationary_point_and_tends_to_svt(x64):
    """Each DC step minimises a majorant, so the objective Σ f(σ) + (μ/2)‖σ − s‖² never rises, and
    the result is a fixed point σ = max(s − f'(σ)/μ, 0). From σ = s on a scalar with a large s it is
    the global minimum (grid search); for γ → ∞, f(σ) → σ and the map is SVT at 1/μ."""
    rng = np.random.default_rng(0)
    s = jnp.asarray(np.sort(rng.uniform(0, 5, 12))[::-1])
    f = lambda sig, g: (1 + g) * sig / (g + sig)  # noqa: E731
    for mu, gamma, start in ((2.0, 0.5, s), (0.7, 0.05, 0.5 * s), (3.0, 1.0, jnp.zeros_like(s))):
        out = baselines.gamma_norm_shrink(s, mu, gamma, start, tol=1e-20)
        obj = lambda sig: float(jnp.sum(f(sig, gamma)) + mu / 2 * jnp.sum((sig - s) ** 2))  # noqa: E731
        assert obj(out) <= obj(start) + 1e-12
        fixed = jnp.maximum(s - (1 + gamma) * gamma / (gamma + out) ** 2 / mu, 0.0)
        np.testing.assert_allclose(out, fixed, atol=1e-9)
    grid = np.linspace(0, 6, 600001)
    best = grid[np.argmin(f(grid, 0.5) + (grid - 5.0) ** 2)]
    one = baselines.gamma_norm_shrink(jnp.array([5.0]), 2.0, 0.5, jnp.array([5.0]), tol=1e-20)
    np.testing.assert_allclose(one[0], best, atol=1e-5)
    np.testing.assert_allclose(
        baselines.gamma_norm_shrink(s, 2.0, 1e8, s), prox.soft_threshold(s, 0.5), atol=1e-6
    )


def test_gamma_norm_shrink_takes_exactly_inner_iters_dc_steps(x64):
    """With tol = 0 the loop runs ``inner_iters`` DC steps σ ← max(s − f'(σ)/μ, 0), each kept
    (NumPy steps from σ = 0 and from a given start); with a huge tol it stops after the first."""
    s = np.array([4.0, 2.5, 1.2, 0.4])
    mu, gamma = 1.5, 0.8

    def steps(k, sig):
        for _ in range(k):
            sig = np.maximum(s - (1 + gamma) * gamma / (gamma + sig) ** 2 / mu, 0.0)
        return sig

    for start in (None, 0.5 * s):
        sig0 = np.zeros_like(s) if start is None else start
        for inner_iters in (1, 2, 3):
            out = baselines.gamma_norm_shrink(
                jnp.asarray(s),
                mu,
                gamma,
                None if start is None else jnp.asarray(start),
                inner_iters=inner_iters,
                tol=0.0,
            )
            np.testing.assert_allclose(out, steps(inner_iters, sig0), rtol=1e-13)
            assert not np.allclose(steps(inner_iters, sig0), steps(inner_iters - 1, sig0))
        np.testing.assert_allclose(
            baselines.gamma_norm_shrink(jnp.asarray(s), mu, gamma, None, tol=1e30),
            steps(1, np.zeros_like(s)),
            rtol=1e-13,
        )


def test_group_soft_threshold_is_the_l21_prox(x64):
    """Optimality of z = prox_{t‖·‖₂,₁}(x), column by column: x_j − z_j = t z_j/‖z_j‖ where z_j ≠ 0,
    and ‖x_j‖ ≤ t where z_j = 0."""
    x = jnp.asarray(np.random.default_rng(1).standard_normal((5, 8)) * np.linspace(0.1, 2.0, 8))
    t = 1.5
    z = prox.group_soft_threshold(x, t)
    norms_x, norms_z = np.linalg.norm(x, axis=0), np.linalg.norm(z, axis=0)
    zero = norms_z == 0
    assert zero.any() and (~zero).any()
    assert np.all(norms_x[zero] <= t)
    np.testing.assert_allclose((x - z)[:, ~zero], t * z[:, ~zero] / norms_z[~zero], atol=1e-12)
    np.testing.assert_allclose(prox.group_soft_threshold(x.T, t, axis=1), z.T, atol=1e-15)


@pytest.mark.parametrize("norm", ["l21", "l1"])
def test_ncrpca_first_iterations_by_hand(x64, norm):
    """Two iterations of the reference scheme in NumPy: the L-step first (SVD, DC from σ = 0, then
    warm started), then the S-step's prox at λ/μ, Y ← Y + μZ, μ ← 1.1μ from μ₀ = 0.9. Σ is scaled so
    that some singular values exceed the first shrink (1 + γ)/(γμ₀) ≈ 112 and L₁ ≠ 0."""
    if norm == "l1":
        s_prox = lambda x, t: np.sign(x) * np.maximum(np.abs(x) - t, 0)  # noqa: E731
    else:
        s_prox = lambda x, t: x * np.maximum(1 - t / np.linalg.norm(x, axis=0), 0)  # noqa: E731
    # With γ = 10 (first shrink (1 + γ)/(γμ₀) ≈ 1.2, so Σ unscaled) the DC of the second iteration
    # stops where its warm start (the previous σ) and a cold one differ by 7e-7: the warm start
    # shows.
    for Sigma, gamma in ((40 * planted(2, n=30)[0], 1e-2), (planted(2, n=30)[0], 10.0)):
        n, lam, mu = 30, 1 / np.sqrt(30), 0.9
        S, Y, sig = np.zeros((n, n)), np.zeros((n, n)), np.zeros(n)
        for it in (1, 2):
            U, s, Vt = np.linalg.svd(Sigma - S + Y / mu)
            sig = _dc_numpy(s, mu, gamma, sig)
            L = (U * sig) @ Vt
            S = s_prox(Sigma - L + Y / mu, lam / mu)
            Y, mu = Y + mu * (Sigma - L - S), mu * 1.1
            out = baselines.ncrpca(Sigma, max_iter=it, norm=norm, gamma=gamma)
            assert 0 < int(out.rank) == int(np.sum(sig > 0)) < n
            np.testing.assert_allclose(out.L, L, atol=1e-8 * np.abs(Sigma).max())
            np.testing.assert_allclose(out.S, S, atol=1e-8 * np.abs(Sigma).max())
            np.testing.assert_allclose(
                out.residual, np.linalg.norm(Sigma - L - S) / np.linalg.norm(Sigma), rtol=1e-8
            )


def test_ncrpca_stops_at_its_tolerance(x64):
    Sigma, _, _ = cov.lrs_problem(0, 40, 4, 0.9, "code")
    out = baselines.ncrpca(Sigma, tol=1e-8, norm="l1")
    k = int(out.n_iter)
    hist = np.asarray(out.history["residual"])
    assert 1 < k < 500 and float(out.residual) == hist[k - 1] < 1e-8 <= float(np.min(hist[: k - 1]))
    assert int(out.status) == Status.CONVERGED
    assert float(metrics.relative_error(out.L + out.S, Sigma)) < 1e-8


@pytest.mark.parametrize("method", ["ialm", "ncrpca", "fpcp", "rpca_gd"])
def test_baselines_reject_bad_input(method):
    call = {
        "ialm": lambda S, **kw: baselines.ialm(S, **kw),
        "ncrpca": lambda S, **kw: baselines.ncrpca(S, **kw),
        "fpcp": lambda S, rank=2, **kw: baselines.fpcp(S, rank, **kw),
        "rpca_gd": lambda S, rank=2, **kw: baselines.rpca_gd(S, rank, **kw),
    }[method]
    good = np.eye(4) + 0.1
    with pytest.raises(ValueError, match="square"):
        call(np.ones((4, 5)))
    bad = good.copy()
    bad[0, 1] += 0.5
    with pytest.raises(ValueError, match="symmetric"):
        call(bad)
    bad = good.copy()
    bad[2, 2] = np.inf
    with pytest.raises(ValueError, match="non-finite"):
        call(bad)
    if method in ("fpcp", "rpca_gd"):
        for rank in (0, 5, 2.0):
            with pytest.raises(ValueError, match="rank"):
                call(good, rank=rank)
    else:
        with pytest.raises(ValueError, match="rho"):
            call(good, rho=1.0)
        with pytest.raises(ValueError, match="lam"):
            call(good, lam=-0.1)
    if method in ("ialm", "ncrpca"):  # ρ is checked in Σ's dtype: 1 + 1e-8 is 1 in float32
        with pytest.raises(ValueError, match="rho must be > 1"):
            call(good.astype(np.float32), rho=1 + 1e-8)
    if method == "ncrpca":
        for kw, match in (
            (dict(gamma=0.0), "gamma"),
            (dict(mu0=-1.0), "mu0"),
            (dict(norm="l2"), "norm must be"),
        ):
            with pytest.raises(ValueError, match=match):
                call(good, **kw)
        with pytest.raises(ValueError, match="gamma must be positive"):
            baselines.gamma_norm_shrink(jnp.ones(3), 1.0, 0.0)
        np.testing.assert_allclose(
            baselines.gamma_norm_shrink(jnp.array([5, 0]), 2.0, 1.0, jnp.array([5.0, 0.0])),
            baselines.gamma_norm_shrink(jnp.array([5.0, 0.0]), 2.0, 1.0, jnp.array([5.0, 0.0])),
        )
    if method == "rpca_gd":
        with pytest.raises(ValueError, match="alpha"):
            call(good, alpha=0.6)  # α̃ = 2α = 1.2 > 1
        with pytest.raises(ValueError, match="alpha_iter must lie"):
            call(good, alpha_iter=1.5)


# --- real data ------------------------------------------------------------------------------------


def test_loaders_name_make_data_when_packages_are_absent(monkeypatch, tmp_path):
    monkeypatch.setattr(cov, "sp500_path", lambda: None)
    monkeypatch.setattr(cov, "french_path", lambda: tmp_path / "missing.csv.bz2")
    with pytest.raises(FileNotFoundError, match="make data"):
        cov.load_sp500_correlation()
    with pytest.raises(FileNotFoundError, match="make data"):
        cov.load_french_correlation()


def _pin(monkeypatch, name, path):
    """Pin a stand-in file's SHA-256 as that of the registry file ``name``."""
    monkeypatch.setitem(cov.SHA256, name, hashlib.sha256(path.read_bytes()).hexdigest())


def test_sp500_loader_logic_on_a_small_file(monkeypatch, tmp_path):
    prices = np.array([[10.0, 20.0], [11.0, 19.0], [12.1, 19.5], [11.0, 21.0], [11.5, 20.0]])
    dates = ["2020-01-02", "2020-01-03", "2020-01-06", "2020-01-07", "2020-01-08"]
    path = tmp_path / "sp.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write("Date,AAA,BBB\n" + "".join(f"{d},{a},{b}\n" for d, (a, b) in zip(dates, prices)))
    monkeypatch.setattr(cov, "sp500_path", lambda: path)
    # A file that is not skfolio's is refused by name; pinned, it is read.
    with pytest.raises(ValueError, match=r"sp\.csv\.gz is not the expected file.*make data"):
        cov.load_sp500_correlation()
    _pin(monkeypatch, "sp500_dataset.csv.gz", path)
    d = cov.load_sp500_correlation()
    r = prices[1:] / prices[:-1] - 1
    np.testing.assert_allclose(d.returns, r)
    assert d.Sigma[0, 1] == pytest.approx(np.corrcoef(r.T)[0, 1]) and d.Sigma[0, 0] == 1.0
    assert d.names == ("AAA", "BBB") and str(d.dates[0]) == "2020-01-03"
    w = cov.load_sp500_correlation(start="2020-01-06", end="2020-01-08")
    assert len(w.dates) == 3 and str(w.dates[0]) == "2020-01-06"
    with pytest.raises(ValueError, match="widen"):
        cov.load_sp500_correlation(start="2020-01-08")


def test_a_stock_that_does_not_move_in_the_window_is_named(monkeypatch, tmp_path):
    """Its correlations are 0/0: they came back NaN, with the forced unit diagonal hiding them."""
    prices = np.array(
        [
            [10.0, 20.0, 5.0],
            [11.0, 19.0, 5.0],
            [12.1, 19.5, 5.0],
            [11.0, 21.0, 5.0],
            [11.5, 20.0, 6.0],
        ]
    )
    dates = ["2020-01-02", "2020-01-03", "2020-01-06", "2020-01-07", "2020-01-08"]
    path = tmp_path / "sp.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write(
            "Date,AAA,BBB,CCC\n"
            + "".join(f"{d},{a},{b},{c}\n" for d, (a, b, c) in zip(dates, prices))
        )
    monkeypatch.setattr(cov, "sp500_path", lambda: path)
    _pin(monkeypatch, "sp500_dataset.csv.gz", path)
    with pytest.raises(ValueError, match=r"\['CCC'\] do not change over the 3 returns"):
        cov.load_sp500_correlation(end="2020-01-07")
    d = cov.load_sp500_correlation()  # CCC moves on the last day: fine
    assert np.isfinite(d.Sigma).all()


def _check_correlation(d, n):
    S = d.Sigma
    assert S.shape == (n, n) and S.dtype == np.float64 and len(d.names) == n == len(set(d.names))
    np.testing.assert_array_equal(S, S.T)
    np.testing.assert_array_equal(np.diag(S), 1.0)
    assert np.abs(S).max() <= 1.0
    assert np.linalg.eigvalsh(S)[0] > 0  # T ≫ n returns: positive definite
    assert d.returns.shape == (len(d.dates), n) and np.isfinite(d.returns).all()


@pytest.mark.skipif(
    cov.sp500_path() is None or not cov.sp500_path().is_file(),
    reason="needs skfolio==1.12.2 (sp500_dataset.csv.gz): run `make data`",
)
def test_real_sp500_correlation():
    d = cov.load_sp500_correlation()
    _check_correlation(d, 20)
    assert "skfolio" not in sys.modules  # the file is read without importing skfolio
    assert d.names[:3] == ("AAPL", "AMD", "BAC") and "unknown" not in d.groups
    assert (
        len(d.dates) == 8312
        and str(d.dates[0]) == "1990-01-03"
        and str(d.dates[-1]) == "2022-12-28"
    )
    lam = np.linalg.eigvalsh(d.Sigma)[::-1]
    assert 5 < lam[0] < 9 and lam[1] < 2  # one market factor dominates
    year = cov.load_sp500_correlation(start="2022-01-01")
    _check_correlation(year, 20)
    assert 240 < len(year.dates) < 260


@pytest.mark.skipif(
    cov.french_path() is None or not cov.french_path().is_file(),
    reason="needs linearmodels==7.1 (french.csv.bz2): run `make data`",
)
def test_real_french_correlation():
    d = cov.load_french_correlation()
    _check_correlation(d, 30)
    assert "linearmodels" not in sys.modules
    assert d.names == cov.FRENCH_PORTFOLIOS and d.groups.count("industry") == 12
    assert (
        len(d.dates) == 819 and str(d.dates[0]) == "1949-01-01" and str(d.dates[-1]) == "2017-03-01"
    )
    lam = np.linalg.eigvalsh(d.Sigma)[::-1]
    assert lam[0] > 0.6 * 30  # near rank one: a strong market factor
    out = baselines.fpcp(d.Sigma, 3)
    assert float(metrics.real_data_errors(d.Sigma, out.L, out.S).fit_L) < 0.1


def test_bz2_reader_rejects_ragged_files(tmp_path):
    path = tmp_path / "bad.csv.bz2"
    with bz2.open(path, "wt") as f:
        f.write("dates,a,b\n2000-01-01,1,2\n2000-02-01,3\n")
    with pytest.raises(ValueError):
        cov._read_csv(path, bz2.open)


def test_sp500_demo_fixture_matches_the_loader():
    from lowrank_jax.datasets.covariance import (
        load_sp500_correlation,
        sp500_demo_matrix,
        sp500_path,
    )

    d = sp500_demo_matrix()
    S = d.Sigma
    assert S.shape == (20, 20) and np.allclose(S, S.T) and np.allclose(np.diag(S), 1.0)
    assert np.linalg.eigvalsh(S)[0] > 0 and len(d.names) == 20
    if sp500_path() is None:
        pytest.skip("skfolio's data file is absent: run `make data` to compare the fixture with it")
    full = load_sp500_correlation()
    np.testing.assert_array_equal(load_sp500_correlation(start=str(full.dates[-250])).Sigma, S)


def test_fpcp_growth_stops_at_the_first_rank_whose_test_fails(x64):
    """With λ above every |Σ_ij| the shrinkage keeps S = 0, so every loop's partial SVD is Σ's own
    spectrum s and the growth rule σ_r / Σ_{i<r} σ_i > threshold decides the final rank alone: it is
    the first r ≥ 2 whose test fails (brute force on s), capped at k. The thresholds are chosen
    where a denominator that also counts σ_r would stop one rank earlier."""
    s = np.array([10.0, 8.0, 6.0, 4.0, 3.0, 2.5, 2.0, 1.5])
    Q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(8, 8)))
    Sigma = jnp.asarray((Q * s) @ Q.T)
    for threshold in (0.1, 0.15, 0.3, 0.05):
        expected = 1
        while expected < 8 and (
            expected == 1 or s[expected - 1] / s[: expected - 1].sum() > threshold
        ):
            expected += 1
        out = baselines.fpcp(Sigma, 8, lam=100.0, max_iter=10, grow=True, rank_threshold=threshold)
        assert int(out.rank) == expected, (threshold, int(out.rank), expected)
        np.testing.assert_array_equal(out.S, 0.0)


def test_code_generator_at_n_2_draws_its_only_pair_and_reaches_every_row():
    """The code variant draws j ~ U{1, …, n−1}, then i ~ U{0, …, j−1}: at n = 2 the only pair is
    (0, 1), so every block adds a to both diagonal entries and b to both off-diagonal ones
    (S₀[0,0] = S₀[1,1], S₀[0,1] = S₀[1,0]; a pair i = j would break it), and the last index is
    drawn too (n = 3 to sparsity 0 fills every row)."""
    for seed in range(5):
        S, blocks = cov.sparse_psd_blocks(np.random.default_rng(seed), 2, 0.0, "code")
        assert blocks >= 1 and S[0, 0] == S[1, 1] and S[0, 1] == S[1, 0] != 0
    S, _ = cov.sparse_psd_blocks(np.random.default_rng(0), 3, 0.0, "code")
    assert np.all(S != 0)


def test_report_counts_signed_and_unsigned_ranks_of_an_indefinite_l(x64):
    """r_L counts λ > ϵ (the paper), r_L_code |λ| > ϵ (the code's matrix_rank): they differ on an
    indefinite L, diag(2, −3) → 1 and 2."""
    Sigma = np.array([[2.0, 0.0], [0.0, -3.0]]) + np.eye(2) * 5
    L = np.diag([2.0, -3.0])
    rep = metrics.report(Sigma, L, Sigma - L)
    assert rep["r_L"] == 1 and rep["r_L_code"] == 2 and rep["min_eig_L"] == -3.0


def _ialm_numpy(Sigma, iters, mu_factor=1e7):
    """LRSLibrary's inexact ALM in NumPy: the (L, S) iterates after 1..iters iterations."""
    lam = 1 / np.sqrt(Sigma.shape[0])
    two = np.linalg.norm(Sigma, 2)
    Y, mu = Sigma / max(two, np.abs(Sigma).max() / lam), 1.25 / two
    L, out = np.zeros_like(Sigma), []
    for _ in range(iters):
        S = _soft_numpy(Sigma - L + Y / mu, lam / mu)
        U, s, Vt = np.linalg.svd(Sigma - S + Y / mu)
        L = (U * _soft_numpy(s, 1 / mu)) @ Vt
        Y, mu = Y + mu * (Sigma - L - S), min(1.5 * mu, mu_factor * 1.25 / two)
        out.append((L, S))
    return out


def test_ialm_first_iterations_by_hand(x64):
    """Two iterations of LRSLibrary's inexact ALM in NumPy: Y₀ = Σ / max(‖Σ‖₂, ‖Σ‖_∞/λ),
    μ₀ = 1.25/‖Σ‖₂, the S-step (soft threshold at λ/μ) before the L-step (SVT at 1/μ), Y ← Y + μZ,
    μ ← min(1.5μ, 10⁷μ₀). Every ordering or start converges to the same PCP solution, so the
    recovery tests cannot tell them apart; the first iterates can."""
    Sigma = planted(2, n=30)[0]
    for it, (L, S) in enumerate(_ialm_numpy(Sigma, 2), start=1):
        out = baselines.ialm(Sigma, max_iter=it, tol=1e-30)
        np.testing.assert_allclose(out.L, L, atol=1e-8 * np.abs(Sigma).max())
        np.testing.assert_allclose(out.S, S, atol=1e-8 * np.abs(Sigma).max())
        np.testing.assert_allclose(
            out.residual, np.linalg.norm(Sigma - L - S) / np.linalg.norm(Sigma), rtol=1e-8
        )
    assert np.any(S != 0) and np.linalg.matrix_rank(L, tol=1e-8) > 0


def test_ialm_mu_stops_at_its_cap(x64):
    """μ ← min(ρμ, μ̄) with μ̄ = mu_factor · μ₀: at mu_factor = 1.6 and ρ = 1.5 the third iteration
    runs at μ = 1.6 μ₀, not 2.25 μ₀ (NumPy iterations as in test_ialm_first_iterations_by_hand)."""
    Sigma = planted(2, n=30)[0]
    L, S = _ialm_numpy(Sigma, 4, mu_factor=1.6)[-1]
    out = baselines.ialm(Sigma, max_iter=4, tol=1e-30, mu_factor=1.6)
    np.testing.assert_allclose(out.L, L, atol=1e-8 * np.abs(Sigma).max())
    np.testing.assert_allclose(out.S, S, atol=1e-8 * np.abs(Sigma).max())


def test_fpcp_growth_scales_lambda_while_the_rank_grows(x64):
    """grow=True: before each loop that raises the rank, λ ← λ · lam_factor, and λ stays put once
    the rank has reached k (NumPy reference of LRSLibrary's rule, full SVDs)."""
    Sigma = planted(1, n=40)[0]
    for lam_factor, k in ((1.5, 3), (0.5, 2)):
        L, rank, _, lam = _fastpcp_growth_numpy(Sigma, 1 / np.sqrt(40), 6, k, lam_factor=lam_factor)
        out = baselines.fpcp(Sigma, k, max_iter=6, grow=True, lam_factor=lam_factor)
        assert int(out.rank) == rank == k
        np.testing.assert_allclose(out.L, L, atol=1e-8 * np.abs(Sigma).max())
        np.testing.assert_allclose(out.S, _soft_numpy(Sigma - out.L, lam), atol=1e-12)


def test_rpca_gd_alpha_iter_is_the_fraction_kept_in_the_iterations(x64):
    """alpha_iter = α̃ is the fraction itself: None is 2α (the same run as alpha_iter=0.2 at
    α = 0.1), and another value is the fraction of the returned S = T_α̃(Σ − L)."""
    Sigma = planted(0, n=30)[0]
    default = baselines.rpca_gd(Sigma, 2, alpha=0.1, max_iter=20, tol=None)
    explicit = baselines.rpca_gd(Sigma, 2, alpha=0.1, alpha_iter=0.2, max_iter=20, tol=None)
    np.testing.assert_array_equal(default.L, explicit.L)
    other = baselines.rpca_gd(Sigma, 2, alpha=0.1, alpha_iter=0.1, max_iter=20, tol=None)
    np.testing.assert_array_equal(other.S, top_fraction_numpy(Sigma - np.asarray(other.L), 0.1))
    assert not np.array_equal(other.L, default.L)


def test_tolerances_and_budgets_follow_the_one_policy():
    """Every covariance solver that stops on a tolerance takes ``tol``, default 1e-6; FPCP has none
    and runs ``max_iter`` loops (default 2); the γ-norm step's inner loop is ``inner_iters``."""
    import inspect

    from lowrank_jax.covariance import nn

    for fn in (baselines.ialm, baselines.ncrpca, baselines.rpca_gd, nn.decompose):
        params = inspect.signature(fn).parameters
        assert params["tol"].default == 1e-6, fn.__name__
        assert isinstance(params["max_iter"].default, int), fn.__name__
    fpcp = inspect.signature(baselines.fpcp).parameters
    assert "tol" not in fpcp and "loops" not in fpcp and fpcp["max_iter"].default == 2
    assert "inner" not in inspect.signature(baselines.gamma_norm_shrink).parameters
    with pytest.raises(ValueError, match="inner_iters"):
        baselines.gamma_norm_shrink(jnp.ones(3), 1.0, 1.0, inner_iters=0)


def test_rpca_gd_symmetrises_a_slightly_asymmetric_sigma(x64):
    """Σ symmetric only to round-off (accepted by check_symmetric) is replaced by ½(Σ + Σᵀ): the run
    is the one of the symmetric part, and S = T_α̃(Σ − L) is exactly symmetric."""
    Sigma = planted(0, n=30)[0]
    E = np.random.default_rng(3).standard_normal(Sigma.shape)
    # within check_symmetric's 1e-6
    skew = Sigma + 5e-7 * np.abs(Sigma).max() * (E - E.T) / np.abs(E - E.T).max()
    ref = baselines.rpca_gd(0.5 * (skew + skew.T), 2, max_iter=30)
    out = baselines.rpca_gd(skew, 2, max_iter=30)
    np.testing.assert_array_equal(out.S, out.S.T)
    np.testing.assert_allclose(out.L, ref.L, rtol=0, atol=1e-12 * np.abs(Sigma).max())
    np.testing.assert_allclose(out.S, ref.S, rtol=0, atol=1e-12 * np.abs(Sigma).max())


def test_rpca_gd_records_and_stops_on_the_pair_it_returns(x64):
    """``residual`` (= history["residual"][t − 1]) is ‖Σ − L − S‖_F/‖Σ‖_F of the (L, S) that a run
    of t iterations returns, as BaselineResult documents and ialm and fpcp do. RPCA-GD recorded the
    residual of the iterate before its step, one iteration behind (on one instance 0.159 for a
    1-iteration run whose pair had 0.128), and its tolerance stop tested that stale value."""
    Sigma = planted(0, n=30)[0]
    rel = lambda out: float(np.linalg.norm(Sigma - out.L - out.S) / np.linalg.norm(Sigma))  # noqa: E731
    runs = [baselines.rpca_gd(Sigma, 2, max_iter=t, tol=None) for t in (1, 2, 3)]
    for t, out in enumerate(runs, start=1):
        np.testing.assert_allclose(out.residual, rel(out), rtol=1e-10)
        np.testing.assert_allclose(
            out.history["residual"], runs[-1].history["residual"][:t], rtol=1e-12
        )
    tol = 0.5 * float(runs[-1].residual)
    out = baselines.rpca_gd(Sigma, 2, max_iter=300, tol=tol)
    k = int(out.n_iter)
    assert 3 < k < 300 and rel(out) < tol <= float(
        np.min(np.asarray(out.history["residual"][: k - 1]))
    )
    assert int(out.status) == Status.CONVERGED


def test_rpca_gd_initial_factor_by_hand(x64):
    """U₀U₀ᵀ = V_k max(Λ_k, 0) V_kᵀ from the k largest eigenpairs of Σ − T_α(Σ) (α, not α̃),
    negative ones clipped to 0. A step of 1e-12 leaves U ≈ U₀ after one iteration."""
    Sigma = planted(0, n=30)[0]
    R = Sigma - top_fraction_numpy(Sigma, 0.1)
    lam, Q = np.linalg.eigh(R)
    L0 = (Q[:, -3:] * np.maximum(lam[-3:], 0)) @ Q[:, -3:].T
    out = baselines.rpca_gd(Sigma, 3, alpha=0.1, lr=1e-12, max_iter=1)
    np.testing.assert_allclose(out.L, L0, atol=1e-9 * np.abs(Sigma).max())
    # an indefinite Σ (α = 0: nothing removed) with k above its number of positive eigenvalues (same
    # shape and k: one compiled program)
    A = rotated(np.r_[3.0, 1.0, -np.linspace(2.0, 5.0, 28)], seed=1)
    Q = np.linalg.eigh(A)[1]
    out = baselines.rpca_gd(A, 3, alpha=0.0, lr=1e-12, max_iter=1)
    np.testing.assert_allclose(
        out.L, 3 * np.outer(Q[:, -1], Q[:, -1]) + np.outer(Q[:, -2], Q[:, -2]), atol=1e-9
    )


def test_check_symmetric_is_relative_to_the_scale(x64):
    """The symmetry test is max|Σ − Σᵀ| ≤ rtol · max|Σ|: an asymmetry of 1e-9 relative passes at any
    scale, one of 1e-3 relative fails at any scale."""
    base = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 0.5], [0.0, 0.5, 1.0]])
    up = np.triu(np.ones((3, 3)), 1)
    for scale in (1e-8, 1.0, 1e8):
        metrics.check_symmetric(scale * (base + 1e-9 * up))
        with pytest.raises(ValueError, match="symmetric"):
            metrics.check_symmetric(scale * (base + 1e-3 * up))


def test_sparsity_of_the_shrunk_part_uses_the_given_threshold(x64):
    """real_data_errors and report count |shrink(S)_ij| < tol with the caller's tol, not
    ϵ = 0.01."""
    Sigma = np.array([[2.0, 1.0], [1.0, 2.0]])
    L = np.ones((2, 2))
    S = np.array([[1.5, 0.0], [0.3, 0.2]])
    S = 0.5 * (S + S.T)  # shrink(S, 0.1) = [[1.4, 0.05], [0.05, 0.1]]
    e = metrics.real_data_errors(Sigma, L, S, shrink_t=0.1, tol=0.2)
    assert float(e.sparsity_shrunk) == pytest.approx(0.75)
    assert float(metrics.real_data_errors(Sigma, L, S, shrink_t=0.1).sparsity_shrunk) == 0.0
    assert metrics.report(Sigma, L, S, shrink_t=0.1, tol=0.2)["sparsity_shrunk"] == pytest.approx(
        0.75
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fpcps_sparse_part_is_not_shrunk_twice(dtype, x64):
    """FPCP's S is already shrink(Σ − L, 1/√n) (the paper's post-shrinkage); report and
    real_data_errors shrank it again, i.e. scored shrink(Σ − L, 2/√n): on the S&P 20-stock matrix at
    k = 3, fit_shrunk 0.216 and sparsity_shrunk 0.985 where FPCP's own (L, S) give 0.158 and 0.95.
    The shrunk-part metrics of an FPCP result are now those of its S as it is (also under jit, and
    when FPCP ran in float32), and forcing S_shrunk=False gives the double shrinkage."""
    from lowrank_jax.datasets.covariance import sp500_demo_matrix

    Sigma = np.asarray(sp500_demo_matrix().Sigma, dtype)
    n = Sigma.shape[0]
    out = baselines.fpcp(Sigma, 3)
    L, S = np.asarray(out.L, np.float64), np.asarray(out.S, np.float64)
    Sig = Sigma.astype(np.float64)
    fit = np.linalg.norm(Sig - L - S) / np.linalg.norm(Sig)
    zeros = np.mean(np.abs(S) < metrics.EPSILON)
    t = 1 / np.sqrt(n)
    twice = Sig - L - _soft_numpy(Sig - L, 2 * t)
    assert abs(np.linalg.norm(twice) / np.linalg.norm(Sig) - fit) > 0.01  # the two readings differ
    rtol = 1e-5 if dtype == np.float32 else 1e-10
    rep = metrics.report(Sigma.astype(np.float64), out.L, out.S)  # Σ in another precision
    np.testing.assert_allclose([rep["fit_shrunk"], rep["sparsity_shrunk"]], [fit, zeros], rtol=rtol)
    assert rep["S_shrunk"] is True
    for e in (
        metrics.real_data_errors(Sigma, out.L, out.S),
        jax.jit(metrics.real_data_errors)(Sigma, out.L, out.S),
    ):
        np.testing.assert_allclose([e.fit_shrunk, e.sparsity_shrunk], [fit, zeros], rtol=rtol)
    forced = metrics.report(Sigma, out.L, out.S, S_shrunk=False)
    assert forced["S_shrunk"] is False
    np.testing.assert_allclose(
        forced["fit_shrunk"], np.linalg.norm(twice) / np.linalg.norm(Sig), rtol=rtol
    )
    np.testing.assert_allclose(
        forced["sparsity_shrunk"], np.mean(np.abs(_soft_numpy(Sig - L, 2 * t)) < 0.01)
    )


def test_an_unshrunk_sparse_part_is_still_shrunk_once(x64):
    """Only an S equal to shrink(Σ − L, t) is taken as shrunk: the network's dense residual
    S = Σ − L, FPCP's S at another λ (unless S_shrunk=True says so) and a shrinkage t ≠ FPCP's λ are
    shrunk by t once, as before. A flag that is not None/True/False is refused by name."""
    rng = np.random.default_rng(3)
    M = rng.standard_normal((12, 2))
    Sigma = M @ M.T + 0.3 * np.eye(12) + 0.05 * (lambda A: A + A.T)(rng.standard_normal((12, 12)))
    out = baselines.fpcp(Sigma, 2, lam=0.1)  # λ = 0.1 ≠ 1/√12
    L = np.asarray(out.L)
    R = Sigma - L
    for S, t in ((R, None), (np.asarray(out.S), None), (np.asarray(out.S), 0.05)):
        tt = 1 / np.sqrt(12) if t is None else t
        once = np.linalg.norm(R - _soft_numpy(S, tt)) / np.linalg.norm(Sigma)
        rep = metrics.report(Sigma, L, S, shrink_t=t)
        assert rep["S_shrunk"] is False and bool(metrics.is_shrunk(Sigma, L, S, tt)) is False
        np.testing.assert_allclose(rep["fit_shrunk"], once, rtol=1e-10)
        np.testing.assert_allclose(
            metrics.real_data_errors(Sigma, L, S, t).fit_shrunk, once, rtol=1e-10
        )
    S = np.asarray(out.S)  # FPCP at λ = 0.1 scored with t = 0.1: recognised
    assert metrics.report(Sigma, L, S, shrink_t=0.1)["S_shrunk"] is True
    kept = metrics.report(Sigma, L, S, S_shrunk=True)  # or said so explicitly at the default t
    np.testing.assert_allclose(
        kept["fit_shrunk"], np.linalg.norm(R - S) / np.linalg.norm(Sigma), rtol=1e-10
    )
    np.testing.assert_allclose(kept["sparsity_shrunk"], np.mean(np.abs(S) < 0.01))
    for flag in ("yes", 1, np.array(True)):
        with pytest.raises(ValueError, match="S_shrunk must be None"):
            metrics.report(Sigma, L, S, S_shrunk=flag)
        with pytest.raises(ValueError, match="S_shrunk must be None"):
            metrics.real_data_errors(Sigma, L, S, S_shrunk=flag)


def test_real_data_errors_checks_sigma_like_report():
    """report refused a non-symmetric or non-finite Σ; real_data_errors scored it. Both now raise
    the same ValueError (under jit only the shape can be checked, as for every metric)."""
    Sigma = np.array([[2.0, 1.0], [1.0, 2.0]])
    L, S = np.ones((2, 2)), np.zeros((2, 2))
    skew = Sigma + np.array([[0.0, 0.5], [0.0, 0.0]])
    for bad, match in (
        (skew, "Sigma must be symmetric"),
        (np.where(np.eye(2) > 0, np.nan, Sigma), "non-finite"),
    ):
        for fn in (metrics.report, metrics.real_data_errors):
            with pytest.raises(ValueError, match=match):
                fn(bad, L, S)
    np.testing.assert_allclose(
        jax.jit(metrics.real_data_errors)(Sigma, L, S), metrics.real_data_errors(Sigma, L, S)
    )


def test_french_loader_picks_the_portfolio_columns_by_name(monkeypatch, tmp_path):
    """load_french_correlation reads the 30 portfolio columns by their names wherever the file puts
    them, in FRENCH_PORTFOLIOS order, and drops the factor columns: on a small file with the factors
    first and the portfolios in reverse order, returns and Σ are those of the named columns."""
    rng = np.random.default_rng(0)
    header = list(cov.FRENCH_FACTORS) + list(cov.FRENCH_PORTFOLIOS[::-1])
    T = 12
    values = rng.normal(size=(T, len(header)))
    dates = [f"{1950 + t // 12}-{t % 12 + 1:02d}-01" for t in range(T)]
    path = tmp_path / "french.csv.bz2"
    with bz2.open(path, "wt") as f:
        f.write(
            "dates,"
            + ",".join(header)
            + "\n"
            + "".join(
                f"{d}," + ",".join(repr(float(v)) for v in row) + "\n"
                for d, row in zip(dates, values)
            )
        )
    monkeypatch.setattr(cov, "french_path", lambda: path)
    with pytest.raises(ValueError, match=r"french\.csv\.bz2 is not the expected file.*make data"):
        cov.load_french_correlation()
    _pin(monkeypatch, "french.csv.bz2", path)
    d = cov.load_french_correlation()
    want = values[:, [header.index(c) for c in cov.FRENCH_PORTFOLIOS]]
    np.testing.assert_array_equal(d.returns, want)
    np.testing.assert_allclose(d.Sigma, np.corrcoef(want, rowvar=False), atol=1e-14)
    assert d.names == cov.FRENCH_PORTFOLIOS and len(d.dates) == T
    assert d.groups[:12] == ("industry",) * 12 and d.groups[-1] == "size-momentum"


def test_correlation_is_exactly_symmetric_with_a_unit_diagonal():
    """np.corrcoef leaves round-off of order 1e-16 in the symmetry and the diagonal; correlation()
    makes both exact (solvers check symmetry exactly). On returns where corrcoef shows that
    round-off."""
    r = np.random.default_rng(1).normal(size=(250, 40)) * np.logspace(-3, 1, 40)
    C = np.corrcoef(r, rowvar=False)
    assert not (np.array_equal(C, C.T) and np.all(np.diag(C) == 1.0))  # the round-off is there
    S = cov.correlation(r)
    np.testing.assert_array_equal(S, S.T)
    np.testing.assert_array_equal(np.diag(S), 1.0)
    np.testing.assert_allclose(S, C, atol=1e-15)


def test_csv_reader_refuses_repeated_or_unordered_dates(tmp_path):
    """Dates must increase strictly: a repeated day (a duplicated row) would count a zero return."""
    path = tmp_path / "dup.csv.bz2"
    for body in ("2000-01-01,1\n2000-01-01,2\n2000-01-02,3\n", "2000-01-02,1\n2000-01-01,2\n"):
        with bz2.open(path, "wt") as f:
            f.write("dates,a\n" + body)
        with pytest.raises(ValueError, match="strictly increasing"):
            cov._read_csv(path, bz2.open)


def test_sp500_loader_needs_three_returns_and_positive_prices(monkeypatch, tmp_path):
    """A window of 3 returns is the least taken (2 raise, naming the window); a price of 0 is
    refused (its return would be inf or −1 and every correlation with it NaN)."""
    prices = np.array([[10.0, 20.0], [11.0, 19.0], [12.1, 19.5], [11.0, 21.0], [11.5, 20.0]])
    dates = ["2020-01-02", "2020-01-03", "2020-01-06", "2020-01-07", "2020-01-08"]
    path = tmp_path / "sp.csv.gz"

    def write(p):
        with gzip.open(path, "wt") as f:
            f.write("Date,AAA,BBB\n" + "".join(f"{d},{a},{b}\n" for d, (a, b) in zip(dates, p)))
        _pin(monkeypatch, "sp500_dataset.csv.gz", path)

    write(prices)
    monkeypatch.setattr(cov, "sp500_path", lambda: path)
    assert len(cov.load_sp500_correlation(end="2020-01-07").dates) == 3
    with pytest.raises(ValueError, match="only 2 returns between None and 2020-01-06"):
        cov.load_sp500_correlation(end="2020-01-06")
    write(prices * np.array([[1.0], [1.0], [0.0], [1.0], [1.0]]))
    with pytest.raises(ValueError, match="non-positive prices"):
        cov.load_sp500_correlation()


def test_a_jax_key_seeds_the_generator_with_all_its_data():
    """Every word of a raw key seeds NumPy's generator: keys that differ in one word only give
    different problems, and the same key the same one."""
    a = jax.random.wrap_key_data(jnp.array([0, 5], jnp.uint32))
    b = jax.random.wrap_key_data(jnp.array([1, 5], jnp.uint32))
    c = jax.random.wrap_key_data(jnp.array([0, 6], jnp.uint32))
    first = cov.lrs_problem(a, 12, 2, 0.8).L0
    np.testing.assert_array_equal(
        cov.lrs_problem(jnp.array([0, 5], jnp.uint32), 12, 2, 0.8).L0, first
    )
    for other in (b, c):
        assert not np.array_equal(cov.lrs_problem(other, 12, 2, 0.8).L0, first)


def test_baseline_hyperparameters_are_keyword_only():
    """`ialm(S, 1e-6)` ran with λ = 1e-6 where a tolerance was meant (every other family takes its
    hyperparameters by keyword): a positional hyperparameter is now a TypeError, before any work."""
    S = np.eye(4)
    for call in (
        lambda: baselines.ialm(S, 1e-6),
        lambda: baselines.ncrpca(S, 1e-6),
        lambda: baselines.fpcp(S, 2, 0.1),
        lambda: baselines.rpca_gd(S, 2, 0.1),
    ):
        with pytest.raises(TypeError, match="positional"):
            call()


def test_tol_none_runs_the_whole_budget(x64):
    """`tol=None` raised "tol is required" in ialm, ncrpca and rpca_gd, where every other solver
    with a tolerance runs its whole budget: it now does the same, and equals a tolerance nothing
    meets."""
    p = cov.lrs_problem(0, 30, 3, 0.95)
    S = jnp.asarray(p.Sigma)
    for call in (
        lambda tol: baselines.ialm(S, tol=tol, max_iter=7),
        lambda tol: baselines.ncrpca(S, tol=tol, max_iter=7),
        lambda tol: baselines.rpca_gd(S, 3, tol=tol, max_iter=7),
    ):
        none, tiny = call(None), call(1e-300)
        assert int(none.n_iter) == 7 == int(tiny.n_iter)
        np.testing.assert_array_equal(none.L, tiny.L)


def test_baselines_report_their_status_and_a_traced_invalid_hyperparameter():
    """The status of each baseline: ncrpca and ialm CONVERGED at their tolerance, fpcp MAX_ITER (a
    fixed loop count). NC-RPCA's μ = μ₀ρᵗ has no cap: ρ = 1e30 overflows float32 at the second
    iteration, which raises RuntimeError naming ρ (throw=False: DIVERGED). A traced ρ ≤ 1 (μ would
    shrink until Y/μ overflows) and a traced negative λ are INVALID with NaN L, beside an unchanged
    valid point; with throw=True they raise inside jit."""
    Sigma = jnp.asarray(cov.lrs_problem(0, 12, 2, 0.9).Sigma, jnp.float32)
    assert int(baselines.ialm(Sigma, tol=1e-5).status) == Status.CONVERGED
    assert int(baselines.fpcp(Sigma, 2, max_iter=3).status) == Status.MAX_ITER
    nc = jax.jit(lambda rho: baselines.ncrpca(Sigma, rho=rho, tol=1e-5, norm="l1", throw=False))
    assert int(nc(1.1).status) == Status.CONVERGED
    over = nc(1e30)
    assert int(over.status) == Status.DIVERGED and int(over.n_iter) < 500
    with pytest.raises(RuntimeError, match="NC-RPCA diverged.*lower rho"):
        baselines.ncrpca(Sigma, rho=1e30, norm="l1")
    for name, solve in (
        ("ialm", lambda rho: baselines.ialm(Sigma, rho=rho, tol=1e-5, throw=False)),
        ("ncrpca", nc),
    ):
        out = jax.vmap(solve)(jnp.array([1.5, 0.5]))
        assert np.asarray(out.status).tolist() == [Status.CONVERGED, Status.INVALID], name
        assert np.all(np.isnan(np.asarray(out.L[1]))) and np.all(
            np.isfinite(np.asarray(out.L[0]))
        ), name
        np.testing.assert_allclose(out.L[0], solve(1.5).L, rtol=1e-5, atol=1e-5)
    fp = jax.vmap(lambda lam: baselines.fpcp(Sigma, 2, lam=lam, max_iter=3, throw=False))(
        jnp.array([0.1, -1.0])
    )
    assert np.asarray(fp.status).tolist() == [Status.MAX_ITER, Status.INVALID]
    assert np.all(np.isnan(np.asarray(fp.L[1])))
    with pytest.raises(RuntimeError, match="rho <= 1"):
        jax.block_until_ready(jax.jit(lambda rho: baselines.ialm(Sigma, rho=rho).L)(0.5))


def test_the_iterations_take_the_solvers_arguments_and_refuse_what_they_refuse():
    """ialm_iteration, ncrpca_iteration, fpcp_iteration and rpca_gd_iteration are the solvers'
    runs opened up: with ``tol=None`` the stopping rule never holds (the whole budget runs, as the
    solvers' ``tol=None`` does), an invalid argument is refused by the same message, and a traced
    one that breaks its rule makes the run INVALID."""
    from lowrank_jax import loop

    Sigma = jnp.asarray(cov.lrs_problem(0, 12, 2, 0.9).Sigma, jnp.float32)
    pairs = (
        (baselines.ialm_iteration(Sigma, tol=None), baselines.ialm(Sigma, tol=None, max_iter=7)),
        (
            baselines.ncrpca_iteration(Sigma, tol=None, norm="l1"),
            baselines.ncrpca(Sigma, tol=None, norm="l1", max_iter=7),
        ),
        (
            baselines.fpcp_iteration(Sigma, 2, grow=True),
            baselines.fpcp(Sigma, 2, grow=True, max_iter=7),
        ),
        (
            baselines.rpca_gd_iteration(Sigma, 2, tol=None),
            baselines.rpca_gd(Sigma, 2, tol=None, max_iter=7),
        ),
    )
    for it, ref in pairs:
        out = it.result(loop.run(it, max_iter=7))
        assert int(out.status) == int(ref.status) == Status.MAX_ITER
        assert int(out.n_iter) == 7 and int(out.rank) == int(ref.rank)
        np.testing.assert_allclose(out.L, ref.L, rtol=1e-5, atol=1e-5 * float(jnp.abs(ref.L).max()))
    with pytest.raises(ValueError, match="rho"):
        baselines.ialm_iteration(Sigma, rho=0.5)
    with pytest.raises(ValueError, match="norm"):
        baselines.ncrpca_iteration(Sigma, norm="l3")
    with pytest.raises(ValueError, match="rank0"):
        baselines.fpcp_iteration(Sigma, 2, grow=True, rank0=3)
    with pytest.raises(ValueError, match="alpha_iter"):
        baselines.rpca_gd_iteration(Sigma, 2, alpha=0.6)
    it = jax.jit(lambda lr: baselines.rpca_gd_iteration(Sigma, 2, lr=lr).invalid)
    assert np.asarray(jax.vmap(it)(jnp.array([0.5, -1.0]))).tolist() == [False, True]
