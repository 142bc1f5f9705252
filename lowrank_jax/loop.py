"""The one place that runs an update rule: a fixed number of times, or until a tolerance.

An update rule is a pure function ``step(k, state) -> (state, diag)`` where ``k`` is the 0-based
iteration index (an int32 scalar; rules with per-iteration hyperparameters index their arrays
with it) and ``diag`` is a pytree of per-iteration diagnostics (usually scalars). Both drivers run
inside ``jit`` and return a :class:`LoopResult` whose ``history`` stacks ``diag`` along a leading
axis of length ``num_steps`` / ``max_iter``.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

Step = Callable[[jax.Array, Any], tuple[Any, Any]]


class LoopResult(NamedTuple):
    state: Any  # final state
    history: Any  # diag pytree, leading axis = iteration; rows past n_iter are NaN (floats) / -1 (ints)
    n_iter: jax.Array  # number of steps actually taken (int32)


def _blank_like(diag):
    """Padding for history rows that were never written: NaN for floats, -1 for integers."""
    def blank(x):
        x = jnp.asarray(x)
        fill = jnp.nan if jnp.issubdtype(x.dtype, jnp.inexact) else -1
        return jnp.full(x.shape, fill, x.dtype)
    return jax.tree.map(blank, diag)


def run_fixed(step: Step, state, num_steps: int, *, start: int = 0) -> LoopResult:
    """Run ``step`` exactly ``num_steps`` times with ``lax.scan`` (reverse-mode differentiable)."""
    def body(s, k):
        return step(k, s)

    ks = jnp.arange(start, start + num_steps, dtype=jnp.int32)
    state, history = lax.scan(body, state, ks)
    return LoopResult(state, history, jnp.asarray(num_steps, jnp.int32))


def run_until(step: Step, state, *, max_iter: int, stop: Callable[[Any, Any], jax.Array],
              start: int = 0, differentiable: bool = False) -> LoopResult:
    """Run ``step`` until ``stop(state, diag)`` is true or ``max_iter`` steps were taken.

    ``differentiable=False`` uses ``lax.while_loop``: steps after the stop are never executed, but
    reverse-mode autodiff is unavailable. ``differentiable=True`` uses a ``lax.scan`` of length
    ``max_iter`` whose body is a ``lax.cond`` that skips the work once stopped, so ``grad`` works.
    Either way the history rows after the last step are padding (NaN / -1).
    """
    # Trace one step abstractly to learn the diagnostics' structure for the history buffer.
    _, diag_shape = jax.eval_shape(lambda s: step(jnp.asarray(start, jnp.int32), s), state)
    blank = _blank_like(jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), diag_shape))
    history0 = jax.tree.map(lambda b: jnp.broadcast_to(b, (max_iter,) + b.shape), blank)

    def advance(i, s, hist):
        s, diag = step(start + i, s)
        hist = jax.tree.map(lambda h, d: h.at[i].set(d), hist, diag)
        return s, hist, stop(s, diag)

    if not differentiable:
        def cond(carry):
            i, _, _, done = carry
            return (i < max_iter) & jnp.logical_not(done)

        def body(carry):
            i, s, hist, _ = carry
            s, hist, done = advance(i, s, hist)
            return i + 1, s, hist, done

        carry = (jnp.asarray(0, jnp.int32), state, history0, jnp.asarray(False))
        n, state, history, _ = lax.while_loop(cond, body, carry)
        return LoopResult(state, history, n)

    def scan_body(carry, i):
        n, s, hist, done = carry

        def go(args):
            n, s, hist = args
            s, hist, d = advance(i, s, hist)
            return n + 1, s, hist, d

        def skip(args):
            n, s, hist = args
            return n, s, hist, jnp.asarray(True)

        return lax.cond(done, skip, go, (n, s, hist)), None

    carry = (jnp.asarray(0, jnp.int32), state, history0, jnp.asarray(False))
    (n, state, history, _), _ = lax.scan(scan_body, carry, jnp.arange(max_iter, dtype=jnp.int32))
    return LoopResult(state, history, n)
