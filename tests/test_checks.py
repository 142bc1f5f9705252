"""lowrank_jax._checks: the boundary checks every solver runs, and the dtypes the boundary takes."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lowrank_jax import _checks


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
    # A traced seed (a jitted function of it, a sweep over seeds) is a seed too; it crashed inside
    # the solvers with "invalid PRNG key data".
    from lowrank_jax import datasets, rpca, sweep

    p = datasets.rpca_problem(jax.random.key(3), 40, 30, 2, 0.1)
    run = lambda key: rpca.altproj(p.Y, 2, max_iter=3, key=key).X  # noqa: E731  (randomized SVDs)
    # jit fuses: rounding only
    np.testing.assert_allclose(jax.jit(run)(3), run(3), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(
        sweep.run(run, {"key": jnp.arange(2)})[1], run(1), rtol=1e-4, atol=1e-6
    )


def test_what_is_neither_a_key_nor_a_seed_is_refused_by_name():
    """key=1.5 or "a" (or a float array) reached jax.random.split and failed with "JAX encountered
    invalid PRNG key data"; it now names key, in every function that takes one, and integer seeds
    work in the sketch functions as in newton_solve (they crashed there the same way)."""
    for bad in (1.5, "a", jnp.ones(2), np.float32(2.0), True):
        with pytest.raises(TypeError, match="key must be a jax.random key or an integer seed"):
            _checks.as_key(bad)
    raw = jax.random.PRNGKey(4)  # raw uint32 keys pass as they are
    assert _checks.as_key(raw) is raw
    from lowrank_jax.regression import sketch

    A = jnp.asarray(np.random.default_rng(0).normal(size=(40, 3)), jnp.float32)
    # the same draw: another seed moves every score by O(1); a GPU rounded the two (differently
    # fused) float32 programs apart by up to 1.3e-6
    np.testing.assert_allclose(
        sketch.approx_leverage_scores(7, A),
        sketch.approx_leverage_scores(jax.random.key(7), A),
        rtol=1e-5,
    )
    np.testing.assert_array_equal(
        sketch.sample_rows(2, jnp.ones(6), 4)[0],
        sketch.sample_rows(jax.random.key(2), jnp.ones(6), 4)[0],
    )
    np.testing.assert_allclose(
        sketch.sampled_gram(1, A, jnp.ones(40), 8),  # (2.6e-7 there)
        sketch.sampled_gram(jax.random.key(1), A, jnp.ones(40), 8),
        rtol=1e-5,
    )
    with pytest.raises(TypeError, match="key must be"):
        sketch.sample_rows(0.5, jnp.ones(6), 4)


def test_keys_of_the_wrong_shape_and_traced_ranks_are_refused_by_name():
    """key=np.array([1, 2, 3]) or an int32 (2,) array met JAX's "invalid PRNG key data", and a batch
    of keys "normal accepts a single key": none named key. A rank passed through sweep.run's shared
    values (traced) was "rank must be an integer, got JitTracer(...)" although the user passed
    one."""
    for bad in (
        np.array([1, 2, 3]),
        np.array([1, 2], np.int32),
        jnp.zeros((3, 2), jnp.uint32),
        np.zeros((2, 2), np.int64),
    ):
        with pytest.raises(TypeError, match="key must be a jax.random key, a raw uint32 key"):
            _checks.as_key(bad)
    with pytest.raises(TypeError, match="a batch of keys of shape"):
        _checks.as_key(jax.random.split(jax.random.key(0), 3))
    from lowrank_jax import datasets, rpca, sweep

    with pytest.raises(TypeError, match="key must"):
        datasets.rpca_problem(np.array([1, 2, 3]), 20, 20, 2, 0.1)
    raw = jax.random.PRNGKey(0)
    np.testing.assert_array_equal(
        datasets.rpca_problem(raw, 20, 20, 2, 0.1).Y, datasets.rpca_problem(raw, 20, 20, 2, 0.1).Y
    )
    Y = datasets.rpca_problem(jax.random.key(0), 20, 20, 2, 0.1).Y
    with pytest.raises(ValueError, match="rank must be a static Python integer"):
        sweep.run(
            lambda eta, Y, rank: rpca.scaledgd(Y, rank, 0.1, eta=eta, max_iter=2).X,
            {"eta": [0.5]},
            shared={"Y": Y, "rank": 2},
            devices=jax.devices()[:1],
        )
    from lowrank_jax import covariance

    with pytest.raises(ValueError, match=r"rank0 must satisfy 1 <= rank0 <= 2, got 3"):
        covariance.fpcp(np.eye(4), 2, rank0=3)


def test_num_classes_is_a_count_like_the_others():
    """num_classes=np.array(2) (or jnp.int32(2)) was refused as "not a positive integer"."""
    y = np.array([0, 1, 1, 0])
    for count in (2, np.int64(2), np.array(2), jnp.int32(2)):
        np.testing.assert_array_equal(_checks.class_labels(y, num_classes=count), y)
    for bad in (0, np.array(2.0), 1.5, True):
        with pytest.raises(ValueError, match="num_classes must be a positive integer"):
            _checks.class_labels(y, num_classes=bad)
    with pytest.raises(ValueError, match="labels must be in 0, …, 1"):
        _checks.class_labels(np.array([0, 2]), num_classes=np.array(2))


def _half_vs_single(run, *arrays):
    """run(*arrays) on float16 and bfloat16 inputs returns float32 and equals the run on the
    same values given in float32 (no LAPACK routine takes half precision)."""
    ref = run(*[a.astype(jnp.float32) for a in arrays])
    for half in (jnp.float16, jnp.bfloat16):
        got = run(*[a.astype(half) for a in arrays])
        for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
            assert g.dtype == r.dtype, (half, g.dtype, r.dtype)
            np.testing.assert_array_equal(np.asarray(g), np.asarray(r))


@pytest.mark.parametrize("family", ["sdl", "covariance", "regression", "pathnorm", "pathnorm_prox"])
def test_half_precision_inputs_run_in_float32_in_every_family(family):
    """A float16 / bfloat16 matrix crashed SDL, the covariance baselines and Newton inside LAPACK
    (NotImplementedError: Unsupported dtype float16); every matrix the boundary takes is now
    computed in float32, as robust PCA's Y already was. The data are exact in float16, so both runs
    see the same numbers."""
    key = jax.random.key(0)
    grid = lambda shape: jnp.round(4 * jax.random.normal(key, shape)) / 4  # exact in half precision
    if family == "sdl":
        from lowrank_jax import sdl

        y = np.arange(30) % 2
        _half_vs_single(
            lambda X: (sdl.fit(X, y, rank=2, model="H", xi=0.1, lam=0.01).W,), grid((30, 12))
        )
    elif family == "covariance":
        from lowrank_jax import covariance

        B = grid((10, 2))
        _half_vs_single(lambda S: covariance.fpcp(S, 2).L, B @ B.T + jnp.eye(10))
    elif family == "regression":
        from lowrank_jax import regression

        b = jnp.full(40, 0.5)
        _half_vs_single(
            lambda A: (
                regression.newton_solve(A, b, 1.0, jnp.zeros(5), "exp", "exact", max_iter=5).x
            ),
            grid((40, 5)) / 4,
        )
    elif family == "pathnorm":
        from lowrank_jax import pathnorm

        y = np.arange(40) % 3
        _half_vs_single(
            lambda X: (
                pathnorm.train(
                    X,
                    y,
                    reg="path",
                    method="prox",
                    lr=0.1,
                    lam=1e-3,
                    epochs=1,
                    batch=10,
                    hidden=8,
                    logs_per_epoch=1,
                    key=key,
                ).model
            ),
            jnp.abs(grid((40, 6))) / 8,
        )
    else:
        from lowrank_jax import pathnorm

        _half_vs_single(
            lambda W_in, W_out: pathnorm.path_norm_prox(W_in, W_out, strength=0.1),
            grid((6, 4)),
            grid((3, 6)),
        )


def test_a_scale_whose_sums_of_squares_overflow_or_underflow_is_refused_in_every_family():
    """In float32 a Y of order 1e-20 made every residual 0 (a run with tol stopped after one
    iteration, 4–43 % from the answer) and one of order 1e20 overflowed them; each family now names
    the range."""
    from lowrank_jax import covariance, datasets, rpca, sdl

    p = datasets.rpca_problem(jax.random.key(0), 60, 50, 3, 0.1)
    Sigma = jnp.eye(10) + 0.2
    X, y = np.random.default_rng(0).normal(size=(20, 16)).T, np.array([0, 1] * 8)
    for s in (1e-20, 1e20):
        for call in (
            lambda: rpca.scaledgd(p.Y * s, 3, 0.1, tol=1e-5),
            lambda: rpca.altproj(p.Y * s, 3),
            lambda: covariance.ialm(Sigma * s),
            lambda: sdl.fit(X * s, y, 2),
        ):
            with pytest.raises(ValueError, match=r"largest entry .* rescale"):
                call()
    # the bounds: √tiny / eps below, √(max / 4 n1 n2) above; zero and in-range matrices pass
    info = jnp.finfo(jnp.float32)
    low, high = float(np.sqrt(info.tiny) / info.eps), float(np.sqrt(info.max / (4 * 100)))
    for m, ok in (
        (0.0, True),
        (low * 1.01, True),
        (low * 0.99, False),
        (high * 0.99, True),
        (high * 1.01, False),
    ):
        x = jnp.full((10, 10), m, jnp.float32)
        if ok:
            _checks.check_scale(x, "x")
        else:
            with pytest.raises(ValueError, match="x's largest entry"):
                _checks.check_scale(x, "x")
    # results are scale-equivariant inside the range: 1e-11 and 1e14 give the scale-1 answer
    ref = rpca.altproj(p.Y, 3, max_iter=20)
    for s in (2.0**-36, 2.0**46):
        out = rpca.altproj(p.Y * s, 3, max_iter=20)
        np.testing.assert_allclose(np.asarray(out.X) / s, np.asarray(ref.X), rtol=1e-4, atol=1e-6)


def test_counts_take_every_integer_and_refuse_the_rest():
    """Counts (iterations, widths, ranks) come as Python or NumPy integers and as 0-d integer arrays
    (``np.array(8)``, ``jnp.int32(8)``, a value read back from a file); booleans, floats and tracers
    are refused by name."""
    for v in (8, np.int64(8), np.array(8), jnp.int32(8), np.uint8(8)):
        assert (
            _checks.check_positive_int(v, "iters") == 8
            and type(_checks.check_positive_int(v, "iters")) is int
        )
    for v in (True, np.bool_(True), 8.0, np.array(8.0), np.array([8]), "8", 0, np.array(-1)):
        with pytest.raises(ValueError, match="iters must be an integer >= 1"):
            _checks.check_positive_int(v, "iters")
    assert _checks.check_positive_int(0, "iters", minimum=0) == 0
    jax.jit(lambda n: _checks.as_int(n) is None or 1 / 0)(jnp.int32(3))  # a tracer is no count


def test_a_positive_value_that_underflows_is_called_an_underflow():
    """tol = 1e-50 rounds to 0 in float32 and was refused as "tol must be positive, got 0.0",
    which the user had not passed; the message now says the value underflows, as it already
    said for overflows."""
    with pytest.raises(ValueError, match=r"tol = 1e-50 underflows to 0 in float32"):
        _checks.as_hyper(1e-50, "tol", positive=True, dtype=jnp.float32)
    with pytest.raises(ValueError, match="tol must be positive, got 0.0"):
        _checks.as_hyper(0.0, "tol", positive=True, dtype=jnp.float32)
    from lowrank_jax import rpca

    with pytest.raises(ValueError, match="underflows"):
        rpca.scaledgd(jnp.eye(6), 2, 0.1, tol=1e-50)


def test_as_real_reads_every_concrete_real_scalar_and_nothing_else():
    """One rule, used by the checks of problem sizes, α's, scales and fractions: Python, NumPy and
    concrete 0-d JAX numbers read as Python floats (float64 exactly); the rest is None."""
    for value in (
        3,
        0.9,
        np.int64(3),
        np.float32(0.25),
        np.array(0.9),
        jnp.float32(0.25),
        jnp.int32(3),
    ):
        assert (
            _checks.as_real(value) == float(np.asarray(value))
            and type(_checks.as_real(value)) is float
        )
    assert _checks.as_real(np.nextafter(np.float64(0.1), 1)) == np.nextafter(0.1, 1)
    for value in (True, np.bool_(False), "0.5", 1j, np.ones(2), np.array([0.5]), None):
        assert _checks.as_real(value) is None
    # a tracer is not a value
    jax.jit(lambda x: np.testing.assert_equal(_checks.as_real(x), None) or x)(1.0)


def test_as_matrix_takes_an_empty_block_only_when_asked():
    """An SDL covariate block may have q = 0 rows; every other matrix must have entries."""
    assert _checks.as_matrix(np.zeros((0, 3), np.float32), "X_aux", min_rows=0).shape == (0, 3)
    for shape in ((0, 3), (3, 0)):
        with pytest.raises(ValueError, match="A must be non-empty"):
            _checks.as_matrix(np.zeros(shape), "A")
    with pytest.raises(ValueError, match="X_aux must be non-empty"):
        _checks.as_matrix(np.zeros((2, 0)), "X_aux", min_rows=0)
    with pytest.raises(TypeError, match="X_aux must hold numbers"):
        _checks.as_matrix(np.zeros((0, 3), dtype=object), "X_aux", min_rows=0)


def test_traced_hyperparameters_that_break_a_rule_become_nan():
    """Under jit/vmap a hyperparameter cannot raise; the entries that the concrete check would
    refuse come back as NaN, the others unchanged."""
    vals = jnp.array([-1.0, 0.0, 0.5, jnp.inf, jnp.nan])

    def f(positive, nonnegative, allow_inf):
        return jax.vmap(
            lambda v: _checks.as_hyper(
                v, "h", positive=positive, nonnegative=nonnegative, allow_inf=allow_inf
            )
        )(vals)

    nan = np.nan
    np.testing.assert_array_equal(f(False, True, False), [nan, 0.0, 0.5, nan, nan])
    np.testing.assert_array_equal(f(True, True, False), [nan, nan, 0.5, nan, nan])
    np.testing.assert_array_equal(f(False, True, True), [nan, 0.0, 0.5, np.inf, nan])
    np.testing.assert_array_equal(f(False, False, False), [-1.0, 0.0, 0.5, nan, nan])
    # The concrete values raise instead.
    for v in (-1.0, np.nan):
        with pytest.raises(ValueError, match="h"):
            _checks.as_hyper(v, "h")


def test_rank_is_bounded_by_the_smaller_dimension():
    """1 ≤ rank ≤ min(shape), for tall and wide shapes alike: min(shape) passes, min(shape) + 1
    (still ≤ the larger dimension) is refused with the bound named; a vector shape bounds by its
    length."""
    for shape in ((6, 4), (4, 6), (5, 5)):
        k = min(shape)
        assert _checks.check_rank(k, shape) == k and _checks.check_rank(1, shape) == 1
        with pytest.raises(
            ValueError, match=rf"1 <= rank <= {k} for shape \({shape[0]}, {shape[1]}\), got {k + 1}"
        ):
            _checks.check_rank(k + 1, shape)
        with pytest.raises(ValueError, match="got 0"):
            _checks.check_rank(0, shape)
    assert _checks.check_rank(3, (3,)) == 3
    with pytest.raises(ValueError, match="1 <= r <= 3, got 4"):
        _checks.check_rank(4, (3,), "r")


def test_conversions_that_would_overflow_or_wrap_are_refused_or_kept_exact():
    """float64 NumPy input checked finite and then narrowed to float32 (x64 off) became inf in the
    solvers (a 1e39 weight made the prox zero its row); an int64 hyperparameter of 2**32 went
    through int32 and wrapped to 0 (a threshold of 0); labels of 1e20 were cast to int64 first and
    reported as -9223372036854775808."""
    from lowrank_jax import _checks, pathnorm, prox

    if not jax.config.jax_enable_x64:
        with pytest.raises(ValueError, match="A overflows float32"):
            _checks.as_matrix(np.array([[1e39, 1.0], [1.0, 2.0]]), "A")
        with pytest.raises(ValueError, match="W_in overflows float32"):
            pathnorm.path_norm_prox(np.array([[1e39, 1.0]]), np.array([[1.0]]), strength=1e-3)
    np.testing.assert_allclose(_checks.as_hyper(np.int64(2**32), "t"), 2.0**32)
    x = jnp.array([-3.0, 0.5, 5.0])
    np.testing.assert_array_equal(prox.soft_threshold(x, np.int64(2**32 + 1)), jnp.zeros(3))
    with pytest.raises(ValueError, match="got 1e\\+20"):
        _checks.class_labels(np.array([0, 1e20]))


def test_as_real_reads_half_precision_scalars():
    """bfloat16's NumPy kind is 'V', so as_real returned None for jnp.bfloat16(0.5) and a bfloat16
    fraction skipped the concrete range checks that read it (an α of 1.5 was let through)."""
    from lowrank_jax import datasets

    for dt in (jnp.bfloat16, jnp.float16, jnp.float32):
        assert _checks.as_real(jnp.asarray(0.5, dt)) == 0.5
    assert _checks.as_real(jnp.asarray(True)) is None and _checks.as_real(jnp.ones(2)) is None
    with pytest.raises(ValueError, match="alpha"):
        datasets.rpca_problem(jax.random.key(0), 20, 20, 2, jnp.asarray(1.5, jnp.bfloat16))


def _closure_cases():
    from oracles import sparsify_top_fraction_topk

    from lowrank_jax import covariance as cv
    from lowrank_jax import prox, rpca, sdl
    from lowrank_jax.regression import hyperbolic as rg

    rng = np.random.default_rng(0)
    X64 = rng.standard_normal((8, 6))  # float64 NumPy, narrowed with x64 off
    X = jnp.asarray(X64, jnp.float32)
    S = np.cov(rng.standard_normal((10, 40)))
    Xs, ys = rng.standard_normal((8, 12)).astype(np.float32).T / 3, np.arange(12) % 2
    runs = {
        "rpca.altproj, float64 NumPy Y": lambda: rpca.altproj(X64, 2, max_iter=2).X,
        "covariance.ialm, float64 NumPy Σ": lambda: cv.ialm(S, max_iter=2).L,
        "oracles.sparsify_top_fraction_topk": lambda: sparsify_top_fraction_topk(X, 0.3),
        "sdl.fit, lr=None": lambda: sdl.fit(Xs, ys, 2, max_iter=2).theta,
    }
    refusals = {
        "t must be non-negative": lambda: prox.soft_threshold(X, -1.0),
        r"alpha must lie in \[0, 1\]": lambda: rpca.scaledgd(X, 2, 1.5, max_iter=2).X,
        r"alpha_iter \(default 2·alpha": lambda: rpca.scaledgd(X, 2, 0.6, max_iter=2).X,
        "rho must be > 1": lambda: cv.ialm(S, rho=0.5).L,
        r"alpha_iter must lie": lambda: cv.rpca_gd(S, 2, alpha_iter=1.2, max_iter=2).L,
        "Y overflows float32": lambda: rpca.altproj(X64 * 1e300, 2, max_iter=2).X,
        "H must be symmetric positive definite": lambda: rg.relative_spectrum(
            np.eye(2), np.diag([1.0, -1.0])
        ),
    }
    return runs, refusals


@pytest.mark.parametrize("name", list(_closure_cases()[0]))
def test_concrete_inputs_closed_over_in_a_callers_jit_run_as_called_directly(name):
    """Inside a caller's jit even jnp.asarray of a closed-over NumPy value is staged: as_matrix then
    read a tracer back in NumPy (TracerArrayConversionError for every solver given float64 NumPy
    data with x64 off), and top_k's counts were not Python integers. Such inputs are converted
    eagerly now, and the jitted call equals the direct one."""
    run = _closure_cases()[0][name]
    np.testing.assert_allclose(jax.jit(lambda _: run())(0.0), run(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("message", list(_closure_cases()[1]))
def test_invalid_hyperparameters_closed_over_in_a_callers_jit_are_refused(message):
    """The checks of a concrete value ran on its staged conversion, saw a tracer and skipped: in a
    caller's jit a closed-over α = 1.5 returned NaN and t = −1 shifted every entry, where the direct
    call raises. Both raise the same ValueError now."""
    run = _closure_cases()[1][message]
    with pytest.raises(ValueError, match=message):
        run()
    with pytest.raises(ValueError, match=message):
        jax.jit(lambda _: run())(0.0)


def test_host_functions_name_themselves_on_traced_input_and_run_when_closed_over():
    """Functions that return Python/NumPy values cannot take traced input: they say so by name
    (it was JAX's tracer error from deep inside). Concrete inputs closed over in a caller's jit run
    as in a direct call (covariance.report failed there too: its first jnp op was staged)."""
    from lowrank_jax import covariance as cv
    from lowrank_jax import datasets, rpca, sdl

    rng = np.random.default_rng(0)
    M = rng.standard_normal((10, 2))
    L = M @ M.T
    Sigma = L + np.diag(rng.uniform(0.5, 1.0, 10))
    direct = cv.report(Sigma, L, Sigma - L)
    box = {}

    def inside(_):
        box["report"] = cv.report(Sigma, L, Sigma - L)
        return 0.0

    jax.jit(inside)(0.0)
    assert box["report"] == direct
    X, y = rng.standard_normal((6, 10)).T, np.arange(10) % 2  # 10 samples × 6 features
    calls = {
        "covariance.report": lambda s: cv.report(s, L, Sigma - L),
        "sdl.theory": lambda s: sdl.theory(X * s, 1.0, 0.1, model="H"),
        "sdl.mf_lr": lambda s: sdl.mf_lr(X * s, y, 2),
        "sdl.stratified_folds": lambda s: sdl.stratified_folds(y * s, 2),
        "rpca.train_lrpca": lambda s: rpca.train_lrpca(key=s),
        "rpca.frmnn_grid_search": lambda s: rpca.frmnn_grid_search(None, None, key=s),
        "datasets.standardize": lambda s: datasets.standardize(X * s),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=f"{name} computes on the host"):
            jax.jit(call)(jnp.ones((10, 10)) if name == "covariance.report" else 1.0)


def test_float32_data_stays_float32_beside_float64_values_under_x64(x64):
    """With x64 on, a float64 value next to float32 data must neither crash nor silently move the
    work to float64 (an audit found: lrpca_step's scan refused a carry promoted by a float64 ζ,
    pathnorm.train built a float64 network for float32 data, a float64 NumPy threshold promoted
    soft_threshold alone among the thresholds, and a float32 RowSparse design scattered float64
    terms into a float32 buffer where the dense one promoted)."""
    import scipy.sparse as sp

    from lowrank_jax import pathnorm, prox, rpca
    from lowrank_jax.regression import design, sketch

    rng = np.random.default_rng(0)
    x32 = jnp.asarray(rng.standard_normal((5, 4)), jnp.float32)
    for t in (np.float64(0.3), np.int64(1), [0.1, 0.2, 0.3, 0.4]):
        assert prox.soft_threshold(x32, t).dtype == jnp.float32
    # a JAX t keeps its dtype
    assert prox.soft_threshold(x32, jnp.float64(0.3)).dtype == jnp.float64
    Y, L, R = (
        jnp.asarray(rng.standard_normal(s), jnp.float32) for s in ((20, 20), (20, 2), (20, 2))
    )
    L_new, R_new, _ = rpca.lrpca_step(Y, L, R, jnp.asarray(0.01, jnp.float64), np.float64(0.5))
    ref = rpca.lrpca_step(Y, L, R, jnp.float32(0.01), jnp.float32(0.5))
    assert L_new.dtype == R_new.dtype == jnp.float32
    np.testing.assert_allclose(L_new, ref[0], rtol=1e-6)
    X = rng.random((100, 6)).astype(np.float32)
    y = (X[:, :3].sum(1) > X[:, 3:].sum(1)).astype(np.int32)
    net = pathnorm.train(
        X,
        y,
        reg="path",
        method="prox",
        lr=0.1,
        lam=1e-3,
        epochs=1,
        batch=10,
        hidden=4,
        outputs=2,
        key=0,
    ).model
    assert {w.dtype for w in jax.tree.leaves(net)} == {jnp.dtype(jnp.float32)}
    A = rng.standard_normal((30, 5)).astype(np.float32) * (rng.random((30, 5)) < 0.5)
    A_sparse, w64 = design.as_design(sp.csr_matrix(A)), rng.random(30)
    for op in (design.gram, design.rmatvec):
        dense, sparse = op(jnp.asarray(A), w64), op(A_sparse, w64)
        assert sparse.dtype == dense.dtype
        np.testing.assert_allclose(sparse, dense, rtol=1e-5, atol=1e-6)
    assert (
        sketch.leverage_scores(A, w64).dtype
        == sketch.approx_leverage_scores(0, A, w64).dtype
        == jnp.float32
    )
    assert sketch.sampled_gram(0, A_sparse, np.ones(30), 12, scores=w64).dtype == jnp.float32
    assert (
        rpca.LRPCAParams.from_schedule(
            np.array([1.0, 0.5]), np.array([0.5]), rank=2, n=20
        ).log_zeta.dtype
        == jnp.float64
    )


# The iteration budget is `max_iter` everywhere; no solver takes `iters`.
_RENAMED_BUDGETS = [
    "rpca.scaledgd",
    "regression.newton_solve",
    "sdl.fit",
    "sdl.cross_validate",
    "sdl.lpgd",
    "sdl.bcd",
    "covariance.rpca_gd",
]


def _public(dotted):
    import importlib

    module, name = dotted.split(".")
    return getattr(importlib.import_module(f"lowrank_jax.{module}"), name)


@pytest.mark.parametrize("dotted", _RENAMED_BUDGETS)
def test_the_budget_is_named_max_iter_and_iters_is_unknown(dotted):
    import inspect

    fn = _public(dotted)
    params = inspect.signature(fn).parameters
    assert "max_iter" in params and "iters" not in params
    with pytest.raises(TypeError, match="iters"):
        fn(None, None, None, max_iter=3, iters=3)  # refused before any argument is read


def test_the_budget_is_max_iter_and_the_old_name_is_refused():
    from lowrank_jax import regression, rpca
    from lowrank_jax.covariance import baselines
    from lowrank_jax.datasets import rpca as rdata

    p = rdata.rpca_problem(jax.random.key(0), 30, 30, 2, 0.1)
    A = jax.random.normal(jax.random.key(1), (40, 3)) / 5
    b = jax.random.dirichlet(jax.random.key(2), jnp.ones(40))
    S = np.asarray(p.X @ p.X.T)
    runs = {  # (result, its estimate)
        "scaledgd": lambda **kw: (lambda r: (r, r.X))(rpca.scaledgd(p.Y, 2, 0.1, **kw)),
        "newton_solve": lambda **kw: (lambda r: (r, r.x))(
            regression.newton_solve(A, b, 1.0, jnp.zeros(3), tol=None, **kw)
        ),
        "rpca_gd": lambda **kw: (lambda r: (r, r.L))(baselines.rpca_gd(S, 2, tol=None, **kw)),
    }
    for name, run in runs.items():
        out, _ = run(max_iter=3)
        assert int(out.n_iter) == 3, name  # the budget really is the one passed
        with pytest.raises(TypeError, match="iters"):
            run(iters=3)
    # and a different count changes the result (one solver: one more program per count)
    one_step, three_steps = runs["scaledgd"](max_iter=1)[1], runs["scaledgd"](max_iter=3)[1]
    assert not np.allclose(np.asarray(one_step), np.asarray(three_steps))


def test_flags_take_only_true_or_false_by_name():
    """A flag given "no" acted as True and None as False (Python truthiness), silently."""
    from lowrank_jax import covariance as cv
    from lowrank_jax import datasets, linalg, regression, sdl

    A = jax.random.normal(jax.random.key(0), (20, 3)) / 5
    b = jax.random.dirichlet(jax.random.key(1), jnp.ones(20))
    rng = np.random.default_rng(0)
    M = rng.normal(size=(8, 2))
    S = M @ M.T + np.eye(8)
    X, y = rng.normal(size=(6, 12)).T, np.arange(12) % 2
    calls = {
        "line_search": lambda v: regression.newton_solve(
            A, b, 1.0, jnp.zeros(3), max_iter=1, line_search=v
        ),
        "measure_eps": lambda v: regression.newton_solve(
            A, b, 1.0, jnp.zeros(3), max_iter=1, measure_eps=v
        ),
        "differentiable": lambda v: regression.newton_solve(
            A, b, 1.0, jnp.zeros(3), max_iter=1, differentiable=v
        ),
        "intercept": lambda v: sdl.fit(X, y, 2, max_iter=1, intercept=v),
        "grow": lambda v: cv.fpcp(S, 2, grow=v),
        "return_factor": lambda v: cv.rpca_gd(S, 2, max_iter=1, return_factor=v),
        "exact_support": lambda v: datasets.rpca_problem(0, 10, 10, 2, 0.1, exact_support=v),
        "exact": lambda v: datasets.random_support(0, (5, 5), 0.1, exact=v),
        "signed": lambda v: cv.rank_above(S, signed=v),
        "strict": lambda v: cv.sparsity(S, strict=v),
        "right": lambda v: linalg.spd_solve(jnp.eye(2), jnp.ones((2, 2)), right=v),
    }
    for name, call in calls.items():
        for bad in ("no", None, 1):
            with pytest.raises(TypeError, match=f"{name} must be True or False"):
                call(bad)
    # NumPy bools pass
    regression.newton_solve(A, b, 1.0, jnp.zeros(3), max_iter=1, line_search=np.bool_(True))


def test_newton_solve_names_its_start_x0():
    from lowrank_jax import regression

    A, b = jnp.ones((6, 3)) / 6, jnp.full(6, 1 / 6)
    with pytest.raises(ValueError, match="x0 must have length d = 3"):
        regression.newton_solve(A, b, 1.0, jnp.zeros(2))
    with pytest.raises(ValueError, match="x0 must have 1 dimension"):
        regression.newton_solve(A, b, 1.0, jnp.zeros((3, 1)))


def test_invalid_traced_hyperparameters_give_nan_in_the_baselines_and_the_attack_too():
    """rpca_gd returned L = 0 with a residual of 0 (looking converged) for a traced α > 1 or α̃ > 1,
    altproj a finite 5 % error for a traced β < 0 (its hard threshold at NaN kept nothing), and
    robust_error 0.81 for a traced ε < 0. Each is NaN now, as every other solver's is (the solvers
    with status INVALID)."""
    from lowrank_jax import Status, pathnorm, rpca
    from lowrank_jax import covariance as cv
    from lowrank_jax.datasets import rpca as rdata

    rng = np.random.default_rng(0)
    M = rng.normal(size=(12, 2))
    S = M @ M.T + np.diag(rng.uniform(0.5, 1.0, 12))
    for kw in ({"alpha": 1.5}, {"alpha": 0.6}, {"alpha_iter": 2.0}):
        ((name, value),) = kw.items()
        out = jax.jit(lambda v: cv.rpca_gd(S, 2, **{name: v}, throw=False).L)(value)
        assert np.all(np.isnan(out)), kw
    assert np.all(np.isfinite(jax.jit(lambda a: cv.rpca_gd(S, 2, alpha=a, throw=False).L)(0.1)))
    p = rdata.rpca_problem(jax.random.key(0), 30, 30, 2, 0.1)
    out = jax.jit(lambda b: rpca.altproj(p.Y, 2, threshold_scale=b, max_iter=40, throw=False))(-1.0)
    assert np.all(np.isnan(out.X)) and int(out.status) == Status.INVALID
    model = pathnorm.ShallowNet(4, 3, 2, key=jax.random.key(0))
    X, y = jnp.full((5, 4), 0.5), jnp.array([0, 1, 0, 1, 0])
    err = jax.jit(lambda e: pathnorm.robust_error(model, X, y, eps=e, key=0, steps=3))
    assert np.isnan(err(-1.0)) and 0.0 <= float(err(0.1)) <= 1.0


def test_a_traced_invalid_tolerance_or_first_threshold_is_invalid_in_every_solver():
    """A traced tol < 0 (or NaN) arrives as NaN, and no residual compares below NaN: every solver
    would run its whole budget and return a finite result, as if tol were None, where the direct
    call raises. A traced ζ₀ = 0 would return X = 0 with a residual of 0, the best point of a sweep
    over ζ's scale by that residual. Each reports ``Status.INVALID`` with NaN fields (throw=False)
    or raises (throw=True), the valid point beside it unchanged."""
    from lowrank_jax import Status, rpca, sdl
    from lowrank_jax import covariance as cv
    from lowrank_jax import regression as rg
    from lowrank_jax.datasets import rpca as rdata

    p = rdata.rpca_problem(jax.random.key(0), 24, 20, 2, 0.1)
    zeta, eta = rpca.oracle_thresholds(p.Y, 2, p.X, 3, 0.5), jnp.full(3, 0.5)
    A, b = jax.random.normal(jax.random.key(1), (30, 3)) / 4, jnp.full(30, 1 / 30)
    X, y = jax.random.normal(jax.random.key(2), (8, 20)).T, jnp.arange(20) % 2
    Sigma = jnp.eye(6) + 0.1
    solvers = {
        "lrpca": (lambda t, throw: rpca.lrpca(p.Y, 2, zeta, eta, tol=t, throw=throw), "X"),
        "lrpca_sharded": (
            lambda t, throw: rpca.lrpca_sharded(p.Y, 2, zeta, eta, tol=t, throw=throw),
            "X",
        ),
        "scaledgd": (
            lambda t, throw: rpca.scaledgd(p.Y, 2, 0.1, tol=t, max_iter=10, throw=throw),
            "X",
        ),
        "altproj": (lambda t, throw: rpca.altproj(p.Y, 2, tol=t, max_iter=10, throw=throw), "X"),
        "newton_solve": (
            lambda t, throw: rg.newton_solve(
                A, b, 1.0, jnp.zeros(3), "exp", "exact", tol=t, max_iter=5, throw=throw
            ),
            "x",
        ),
        "sdl.fit": (lambda t, throw: sdl.fit(X, y, 2, tol=t, max_iter=10, throw=throw), "theta"),
        "decompose tol": (
            lambda t, throw: cv.decompose(
                Sigma, 2, tol=t, max_iter=15, window=3, key=0, throw=throw
            ),
            "M",
        ),
        "decompose grad_tol": (
            lambda t, throw: cv.decompose(
                Sigma, 2, tol=None, grad_tol=t, max_iter=15, key=0, throw=throw
            ),
            "M",
        ),
        "rpca_gd": (lambda t, throw: cv.rpca_gd(Sigma, 2, tol=t, max_iter=10, throw=throw), "L"),
        "ialm": (lambda t, throw: cv.ialm(Sigma, tol=t, max_iter=10, throw=throw), "L"),
    }
    for name, (f, field) in solvers.items():
        out = jax.vmap(lambda t: f(t, False))(jnp.array([1e-3, -1.0]))
        assert int(out.status[1]) == Status.INVALID and int(out.status[0]) != Status.INVALID, name
        value = np.asarray(getattr(out, field))
        assert np.all(np.isfinite(value[0])) and np.all(np.isnan(value[1])), name
    with pytest.raises(RuntimeError, match="tol"):
        jax.block_until_ready(jax.jit(lambda t: solvers["scaledgd"][0](t, True).X)(-1.0))
    lr = jax.vmap(lambda s: rpca.lrpca(p.Y, 2, zeta * s, eta, throw=False))(jnp.array([1.0, 0.0]))
    assert np.asarray(lr.status).tolist() == [Status.MAX_ITER, Status.INVALID]
    assert np.all(np.isfinite(lr.X[0])) and np.all(np.isnan(lr.X[1]))
    with pytest.raises(ValueError, match="zeta\\[0\\] must be > 0"):
        rpca.lrpca(p.Y, 2, zeta * 0.0, eta)


def test_thresholds_take_lists_and_refuse_a_negative_threshold():
    from lowrank_jax import linalg, prox

    x = np.array([[-2.0, 0.5], [1.5, -0.2]])
    np.testing.assert_allclose(
        linalg.truncated_svd(x.tolist(), 1).s, linalg.truncated_svd(jnp.asarray(x), 1).s
    )
    for fn in (prox.soft_threshold, prox.hard_threshold, prox.group_soft_threshold):
        np.testing.assert_allclose(fn(x.tolist(), 0.6), fn(jnp.asarray(x), 0.6), rtol=1e-6)
    np.testing.assert_array_equal(
        prox.hard_threshold(x, 0.6), np.where(np.abs(x) > 0.6, x, 0.0).astype(np.float32)
    )
    for t in (-1.0, np.nan):
        with pytest.raises(ValueError, match="t "):
            prox.hard_threshold(x, t)
    # traced NaN: NaN, not all-zero
    assert np.all(np.isnan(jax.jit(prox.hard_threshold)(x, jnp.nan)))
    # The same for the group prox, eagerly refused by name and NaN when traced (it zeroed every
    # group).
    for t in (-1.0, np.nan):
        with pytest.raises(ValueError, match="t "):
            prox.group_soft_threshold(x, t)
        assert np.all(np.isnan(jax.jit(prox.group_soft_threshold)(x, t)))
    np.testing.assert_allclose(
        jax.jit(prox.group_soft_threshold)(x, 0.6), prox.group_soft_threshold(x, 0.6)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prox.group_soft_threshold(np.ones((3, 2)), 0.1)  # float64 NumPy input: no dtype warning


def test_cross_validate_checks_its_grids_as_fit_checks_xi():
    from lowrank_jax import sdl

    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(10, 12)).T, np.array([0, 1] * 6)
    for bad, match in (
        (["1"], "xis"),
        ([1 + 0j], "xis"),
        ([[0.1, 1.0]], "xis must have 1 dimension"),
    ):
        with pytest.raises((TypeError, ValueError), match=match):
            sdl.cross_validate(X, y, 2, bad, [0.1], folds=2, max_iter=2)


def test_seeds_of_2_to_the_32_and_more_do_not_collide_with_small_ones(x64):
    """With x64 off JAX kept a seed's low 32 bits: 2**32 + 5 was the key of 5. The seed's key is now
    the one JAX builds with x64 on, in either mode."""
    data = lambda s: jax.random.key_data(_checks.as_key(s)).tolist()  # noqa: E731
    with_x64 = {s: data(s) for s in (5, 2**32 + 5, 2**40, 2**64 - 1)}
    assert with_x64[2**32 + 5] == [1, 5] and with_x64[2**40] == [256, 0]
    # JAX's own, x64 on
    assert with_x64[2**32 + 5] == jax.random.key_data(jax.random.key(2**32 + 5)).tolist()
    with jax.enable_x64(False):
        assert {s: data(s) for s in with_x64} == with_x64
        assert (
            data(np.uint64(2**40)) == [256, 0]
            and data(-1) == jax.random.key_data(jax.random.key(-1)).tolist()
        )
        with pytest.raises(ValueError, match="out of range"):
            _checks.as_key(2**64)
        with pytest.raises(ValueError, match="out of range"):
            _checks.as_key(-(2**40))


# --- declared validation (_checks.validate) -----------------------------------------------------


@_checks.validate(
    _checks.Rule(
        lambda a: a["step"] * a["alpha"] <= 1,
        "step · alpha must be at most 1, got {step} · {alpha}",
        uses=("step", "alpha"),
        poison="step",
    ),
    Y=_checks.Matrix(scale=True),
    rank=_checks.Rank(of="Y"),
    alpha=_checks.Hyper(ndim=0, high=1, dtype_of="Y"),
    alpha_iter=_checks.Hyper(
        ndim=0, high=1, dtype_of="Y", default=lambda a: 2 * a["alpha"], label="alpha_iter (2·alpha)"
    ),
    step=_checks.Hyper(ndim=0, low=0, low_open=True, dtype_of="Y"),
    w=_checks.Hyper(ndim=1, length=("Y", 1), low=None, dtype_of="Y", optional=True),
    tol=_checks.Tol(dtype_of="Y"),
    max_iter=_checks.Count(),
    method=_checks.Choice("a", "b"),
    throw=_checks.Flag(),
    key=_checks.Key(),
)
def _declared(
    Y,
    rank,
    alpha,
    *,
    alpha_iter=None,
    step=0.5,
    w=None,
    tol=None,
    max_iter=10,
    method="a",
    throw=True,
    key=None,
):
    return dict(
        Y=Y,
        rank=rank,
        alpha=alpha,
        alpha_iter=alpha_iter,
        step=step,
        w=w,
        tol=tol,
        max_iter=max_iter,
        key=key,
    )


def test_declared_arguments_are_converted_before_the_body_runs():
    Y = np.arange(12, dtype=np.int64).reshape(3, 4)
    out = _declared(Y, np.int64(2), 0.25, w=[1, -2, 3, 4], key=3)
    assert out["Y"].dtype == jnp.result_type(float) and out["rank"] == 2
    assert type(out["rank"]) is int and out["tol"] is None and out["max_iter"] == 10
    np.testing.assert_allclose(out["alpha_iter"], 0.5)  # the default, from the converted alpha
    assert out["w"].shape == (4,) and float(out["w"][1]) == -2.0  # low=None: negatives pass
    assert jnp.issubdtype(out["key"].dtype, jax.dtypes.prng_key)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(rank=4), r"rank must satisfy 1 <= rank <= 3"),
        (dict(alpha=1.5), r"alpha must lie in \[0, 1\]"),
        (dict(alpha=0.75), r"alpha_iter \(2·alpha\) must lie in \[0, 1\]"),
        (dict(step=0.0), r"step must be positive"),
        (dict(step=3.0, alpha=0.5, alpha_iter=0.5), r"step · alpha must be at most 1"),
        (dict(w=[1.0, 2.0]), r"w must have length 4"),
        (dict(tol=-1.0), r"tol must be positive"),
        (dict(max_iter=0), r"max_iter must be an integer >= 1"),
        (dict(method="c"), r"method must be one of 'a', 'b'"),
        (dict(throw="no"), r"throw must be True or False"),
    ],
)
def test_declared_rules_refuse_concrete_values_by_name(kwargs, match):
    args = dict(Y=np.ones((3, 4)), rank=1, alpha=0.1) | kwargs
    with pytest.raises((ValueError, TypeError), match=match):
        _declared(args.pop("Y"), args.pop("rank"), args.pop("alpha"), **args)


def test_declared_rules_poison_traced_values_instead_of_raising():
    Y = jnp.ones((3, 4))

    def run(alpha, step):
        out = _declared(Y, 1, alpha, step=step)
        return out["alpha"], out["step"], _checks.any_nan(out["alpha"], out["step"])

    alpha, step, bad = jax.jit(run)(1.5, 0.5)  # out of range: NaN, flagged
    assert np.isnan(alpha) and bool(bad)
    alpha, step, bad = jax.jit(run)(0.5, 3.0)  # the cross rule fails: its poison is NaN
    assert np.isnan(step) and bool(bad)
    alpha, step, bad = jax.jit(run)(0.1, 0.5)
    assert float(alpha) == pytest.approx(0.1) and not bool(bad)


def test_a_declaration_must_name_arguments_of_the_function():
    with pytest.raises(TypeError, match="unknown arguments declared"):
        _checks.validate(nope=_checks.Flag())(lambda x: x)


def test_a_computed_message_reports_what_it_measured_and_a_traced_value_is_poisoned():
    def largest(a):
        return f"x must be at most 1, its largest entry is {float(np.max(a['x'])):g}"

    @_checks.validate(
        _checks.Rule(
            lambda a: jnp.max(a["x"]) <= 1, _checks.Message(largest), uses=("x",), poison="x"
        ),
        x=_checks.Hyper(ndim=1),
    )
    def clipped(x):
        return x

    with pytest.raises(ValueError, match="its largest entry is 3"):
        clipped([0.5, 3.0])
    assert np.all(np.isnan(jax.jit(clipped)(jnp.array([0.5, 3.0]))))
    np.testing.assert_allclose(clipped([0.5, 1.0]), [0.5, 1.0])


def test_a_call_that_does_not_bind_raises_pythons_own_error():
    """inspect's binding said "too many positional arguments" for f(1, 2, 3, iters=3), hiding the
    unknown keyword that Python's own call names first."""

    @_checks.validate(max_iter=_checks.Count())
    def solve(a, b, *, max_iter=1):
        return max_iter

    with pytest.raises(TypeError, match="unexpected keyword argument 'iters'"):
        solve(1, 2, 3, iters=3)
    with pytest.raises(TypeError, match=r"solve\(\) takes 2 positional arguments but 3 were"):
        solve(1, 2, 3)
    assert solve(1, 2, max_iter=np.int64(4)) == 4
    with pytest.raises(ValueError, match="max_iter must be an integer >= 1"):
        solve(1, 2, max_iter=0)


