"""A short tour of every family: ``make demo`` (or ``python -m lowrank_jax.demo``).

Each section solves a problem from its paper's generator or real data, prints a small table and,
when matplotlib is installed, writes a figure under ``results/demo/``.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import datasets, rpca


def _timed(fn):
    """Run once to compile, then time a second call; returns (result, seconds, compile seconds)."""
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, time.perf_counter() - t0, first


def _print_table(title, rows, header):
    print(f"\n{title}")
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(r, widths)))


def robust_pca(n: int = 1000, rank: int = 5, alpha: float = 0.1, outdir: pathlib.Path | None = None):
    """LRPCA, ScaledGD and AltProj on the LRPCA paper's synthetic instance (App. C.1)."""
    p = datasets.rpca_problem(jax.random.key(0), n, n, rank, alpha)
    tol = 1e-4
    # The shipped trained model (nearest α; other sizes by the paper's rescaling rule), and the
    # theorem's oracle schedule (which needs X⋆) for 10 layers, continued with ζ_k = 0.7 ζ_{k−1}.
    trained_alpha = min(rpca.params.PRETRAINED_ALPHAS, key=lambda a: abs(a - alpha))
    model = rpca.pretrained(alpha=trained_alpha)
    zeta = rpca.oracle_thresholds(p.Y, rank, p.X, 10, 0.5)
    eta = jnp.full(10, 0.5)
    runs = {
        f"LRPCA (trained, α={trained_alpha:g} model)": lambda: model(p.Y, rank=rank, tol=tol, max_iter=300,
                                                                      X_star=p.X),
        "LRPCA (oracle ζ, FRMNN)": lambda: rpca.lrpca(p.Y, rank, zeta, eta, beta=1.0, phi=0.7, tol=tol,
                                                       max_iter=300, X_star=p.X),
        "ScaledGD (η=0.5, α̃=2α)": lambda: rpca.scaledgd(p.Y, rank, alpha, tol=tol, iters=300, X_star=p.X),
        "AltProj": lambda: rpca.altproj(p.Y, rank, tol=tol, max_iter=300, X_star=p.X),
    }
    rows, curves = [], {}
    for name, fn in runs.items():
        out, secs, first = _timed(fn)
        k = int(out.n_iter)
        err = float(jnp.linalg.norm(out.X - p.X) / jnp.linalg.norm(p.X))
        rows.append([name, k, f"{float(out.residual[k - 1]):.1e}", f"{err:.1e}", f"{secs:.3f}", f"{first:.1f}"])
        curves[name] = np.asarray(out.error[:k])
    _print_table(f"Robust PCA: n = {n}, r = {rank}, α = {alpha}, stop at ‖Y−X−S‖_F/‖Y‖_F < {tol:g} "
                 f"({jax.devices()[0].platform}, float32)", rows,
                 ["method", "iterations", "residual", "‖X−X⋆‖_F/‖X⋆‖_F", "time (s)", "first call incl. compile (s)"])
    _plot(outdir, "rpca_convergence.png", curves, "iteration", "‖X_k − X⋆‖_F / ‖X⋆‖_F",
          f"Robust PCA, n = {n}, r = {rank}, α = {alpha}")


def _plot(outdir, name, curves, xlabel, ylabel, title):
    if outdir is None:
        return
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no figure)")
        return
    outdir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, y in curves.items():
        ax.semilogy(np.arange(1, len(y) + 1), y, label=label)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(outdir / name, dpi=120)
    plt.close(fig)
    print(f"figure: {outdir / name}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="results/demo", help="folder for figures ('' for none)")
    parser.add_argument("--small", action="store_true", help="smaller problems (quick smoke run)")
    args = parser.parse_args(argv)
    outdir = pathlib.Path(args.out) if args.out else None
    robust_pca(n=300 if args.small else 1000, outdir=outdir)


if __name__ == "__main__":
    main()
