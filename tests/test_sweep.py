"""lowrank_jax.sweep: the grid, and for every family a sweep that equals the loop of single runs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lowrank_jax import Status, sweep


def _loop(fn, points):
    n = len(jax.tree.leaves(points)[0])
    outs = [fn(**jax.tree.map(lambda x, i=i: x[i], points)) for i in range(n)]
    return jax.tree.map(lambda *xs: jnp.stack(xs), *outs)


def _assert_close(a, b, rtol, atol=0.0):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def test_grid_is_the_cartesian_product_first_axis_slowest():
    import itertools

    a, b, c = [0.1, 0.2, 0.3], [1.0, 2.0], [5, 6]
    pts = sweep.grid(a=a, b=b, c=c)
    expect = np.array(list(itertools.product(a, b, c)))
    got = np.stack([np.asarray(pts["a"]), np.asarray(pts["b"]), np.asarray(pts["c"])], 1)
    np.testing.assert_allclose(got, expect)
    assert sweep.shape_of(a=a, b=b, c=c) == (3, 2, 2)
    keys = sweep.grid(x=[1.0, 2.0], key=sweep.keys(0, 3))["key"]
    assert keys.shape == (6,)
    # the key axis cycles fastest: points 0 and 3 share the first key
    assert np.array_equal(jax.random.key_data(keys[0]), jax.random.key_data(keys[3]))


def test_one_cpu_device_hint_is_given_once_and_only_when_devices_is_left_out(monkeypatch):
    """On JAX's single CPU device of a multi-core machine the first default sweep says how to use
    every core; it says so once per process, and never when the caller names the devices."""
    import warnings

    monkeypatch.setattr(sweep, "_hinted_one_cpu_device", False)
    monkeypatch.setattr(sweep.os, "cpu_count", lambda: 4)
    one = jax.devices("cpu")[:1]  # a CPU device also where an accelerator is JAX's default
    monkeypatch.setattr(sweep.jax, "devices", lambda *a: one)
    pts, f = {"a": jnp.arange(3.0)}, lambda a: a * a
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(sweep.run(f, pts, devices=one), [0.0, 1.0, 4.0])
    with pytest.warns(
        UserWarning,
        match=r"one CPU device, so this sweep runs on about one of the 4 cores.*"
        r"jax_num_cpu_devices', 4\)",
    ) as said:
        sweep.run(f, pts)
    assert said[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sweep.run(f, pts)


def test_run_equals_loop_chunked_or_not():
    pts = sweep.grid(a=jnp.linspace(0, 1, 5), key=sweep.keys(1, 3))

    def f(a, key):
        return {"v": a * jax.random.normal(key, (4,)), "s": jnp.sin(a)}

    ref = _loop(f, pts)
    _assert_close(sweep.run(f, pts), ref, 1e-6)
    _assert_close(sweep.run(f, pts, chunk=4), ref, 1e-6)  # 15 points in chunks of 4


@pytest.mark.parametrize("chunk", [None, 2, 5])
def test_zero_size_outputs_keep_their_batched_shape(chunk):
    """An output leaf with no elements (an empty history, a rank-0 factor) comes back with the point
    axis in front, chunked or not; lax.map's chunking alone cannot reshape such a leaf."""
    pts = sweep.grid(a=jnp.linspace(0.0, 1.0, 5))

    def f(a):
        return {"empty": jnp.zeros((0, 3), jnp.int32), "v": jnp.stack([a, a**2]), "s": jnp.cos(a)}

    out = sweep.run(f, pts, chunk=chunk, devices=jax.devices()[:1])
    assert out["empty"].shape == (5, 0, 3) and out["empty"].dtype == jnp.int32
    _assert_close(
        {k: out[k] for k in ("v", "s")},
        {k: v for k, v in _loop(f, pts).items() if k != "empty"},
        1e-6,
    )
    only_empty = sweep.run(lambda a: jnp.zeros((0, 2)), pts, chunk=chunk, devices=jax.devices()[:1])
    assert only_empty.shape == (5, 0, 2)


