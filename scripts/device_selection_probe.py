"""kth_largest by counting and by sorting on whatever device JAX sees, single and batched (ms).

For a GPU or TPU session: ``kth_largest(method="auto")`` sorts there, and this says whether that
was the right call, and what ScaledGD's run and 64-point (α, η) sweep cost with it. Each timing
checks its values against NumPy first. Prints; asserts nothing else.

    PYTHONPATH=. python scripts/device_selection_probe.py
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import rpca, sweep
from lowrank_jax.datasets import rpca as rdata
from lowrank_jax.selection import kth_largest


def ms(fn, reps=10):
    jax.block_until_ready(fn())
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        ts.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(ts))


def main():
    print(jax.devices())
    rng = np.random.default_rng(0)
    for n in (200, 1000):
        x = jnp.asarray(np.abs(rng.standard_normal((n, n))).astype(np.float32))
        ks = jnp.arange(1, 65) * (n // 128)                      # 64 values of k: a sweep over α
        want = np.sort(np.asarray(x), axis=1)[:, -(n // 10)]
        row = []
        for method in ("count", "sort"):
            one = jax.jit(lambda x, method=method: kth_largest(x, n // 10, axis=1, method=method))
            # x as an argument, never closed over: XLA would fold the constant work at compile time
            batch = jax.jit(jax.vmap(lambda x, k, method=method: kth_largest(x, k, axis=1, method=method),
                                     in_axes=(None, 0)))
            assert np.array_equal(np.asarray(one(x)), want), method
            assert np.array_equal(np.asarray(batch(x, ks))[-1], np.sort(np.asarray(x), axis=1)[:, -int(ks[-1])])
            row += [f"{method}: one {ms(lambda: one(x)):.3f}", f"64 batched {ms(lambda: batch(x, ks)):.3f}"]
        print(f"kth_largest {n} x {n} rows, ms:", ", ".join(row), flush=True)

    Y = rdata.rpca_problem(jax.random.key(0), 200, 200, 5, 0.1).Y
    f = lambda alpha, eta, Y: rpca.scaledgd(Y, 5, alpha, eta=eta, iters=40, key=jax.random.key(0)).X  # noqa: E731
    pts = sweep.grid(alpha=jnp.linspace(0.08, 0.2, 8), eta=jnp.linspace(0.3, 0.9, 8))
    single = jax.jit(f)
    rows = [{k: v[i] for k, v in pts.items()} for i in range(64)]
    t_one = ms(lambda: single(0.1, 0.5, Y))
    t_loop = ms(lambda: [jax.block_until_ready(single(**r, Y=Y)) for r in rows], reps=3)
    t_sweep = ms(lambda: sweep.run(f, pts, shared={"Y": Y}), reps=3)
    print(f"ScaledGD 200 x 200, 40 its: one run {t_one:.1f} ms, 64 jitted calls {t_loop:.0f} ms, "
          f"64-point sweep {t_sweep:.0f} ms ({t_loop / t_sweep:.1f}x)")


if __name__ == "__main__":
    main()
