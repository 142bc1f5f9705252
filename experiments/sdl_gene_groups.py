"""Supervised gene groups, the analogue of the paper's Fig. 2: SDL-W and SDL-H dictionaries against
the unsupervised SVD dictionary of MF-LR, on Golub (ALL/AML) and Bioconductor ALL (B- vs T-cell).

All samples, per-gene z-scores / 100, intercept on, LPGD with sdl.fit's default step, 1000 steps
(the last relative loss change is printed). Training accuracy is sdl.predict on the training samples
(SDL-H: least-squares codes h = W⁺x, the library default).
Ranks r = 2 and the scree-elbow rank (sdl_convergence.scree_rank). (ξ, λ): 5-fold sdl.cross_validate
over {0.1, 1, 10}² (300 LPGD steps per fit, the grid vmapped) on Golub; on ALL a fixed
(ξ, λ) = (1, 0.1) by default (``--all-cv`` runs a 3-fold, 100-step CV instead: several minutes per
model and rank on this 2-core machine). Ties in CV accuracy go to the first grid point (smallest ξ,
then λ).

Factors are recovered as in Algorithm 1 (SDL-W: W = U, [β, H] = ΣVᵀ; SDL-H: [βᵀ ∥ W] = UΣ^{1/2}).
Each atom's sign is flipped, with its β, so that β ≥ 0 (the model is unchanged): a positive gene
weight then points toward class 1 (AML for Golub, T-cell for ALL). The atoms with the largest |β|
are shown; within an atom the weights are divided by the atom's max |weight| (so in [−1, 1]) and the
5 largest and 5 most negative are listed. The SVD baseline: the gene loadings U (p, r) of the
rank-r SVD of X, β from
sdl.mf_lr's logistic regression on Uᵀx (scikit-learn, C = 1; its accuracy with C = 10⁴ is printed
too because the /100 scaling makes Uᵀx small and C = 1 shrinks hard).

OpenBLAS is capped at one thread as in sdl_convergence.py (``--blas-threads``).

Gene identifiers are the data's own. Golub: the Affymetrix HU6800 probe id with, beside it, the gene
description that multtest's golub.gnames ships for it (``GeneData.descriptions``, e.g. M27891_at
"CST3 Cystatin C (amyloid angiopathy and cerebral hemorrhage)", X95735_at "Zyxin"; shortened to
``--desc-width`` characters in the printout and the figure, verbatim in the CSV). ALL: HG-U95Av2
probe ids only — those data carry no gene names, and none are added here.

Writes results/sdl/gene_groups.csv (dataset, method, atom, beta, rank_in_atom, gene, description,
weight; rank_in_atom +k = k-th largest positive weight, −k = k-th most negative; description empty
for ALL) and results/sdl/gene_groups.png.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from sdl_convergence import OUT, blas_threads, load_normalised, scree_rank, write_csv  # noqa: E402

GRID = (0.1, 1.0, 10.0)
CLASS1 = {"golub": "AML", "ALL": "T-cell"}


def oriented(W, beta):
    """(W, β) with every atom's sign chosen so that β_j ≥ 0 (κ = 1)."""
    s = np.where(np.asarray(beta)[:, 0] < 0, -1.0, 1.0)
    return np.asarray(W) * s[None, :], np.asarray(beta)[:, 0] * s


def top_genes(w, genes, top, descriptions=None):
    """[(rank_in_atom, gene, scaled weight, description)]: +1…+top largest, −1…−top most negative of
    w / max|w|; description "" where the data carry none."""
    v = w / np.max(np.abs(w))
    order = np.argsort(v)
    desc = (lambda i: descriptions[i].strip()) if descriptions is not None else (lambda i: "")  # noqa: E731
    pos = [
        (k + 1, genes[i], float(v[i]), desc(i)) for k, i in enumerate(order[::-1][:top]) if v[i] > 0
    ]
    neg = [
        (-(k + 1), genes[i], float(v[i]), desc(i)) for k, i in enumerate(order[:top]) if v[i] < 0
    ]
    return pos + neg


def shorten(text, width):
    """``text`` cut to at most ``width`` characters (an ellipsis marks the cut)."""
    return text if len(text) <= width else text[: max(width - 1, 0)].rstrip() + "…"


def gene_label(gene, description, width):
    """ "probe id" or "probe id  short description"."""
    return f"{gene}  {shorten(description, width)}" if description else gene


def principal_cosines(A, B):
    """Cosines of the principal angles between span(A) and span(B)."""
    qa, _ = np.linalg.qr(np.asarray(A))
    qb, _ = np.linalg.qr(np.asarray(B))
    return np.linalg.svd(qa.T @ qb, compute_uv=False)