def test_when_concrete_runs_on_values_and_skips_tracers():
    seen = []

    def count(x):
        seen.append(int(jnp.count_nonzero(x)))
        return seen[-1]

    x = jnp.array([0.0, 1.0, 2.0])
    assert _checks.when_concrete(count, x) == 2
    # under jit the argument is a tracer: fn is not called, nothing is returned
    assert jax.jit(lambda v: jnp.asarray(_checks.when_concrete(count, v) is None))(x)
    # a concrete value closed over inside a caller's jit is still evaluated, eagerly
    jax.jit(lambda v: v + (_checks.when_concrete(count, x) or 0))(x)
    assert seen == [2, 2]


class _Lowerings:
    """Counts the programs JAX lowers (each is then compiled or read from the on-disk cache)."""

    def __enter__(self):
        self.n = 0
        from jax import monitoring

        def listen(event, duration, **kwargs):
            self.n += event == "/jax/core/compile/jaxpr_to_mlir_module_duration"

        self._listen = listen
        monitoring.register_event_duration_secs_listener(listen)
        return self

    def __exit__(self, *exc):
        from jax import monitoring

        monitoring.unregister_event_duration_listener(self._listen)


@_checks.validate(X=_checks.Matrix(), how=_checks.Choice("sum", "max"))
@_checks.compiled
def _reduce(X, scale, how="sum", axis=0, offset=1.0):
    Y = scale * jnp.abs(X) + jnp.asarray(offset)
    return jnp.sum(Y, axis) if how == "sum" else jnp.max(Y, axis)


