"""Exact k-th largest selection by counting passes (no sort)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["kth_largest"]

_M = 4  # thresholds per counting pass (packed as 4 x 8-bit fields of a uint32)
_BITS = 32 // _M
_CHUNK = (1 << _BITS) - 1  # max entries summed into one packed field
_GUESS_OFFSETS = (-3, -1, 1, 3)  # warm-start thresholds, in units of _GUESS_STEP ulps
_Z = (-1.0, 0.0, 1.0)  # interpolated targets: k + 1/2 + z * spread


def _int_type(dtype):
    return {np.dtype(np.float32): jnp.int32, np.dtype(np.float64): jnp.int64}[np.dtype(dtype)]


def _to_key(v, itype):
    """Order-preserving map float -> int (``-0.0`` and ``+0.0`` both map to 0)."""
    i = lax.bitcast_convert_type(v, itype)
    return jnp.where(i < 0, -(i & jnp.iinfo(itype).max), i)


def _from_key(key, ftype):
    i = jnp.where(key < 0, (-key) | jnp.iinfo(key.dtype).min, key)
    return lax.bitcast_convert_type(i, ftype)


def _avg(a, b):
    """floor((a + b) / 2) without overflow."""
    return (a >> 1) + (b >> 1) + (a & b & 1)


def _chunking(n):
    """Split n = q * c + r with c <= _CHUNK (prefer an exact divisor)."""
    if n <= _CHUNK:
        return 1, n, 0
    for c in range(_CHUNK, _CHUNK // 2, -1):
        if n % c == 0:
            return n // c, c, 0
    return n // _CHUNK, _CHUNK, n % _CHUNK


def _packed_counts(x3, t):
    """counts[p, i, s] = #{j : x3[p, j, s] >= t[p, i, s]} for the _M thresholds."""
    pre, n, post = x3.shape
    q, c, r = _chunking(n)
    mask = jnp.uint32((1 << _BITS) - 1)

    def part(xp):  # xp: (pre, q', c', post) -> packed sums (pre, q', post)
        acc = jnp.uint32(0)
        for i in range(_M):
            acc = acc + jnp.where(xp >= t[:, None, i:i + 1, :], jnp.uint32(1 << (_BITS * i)), jnp.uint32(0))
        return jnp.sum(acc, axis=2, dtype=jnp.uint32)

    packed = part(x3[:, : q * c].reshape(pre, q, c, post))
    if r:
        packed = jnp.concatenate([packed, part(x3[:, q * c:][:, None])], axis=1)
    fields = [jnp.sum((packed >> (_BITS * i)) & mask, axis=1, dtype=jnp.int32) for i in range(_M)]
    return jnp.stack(fields, axis=1)


