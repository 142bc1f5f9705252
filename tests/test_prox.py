import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles import sparsify_top_fraction_topk

from lowrank_jax import prox


def np_soft(x, t):
    return np.sign(x) * np.maximum(np.abs(x) - t, 0)


def np_top_fraction(M, alpha):
    """Straightforward T_α: sort every row and column, keep entries at or above both cut-offs."""
    n1, n2 = M.shape
    kr, kc = int(np.floor(alpha * n2 + 1e-9)), int(np.floor(alpha * n1 + 1e-9))
    A = np.abs(M)
    row = np.sort(A, axis=1)[:, n2 - kr] if kr > 0 else np.full(n1, np.inf)
    col = np.sort(A, axis=0)[n1 - kc, :] if kc > 0 else np.full(n2, np.inf)
    return np.where((A >= row[:, None]) & (A >= col[None, :]), M, 0.0)


def test_soft_threshold_matches_numpy_with_broadcast_thresholds():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((40, 30)).astype(np.float32)
    for t in (
        0.0,
        0.7,
        rng.uniform(0, 1, (40, 1)).astype(np.float32),
        rng.uniform(0, 1, (30,)).astype(np.float32),
    ):
        np.testing.assert_allclose(prox.soft_threshold(jnp.asarray(x), t), np_soft(x, t), atol=1e-7)


def test_soft_threshold_refuses_a_negative_or_nan_concrete_threshold():
    """soft_threshold([1, -2, 0], -1) returned [2, -1, 1] (a zero became 1) where the path-norm
    prox step refuses t < 0. A concrete t (scalar or per-row array) with a
    negative or NaN entry is refused by name; +inf zeroes everything; valid thresholds, concrete or
    traced under jit and vmap, give the values they gave before."""
    x = jnp.array([1.0, -2.0, 0.0])
    for t, match in [
        (-1.0, "t must be non-negative"),
        (np.float32(-0.5), "t must be non-negative"),
        (np.array([[0.5], [-0.1]]), "t must be non-negative"),
        (float("nan"), "t has non-finite"),
    ]:
        with pytest.raises(ValueError, match=match):
            prox.soft_threshold(jnp.ones((2, 3)) if np.ndim(t) == 2 else x, t)
    np.testing.assert_array_equal(prox.soft_threshold(x, jnp.inf), [0.0, 0.0, 0.0])
    X = np.random.default_rng(11).standard_normal((5, 4)).astype(np.float32)
    t_rows = np.linspace(0.0, 1.0, 5, dtype=np.float32)[:, None]
    np.testing.assert_allclose(
        prox.soft_threshold(jnp.asarray(X), t_rows), np_soft(X, t_rows), atol=1e-7
    )
    np.testing.assert_allclose(
        jax.jit(prox.soft_threshold)(jnp.asarray(X), jnp.asarray(t_rows)),
        np_soft(X, t_rows),
        atol=1e-7,
    )
    ts = jnp.array([0.0, 0.3, 2.0], jnp.float32)
    out = jax.vmap(prox.soft_threshold, in_axes=(None, 0))(jnp.asarray(X), ts)
    for t, o in zip(np.asarray(ts), out):
        np.testing.assert_allclose(o, np_soft(X, t), atol=1e-7)


def test_soft_threshold_on_a_pytree_of_integer_and_half_precision_leaves():
    """The prox of t Σ_leaves ‖·‖₁ is soft_threshold on every leaf. A threshold cast to an integer
    leaf's dtype truncated it (t = 0.6 became 0, nothing shrunk; 1.5 became 1): integer leaves are
    shrunk in the default float at the real t, and floating leaves keep their dtype."""
    tree = {"a": jnp.array([-2.0, 0.5, 3.0]), "b": (jnp.array([[0.1, -1.0]]),)}
    out = jax.tree.map(lambda w: prox.soft_threshold(w, 0.6), tree)
    np.testing.assert_allclose(out["a"], [-1.4, 0.0, 2.4], atol=1e-7)
    np.testing.assert_allclose(out["b"][0], [[0.0, -0.4]], atol=1e-7)
    ints = jnp.array([3, -2, 1, 0])
    for t in (0.6, 1.5):
        want = np_soft(np.array([3.0, -2.0, 1.0, 0.0]), t)
        leaves = {"w": ints, "f": ints.astype(jnp.float32), "h": ints.astype(jnp.float16)}
        got = jax.tree.map(lambda w, t=t: prox.soft_threshold(w, t), leaves)
        assert jnp.issubdtype(got["w"].dtype, jnp.floating)
        assert got["f"].dtype == jnp.float32 and got["h"].dtype == jnp.float16
        np.testing.assert_allclose(got["w"], want, rtol=1e-6)
        np.testing.assert_array_equal(got["w"], got["f"])
        np.testing.assert_allclose(got["h"], want, rtol=1e-3)