def test_shared_data_is_passed_not_swept():
    data = jnp.arange(6.0).reshape(2, 3)
    pts = {"a": jnp.array([1.0, 2.0, 3.0])}
    out = sweep.run(lambda a, M: a * M, pts, shared={"M": data})
    assert out.shape == (3, 2, 3)
    np.testing.assert_allclose(np.asarray(out[2]), 3.0 * np.asarray(data))
    with pytest.raises(ValueError, match="both swept and shared"):
        sweep.run(lambda a: a, pts, shared={"a": 1.0})


def test_shared_lists_of_numbers_are_arrays_and_other_pytrees_stay_as_they_are():
    """A list of numbers in shared reached the function as separate traced scalars, and a solver
    refused it ("Y must be an array, got list") though it takes the same list called directly."""
    from lowrank_jax import rpca
    from lowrank_jax.datasets import rpca as rdata

    p = rdata.rpca_problem(jax.random.key(0), 20, 20, 2, 0.1)
    f = lambda eta, Y: rpca.scaledgd(Y, 2, 0.1, eta=eta, max_iter=3).X  # noqa: E731
    pts = {"eta": jnp.array([0.4, 0.6])}
    listed = sweep.run(f, pts, shared={"Y": np.asarray(p.Y).tolist()}, devices=jax.devices()[:1])
    np.testing.assert_allclose(
        listed, sweep.run(f, pts, shared={"Y": p.Y}, devices=jax.devices()[:1]), rtol=1e-6
    )
    # a list of arrays is a pytree the function indexes: kept as a list
    out = sweep.run(
        lambda a, ws: a * ws[0] + ws[1],
        {"a": jnp.ones(2)},
        shared={"ws": [jnp.ones(3), 2.0]},
        devices=jax.devices()[:1],
    )
    np.testing.assert_allclose(out, np.full((2, 3), 3.0))
    with pytest.raises(ValueError, match="shared must be a dict"):
        sweep.run(f, pts, shared=[p.Y])
    import types  # any mapping is a dict of shared data

    np.testing.assert_allclose(
        sweep.run(f, pts, shared=types.MappingProxyType({"Y": p.Y}), devices=jax.devices()[:1]),
        listed,
        rtol=1e-6,
    )


def test_run_rejects_bad_points():
    with pytest.raises(ValueError, match="same number of points"):
        sweep.run(lambda a, b: a + b, {"a": jnp.ones(3), "b": jnp.ones(4)})
    with pytest.raises(ValueError, match="leading axis"):
        sweep.run(lambda a: a, {"a": jnp.float32(1.0)})
    with pytest.raises(ValueError, match="non-empty dict"):
        sweep.run(lambda: 0, {})
    with pytest.raises(ValueError, match="chunk"):
        sweep.run(lambda a: a, {"a": jnp.ones(3)}, chunk=0)
    with pytest.raises(ValueError, match="empty"):
        sweep.grid(a=[])
    with pytest.raises(ValueError, match="'a' is None"):
        sweep.grid(a=None, b=[1.0])
    one = jax.devices()[0]
    with pytest.raises(ValueError, match="more than once"):
        sweep.run(lambda a: a, {"a": jnp.ones(3)}, devices=[one, one])
    with pytest.raises(ValueError, match="devices is empty"):
        sweep.run(lambda a: a, {"a": jnp.ones(3)}, devices=[])
    for bad in ("cpu", [0, 1]):
        with pytest.raises(ValueError, match="devices must"):
            sweep.run(lambda a: a, {"a": jnp.ones(3)}, devices=bad)


def test_run_compiles_once_per_function():
    traces = []

    def f(a):
        traces.append(1)
        return a * 2

    sweep.run(f, {"a": jnp.arange(4.0)})
    sweep.run(f, {"a": jnp.arange(4.0) + 1})
    assert len(traces) == 1


