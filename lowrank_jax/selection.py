"""Exact k-th largest selection.

XLA's CPU sort (and ``lax.top_k`` with large k) is slow, whereas a sweep that
counts the entries above a few thresholds is cheap. On a CPU ``kth_largest``
therefore finds the exact order statistic by a sequence of counting sweeps inside a
``lax.while_loop``; see its docstring for the semantics and the algorithm. On GPUs
and TPUs, where sorting is fast and each trip of a data-dependent loop costs a
device round trip, it sorts instead. Both give the same values.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.custom_batching import custom_vmap

from lowrank_jax import _checks

__all__ = ["kth_largest"]

_M = 4  # thresholds per counting pass ...
_BITS = 8  # ... packed as 4 x 8-bit counters into one uint32 accumulator
_ROW_CHUNK = 32  # entries summed per packed counter (< 256) before unpacking; XLA:CPU
_COL_CHUNK = 16  # splits longer reductions into a slower two-stage (reduce-window) form
_Z = (-1.5, -0.5, 0.5, 1.5)  # interpolated count targets: k - 1/2 + z * spread
_GUESS_STEPS = (-3, -1, 1, 3)  # warm-start thresholds: key(guess) + s * 2**(nmant - 8)
_COMPACT = (8,)  # gather the unfinished rows into a block once <= 1/8 of them remain
_COMPACT_MIN_ROWS = 32  # ... but only from blocks of at least this many rows
_COMPACT_MIN_ENTRIES = 1 << 16  # ... and entries: below, a pass is too cheap for the gather to pay
# (ScaledGD, 40 iterations, this CPU: no gain at 200 x 200, 8-15 % from 300 x 300 up; the gathered
# level is a second loop, about 1.2 s more compilation per ScaledGD program)
_SAMPLE_MIN_N = 1 << 14  # long axes start from order statistics of a sample ...
_SAMPLE_STRIDE = 64  # ... of every 64th entry,
_SAMPLE_Z = (-2.0, -0.5, 0.5, 2.0)  # at ranks k * m / n + z * (binomial sd + 1)


# --- order-preserving integer keys -------------------------------------------------
# key(v) = +-(bits(|v|) - bits(tiny) + 1) for |v| >= tiny (the smallest normal float)
# and 0 for zeros and subnormals: one integer per representable normal value, with
# -0.0, +0.0 and the subnormals, which XLA:CPU compares as zeros, all at key 0; so
# comparing keys is comparing floats (NaN excluded). key(+inf) + 1 maps to a NaN,
# which every comparison rejects.


def _itype(ftype):
    return jnp.int64 if jnp.dtype(ftype).itemsize == 8 else jnp.int32


def _tiny_bits(ftype):
    return 1 << jnp.finfo(ftype).nmant  # bit pattern of the smallest normal float


def _key(v):
    itype, tiny = _itype(v.dtype), _tiny_bits(v.dtype)
    i = lax.bitcast_convert_type(v, itype)
    mag = i & jnp.iinfo(itype).max
    mag = jnp.where(mag < tiny, 0, mag - (tiny - 1))
    return jnp.where(i < 0, -mag, mag)


def _value(key, ftype):
    mag = jnp.abs(key)
    mag = jnp.where(mag == 0, 0, mag + (_tiny_bits(ftype) - 1))
    i = jnp.where(key < 0, mag | jnp.iinfo(key.dtype).min, mag)
    return lax.bitcast_convert_type(i, ftype)


def _avg(a, b):
    """floor((a + b) / 2) without integer overflow."""
    return (a >> 1) + (b >> 1) + (a & b & 1)


# --- passes over the data (x3 has shape (rows, n, cols); results are (rows, cols)) ---


def _chunks(x3):
    """Views (rows, q, c, cols) of x3 (rows, n, cols) covering axis 1 in short chunks.

    XLA:CPU turns a sum over more than 32 entries into a slower two-stage
    (reduce-window) form; summing chunk-wise, then over the chunks, avoids that.
    """
    rows, n, cols = x3.shape
    chunk = _ROW_CHUNK if cols == 1 else _COL_CHUNK
    size = -(-n // -(-n // chunk))
    q, r = n // size, n % size
    parts = [x3[:, : q * size].reshape(rows, q, size, cols)]
    return parts + [x3[:, q * size :][:, None]] if r else parts


def _count_ge(x3, t):
    """cnt[:, i] = #{x >= t[:, i]} along axis 1 for the _M thresholds t[:, i] (one pass).

    The _M indicator sums share one uint32 accumulator (8 bits each), summed over
    chunks of < 256 entries (so no field overflows) and then unpacked.
    """

    def packed(xp):  # (rows, q, c, cols) -> (rows, q, cols)
        acc = jnp.uint32(0)
        for i in range(_M):
            hit = xp >= t[:, i, None, None, :]
            acc = acc + jnp.where(hit, jnp.uint32(1 << (_BITS * i)), jnp.uint32(0))
        return jnp.sum(acc, axis=2, dtype=jnp.uint32)

    parts = [packed(xp) for xp in _chunks(x3)]
    s = jnp.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]
    s = lax.optimization_barrier(s)  # materialize: never recompute the pass per field
    field = lambda i: jnp.sum((s >> (_BITS * i)) & 0xFF, axis=1, dtype=jnp.int32)
    return jnp.stack([field(i) for i in range(_M)], axis=1)


def _min_ge(x3, t):  # (plain reductions: chunking these measured slower)
    return jnp.min(jnp.where(x3 >= t[:, None], x3, jnp.inf), axis=1)


def _max_le(x3, t):
    return jnp.max(jnp.where(x3 <= t[:, None], x3, -jnp.inf), axis=1)


# --- the bracketing loop -------------------------------------------------------------
# Per row the state is a bracket lo < hi of keys with clo = #{x >= lo} >= k > chi =
# #{x >= hi}; so the answer v_k satisfies lo <= key(v_k) < hi.  A row is finished when
# clo == k (then v_k = min{x >= lo}), chi == k - 1 (then v_k = max{x < hi}) or
# hi == lo + 1 (then v_k = value(lo)).


def _done(s):
    return (s["clo"] == s["k"]) | (s["chi"] == s["k"] - 1) | (s["hi"] <= s["lo"] + 1)


def _unbounded(s):
    key_inf = _key(jnp.asarray(jnp.inf, s["e"].dtype))
    return (s["lo"] == -key_inf) | (s["hi"] == key_inf + 1)


def _propose(s, ftype):
    """_M threshold keys strictly inside each row's bracket, and their target counts."""
    # All per-row quantities get a threshold axis: shape (rows, 1, cols) or (rows, _M, cols).
    lo, hi, clo, chi, k = (s[name][:, None] for name in ("lo", "hi", "clo", "chi", "k"))
    fresh, unbounded = s["fresh"][:, None], _unbounded(s)[:, None]
    lo_v, hi_v = _value(lo, ftype), _value(hi, ftype)
    finite = jnp.isfinite(lo_v) & jnp.isfinite(hi_v)
    mid = _avg(lo, hi)
    j = (clo - chi).astype(ftype)
    need = (k - chi).astype(ftype)  # bracket entries that must lie >= the answer
    m = jnp.arange(_M)[None, :, None]

    # Regula falsi: the count is linear in value across the bracket; aim at count k - 1/2
    # with a spread covering sampling noise (binomial) and the observed model error e.
    noise = jnp.sqrt(need * (j - need) / j) + 0.5
    w = jnp.sqrt(noise**2 + s["e"][:, None] ** 2)
    targets = need - 0.5 + jnp.asarray(_Z, ftype)[None, :, None] * w
    u = targets / j  # fraction of the bracket above the threshold
    # First pass on a fresh [min, max] bracket: hedge between value-linear (u),
    # value-halved and key-linear interpolation and key bisection.
    u0 = (need - 0.5) / j
    u = jnp.where(fresh, jnp.where(m == 1, 0.5 + 0.5 * u0, u0), u)
    u = jnp.clip(u, 0.0, 1.0)
    by_key = jnp.round(hi.astype(ftype) * (1 - u) + lo.astype(ftype) * u).astype(lo.dtype)
    by_value = _key(hi_v * (1 - u) + lo_v * u)  # convex combination: no overflow
    t = jnp.where(finite & ~(fresh & (m >= 2)), by_value, by_key)
    t = jnp.where(fresh & (m == 3), mid, t)
    # Safeguard: bisect the key range when the last pass made little progress.
    t = jnp.where(s["bisect"][:, None] & (m == 0), mid, t)
    # After a snap, probe the bracket's end values (now data values) for heavy ties.
    probe = s["probe"][:, None]
    t = jnp.where(probe & (m == 1), lo + 1, jnp.where(probe & (m == _M - 1), hi - 1, t))
    # Warm start whose guess missed: one end is still infinite; step away from the
    # finite end by 4, 16, 64, 256 times `reach` keys (at most half the bracket).
    d = s["reach"][:, None] * 4.0 ** (m + 1).astype(ftype)
    d = jnp.minimum(d, 2.0 ** (8 * lo.dtype.itemsize - 3)).astype(lo.dtype)
    d = jnp.minimum(d, (hi >> 1) - (lo >> 1))
    grow = jnp.where(hi == _key(jnp.asarray(jnp.inf, ftype)) + 1, lo + d, hi - d)
    t = jnp.where(unbounded & ~fresh, grow, t)
    return jnp.clip(t, lo + 1, hi - 1), targets


