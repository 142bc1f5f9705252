"""The RPCA step kernel: E R and Eᵀ L of a pointwise residual map, panel by panel."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lowrank_jax.rpca import panels


def test_mismatched_shapes_and_row_arguments_are_named():
    Y, L, R = jnp.ones((6, 5)), jnp.ones((6, 2)), jnp.ones((5, 2))
    fn = lambda D: (D, jnp.sum(D))  # noqa: E731
    for bad in ((Y, L[:4], R), (Y, L, R[:, :1]), (Y, L, jnp.ones((6, 2)))):
        with pytest.raises(ValueError, match="needs Y"):
            panels.residual_map_products(*bad, fn)
    with pytest.raises(ValueError, match="row argument"):
        panels.residual_map_products(
            Y, L, R, lambda D, a: (D * a[:, None], jnp.sum(D)), (jnp.ones(4),)
        )


def _dense_products(Y, L, R, fn, row_args):
    E, stats = fn(Y - L @ R.T, *row_args)
    return E @ R, E.T @ L, stats


@pytest.mark.parametrize("n1", [64, 70])  # whole panels only, and a ragged last panel
def test_residual_map_products_values_and_gradients_match_dense(x64, monkeypatch, n1):
    """The panel kernel and its custom reverse rule agree with the formula on the whole matrix,
    including the cotangents of a closed-over threshold and of a per-row argument."""
    monkeypatch.setattr(panels, "_panel_rows", lambda n1, n2, itemsize: 16)
    k = jax.random.split(jax.random.key(3), 5)
    n2, r = 30, 3
    Y = jax.random.normal(k[0], (n1, n2))
    L, R = jax.random.normal(k[1], (n1, r)), jax.random.normal(k[2], (n2, r))
    rowt = 0.5 + jax.random.uniform(k[3], (n1,))
    mask = jax.random.bernoulli(k[4], 0.5, (n1, n2))

    def make_fn(z):
        def fn(D, t, m):
            S = jnp.where(m, jnp.sign(D) * jnp.maximum(jnp.abs(D) - z * t[:, None], 0.0), 0.0)
            E = S - D
            return E, {"sq": jnp.sum(E**2), "count": jnp.sum(S != 0)}

        return fn

    def loss(products, Y, L, R, z, t):
        gl, gr, stats = products(Y, L, R, make_fn(z), (t, mask))
        return jnp.sum(jnp.sin(gl)) + jnp.sum(gr**2) + 0.3 * stats["sq"]

    args = (Y, L, R, jnp.float64(0.7), rowt)
    panel = panels.residual_map_products(Y, L, R, make_fn(0.7), (rowt, mask))
    dense = _dense_products(Y, L, R, make_fn(0.7), (rowt, mask))
    for a, b in zip(jax.tree.leaves(panel), jax.tree.leaves(dense)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    # (compiled: op by op, the reverse panel loop was most of this test's time; the panel size patch
    # above is in force while it traces)
    g_panel = jax.jit(
        jax.grad(lambda *a: loss(panels.residual_map_products, *a), argnums=range(5))
    )(*args)
    g_dense = jax.jit(jax.grad(lambda *a: loss(_dense_products, *a), argnums=range(5)))(*args)
    for a, b in zip(g_panel, g_dense):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
    assert float(jnp.abs(g_panel[3])) > 0  # the threshold's gradient is not trivially zero


@pytest.mark.parametrize("n1", [1, 2, 3, 5])
def test_residual_map_products_on_fewer_rows_than_a_panel(n1):
    """The CPU panel size is at least 8 rows; with fewer rows it must be all of them (it was 8, the
    head panel came out empty and indexing it failed), so ScaledGD runs on a 3 × n matrix too."""
    k = jax.random.split(jax.random.key(1), 3)
    Y = jax.random.normal(k[0], (n1, 10))
    L, R = jax.random.normal(k[1], (n1, 1)), jax.random.normal(k[2], (10, 1))
    fn = lambda D: (jnp.where(jnp.abs(D) > 0.5, D, 0.0) - D, {"sq": jnp.sum(D**2)})
    got = panels.residual_map_products(Y, L, R, fn)
    want = _dense_products(Y, L, R, fn, ())
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    from lowrank_jax import rpca

    out = rpca.scaledgd(
        jnp.concatenate([Y, Y.T[:n1]], axis=1) if n1 < 10 else Y, 1, 0.1, max_iter=5
    )
    assert out.X.shape[0] == n1 and np.all(np.isfinite(out.X))


def test_residual_map_products_promotes_like_the_dense_products(x64):
    """An integer Y (video frames) or a float32 Y beside float64 factors failed inside the panel
    scan (its carry typed like Y, D = Y − L Rᵀ like the promotion); the result now equals the dense
    products in the promoted dtype."""
    rng = np.random.default_rng(0)
    L, R = jnp.asarray(rng.standard_normal((40, 2))), jnp.asarray(rng.standard_normal((10, 2)))
    fn = lambda D: (jnp.clip(D, -1, 1), jnp.sum(D**2))  # noqa: E731
    for Y in (
        jnp.asarray(rng.integers(0, 255, (40, 10)), jnp.uint8),
        jnp.asarray(rng.standard_normal((40, 10)), jnp.float32),
    ):
        gl, gr, stats = panels.residual_map_products(Y, L, R, fn)
        D = Y.astype(jnp.float64) - L @ R.T
        E = jnp.clip(D, -1, 1)
        assert gl.dtype == jnp.float64
        np.testing.assert_allclose(gl, E @ R, rtol=1e-12)
        np.testing.assert_allclose(gr, E.T @ L, rtol=1e-12)
        np.testing.assert_allclose(stats, jnp.sum(D**2), rtol=1e-12)
    # NumPy bfloat16 arrays (ml_dtypes) run as their JAX equivalents: NumPy's bfloat16 products come
    # back float32, and the panel traced in bfloat16 refused them ("lax.mul requires ... same
    # dtypes").
    Yb, Lb, Rb = (np.ones(shape, dtype=jnp.bfloat16) for shape in ((37, 5), (37, 2), (5, 2)))
    fn = lambda D: (2 * D, jnp.sum(D))  # noqa: E731
    np.testing.assert_array_equal(
        panels.residual_map_products(Yb, Lb, Rb, fn)[2],
        panels.residual_map_products(*map(jnp.asarray, (Yb, Lb, Rb)), fn)[2],
    )
    # A Y that is not a matrix: the function's own message (it failed unpacking Y's shape).
    with pytest.raises(
        ValueError, match=r"needs Y \(n1, n2\), L \(n1, r\) and R \(n2, r\); got Y \(5,\)"
    ):
        panels.residual_map_products(np.ones(5), np.ones((5, 1)), np.ones((5, 1)), fn)
