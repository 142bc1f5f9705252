"""Timing helpers shared by the benchmarks: warm up, repeat, report medians (ms)."""

from __future__ import annotations

import time

import jax
import numpy as np


def median_ms_cpu(fn, *args, reps: int = 30, warmup: int = 3) -> tuple[float, float]:
    """Medians of the wall time and of the process CPU time (all threads) of ``fn(*args)``, in
    milliseconds, JAX results awaited. CPU time over wall time is the number of cores the call kept
    busy."""
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    walls, cpus = [], []
    for _ in range(reps):
        c0, t0 = time.process_time(), time.perf_counter()
        jax.block_until_ready(fn(*args))
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return 1e3 * float(np.median(walls)), 1e3 * float(np.median(cpus))


def median_ms(fn, *args, reps: int = 30, warmup: int = 3) -> float:
    """Median wall time of ``fn(*args)`` in milliseconds, JAX results awaited."""
    return median_ms_cpu(fn, *args, reps=reps, warmup=warmup)[0]


def interleaved_ms(fns: dict, reps: int = 30, warmup: int = 3, block: int = 1) -> dict:
    """Median times of several zero-argument callables, run alternately so that machine noise
    hits every side alike (the machines here are noisy, ±25 %).

    With ``block > 1`` each callable runs ``block`` times in a row per round and only the calls
    after the first of each block are timed: that is the steady state of an iteration inside a
    solver loop (its inputs still in cache), rather than the cold start after another method
    has flushed the caches.
    """
    for fn in fns.values():
        for _ in range(warmup):
            jax.block_until_ready(fn())
    times = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            for i in range(block):
                t0 = time.perf_counter()
                jax.block_until_ready(fn())
                if i or block == 1:
                    times[name].append(time.perf_counter() - t0)
    return {name: 1e3 * float(np.median(t)) for name, t in times.items()}


def median_s_and_result(fn, reps: int) -> tuple[float, object]:
    """Median seconds of ``reps`` calls of the zero-argument ``fn`` after one warm-up call (the
    compile), and its last result."""
    jax.block_until_ready(fn())
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), out


def table(rows, header):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths))  # noqa: E731
    print(line(header))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))
