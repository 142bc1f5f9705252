"""Hyperparameter sweeps: a solver over a grid of points in one jitted, ``vmap``ped call.

Every solver of the toolkit takes its hyperparameters (step sizes, thresholds, λ, ξ, weights, keys)
as traced arrays, so a sweep is ``jax.jit(jax.vmap(f))`` over stacked points. This module adds the
three things a sweep needs beyond that:

* ``grid`` — the Cartesian product of named axes as stacked arrays (keys included), and
  ``keys`` for a key axis;
* ``run`` — ``out[i] = f(**point_i)`` for every point in one compiled program, optionally in
  chunks of ``chunk`` points (``lax.map(..., batch_size=chunk)``) to bound memory, with the point
  axis **sharded across devices** (``jax.sharding.Mesh`` / ``shard_map``; one device: no sharding).
  The point count is padded to a multiple of the device count by repeating the last point, and the
  padding is dropped from the result;
* compilation is cached on ``f`` itself: calling ``run`` again with the same function object
  and point shapes does not recompile (a new ``lambda`` each call does, and so does a bound method
  ``obj.method``, whose function is shared by every instance: wrap it once, ``f = lambda **kw:
  obj.method(**kw)``, and reuse ``f``). As with a reused ``jax.jit(f)``, what ``f`` reads besides
  its arguments (closed-over arrays, ``obj``'s attributes) is frozen at the first trace: changing
  it later does not change the sweep's results. Pass data that changes through ``shared``, or make
  a new function.

Pattern (ScaledGD over step size η and sparsity α, 3 seeds — 48 runs, one call):

    pts = sweep.grid(
        eta=jnp.linspace(0.3, 0.9, 4),
        alpha=jnp.array([0.05, 0.1, 0.15, 0.2]),
        key=sweep.keys(0, 3),
    )
    err = sweep.run(
        lambda eta, alpha, key, Y: rpca.scaledgd(
            Y, r, alpha, eta=eta, max_iter=50, key=key
        ).residual,
        pts,
        shared={"Y": Y},
    )
    err.reshape(4, 4, 3)      # axes in the order given to grid

Only what changes shapes stays static (rank, iteration counts, variant names); sweep those with a
Python loop around ``run``, one compilation each.
"""

from __future__ import annotations

import collections.abc
import contextlib
import functools
import inspect
import numbers
import os
from collections.abc import Callable
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from lowrank_jax import _checks
from lowrank_jax import progress as progress_bar

AXIS = "sweep"
# Platforms whose devices take their block of points one at a time instead of as one vmapped batch
# (see _program); tests empty it to exercise the vmapped branch on CPU devices.
_MAP_PER_POINT_ON = {"cpu"}
_hinted_one_cpu_device = False  # the one-device hint of `run` is given once per process


def _hint_one_cpu_device(devices) -> None:
    """Tell, once, a user who sweeps on JAX's default single CPU device of a multi-core machine
    that the sweep runs on about one core and how to use them all."""
    global _hinted_one_cpu_device
    cores = os.cpu_count() or 1
    if _hinted_one_cpu_device or len(devices) != 1 or devices[0].platform != "cpu" or cores < 2:
        return
    _hinted_one_cpu_device = True
    _checks.warn_caller(
        f"sweep.run: JAX has one CPU device, so this sweep runs on about one of the {cores} cores. "
        f"jax.config.update('jax_num_cpu_devices', {cores}) before JAX's first computation (a "
        "fresh process) gives one device per core, and sweep.run then splits the points over them "
        "(see the Sweeps guide). Pass devices=jax.devices() to silence this."
    )


def _length(name, v) -> int:
    leaves = jax.tree.leaves(v)
    if not leaves:
        if v is None:
            raise ValueError(
                f"sweep axis {name!r} is None: give its values (a 1-D array, a list, or a pytree "
                "of stacked leaves); leave fixed inputs out of the grid (shared= in sweep.run)"
            )
        raise ValueError(f"sweep axis {name!r} is empty")
    sizes = {np.shape(x)[0] if np.ndim(x) else None for x in leaves}
    if None in sizes or len(sizes) != 1:
        raise ValueError(
            f"sweep axis {name!r} needs a leading axis of one length on every leaf, "
            f"got shapes {[np.shape(x) for x in leaves]}"
        )
    size = cast(int, sizes.pop())  # not None: refused above
    if size == 0:
        raise ValueError(f"sweep axis {name!r} is empty")
    return size