def test_a_compiled_body_is_one_program_traced_in_its_numbers_static_in_its_options():
    """A validated function marked ``compiled`` runs its body as one jit program (not one per
    operation); new array values and Python floats reuse it, a new option (a Choice, an integer)
    compiles once more, a value it cannot hash (a list) runs operation by operation, and the answer
    is the same in each case, under grad too."""
    rng = np.random.default_rng(0)
    X1, X2 = rng.standard_normal((2, 23, 7))

    def ref(X, s, how="sum", axis=0, offset=1.0):
        return getattr(np, how)(s * np.abs(X) + np.asarray(offset), axis)

    with _Lowerings() as count:
        np.testing.assert_allclose(_reduce(X1, 2.0), ref(X1, 2.0), rtol=1e-5)
    assert count.n <= 2  # the body, and the boundary's finiteness check of X
    with _Lowerings() as count:
        np.testing.assert_allclose(
            _reduce(X2, 0.5, offset=3.0), ref(X2, 0.5, offset=3.0), rtol=1e-5
        )
    assert count.n == 0
    with _Lowerings() as count:
        np.testing.assert_allclose(_reduce(X2, 0.5, "max"), ref(X2, 0.5, "max"), rtol=1e-5)
        np.testing.assert_allclose(_reduce(X2, 0.5, axis=1), ref(X2, 0.5, axis=1), rtol=1e-5)
    assert count.n == 2
    offset = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]  # a list: not hashable, not an array
    np.testing.assert_allclose(
        _reduce(X1, 2.0, offset=offset), ref(X1, 2.0, offset=offset), rtol=1e-5
    )
    slope = jax.grad(lambda s: jnp.sum(_reduce(X1, s)))(1.0)
    np.testing.assert_allclose(slope, np.sum(np.abs(X1)), rtol=1e-5)


