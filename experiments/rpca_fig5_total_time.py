"""Paper Figure 5: total time to ‖Y − X − S‖_F/‖Y‖_F < 1e-4 vs α at n = 3000, r = 5:
LRPCA (shipped parameters, FRMNN continuation) vs ScaledGD vs AltProj.

ScaledGD runs twice: with its reference sparsification level α̃ = 2α ("ScaledGD"), and with the
α̃ = 1.1α that the Table 1 script's tuning found best at α ≥ 0.4 ("ScaledGD (α̃ = 1.1α)"); the paper
says its baselines were hand-tuned. Neither suits every α: 1.1α is 8–12x faster at α = 0.25–0.3 but
stalls above the 1e-4 residual at α = 0.05 (docs/rpca.md). ``--solvers`` runs a subset (the CSV and
figure then hold only those).

LRPCA uses the pretrained model whose α is nearest, moved from n = 1000 to n by the paper's
generalisation rule (ζ × 1000/n). Times exclude compilation (each solver is warmed up on the
first instance of the size); 3 instances per α, mean and std. Also records iterations and the
final ‖X − X⋆‖_F/‖X⋆‖_F.

Writes results/rpca/fig5_total_time.{csv,png}.
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

from _rpca import figure, instance, nearest_pretrained_alpha, out_dir, rel_error, timed, write_csv
from lowrank_jax import rpca

TOL = 1e-4
TUNED = "ScaledGD (α̃ = 1.1α)"


def solvers(alpha):
    model = rpca.pretrained(alpha=nearest_pretrained_alpha(alpha))
    return {
        "LRPCA": lambda Y: model(Y, tol=TOL, max_iter=200),
        "ScaledGD": lambda Y: rpca.scaledgd(Y, 5, alpha, tol=TOL, iters=1000),
        TUNED: lambda Y: rpca.scaledgd(Y, 5, alpha, alpha_iter=1.1 * alpha, tol=TOL, iters=1000),
        "AltProj": lambda Y: rpca.altproj(Y, 5, tol=TOL),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--alphas", type=float, nargs="+", default=[0.05, 0.1, 0.15, 0.2, 0.25, 0.3])
    ap.add_argument("--instances", type=int, default=3)
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--solvers", nargs="+", choices=list(solvers(0.1)), help="run only these solvers")
    args = ap.parse_args(argv)
    rows = []
    for alpha in args.alphas:
        probs = [instance(100 + s, args.n, 5, alpha) for s in range(args.instances)]
        for name, solve in solvers(alpha).items():
            if args.solvers and name not in args.solvers:
                continue
            jax.block_until_ready(solve(probs[0].Y))  # compile
            times, iters, errs, res = [], [], [], []
            for p in probs:
                out, sec = timed(solve, p.Y)
                times.append(sec)
                iters.append(int(out.n_iter))
                errs.append(rel_error(out.X, p.X))
                res.append(float(np.asarray(out.residual)[int(out.n_iter) - 1]))
            rows.append([alpha, name, np.mean(times), np.std(times), np.mean(iters), np.mean(errs), np.max(res)])
            print(f"alpha={alpha:.2f} {name:20s} {np.mean(times):7.3f} s  {np.mean(iters):5.1f} its  "
                  f"error {np.mean(errs):.1e}  residual {np.max(res):.1e}")
    write_csv("fig5_total_time.csv", ["alpha", "solver", "seconds", "seconds_std", "iterations",
                                      "rel_error", "max_final_residual"], rows)
    plt = figure()
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for name, marker in (("LRPCA", "o"), ("ScaledGD", "s"), (TUNED, "D"), ("AltProj", "^")):
        r = [row for row in rows if row[1] == name]
        if not r:
            continue
        ax.errorbar([x[0] for x in r], [x[2] for x in r], [x[3] for x in r], marker=marker, capsize=3,
                    label=name)
    ax.set_yscale("log")
    ax.set_xlabel("outlier density α")
    ax.set_ylabel("seconds to residual < 1e-4")
    ax.set_title(f"Fig. 5: n = {args.n}, r = 5, {jax.devices()[0].platform}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir() / "fig5_total_time.png", dpi=120)


if __name__ == "__main__":
    main()
