"""kth_largest by counting and by sorting on whatever device JAX sees, single and batched (ms).

For a GPU or TPU session: ``kth_largest(method="auto")`` sorts there, and this says whether that
was the right call, and what ScaledGD's run and 64-point (α, η) sweep cost with it. Each timing
checks its values against NumPy first. Prints; asserts nothing else.

    PYTHONPATH=. python bench/device/selection_probe.py [--sizes 200 1000] [--batches 64] \\
        [--no-scaledgd]

(On a CPU the sort of a 1000 × 1000 matrix takes most of a second: use ``--sizes 200`` there.)
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from _timing import median_ms  # noqa: E402

from lowrank_jax import rpca, sweep
from lowrank_jax.datasets import rpca as rdata
from lowrank_jax.selection import kth_largest


def ms(fn, reps=10):
    return median_ms(fn, reps=reps, warmup=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 1000])
    ap.add_argument(
        "--batches",
        type=int,
        nargs="+",
        default=[64],
        help="batch sizes to time besides a single matrix (vmap over matrices)",
    )
    ap.add_argument("--no-scaledgd", action="store_true", help="skip ScaledGD's run and sweep")
    args = ap.parse_args(argv)
    print(jax.devices())
    rng = np.random.default_rng(0)
    for n in args.sizes:
        # One matrix per sweep point (in a ScaledGD sweep each point has its own residual), each
        # with its own k = ⌊α n⌋. Passed as arguments, never closed over: XLA would fold constant
        # work.
        top = max(args.batches)
        xs = jnp.asarray(np.abs(rng.standard_normal((top, n, n))).astype(np.float32))
        ks = (jnp.arange(top) % 64 + 1) * max(n // 128, 1)
        k = n // 10
        want = np.sort(np.asarray(xs[0]), axis=1)[:, -k]
        row = []
        for method in ("count", "sort", "auto"):
            one = jax.jit(lambda x, method=method: kth_largest(x, k, axis=1, method=method))
            batch = jax.jit(
                jax.vmap(lambda x, k, method=method: kth_largest(x, k, axis=1, method=method))
            )
            assert np.array_equal(np.asarray(one(xs[0])), want), method
            row.append(f"{method}: one {ms(lambda: one(xs[0])):.3f}")
            for b in args.batches:
                xb, kb = xs[:b], ks[:b]
                want_last = np.sort(np.asarray(xb[-1]), axis=1)[:, -int(kb[-1])]
                assert np.array_equal(np.asarray(batch(xb, kb))[-1], want_last), (method, b)
                row.append(f"{b} batched {ms(lambda: batch(xb, kb)):.3f}")
        print(f"kth_largest {n} x {n} rows, ms:", ", ".join(row), flush=True)
    if args.no_scaledgd:
        return

    Y = rdata.rpca_problem(jax.random.key(0), 200, 200, 5, 0.1).Y
    f = lambda alpha, eta, Y: (
        rpca.scaledgd(Y, 5, alpha, eta=eta, tol=None, max_iter=40, key=jax.random.key(0)).X
    )  # noqa: E731
    pts = sweep.grid(alpha=jnp.linspace(0.08, 0.2, 8), eta=jnp.linspace(0.3, 0.9, 8))
    single = jax.jit(f)
    rows = [{k: v[i] for k, v in pts.items()} for i in range(64)]
    t_one = ms(lambda: single(0.1, 0.5, Y))
    t_loop = ms(lambda: [jax.block_until_ready(single(**r, Y=Y)) for r in rows], reps=3)
    t_sweep = ms(lambda: sweep.run(f, pts, shared={"Y": Y}), reps=3)
    print(
        f"ScaledGD 200 x 200, 40 its: one run {t_one:.1f} ms, 64 jitted calls {t_loop:.0f} ms, "
        f"64-point sweep {t_sweep:.0f} ms ({t_loop / t_sweep:.1f}x)"
    )


if __name__ == "__main__":
    main()
