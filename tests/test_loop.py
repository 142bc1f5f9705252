import jax
import jax.numpy as jnp
import numpy as np
import pytest

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
        out = jax.jit(
            lambda x: loop.run_until(
                halving, x, max_iter=10, stop=stop, differentiable=differentiable
            )
        )(jnp.float32(8.0))
        assert int(out.n_iter) == 4  # 4, 2, 1, 0.5
        np.testing.assert_allclose(out.history["value"][:4], [4, 2, 1, 0.5])
        assert np.all(np.isnan(out.history["value"][4:]))
        assert np.all(np.asarray(out.history["k"][4:]) == -1)
        assert float(out.state) == 0.5


def test_run_until_respects_max_iter():
    out = loop.run_until(
        halving, jnp.float32(8.0), max_iter=3, stop=lambda s, d: jnp.asarray(False)
    )
    assert int(out.n_iter) == 3 and float(out.state) == 1.0


def test_differentiable_run_until_has_the_gradient_of_the_truncated_run():
    def f(a, differentiable):
        step = lambda k, x: (a * x, {"x": x})  # noqa: E731
        out = loop.run_until(
            step,
            jnp.float32(1.0),
            max_iter=20,
            stop=lambda s, d: s > 5.0,
            differentiable=differentiable,
        )
        return out.state

    a = jnp.float32(1.5)
    n = int(np.ceil(np.log(5.0) / np.log(1.5)))  # steps until the state a**k exceeds 5
    assert float(f(a, True)) == float(f(a, False))
    np.testing.assert_allclose(jax.grad(f)(a, True), n * 1.5 ** (n - 1), rtol=1e-5)


def test_vmapped_run_until_equals_each_run_and_keeps_one_counter():
    def run(x, t):
        return loop.run_until(halving, x, max_iter=10, stop=lambda s, d: d["value"] < t)

    xs = jnp.array([8.0, 2.0, 100.0, 1e6, 3.0])
    ts = jnp.array([1.0, 1.0, 3.0, 0.5, 10.0])  # stops after 4, 2, 6, never (10) and 1 steps
    out = jax.jit(jax.vmap(run))(xs, ts)
    np.testing.assert_array_equal(out.n_iter, [4, 2, 6, 10, 1])
    for i in range(len(xs)):
        one = run(xs[i], ts[i])
        assert int(one.n_iter) == int(out.n_iter[i])
        assert float(one.state) == float(out.state[i])  # stopped points keep their final state
        np.testing.assert_array_equal(one.history["value"], out.history["value"][i])
        np.testing.assert_array_equal(one.history["k"], out.history["k"][i])
    # nested vmap: every (x, t) pair as its own run
    grid = jax.vmap(jax.vmap(run, in_axes=(0, None)), in_axes=(None, 0))(xs, ts)
    for j in range(len(ts)):
        for i in range(len(xs)):
            assert int(grid.n_iter[j, i]) == int(run(xs[i], ts[j]).n_iter)
    # the loop's predicate and counter stay unbatched: no per-point index into the history
    jaxpr = jax.make_jaxpr(jax.vmap(run))(xs, ts).jaxpr
    (loop_eqn,) = [e for e in jaxpr.eqns if e.primitive.name == "while"]
    assert loop_eqn.params["cond_jaxpr"].out_avals[0].shape == ()
    assert loop_eqn.outvars[0].aval.shape == ()


def test_run_until_forward_mode_and_vmap_of_it():
    def f(a):
        step = lambda k, x: (a * x, {"x": x})  # noqa: E731
        return loop.run_until(step, jnp.float32(1.0), max_iter=20, stop=lambda s, d: s > 5.0).state

    # a**n with n the first step past 5: n = 4 for a = 1.5 and 3 for a = 2
    np.testing.assert_allclose(jax.jacfwd(f)(jnp.float32(1.5)), 4 * 1.5**3, rtol=1e-6)
    np.testing.assert_allclose(
        jax.vmap(jax.jacfwd(f))(jnp.array([1.5, 2.0])), [4 * 1.5**3, 3 * 2.0**2], rtol=1e-6
    )