def _update(s, keys, cnt, n):
    """Tightest bracket given the counts `cnt` at `keys` (both (rows, _M, cols))."""
    lo, hi, clo, chi, k = s["lo"], s["hi"], s["clo"], s["chi"], s["k"]
    big = jnp.iinfo(lo.dtype).max
    ge = cnt >= k[:, None]
    nlo = jnp.maximum(lo, jnp.max(jnp.where(ge, keys, -big), axis=1))
    nclo = jnp.where(nlo == lo, clo, jnp.min(jnp.where(ge, cnt, n + 1), axis=1))
    nhi = jnp.minimum(hi, jnp.min(jnp.where(ge, big, keys), axis=1))
    nchi = jnp.where(nhi == hi, chi, jnp.max(jnp.where(ge, -1, cnt), axis=1))
    return nlo, nhi, nclo, nchi


def _with_proposal(s):
    t, tgt = _propose(s, s["e"].dtype)
    return dict(s, t=t, tv=_value(t, s["e"].dtype), tgt=tgt)


def _count_step(x3, s, n):
    """Count at the proposed thresholds s["t"] and shrink the brackets."""
    ftype = x3.dtype
    keys, targets = s["t"], s["tgt"]
    cnt = _count_ge(x3, s["tv"])
    lo, hi, clo, chi = _update(s, keys, cnt, n)
    j, nj = s["clo"] - s["chi"], clo - chi
    # Model error for the next pass: how far the middle counts landed from their
    # targets, shrunk quadratically with the bracket (the error of linear
    # interpolation); after a hedge pass, 1/8 of the new bracket.
    got = (cnt - s["chi"][:, None]).astype(ftype)
    shrunk = (nj / j).astype(ftype)
    err = jnp.mean(jnp.abs(got - targets)[:, 1:-1], axis=1) * shrunk**2
    err = jnp.where(s["fresh"], nj.astype(ftype) / 8, err)
    mid = _avg(s["lo"], s["hi"])
    halved = (hi <= mid + 1) | (lo >= mid)
    return dict(
        s,
        lo=lo,
        hi=hi,
        clo=clo,
        chi=chi,
        e=err,
        reach=s["reach"] * 256.0,
        bisect=~halved & (2 * nj > j),
        snap=nj == j,  # no entry left the bracket: ties or gaps, ask for a snap
        probe=jnp.zeros_like(s["probe"]),
        fresh=jnp.zeros_like(s["fresh"]),
    )