def test_soft_threshold_gradients_match_closed_form(x64):
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.standard_normal(50))
    t = 0.4
    g_t = jax.grad(lambda t: jnp.sum(prox.soft_threshold(x, t)))(t)
    assert np.isclose(g_t, -np.sum(np.sign(x) * (np.abs(x) > t)))
    g_x = jax.grad(lambda x: jnp.sum(prox.soft_threshold(x, t)))(x)
    np.testing.assert_array_equal(g_x, (np.abs(x) > t).astype(float))


def test_soft_threshold_gradient_in_t_for_integer_data(x64):
    """An integer x has no tangent (float0); the custom rule multiplied it anyway and the gradient
    in t failed with a float0 promotion error. ∂/∂t = −Σ sign(x)·1[|x| > t], as for float data."""
    x = jnp.arange(-3, 5)
    g = jax.grad(lambda t: jnp.sum(prox.soft_threshold(x, t) ** 2))(1.5)
    xf = np.arange(-3.0, 5.0)
    # 2 S · ∂S/∂t
    np.testing.assert_allclose(g, -2 * np.sum(np.maximum(np.abs(xf) - 1.5, 0)), rtol=1e-12)


def test_soft_threshold_gradient_with_per_row_thresholds_matches_finite_differences(x64):
    """The hand-written derivative of clip_symmetric broadcasts the threshold's tangent."""
    rng = np.random.default_rng(7)
    x = jnp.asarray(rng.standard_normal((6, 9)))
    t = jnp.asarray(rng.uniform(0.2, 1.0, (6, 1)))
    w = jnp.asarray(rng.standard_normal((6, 9)))
    f = lambda x, t: jnp.sum(w * prox.soft_threshold(x, t) ** 2)  # noqa: E731
    g_x, g_t = jax.grad(f, argnums=(0, 1))(x, t)
    h = 1e-6
    for i in range(6):
        dt = jnp.zeros_like(t).at[i, 0].set(h)
        fd = (f(x, t + dt) - f(x, t - dt)) / (2 * h)
        np.testing.assert_allclose(g_t[i, 0], fd, rtol=1e-6, atol=1e-9)
    dx = jnp.asarray(rng.standard_normal((6, 9)))
    fd = (f(x + h * dx, t) - f(x - h * dx, t)) / (2 * h)
    np.testing.assert_allclose(jnp.sum(g_x * dx), fd, rtol=1e-6)


def test_hard_threshold_matches_numpy():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((20, 20))
    t = rng.uniform(0, 1, (20, 1))
    np.testing.assert_array_equal(
        prox.hard_threshold(jnp.asarray(x), jnp.asarray(t)),
        np.where(np.abs(x) > t, x, 0).astype(np.float32),
    )


def test_project_rank_is_eckart_young(x64):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((30, 20))
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    np.testing.assert_allclose(
        prox.project_rank(jnp.asarray(A), 4), (U[:, :4] * s[:4]) @ Vt[:4], atol=1e-12
    )
    P = prox.project_rank(jnp.asarray(A), 4, method="randomized", key=jax.random.key(0))
    assert np.linalg.matrix_rank(np.asarray(P), tol=1e-8) == 4


@pytest.mark.parametrize("shape", [(50, 50), (37, 80), (120, 45)])
@pytest.mark.parametrize("alpha", [0.0, 0.05, 0.1, 0.3, 0.5, 1.0])
def test_top_fraction_matches_numpy(shape, alpha):
    rng = np.random.default_rng(hash((shape, alpha)) % 2**32)
    M = rng.standard_normal(shape).astype(np.float32)
    expected = np_top_fraction(M, alpha)
    np.testing.assert_array_equal(prox.sparsify_top_fraction(jnp.asarray(M), alpha), expected)
    np.testing.assert_array_equal(sparsify_top_fraction_topk(jnp.asarray(M), alpha), expected)


