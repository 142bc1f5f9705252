"""The first call of each family's public solver against the next calls (new hyperparameter values,
no recompilation): what a notebook user waits for once, mostly XLA compiling the solver's program.

Each family runs in a fresh process (JAX's in-memory and on-disk compilation caches would otherwise
hide the cost), on the problems of ``bench_sweep.py``; building the data is not timed. Prints;
asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).parent


def measure(name: str, reps: int = 3) -> dict:
    """Seconds of the first call and median seconds of ``reps`` later calls at other values."""
    import jax
    from bench_sweep import cases

    f, points, shared = cases()[name]
    rows = [{k: v[i] for k, v in points.items()} for i in range(reps + 1)]
    jax.block_until_ready((rows, shared))

    def timed(row):
        t0 = time.perf_counter()
        jax.block_until_ready(f(**row, **shared))
        return time.perf_counter() - t0

    first = timed(rows[0])
    later = [timed(row) for row in rows[1:]]
    return {"first": first, "later": statistics.median(later)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", help=argparse.SUPPRESS)  # the child process: one family
    args = ap.parse_args(argv)
    if args.case:
        print(json.dumps(measure(args.case)))
        return
    sys.path.insert(0, str(HERE))
    from bench_sweep import cases

    env = dict(
        os.environ,
        JAX_ENABLE_COMPILATION_CACHE="false",
        PYTHONPATH=os.pathsep.join([str(HERE), str(HERE.parent), os.environ.get("PYTHONPATH", "")]),
    )
    print(
        "first call of the public solver (fresh process) against later calls at other "
        "hyperparameter values"
    )
    print(
        f"{'family (problem)':46s} {'first (s)':>9s} {'later (ms)':>10s} {'first − later (s)':>18s}"
    )
    for name in cases():
        out = subprocess.run(
            [sys.executable, str(HERE / "bench_first_call.py"), "--case", name],
            env=env,
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            print(f"{name:46s} failed:\n{out.stderr[-2000:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"{name:46s} {r['first']:9.2f} {1e3 * r['later']:10.1f} "
            f"{r['first'] - r['later']:18.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
