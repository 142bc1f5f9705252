import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lowrank_jax import datasets


def test_rpca_problem_matches_the_papers_generator():
    p = datasets.rpca_problem(jax.random.key(0), 300, 200, 4, 0.1)
    assert p.Y.shape == (300, 200) and p.L.shape == (300, 4) and p.R.shape == (200, 4)
    np.testing.assert_allclose(p.Y, p.X + p.S)
    np.testing.assert_allclose(p.X, p.L @ p.R.T, atol=1e-6)
    assert np.linalg.matrix_rank(np.asarray(p.X, np.float64), tol=1e-5) == 4
    assert int(jnp.sum(p.S != 0)) == int(0.1 * 300 * 200)  # exactly ⌊α n1 n2⌋ outliers
    c = float(jnp.mean(jnp.abs(p.X)))
    assert float(jnp.max(jnp.abs(p.S))) <= c * (1 + 1e-6)  # U[−mean|X⋆|, mean|X⋆|]
    assert float(jnp.max(jnp.abs(p.S))) > 0.9 * c
    # Factor entries ~ N(0, 1/n_i): n1·mean(L⋆²) and n2·mean(R⋆²) near 1 (1200 and 800 draws: a
    # spread of 4–5 %), and column norms of L⋆ near 1.
    np.testing.assert_allclose(jnp.linalg.norm(p.L, axis=0), 1.0, atol=0.2)
    assert (
        abs(300 * float(jnp.mean(p.L**2)) - 1) < 0.15
        and abs(200 * float(jnp.mean(p.R**2)) - 1) < 0.15
    )
    # Outlier values U[−c, c]: both signs, half each (6000 outliers: a spread of 0.65 %).
    values = np.asarray(p.S)[np.asarray(p.S) != 0]
    assert values.min() < -0.9 * c and 0.46 < np.mean(values < 0) < 0.54


def test_support_count_floors_alpha_times_size_on_a_small_grid():
    """⌊α n1 n2⌋ outliers, not a rounded count (on a 3 × 3 grid, α = 0.17 and 0.88 tell floor from
    round), concrete or traced α alike."""
    import math

    for alpha in (0.17, 0.5, 0.88):
        count = int(datasets.random_support(jax.random.key(0), (3, 3), alpha).sum())
        traced = int(
            jax.jit(lambda a: datasets.random_support(jax.random.key(0), (3, 3), a).sum())(alpha)
        )
        assert count == traced == math.floor(alpha * 9)


def test_exact_support_is_uniform_and_keyed():
    a = datasets.random_support(jax.random.key(1), (100, 100), 0.2)
    b = datasets.random_support(jax.random.key(2), (100, 100), 0.2)
    assert int(a.sum()) == int(b.sum()) == 2000
    assert 0.1 < float(jnp.mean(a & b)) / 0.2 < 0.3  # independent draws overlap ~ α
    # Row counts look Binomial-like, not fixed: uniform over all entries, not per row.
    rows = np.asarray(a.sum(axis=1))
    assert rows.std() > 1.0 and abs(rows.mean() - 20) < 1e-9
    for alpha, count in (
        (0.0, 0),
        (1.0, 10_000),
        (0.123, 1230),
        (0.29, 2900),
        (np.float32(0.29), 2900),
    ):
        assert int(datasets.random_support(jax.random.key(3), (100, 100), alpha).sum()) == count


def test_half_precision_problems_draw_the_float32_support_and_nonzero_outliers():
    """bfloat16 keys take 128 values, so ties at the cut-off were the rule and the tie-break by
    position put 91 % of a 0.2 % support into the first quarter of the rows; bfloat16's own uniform
    draw of an outlier value was exactly 0 about once in 256 (79 non-zeros for a support of 80).
    Keys and values are drawn in float32 now: the same support as float32's, every outlier
    non-zero."""
    ref = datasets.random_support(jax.random.key(0), (200, 200), 0.002)
    for dtype in (jnp.float16, jnp.bfloat16):
        np.testing.assert_array_equal(
            datasets.random_support(jax.random.key(0), (200, 200), 0.002, dtype=dtype), ref
        )
        p = datasets.rpca_problem(jax.random.key(1), 120, 100, 3, 0.05, dtype=dtype)
        assert p.Y.dtype == dtype and int(jnp.sum(p.S != 0)) == 600
        np.testing.assert_array_equal(
            p.S != 0, datasets.rpca_problem(jax.random.key(1), 120, 100, 3, 0.05).S != 0
        )


def test_exact_support_is_the_m_smallest_uniform_keys():
    """The support is {m smallest of the uniform keys drawn with the same key}, as the authors'
    randperm(n1 n2)[:m] is in law; ties at the cut-off go to the first positions (the bisection over
    bit patterns, checked on keys from a small set of values, where ties are the rule)."""
    from lowrank_jax.datasets.rpca import _smallest

    key, shape = jax.random.key(11), (37, 53)
    u = np.asarray(jax.random.uniform(key, shape)).ravel()
    for alpha in (0.0, 0.01, 0.3, 0.999, 1.0):
        m = int(np.floor(alpha * u.size))
        want = np.zeros(u.size, bool)
        want[np.argsort(u, kind="stable")[:m]] = True
        np.testing.assert_array_equal(
            np.asarray(datasets.random_support(key, shape, alpha)).ravel(), want
        )
    tied = jnp.asarray(np.random.default_rng(0).integers(0, 5, 200) / 8, jnp.float32)
    pick = jax.jit(_smallest)
    for m in range(0, 201, 7):
        want = np.zeros(200, bool)
        want[np.argsort(np.asarray(tied), kind="stable")[:m]] = True
        np.testing.assert_array_equal(pick(tied, m), want)


