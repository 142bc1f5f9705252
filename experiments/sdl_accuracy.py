"""Supervised dictionary learning on real microarrays: the paper's accuracy protocol (Sec. 3, Fig. 2f).

Data (``make data``): Golub leukaemia (ALL vs AML, 3 051 genes × 38), Bioconductor ALL (B- vs T-cell,
12 625 probes × 128) and NCI60 (6 830 genes × 64, 14 types). The paper's CuMiDa sets are not in any
registry; these are the closest packaged microarrays.

Protocol: 50/50 stratified split × 5 repeats (a class with one sample goes to the training half);
per-gene z-scores from the training half (no test statistics leak), divided by √p for SDL so that a
sample has norm ≈ 1 and ξ‖X − B‖² is commensurate with the log-loss; rank r from the scree elbow of
the full standardised matrix (``sdl_convergence.scree_rank``: kneedle rule on the variance shares of
the first 20 components, clipped to [2, 10]); (ξ, λ) by 5-fold CV on the training half over ξ ∈ {0.1, 1, 10} and λ ∈ {0.001, 0.01, 0.1}, the
grid fitted in one vmapped program per fold (300 LPGD iterations); final fits 1 000 iterations.

Two departures from the paper's text, both measured on Golub: (1) its normalisation (z-scores / 100,
from the authors' code) shrinks the data so much that every regularised classifier, SDL included,
predicts the majority class (0.72–0.78); (2) its λ grid {0.1, 1, 10} penalises the logits A so much
that SDL-H underfits (λ = 1: 0.72; λ = 0.01: 1.00 on the first split) — the authors' code never
applies λ (it is hard-coded to 0), so their runs had λ = 0. BCD uses the (ξ, λ) chosen for LPGD. Baselines: MF-LR (rank-r SVD + logistic
regression), Gaussian naive Bayes, SVM (RBF), random forest (500 trees), logistic regression
(scikit-learn defaults otherwise). All models get an intercept. Writes results/sdl/accuracy.csv,
accuracy.md, accuracy.png and scree.png.
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))       # sibling sdl_convergence
OUT = pathlib.Path(__file__).resolve().parents[1] / "results" / "sdl"
XI_GRID = (0.1, 1.0, 10.0)        # the paper's
LAM_GRID = (0.001, 0.01, 0.1)     # the paper's {0.1, 1, 10} / 100 (see the module docstring)
PAPER = {"SDL-H (LPGD)": "0.885 / 0.875", "SDL-W (LPGD)": "0.869 / 0.894", "SDL-H (BCD)": "0.823 / 0.880",
         "SDL-W (BCD)": "0.785 / 0.753", "MF-LR": "0.747 / 0.454", "NB": "0.815 / 0.810", "SVM": "0.746 / 0.866",
         "RF": "0.815 / 0.844"}


def loaders():
    from lowrank_jax.datasets import load_all_leukemia, load_golub, load_nci60
    return {"Golub": load_golub, "ALL B/T": load_all_leukemia, "NCI60": load_nci60}


def stratified_half(y, seed):
    rng = np.random.default_rng(seed)
    train = []
    for c in np.unique(y):
        idx = rng.permutation(np.nonzero(y == c)[0])
        train.extend(idx[: (idx.size + 1) // 2])
    train = np.sort(np.array(train))
    return train, np.setdiff1d(np.arange(y.size), train)


def run(names, repeats, cv_iters, iters, folds, scale):
    import jax
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.svm import SVC

    from lowrank_jax import sdl
    from lowrank_jax.datasets import standardize
    from sdl_convergence import scree_rank   # the one scree rule of the SDL experiments

    rows, screes = [], {}
    for name, load in loaders().items():
        if names and not any(n.lower() in name.lower() for n in names):
            continue
        data = load()
        X, y = data.X, data.y
        Z = standardize(X)
        r, s = scree_rank(Z), np.linalg.svd(Z, compute_uv=False)[:20]
        scale_v = np.sqrt(X.shape[0]) if scale == "sqrtp" else float(scale)
        screes[name] = (s, r)
        print(f"{name}: p = {X.shape[0]}, n = {X.shape[1]}, {len(data.classes)} classes, scree rank r = {r}", flush=True)
        for rep in range(repeats):
            t0 = time.perf_counter()
            tr, te = stratified_half(y, rep)
            Ztr, Zte = standardize(X[:, tr], X[:, te])          # z-scores (baselines)
            Xtr, Xte = Ztr / scale_v, Zte / scale_v             # SDL's normalisation
            ytr, yte = y[tr], y[te]
            k = len(data.classes)
            acc = {}
            for model in ("H", "W"):
                grid, (xi, lam) = sdl.cross_validate(Xtr, ytr, r, XI_GRID, LAM_GRID, model=model, folds=folds,
                                                     iters=cv_iters, seed=rep)
                for solver in ("lpgd", "bcd"):
                    m = sdl.fit(Xtr, ytr, r, model=model, xi=xi, lam=lam, iters=iters, solver=solver, num_classes=k,
                                key=jax.random.key(rep))
                    label = f"SDL-{model} ({solver.upper()})"
                    acc[label] = np.mean(np.asarray(sdl.predict(m, Xte)) == yte)
                    if model == "H" and solver == "lpgd":
                        sup = sdl.predict(m, Xte, coding="supervised")
                        acc["SDL-H (LPGD, supervised coding)"] = np.mean(np.asarray(sup) == yte)
                acc[f"SDL-{model} (ξ, λ)"] = f"{xi:g}, {lam:g}"
            acc["MF-LR"] = np.mean(sdl.mf_lr(Ztr, ytr, r).predict(Zte) == yte)
            for label, clf in (("NB", GaussianNB()), ("SVM", SVC()),
                               ("RF", RandomForestClassifier(n_estimators=500, random_state=rep)),
                               ("LR", LogisticRegression(max_iter=5000))):
                acc[label] = clf.fit(Ztr.T, ytr).score(Zte.T, yte)
            for label, a in acc.items():
                rows.append([name, rep, label, a])
            print(f"  repeat {rep}: " + ", ".join(f"{k_}: {v:.2f}" if not isinstance(v, str) else f"{k_}: {v}"
                                                   for k_, v in acc.items()) + f"  ({time.perf_counter() - t0:.0f} s)",
                  flush=True)
    return rows, screes


def summarise(rows, screes, plt):
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / "accuracy.csv", "w", newline="") as f:
        csv.writer(f).writerows([["dataset", "repeat", "method", "accuracy_or_choice"]] + rows)
    datasets = list(dict.fromkeys(r[0] for r in rows))
    methods = list(dict.fromkeys(r[2] for r in rows if not isinstance(r[3], str)))
    table = {}
    for d in datasets:
        for m in methods:
            v = np.array([r[3] for r in rows if r[0] == d and r[2] == m], float)
            table[d, m] = (v.mean(), v.std())
    lines = ["| method | " + " | ".join(datasets) + " | paper (pancreatic / breast) |",
             "|---|" + "---|" * (len(datasets) + 1)]
    for m in methods:
        lines.append(f"| {m} | " + " | ".join(f"{table[d, m][0]:.3f} ({table[d, m][1]:.2f})" for d in datasets)
                     + f" | {PAPER.get(m, '—')} |")
    text = "\n".join(lines)
    (OUT / "accuracy.md").write_text(text + "\n")
    print(text)
    fig, ax = plt.subplots(figsize=(11, 4))
    width = 0.8 / len(datasets)
    for i, d in enumerate(datasets):
        ax.bar(np.arange(len(methods)) + i * width, [table[d, m][0] for m in methods], width,
               yerr=[table[d, m][1] for m in methods], label=d, capsize=2)
    ax.set_xticks(np.arange(len(methods)) + 0.4 - width / 2)
    ax.set_xticklabels(methods, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("test accuracy (mean ± std over splits)")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "accuracy.png", dpi=120)
    plt.close(fig)
    fig, axes = plt.subplots(1, len(screes), figsize=(4 * len(screes), 3.2), squeeze=False)
    for ax, (d, (s, r)) in zip(axes[0], screes.items()):
        ax.plot(np.arange(1, s.size + 1), s, "o-", ms=3)
        ax.axvline(r, color="C3", ls=":", label=f"elbow r = {r}")
        ax.set_title(d)
        ax.set_xlabel("index")
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("singular value (standardised data)")
    fig.tight_layout()
    fig.savefig(OUT / "scree.png", dpi=120)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--datasets", nargs="*", default=None, help="subset of Golub, ALL, NCI60")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--cv-iters", type=int, default=300)
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--scale", default="sqrtp", help="SDL sees z-scores / scale; 'sqrtp' for √p")
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="cap OpenBLAS (jax's CPU eigh/svd) at this many threads; 0 leaves it alone")
    args = ap.parse_args(argv)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sdl_convergence import blas_threads
    with blas_threads(args.blas_threads):
        rows, screes = run(args.datasets, args.repeats, args.cv_iters, args.iters, args.folds, args.scale)
    summarise(rows, screes, plt)


if __name__ == "__main__":
    main()
