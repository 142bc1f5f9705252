"""Paper Figures 1–8 equivalents: 1-path-norm vs ℓ1 vs layer-wise constraint, SGD vs Prox-SGD, on
Fashion-MNIST (the paper's data) and on 5 000 real MNIST digits.

Setting (paper App. E unless said): one hidden layer of 200 ELU units, batch 100, 20 epochs,
constant learning rate, ``--seeds`` networks per configuration (PyTorch's default initialisation).
Choices here, to fit a 2-core CPU: one learning rate (0.1; the paper picks the best of eight per λ
by clean error) and a 6-point λ grid per regulariser instead of 41 values; every (seed, λ) of a
regulariser × method trains in one vmapped, jitted call (:func:`lowrank_jax.pathnorm.sweep`).
Clean error on the whole test split; robust error under PGD-ℓ∞ (40 steps of ε/20, random start,
pixels in [0, 1]) at ε ∈ {0.05, 0.1, 0.15, 0.2} on the first ``--attack`` test images.

Writes results/pathnorm/{summary.csv, curves.csv, fig1_loss.png, fig2_error_vs_nnz.png,
fig3_error_vs_lambda.png, fig4_nnz_vs_iteration.png}. A run of some ``--data`` / ``--regs`` replaces
only those (data, regulariser) rows of CSVs already there and keeps the others, so the figures show
every group that has run; ``--fresh`` starts the CSVs over.
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import Status, datasets, pathnorm

OUT = pathlib.Path(__file__).resolve().parents[1] / "results" / "pathnorm"
LAMBDAS = {
    "path": [0.0, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3],
    "l1": [0.0, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3],
    "layer": [0.0, 0.1, 0.2, 0.5, 1.0, 2.0],  # layer: rows kept in an ℓ1 ball of radius 1/λ
}
EPSILONS = (0.05, 0.1, 0.15, 0.2)


DATA = ("fashion", "mnist5k")


def load(name: str):
    if name == "fashion":
        tr, te = datasets.load_fashion_mnist("train"), datasets.load_fashion_mnist("test")
    elif name == "mnist5k":
        tr, te = datasets.load_mnist_5k("train"), datasets.load_mnist_5k("test")
    else:  # any other name ran MNIST-5k under that name
        raise ValueError(f"unknown data set {name!r}: choose from {DATA}")
    return tr, te


def evaluate(models, X, y, Xa, ya, key):
    """Per model (leading axes (seeds, λ)): clean error and robust errors at EPSILONS."""
    flat = jax.tree.map(lambda a: a.reshape((-1,) + a.shape[2:]), models)
    clean = jax.lax.map(lambda m: pathnorm.error_rate(m, X, y), flat)
    robust = [
        jax.lax.map(lambda m, e=eps: pathnorm.robust_error(m, Xa, ya, e, key=key), flat)
        for eps in EPSILONS
    ]
    shape = jax.tree.leaves(models)[0].shape[:2]
    return np.asarray(clean).reshape(shape), np.stack(
        [np.asarray(r).reshape(shape) for r in robust], -1
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", nargs="+", default=list(DATA), choices=DATA)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--attack", type=int, default=1000)
    ap.add_argument("--regs", nargs="+", default=list(pathnorm.REGULARIZERS))
    ap.add_argument(
        "--plot-only", action="store_true", help="redraw the figures from the CSV files"
    )
    ap.add_argument(
        "--fresh",
        action="store_true",
        help=(
            "write the CSVs anew instead of keeping the rows of (data, regulariser) groups not run"
        ),
    )
    args = ap.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    if args.plot_only:
        plot(_read("summary.csv"), _read("curves.csv"))
        return
    summary, curves = [], []
    for name in args.data:
        tr, te = load(name)
        X, y = jnp.asarray(tr.images), jnp.asarray(tr.labels)
        Xt, yt = jnp.asarray(te.images), jnp.asarray(te.labels)
        for reg in args.regs:
            lams = jnp.asarray(LAMBDAS[reg], jnp.float32)
            for method in pathnorm.METHODS:
                t0 = time.perf_counter()
                res = pathnorm.sweep(
                    X,
                    y,
                    reg=reg,
                    method=method,
                    lrs=jnp.full_like(lams, args.lr),
                    lams=lams,
                    seeds=args.seeds,
                    epochs=args.epochs,
                    progress=True,
                    key=jax.random.key(0),
                )
                jax.block_until_ready(res)
                t_train = time.perf_counter() - t0
                clean, robust = evaluate(
                    res.model, Xt, yt, Xt[: args.attack], yt[: args.attack], jax.random.key(1)
                )
                nnz, curve = (
                    np.asarray(res.nonzero),
                    {k: np.asarray(v) for k, v in res.history.items()},
                )
                failed = np.asarray(res.status) != Status.MAX_ITER
                if failed.any():
                    print(
                        f"{name} {reg} {method}: {int(failed.sum())} of {failed.size} "
                        "networks diverged "
                        "(status DIVERGED; their errors are NaN or meaningless): lower --lr",
                        flush=True,
                    )
                print(
                    f"{name} {reg:5s} {method:4s}: {t_train:6.0f} s training; "
                    "per λ (mean over seeds) "
                    + ", ".join(
                        f"λ={float(l):g}: err {clean[:, i].mean():.3f} "
                        f"rob@0.1 {robust[:, i, 1].mean():.3f} "
                        f"nnz {nnz[:, i].mean():.2f}"
                        for i, l in enumerate(lams)
                    ),
                    flush=True,
                )
                for s in range(args.seeds):
                    for i, lam in enumerate(np.asarray(lams)):
                        summary.append(
                            [
                                name,
                                reg,
                                method,
                                float(lam),
                                s,
                                float(clean[s, i]),
                                *map(float, robust[s, i]),
                                float(nnz[s, i]),
                                float(curve["loss"][s, i, -1].mean()),
                                round(t_train, 1),
                            ]
                        )
                        loss, nz = curve["loss"][s, i].ravel(), curve["nonzero"][s, i].ravel()
                        per = curve["loss"].shape[-1]
                        for k in range(len(loss)):
                            curves.append(
                                [
                                    name,
                                    reg,
                                    method,
                                    float(lam),
                                    s,
                                    (k + 1) / per,
                                    float(loss[k]),
                                    float(nz[k]),
                                ]
                            )
                jax.clear_caches()
    header = (
        ["data", "reg", "method", "lam", "seed", "clean_error"]
        + [f"robust_error_eps{e:g}" for e in EPSILONS]
        + ["nonzero_fraction", "final_reg_loss", "sweep_train_seconds"]
    )
    curves_header = [
        "data",
        "reg",
        "method",
        "lam",
        "seed",
        "epoch",
        "reg_loss",
        "nonzero_fraction",
    ]
    if not args.fresh:
        ran = {(name, reg) for name in args.data for reg in args.regs}
        summary = _rows_not_run("summary.csv", header, ran) + summary
        curves = _rows_not_run("curves.csv", curves_header, ran) + curves
    _write("summary.csv", header, summary)
    _write("curves.csv", curves_header, curves)
    plot(summary, curves)


def _rows_not_run(name, header, ran):
    """The rows of an earlier run's CSV whose (data, regulariser) is not in ``ran``; none when the
    file is absent or has other columns (an older layout, which this run then replaces)."""
    if not (OUT / name).exists():
        return []
    with open(OUT / name) as f:
        if next(csv.reader(f), None) != header:
            print(f"{name}: other columns than this script writes; its rows are not kept")
            return []
    return [r[:4] + [int(r[4])] + r[5:] for r in _read(name) if (r[0], r[1]) not in ran]


def _write(name, header, rows):
    with open(OUT / name, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def _read(name):
    """Rows of a CSV written by main(), numbers converted back (columns 3+ are numeric)."""
    with open(OUT / name) as f:
        rows = list(csv.reader(f))[1:]
    return [r[:3] + [float(v) for v in r[3:]] for r in rows]


def plot(summary, curves):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    S = np.array(summary, dtype=object)
    C = np.array(curves, dtype=object)
    datas = sorted(set(S[:, 0]))
    colors = {"path": "C0", "l1": "C1", "layer": "C2"}
    styles = {"prox": "-", "sgd": "--"}

    # Fig 1 / 4-7: regularised loss and non-zeros vs epoch, SGD vs Prox-SGD, a middle λ, seed 0; the
    # paper's path and ℓ1, or whatever was run without them (--regs layer drew empty axes).
    curve_regs = [r for r in ("path", "l1") if np.any(C[:, 1] == r)] or sorted(set(C[:, 1]))
    for fname, col, ylabel in (
        ("fig1_loss.png", 6, "minibatch CE + λ g"),
        ("fig4_nnz_vs_iteration.png", 7, "share of non-zero weights"),
    ):
        fig, axes = plt.subplots(1, len(datas), figsize=(5 * len(datas), 3.8), squeeze=False)
        for ax, d in zip(axes[0], datas):
            for reg in curve_regs:
                lam = LAMBDAS[reg][3]
                for method in ("sgd", "prox"):
                    m = (
                        (C[:, 0] == d)
                        & (C[:, 1] == reg)
                        & (C[:, 2] == method)
                        & np.isclose(C[:, 3].astype(float), lam)
                        & (C[:, 4].astype(int) == 0)
                    )
                    if m.any():
                        ax.plot(
                            C[m, 5].astype(float),
                            C[m, col].astype(float),
                            styles[method],
                            color=colors[reg],
                            label=f"{reg}, {method}, λ={lam:g}",
                        )
            ax.set_xlabel("epoch")
            ax.set_ylabel(ylabel)
            ax.set_title(d)
            if col == 6:
                ax.set_yscale("log")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(OUT / fname, dpi=120)
        plt.close(fig)

    # Fig 2: clean and robust (ε = 0.1) error vs share of non-zeros; Fig 3: vs λ.
    for fname, xcol, xlabel in (
        ("fig2_error_vs_nnz.png", 10, "share of non-zero weights"),
        ("fig3_error_vs_lambda.png", 3, "λ"),
    ):
        fig, axes = plt.subplots(len(datas), 2, figsize=(10, 3.6 * len(datas)), squeeze=False)
        for row, d in zip(axes, datas):
            for reg in colors:
                for method in styles:
                    m = (S[:, 0] == d) & (S[:, 1] == reg) & (S[:, 2] == method)
                    if not m.any():
                        continue
                    lams = sorted(set(S[m, 3]))
                    mean = lambda col: [
                        np.mean(S[m & (S[:, 3] == l), col].astype(float)) for l in lams
                    ]  # noqa: E731
                    xs = lams if xcol == 3 else mean(xcol)
                    for ax, col in zip(row, (5, 7)):
                        ax.plot(
                            xs,
                            mean(col),
                            styles[method],
                            marker="o",
                            ms=3,
                            color=colors[reg],
                            label=f"{reg}, {method}",
                        )
            for ax, title in zip(row, ("clean test error", "robust test error (PGD, ε = 0.1)")):
                ax.set_xlabel(xlabel)
                ax.set_title(f"{d}: {title}")
                if xcol == 3:
                    ax.set_xscale("symlog", linthresh=1e-5)
            row[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(OUT / fname, dpi=120)
        plt.close(fig)


if __name__ == "__main__":
    main()