def test_top_fraction_keeps_ties_like_numpy():
    """Also without gathering unfinished rows (ScaledGD's initialisation): the same T_α."""
    rng = np.random.default_rng(4)
    M = rng.integers(-3, 4, size=(40, 30)).astype(np.float32)  # many equal magnitudes
    for alpha in (0.1, 0.25, 0.6):
        want = np_top_fraction(M, alpha)
        np.testing.assert_array_equal(prox.sparsify_top_fraction(jnp.asarray(M), alpha), want)
        np.testing.assert_array_equal(
            prox.sparsify_top_fraction(jnp.asarray(M), alpha, gather=False), want
        )
    with pytest.raises(TypeError, match="gather"):
        prox.sparsify_top_fraction(jnp.asarray(M), 0.1, gather=None)


def _np_cut(M, k, axis):
    """k-th largest along axis (+inf for k = 0), by sorting."""
    srt = -np.sort(-M, axis=axis)
    return np.full(M.shape[1 - axis], np.inf, M.dtype) if k == 0 else np.take(srt, k - 1, axis=axis)


def test_square_thresholds_as_one_selection_equal_the_two(monkeypatch):
    """A square magnitude (up to 2¹⁹ entries) is selected as the rows of [M; Mᵀ] in one call: the
    same cut-offs as row and column selections apart and as NumPy, with ties, with warm starts
    (both, one, none), under vmap over α and over matrices."""
    rng = np.random.default_rng(6)
    M = np.abs(rng.integers(-3, 4, size=(48, 48))).astype(np.float32)  # many ties
    M[:, 5] = 0.0  # a column of zeros
    Mj = jnp.asarray(M)
    alphas = jnp.array([0.0, 0.05, 0.2, 0.5, 1.0], jnp.float32)
    guesses = [(None, None), (jnp.ones(48), None), (jnp.full(48, 2.0), jnp.zeros(48))]

    def run(a, rg, cg):
        return prox.top_fraction_thresholds(Mj, a, row_guess=rg, col_guess=cg)

    joint = [[run(a, *g) for g in guesses] for a in alphas]
    batched = jax.jit(jax.vmap(lambda a: prox.top_fraction_thresholds(Mj, a)))(alphas)
    two_matrices = jax.vmap(lambda m: prox.top_fraction_thresholds(m, 0.2))(jnp.stack([Mj, 2 * Mj]))
    monkeypatch.setattr(prox, "_JOINT_SELECTION_MAX", 0)  # the two selections apart
    for i, a in enumerate(np.asarray(alphas)):
        k = int(prox.top_fraction_count(a, 48))
        want = (_np_cut(M, k, 1), _np_cut(M, k, 0))
        apart = run(a, None, None)
        for got in joint[i] + [apart, (batched[0][i], batched[1][i])]:
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
    k = int(prox.top_fraction_count(0.2, 48))
    rows, cols = two_matrices  # (2, 48) each
    np.testing.assert_array_equal(cols[0], _np_cut(M, k, 0))
    np.testing.assert_array_equal(rows[1], _np_cut(2 * M, k, 1))


def test_top_fraction_under_vmap_over_alpha():
    rng = np.random.default_rng(5)
    M = jnp.asarray(rng.standard_normal((60, 40)).astype(np.float32))
    alphas = jnp.array([0.05, 0.1, 0.2, 0.4], jnp.float32)
    out = jax.jit(jax.vmap(prox.sparsify_top_fraction, in_axes=(None, 0)))(M, alphas)
    for a, o in zip(np.asarray(alphas), out):
        np.testing.assert_array_equal(o, np_top_fraction(np.asarray(M), float(a)))


def test_top_fraction_refuses_alpha_outside_the_unit_interval():
    """α = −0.5 zeroed every entry and α = 1.5 kept every entry without a word, and the top_k
    variant (documented as giving the same result) failed inside lax.top_k at 1.5. A concrete α
    outside [0, 1] or NaN is refused by name in both; a traced one (vmap over α) gives NaN, its
    valid neighbours the same values as before."""
    M = np.random.default_rng(12).standard_normal((9, 7)).astype(np.float32)
    for op in (prox.sparsify_top_fraction, sparsify_top_fraction_topk):
        for alpha in (-0.5, 1.5, float("nan"), np.float32(1.01)):
            with pytest.raises(ValueError, match="alpha must"):
                op(jnp.asarray(M), alpha)
        for alpha in (0.0, 1.0):
            np.testing.assert_array_equal(op(jnp.asarray(M), alpha), np_top_fraction(M, alpha))
    alphas = jnp.array([0.3, -0.5, 1.5, jnp.nan, 1.0], jnp.float32)
    out = np.asarray(
        jax.jit(jax.vmap(prox.sparsify_top_fraction, in_axes=(None, 0)))(jnp.asarray(M), alphas)
    )
    assert np.all(np.isnan(out[1:4]))
    # x that is not a matrix: refused by name (it failed unpacking its shape, "not enough values").
    for op in (prox.sparsify_top_fraction, sparsify_top_fraction_topk):
        for shape in ((5,), (2, 3, 4)):
            with pytest.raises(ValueError, match="x must be a 2-D matrix"):
                op(jnp.ones(shape), 0.1)
    np.testing.assert_array_equal(out[0], np_top_fraction(M, float(alphas[0])))
    np.testing.assert_array_equal(out[4], M)