def _number_or_nest(x) -> bool:
    """Whether ``x`` is a single leaf (a number, a 0-d array, a key) or a plain list / tuple nest of
    them."""
    if type(x) in (list, tuple):
        return all(_number_or_nest(y) for y in x)
    return jax.tree.structure(x).num_nodes == 1  # type: ignore[attr-defined]  # not in JAX's stubs


def _axis(v):
    """An axis's values as arrays, the points along the first axis of every leaf:

    * a list / tuple / range of scalars — plain numbers, NumPy scalars (``list(np.linspace(...))``),
      0-d arrays or keys; nested lists too — is one array;
    * any other list has one point per element: arrays of one shape (``[w1, w2, w3]``, three weight
      vectors) are stacked, and so are pytrees of one structure, leaf by leaf;
    * any other pytree — a tuple of stacked arrays, a dict — keeps its structure (its leaves are
      already stacked).
    """
    if isinstance(v, range):
        return jnp.asarray(v)
    if isinstance(v, tuple) and any(isinstance(x, (list, tuple)) or np.ndim(x) > 0 for x in v):
        # a pytree of stacked leaves, as the guide says: ([.1, .2, .3], [1., 2., 3.]) is 3 points of
        # pairs, not 2 points of 3-vectors (which it became as one (2, 3) array)
        return jax.tree.map(jnp.asarray, v, is_leaf=lambda x: isinstance(x, list))
    if isinstance(v, (list, tuple)):
        leaves = jax.tree.leaves(list(v))
        # Numbers and plain nests of them only: a list of dicts or of (key, value) pairs with scalar
        # leaves is one point per element (it crashed in jnp.asarray as an object array).
        if all(np.ndim(x) == 0 for x in leaves) and all(_number_or_nest(x) for x in v):
            if not any(
                jnp.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key) for x in leaves
            ):
                return jnp.asarray(v)
            if len(leaves) == len(v):
                return jnp.stack(list(v))  # a list of single keys
            # (key, value) pairs and the like: one point per element, stacked leaf by leaf below
    if isinstance(v, list) and v:
        structures = {jax.tree.structure(x) for x in v}
        shapes = {tuple(np.shape(x) for x in jax.tree.leaves(p)) for p in v}
        if len(structures) != 1 or len(shapes) != 1:
            raise ValueError(
                "a list axis has one point per element, so its elements need one structure and "
                f"shape, got shapes {[jax.tree.map(np.shape, x) for x in v]}; pass a tuple or "
                "dict of arrays already stacked along their first axis for a pytree axis"
            )
        return jax.tree.map(lambda *xs: jnp.stack(xs), *v)
    return jax.tree.map(jnp.asarray, v)


def keys(key, count: int) -> jax.Array:
    """``count`` independent keys split from ``key``: a key axis for ``grid``.

    Args:
      key: a ``jax.random`` key or an integer seed (a traced integer too); anything else raises
        ``TypeError`` naming it.
      count: the number of keys, an integer ≥ 1.

    Returns:
      A key array of shape (count,): ``jax.random.split`` of ``key``
      (``jax.random.key(key)`` for an integer).
    """
    count = _checks.check_positive_int(count, "count")
    return jax.random.split(_checks.as_key(key), count)


def grid(**axes) -> dict[str, Any]:
    """Cartesian product of named axes, first axis slowest (as ``itertools.product``).

    ``result.reshape(*lengths)`` (see ``shape_of``) recovers the grid's shape from a flat result
    of ``run``.

    Args:
      **axes: name → values. Each value is a 1-D array-like, a list of per-point values (arrays or
        pytrees of one shape, which are stacked), or a pytree whose leaves share a leading axis
        (e.g. a key array from ``keys``, or a tuple of stacked parameter arrays). At least one
        axis; an empty or ``None`` axis raises ``ValueError`` naming it.

    Returns:
      A dict of the same names whose leaves have the leading axis N = Π len(axis).
    """
    if not axes:
        raise ValueError("grid needs at least one axis")
    axes = {k: _axis(v) for k, v in axes.items()}
    lengths = [_length(k, v) for k, v in axes.items()]
    index = np.indices(lengths).reshape(len(lengths), -1)  # (axes, N), first axis slowest
    return {k: jax.tree.map(lambda x, i=i: x[index[i]], v) for i, (k, v) in enumerate(axes.items())}


