"""FRMNN continuation of the shipped small LRPCA models: can another (β, φ) mend their weakness?

FRMNN (paper §4.2, eq. 13) continues a K-layer model past layer K with η_k = β η_{k−1} and
ζ_k = φ ζ_{k−1}. The shipped (β, φ) minimise the mean error at one layer K̄ (eq. 14; K̄ = K + 30
for the n = 100 and n = 300 models). This script runs the search's whole grid
(``training.frmnn_grid()``: β ∈ {0.5, …, 2.0} × φ ∈ {0.1, …, 1.0}, step 0.1) for ``--layers``
layers on fresh instances of the paper's generator and reports, per model, the choices that are
best by several objectives: the mean error at layers 20 / 40 / 60 / 80, the worst instance at
layer 60, the mean log-error over layers 16–60, and the smallest climb over layers 11–20, against
the layer-10 error the continuation starts from. On the same instances it also runs two baselines:
the Theorem-1 oracle schedule (η = 0.5, 40 layers) and ScaledGD with its defaults (100
iterations), beside the shipped model's 40 layers.

Writes results/rpca/frmnn_grid.csv (one row per model and objective), frmnn_baselines.csv and
frmnn_grid.png (mean error against layer for the shipped and the alternative choices, one panel per
model).
"""

from __future__ import annotations

import argparse
import functools

import jax
import jax.numpy as jnp
import numpy as np
from _rpca import figure, out_dir, write_csv

from lowrank_jax import datasets, rpca
from lowrank_jax.rpca.training import frmnn_grid


def grid_points() -> tuple[np.ndarray, np.ndarray]:
    """β and φ of every grid point, flat (β slowest), as NumPy arrays."""
    betas, phis = frmnn_grid()
    B, P = np.meshgrid(np.asarray(betas), np.asarray(phis), indexing="ij")
    return B.ravel(), P.ravel()


@functools.partial(jax.jit, static_argnames=("rank", "layers"))
def grid_curves(zeta, eta, Y, X, betas, phis, *, rank: int, layers: int):
    """Relative error after every layer 1..``layers`` for every (β, φ) pair: (len(betas), layers).
    Compiled once per (model size, layers): the schedule and the instance are arguments. A point
    that diverges keeps its curve (throw=False; NaN or growing where it blew up), the others
    theirs."""

    def one(bp):
        out = rpca.lrpca(
            Y, rank, zeta, eta, beta=bp[0], phi=bp[1], max_iter=layers, X_star=X, throw=False
        )
        return out.history["error"]

    return jax.lax.map(one, (betas, phis), batch_size=8)


def baselines(params, alpha, Y, X) -> dict[str, float]:
    """Final errors of the oracle schedule, ScaledGD and the shipped model on one instance."""
    r = params.rank
    zeta = rpca.oracle_thresholds(Y, r, X, num_layers=40)
    return {
        "oracle schedule (eta 0.5, 40 layers)": float(
            rpca.lrpca(Y, r, zeta, jnp.full(40, 0.5), X_star=X).error
        ),
        "ScaledGD (defaults, 100 iterations)": float(
            rpca.scaledgd(Y, r, alpha, eta=0.5, tol=None, max_iter=100, X_star=X).error
        ),
        "shipped model (40 layers)": float(params(Y, max_iter=40, X_star=X).error),
    }


def study(n: int, alpha: float, instances: int, layers: int, key):
    """Errors (instances, grid, layers) of the model ``pretrained(alpha, n=n)`` on fresh instances
    drawn from ``key`` (a ``jax.random`` key or an integer seed), and the baselines' final errors
    on the same instances (name → (instances,))."""
    params = rpca.pretrained(alpha, n=n)
    betas, phis = (jnp.asarray(v, jnp.float32) for v in grid_points())
    keys = jax.random.split(jax.random.key(key) if isinstance(key, int) else key, instances)
    errors, base = [], {}
    for k in keys:
        p = datasets.rpca_problem(k, n, n, params.rank, alpha)
        errors.append(
            np.asarray(
                grid_curves(
                    params.zeta, params.eta, p.Y, p.X, betas, phis, rank=params.rank, layers=layers
                )
            )
        )
        for name, e in baselines(params, alpha, p.Y, p.X).items():
            base.setdefault(name, []).append(e)
    E = np.stack(errors)
    E = np.where(np.isfinite(E), E, 1.0)  # a diverging point counts as error 1
    return params, E, {k: np.asarray(v) for k, v in base.items()}