def test_exact_support_counts_floor_alpha_n1_n2_at_large_sizes():
    """The count's slack was 8 ulp of n1 n2, not of α n1 n2: from 1.05 · 10⁶ entries α = 0 drew an
    outlier (so rpca_problem(..., 1100, 1000, r, 0.0) had S ≠ 0) and
    ⌊0.1234567 · 1.1 · 10⁶⌋ = 135802 came out as 135803."""
    shape, key = (1100, 1000), jax.random.key(0)
    assert int(datasets.random_support(key, shape, 0.1234567).sum()) == 135_802
    assert int(datasets.random_support(key, shape, 0.0).sum()) == 0
    # traced α (a vmap over it): α = 0 and α = 1 are still exact
    counts = jax.vmap(lambda a: datasets.random_support(key, shape, a).sum())(jnp.array([0.0, 1.0]))
    np.testing.assert_array_equal(counts, [0, 1_100_000])


@pytest.mark.parametrize(
    "shape, alpha", [((10, 10, 10), 0.5), ((100,), 0.5), ((10, 0), 0.5), ((10, 10), 1.5)]
)
def test_random_support_rejects_what_it_cannot_draw(shape, alpha):
    """A 3-D shape drew a tenth of the asked count (size was n1 n2 of the first two axes), a 1-D one
    crashed with IndexError, and α outside [0, 1] was clipped silently."""
    with pytest.raises(ValueError, match="shape|alpha"):
        datasets.random_support(jax.random.key(0), shape, alpha)


def test_bernoulli_support_and_outlier_scale():
    p1 = datasets.rpca_problem(jax.random.key(4), 200, 200, 3, 0.3, exact_support=False)
    assert abs(float(jnp.mean(p1.S != 0)) - 0.3) < 0.01
    p5 = datasets.rpca_problem(
        jax.random.key(4), 200, 200, 3, 0.3, exact_support=False, outlier_scale=5.0
    )
    np.testing.assert_allclose(p5.S, 5 * p1.S, rtol=1e-5)


def test_rpca_problem_vmaps_over_alpha():
    probs = jax.vmap(lambda a: datasets.rpca_problem(jax.random.key(5), 50, 40, 2, a))(
        jnp.array([0.1, 0.3])
    )
    np.testing.assert_array_equal(jnp.sum(probs.S != 0, axis=(1, 2)), [200, 600])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n1=0), "n1"),
        (dict(rank=50), "rank"),
        (dict(alpha=1.5), "alpha"),
        (dict(outlier_scale=-1.0), "outlier_scale"),
        (dict(alpha=jnp.array(1.5)), "alpha"),
        (dict(alpha=np.array(-0.2)), "alpha"),
        (dict(alpha=float("nan")), "alpha"),
        (dict(outlier_scale=float("nan")), "outlier_scale"),
        (dict(outlier_scale=jnp.inf), "outlier_scale"),
    ],
)
def test_rpca_problem_rejects_bad_sizes(kwargs, match):
    args = dict(n1=30, n2=20, rank=2, alpha=0.1) | kwargs
    with pytest.raises(ValueError, match=match):
        datasets.rpca_problem(jax.random.key(0), **args)


def test_rpca_problem_takes_sizes_given_as_0d_integer_arrays():
    """jnp.int32(30) was refused as "n1 must be a positive integer, got Array(30, dtype=int32)",
    where np.int64 passed and the solvers take such ranks; the draw is that of the Python ints."""
    a = datasets.rpca_problem(0, jnp.int32(30), np.array(20), jnp.int32(2), 0.1)
    np.testing.assert_array_equal(a.Y, datasets.rpca_problem(0, 30, 20, 2, 0.1).Y)
    with pytest.raises(ValueError, match="n1"):
        datasets.rpca_problem(0, jnp.float32(30.0), 20, 2, 0.1)


def test_integer_seeds_are_keys_and_alpha_must_be_one_number():
    """rpca_problem(0, ...) failed with "invalid PRNG key data" although an integer key is a seed
    everywhere else, and an array of α's failed with "Cannot broadcast to shape with fewer
    dimensions". A seed now draws what jax.random.key(seed) draws; a non-scalar α is refused by
    name."""
    by_seed = datasets.rpca_problem(3, 50, 40, 3, 0.1)
    by_key = datasets.rpca_problem(jax.random.key(3), 50, 40, 3, 0.1)
    for a, b in zip(by_seed, by_key):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(
        datasets.random_support(np.int64(7), (20, 30), 0.2),
        datasets.random_support(jax.random.key(7), (20, 30), 0.2),
    )
    with pytest.raises(TypeError, match="key"):
        datasets.rpca_problem(1.5, 10, 10, 2, 0.1)
    with pytest.raises(TypeError, match="key"):
        datasets.random_support("0", (10, 10), 0.1)
    for alpha in (jnp.array([0.1, 0.2]), [0.1, 0.2], np.array([[0.1]])):
        with pytest.raises(ValueError, match="alpha"):
            datasets.rpca_problem(jax.random.key(0), 10, 10, 3, alpha)
        with pytest.raises(ValueError, match="alpha"):
            datasets.random_support(jax.random.key(0), (10, 10), alpha, exact=False)
    with pytest.raises(TypeError, match="alpha"):
        datasets.rpca_problem(jax.random.key(0), 10, 10, 3, "0.1")
