import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import loop


def halving(k, x):
    x = 0.5 * x + k.astype(x.dtype) * 0.0
    return x, {"value": x, "k": k}


def test_run_fixed_equals_python_loop():
    out = loop.run_fixed(halving, jnp.float32(8.0), 5)
    expected = 8.0 * 0.5 ** np.arange(1, 6)
    np.testing.assert_allclose(out.history["value"], expected)
    np.testing.assert_array_equal(out.history["k"], np.arange(5))
    assert int(out.n_iter) == 5 and float(out.state) == expected[-1]


def test_run_until_stops_at_first_true_and_pads():
    stop = lambda s, d: d["value"] < 1.0  # noqa: E731
    for differentiable in (False, True):
        out = jax.jit(lambda x: loop.run_until(halving, x, max_iter=10, stop=stop,
                                               differentiable=differentiable))(jnp.float32(8.0))
        assert int(out.n_iter) == 4  # 4, 2, 1, 0.5
        np.testing.assert_allclose(out.history["value"][:4], [4, 2, 1, 0.5])
        assert np.all(np.isnan(out.history["value"][4:]))
        assert np.all(np.asarray(out.history["k"][4:]) == -1)
        assert float(out.state) == 0.5


def test_run_until_respects_max_iter():
    out = loop.run_until(halving, jnp.float32(8.0), max_iter=3, stop=lambda s, d: jnp.asarray(False))
    assert int(out.n_iter) == 3 and float(out.state) == 1.0


def test_differentiable_run_until_has_the_gradient_of_the_truncated_run():
    def f(a, differentiable):
        step = lambda k, x: (a * x, {"x": x})  # noqa: E731
        out = loop.run_until(step, jnp.float32(1.0), max_iter=20, stop=lambda s, d: s > 5.0,
                             differentiable=differentiable)
        return out.state
    a = jnp.float32(1.5)
    n = int(np.ceil(np.log(5.0) / np.log(1.5)))  # steps until the state a**k exceeds 5
    assert float(f(a, True)) == float(f(a, False))
    np.testing.assert_allclose(jax.grad(f)(a, True), n * 1.5 ** (n - 1), rtol=1e-5)