def test_top_fraction_takes_integer_data():
    """Integer x failed with "kth_largest needs a real floating-point array" (an internal name) in
    sparsify_top_fraction and "cannot convert float infinity to integer" in the top_k variant, while
    soft_threshold and hard_threshold take integers. Both now rank and return them in float."""
    M = np.random.default_rng(13).integers(-50, 50, size=(8, 6))
    expected = np_top_fraction(M.astype(np.float64), 0.5)
    for op in (
        prox.sparsify_top_fraction,
        sparsify_top_fraction_topk,
        jax.jit(prox.sparsify_top_fraction),
    ):
        out = op(jnp.asarray(M, jnp.int32), 0.5)
        assert jnp.issubdtype(out.dtype, jnp.floating)
        np.testing.assert_array_equal(out, expected)


def test_top_fraction_count_is_rounding_safe():
    # an absolute slack broke these
    for alpha, n, k in [
        (0.1, 1000, 100),
        (0.3, 1000, 300),
        (0.7, 10, 7),
        (0.29, 100, 29),
        (0.57, 100, 57),
        (0.0, 2_000_000, 0),
        (0.1234567, 1_000_000, 123_456),
    ]:
        assert int(prox.top_fraction_count(jnp.float32(alpha), n)) == k


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from([1, 7, 12]), st.sampled_from([1, 9]), st.floats(0, 1), st.integers(0, 2**31 - 1)
)
def test_top_fraction_property(n1, n2, alpha, seed):
    M = np.random.default_rng(seed).standard_normal((n1, n2)).astype(np.float32)
    out = np.asarray(prox.sparsify_top_fraction(jnp.asarray(M), alpha))
    # Never more than k entries survive in a row (no ties in continuous data), and all survivors are
    # kept values.
    kr = int(prox.top_fraction_count(jnp.float32(alpha), n2))
    assert np.all((out != 0).sum(axis=1) <= kr)
    assert np.all((out == 0) | (out == M))
    np.testing.assert_array_equal(out, np_top_fraction(M, float(np.float32(alpha))))


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, jnp.float32])
def test_top_fraction_count_is_exact_for_low_precision_alpha(dtype):
    """⌊α n⌋ for α given in bfloat16/float16: the rounding slack is taken in float32 at least (in
    α's own precision bfloat16's eps · n added whole entries: 0.25 · 100 gave 31)."""
    for alpha, n in [(0.25, 100), (0.5, 1000), (0.125, 64), (0.1, 1000)]:
        a = jnp.asarray(alpha, dtype)
        assert int(prox.top_fraction_count(a, n)) == int(np.floor(float(a) * n + 1e-9)), (
            alpha,
            n,
            dtype,
        )


def test_group_soft_threshold_derivative_at_zero_groups_and_tiny_groups(x64):
    """At a zero group the operator is 0 near it for t > 0 (derivative 0) and the identity for t = 0
    (derivative 1); the plain ‖x_g‖ = √Σx² gave NaN there. Groups near 1e-170 squared to 0 and were
    zeroed although far above t. A negative t (which enlarged the groups) is refused."""
    X = jnp.array([[3.0, 0.0, 1.0], [4.0, 0.0, 1.0]])
    # Derivatives as one compiled program each, t a constant (op by op, each op compiles alone).
    for t, expected in ((1.0, 0.0), (0.0, 1.0)):
        g = np.asarray(jax.jit(jax.grad(lambda X: jnp.sum(prox.group_soft_threshold(X, t))))(X))
        assert np.all(np.isfinite(g))
        np.testing.assert_allclose(g[:, 1], expected)
    np.testing.assert_allclose(
        np.asarray(jax.jit(jax.jacfwd(lambda X: prox.group_soft_threshold(X, 0.0)))(X))[0, 1, 0, 1],
        1.0,
    )
    tiny = jnp.array([[3e-170, 4e-170]])
    np.testing.assert_allclose(
        prox.group_soft_threshold(tiny, 1e-171, axis=1), tiny * (1 - 1e-171 / 5e-170), rtol=1e-12
    )
    with pytest.raises(ValueError, match="t must be non-negative"):
        prox.group_soft_threshold(X, -1.0)


