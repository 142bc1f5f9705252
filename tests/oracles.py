"""Test oracles: second, slower implementations of library operators, kept out of the package.

* :func:`path_norm_prox_mfb`: the exact 1-path-norm prox by the paper's own procedure (Latorre
  et al., ICML 2020, Algorithms 5 + 3), against ``pathnorm.path_norm_prox`` (a bisection per s_v
  and a closed-form objective).
* :func:`sparsify_top_fraction_topk`: ScaledGD's sparsifier T_α through ``lax.top_k``, against
  ``prox.sparsify_top_fraction`` (a counting selection).

They share the library's input checks and its rounding rule for exact zeros (so that the two sides
agree on what they refuse and on ties), not its search.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from lowrank_jax import _checks
from lowrank_jax.pathnorm.prox import (
    _check_pair,
    _finish_prox,
    _pair_coefficients,
    _prefix,
    _rounding_of_entries,
)
from lowrank_jax.prox import _check_fraction, apply_top_fraction, top_fraction_count

# -- the paper's boundary walk (Algorithms 5 + 3) -------------------------------------------------


def _h_sorted(v, w, a, b, lam):
    return 0.5 * jnp.sum((v - a) ** 2) + 0.5 * jnp.sum((w - b) ** 2) + lam * jnp.sum(v) * jnp.sum(w)


def _mfb_unit(x, y, lam):
    p, m = x.shape[0], y.shape[0]
    dtype = x.dtype
    px, py = jnp.argsort(-jnp.abs(x)), jnp.argsort(-jnp.abs(y))
    a, b = jnp.abs(x)[px], jnp.abs(y)[py]
    A, B = _prefix(a), _prefix(b)
    ka, kb = jnp.arange(p), jnp.arange(m)

    eps = jnp.finfo(dtype).eps

    def candidate(sv, sw):
        d, cv, cw = _pair_coefficients(lam, sv.astype(dtype), sw.astype(dtype), A[sv], B[sw])
        v = jnp.where(ka < sv, a + cv, 0)
        w = jnp.where(kb < sw, b + cw, 0)
        return d, v, w

    def record(state, sv, sw):
        best_h, best_v, best_w = state
        d, v, w = candidate(sv, sw)
        # Entries that are 0 up to rounding become exactly 0 (see _rounding_of_entries).
        ev, ew = _rounding_of_entries(lam, sv.astype(dtype), sw.astype(dtype), A[sv], B[sw], d)
        v = jnp.where(v > eps * a + ev, v, 0)
        w = jnp.where(w > eps * b + ew, w, 0)
        h = _h_sorted(v, w, a, b, lam)
        better = h < best_h
        return (
            jnp.where(better, h, best_h),
            jnp.where(better, v, best_v),
            jnp.where(better, w, best_w),
        )

    def cond(c):
        sv, sw = c[0], c[1]
        return (sv <= p) & (sw >= 0)

    def body(c):
        sv, sw, maximal, best = c
        d, v, w = candidate(sv, sw)
        v_last = jnp.where(sv > 0, v[jnp.maximum(sv - 1, 0)], 0)
        w_last = jnp.where(sw > 0, w[jnp.maximum(sw - 1, 0)], 0)
        infeasible = (v_last < 0) | (w_last < 0) | (d <= 0)
        emit = infeasible & maximal
        best = jax.tree.map(
            lambda new, old: jnp.where(emit, new, old), record(best, sv - 1, sw), best
        )
        return (
            jnp.where(infeasible, sv, sv + 1),
            jnp.where(infeasible, sw - 1, sw),
            ~infeasible,
            best,
        )

    init_best = (jnp.array(jnp.inf, dtype), jnp.zeros(p, dtype), jnp.zeros(m, dtype))
    sv, sw, _, best = lax.while_loop(
        cond, body, (jnp.array(0), jnp.array(m), jnp.array(True), init_best)
    )
    best = jax.tree.map(
        lambda new, old: jnp.where(sv == p + 1, new, old),
        record(best, jnp.minimum(sv - 1, p), jnp.maximum(sw, 0)),
        best,
    )
    _, v, w = best
    v_out = jnp.zeros(p, dtype).at[px].set(v) * jnp.sign(x)
    w_out = jnp.zeros(m, dtype).at[py].set(w) * jnp.sign(y)
    return v_out, w_out


def path_norm_prox_mfb(W_in, W_out, strength):
    """``path_norm_prox`` by the paper's Algorithm 5 (walk along the maximal feasibility boundary
    from (s_v, s_w) = (0, m): a step right while the candidate is feasible, else a step down,
    recording each boundary pair) and Algorithm 3 (keep the best recorded candidate, evaluated with
    explicit vectors). O(m + p) candidates per unit after an argsort; ``vmap``-ed over units.

    Conventions the paper leaves open: no entry to check when s_v = 0 or
    s_w = 0; feasible means ≥ 0 and s_v s_w < λ⁻² strictly. Entries of the recorded candidates that
    are 0 up to rounding are returned as exact zeros (as ``path_norm_prox`` does).
    """
    W_in, W_out, lam = _check_pair(W_in, W_out, strength)
    v, w = _mfb_units(W_out.T, W_in, lam)
    return _finish_prox(lam, W_in, W_out, w, v.T)


_mfb_units = jax.jit(jax.vmap(_mfb_unit, in_axes=(0, 0, None)))


# -- T_α by lax.top_k ------------------------------------------------------------------------------


def sparsify_top_fraction_topk(x: jax.Array, alpha: float) -> jax.Array:
    """T_α through ``lax.top_k`` (``alpha`` must be concrete: k = ⌊α n⌋ is a static size).

    Same result as ``prox.sparsify_top_fraction``: an entry of ``x`` (n1, n2) survives if its
    magnitude is at or above the ⌊α n2⌋-th largest of its row and the ⌊α n1⌋-th largest of its
    column. On GPU/TPU ``top_k`` is fast; on XLA's CPU backend it is ~100x slower than the counting
    selection for k in the hundreds. Refuses ``alpha`` outside [0, 1] by name and takes integer
    ``x`` in the default float, as the library's operator does; an ``alpha`` closed over in the
    caller's ``jit`` gives static counts.
    """
    _check_fraction(alpha)
    x = _checks.as_floating(x)
    if x.ndim != 2:
        raise ValueError(f"x must be a 2-D matrix (n1, n2), got shape {tuple(x.shape)}")
    n1, n2 = x.shape
    if not _checks.is_concrete(alpha):
        raise ValueError(
            "sparsify_top_fraction_topk needs a concrete alpha (k = ⌊α n⌋ is a static "
            "size); use prox.sparsify_top_fraction for a traced alpha"
        )
    with jax.ensure_compile_time_eval():  # also for an alpha closed over in the caller's jit
        kr, kc = int(top_fraction_count(alpha, n2)), int(top_fraction_count(alpha, n1))
    mag = jnp.abs(x)
    inf = jnp.array(jnp.inf, x.dtype)
    row_cut = lax.top_k(mag, kr)[0][:, -1] if kr > 0 else jnp.full((n1,), inf)
    col_cut = lax.top_k(mag.T, kc)[0][:, -1] if kc > 0 else jnp.full((n2,), inf)
    return apply_top_fraction(x, mag, row_cut, col_cut)
