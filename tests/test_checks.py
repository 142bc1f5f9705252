"""lowrank_jax._checks.raise_if_diverged: the one divergence check every solver runs at its boundary."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lowrank_jax import _checks


def test_concrete_non_finite_raises_with_the_message():
    with pytest.raises(FloatingPointError, match="lower the step"):
        _checks.raise_if_diverged((jnp.ones(3), jnp.array([1.0, jnp.nan])), "lower the step")
    with pytest.raises(FloatingPointError, match="built"):
        _checks.raise_if_diverged(jnp.array([jnp.inf]), lambda: "built on failure")


def test_finite_or_integer_values_pass_and_the_message_is_not_built():
    def message():
        raise AssertionError("the message was built for a finite result")

    _checks.raise_if_diverged({"x": jnp.ones((2, 2)), "n": jnp.array(3)}, message)
    _checks.raise_if_diverged(jnp.array([1, 2]), message)       # integers are never "diverged"


def test_inside_a_transformation_the_values_pass_through():
    """Under jit / vmap nothing is raised: the NaN is the result (a sweep keeps its other points)."""
    def f(x):
        y = jnp.log(x)
        _checks.raise_if_diverged(y, "must not raise while tracing")
        return y

    out = jax.jit(f)(jnp.array([-1.0, 1.0]))
    assert np.isnan(out[0]) and out[1] == 0.0
    out = jax.vmap(f)(jnp.array([-1.0, 1.0]))
    assert np.isnan(out[0]) and out[1] == 0.0


def test_bad_values_are_refused_by_name():
    with pytest.raises(ValueError, match="Y must be real"):
        _checks.as_matrix(np.array([[1 + 2j, 3.0]]), "Y")
    with pytest.raises(ValueError, match="eta must be real"):
        _checks.as_hyper(1 + 1j, "eta")
    with pytest.raises(TypeError, match="Y must hold numbers"):
        _checks.as_matrix([[1.0, None]], "Y")
    with pytest.raises(ValueError, match=r"eta must have length 2, got shape \(\)"):
        _checks.as_hyper(1.0, "eta", length=2)
    with pytest.raises(ValueError, match="eta = 1e\\+40 overflows float32"):
        _checks.as_hyper(1e40, "eta", dtype=jnp.float32)
    assert _checks.as_matrix(np.ones((2, 2), bool), "Y").dtype == jnp.float32


def test_integer_seeds_become_keys():
    ref = jax.random.key_data(jax.random.key(3))
    for seed in (3, np.int64(3), jnp.array(3), np.array(3)):
        np.testing.assert_array_equal(jax.random.key_data(_checks.as_key(seed)), ref)
    key = jax.random.key(5)
    assert _checks.as_key(key) is key