def test_one_cpu_device_on_many_cores_is_hinted_once(monkeypatch):
    import warnings

    monkeypatch.setattr(sweep, "_hinted_one_cpu_device", False)
    monkeypatch.setattr(sweep.os, "cpu_count", lambda: 4)
    one_cpu = [jax.devices("cpu")[0]]
    monkeypatch.setattr(sweep.jax, "devices", lambda *a: one_cpu)
    f = lambda a: a + 1  # noqa: E731
    with pytest.warns(UserWarning, match="jax_num_cpu_devices', 4"):
        out = sweep.run(f, {"a": jnp.arange(3.0)})
    np.testing.assert_array_equal(out, [1.0, 2.0, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sweep.run(f, {"a": jnp.arange(3.0)})  # once per process
        monkeypatch.setattr(sweep, "_hinted_one_cpu_device", False)
        sweep.run(f, {"a": jnp.arange(3.0)}, devices=one_cpu)  # explicit devices: no hint
        monkeypatch.setattr(sweep.os, "cpu_count", lambda: 1)
        sweep.run(f, {"a": jnp.arange(3.0)})  # one core: nothing to gain


# ---- one sweep per family ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def rpca_problem():
    from lowrank_jax.datasets import rpca as data

    return data.rpca_problem(jax.random.key(3), 80, 60, 3, 0.1)


def test_sweep_scaledgd_alpha_eta(rpca_problem):
    from lowrank_jax import rpca

    pts = sweep.grid(alpha=jnp.array([0.1, 0.2]), eta=jnp.array([0.4, 0.7]))

    def f(alpha, eta, Y=rpca_problem.Y):
        res = rpca.scaledgd(Y, 3, alpha, eta=eta, max_iter=15, key=jax.random.key(0))
        return res.X, res.residual

    _assert_close(sweep.run(f, pts, shared={"Y": rpca_problem.Y}), _loop(f, pts), 2e-4, 1e-5)


def test_sweep_lrpca_zeta_scale_eta(rpca_problem):
    from lowrank_jax import rpca

    Y = rpca_problem.Y
    p = rpca.pretrained(0.1)
    pts = sweep.grid(scale=jnp.array([0.5, 1.0, 2.0]), eta=jnp.array([0.5, 0.8]))

    def f(scale, eta):
        res = rpca.lrpca(Y, 3, p.zeta * scale, jnp.full_like(p.eta, eta), key=jax.random.key(0))
        return res.X

    _assert_close(sweep.run(f, pts), _loop(f, pts), 2e-4, 1e-5)


def test_sweep_newton_weight_and_sketch_size():
    from lowrank_jax import regression as rg

    with jax.enable_x64(True):
        k1, k2 = jax.random.split(jax.random.key(4))
        A = jax.random.normal(k1, (400, 6), jnp.float64) / 20
        b = jax.random.dirichlet(k2, jnp.ones(400, jnp.float64))
        pts = sweep.grid(w=jnp.array([4.0, 6.0]), rows=jnp.array([40, 120, 200]))

        def f(w, rows):
            r = rg.newton_solve(
                A,
                b,
                w,
                jnp.zeros(6),
                "exp",
                "sketch",
                max_iter=4,
                sketch_size=200,
                sketch_rows=rows,
                key=jax.random.key(1),
            )
            return r.x, r.loss

        swept = sweep.run(f, pts)
        _assert_close(swept, _loop(f, pts), 1e-10, 1e-14)
        # rows = sketch_size uses every draw: the same as leaving sketch_rows out
        full = rg.newton_solve(
            A,
            b,
            4.0,
            jnp.zeros(6),
            "exp",
            "sketch",
            max_iter=4,
            sketch_size=200,
            key=jax.random.key(1),
        )
        np.testing.assert_allclose(np.asarray(swept[0][2]), np.asarray(full.x), rtol=1e-12)
        with pytest.raises(ValueError, match="sketch_rows"):
            rg.newton_solve(
                A, b, 4.0, jnp.zeros(6), "exp", "sketch", sketch_size=200, sketch_rows=201
            )


def test_sweep_pathnorm_lambda_lr(x64):
    """In float64: float32 SGD amplifies the rounding in which a batched program and the single runs
    may differ (to 2e-4 here, and past it at another XLA optimisation level), which would hide a
    real difference; in float64 they agree to 1e-13."""
    from lowrank_jax import pathnorm

    rng = np.random.default_rng(0)
    X = rng.random((200, 12))
    y = (X[:, 0] > 0.5).astype(np.int32)
    pts = sweep.grid(lr=jnp.array([0.05, 0.2]), lam=jnp.array([1e-3, 1e-2]))

    def f(lr, lam):
        r = pathnorm.train(
            X,
            y,
            reg="path",
            method="prox",
            lr=lr,
            lam=lam,
            epochs=2,
            batch=20,
            hidden=8,
            logs_per_epoch=2,
            outputs=2,
            key=jax.random.key(0),
        )
        return r.loss, r.model.hidden.weight, r.model.out.weight

    out = sweep.run(f, pts)
    assert out[1].dtype == jnp.float64
    _assert_close(out, _loop(f, pts), 1e-10, 1e-14)


def test_sweep_sdl_xi_lambda_lr():
    from lowrank_jax import sdl

    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 24)).astype(np.float32).T / 6  # 24 samples × 40 features
    y = np.arange(24) % 2
    pts = sweep.grid(
        xi=jnp.array([0.1, 1.0]), lam=jnp.array([1e-3, 1e-2]), lr=jnp.array([0.2, 0.4])
    )

    def f(xi, lam, lr):
        return sdl.fit(X, y, 2, xi=xi, lam=lam, lr=lr, max_iter=30, tol=None).theta

    # θ's entries reach 1.8; a batched float32 program on a GPU rounds differently from the single
    # runs, up to 5.6e-6 on entries near 0 (an H200), hence the absolute tolerance.
    _assert_close(sweep.run(f, pts), _loop(f, pts), 2e-4, 1e-5)