def shape_of(**axes) -> tuple[int, ...]:
    """The grid's shape (one length per axis), to reshape ``run``'s flat results.

    Args:
      **axes: the axes given to ``grid``.

    Returns:
      A tuple of ints, the length of each axis in the order given.
    """
    return tuple(_length(k, _axis(v)) for k, v in axes.items())


def _device_tuple(devices) -> tuple:
    """``devices`` as a tuple of devices: None → all of ``jax.devices()``,
    one device → (device,)."""
    if devices is None:
        return tuple(jax.devices())
    if isinstance(devices, jax.Device):
        return (devices,)
    if isinstance(devices, (str, bytes)) or not hasattr(devices, "__iter__"):
        raise ValueError(
            "devices must be a device or a sequence of devices (e.g. jax.devices()), got "
            f"{devices!r}"
        )
    devices = tuple(devices)
    if not all(isinstance(d, jax.Device) for d in devices):
        raise ValueError(f"devices must hold jax devices (e.g. jax.devices()[:2]), got {devices!r}")
    return devices


def _mesh(devices) -> Mesh | None:
    if not devices:
        raise ValueError(
            "devices is empty: pass None (all of jax.devices()) or at least one device"
        )
    if len(set(devices)) != len(devices):
        raise ValueError(f"devices lists a device more than once: {devices}")
    if len(devices) <= 1:
        return None
    return Mesh(np.array(devices), (AXIS,))


def _place(tree, where):
    """The arrays of ``tree`` put on ``where`` (a device, or a sharding); other leaves as they
    are."""
    return jax.tree.map(
        lambda x: jax.device_put(x, where) if isinstance(x, (jax.Array, np.ndarray)) else x, tree
    )


def _numeric_list_as_array(value):
    """A (nested) list or tuple of plain numbers as one NumPy array, as a direct call of a solver
    takes it; anything else as it is. As a pytree such a list reached the function as separate
    scalars, and a solver refused it ("Y must be an array, got list")."""
    if isinstance(value, (list, tuple)) and value:
        leaves = jax.tree.leaves(value)
        if leaves and all(
            isinstance(x, numbers.Number) and not isinstance(x, bool) for x in leaves
        ):
            try:
                return np.asarray(value)
            except ValueError:  # ragged: leave it to the function to refuse
                return value
    return value


def _counted(one):
    """``one`` followed by a progress callback of one point, issued once the point's first non-empty
    output leaf exists (an optimization barrier ties the count to it, so XLA cannot hoist the
    callback)."""

    def counted(p, s):
        out = one(p, s)
        leaves = [x for x in jax.tree.leaves(out) if jnp.size(x)]
        tie = jnp.ravel(leaves[0])[:1] if leaves else jnp.zeros(1)
        # A count computed from the output and from the point, so that under vmap it is batched and
        # the callback fires for every point even when that output leaf does not depend on the point
        # (an unbatched count would fire once for the whole batch).
        point = [
            jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x
            for x in jax.tree.leaves(p)
            if jnp.size(x)
        ]
        here = jnp.ravel(point[0])[:1] if point else jnp.zeros(1)
        ones = ((tie == tie) | True) & ((here == here) | True)
        count, _ = jax.lax.optimization_barrier((ones.astype(jnp.int32), tie))
        jax.debug.callback(
            functools.partial(progress_bar.CompiledBar.advance, channel="sweep"), count
        )
        return out

    return counted


def _in_chunks(one, chunk: int):
    """``lax.map(one, points, batch_size=chunk)``, also for outputs with zero-size leaves: those
    (which ``lax.map``'s chunking cannot reshape) are left out of the map and come back as zeros of
    their batched shape."""

    def batch(ps, s):
        n = jax.tree.leaves(ps)[0].shape[0]
        shapes, tree = jax.tree.flatten(
            jax.eval_shape(lambda p: one(p, s), jax.tree.map(lambda x: x[0], ps))
        )
        empty = [x.size == 0 for x in shapes]
        kept = lambda p: [x for x, e in zip(jax.tree.leaves(one(p, s)), empty) if not e]
        mapped = iter(jax.lax.map(kept, ps, batch_size=chunk))
        return tree.unflatten(
            [
                jnp.zeros((n, *x.shape), x.dtype) if e else next(mapped)
                for x, e in zip(shapes, empty)
            ]
        )

    return batch


