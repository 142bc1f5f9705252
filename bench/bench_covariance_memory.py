"""Low-rank + sparse covariance by an MLP: does the fixed-input first layer make n = 400 and n = 800
practical? Adam steps of ``covariance.decompose`` (the authors' 1000-200-200-200 network, ReLU, ℓ1,
lr 1e-4, float32, no early stop) on one fixed Σ at (n, k) = (400, 10) and (800, 20): milliseconds
per step and the process's peak resident memory (``resource.getrusage``, each setting in its own
process so that the peaks do not mix), next to what the plain dense first layer would hold for Adam
alone: weights + gradient + two moments = 4 × ℓ₁ × n(n+1)/2 × 4 bytes (1.28 GB at n = 400,
5.13 GB at n = 800).

Per-step time inside a run: (time of 1 + ``steps`` steps − time of 1 step) / ``steps``, medians
over ``reps`` interleaved calls (both calls include the initialisation, which generates A⁽⁰⁾ row
chunk by row chunk and cancels). ``--dense`` also runs the dense first layer at the sizes up to
``--dense-max-n`` (default 400), measured the same way. Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

HIDDEN = (1000, 200, 200, 200)


def dense_adam_bytes(n: int, width: int = HIDDEN[0]) -> int:
    """Weights, gradient and Adam's two moments of a dense first layer, float32."""
    return 4 * width * (n * (n + 1) // 2) * 4


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def worker(n: int, k: int, mode: str, steps: int, reps: int) -> dict:
    import time

    import jax
    import jax.numpy as jnp
    import numpy as np

    from lowrank_jax import covariance as cv

    rss_import = peak_rss_mb()
    rng = np.random.default_rng(0)
    M0 = rng.normal(size=(n, k))
    Sigma = jnp.asarray(M0 @ M0.T + np.diag(rng.uniform(0, 1, n)), jnp.float32)
    runs = {
        it: jax.jit(
            lambda S, it=it: (
                cv.decompose(S, k, hidden=HIDDEN, max_iter=it, tol=None, first_layer=mode).M
            )
        )
        for it in (1, 1 + steps)
    }
    t0 = time.perf_counter()
    for f in runs.values():
        jax.block_until_ready(f(Sigma))
    first_calls = time.perf_counter() - t0
    times = {it: [] for it in runs}
    for _ in range(reps):
        for it, f in runs.items():
            t0 = time.perf_counter()
            jax.block_until_ready(f(Sigma))
            times[it].append(time.perf_counter() - t0)
    med = {it: float(np.median(v)) for it, v in times.items()}
    return dict(
        n=n,
        k=k,
        mode=mode,
        ms_per_step=1e3 * (med[1 + steps] - med[1]) / steps,
        init_and_one_step_s=med[1],
        compile_and_first_calls_s=first_calls,
        peak_rss_mb=peak_rss_mb(),
        rss_after_imports_mb=rss_import,
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="400:10,800:20", help="comma-separated n:k")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dense", action="store_true", help="also measure the dense first layer")
    ap.add_argument("--dense-max-n", type=int, default=400)
    ap.add_argument("--worker", nargs=3, metavar=("N", "K", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        n, k, mode = int(args.worker[0]), int(args.worker[1]), args.worker[2]
        print(json.dumps(worker(n, k, mode, args.steps, args.reps)))
        return
    try:
        sizes = [tuple(int(v) for v in s.split(":")) for s in args.sizes.split(",")]
    except ValueError:
        sizes = []
    if not sizes or any(len(s) != 2 or min(s) < 1 for s in sizes):
        ap.error(f"--sizes takes comma-separated n:k pairs such as 400:10, got {args.sizes!r}")
    print(
        f"covariance NN, Adam steps at the {'-'.join(map(str, HIDDEN))} network "
        "(ReLU, l1, float32); "
        f"each setting in a fresh process, {args.steps} steps, median of {args.reps}"
    )
    print(
        f"  {'n':>4} {'k':>3} {'first layer':>12} {'ms/step':>8} {'peak RSS':>10} "
        f"{'(after imports)':>16} "
        f"{'dense layer + grad + Adam moments':>34}"
    )
    for n, k in sizes:
        modes = ["fixed-input"] + (["dense"] if args.dense and n <= args.dense_max_n else [])
        for mode in modes:
            cmd = [
                sys.executable,
                __file__,
                "--worker",
                str(n),
                str(k),
                mode,
                "--steps",
                str(args.steps),
                "--reps",
                str(args.reps),
            ]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                print(
                    f"  {n:>4} {k:>3} {mode:>12} failed (exit {out.returncode}): "
                    f"{out.stderr.strip()[-300:]}"
                )
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                f"  {n:>4} {k:>3} {mode:>12} {r['ms_per_step']:>8.1f} "
                f"{r['peak_rss_mb'] * 2**20 / 1e9:>7.2f} GB "
                f"{r['rss_after_imports_mb'] * 2**20 / 1e9:>13.2f} GB "
                f"{dense_adam_bytes(n) / 1e9:>31.2f} GB"
                f"   (init + 1 step {r['init_and_one_step_s']:.2f} s, compile + first calls "
                f"{r['compile_and_first_calls_s']:.0f} s)"
            )


if __name__ == "__main__":
    main()