def test_run_until_forward_mode_with_none_int_and_key_in_the_state_and_vmap_of_jvp():
    """jacfwd of a tolerance-stopped loop whose state holds None (an unused slot, as exact Newton's
    curvature has), an int and a key failed with a bare AssertionError; vmap of jvp with a batched
    primal or tolerance built (batch, batch) arrays that failed to compile."""

    extra = (None, jnp.int32(3), jax.random.key(0))

    def run(a, tol):
        step = lambda k, s: ((s[0] * a,) + s[1:], {"x": s[0] * a})  # noqa: E731
        return loop.run_until(
            step, (jnp.float32(1.0),) + extra, max_iter=60, stop=lambda s, d: d["x"] < tol
        ).state[0]

    # a**n with n the first step below tol: 0.5 → n = 4 (0.0625 < 0.1), 0.9 → n = 22
    want = {0.5: 4 * 0.5**3, 0.9: 22 * 0.9**21}
    np.testing.assert_allclose(jax.jacfwd(run)(jnp.float32(0.5), 0.1), want[0.5], rtol=1e-5)
    a = jnp.array([0.5, 0.9])
    np.testing.assert_allclose(
        jax.vmap(jax.jacfwd(run), in_axes=(0, None))(a, 0.1), [want[0.5], want[0.9]], rtol=1e-5
    )
    primal, tangent = jax.vmap(lambda a: jax.jvp(lambda a: run(a, 0.1), (a,), (jnp.float32(1.0),)))(
        a
    )
    np.testing.assert_allclose(primal, [0.5**4, 0.9**22], rtol=1e-5)
    np.testing.assert_allclose(tangent, [want[0.5], want[0.9]], rtol=1e-5)
    # a batched tolerance alone: 0.9 stops at n = 22 (tol 0.1) and at n = 44 (tol 0.01)
    _, tangent = jax.vmap(
        lambda tol: jax.jvp(lambda a: run(a, tol), (jnp.float32(0.9),), (jnp.float32(1.0),))
    )(jnp.array([0.1, 0.01]))
    np.testing.assert_allclose(tangent, [22 * 0.9**21, 44 * 0.9**43], rtol=1e-4)


def test_run_until_with_no_steps_returns_the_state_and_an_empty_history():
    step = lambda k, s: (s + 1.0, {"v": s})
    for differentiable in (False, True):
        out = loop.run_until(
            step,
            jnp.float32(2.0),
            max_iter=0,
            stop=lambda s, d: s > 5,
            differentiable=differentiable,
        )
        assert float(out.state) == 2.0 and int(out.n_iter) == 0 and out.history["v"].shape == (0,)


def test_step_counts_must_be_non_negative_integers():
    """run_fixed(…, -3) reported n_iter = −3 and run_fixed(…, 2.5) ran 3 steps reporting 2;
    run_until with max_iter = −2 or 3.0 failed inside XLA's shape checks."""
    import pytest

    step = lambda k, s: (s + 1.0, s)
    for bad in (-3, 2.5, True, None):
        with pytest.raises(ValueError, match="num_steps must be an integer >= 0"):
            loop.run_fixed(step, 0.0, bad)
        with pytest.raises(ValueError, match="max_iter must be an integer >= 0"):
            loop.run_until(step, 0.0, max_iter=bad, stop=lambda s, d: s > 10)
    assert int(loop.run_fixed(step, 0.0, np.int64(3)).n_iter) == 3


def test_boolean_history_pads_false_and_a_non_boolean_stop_is_named():
    """A boolean diagnostic was padded with -1, which reads True after the stop; a stop that returns
    a float failed inside XLA's while_loop with an unrelated message."""
    step = lambda k, x: (0.5 * x, {"small": x < 1.0})  # noqa: E731
    out = loop.run_until(step, jnp.float32(8.0), max_iter=10, stop=lambda s, d: d["small"])
    n = int(out.n_iter)
    assert (
        n < 10
        and bool(out.history["small"][n - 1])
        and not np.any(np.asarray(out.history["small"][n:]))
    )
    with pytest.raises(TypeError, match="boolean scalar"):
        loop.run_until(halving, jnp.float32(8.0), max_iter=5, stop=lambda s, d: d["value"] - 1.0)


def test_a_tolerance_stop_differentiates_forward_and_refuses_reverse_mode_by_name():
    """A solver stopped by tolerance (a while_loop): jax.grad raises JAX's while_loop error (it
    used to fail earlier, in linearization; the solvers named the way out then), and forward mode
    agrees with a finite difference (jacfwd of exact Newton with tol failed on its state's None);
    the documented way out, differentiable=True, differentiates in reverse mode. The refused
    gradients are taken under jit: the error comes while tracing, so nothing is compiled (op by op
    they cost about 5 s of compilation before reaching it)."""
    from lowrank_jax import datasets, regression, rpca

    p = datasets.rpca_problem(jax.random.key(0), 40, 30, 2, 0.1)
    zeta = rpca.oracle_thresholds(p.Y, 2, p.X, 3, 0.5)
    A = jax.random.normal(jax.random.key(1), (60, 3)) / 4
    b = jnp.full(60, 0.3)
    newton = lambda w: regression.newton_solve(
        A, b, w, jnp.zeros(3), "exp", "exact", tol=1e-6
    ).x.sum()  # noqa: E731
    for f in (
        lambda e: rpca.lrpca(p.Y, 2, zeta, jnp.full(3, e), tol=1e-4).X.sum(),
        lambda e: rpca.scaledgd(p.Y, 2, 0.1, eta=e, max_iter=20, tol=1e-4).X.sum(),
        lambda e: rpca.altproj(p.Y * e, 2, tol=1e-4).X.sum(),
        newton,
    ):
        with pytest.raises(
            ValueError, match="Reverse-mode differentiation does not work for lax.while_loop"
        ):
            jax.jit(jax.grad(f))(0.5)
    h = 1e-2
    np.testing.assert_allclose(
        jax.jacfwd(newton)(0.5), (newton(0.5 + h) - newton(0.5 - h)) / (2 * h), rtol=2e-2
    )
    # The same calls with the documented way out differentiate.
    g = jax.grad(
        lambda e: rpca.lrpca(p.Y, 2, zeta, jnp.full(3, e), tol=1e-4, differentiable=True).X.sum()
    )(0.5)
    assert np.isfinite(float(g))


