"""The result contract every iterative solver follows: a status, a count, final diagnostics, a
history.

Every solver (``rpca.lrpca``, ``rpca.scaledgd``, ``rpca.altproj``, ``regression.newton_solve``,
``sdl.fit``, ``covariance.decompose``, ``pathnorm.train``, …) returns a subclass of ``Result``:

- ``status``: int32 array, a ``Status`` code (why the run stopped);
- ``n_iter``: int32 array, the iterations run;
- the final value of each diagnostic as a field of its own (``out.residual``, ``out.error``, …);
- ``history``: a dict of the same diagnostics per iteration, a leading axis of length ``max_iter``
  (rows past ``n_iter`` are NaN for floats, -1 for integers, False for booleans);
- then the family's solution fields (``L``, ``R``, ``X``, ``S``; ``x``; ``model``; …).

Results are ``equinox.Module`` pytrees: they pass through ``jit`` and ``vmap`` (a vmapped run has a
batch axis on every field, ``status`` included) and print as one readable line.

Failure: every solver takes ``throw`` (default True). With ``throw=True`` a run that ends in
``Status.DIVERGED`` or ``Status.INVALID`` raises a ``RuntimeError`` naming the cause,
called directly and inside ``jax.jit``/``jax.vmap``/``lowrank_jax.sweep.run`` alike (an
``equinox.error_if`` in the compiled program). With ``throw=False`` nothing is raised: the status
says what happened, and in a sweep the other points are unaffected. A run whose answer fails its
family's sanity check ends in ``Status.UNRELIABLE``: never raised, warned about when the status
is concrete.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import _checks


class Status(enum.IntEnum):
    """Why an iterative solver stopped.

    The codes are plain integers: compare ``out.status`` with them
    (``out.status == Status.CONVERGED``), also on a vmapped batch of results.

    Attributes:
      CONVERGED: 0, the stopping rule met ``tol``.
      MAX_ITER: 1, ``max_iter`` iterations ran; with ``tol=None`` that is the requested run.
      DIVERGED: 2, the iterate became non-finite or grew without bound; the run stopped there.
      INVALID: 3, a traced hyperparameter broke its rule (a sweep point with a negative ``tol``,
        say), which cannot raise at the boundary; the solution fields are NaN.
      UNRELIABLE: 4, the run ended normally but its answer fails the family's sanity check (a
        robust PCA whose sparse part S is dense: the method left the regime it assumes). Nothing
        is raised; a direct call warns, naming what to do instead.
    """

    CONVERGED = 0
    MAX_ITER = 1
    DIVERGED = 2
    INVALID = 3
    UNRELIABLE = 4

    @classmethod
    def describe(cls, code) -> str:
        """The name of a concrete status code, e.g. ``"CONVERGED"``.

        Args:
          code: a status code, an int or a 0-d array holding a value (not a tracer).

        Returns:
          The member's name, a string.
        """
        return cls(int(code)).name


class Result(eqx.Module):
    """The core every solver's result shares (see the module docstring).

    A family's result subclasses it with the final value of each diagnostic and the solution fields.
    ``out.converged`` is ``status == Status.CONVERGED``.

    Attributes:
      n_iter: int32, iterations run.
      status: int32, a ``Status`` code.
      history: dict of per-iteration diagnostics, leading axis ``max_iter`` (padded past ``n_iter``:
        NaN for floats, -1 for integers, False for booleans).
    """

    n_iter: jax.Array
    status: jax.Array
    history: dict

    @property
    def converged(self) -> jax.Array:
        """Whether the run converged: ``status == Status.CONVERGED``.

        Returns:
          A boolean array, batched like ``status``.
        """
        return jnp.asarray(self.status) == Status.CONVERGED

    def __repr__(self) -> str:
        """One line when it fits in 78 characters, else wrapped there: the status by name, the
        iteration count and the scalar diagnostics first, then arrays as ``dtype[shape]`` (never
        their values), then the history's keys."""
        scalars: list[str] = []
        arrays: list[str] = []
        names = [f.name for f in dataclasses.fields(self)]
        for name in [n for n in names if n not in ("status", "n_iter", "history")]:
            value = getattr(self, name)
            if value is None:
                continue
            text = f"{name}={_short(value)}"
            is_scalar = isinstance(value, (int, float)) or getattr(value, "ndim", 1) == 0
            (scalars if is_scalar else arrays).append(text)
        parts = [f"status={_status_text(self.status)}", f"n_iter={_short(self.n_iter)}"]
        parts += scalars + arrays
        if self.history:
            inner = [f"{k}={_short(v)}" for k, v in self.history.items()]
            inner[0] = "history={" + inner[0]
            inner[-1] += "}"
            parts += inner
        head = f"{type(self).__name__}("
        return head + _wrap(parts, indent=len(head), width=78) + ")"

    __str__ = __repr__


def _wrap(parts: list[str], indent: int, width: int) -> str:
    """``parts`` joined by ", ", broken into lines of at most ``width`` where it can be."""
    lines, line = [], ""
    for part in parts:
        piece = part if not line else line + ", " + part
        if line and indent + len(piece) + 2 > width:
            lines.append(line + ",")
            line = part
        else:
            line = piece
    lines.append(line)
    return ("\n" + " " * indent).join(lines)