def test_sweep_covariance_lr_eps(x64):
    """In float64, as the path-norm sweep: equal to 1e-10, not to a float32 tolerance (in float32
    the two differ by 5e-6 relative here)."""
    from lowrank_jax import covariance as cv

    rng = np.random.default_rng(2)
    M = rng.standard_normal((12, 2))
    Sigma = M @ M.T + np.eye(12)
    pts = sweep.grid(lr=jnp.array([1e-3, 3e-3]), eps=jnp.array([1e-2, 1e-1]))

    def f(lr, eps):
        r = cv.decompose(
            Sigma,
            2,
            hidden=(16, 8),
            loss="huber",
            eps=eps,
            lr=lr,
            max_iter=40,
            tol=None,
            key=jax.random.key(0),
        )
        return r.M, r.loss

    out = sweep.run(f, pts)
    assert out[0].dtype == jnp.float64
    _assert_close(out, _loop(f, pts), 1e-10, 1e-14)


# ---- a diverging point: DIVERGED with throw=False, the others alone; an error with throw=True ----


@pytest.mark.parametrize("family", ["covariance", "scaledgd", "newton-sketch", "pathnorm", "sdl"])
def test_a_diverging_point_reports_diverged_in_the_sweep_and_raises_with_throw(
    family, rpca_problem
):
    """One hyperparameter value makes the run diverge. With ``throw=True`` (the default) the run
    raises, called directly and inside the sweep alike; with ``throw=False`` the sweep reports
    ``Status.DIVERGED`` at that point only, and the other point equals its single run."""
    if family == "covariance":
        from lowrank_jax import covariance as cv

        rng = np.random.default_rng(2)
        M = rng.standard_normal((12, 2))
        Sigma = (M @ M.T + np.eye(12)).astype(np.float32)
        pts = {"lr": jnp.array([1e-3, 1e4])}

        def f(lr, throw=True):
            return cv.decompose(
                Sigma,
                2,
                hidden=(16, 8),
                optimizer="gd",
                lr=lr,
                max_iter=30,
                tol=None,
                key=jax.random.key(0),
                throw=throw,
            )

        field, match = "M", "lower lr"
    elif family == "scaledgd":
        from lowrank_jax import rpca

        Y = jax.random.normal(jax.random.key(1), (30, 30))
        pts = {"eta": jnp.array([0.5, 50.0])}

        def f(eta, throw=True):
            return rpca.scaledgd(
                Y, 2, 0.1, eta=eta, max_iter=30, key=jax.random.key(0), throw=throw
            )

        field, match = "X", "the step eta is too large"
    elif family == "sdl":
        from lowrank_jax import sdl

        rng = np.random.default_rng(1)
        X = rng.standard_normal((40, 12)).astype(np.float32).T  # 12 samples × 40 features
        y = np.arange(12) % 2
        pts = {"lr": jnp.array([0.2, 100.0])}

        def f(lr, throw=True):
            return sdl.fit(X / 6, y, 2, lr=lr, max_iter=20, tol=None, throw=throw)

        field, match = "theta", "lr is too large"
    elif family == "pathnorm":
        from lowrank_jax import pathnorm

        rng = np.random.default_rng(0)
        X = rng.random((200, 8)).astype(np.float32)
        y = (X[:, :4].sum(1) > X[:, 4:].sum(1)).astype(np.int32)
        pts = {"lr": jnp.array([0.1, 1e6])}

        def f(lr, throw=True):
            return pathnorm.train(
                X,
                y,
                reg="path",
                method="sgd",
                lr=lr,
                lam=1e-3,
                epochs=1,
                batch=10,
                hidden=4,
                outputs=2,
                throw=throw,
                key=jax.random.key(0),
            )

        field, match = "model.out.weight", "lower lr"
    else:
        from lowrank_jax import regression as rg

        A = jax.random.normal(jax.random.key(3), (200, 5)) / 4
        b = jax.random.dirichlet(jax.random.key(4), jnp.ones(200))
        # at x = 0, D = B_diag + w² has negative entries for w = 1 (Lemma 6.4 fails), none for w = 2
        assert float(rg.diagonal_curvature(jnp.zeros(5), A, b, 1.0, "exp").min()) < 0
        assert float(rg.diagonal_curvature(jnp.zeros(5), A, b, 2.0, "exp").min()) > 0
        pts = {"w": jnp.array([2.0, 1.0])}

        def f(w, throw=True):
            return rg.newton_solve(A, b, w, jnp.zeros(5), "exp", "sketch", max_iter=8, throw=throw)

        field, match = "x", "Lemma 6.4"

    def pick(result):
        for part in field.split("."):
            result = getattr(result, part)
        return result

    good = {k: v[0] for k, v in pts.items()}
    bad = {k: v[1] for k, v in pts.items()}
    with pytest.raises(RuntimeError, match=match):
        f(**bad)
    with pytest.raises(RuntimeError, match=match):
        jax.block_until_ready(sweep.run(lambda **h: pick(f(**h)), pts, devices=jax.devices()))
    out = sweep.run(lambda **h: f(**h, throw=False), pts, devices=jax.devices())
    assert np.asarray(out.status).tolist()[1] == Status.DIVERGED
    assert int(out.status[0]) != Status.DIVERGED and np.isfinite(np.asarray(pick(out))[0]).all()
    np.testing.assert_allclose(
        np.asarray(pick(out))[0], np.asarray(pick(f(**good))), rtol=2e-4, atol=1e-5
    )