def _program(fn: Callable, chunk: int | None, mesh: Mesh | None, progress: bool = False):
    """The jitted batch program of ``fn`` (points, shared) -> outputs, kept on ``fn`` itself (so it
    lives exactly as long as ``fn`` and no global cache pins closed-over data); objects that take no
    attributes get a fresh one per call.

    With a mesh the program runs under ``shard_map``: each device evaluates its own block of points
    on its own copy of the shared data, and nothing crosses devices (the points are independent, so
    there is nothing for XLA's partitioner to decide). On a mesh of CPU devices each device maps
    over its points one at a time: jaxlib 0.10's batched LAPACK kernels (the SVD, QR, eigh behind a
    ``vmap``ped solver) split their batch over the process's one intra-op thread pool and block
    until it is done, so as many concurrent devices as pool threads deadlock (16 ScaledGD points on
    2 CPU devices hung). Devices, not ``vmap``, carry the parallelism there.
    """
    # A bound method's __dict__ is its function's, shared by every instance: no cache for it (a
    # program cached there would close over the first instance and answer for all of them).
    # The entry names its function: functools.wraps copies __dict__ into a wrapper, which then saw
    # the wrapped function's programs and returned the wrapped function's values.
    cache = None if inspect.ismethod(fn) else getattr(fn, "__dict__", None)
    if isinstance(cache, dict):
        owner, programs = cache.get("_lowrank_jax_sweep", (None, None))
        if owner is not fn:
            programs = {}
            cache["_lowrank_jax_sweep"] = (fn, programs)
    else:
        programs = {}
    if (chunk, mesh, progress) not in programs:
        one = lambda p, s: fn(**p, **s)
        if progress:
            one = _counted(one)
        if mesh is not None and mesh.devices.flat[0].platform in _MAP_PER_POINT_ON:
            batch = lambda ps, s: jax.lax.map(lambda p: one(p, s), ps)
        elif chunk is None:
            batch = jax.vmap(one, in_axes=(0, None))
        else:
            batch = _in_chunks(one, chunk)
        if mesh is not None:
            # check_vma=False: solvers build loop carries from unsharded constants (zeros, keys),
            # which the varying-axes check rejects; every output is per point by construction.
            batch = jax.shard_map(
                batch,
                mesh=mesh,
                in_specs=(PartitionSpec(AXIS), PartitionSpec()),
                out_specs=PartitionSpec(AXIS),
                check_vma=False,
            )
        programs[chunk, mesh, progress] = jax.jit(batch)
    return programs[chunk, mesh, progress]


