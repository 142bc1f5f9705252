import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lowrank_jax import Result, Status
from lowrank_jax.result import finish


class Toy(Result):
    x: jax.Array
    loss: jax.Array


def toy(status, x=None):
    x = jnp.arange(1000.0) if x is None else x
    return Toy(
        n_iter=jnp.asarray(3, jnp.int32),
        status=jnp.asarray(status, jnp.int32),
        history={"loss": jnp.full(10, jnp.nan).at[:3].set(1.0)},
        x=x,
        loss=jnp.float32(0.25),
    )


def test_repr_names_the_status_shows_scalars_and_no_array_whole():
    text = repr(toy(Status.CONVERGED))
    assert text == (
        "Toy(status=CONVERGED, n_iter=3, loss=0.25, x=f32[1000],\n    history={loss=f32[10]})"
    )
    batched = jax.vmap(lambda s: toy(s, jnp.zeros(4)))(jnp.array([0, 0, 2], jnp.int32))
    assert "status={CONVERGED: 2, DIVERGED: 1}" in repr(batched)
    assert Status.describe(jnp.asarray(1)) == "MAX_ITER"
    wide = Toy(
        **{**vars(toy(Status.CONVERGED)), "history": {f"h{i}": jnp.zeros(3) for i in range(9)}}
    )
    lines = repr(wide).splitlines()
    assert len(lines) > 1 and max(map(len, lines)) <= 78, lines
    assert all(line.startswith(" " * len("Toy(")) for line in lines[1:]), lines
    np.testing.assert_array_equal(batched.converged, [True, True, False])


@pytest.mark.parametrize(
    "status, message", [(Status.DIVERGED, "went up"), (Status.INVALID, "bad tol")]
)
def test_finish_raises_the_named_cause_eagerly_and_under_jit_and_returns_with_throw_false(
    status, message
):
    for call in (
        lambda s: finish(toy(s), True, diverged="went up", invalid="bad tol"),
        jax.jit(lambda s: finish(toy(s), True, diverged="went up", invalid="bad tol").x),
    ):
        with pytest.raises(RuntimeError, match=message):
            jax.block_until_ready(call(jnp.asarray(status, jnp.int32)))
    out = finish(toy(status), False, diverged="went up")
    assert int(out.status) == status
    assert int(finish(toy(Status.MAX_ITER), True, diverged="went up").status) == Status.MAX_ITER


def test_ensure_finite_raises_eagerly_and_under_jit_and_passes_finite_values():
    from lowrank_jax.result import ensure_finite

    good = {"x": jnp.ones(3), "n": jnp.asarray(2)}
    assert ensure_finite(good, "never") is good
    for call in (
        lambda v: ensure_finite(v, "overflowed"),
        jax.jit(lambda v: ensure_finite(v, "overflowed")),
    ):
        with pytest.raises(RuntimeError, match="overflowed"):
            jax.block_until_ready(call(jnp.array([1.0, jnp.inf])))
    np.testing.assert_array_equal(
        jax.jit(lambda v: ensure_finite(v, "no"))(jnp.ones(2)), np.ones(2)
    )


def test_ensure_finite_inside_compile_time_eval_judges_the_values_not_the_trace():
    """Host functions run under jax.ensure_compile_time_eval; a jitted check inside raised for
    finite values when its message index was a constant (folded, so the error ran while tracing)."""
    from lowrank_jax.result import ensure_finite

    with jax.ensure_compile_time_eval():
        f = jax.jit(lambda v: ensure_finite(v, "overflowed"))
        np.testing.assert_array_equal(f(jnp.ones(3)), np.ones(3))
        with pytest.raises(RuntimeError, match="overflowed"):
            jax.block_until_ready(f(jnp.array([1.0, jnp.nan])))