# ---- progress ------------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [None, 2])
def test_progress_counts_every_point_once_and_changes_nothing(chunk, monkeypatch, recorded_bars):
    """progress=True: the bar (advanced by callbacks from inside the compiled program) ends at the
    number of points, is closed, and the results equal the silent sweep's."""
    from lowrank_jax import progress

    bars = recorded_bars
    # The counts the compiled program sends (the bar's final top-up to the total must not hide a
    # lost callback).
    sent = []
    advance = progress.CompiledBar.advance
    monkeypatch.setattr(
        progress.CompiledBar,
        "advance",
        classmethod(
            lambda cls, c, channel="default": (
                sent.append(int(np.sum(np.asarray(c)))),
                advance(c, channel=channel),
            )
        ),
    )

    # The first output is empty, so the count must tie itself to a later one.
    def f(a, b):
        return jnp.zeros((0,)), jax.lax.fori_loop(0, 5, lambda i, x: jnp.sin(x) + b, a), a * b

    pts = sweep.grid(a=jnp.linspace(0.0, 1.0, 3), b=jnp.array([0.5, 1.5]))
    quiet = sweep.run(f, pts, chunk=chunk, devices=jax.devices()[:1])
    loud = sweep.run(f, pts, chunk=chunk, devices=jax.devices()[:1], progress=True)
    _assert_close(loud, quiet, 0.0)
    (rec,) = bars
    assert rec.total == 6 and rec.n == 6 and rec.closed and sum(sent) == 6
    assert progress.CompiledBar.current("sweep") is None
    # The first non-empty output does not depend on the point: the count was unbatched and the bar
    # ended at 1 (vmap) or 3 (chunks of 2). The count is now tied to the point as well.
    bars.clear()
    sent.clear()
    sweep.run(
        lambda a, b: (jnp.ones(2), a * b),
        pts,
        chunk=chunk,
        devices=jax.devices()[:1],
        progress=True,
    )
    (rec,) = bars
    assert rec.total == 6 and rec.n == 6 and sum(sent) == 6