def run(
    fn: Callable[..., Any],
    points: dict[str, Any],
    *,
    shared: dict[str, Any] | None = None,
    chunk: int | None = None,
    devices=None,
    progress: bool = False,
):
    """Evaluate ``fn(**point, **shared)`` at every point in one jitted call.

    On a CPU, JAX starts with one device whatever the core count, and one device runs a sweep on
    about one core. ``jax.config.update("jax_num_cpu_devices", os.cpu_count())`` before the first
    JAX computation makes one device per core, and the sweep then runs on all of them (see the
    Sweeps guide).

    Args:
      fn: a pure function of the point's named values and the ``shared`` ones. It must be traceable
        (the toolkit's solvers are).
      points: dict name → values with one shared leading axis N (e.g. from ``grid``).
      shared: dict name → values common to every point (the data), passed to the compiled program as
        arguments and replicated on every device. Pass large arrays here rather than closing over
        them: a closed-over array becomes a constant of the program, which XLA may spend seconds
        constant-folding and which is recompiled for new data. A name both swept and shared raises
        ``ValueError``.
      chunk: evaluate ``chunk`` points at a time (``lax.map`` with ``batch_size``) instead of all N
        at once: bounded memory, the same results up to rounding (XLA may compile a batch of
        ``chunk`` points and one of N points into different orders of the same floating-point
        operations: differences of a few ulp, 1.6e-7 relative measured on a ScaledGD sweep; the same
        holds between one device and several). None (default): one ``vmap`` over all points. (On
        several CPU devices every device takes its points one at a time and ``chunk`` has no
        effect.)
      devices: devices to shard the point axis over (default ``jax.devices()``; one device may be
        passed bare). With several, N is padded to a multiple of their count by repeating the last
        point, then trimmed, and each device evaluates its block under ``shard_map``. With one, the
        points and shared arrays are placed on it and the sweep runs there. Left at the default on
        JAX's single CPU device of a multi-core machine, the first call warns (once per process) how
        to get one device per core.
      progress: show a tqdm bar of points done, advanced from inside the compiled program (one
        ``jax.debug.callback`` per point). Where each device takes its points one at a time (CPU
        devices, ``chunk``) it moves as points finish; a single ``vmap`` finishes them all at once.
        Compiled separately from the silent program (the first call with it compiles again). Default
        False.

    Returns:
      ``fn``'s output pytree with a leading axis of length N on every leaf (point i at index i).

    Example:
        ```python
        import jax, jax.numpy as jnp
        from lowrank_jax import datasets, rpca, sweep

        p = datasets.rpca_problem(jax.random.key(0), 100, 100, rank=3, alpha=0.1)
        pts = sweep.grid(alpha=[0.1, 0.2], eta=jnp.linspace(0.3, 0.9, 4))    # 8 points
        err = sweep.run(
            lambda alpha, eta, Y, X: rpca.scaledgd(
                Y, 3, alpha, eta=eta, max_iter=30, X_star=X
            ).error,
            pts,
            shared={"Y": p.Y, "X": p.X},
        )  # one jitted, vmapped call
        print(err.reshape(2, 4))  # error per (α, η)
        ```
    """
    if not callable(fn):
        raise TypeError(
            f"fn must be a function of the swept and shared names, got {type(fn).__name__} {fn!r}"
        )
    if not isinstance(points, dict) or not points:
        raise ValueError("points must be a non-empty dict name -> stacked values (see sweep.grid)")
    points = {k: _axis(v) for k, v in points.items()}
    lengths = {k: _length(k, v) for k, v in points.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"every sweep axis needs the same number of points, got {lengths}")
    n = next(iter(lengths.values()))
    if chunk is not None and (
        isinstance(chunk, bool) or not isinstance(chunk, numbers.Integral) or chunk < 1
    ):
        raise ValueError(f"chunk must be a positive int or None, got {chunk!r}")
    chunk = None if chunk is None else int(chunk)
    progress = _checks.check_flag(progress, "progress")
    if shared is not None:
        if not isinstance(shared, collections.abc.Mapping):
            raise ValueError("shared must be a dict name -> value (the data every point uses)")
        shared = {k: _numeric_list_as_array(v) for k, v in shared.items()}
    if devices is None:
        _hint_one_cpu_device(jax.devices())
    devices = _device_tuple(devices)
    mesh = _mesh(devices)
    if mesh is None and len(devices) == 1:
        # One device: commit the inputs to it, so that the program runs there (jit follows them).
        points = _place(points, devices[0])
        shared = None if shared is None else _place(dict(shared), devices[0])
    if mesh is not None:
        count = mesh.devices.size
        pad = -n % count
        if pad:
            points = jax.tree.map(
                lambda x: jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)]), points
            )
        points = jax.device_put(points, NamedSharding(mesh, PartitionSpec(AXIS)))
        if shared is not None:
            # Replicated on every device of the mesh; an array committed to one device (an earlier
            # one-device result, a device_put) made the program refuse "incompatible devices".
            shared = _place(dict(shared), NamedSharding(mesh, PartitionSpec()))
    shared = {} if shared is None else dict(shared)
    clash = set(shared) & set(points)
    if clash:
        raise ValueError(f"names both swept and shared: {sorted(clash)}")
    bar = (
        progress_bar.CompiledBar(n, f"sweep ({n} points)", "point", channel="sweep")
        if progress
        else contextlib.nullcontext()
    )
    with bar:
        out = _program(fn, chunk, mesh, progress)(points, shared)
        if isinstance(bar, progress_bar.CompiledBar):  # progress
            jax.block_until_ready(out)  # the bar closes when the points are done ...
            bar.finish()  # ... and shows them all, even where XLA dropped callbacks
    if mesh is not None and (-n % mesh.devices.size):
        out = jax.tree.map(lambda x: x[:n], out)
    return out


__all__ = ["AXIS", "grid", "keys", "run", "shape_of"]
