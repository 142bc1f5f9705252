"""Progress bars for long runs: the one place that makes the optional ``tqdm`` bar, and that lets a
compiled program advance it.

* ``bar`` — a ``tqdm.auto`` bar, or a silent stand-in when it is switched off or ``tqdm`` is not
  installed (it comes with the ``experiments`` extra, which ``make demo`` / ``make test`` install).
* ``CompiledBar`` — a bar advanced from inside ``jit`` / ``vmap`` / ``shard_map`` through
  ``jax.debug.callback``. The compiled program only knows whether progress is on (a static flag),
  so a new bar never recompiles it; the bar that is open (a context manager around the call)
  receives the callbacks.
"""

from __future__ import annotations

import threading
import warnings

import jax
import numpy as np

from lowrank_jax import _checks


class NoBar:
    """The silent stand-in of a tqdm bar: the same methods, doing nothing.

    Attributes:
      n: the count shown, always 0.
    """

    n = 0

    def update(self, n=1):
        """Do nothing (a tqdm bar would advance by ``n``).

        Args:
          n: the increment, ignored.
        """
        pass

    def set_postfix(self, **kwargs):
        """Do nothing (a tqdm bar would show ``kwargs`` after the count).

        Args:
          **kwargs: ignored.
        """
        pass

    def close(self):
        """Do nothing (a tqdm bar would close)."""
        pass


def bar(total: int, desc: str, unit: str, show: bool = True):
    """A ``tqdm.auto`` bar, or ``NoBar`` when it is switched off or tqdm is not installed.

    Args:
      total: the number of units at 100 %.
      desc: the bar's label.
      unit: the name of one unit (``"point"``, ``"epoch"``, ...).
      show: False for a ``NoBar`` (default True).

    Returns:
      A ``tqdm.auto.tqdm`` bar or a ``NoBar``.
    """
    if not show:
        return NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return NoBar()
    return tqdm(total=total, desc=desc, unit=unit)


def wanted(progress, *args) -> bool:
    """``progress`` as a checked flag, switched off with a warning when the call is being traced.

    A call is traced when one of ``args`` holds a tracer: inside the user's ``jit``/``vmap`` or a
    ``lowrank_jax.sweep.run``. A ``CompiledBar`` opened there would open and close while
    the program is traced and stay at 0 while it runs; the enclosing sweep's own bar shows instead.

    Args:
      progress: the caller's ``progress`` argument, a bool (anything else raises ``TypeError``
        naming it).
      *args: the call's array arguments (pytrees), inspected for tracers.

    Returns:
      True when a bar should be shown, else False.
    """
    progress = _checks.check_flag(progress, "progress")
    if progress and not all(_checks.is_concrete(a) for a in jax.tree.leaves(args)):
        warnings.warn(
            "progress=True has no effect on a traced call (inside jit, vmap or sweep.run): its bar "
            "would close before the program runs; use the sweep's own progress bar",
            stacklevel=3,
        )
        return False
    return progress


class CompiledBar:
    """A progress bar that a compiled program moves through ``jax.debug.callback``.

    The program calls ``jax.debug.callback(CompiledBar.advance, count)`` or
    ``jax.debug.callback(CompiledBar.reach, done)`` (``functools.partial(..., channel=name)`` for a
    named channel). Open the bar around the call of the program (``with CompiledBar(total, desc,
    unit, show, channel): f(...)``); callbacks go to the innermost open bar of their channel and are
    ignored while none is open. Channels keep bars apart: a sweep's bar of points ("sweep") and a
    training loop's bar of epochs ("training") inside the swept function do not move each other, and
    a bar that closes (one opened while the sweep was traced, say) leaves the bars around it open. A
    bar with ``show=False`` takes no callbacks. Callbacks may come from several devices at once (a
    sharded program), so updates take a lock. The count never passes ``total`` (a sweep padded to a
    multiple of the device count evaluates a few points twice).

    ``CompiledBar(total, desc, unit, show=True, channel="default")``: ``total``, ``desc``, ``unit``
    and ``show`` as in ``bar`` (``show=False``: a silent bar), ``channel`` the name of the
    channel the bar listens on.

    Attributes:
      total: the number of units at 100 % (lowered by ``finish`` for a run that ends early).
      channel: the channel's name.
      bar: the underlying ``tqdm`` bar or ``NoBar``.
    """

    _active: dict[str, list[CompiledBar]] = {}
    _lock = threading.Lock()

    def __init__(
        self, total: int, desc: str, unit: str, show: bool = True, channel: str = "default"
    ):
        self.total = int(total)
        self.channel = channel
        self.bar = bar(self.total, desc, unit, show)

    def __enter__(self):
        if not isinstance(self.bar, NoBar):
            with CompiledBar._lock:
                CompiledBar._active.setdefault(self.channel, []).append(self)
        return self

    def __exit__(self, *exc):
        with CompiledBar._lock:
            stack = CompiledBar._active.get(self.channel, [])
            if any(b is self for b in stack):
                stack.remove(self)
        self.bar.close()

    @classmethod
    def current(cls, channel: str = "default") -> CompiledBar | None:
        """The innermost open bar of ``channel``.

        Args:
          channel: the channel's name (default ``"default"``).

        Returns:
          The ``CompiledBar``, or None when none is open.
        """
        stack = cls._active.get(channel)
        return stack[-1] if stack else None

    def _move_to(self, done: int):
        done = min(done, self.total)
        if done > self.bar.n:
            self.bar.update(done - self.bar.n)

    def finish(self, done: int | None = None):
        """Show the work as done, for a caller that knows it is (a sweep whose outputs are ready).

        XLA may drop the callbacks of a program whose outputs are all empty (dead code), so a bar
        can stall short of its total while the work is done.

        Args:
          done: the units actually done, or None (default) for ``total``. A value below the total (a
            loop that met its tolerance early) becomes the bar's total, so it ends at done/done
            rather than stalled part way.
        """
        with CompiledBar._lock:
            if done is not None and 0 <= int(done) < self.total and not isinstance(self.bar, NoBar):
                self.total = self.bar.total = int(done)
                if hasattr(self.bar, "refresh"):
                    self.bar.refresh()
            self._move_to(self.total)

    @classmethod
    def advance(cls, count, channel: str = "default"):
        """Add the sum of ``count`` to the innermost open bar of ``channel`` (a program's callback).

        Args:
          count: an array of counts: under ``vmap`` the callback may receive the counts of a whole
            batch at once, or fire once per member.
          channel: the channel's name (default ``"default"``).
        """
        with cls._lock:
            target = cls.current(channel)
            if target is not None:
                target._move_to(target.bar.n + int(np.sum(np.asarray(count))))

    @classmethod
    def reach(cls, done, channel: str = "default"):
        """Show at least ``max(done)`` on the innermost open bar of ``channel`` (a callback).

        Idempotent: repeated or batched callbacks of one step agree.

        Args:
          done: an array of the units done so far.
          channel: the channel's name (default ``"default"``).
        """
        with cls._lock:
            target = cls.current(channel)
            if target is not None:
                target._move_to(int(np.max(np.asarray(done))))


__all__ = ["CompiledBar", "NoBar", "bar", "wanted"]
