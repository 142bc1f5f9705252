"""Progress bars for long runs: the one place that makes the optional ``tqdm`` bar, and that lets a
compiled program advance it.

* :func:`bar` — a ``tqdm.auto`` bar, or a silent stand-in when it is switched off or ``tqdm`` is not
  installed (it comes with the ``experiments`` extra, which ``make demo`` / ``make test`` install).
* :class:`CompiledBar` — a bar advanced from inside ``jit`` / ``vmap`` / ``shard_map`` through
  ``jax.debug.callback``. The compiled program only knows whether progress is on (a static flag),
  so a new bar never recompiles it; the bar that is open (a context manager around the call)
  receives the callbacks.
"""

from __future__ import annotations

import threading

import numpy as np


class NoBar:
    """The silent stand-in of a tqdm bar (same methods, does nothing)."""

    n = 0

    def update(self, n=1):
        pass

    def set_postfix(self, **kwargs):
        pass

    def close(self):
        pass


def bar(total: int, desc: str, unit: str, show: bool = True):
    """A ``tqdm.auto`` bar of ``total`` ``unit``s, or :class:`NoBar` when ``show`` is False or tqdm is
    not installed."""
    if not show:
        return NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return NoBar()
    return tqdm(total=total, desc=desc, unit=unit)


class CompiledBar:
    """A bar that a compiled program moves with ``jax.debug.callback(CompiledBar.advance, count)`` or
    ``jax.debug.callback(CompiledBar.reach, done)``.

    Open it around the call of the program (``with CompiledBar(total, desc, unit, show): f(...)``);
    callbacks arriving while no bar is open are ignored. Callbacks may come from several devices at
    once (a sharded program), so updates take a lock. The count never passes ``total`` (a sweep padded
    to a multiple of the device count evaluates a few points twice).
    """

    _active: CompiledBar | None = None
    _lock = threading.Lock()

    def __init__(self, total: int, desc: str, unit: str, show: bool = True):
        self.total = int(total)
        self.bar = bar(self.total, desc, unit, show)

    def __enter__(self):
        CompiledBar._active = self
        return self

    def __exit__(self, *exc):
        CompiledBar._active = None
        self.bar.close()

    def _move_to(self, done: int):
        done = min(done, self.total)
        if done > self.bar.n:
            self.bar.update(done - self.bar.n)

    def finish(self):
        """Show the whole total: for a caller that knows the work is done (a sweep whose outputs are
        ready), since XLA may drop the callbacks of a program whose outputs are all empty (dead code:
        seen on several CPU devices)."""
        with CompiledBar._lock:
            self._move_to(self.total)

    @classmethod
    def advance(cls, count):
        """Add the sum of ``count`` (an array: under ``vmap`` the callback may receive the counts of a
        whole batch at once, or fire once per member)."""
        with cls._lock:
            if cls._active is not None:
                cls._active._move_to(cls._active.bar.n + int(np.sum(np.asarray(count))))

    @classmethod
    def reach(cls, done):
        """Show at least ``max(done)`` (idempotent: repeated or batched callbacks of one step agree)."""
        with cls._lock:
            if cls._active is not None:
                cls._active._move_to(int(np.max(np.asarray(done))))


__all__ = ["CompiledBar", "NoBar", "bar"]