def test_run_fixed_and_run_until_count_from_start():
    """``start`` offsets the counter the step sees (solvers resume a run with it): the history is
    start, start + 1, … and the state sums them."""
    add = lambda k, s: (s + k, k)  # noqa: E731
    out = loop.run_fixed(add, jnp.int32(0), 4, start=7)
    np.testing.assert_array_equal(out.history, 7 + np.arange(4))
    assert int(out.state) == 7 + 8 + 9 + 10
    # A traced start, as run_until takes one (run_fixed failed with a ConcretizationTypeError).
    traced = jax.jit(lambda st: loop.run_fixed(add, jnp.int32(0), 4, start=st))(7)
    np.testing.assert_array_equal(traced.history, out.history)
    for differentiable in (False, True):
        until = loop.run_until(
            add,
            jnp.int32(0),
            max_iter=4,
            start=7,
            stop=lambda s, k: k == 8,
            differentiable=differentiable,
        )
        assert int(until.n_iter) == 2 and int(until.state) == 15
        np.testing.assert_array_equal(until.history[:2], [7, 8])


@pytest.mark.parametrize("differentiable", [False, True])
def test_a_stop_true_at_the_first_step_ends_the_run_there(differentiable):
    """Both drivers (while_loop and the differentiable scan) test the stop after every step, the
    first included."""
    out = loop.run_until(
        halving,
        jnp.float32(1.0),
        max_iter=5,
        stop=lambda s, d: d["value"] < 1.0,
        differentiable=differentiable,
    )
    assert int(out.n_iter) == 1 and float(out.state) == 0.5


@pytest.mark.parametrize("differentiable", [False, True])
def test_vmapped_run_until_keeps_a_point_stopped_when_its_stop_turns_false_again(differentiable):
    """A stop that holds at one step only (k == t): under vmap the batch goes on for the slower
    points, and a point that stopped must stay stopped (not restart once its stop is false
    again)."""
    step = lambda k, x: (x + 1.0, {"k": k})  # noqa: E731
    run = lambda t: loop.run_until(
        step,
        jnp.float32(0.0),
        max_iter=8,
        stop=lambda s, d: d["k"] == t,  # noqa: E731
        differentiable=differentiable,
    )
    ts = jnp.array([1, 5])
    batch = jax.jit(jax.vmap(run))(ts)
    for i, t in enumerate((1, 5)):
        one = run(t)
        assert int(batch.n_iter[i]) == int(one.n_iter) == t + 1
        assert float(batch.state[i]) == float(one.state) == t + 1