def _status_text(value) -> str:
    try:
        arr = np.asarray(value)
    except Exception:  # a tracer
        return _short(value)
    if arr.ndim == 0:
        return Status.describe(arr)
    codes, counts = np.unique(arr, return_counts=True)
    return "{" + ", ".join(f"{Status.describe(c)}: {n}" for c, n in zip(codes, counts)) + "}"


def _short(value) -> str:
    """A 0-d concrete number as its value; any other array as dtype[shape]; modules as their
    type."""
    if isinstance(value, (int, float, bool, str)):
        return repr(value)
    if isinstance(value, eqx.Module) and not isinstance(value, Result):
        return f"{type(value).__name__}(...)"
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        shape = tuple(value.shape)
        if shape == ():
            try:
                x = np.asarray(value).item()
            except Exception:  # a tracer
                return f"{jnp.dtype(value.dtype).name}[]"
            return f"{x:.4g}" if isinstance(x, float) else repr(x)
        return f"{_dtype_short(value.dtype)}[{','.join(map(str, shape))}]"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_short(v) for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in value.items()) + "}"
    return type(value).__name__


def _dtype_short(dtype) -> str:
    d = jnp.dtype(dtype)
    return {"f": "f", "i": "i", "u": "u", "b": "bool", "c": "c"}.get(d.kind, d.kind) + (
        "" if d.kind == "b" else str(8 * d.itemsize)
    )


R = TypeVar("R", bound=Result)


def finish(
    result: R,
    throw: bool,
    *,
    diverged: str,
    invalid: str | None = None,
    unreliable: Callable[[R], str] | None = None,
) -> R:
    """The failure semantics of a solver: raise on a DIVERGED or INVALID ``result`` when ``throw``,
    warn on an UNRELIABLE one.

    A concrete status (the solver called directly) is judged here, on the host. A traced one (the
    caller's ``jit``, ``vmap``, ``grad`` or a sweep) is judged in the compiled program by
    ``equinox.error_if`` on the whole result, so that the check runs whenever any field is used;
    under ``vmap`` one failing point raises for the batch (pass ``throw=False`` to keep the others).

    Args:
      result: the solver's ``Result``.
      throw: True to raise on failure, False to return ``result`` as it is.
      diverged: the message for a DIVERGED status; it should name the cause and what to change.
      invalid: the message for an INVALID status; default None, a generic one (a traced
        hyperparameter outside its valid range).
      unreliable: ``unreliable(result) -> str``, the ``UserWarning`` for an UNRELIABLE status
        (concrete statuses only, whatever ``throw``: the answer is returned); default None, a
        generic one.

    Returns:
      ``result`` (under tracing, with the check attached to its fields).

    Raises:
      RuntimeError: with ``throw`` true, when ``status`` is DIVERGED or INVALID (any entry of a
        batch).
    """
    status = result.status
    concrete = not isinstance(status, jax.core.Tracer)
    if concrete and np.any(np.asarray(status) == Status.UNRELIABLE):
        _checks.warn_caller(
            unreliable(result)
            if unreliable is not None
            else "the answer failed its sanity check (status UNRELIABLE)"
        )
    if not throw:
        return result
    if invalid is None:
        invalid = (
            "a traced hyperparameter is outside its valid range (negative or NaN tol, a "
            "fraction outside [0, 1], ...); the result is NaN"
        )
    if concrete:
        code = np.asarray(status)
        if np.any(code == Status.DIVERGED):
            raise RuntimeError(diverged)
        if np.any(code == Status.INVALID):
            raise RuntimeError(invalid)
        return result
    return _raise_on_failure(result, diverged, invalid)


def ensure_finite(values, message: str):
    """Raise ``RuntimeError(message)`` when a floating-point entry of ``values`` is NaN or infinite.

    The failure semantics of ``finish`` for a function that returns plain arrays (no status).
    Judged on the host for concrete values, by ``equinox.error_if`` in the compiled program for
    traced ones.

    Args:
      values: an array or pytree; its floating-point leaves are checked.
      message: the error message, naming the cause.

    Returns:
      ``values`` (under tracing, with the check attached).

    Raises:
      RuntimeError: when a floating-point entry of ``values`` is NaN or infinite.
    """
    leaves = [x for x in jax.tree.leaves(values) if jnp.issubdtype(jnp.result_type(x), jnp.inexact)]
    if not leaves:
        return values
    if not any(isinstance(x, jax.core.Tracer) for x in leaves):
        if not all(np.all(np.isfinite(np.asarray(x))) for x in leaves):
            raise RuntimeError(message)
        return values
    bad = jnp.logical_not(jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves])))
    # The message index is traced (0 whatever ``bad`` is): with a constant index, JAX's eager
    # constant folding (jax.ensure_compile_time_eval, as in the host functions) ran the error
    # callback while tracing and raised for finite values.
    return eqx.branched_error_if(values, bad, 0 * bad.astype(jnp.int32), [message])


@eqx.filter_jit
def _raise_on_failure(result, diverged, invalid):
    status = jnp.asarray(result.status)
    bad = (status == Status.DIVERGED) | (status == Status.INVALID)
    index = jnp.clip(status - Status.DIVERGED, 0, 1)
    return eqx.branched_error_if(result, bad, index, [diverged, invalid])