def test_group_soft_threshold_gradient_of_tiny_float32_groups():
    """float32 groups near 1e-20: the value was right but the derivative of t/‖x_g‖ went through
    ‖x_g‖⁻² (inf in float32), and at t = 0 the gradient was NaN. It now equals the float64 one."""
    X = jnp.array([[3e-20, 1e-30, 2.0], [4e-20, -2e-30, 1.0]], jnp.float32)
    f = lambda X, t: jnp.sum(
        jnp.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 1.0]], X.dtype) * prox.group_soft_threshold(X, t)
    )
    # one compiled program per t and dtype (t a constant, as called eagerly; op by op, each small
    # op compiles on its own)
    grad = lambda X, t: jax.jit(jax.grad(lambda X: f(X, t)))(X)  # noqa: E731
    for t in (0.0, 1e-21, 1e-31):
        g32 = np.asarray(grad(X, t))
        with jax.enable_x64(True):
            g64 = np.asarray(grad(jnp.asarray(np.asarray(X), jnp.float64), t))
        assert g64.dtype == np.float64 and g32.dtype == np.float32
        assert np.all(np.isfinite(g32)), (t, g32)
        np.testing.assert_allclose(g32, g64, rtol=1e-5, atol=1e-6)
        if t == 0.0:
            np.testing.assert_allclose(g32, [[1.0, 2.0, 3.0], [-1.0, 0.5, 1.0]], rtol=1e-6)


def test_soft_threshold_jvp_takes_python_number_tangents():
    """jax.jvp with Python floats as primals and tangents (as a user writes it) raised
    "'float' object has no attribute 'dtype'" in clip_symmetric's rule; jacfwd and arrays worked.
    The derivative in t is −sign(x) where |x| > t and 0 inside."""
    x = jnp.array([-2.0, 0.05, 3.0])
    out, dt = jax.jvp(lambda t: prox.soft_threshold(x, t), (0.1,), (1.0,))
    np.testing.assert_allclose(out, [-1.9, 0.0, 2.9], rtol=1e-6)
    np.testing.assert_array_equal(dt, [1.0, 0.0, -1.0])
    _, dx = jax.jvp(lambda x: prox.soft_threshold(x, 0.5), (2.0,), (1.0,))
    assert float(dx) == 1.0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_top_fraction_count_of_every_k_over_n_is_k(dtype):
    """⌊α n⌋ for α = k/n as the user's float rounds it, every k = 0..n (brute force): the rounding
    slack must lift each α that rounded below k/n back to k, and never add an entry."""
    with jax.enable_x64(dtype == "float64"):
        for n in (7, 100, 1000):
            k = np.arange(n + 1)
            got = jax.vmap(lambda a: prox.top_fraction_count(a, n))(jnp.asarray(k / n, dtype))
            np.testing.assert_array_equal(got, k)


def test_hard_threshold_zeroes_ties_at_t():
    """prox of t²/2 · ‖·‖₀ keeps x_i only where x_i²/2 > t²/2: an entry of magnitude exactly t is
    dropped (random data never ties, so the NumPy comparison above cannot see this)."""
    t = 0.75
    x = jnp.array([-t, t, -2 * t, 0.5 * t, 2 * t, 0.0])
    np.testing.assert_array_equal(prox.hard_threshold(x, t), [0.0, 0.0, -2 * t, 0.0, 2 * t, 0.0])


def test_soft_threshold_derivative_takes_the_threshold_branch_at_ties(x64):
    """At |x| = t exactly the documented rule takes the t-branch, as for |x| > t: ∂S/∂t = −sign(x)
    and ∂S/∂x = 1 (the clip's derivative in x is 0 there), in forward and reverse mode."""
    x = jnp.array([0.5, -0.5, 0.2, 0.9, -0.9])
    t = 0.5
    _, dt = jax.jvp(lambda t: prox.soft_threshold(x, t), (t,), (1.0,))
    np.testing.assert_array_equal(dt, [-1.0, 1.0, 0.0, -1.0, 1.0])
    g_x = jax.grad(lambda x: jnp.sum(prox.soft_threshold(x, t)))(x)
    np.testing.assert_array_equal(g_x, [1.0, 1.0, 0.0, 1.0, 1.0])
    g_t = jax.grad(lambda t: jnp.sum(prox.soft_threshold(x, t) * jnp.arange(1.0, 6.0)))(t)
    np.testing.assert_allclose(g_t, -1.0 + 2.0 - 4.0 + 5.0)