def _snap_step(x3, s):
    """Shrink the brackets onto the data: lo := key(min{x >= lo}), hi := key(max{x < hi}) + 1."""
    ftype = x3.dtype
    a = _min_ge(x3, _value(s["lo"], ftype))
    b = _max_le(x3, _value(s["hi"] - 1, ftype))
    return dict(
        s,
        lo=_key(a),
        hi=_key(b) + 1,
        snap=jnp.zeros_like(s["snap"]),
        probe=s["snap"],
        e=jnp.where(s["snap"], 0, s["e"]).astype(ftype),
    )


def _loop(x3, s, n, max_active):
    """Run passes until at most `max_active` rows are unfinished."""

    def cond(s):
        return jnp.sum(~_done(s)) > max_active

    def body(s):
        # Proposals s["t"] are made at the end of the previous iteration and carried
        # in the loop state, so that XLA cannot fuse their computation into (and
        # repeat it for every entry of) the data pass.
        active = ~_done(s)
        # A snap pass does nothing for the other rows: only when >= 1/4 of them ask.
        want = jnp.sum(active & s["snap"])
        s = lax.cond(
            (want > 0) & (4 * want >= jnp.sum(active)),
            lambda s: _snap_step(x3, s),
            lambda s: _count_step(x3, s, n),
            s,
        )
        return dict(_with_proposal(s), passes=s["passes"] + 1)

    return lax.while_loop(cond, body, s)