def _select(x3, k, guess, stats=False):
    pre, n, post = x3.shape
    ftype = x3.dtype
    itype = _int_type(ftype)
    mbits = jnp.finfo(ftype).nmant
    key_inf = _to_key(jnp.asarray(jnp.inf, ftype), itype)
    lo_sent, hi_sent = -key_inf, key_inf + 1
    to_key = lambda v: _to_key(v, itype)
    from_key = lambda kk: _from_key(kk, ftype)
    kk = jnp.clip(k, 1, n).astype(jnp.int32)
    n32 = jnp.int32(n)

    def count_pass(t_keys, lo, hi, clo, chi):
        t_keys = jnp.clip(t_keys, lo[:, None] + 1, hi[:, None] - 1)
        cnt = _packed_counts(x3, from_key(t_keys))
        ge = cnt >= kk[:, None]
        big = jnp.iinfo(itype).max
        new_lo = jnp.maximum(lo, jnp.max(jnp.where(ge, t_keys, -big), axis=1))
        new_clo = jnp.where(new_lo == lo, clo, jnp.min(jnp.where(ge, cnt, n32 + 1), axis=1))
        new_hi = jnp.minimum(hi, jnp.min(jnp.where(ge, big, t_keys), axis=1))
        new_chi = jnp.where(new_hi == hi, chi, jnp.max(jnp.where(ge, -1, cnt), axis=1))
        return new_lo, new_hi, new_clo, new_chi

    def snap_pass(lo, hi):
        a = jnp.min(jnp.where(x3 >= from_key(lo)[:, None], x3, jnp.inf), axis=1)
        b = jnp.max(jnp.where(x3 <= from_key(hi - 1)[:, None], x3, -jnp.inf), axis=1)
        return to_key(a), to_key(b) + 1

    def propose(lo, hi, clo, chi):
        lo_v, hi_v = from_key(lo), from_key(hi)
        finite = jnp.isfinite(lo_v) & jnp.isfinite(hi_v)
        mid = _avg(lo, hi)
        j = (clo - chi).astype(ftype)
        need = (kk - chi).astype(ftype)
        spread = jnp.sqrt(need * (j - need) / j) + 0.5
        keys = [mid]
        for z in _Z:
            u = jnp.clip((need - 0.5 + z * spread) / j, 0.0, 1.0)  # fraction of [lo, hi) above t
            t = hi_v * (1 - u) + lo_v * u
            keys.append(jnp.where(finite, to_key(t), _avg(lo, mid) if z < 0 else _avg(mid, hi)))
        return jnp.stack(keys, axis=1)

    def done(lo, hi, clo):
        return (clo == kk) | (hi - lo <= 1)

    shape = (pre, post)
    if guess is None:
        lo = to_key(jnp.min(x3, axis=1))
        hi = to_key(jnp.max(x3, axis=1)) + 1
        clo = jnp.full(shape, n32)
        chi = jnp.zeros(shape, jnp.int32)
        need_snap = jnp.zeros(shape, bool)
        npass = 1
    else:
        g = to_key(guess.astype(ftype))
        step = 1 << (mbits - 7)
        lo, hi = jnp.full(shape, lo_sent, itype), jnp.full(shape, hi_sent, itype)
        clo, chi = jnp.full(shape, n32), jnp.zeros(shape, jnp.int32)
        t = jnp.stack([g + o * step for o in _GUESS_OFFSETS], axis=1)
        lo, hi, clo, chi = count_pass(t, lo, hi, clo, chi)
        need_snap = (lo == lo_sent) | (hi == hi_sent)
        npass = 1

    def cond(s):
        lo, hi, clo, chi, need_snap, it, ns = s
        return jnp.any(~done(lo, hi, clo))

    def body(s):
        lo, hi, clo, chi, need_snap, it, ns = s
        active = ~done(lo, hi, clo)

        def do_snap(_):
            nlo, nhi = snap_pass(lo, hi)
            return nlo, nhi, clo, chi, jnp.zeros_like(need_snap), ns + 1

        def do_count(_):
            nlo, nhi, nclo, nchi = count_pass(propose(lo, hi, clo, chi), lo, hi, clo, chi)
            stall = (nclo - nchi) == (clo - chi)
            return nlo, nhi, nclo, nchi, stall | (nlo == lo_sent) | (nhi == hi_sent), ns

        out = lax.cond(jnp.any(active & need_snap), do_snap, do_count, None)
        return out[:4] + (out[4], it + 1, out[5])

    lo, hi, clo, chi, need_snap, it, ns = lax.while_loop(
        cond, body, (lo, hi, clo, chi, need_snap, jnp.int32(npass), jnp.int32(0))
    )
    ans = jnp.min(jnp.where(x3 >= from_key(lo)[:, None], x3, jnp.inf), axis=1)
    ans = from_key(to_key(ans))
    ans = jnp.where(k <= 0, jnp.inf, jnp.where(k > n, -jnp.inf, ans)).astype(ftype)
    if stats:
        return ans, it + 1, ns
    return ans


def kth_largest(x, k, *, axis=-1, guess=None, _stats=False):
    x = lax.stop_gradient(jnp.asarray(x))
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"kth_largest expects a real floating array, got {x.dtype}")
    axis = axis % x.ndim
    n = x.shape[axis]
    out_shape = x.shape[:axis] + x.shape[axis + 1:]
    pre, post = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1:])
    k = jnp.broadcast_to(jnp.asarray(k), out_shape).reshape(pre, post)
    if guess is not None:
        guess = lax.stop_gradient(jnp.broadcast_to(jnp.asarray(guess), out_shape).reshape(pre, post))
    res = _select(x.reshape(pre, n, post), k, guess, stats=_stats)
    if _stats:
        return (res[0].reshape(out_shape),) + res[1:]
    return res.reshape(out_shape)