def test_public_functions_called_eagerly_compile_a_few_programs_not_one_per_operation():
    """The closed forms of the families, called outside jit on a new shape, compile their body as
    one program (plus the boundary's checks), and nothing for new values of the same shape."""
    from lowrank_jax import pathnorm, regression, sdl

    A = jax.random.normal(jax.random.key(0), (37, 5))
    b, x = jnp.full(37, 1 / 37), jnp.zeros(5)
    W_in, W_out = jax.random.normal(jax.random.key(1), (13, 7)), jnp.ones((3, 13))
    data = sdl.model.prepare(np.asarray(A), np.arange(37) % 3)
    theta = jnp.zeros(sdl.model.theta_shape("H", 5, 37, 2))
    gamma = jnp.zeros((data.X_aux.shape[0], data.kappa))
    calls = {
        "regression.hessian": lambda s: regression.hessian(x, A, b, s, "cosh"),
        "regression.gradient": lambda s: regression.gradient(x, A, b, s, "sinh"),
        "pathnorm.path_norm_prox": lambda s: pathnorm.path_norm_prox(W_in, W_out, s),
        "sdl.model.gradients": lambda s: sdl.model.gradients(theta, gamma, data, s, 0.1, "H"),
    }
    for name, call in calls.items():
        with _Lowerings() as count:
            call(0.5)
        assert count.n <= 3, name
        with _Lowerings() as count:
            call(0.25)
        assert count.n == 0, name
