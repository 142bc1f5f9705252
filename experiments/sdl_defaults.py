"""SDL at its defaults, SDL tuned by cross-validation, and logistic regression on microarrays.

Data (``make data`` for ALL; Golub ships with the package, NCI60 comes with ``make data`` too):
Golub (ALL/AML, 38 × 3 051), Bioconductor ALL (B/T, 128 × 12 625), NCI60 (14 types, 64 × 6 830).
One stratified 50/50 split per data set with a fixed seed (a class with a single sample goes to the
training half), per-gene z-scores from the training half. On that split, test accuracy of

* SDL-H and SDL-W by ``sdl.fit(X, y, rank)`` with every default (ξ, λ from the data's scale);
* the same through ``sdl.SDLClassifier(rank)`` (the same fit, through scikit-learn's interface);
* SDL tuned: (ξ, λ) chosen by ``sdl.cross_validate`` (5 folds, one vmapped program per fold) over
  ξ ∈ {0.1, 1, 10}, λ ∈ {0.001, 0.01, 0.1} on X/s, then refitted on the whole training half;
* scikit-learn ``LogisticRegression`` at its defaults (C = 1) and with C chosen by 5-fold
  ``GridSearchCV`` over 10⁻², …, 10² (at most 1 000 L-BFGS iterations each).

Prints a markdown table and writes it to ``results/sdl/defaults.md`` (``--out``).

    python experiments/sdl_defaults.py
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from sdl_accuracy import stratified_half  # noqa: E402  (the split of the accuracy experiment)

OUT = pathlib.Path(__file__).resolve().parents[1] / "results" / "sdl"
XIS = (0.1, 1.0, 10.0)
LAMS = (0.001, 0.01, 0.1)


def evaluate(name, X, y, rank, seed, folds):
    """Test accuracies of every method on one data set; a dict method → accuracy."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV

    from lowrank_jax import sdl
    from lowrank_jax.datasets import standardize

    train, test = stratified_half(y, seed)
    Xtr, Xte = standardize(X[train], X[test])
    ytr, yte = y[train], y[test]
    k = int(y.max()) + 1
    acc = {"majority class": float(np.mean(yte == np.bincount(ytr).argmax()))}
    s = float(np.sqrt(np.sum(Xtr**2) / Xtr.shape[0]))
    for model in ("H", "W"):
        t = time.perf_counter()
        m = sdl.fit(Xtr, ytr, rank, model=model, num_classes=k)
        acc[f"SDL-{model} defaults (sdl.fit)"] = float(
            np.mean(np.asarray(sdl.predict(m, Xte)) == yte)
        )
        clf = sdl.SDLClassifier(rank, model=model).fit(Xtr, ytr)
        acc[f"SDL-{model} defaults (SDLClassifier)"] = float(clf.score(Xte, yte))
        _, (xi, lam) = sdl.cross_validate(
            Xtr / s, ytr, rank, XIS, LAMS, model=model, folds=folds, num_classes=k
        )
        tuned = sdl.fit(Xtr / s, ytr, rank, model=model, xi=xi, lam=lam, num_classes=k)
        hit = np.asarray(sdl.predict(tuned, Xte / s)) == yte
        acc[f"SDL-{model} tuned (CV ξ, λ)"] = float(np.mean(hit))
        print(f"  {name} SDL-{model}: ξ, λ = {xi:g}, {lam:g} ({time.perf_counter() - t:.0f} s)")
    acc["LogisticRegression (C = 1)"] = float(
        LogisticRegression(max_iter=1000).fit(Xtr, ytr).score(Xte, yte)
    )
    grid = GridSearchCV(
        LogisticRegression(max_iter=1000), {"C": np.logspace(-2, 2, 5)}, cv=folds
    ).fit(Xtr, ytr)
    acc["LogisticRegression (CV C)"] = float(grid.score(Xte, yte))
    return acc


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", type=int, default=5, help="SDL's rank r (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split (default 0)")
    parser.add_argument("--folds", type=int, default=5, help="CV folds (default 5)")
    parser.add_argument("--out", type=pathlib.Path, default=OUT, help="output folder")
    args = parser.parse_args(argv)

    from lowrank_jax import datasets

    loaders = {
        "Golub": datasets.load_golub,
        "ALL B/T": datasets.load_all_leukemia,
        "NCI60": datasets.load_nci60,
    }
    results = {}
    for name, load in loaders.items():
        try:
            d = load()
        except (FileNotFoundError, ImportError, ValueError) as err:
            print(f"{name}: skipped ({err}); run `make data`")
            continue
        results[name] = evaluate(name, d.X, d.y, args.rank, args.seed, args.folds)
        print(f"{name}: " + ", ".join(f"{m} {a:.3f}" for m, a in results[name].items()), flush=True)
    names = list(results)
    methods = list(next(iter(results.values())))
    lines = [
        "| method | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for method in methods:
        lines.append(
            f"| {method} | " + " | ".join(f"{results[n][method]:.3f}" for n in names) + " |"
        )
    table = "\n".join(lines)
    print(table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "defaults.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
