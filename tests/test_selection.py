"""Tests for lowrank_jax.selection.kth_largest against np.sort.

Compilation dominates the run time, so the tests reuse a few shapes and call one
jitted wrapper with k (and guess) passed as arrays.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from lowrank_jax.selection import kth_largest

_jitted = jax.jit(kth_largest, static_argnames=("axis", "method"))
# "auto" is the counting selection on this CPU; "sort" is what GPUs and TPUs run.
METHODS = pytest.mark.parametrize("method", ["auto", "sort"])


def kl(x, k, axis=-1, guess=None, method="auto"):
    """kth_largest under jit, with k (and guess) broadcast to the result shape."""
    x = jnp.asarray(x)
    out_shape = x.shape[: axis % x.ndim] + x.shape[axis % x.ndim + 1 :]
    k = jnp.broadcast_to(jnp.asarray(k, jnp.int32), out_shape)
    if guess is not None:
        guess = jnp.broadcast_to(jnp.asarray(guess, x.dtype), out_shape)
    return _jitted(x, k, axis=axis, guess=guess, method=method)


def reference(x, k, axis=-1):
    """np.sort(x, axis) at index -k, with the k <= 0 -> +inf, k > n -> -inf conventions."""
    x = np.asarray(x)
    n = x.shape[axis]
    srt = np.moveaxis(np.sort(x, axis=axis), axis, -1)
    k = np.broadcast_to(np.asarray(k), srt.shape[:-1])
    if n:
        out = np.take_along_axis(srt, np.clip(n - k, 0, n - 1)[..., None], axis=-1)[..., 0]
    else:
        out = np.zeros(k.shape, x.dtype)
    return np.where(k <= 0, np.inf, np.where(k > n, -np.inf, out)).astype(x.dtype)


def assert_exact(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    # Equal floats are equal bit patterns, except that np.sort may return -0.0 for
    # a zero; kth_largest always returns +0.0.
    np.testing.assert_array_equal(got, want)
    assert not np.any(np.signbit(got) & (got == 0))


def sample(seed, shape, kind, dtype=np.float32):
    rng = np.random.default_rng(seed)
    x = {
        "absnormal": lambda: np.abs(rng.standard_normal(shape)),
        "normal": lambda: rng.standard_normal(shape),
        "ints": lambda: rng.integers(-3, 4, shape).astype(float),
        "lognormal": lambda: rng.lognormal(0.0, 3.0, shape),
        "sparse": lambda: np.where(rng.random(shape) < 0.8, 0.0, rng.standard_normal(shape)),
    }[kind]()
    return x.astype(dtype)


KINDS = ["absnormal", "normal", "ints", "lognormal", "sparse"]


@pytest.mark.parametrize("axis", [0, 1, -1])
@METHODS
def test_float32_axes_and_k(axis, method):
    for seed, kind in enumerate(KINDS):
        x = sample(seed, (20, 27), kind)
        n = x.shape[axis]
        for k in (1, 2, n // 5, n // 2, n - 1, n):
            assert_exact(kl(x, k, axis, method=method), reference(x, k, axis))
        k_row = np.random.default_rng(seed).integers(1, n + 1, x.shape[1 - axis % 2])
        assert_exact(kl(x, k_row, axis, method=method), reference(x, k_row, axis))


@METHODS
def test_out_of_range_k(method):
    x = sample(5, (20, 27), "normal")
    k = np.array([-5, 0, 1, 27, 28, 100, 3, 0, 28, 1] * 2)
    got = np.asarray(kl(x, k, method=method))
    assert_exact(got, reference(x, k))
    assert np.all(got[k <= 0] == np.inf) and np.all(got[k > 27] == -np.inf)
    mask = x >= got[:, None]  # keeps nothing resp. everything
    assert not mask[k <= 0].any() and mask[k > 27].all()


@METHODS
def test_ties_zeros_signs_and_infinities(method):
    x = np.zeros((20, 27), np.float32)
    x[1] = 5.0  # all equal
    x[2, ::2] = -0.0  # +0 and -0 mixed
    x[3] = np.arange(27) // 9  # 9 copies each of 0, 1, 2
    x[4] = -(np.arange(27) // 3)
    x[5, :13] = np.inf
    x[6, :5] = -np.inf
    # smallest normals (XLA:CPU flushes subnormals)
    x[7] = np.finfo(np.float32).tiny * np.arange(27)
    x[8] = np.where(np.arange(27) % 2, -0.0, 1.0)
    x[9] = np.where(np.arange(27) % 3, -1.5, np.finfo(np.float32).max)
    x[10:] = sample(6, (10, 27), "ints") * 1e-3
    for k in range(-1, 29):
        assert_exact(kl(x, k, method=method), reference(x, k))
    for k in (1, 10, 20):  # along columns too
        assert_exact(kl(x, k, 0, method=method), reference(x, k, 0))


@METHODS
def test_float64(method):
    with jax.enable_x64(True):
        x = sample(7, (20, 27), "normal", np.float64)
        x[:9] = x[9:18]  # ties within each column
        for k in (1, 7, 19, 20):
            got = kl(x, k, 0, method=method)
            assert got.dtype == jnp.float64
            assert_exact(got, reference(x, k, 0))
        # values closer together than float32 can resolve
        y = 1.0 + np.random.default_rng(8).permutation(5000) * 1e-13
        for k in (1, 123, 2500, 5000):
            assert_exact(kl(y, k, method=method), reference(y, k))


@METHODS
def test_3d_and_broadcast_k(method):
    x = sample(9, (2, 9, 3), "absnormal")
    for axis in (0, 1):  # (the last axis is covered by the 2-D tests)
        shape = x.shape[: axis % 3] + x.shape[axis % 3 + 1 :]
        k = np.random.default_rng(axis % 3).integers(-1, x.shape[axis] + 2, shape)
        assert_exact(kl(x, k, axis, method=method), reference(x, k, axis))
    assert_exact(kl(x, np.array([1, 4, 9]), 1, method=method), reference(x, np.array([1, 4, 9]), 1))


def test_guess_never_changes_the_result(monkeypatch):
    # 40 rows resp. columns, with gathering from blocks of any size: also exercises the gathering
    # of unfinished rows/columns
    from lowrank_jax import selection

    monkeypatch.setattr(selection, "_COMPACT_MIN_ENTRIES", 0)
    x = sample(10, (300, 40), "normal")
    k = 60
    want = reference(x, k, 0)
    for g in (want, want * 1.01, 1e30, -1e30, np.inf, -np.inf, np.nan, 0.0, reference(x, 3 * k, 0)):
        assert_exact(kl(x, k, 0, guess=g), want)
    for seed, kind in enumerate(KINDS):
        y = sample(seed, (40, 300), kind)
        for k in (1, 30, 150, 299):
            assert_exact(kl(y, k), reference(y, k))


def test_jit_and_vmap_over_k():
    x = jnp.asarray(sample(11, (20, 40), "normal"))

    @jax.jit
    def by_alpha(x, alpha):  # k = floor(alpha * n) is traced
        return kth_largest(jnp.abs(x), jnp.floor(alpha * x.shape[1]).astype(jnp.int32))

    alphas = jnp.array([0.0, 0.1, 0.25, 0.5, 1.0])
    got = jax.vmap(by_alpha, in_axes=(None, 0))(x, alphas)
    for k, g in zip([0, 4, 10, 20, 40], got):
        assert_exact(g, reference(np.abs(x), k))
    # vmap over data and guess as well
    xs = jnp.stack([x, -x])
    f = jax.jit(jax.vmap(functools.partial(kth_largest, k=7, axis=0)))
    got = f(xs, guess=jnp.zeros((2, 40)))
    assert_exact(got, np.stack([reference(x, 7, 0), reference(-x, 7, 0)]))


@pytest.mark.parametrize("axis", [0, 1])
def test_vmap_over_arrays_is_one_loop_for_the_whole_batch(axis):
    """A batch of arrays runs as one problem (the members' rows side by side): one counting loop
    for the batch, no loop over its members, and every member's values exact, with k and the
    guess batched or shared, under nested vmap as well."""
    xs = np.stack([sample(s, (37, 29), kind) for s, kind in enumerate(KINDS)])
    n = xs.shape[1 + axis]
    ks = np.array([1, 5, n // 2, n - 1, n], np.int32)
    want = np.stack([reference(x, k, axis) for x, k in zip(xs, ks)])
    f = jax.jit(jax.vmap(lambda x, k: kth_largest(x, k, axis=axis, method="count")))
    assert_exact(f(xs, ks), want)
    guesses = want * np.float32(1.01)
    g = jax.jit(jax.vmap(lambda x, k, g: kth_largest(x, k, axis=axis, guess=g, method="count")))
    assert_exact(g(xs, ks, guesses), want)
    shared_k = jax.jit(jax.vmap(lambda x: kth_largest(x, 4, axis=axis, method="count")))
    assert_exact(shared_k(xs), np.stack([reference(x, 4, axis) for x in xs]))
    nested = jax.jit(jax.vmap(jax.vmap(lambda x, k: kth_largest(x, k, axis=axis, method="count"))))
    got = nested(np.stack([xs, -xs]), np.stack([ks, ks[::-1]]))
    assert_exact(
        got, np.stack([want, np.stack([reference(-x, k, axis) for x, k in zip(xs, ks[::-1])])])
    )
    program = str(
        jax.make_jaxpr(jax.vmap(lambda x, k: kth_largest(x, k, axis=axis, method="count")))(xs, ks)
    )
    assert "while[" in program and "scan[" not in program
    # Only k batched: x is not copied once per member; the members run one after another.
    program = str(
        jax.make_jaxpr(jax.vmap(lambda k: kth_largest(xs[0], k, axis=axis, method="count")))(ks)
    )
    assert "scan[" in program


def test_no_gradient():
    x = jnp.asarray(sample(12, (20, 27), "normal"))
    grad = jax.jit(jax.grad(lambda x: jnp.sum(kth_largest(x, 3) ** 2)))(x)
    assert np.all(np.asarray(grad) == 0)


@METHODS
def test_dtypes_empty_and_errors(method):
    x = sample(13, (20, 27), "normal").astype(np.float16)
    got = kl(x, 5, method=method)
    assert got.dtype == jnp.float16
    np.testing.assert_array_equal(np.asarray(got), reference(x, 5))
    # XLA:CPU compares subnormals as zeros; they are treated as zeros throughout
    sub = np.float32(np.finfo(np.float32).smallest_subnormal) * np.array(
        [[3, 0, -2, 1, 5]], np.float32
    )
    assert float(kl(sub, 2, method=method)[0]) == 0.0
    assert float(kl(np.abs(sub) + 1, 2, method=method)[0]) == reference(np.abs(sub) + 1, 2)[0]
    empty = np.zeros((3, 0), np.float32)
    np.testing.assert_array_equal(
        kth_largest(empty, np.array([0, 1, 2]), method=method), [np.inf, -np.inf, -np.inf]
    )
    with pytest.raises(TypeError):
        kth_largest(np.arange(5), 1)
    with pytest.raises(TypeError):
        kth_largest(np.ones(5, np.float32), 1.5)


def test_large_flat():
    x = sample(14, (1_000_000,), "absnormal")
    want = reference(x, 100_000)
    assert_exact(kl(x, 100_000), want)
    assert_exact(kl(x, 100_000, guess=1.0), want)
    # the random-support use: exactly m of the keys are below the threshold
    keys = np.random.default_rng(15).random(1_000_000).astype(np.float32)
    m = 54_321
    assert np.sum(-keys >= np.asarray(kl(-keys, m))) == m


@settings(max_examples=60, deadline=None)
@given(data=st.data())
@METHODS
def test_property_matches_sort(data, method):
    shape = (4, 6)  # few shapes: compilation dominates
    elements = st.one_of(
        st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf]),
        st.floats(-1e6, 1e6, width=32, allow_subnormal=False),  # XLA:CPU flushes subnormals
    )
    x = data.draw(hnp.arrays(np.float32, shape, elements=elements))
    axis = data.draw(st.integers(0, x.ndim - 1))
    out_shape = shape[:axis] + shape[axis + 1 :]
    k = data.draw(hnp.arrays(np.int32, out_shape, elements=st.integers(-1, shape[axis] + 1)))
    guess = data.draw(hnp.arrays(np.float32, out_shape, elements=st.floats(-1e7, 1e7, width=32)))
    assert_exact(kl(x, k, axis, method=method), reference(x, k, axis))
    assert_exact(kl(x, k, axis, guess=guess, method=method), reference(x, k, axis))


def test_a_scalar_is_refused_by_name():
    with pytest.raises(ValueError, match="at least one axis"):
        kth_largest(jnp.float32(1.0), 1)


def test_k_and_guess_of_another_shape_are_refused_by_name():
    """A k or guess that does not broadcast to the result's shape failed inside JAX's broadcasting
    ("Incompatible types for broadcasting: input type=int32[3] …"), naming neither; a guess shaped
    like the other axis (16 for a result of 20) would not broadcast either. Broadcastable ones
    run."""
    x = jnp.arange(12.0).reshape(3, 4)
    for kw, name in (
        (dict(k=jnp.ones(5, int)), "k"),
        (dict(k=1, guess=jnp.ones(4)), "guess"),
        (dict(k=jnp.ones((2, 3), int)), "k"),
    ):
        with pytest.raises(
            ValueError, match=rf"{name} must broadcast to the result's shape \(3,\)"
        ):
            kth_largest(x, kw.pop("k"), axis=1, **kw)
    np.testing.assert_array_equal(kth_largest(x, jnp.array([1, 2, 3]), axis=1), [3.0, 6.0, 9.0])
    np.testing.assert_array_equal(
        kth_largest(x, jnp.array([[1]]).reshape(1), axis=1, guess=jnp.ones(1)), [3.0, 7.0, 11.0]
    )


def test_an_axis_out_of_range_is_refused_not_wrapped():
    """axis % ndim made axis=2 of a (2, 3) array select along axis 0 and axis=-3 along axis 1: wrong
    values, no error (np.sort raises). Every valid axis, negative ones included, still works."""
    x = jnp.arange(6.0).reshape(2, 3)
    for axis in (2, 3, -3, 1.0):
        with pytest.raises(ValueError, match="axis must be an integer in"):
            kth_largest(x, 1, axis=axis)
    for axis in (-2, -1, 0, 1, np.int64(1), np.array(1), jnp.int32(-1)):  # 0-d integers too
        np.testing.assert_array_equal(
            kth_largest(x, 1, axis=axis), np.max(np.asarray(x), axis=axis)
        )
    with pytest.raises(ValueError, match="axis must be an integer in"):
        kth_largest(x, 1, axis=np.array(True))


def test_auto_counts_on_a_cpu_and_sorts_on_accelerators():
    """On a GPU the counting loop paid a device round trip per trip, and under vmap (a sweep over α)
    its custom rule ran the batch members one after another: a ScaledGD sweep on an H200 was no
    faster than its single runs. "auto" is resolved when the program is lowered: counting (a while
    loop, no sort) for a CPU, a batched sort (no loop) for GPUs and TPUs, also under vmap.
    Lowered here for each platform without the device."""
    x = jnp.asarray(sample(16, (20, 27), "absnormal"))
    alphas = jnp.array([0.1, 0.2, 0.3])
    one = jax.jit(lambda x: kth_largest(x, 5, axis=1))
    swept = jax.jit(jax.vmap(lambda a: kth_largest(x, jnp.floor(a * 27).astype(jnp.int32), axis=0)))
    for f, args in ((one, (x,)), (swept, (alphas,))):
        traced = f.trace(*args)
        cpu = traced.lower(lowering_platforms=("cpu",)).as_text()
        assert "while" in cpu and "sort" not in cpu
        for platform in ("cuda", "rocm", "tpu"):
            text = traced.lower(lowering_platforms=(platform,)).as_text()
            assert "sort" in text and "while" not in text, platform
    np.testing.assert_array_equal(
        swept(alphas), np.stack([reference(x, int(a * 27), 0) for a in (0.1, 0.2, 0.3)])
    )


def test_auto_counts_on_accelerators_from_2_22_entries_batch_included():
    """On an H200 sorting 64 matrices of 1000 × 1000 took 3.4 ms against 1.2 ms for counting, while
    for one such matrix sorting won (0.48 against 0.84). "auto" decides on the size of everything it
    selects over, the members of a vmapped batch together (nested vmaps too); with only k batched it
    selects over one x. Lowered for a GPU from shapes alone (no array is allocated)."""
    f32 = jnp.float32

    def lowered(fn, *shapes):
        args = [jax.ShapeDtypeStruct(s, d) for s, d in shapes]
        return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()

    def counts(text):
        loop, sort = "stablehlo.while" in text, "stablehlo.sort" in text
        assert loop != sort, "exactly one method is lowered"
        return loop

    one = lambda x: kth_largest(x, 5, axis=1)  # noqa: E731
    batch = jax.vmap(lambda x, k: kth_largest(x, k, axis=1))
    nested = jax.vmap(jax.vmap(lambda x: kth_largest(x, 5, axis=0)))
    k_only = lambda x, ks: jax.vmap(lambda k: kth_largest(x, k, axis=1))(ks)  # noqa: E731
    assert not counts(lowered(one, ((1000, 1000), f32)))  # 1e6 entries: sort
    assert counts(lowered(one, ((2048, 2048), f32)))  # 2²² entries: count
    assert not counts(lowered(batch, ((4, 1000, 1000), f32), ((4,), jnp.int32)))
    assert counts(lowered(batch, ((8, 1000, 1000), f32), ((8,), jnp.int32)))
    assert counts(lowered(nested, ((8, 8, 300, 300), f32)))  # 5.8e6 entries
    assert not counts(lowered(nested, ((2, 8, 300, 300), f32)))
    assert not counts(lowered(k_only, ((1000, 1000), f32), ((64,), jnp.int32)))
    # and the values: the batched selection with the batch-wide decision equals the single ones
    xs = jnp.asarray(sample(17, (3, 30, 40), "absnormal"))
    ks = jnp.array([1, 7, 40])
    np.testing.assert_array_equal(
        batch(xs, ks), np.stack([reference(xs[i], int(ks[i]), 1) for i in range(3)])
    )
    x = xs[0]
    np.testing.assert_array_equal(k_only(x, ks), np.stack([reference(x, int(k), 1) for k in ks]))


@METHODS
def test_narrow_integer_k(method):
    """n − k was formed in k's dtype: an int8 or uint8 k wrapped around for n > 127 resp. 255, and
    the sort read the wrong place (x = 0, 1, …, 299, k = 5: 39.0 instead of 295.0)."""
    x = jnp.arange(300.0, dtype=jnp.float32)
    for dtype in (jnp.int8, jnp.uint8, jnp.int16, jnp.uint16):
        for k in (1, 5, 100):
            assert float(kth_largest(x, jnp.asarray(k, dtype), method=method)) == 300.0 - k


def test_an_unknown_method_is_refused():
    with pytest.raises(ValueError, match="method must be 'auto', 'count' or 'sort'"):
        kth_largest(jnp.ones((2, 3)), 1, method="top_k")


def test_without_gathering_the_value_is_the_same():
    """gather=False finishes every row in the main loop (one level of passes, a smaller program);
    the values are those of the default and of the sort, warm or cold, also under vmap."""
    from lowrank_jax.selection import _kth_largest

    lean = jax.jit(
        functools.partial(kth_largest, method="count", gather=False), static_argnames="axis"
    )
    for seed, kind in enumerate(KINDS):
        y = sample(seed, (64, 300), kind)
        for k in (1, 30, 150, 299):
            want = reference(y, k)
            assert_exact(lean(y, k, axis=1), want)
            assert_exact(lean(y, k, axis=1, guess=want * 1.01), want)
            assert_exact(lean(y.T, k, axis=0), want)
    batch = np.stack([sample(s, (40, 120), "normal") for s in range(3)])
    assert_exact(
        jax.jit(jax.vmap(lambda x: kth_largest(x, 17, gather=False)))(batch), reference(batch, 17)
    )
    # gathering (a second level of passes) only from blocks of 32 rows and 2¹⁶ entries: (256, 300)
    # gathers, (64, 300) and (200, 200) do not, and neither does any block with gather=False
    levels = lambda x, **kw: len(jax.jit(lambda x: _kth_largest(x, 30, 1, None, **kw)[1])(x))  # noqa: E731
    big = jnp.asarray(sample(5, (256, 300), "absnormal"))
    assert levels(big) == 2 and levels(big, gather=False) == 1
    for small in (big[:64], jnp.asarray(sample(6, (200, 200), "absnormal"))):
        assert levels(small) == 1
    x = big[:64]
    with pytest.raises(TypeError, match="gather must be True or False"):
        kth_largest(x, 3, gather="no")