def _finish(x3, s, n, shrink):
    """Loop until every row is finished. With many rows, once only 1/shrink[0] of them
    are unfinished these are gathered into a smaller block and finished there
    (recursively), so slow rows do not cost full passes. Returns (state, passes per level)."""
    rows, _, cols = x3.shape
    nrows = rows * cols
    if not shrink or nrows < _COMPACT_MIN_ROWS or nrows * x3.shape[1] < _COMPACT_MIN_ENTRIES:
        s = _loop(x3, s, n, 0)
        return s, (s["passes"],)
    cap = nrows // shrink[0]
    s = _loop(x3, s, n, cap)
    # Indices of the unfinished rows, padded with nrows (like jnp.nonzero(size=cap)).
    active = ~_done(s).reshape(nrows)
    slot = jnp.where(active, jnp.cumsum(active) - 1, cap)
    idx = jnp.full(cap + 1, nrows).at[slot].set(jnp.arange(nrows))[:cap]
    valid = idx < nrows
    idx_c = jnp.where(valid, idx, 0)
    if rows == 1:  # gather columns straight into row layout
        xc = x3[0].T[idx_c][:, :, None]
    else:
        xc = x3[idx_c // cols, :, idx_c % cols][:, :, None]

    def pick(v):  # (rows, cols) -> (cap, 1); (rows, _M, cols) -> (cap, _M, 1)
        if v.ndim == 3:
            return v.transpose(0, 2, 1).reshape(nrows, _M)[idx_c][:, :, None]
        return v.reshape(nrows)[idx_c][:, None]

    sc = {name: pick(v) if v.ndim >= 2 else 0 * v for name, v in s.items()}
    sc["k"] = jnp.where(valid.reshape(sc["k"].shape), sc["k"], sc["clo"])  # padding: done
    sc, passes = _finish(xc, sc, n, shrink[1:])
    for name in ("lo", "hi", "clo", "chi"):
        upd = s[name].reshape(nrows).at[idx].set(sc[name][:, 0], mode="drop")
        s[name] = upd.reshape(rows, cols)
    return s, (s["passes"],) + passes


def _select(x3, k, guess, gather=True):
    """k-th largest along axis 1 of x3 (rows, n, cols); k, guess: (rows, cols)."""
    rows, n, cols = x3.shape
    ftype = x3.dtype
    itype = _itype(ftype)
    shape = (rows, cols)
    key_inf = _key(jnp.asarray(jnp.inf, ftype))
    step = 2.0 ** (jnp.finfo(ftype).nmant - 8)  # ~0.2-0.4% relative
    s = dict(
        k=jnp.clip(k, 1, n).astype(jnp.int32),
        clo=jnp.full(shape, n, jnp.int32),
        chi=jnp.zeros(shape, jnp.int32),
        e=jnp.zeros(shape, ftype),
        reach=jnp.full(shape, max(_GUESS_STEPS) * step, ftype),
        bisect=jnp.zeros(shape, bool),
        snap=jnp.zeros(shape, bool),
        probe=jnp.zeros(shape, bool),
        passes=jnp.int32(1),
    )
    unbounded = dict(lo=jnp.full(shape, -key_inf), hi=jnp.full(shape, key_inf + 1))
    if guess is not None:  # 4 thresholds within about +-1% of the guess
        g = _key(jnp.where(jnp.isnan(guess), 0, guess).astype(ftype))
        keys = jnp.stack([g + itype(d * step) for d in _GUESS_STEPS], axis=1)
    elif n >= _SAMPLE_MIN_N:  # 4 order statistics of a strided sample around rank k
        m = n // _SAMPLE_STRIDE
        p = s["k"].astype(ftype) / n
        spread = jnp.sqrt(m * p * (1 - p)) + 1
        ranks = [jnp.clip(jnp.round(p * m + z * spread), 1, m) for z in _SAMPLE_Z]
        ranks = jnp.stack(ranks, axis=-1).astype(jnp.int32).reshape(-1, 1)
        sample = x3[:, : m * _SAMPLE_STRIDE : _SAMPLE_STRIDE].transpose(0, 2, 1)
        sample = jnp.repeat(sample.reshape(rows * cols, m), _M, axis=0)[:, :, None]
        vals, _ = _select(sample, ranks, None)  # row (r * cols + c) * _M + i: rank i
        keys = _key(vals.reshape(rows, cols, _M).transpose(0, 2, 1))
    else:  # bracket [min, max]
        keys = None
        lo, hi = _key(jnp.min(x3, axis=1)), _key(jnp.max(x3, axis=1)) + 1
        s.update(lo=lo, hi=hi, fresh=jnp.ones(shape, bool))
    if keys is not None:  # bracket (-inf, +inf] narrowed by counting at `keys`
        s.update(unbounded, fresh=jnp.zeros(shape, bool))
        keys = jnp.clip(keys, s["lo"][:, None] + 1, s["hi"][:, None] - 1)
        lo, hi, clo, chi = _update(s, keys, _count_ge(x3, _value(keys, ftype)), n)
        s.update(lo=lo, hi=hi, clo=clo, chi=chi)

    s, passes = _finish(x3, _with_proposal(s), n, _COMPACT if gather else ())
    # Final pass: one masked min (or, on rows finished via chi == k - 1, a masked max).
    use_max = (s["chi"] == s["k"] - 1) & (s["clo"] != s["k"]) & (s["hi"] > s["lo"] + 1)
    sign = jnp.where(use_max, -1, 1).astype(ftype)
    bound = jnp.where(use_max, -_value(s["hi"] - 1, ftype), _value(s["lo"], ftype))
    v = sign * _min_ge(x3 * sign[:, None], bound)
    v = _value(_key(v), ftype)  # canonical zero: +0.0
    v = jnp.where(k <= 0, jnp.inf, jnp.where(k > n, -jnp.inf, v)).astype(ftype)
    passes = (passes[0] + 1,) + passes[1:]  # + the final pass
    return v, passes


def _kth_largest(x, k, axis, guess, gather=True):
    """kth_largest plus the pass counts (for benchmarks); x float32/float64, axis >= 0."""
    n = x.shape[axis]
    out_shape = x.shape[:axis] + x.shape[axis + 1 :]
    rows, cols = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1 :])
    k = jnp.broadcast_to(k, out_shape).reshape(rows, cols)
    if n == 0:
        v = jnp.where(k <= 0, jnp.inf, -jnp.inf).astype(x.dtype)
        return v.reshape(out_shape), (jnp.int32(0),)
    if guess is not None:
        guess = jnp.broadcast_to(guess, out_shape).reshape(rows, cols)
    v, passes = _select(x.reshape(rows, n, cols), k, guess, gather)
    return v.reshape(out_shape), passes