def choices(params, E):
    """(objective, grid index) pairs: the shipped point and the best point by each objective."""
    mean = E.mean(0)
    last = E.shape[2]
    B, P = grid_points()
    shipped = int(np.argmin(np.abs(B - float(params.beta)) + np.abs(P - float(params.phi))))
    out = [("shipped", shipped)]
    out += [
        (f"mean at layer {k}", int(np.argmin(mean[:, k - 1])))
        for k in (20, 40, 60, 80)
        if k <= last
    ]
    if last >= 60:
        out.append(("worst instance at layer 60", int(np.argmin(E[:, :, 59].max(0)))))
        out.append(
            ("mean log-error, layers 16-60", int(np.argmin(np.log(E[:, :, 15:60]).mean((0, 2)))))
        )
    out.append(("least climb, layers 11-20", int(np.argmin(mean[:, 10:20].max(1)))))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--models",
        nargs="+",
        default=["300:0.1", "100:0.2", "100:0.3"],
        help="n:alpha of the shipped models to study (default: %(default)s)",
    )
    ap.add_argument("--instances", type=int, default=16)
    ap.add_argument("--layers", type=int, default=80)
    ap.add_argument("--key", type=int, default=123, help="integer seed of the instances' key")
    args = ap.parse_args(argv)
    if args.layers < 20:
        ap.error("--layers must be at least 20 (the objectives look at layers 11-20 and beyond)")
    for spec in args.models:  # "300" failed with an IndexError after the grid was set up
        parts = spec.split(":")
        try:
            ok = len(parts) == 2 and int(parts[0]) > 0 and 0 < float(parts[1]) < 1
        except ValueError:
            ok = False
        if not ok:
            ap.error(f"--models takes n:alpha pairs such as 300:0.1, got {spec!r}")
    B, P = grid_points()
    shown = [k for k in (20, 40, 60, 80) if k <= args.layers]
    plt = figure()
    fig, axes = plt.subplots(1, len(args.models), figsize=(5 * len(args.models), 4), squeeze=False)
    rows, base_rows = [], []
    for ax, spec in zip(axes[0], args.models):
        n, alpha = int(spec.split(":")[0]), float(spec.split(":")[1])
        params, E, base = study(n, alpha, args.instances, args.layers, args.key)
        mean = E.mean(0)
        start = mean[:, params.num_layers - 1].min()
        print(
            f"\nn = {n}, alpha = {alpha} (model trained at n = {params.n}; "
            f"{args.instances} instances, {len(B)} grid points); mean error after the "
            f"{params.num_layers} learned layers: {start:.1e}"
        )
        print(
            f"  {'objective':30s} {'beta':>4s} {'phi':>4s} "
            + " ".join(f"{'@' + str(k):>8s}" for k in shown)
            + f" {'worst@' + str(args.layers):>9s} {'peak 11-20':>10s}"
        )
        seen = set()
        for name, g in choices(params, E):
            # float32 grid points: 1.7, not 1.6999999
            b, f = round(float(B[g]), 6), round(float(P[g]), 6)
            at = [mean[g, k - 1] for k in shown]
            worst, peak = E[:, g, -1].max(), mean[g, 10:20].max()
            print(
                f"  {name:30s} {b:4.1f} {f:4.1f} "
                + " ".join(f"{v:8.1e}" for v in at)
                + f" {worst:9.1e} {peak:10.1e}"
            )
            rows.append([n, alpha, args.instances, name, b, f, start, *at, worst, peak])
            if g not in seen:
                seen.add(g)
                ax.semilogy(
                    np.arange(1, args.layers + 1),
                    mean[g],
                    label=f"{name}: β={b:.1f}, φ={f:.1f}",
                    lw=2 if name == "shipped" else 1,
                )
        for name, e in base.items():
            print(
                f"  baseline {name:40s} mean {e.mean():.1e}  median {np.median(e):.1e}  "
                f"worst {e.max():.1e}"
            )
            base_rows.append([n, alpha, args.instances, name, e.mean(), np.median(e), e.max()])
        ax.axvline(params.num_layers, color="grey", ls=":", lw=1)
        ax.set(
            title=f"n = {n}, α = {alpha} ({args.instances} instances)",
            xlabel="layer",
            ylabel="mean ‖X_k − X⋆‖_F / ‖X⋆‖_F",
        )
        ax.legend(fontsize=7)
    header = [
        "n",
        "alpha",
        "instances",
        "objective",
        "beta",
        "phi",
        "error after K layers",
        *[f"mean at layer {k}" for k in shown],
        f"worst at layer {args.layers}",
        "peak mean, layers 11-20",
    ]
    print("\nwrote", write_csv("frmnn_grid.csv", header, rows))
    print(
        "wrote",
        write_csv(
            "frmnn_baselines.csv",
            ["n", "alpha", "instances", "method", "mean error", "median error", "worst error"],
            base_rows,
        ),
    )
    fig.tight_layout()
    path = out_dir() / "frmnn_grid.png"
    fig.savefig(path, dpi=120)
    print("wrote", path)


if __name__ == "__main__":
    main()
