"""`make bench`: every benchmark in turn. Prints tables of medians and ratios; asserts nothing."""

from __future__ import annotations

import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import bench_covariance  # noqa: E402
import bench_covariance_memory  # noqa: E402
import bench_newton  # noqa: E402
import bench_pathnorm_prox  # noqa: E402
import bench_rpca_step  # noqa: E402
import bench_rpca_total  # noqa: E402
import bench_scaledgd_floor  # noqa: E402
import bench_sdl  # noqa: E402
import bench_selection  # noqa: E402


def main():
    print("Benchmarks run on", end=" ")
    import jax

    print(
        jax.devices()[0].device_kind
        if hasattr(jax.devices()[0], "device_kind")
        else jax.devices()[0]
    )
    bench_selection.main()
    bench_rpca_step.main()
    bench_rpca_total.main()
    bench_scaledgd_floor.main()
    bench_pathnorm_prox.main([])
    bench_newton.main([])
    bench_sdl.main([])
    bench_covariance.main([])
    bench_covariance_memory.main([])
    # its own process: it starts JAX with one CPU device per core
    subprocess.run(
        [sys.executable, str(pathlib.Path(__file__).parent / "bench_sweep.py")], check=True
    )
    # one fresh process per family: the first call's compilation
    subprocess.run(
        [sys.executable, str(pathlib.Path(__file__).parent / "bench_first_call.py")], check=True
    )


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(description=__doc__).parse_args()  # --help; no options
    main()