@functools.cache
def _selector(axis, gather=True):
    """kth_largest along a fixed axis, with a vmap rule that never batches the loop
    itself (that would turn its lax.cond into a select, both kinds of pass on every
    iteration, and make every batch member wait for the slowest).

    A batch of arrays is one bigger problem: its members' rows are more rows. The
    rule moves the batch axis in front and selects along ``axis + 1``, so one loop
    serves all members, and the gathering of unfinished rows (``_finish``) keeps
    slow rows of one member from costing full passes over the others. When only k
    or the guess is batched, ``x`` would have to be copied once per member; then
    the members run one after another (``lax.map``)."""

    @custom_vmap
    def select(x, k, *guess):
        return _kth_largest(x, k, axis, guess[0] if guess else None, gather)[0]

    @select.def_vmap
    def select_batched(size, batched, x, k, *guess):
        if not batched[0]:

            def one(vs):
                vs = iter(vs)
                return select(x, *(next(vs) if b else v for v, b in zip((k,) + guess, batched[1:])))

            return lax.map(one, tuple(v for v, b in zip((k,) + guess, batched[1:]) if b)), True
        return _selector(axis + 1, gather)(x, *_members_as_rows(x, axis, batched, k, guess)), True

    return select


def _members_as_rows(x, axis, batched, k, guess):
    """For a vmap rule given a batched x (batch axis first): k and the guess broadcast to the
    batch's result shape, so that selecting along ``axis + 1`` treats the members' rows as more
    rows."""
    out_shape = x.shape[: axis + 1] + x.shape[axis + 2 :]  # (size,) + one member's result shape

    def stacked(v, is_batched):
        v = v if is_batched else v[None]
        v = v.reshape(v.shape[:1] + (1,) * (len(out_shape) - v.ndim) + v.shape[1:])
        return jnp.broadcast_to(v, out_shape)

    return tuple(stacked(v, b) for v, b in zip((k,) + guess, batched[1:]))