def fit_dataset(name, args):
    from lowrank_jax import sdl

    g, X = load_normalised(name)
    y = g.y
    ranks = []
    for token in args.ranks.split(","):
        r = scree_rank(X) if token == "scree" else int(token)
        if r not in ranks:
            ranks.append(r)
    models = [m for m in args.models.split(",")]
    print(
        f"\n{name}: {X.shape[1]} probes × {X.shape[0]} samples, "
        f"classes {g.classes} = {np.bincount(y).tolist()} "
        f"(majority rate {np.bincount(y).max() / y.size:.3f}); "
        f"ranks {ranks} (scree elbow {scree_rank(X)})"
    )
    results = []
    Xj = jnp.asarray(X)
    for r in ranks:
        svd_U = None
        for model in models:
            t0 = time.perf_counter()
            if name == "golub" or args.all_cv:
                folds, iters = (args.folds, args.cv_iters) if name == "golub" else (3, 100)
                acc_grid, (xi, lam) = sdl.cross_validate(
                    X, y, r, GRID, GRID, model=model, folds=folds, max_iter=iters
                )
                how = f"{folds}-fold CV ({iters} steps)"
            else:
                acc_grid, (xi, lam), how = None, (args.all_xi, args.all_lam), "fixed"
            iters = args.iters if name == "golub" else args.all_iters
            m = sdl.fit(
                Xj, y, r, model=model, xi=xi, lam=lam, max_iter=iters, tol=None, intercept=True
            )
            train_acc = float(np.mean(np.asarray(sdl.predict(m, Xj)) == y))
            W, beta = oriented(m.W, m.coef)
            loss = m.history["loss"]
            rel_step = float(jnp.abs(loss[-1] - loss[-2]) / jnp.abs(loss[-1]))
            results.append(
                dict(
                    dataset=name,
                    method=f"SDL-{model} r={r}",
                    r=r,
                    W=W,
                    beta=beta,
                    acc=train_acc,
                    xi=xi,
                    lam=lam,
                    how=how,
                    cv=acc_grid,
                    wall=time.perf_counter() - t0,
                    last_change=rel_step,
                )
            )
        mf = sdl.mf_lr(X, y, r)
        mf_big = sdl.mf_lr(X, y, r, C=1e4)
        svd_U = np.asarray(mf.U)
        W, beta = oriented(svd_U, mf.classifier.coef_.T)
        results.append(
            dict(
                dataset=name,
                method=f"SVD r={r}",
                r=r,
                W=W,
                beta=beta,
                acc=float(np.mean(mf.predict(X) == y)),
                acc_big=float(np.mean(mf_big.predict(X) == y)),
                beta_big=np.abs(mf_big.classifier.coef_[0]),
            )
        )
        for res in results:
            if res["r"] == r and res["method"].startswith("SDL"):
                res["cos_svd"] = principal_cosines(res["W"], svd_U)
    return g, results


def report(g, results, args, rows):
    genes, descriptions = g.genes, g.descriptions
    for res in results:
        order = np.argsort(-np.abs(res["beta"]))[: args.atoms]
        res["shown"] = []
        head = f"  {res['method']:10s} train acc {res['acc']:.3f}"
        if res["method"].startswith("SDL"):
            cv = "" if res["cv"] is None else f", CV acc {np.max(res['cv']):.3f}"
            head += (
                f" (ξ = {res['xi']:g}, λ = {res['lam']:g}: {res['how']}{cv}; last rel. loss change "
                f"{res['last_change']:.1e}; {res['wall']:.0f} s); "
                "cos of principal angles to the SVD span "
                + ", ".join(f"{c:.3f}" for c in res["cos_svd"])
            )
        else:
            head += (
                f" (sklearn C = 1; C = 1e4: train acc {res['acc_big']:.3f}, |β| "
                + ", ".join(f"{b:.3g}" for b in res["beta_big"])
                + ")"
            )
        print(head)
        for j in order:
            tops = top_genes(res["W"][:, j], genes, args.top, descriptions)
            res["shown"].append((j, tops))
            rows += [
                [
                    res["dataset"],
                    res["method"],
                    j + 1,
                    f"{res['beta'][j]:.6g}",
                    k,
                    gene,
                    desc,
                    f"{w:.6f}",
                ]
                for k, gene, w, desc in tops
            ]
            # one gene per line when described
            sep = "\n        " if descriptions is not None else " "
            pos = sep.join(
                f"{gene_label(gene, desc, args.desc_width)} ({w:+.2f})"
                for k, gene, w, desc in tops
                if k > 0
            )
            neg = sep.join(
                f"{gene_label(gene, desc, args.desc_width)} ({w:+.2f})"
                for k, gene, w, desc in tops
                if k < 0
            )
            print(
                f"    atom {j + 1} β = {res['beta'][j]:.4g}"
                f"\n      + toward {CLASS1[res['dataset']]}:{sep}{pos}"
                f"\n      − toward the other class:{sep}{neg}"
            )


def cv_table(results):
    for res in results:
        if res.get("cv") is not None:
            print(
                f"  CV accuracy {res['method']} (rows ξ, columns λ = {GRID}): "
                + "; ".join(" ".join(f"{a:.3f}" for a in row) for row in res["cv"])
            )


