"""Exact k-th largest selection (lowrank_jax.selection.kth_largest) beside np.partition.

Prints medians (ms, after warm-up; JAX and NumPy timed in alternate blocks) and the ratio
np / jax; times nothing it has not first checked equal to NumPy's answer (an AssertionError
otherwise). Data: a 1000 x 1000 float32 |N(0, 1)| matrix, k = 200
along rows and along columns, cold and with a warm guess (the true values
perturbed by ~1%), and the same 10^6 entries flattened with k = 10^5.
"passes" counts sweeps over all the data (min/max or sample start, counting
passes, the final read-off) + passes over the gathered unfinished rows.

Then a batch, as a ScaledGD sweep makes it: 64 matrices of 200 x 200 with k from
α n for α in [0.08, 0.4], under ``vmap`` (one selection over all members' rows)
against the members one after another (``lax.map``).
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
from _timing import table

from lowrank_jax.selection import _kth_largest, kth_largest


def blocked_ms(fns: dict, reps: int = 60, block: int = 20) -> dict:
    """Median ms of zero-argument callables, run alternately in blocks of `block` calls:
    drift of the (noisy) machine hits all alike, while each side keeps its caches and
    threads warm as in a loop (right after np.partition, which allocates and fills a
    fresh 4 MB array, JAX calls run up to ~1 ms slower for several calls)."""
    times = {name: [] for name in fns}
    for _ in range(-(-reps // block) + 1):  # first round: warm-up
        for name, fn in fns.items():
            for _ in range(block):
                t0 = time.perf_counter()
                jax.block_until_ready(fn())
                times[name].append(time.perf_counter() - t0)
    return {name: 1e3 * float(np.median(t[block:])) for name, t in times.items()}


def main(reps: int = 60):
    rng = np.random.default_rng(0)
    a = np.abs(rng.standard_normal((1000, 1000))).astype(np.float32)
    x = jnp.asarray(a)
    cases = []  # (name, jax callable -> (value, passes), numpy callable, exact answer)
    for axis, along in ((1, "rows"), (0, "columns")):
        ref = np.take(np.sort(a, axis=axis), -200, axis=axis)
        guess = jnp.asarray((ref * (1 + 0.01 * rng.uniform(-1, 1, ref.shape))).astype(np.float32))
        cold = jax.jit(lambda x, k, axis=axis: _kth_largest(x, k, axis, None))
        warm = jax.jit(lambda x, k, g, axis=axis: _kth_largest(x, k, axis, g))
        part = lambda axis=axis: np.partition(a, -200, axis=axis)  # noqa: E731
        cases.append((f"k=200 along {along}, cold", lambda f=cold: f(x, 200), part, ref))
        cases.append(
            (f"k=200 along {along}, warm", lambda f=warm, g=guess: f(x, 200, g), part, ref)
        )
    flat, xf = a.ravel(), x.ravel()
    cold = jax.jit(lambda x, k: _kth_largest(x, k, 0, None))
    cases.append(
        (
            "10^6 flat, k=10^5, cold",
            lambda: cold(xf, 100_000),
            lambda: np.partition(flat, -100_000),
            np.sort(flat)[-100_000],
        )
    )

    rows = []
    for name, jax_fn, np_fn, ref in cases:
        value, passes = jax_fn()
        assert np.array_equal(np.asarray(value), ref)
        ms = blocked_ms({"jax": jax_fn, "np": np_fn}, reps=reps)
        passes = " + ".join(str(int(p)) for p in passes)
        rows.append(
            (name, f"{ms['jax']:.2f}", f"{ms['np']:.2f}", f"{ms['np'] / ms['jax']:.2f}", passes)
        )
    print("\nkth_largest on a 1000 x 1000 float32 |N(0,1)| matrix (medians, ms)")
    table(rows, ("case", "jax", "np.partition", "np/jax", "passes"))
    batched(reps)


def batched(reps: int = 60):
    rng = np.random.default_rng(1)
    a = np.abs(rng.standard_normal((64, 200, 200))).astype(np.float32)
    ks = np.floor(np.linspace(0.08, 0.4, 64) * 200).astype(np.int32)
    x, k = jnp.asarray(a), jnp.asarray(ks)
    rows = []
    for axis, along in ((1, "rows"), (0, "columns")):
        one = lambda x, k, axis=axis: kth_largest(x, k, axis=axis, method="count")  # noqa: E731
        together = jax.jit(jax.vmap(one))
        in_turn = jax.jit(lambda x, k, one=one: jax.lax.map(lambda xk: one(*xk), (x, k)))
        ref = np.stack([np.take(np.sort(m, axis=axis), -kk, axis=axis) for m, kk in zip(a, ks)])
        for f in (together, in_turn):
            assert np.array_equal(np.asarray(f(x, k)), ref)
        ms = blocked_ms(
            {"vmap": lambda f=together: f(x, k), "map": lambda f=in_turn: f(x, k)}, reps=reps
        )
        rows.append(
            (
                f"64 x (200 x 200) along {along}",
                f"{ms['vmap']:.2f}",
                f"{ms['map']:.2f}",
                f"{ms['map'] / ms['vmap']:.2f}",
            )
        )
    print(
        "\nkth_largest over a batch (medians, ms): vmap (one selection over all members' rows) vs "
        "lax.map (members one after another)"
    )
    table(rows, ("case", "vmap", "lax.map", "map/vmap"))


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument(
        "--reps", type=int, default=60, help="repetitions per timing (the median is printed)"
    )
    main(ap.parse_args().reps)