# On GPUs and TPUs, "auto" sorts a selection over fewer entries than this (all the members of a
# vmapped batch together) and counts above it. One H200, float32, rows of n × n matrices,
# ms (count / sort): one 1000²: 0.84 / 0.48; 64 × 200²: 0.44 / 0.19; 8 × 500²: 0.43 / 0.26;
# 2000²: 1.02 / 1.08; 8 × 1000²: 0.58 / 0.67; 64 × 500²: 0.74 / 0.91; 64 × 1000²: 1.17 / 3.38;
# 64 × 2000²: 2.95 / 15.0.
_SORT_MAX_ENTRIES = 1 << 22


def _auto(axis, gather, x, k, *guess):
    """method="auto" for one (unbatched) x: counting in programs lowered for a CPU; elsewhere a sort
    when x has fewer than ``_SORT_MAX_ENTRIES`` entries, counting otherwise."""
    count = _selector(axis, gather)
    sort = lambda x, k, *guess: _kth_by_sort(x, k, axis)  # noqa: E731
    return lax.platform_dependent(
        x, k, *guess, cpu=count, default=sort if x.size < _SORT_MAX_ENTRIES else count
    )


@functools.cache
def _auto_selector(axis, gather=True):
    """``_auto`` with a vmap rule that decides on the whole batch: a batched x is selected as
    one array whose rows are all the members' rows (as ``_selector`` does), so its size is the
    batch's. With x unbatched (only k or the guess vary) the decision is x's: the sort sorts it
    once."""

    @custom_vmap
    def select(x, k, *guess):
        return _auto(axis, gather, x, k, *guess)

    @select.def_vmap
    def select_batched(size, batched, x, k, *guess):
        if not batched[0]:
            in_axes = tuple(0 if b else None for b in batched)
            return jax.vmap(functools.partial(_auto, axis, gather), in_axes=in_axes)(
                x, k, *guess
            ), True
        return _auto_selector(axis + 1, gather)(
            x, *_members_as_rows(x, axis, batched, k, guess)
        ), True

    return select