@pytest.mark.parametrize("differentiable", [False, True])
def test_progress_reports_reach_the_steps_taken_about_a_hundred_times(
    differentiable, recorded_bars
):
    """``progress=channel``: the bar open on that channel hears the iterations done, every
    ⌈max_iter / 100⌉ of them and at max_iter; a loop stopped early reports up to its last
    multiple; without a channel nothing is reported; the results are the same either way."""
    from lowrank_jax.progress import CompiledBar

    def step(k, x):
        return x * 0.9, {"x": x}

    def run(max_iter, tol, progress):
        return jax.jit(
            lambda x0: loop.run_until(
                step,
                x0,
                max_iter=max_iter,
                stop=lambda s, d: s < tol,
                differentiable=differentiable,
                progress=progress,
            )
        )(1.0)

    for max_iter, tol, n in (
        (250, 0.0, 250),
        (250, 0.5, 7),
        (1000, 1e-3, 66),
        (1000, 0.0, 1000),
        (7, 0.0, 7),
    ):
        with CompiledBar(max_iter, "t", "it", channel="test-loop"):
            res = run(max_iter, tol, "test-loop")
            jax.block_until_ready(res)
        assert int(res.n_iter) == n
        bar = recorded_bars[-1]
        every = -(-max_iter // 100)
        assert bar.n == (n if n == max_iter else n - n % every), (max_iter, tol, bar.n)
        assert len(bar.updates) <= 101
        plain = run(max_iter, tol, None)
        np.testing.assert_array_equal(np.asarray(plain.history["x"]), np.asarray(res.history["x"]))
    with CompiledBar(10, "t", "it", channel="test-loop"):
        jax.block_until_ready(run(10, 0.0, None))
    assert recorded_bars[-1].n == 0  # no channel: no callback was compiled
    with CompiledBar(10, "t", "it", channel="other"):
        jax.block_until_ready(run(10, 0.0, "test-loop"))
    assert recorded_bars[-1].n == 0  # another channel's bar does not move
    if differentiable:  # reports do not get in the way of reverse mode
        g = jax.grad(
            lambda x0: (
                loop.run_until(
                    step,
                    x0,
                    max_iter=5,
                    stop=lambda s, d: s < 0.0,
                    differentiable=True,
                    progress="test-loop",
                ).state
            )
        )(1.0)
        assert float(g) == pytest.approx(0.9**5)


def doubling(k, x):
    x = 2.0 * x
    return x, {"value": x}


@pytest.mark.parametrize("differentiable", [False, True])
def test_status_and_final_diagnostics_of_run_until(differentiable):
    from lowrank_jax import Status

    def run(x, t):
        return loop.run_until(
            doubling,
            x,
            max_iter=8,
            stop=lambda s, d: d["value"] > t,
            diverged=lambda s, d: ~jnp.isfinite(s) | (s > 1e3),
            differentiable=differentiable,
        )

    xs = jnp.array([1.0, 1.0, 300.0, jnp.inf], jnp.float32)
    ts = jnp.array([10.0, 1e6, 1e6, 1e6], jnp.float32)
    out = jax.jit(jax.vmap(run))(xs, ts)
    # converges after 4 doublings (16 > 10); runs out (2^8 = 256 < 1e6); diverges past 1e3 after 2
    # doublings (1200), before the tolerance could fire; non-finite at once
    assert np.asarray(out.status).tolist() == [
        Status.CONVERGED,
        Status.MAX_ITER,
        Status.DIVERGED,
        Status.DIVERGED,
    ]
    np.testing.assert_array_equal(out.n_iter, [4, 8, 2, 1])
    np.testing.assert_array_equal(out.final["value"], [16.0, 256.0, 1200.0, np.inf])
    for i in range(4):  # the final diagnostics are the last written history row
        np.testing.assert_array_equal(
            out.final["value"][i], out.history["value"][i, int(out.n_iter[i]) - 1]
        )


def test_divergence_wins_over_convergence_and_a_nan_diagnostic_is_divergence():
    from lowrank_jax import Status

    # the stop fires at the same step as the divergence rule: DIVERGED, not CONVERGED
    out = loop.run_until(
        doubling,
        jnp.float32(1.0),
        max_iter=10,
        stop=lambda s, d: s > 3.0,
        diverged=lambda s, d: s > 3.0,
    )
    assert int(out.status) == Status.DIVERGED and int(out.n_iter) == 2
    # a NaN diagnostic with a finite iterate: the tolerance could never be met
    step = lambda k, x: (x, {"residual": jnp.float32(jnp.nan)})  # noqa: E731
    out = loop.run_until(
        step,
        jnp.float32(1.0),
        max_iter=10,
        stop=lambda s, d: d["residual"] < 1e-3,
        diverged=lambda s, d: jnp.asarray(False),
    )
    assert int(out.status) == Status.DIVERGED and int(out.n_iter) == 1
    # without a divergence rule nothing is judged (inner loops of solvers)
    out = loop.run_until(step, jnp.float32(1.0), max_iter=3, stop=lambda s, d: d["residual"] < 1e-3)
    assert int(out.status) == Status.MAX_ITER and int(out.n_iter) == 3


def test_run_fixed_status_final_and_invalid():
    from lowrank_jax import Status

    out = loop.run_fixed(doubling, jnp.float32(1.0), 5, diverged=lambda s, d: s > 10.0)
    assert int(out.status) == Status.DIVERGED  # 16 and 32 passed the bound; the scan ran on
    assert float(out.final["value"]) == 32.0 and int(out.n_iter) == 5
    out = loop.run_fixed(doubling, jnp.float32(1.0), 5, diverged=lambda s, d: s > 100.0)
    assert int(out.status) == Status.MAX_ITER
    out = jax.vmap(lambda bad: loop.run_fixed(doubling, jnp.float32(1.0), 3, invalid=bad))(
        jnp.array([False, True])
    )
    assert np.asarray(out.status).tolist() == [Status.MAX_ITER, Status.INVALID]
    assert float(out.state[0]) == 8.0 and np.isnan(out.state[1])
    empty = loop.run_until(doubling, jnp.float32(1.0), max_iter=0, stop=lambda s, d: s > 0)
    assert int(empty.status) == Status.MAX_ITER and np.isnan(empty.final["value"])