def test_bound_methods_answer_for_their_own_instance():
    """The compiled program is cached on the function; a bound method's function is shared by all
    instances, so caching there returned the first instance's results for every other one."""

    class Scale:
        def __init__(self, c):
            self.c = c

        def f(self, a):
            return a * self.c

    pts = {"a": jnp.arange(3.0)}
    one = jax.devices()[:1]
    np.testing.assert_array_equal(sweep.run(Scale(1.0).f, pts, devices=one), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(sweep.run(Scale(2.0).f, pts, devices=one), [0.0, 2.0, 4.0])


def test_a_tuple_of_stacked_arrays_is_one_axis():
    """A tuple of arrays whose leading axes agree is a pytree axis (as a dict is), not a list of
    numbers to stack: 3 stacked (W, b) pairs are 3 points (it gave 2, one per tuple entry)."""
    W, b = jnp.arange(12.0).reshape(3, 4), jnp.arange(3.0)
    f = lambda p: jnp.sum(p[0]) + p[1]
    out = sweep.run(f, {"p": (W, b)}, devices=jax.devices()[:1])
    np.testing.assert_allclose(out, [W[i].sum() + b[i] for i in range(3)])
    assert sweep.grid(p=(W, b), s=[1.0, 2.0])["p"][0].shape == (6, 4)
    assert sweep.run(
        lambda x: x * 2,
        {"x": [[1.0, 2.0], [3.0, 4.0]]},
        chunk=np.int64(1),
        devices=jax.devices()[:1],
    ).shape == (2, 2)  # nested numbers: one array


def test_a_list_of_arrays_has_one_point_per_element():
    """[w1, w2, w3] (three weight vectors of length 4) is three points; it was read as a pytree of
    three leaves with 4 points, each point a list of three numbers. Lists of pytrees stack leaf by
    leaf; elements of different shapes are refused by name."""
    ws = [jnp.arange(4.0) + i for i in range(3)]
    out = sweep.run(
        lambda w, c: jnp.sum(w) * c, sweep.grid(w=ws, c=[1.0, 10.0]), devices=jax.devices()[:1]
    )
    np.testing.assert_allclose(out, [float(jnp.sum(w)) * c for w in ws for c in (1.0, 10.0)])
    pairs = [{"W": jnp.full((2, 3), float(i)), "b": jnp.array(float(i))} for i in range(4)]
    g = sweep.grid(p=pairs)
    assert g["p"]["W"].shape == (4, 2, 3) and g["p"]["b"].shape == (4,)
    assert sweep.shape_of(w=ws, p=pairs) == (3, 4)
    with pytest.raises(ValueError, match="one point per element"):
        sweep.grid(w=[jnp.ones(4), jnp.ones(5)])
    # Pytrees whose leaves are all scalars too: a list of dicts, or of (key, value) pairs, failed as
    # an object array ("dtype object is not a valid JAX array type") or in jnp.stack.
    configs = [{"lr": 0.1, "lam": 1.0}, {"lr": 0.2, "lam": 2.0}]
    out = sweep.run(lambda p: p["lr"] * p["lam"], {"p": configs}, devices=jax.devices()[:1])
    np.testing.assert_allclose(out, [0.1, 0.4], rtol=1e-6)
    keyed = sweep.grid(p=[(jax.random.key(0), 1.0), (jax.random.key(1), 2.0)])["p"]
    assert keyed[0].shape == (2,) and jnp.issubdtype(keyed[0].dtype, jax.dtypes.prng_key)
    np.testing.assert_array_equal(keyed[1], [1.0, 2.0])


def test_a_list_of_numpy_scalars_or_single_keys_is_one_axis():
    """list(np.linspace(...)) (NumPy scalars), 0-d arrays and single keys were taken for a pytree of
    arrays without a leading axis and refused; they are points, like plain numbers."""
    etas = list(np.linspace(0.1, 1.0, 3))
    g = sweep.grid(eta=etas, k=[np.int64(1), np.int64(2)])
    np.testing.assert_allclose(g["eta"], np.repeat(np.linspace(0.1, 1.0, 3), 2), rtol=1e-6)
    np.testing.assert_array_equal(g["k"], [1, 2] * 3)
    out = sweep.run(
        lambda x: x * 2, {"x": (jnp.array(1.0), jnp.array(3.0))}, devices=jax.devices()[:1]
    )
    np.testing.assert_allclose(out, [2.0, 6.0])
    keys = [jax.random.key(0), jax.random.key(1)]
    draws = sweep.run(lambda key: jax.random.normal(key), {"key": keys}, devices=jax.devices()[:1])
    np.testing.assert_allclose(draws, [jax.random.normal(k) for k in keys], rtol=1e-6)


def test_keys_refuses_a_bad_count_or_key_by_name():
    """A count that is not an integer ≥ 1, or a key that is neither a key nor an integer seed, is
    refused by name. Valid ones give count distinct keys, a traced seed too."""
    keys = sweep.keys(np.int64(0), 3)
    assert keys.shape == (3,)
    np.testing.assert_array_equal(jax.random.key_data(keys), jax.random.key_data(sweep.keys(0, 3)))
    assert len({tuple(np.asarray(jax.random.key_data(k))) for k in keys}) == 3
    np.testing.assert_array_equal(
        jax.random.key_data(jax.jit(lambda s: sweep.keys(s, 3))(0)), jax.random.key_data(keys)
    )
    for count in (-1, 0, 2.0, True):
        with pytest.raises(ValueError, match="count"):
            sweep.keys(0, count)
    for seed in (1.5, "0", True):
        with pytest.raises(TypeError, match="seed"):
            sweep.keys(seed, 2)


def test_compiled_bar_sums_counts_takes_the_largest_done_and_stops_at_the_total(recorded_bars):
    """The callbacks' arithmetic, called as a batched callback would: ``advance`` adds the sum of a
    batch of counts, ``reach`` moves to the largest of a batch of done counts (never back), neither
    passes the total, ``finish`` shows the whole total, and callbacks after the ``with`` block (no
    bar open) are ignored."""
    from lowrank_jax import progress

    bars = recorded_bars
    with progress.CompiledBar(10, "test", "step"):
        (rec,) = bars
        progress.CompiledBar.advance(np.array([1, 1, 1]))
        assert rec.n == 3
        progress.CompiledBar.reach(np.array([2, 5, 4]))
        assert rec.n == 5
        progress.CompiledBar.reach(np.int32(4))  # behind the bar: no move back
        assert rec.n == 5 and all(k > 0 for k in rec.updates)
        progress.CompiledBar.advance(np.array([4, 4]))  # 13 > 10: stops at the total
        assert rec.n == 10
        progress.CompiledBar.reach(np.array([12]))
        assert rec.n == 10
    assert rec.closed and progress.CompiledBar.current() is None
    progress.CompiledBar.advance(np.array([1]))  # no bar open: ignored
    assert rec.n == 10
    with progress.CompiledBar(7, "test", "step") as cb:
        progress.CompiledBar.advance(np.array(2))
        cb.finish()
        assert bars[-1].n == 7


def test_nested_bars_keep_to_their_channels(recorded_bars):
    """One global slot held the open bar: any bar closing inside a sweep's traced function (a
    pathnorm.train(progress=False) bar, even unshown) left no bar open, and the sweep's bar stayed
    at 0 until its final top-up; a training bar's epoch callbacks would have moved the sweep's bar
    of points. Now bars stack per channel, a hidden bar takes no callbacks, and closing a bar
    reopens the one around it."""
    from lowrank_jax import progress

    with progress.CompiledBar(3, "outer", "point", channel="sweep") as outer:
        with progress.CompiledBar(5, "inner", "epoch", show=False, channel="training"):
            progress.CompiledBar.reach(np.array([4]), channel="training")  # no shown training bar
        with progress.CompiledBar(5, "inner", "epoch", channel="training") as inner:
            progress.CompiledBar.reach(np.array([4]), channel="training")
            assert inner.bar.n == 4 and outer.bar.n == 0
        progress.CompiledBar.advance(np.ones(1), channel="sweep")
        assert outer.bar.n == 1
        with progress.CompiledBar(2, "same channel", "point", channel="sweep") as nested:
            progress.CompiledBar.advance(np.ones(1), channel="sweep")
            assert nested.bar.n == 1 and outer.bar.n == 1
        progress.CompiledBar.advance(np.ones(1), channel="sweep")
        assert outer.bar.n == 2
    assert (
        progress.CompiledBar.current("sweep") is None
        and progress.CompiledBar.current("training") is None
    )


def test_sweep_of_a_wrapped_function_is_not_answered_from_the_wrapped_ones_programs():
    """The compiled programs were cached in fn.__dict__, which functools.wraps copies into a
    wrapper: a sweep of the wrapper (2·f) returned f's values. The cache entry now names its
    function."""
    import functools

    def doubled(fn):
        @functools.wraps(fn)
        def wrapper(**kw):
            return 2 * fn(**kw)

        return wrapper

    def f(a):
        return a

    pts = {"a": jnp.array([1.0, 2.0, 3.0])}
    one = jax.devices()[:1]
    np.testing.assert_array_equal(sweep.run(f, pts, devices=one), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(sweep.run(doubled(f), pts, devices=one), [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(sweep.run(f, pts, devices=one), [1.0, 2.0, 3.0])


def test_a_tuple_axis_is_a_pytree_of_stacked_leaves_also_when_they_are_lists():
    """The guide: a tuple is a pytree whose leaves are already stacked. A tuple of two 3-element
    lists became one (2, 3) array: 2 points of 3-vectors instead of 3 points of pairs. A tuple of
    plain numbers is still one axis of values."""
    f = lambda p: p[0] * p[1]
    one = jax.devices()[:1]
    stacked = sweep.run(
        f, {"p": (jnp.array([0.1, 0.2, 0.3]), jnp.array([1.0, 2.0, 3.0]))}, devices=one
    )
    np.testing.assert_allclose(
        sweep.run(f, {"p": ([0.1, 0.2, 0.3], [1.0, 2.0, 3.0])}, devices=one), stacked
    )
    g = sweep.grid(p=([0.1, 0.2, 0.3], [1.0, 2.0, 3.0]), q=[7, 8])
    assert jax.tree.map(jnp.shape, g) == {"p": ((6,), (6,)), "q": (6,)}
    np.testing.assert_allclose(
        sweep.run(lambda a: 2 * a, {"a": (1.0, 2.0, 3.0)}, devices=one), [2.0, 4.0, 6.0]
    )
    with pytest.raises(TypeError, match="progress must be True or False"):
        sweep.run(lambda a: a, {"a": jnp.ones(2)}, devices=one, progress="no")