def kth_largest(x, k, *, axis=-1, guess=None, method="auto", gather=True):
    """Exact k-th largest entry of ``x`` along ``axis`` (k = 1 is the maximum).

    Semantics: the result has ``x.shape`` without ``axis`` and equals ``np.sort(x, axis=axis)``
    taken at index ``-k`` along ``axis``, exactly (the value is an entry of ``x``; a zero result is
    returned as ``+0.0``, since ``-0.0 == +0.0`` and ``np.sort`` may return either). Ties count with
    multiplicity. ``k <= 0`` gives ``+inf`` and ``k > n`` gives ``-inf``, so that
    ``x >= kth_largest(x, k)`` keeps nothing resp. everything; for 1 <= k <= n that mask keeps the
    top k entries plus any ties with the k-th.

    Algorithm (no sort): per row, keep a bracket ``lo < hi`` with ``#{x >= lo} >= k > #{x >= hi}``,
    i.e. ``lo <= v_k < hi``, where thresholds are points of the order-preserving integer image of
    the floats (the bit pattern, negatives reflected: one integer per representable value). Each
    iteration of a ``lax.while_loop`` is one sweep over the data that counts, per row, the entries
    ``>=`` 4 thresholds (4 packed 8-bit counters in one uint32 accumulator) and keeps the tightest
    bracket. Thresholds come from regula falsi -- the count taken as linear in value across the
    bracket, aiming at count ``k - 1/2`` with a spread for sampling noise and the model error seen
    in the previous pass -- and one of them is the bisection point of the integer range whenever a
    pass failed to halve it, which bounds the number of passes (at most ~2 per bit of the float).
    When a pass leaves the bracket's population unchanged (ties or gaps) a snap pass moves both ends
    onto the nearest data values, and the next pass probes those values for ties. A row is finished
    when some threshold has exactly ``k`` entries at or above it (then ``v_k = min{x >= lo}``) or
    ``k - 1`` (then ``v_k = max{x < hi}``), or when the bracket holds one representable value; a
    final masked min/max sweep reads off the exact entry. Once at most 1/8 of many rows (at least
    32, with 2¹⁶ entries in all) are unfinished, those rows are gathered into a small block and
    finished there. Start: one min/max sweep and a first pass hedging between value-linear,
    value-halved and integer-linear interpolation and bisection; or, with ``guess``, 4 thresholds
    within about +-1% of it (expanding geometrically if it misses); or, for axes longer than 2**14,
    4 order statistics of a 1/64 strided sample (found the same way). A selection typically takes a
    handful of full sweeps, fewer from a good guess.

    Notes: XLA:CPU flushes subnormal floats to zero in comparisons, so subnormal entries are treated
    as zeros (a subnormal k-th value is returned as 0.0, by either method, so that every device
    gives the same value). Under ``jax.vmap`` the loop itself is never batched: a custom batching
    rule treats a batch of arrays as one array whose rows are all the members' rows (one loop for
    the batch), and runs the members one after another (``lax.map``) when only ``k`` or ``guess`` is
    batched.

    Args:
      x: real float array (float32 or float64; float16/bfloat16 are handled in float32), at least
        one axis. NaN entries are not supported.
      k: integer scalar or integer array broadcastable to the result shape; may be traced (jit /
        vmap), it is never needed statically.
      axis: the axis to select along (default -1).
      guess: optional warm start, broadcastable to the result shape (e.g. the value returned at the
        previous iteration of an outer solver). It only affects speed, never the result (the sort
        ignores it).
      method: ``"count"`` (the counting selection above), ``"sort"`` (``jnp.sort`` along the axis,
        then an index: fully batched under ``vmap``, no loop) or ``"auto"`` (default): counting when
        the program is lowered for a CPU; for GPUs and TPUs sorting below 2²² entries (under
        ``vmap``, all the members of the batch together) and counting from there.
        ``lax.platform_dependent``, resolved at compile time, so only the chosen one is compiled.
        The value is the same.
      gather: counting only: once few rows are left unfinished, gather them into a small block and
        finish them there (above). Faster over many rows, at the price of a second loop in the
        compiled program; ``False`` suits a selection made once inside a larger program, such as a
        solver's initialisation. The value is the same. Blocks under 2¹⁶ entries (200 × 200) never
        gather: a pass over them is too cheap for it to pay. Default True.

    Returns:
      An array of ``x.dtype`` and of ``x.shape`` without ``axis``; no gradient flows through it
      (``lax.stop_gradient``).
    """
    x = lax.stop_gradient(jnp.asarray(x))
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"kth_largest needs a real floating-point array, got {x.dtype}")
    k = jnp.asarray(k)
    if not jnp.issubdtype(k.dtype, jnp.integer):
        raise TypeError(f"k must be an integer, got {k.dtype}")
    if k.dtype.itemsize < 4:
        k = k.astype(jnp.int32)  # n − k in an int8/uint8 k wrapped around (sort: 39.0 for 295.0)
    if x.ndim == 0:
        raise ValueError("kth_largest needs an array with at least one axis, got a scalar")
    index = _checks.as_int(axis)
    if index is None or not -x.ndim <= index < x.ndim:
        raise ValueError(
            f"axis must be an integer in [{-x.ndim}, {x.ndim}) for an array of shape {x.shape}, "
            f"got {axis!r}"
        )
    out_shape = x.shape[: index % x.ndim] + x.shape[index % x.ndim + 1 :]
    for name, v in (("k", k), ("guess", guess)):
        if v is not None and not _broadcasts_to(jnp.shape(v), out_shape):
            raise ValueError(
                f"{name} must broadcast to the result's shape {out_shape} (x's shape {x.shape} "
                f"without axis {axis}), got shape {jnp.shape(v)}"
            )
    dtype = x.dtype
    if dtype not in (jnp.float32, jnp.float64):
        x = x.astype(jnp.float32)  # exact for float16 / bfloat16
    guess = () if guess is None else (lax.stop_gradient(jnp.asarray(guess, x.dtype)),)
    if method not in ("auto", "count", "sort"):
        raise ValueError(f"method must be 'auto', 'count' or 'sort', got {method!r}")
    gather = _checks.check_flag(gather, "gather")
    return lax.stop_gradient(
        _kth(x, k, guess, axis=index % x.ndim, method=method, gather=gather).astype(dtype)
    )