def figure(all_results, args, plt):
    groups = []  # one row per (dataset, rank): methods × shown atoms
    for dataset, r in dict.fromkeys((res["dataset"], res["r"]) for res in all_results):
        groups.append([res for res in all_results if res["dataset"] == dataset and res["r"] == r])
    ncols = max(sum(len(res["shown"]) for res in grp) for grp in groups)
    fig, axes = plt.subplots(
        len(groups), ncols, figsize=(4.8 * ncols, 3.0 * len(groups)), squeeze=False
    )
    for row_axes, grp in zip(axes, groups):
        panels = [(res, j, tops) for res in grp for j, tops in res["shown"]]
        for ax, (res, j, tops) in zip(row_axes, panels):
            tops = sorted(tops, key=lambda t: t[2])
            vals = [w for _, _, w, _ in tops]
            ax.barh(range(len(tops)), vals, color=["C3" if v > 0 else "C0" for v in vals])
            ax.set_yticks(range(len(tops)))
            ax.set_yticklabels(
                [gene_label(gene, desc, args.fig_desc_width) for _, gene, _, desc in tops],
                fontsize=6.5,
            )
            ax.set_xlim(-1.05, 1.05)
            ax.axvline(0, color="k", lw=0.6)
            ax.tick_params(axis="x", labelsize=7)
            extra = f" (C = 1e4: {res['acc_big']:.2f})" if "acc_big" in res else ""
            ax.set_title(
                f"{res['dataset']} {res['method']}, atom {j + 1}: β = {res['beta'][j]:.3g}\n"
                f"train acc {res['acc']:.2f}{extra}",
                fontsize=8,
            )
        for ax in row_axes[len(panels) :]:
            ax.axis("off")
    fig.suptitle(
        "Top ±5 probe weights of the atoms with the largest |β|, weights / max |weight|, "
        "signs with β ≥ 0. Golub: red → AML, blue → ALL; ALL data: red → T-cell, blue → B-cell.\n"
        "Labels: Affymetrix probe ids; Golub's with the gene description shipped in golub.gnames "
        "(shortened), the ALL data's alone (they carry no gene names).",
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(OUT / "gene_groups.png", dpi=100)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--datasets", default="golub,ALL")
    ap.add_argument("--models", default="W,H")
    ap.add_argument(
        "--ranks", default="2,scree", help="comma list of ranks; 'scree' = the elbow rank"
    )
    ap.add_argument("--iters", type=int, default=1000, help="LPGD steps of the final fits (Golub)")
    ap.add_argument(
        "--all-iters", type=int, default=1000, help="LPGD steps of the final fits (ALL)"
    )
    ap.add_argument("--cv-iters", type=int, default=300)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument(
        "--all-cv", action="store_true", help="cross-validate on ALL too (3 folds, 100 steps; slow)"
    )
    ap.add_argument("--all-xi", type=float, default=1.0)
    ap.add_argument("--all-lam", type=float, default=0.1)
    ap.add_argument("--atoms", type=int, default=2, help="atoms shown per model (largest |β|)")
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument(
        "--desc-width",
        type=int,
        default=60,
        help="characters of a gene description printed beside its probe id (Golub)",
    )
    ap.add_argument(
        "--fig-desc-width", type=int, default=26, help="the same in the figure's labels"
    )
    ap.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help=(
            "OpenBLAS threads for jax's CPU LAPACK calls (eigh, svd); 0 = leave as is "
            "(see the docstring)"
        ),
    )
    args = ap.parse_args(argv)
    bad_ranks = [
        t for t in args.ranks.split(",") if t != "scree" and not (t.isdigit() and int(t) > 0)
    ]
    if bad_ranks:  # an int() error after the data had loaded
        ap.error(
            "--ranks takes a comma list of positive integers and 'scree', "
            f"got {', '.join(bad_ranks)}"
        )
    unknown = [d for d in args.datasets.split(",") if d not in ("golub", "ALL")]
    if unknown:  # refused before any work (another name ran ALL under it, after fitting the others)
        ap.error(
            f"--datasets takes a comma-separated subset of golub,ALL; unknown: {', '.join(unknown)}"
        )
    OUT.mkdir(parents=True, exist_ok=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = time.perf_counter()
    load0 = os.getloadavg()[0]
    rows, everything = [], []
    print(
        "Gene identifiers below are Affymetrix probe ids as shipped with the data "
        "(Golub: HU6800, each with the description golub.gnames gives it; "
        "ALL: HG-U95Av2, which carries no gene names, so none are given)."
    )
    with blas_threads(args.blas_threads), jax.enable_x64(True):
        for name in args.datasets.split(","):
            g, results = fit_dataset(name, args)
            cv_table(results)
            report(g, results, args, rows)
            everything += results
    write_csv(
        "gene_groups.csv",
        ["dataset", "method", "atom", "beta", "rank_in_atom", "gene", "description", "weight"],
        rows,
    )
    figure(everything, args, plt)
    print(
        f"wrote {OUT}/gene_groups.csv/png in {time.perf_counter() - t0:.0f} s (1-min load average "
        f"{load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} CPUs)"
    )


if __name__ == "__main__":
    main()