def _broadcasts_to(shape, target) -> bool:
    """Whether an array of ``shape`` broadcasts to ``target`` (NumPy's rule, and not to something
    larger)."""
    try:
        return np.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


@functools.partial(jax.jit, static_argnames=("axis", "method", "gather"))
def _kth(x, k, guess, *, axis, method, gather):
    """The selection itself, as one program: called outside ``jit`` (a data generator, a notebook
    cell) its loops and passes compiled op by op, each call again."""
    if method == "auto":
        return _auto_selector(axis, gather)(x, k, *guess)
    if method == "count":
        return _selector(axis, gather)(x, k, *guess)
    return _kth_by_sort(x, k, axis)


def _kth_by_sort(x, k, axis):
    """kth_largest by ``jnp.sort`` along ``axis`` and an index (x float32/float64, axis >= 0).

    Same conventions as the counting selection: k <= 0 gives +inf, k > n gives -inf, a zero or
    subnormal k-th value is returned as +0.0 (the sort itself orders subnormals as the device
    compares them; the value at the k-th place is then the same as by counting).
    """
    n = x.shape[axis]
    out_shape = x.shape[:axis] + x.shape[axis + 1 :]
    k = jnp.broadcast_to(k, out_shape)
    inf = jnp.asarray(jnp.inf, x.dtype)
    if n == 0:
        return jnp.where(k <= 0, inf, -inf)
    ascending = jnp.sort(x, axis=axis)
    place = jnp.expand_dims(jnp.clip(n - k, 0, n - 1), axis)
    v = jnp.squeeze(jnp.take_along_axis(ascending, place, axis=axis), axis)
    # ±0, subnormals → +0.0
    v = jnp.where(jnp.abs(v) < jnp.finfo(x.dtype).tiny, jnp.zeros((), x.dtype), v)
    return jnp.where(k <= 0, inf, jnp.where(k > n, -inf, v))
