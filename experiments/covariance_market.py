"""Low-rank + sparse split of market correlation matrices: the real-data experiments of Baes,
Herrera, Neufeld, Ruyssen (Sec. III-B/C, Figs. 1–4) on the two matrices the package ships.

Data (the paper's 500-stock S&P 500 matrix and 44/88-country real-estate matrix are not available):
  (i)  ``sp500``: correlation of the daily simple returns of skfolio's 20 S&P 500 stocks over the
       last 250 trading days of the file (return dates printed; 2021-12-31 … 2022-12-28 with
       skfolio 1.12.2), the paper's "250 consecutive days". Stocks re-ordered by GICS sector in the
       paper's sector order.
  (ii) ``french``: correlation of Ken French's 30 monthly portfolio returns (12 industries,
       9 size × value, 9 size × momentum), full period 1949-01 … 2017-03 (819 months).

Methods, k = 3 everywhere a rank is forced:
  NN-authors     ReLU, l1 loss, Adam lr 1e-4, hidden (1000, 200, 200, 200), max_iter 4000,
                 tol 1e-6 (relative change), float32 (the authors' code).
  NN-theory      scaled arctan (2/π)tan⁻¹, log-cosh μ_ε with ε = 0.01, Goldstein–Armijo gradient
                 descent (α, β) = (0.1, 0.9), first trial step 1e-3, same widths, float64 (Theorem
                 II.1's assumptions), at most 8000 iterations, stopped once φ is frozen at working
                 precision (tol 1e-14): when the decrease α t‖∇φ‖² falls below the rounding of φ
                 the library's line search can accept no step, the step length underflows to ~0 and
                 every later iteration would still cost 40 trial evaluations of φ.
  NN-theory-f32  the same in float32 (tol 1e-7): the line search stalls far earlier, at
                 ‖∇φ‖ ~ 0.5–3, which is why NN-theory runs in float64.
  NN-gd          the theory configuration with a constant step h (GD_STEP, chosen so that φ
                 decreases monotonically on each data set), 8000 iterations, no early stop, float64.
  FPCP           fixed rank 3, λ = 1/√n, max_iter 2 loops (LRSLibrary's default); its S is already
                 shrink(Σ − L, 1/√n).
  IALM           λ = 1/√n, tol 1e-7, ρ = 1.5 (LRSLibrary's defaults; k is not an input), float64.
  NC-RPCA        the γ-norm ALM with its reference code's settings (μ₀ 0.9, ρ 1.1, γ 0.01,
                 ℓ2,1 sparse term, tol 1e-6; k is not an input), float64.
  RPCA-GD        rank 3, α = 0.1 (corrupted fraction per row/column, alpha_iter = 2α = 0.2 in the
                 iterations), lr 0.5, at most 200 iterations, tol 1e-9, float64.

Metrics (ϵ = 0.01): r(L) = #λ(L) > 0.01; s(S) = fraction |S_ij| < 0.01 of the
method's S (NN: Σ − L); the figure S̃ = shrink(S, 1/√n) (FPCP: its own S, which is that shrinkage
already — not shrunk twice) and s(S̃); ‖Σ − L‖_F/‖L‖_F; ‖Σ − (L + S̃)‖_F/‖Σ‖_F; λ_min(L) (float64
eigvalsh of the returned L; "PSD" means λ_min ≥ −1e-5 λ_max, i.e. up to round-off); wall time of the
first call (JIT compilation included) and of a second, warm call.

Fig. 4 / Theorem II.1: running max ‖Θ_j‖ (``param_norm_max``) and running min ‖∇φ(Θ_j)‖
(``grad_norm_min``) of NN-theory, NN-theory-f32 and NN-gd against j, with the tightest envelope
c/√(j+1), c = max_j min_{i≤j}‖∇φ(Θ_i)‖·√(j+1), of each run (eq. (14) says such a c exists; its value
(L_m(φ₀ − φ*)/K)^{1/2} is not computable). ``param_norm_max`` is NaN for Adam with the default
fixed-input first layer, so the Adam curve of the ‖Θ_j‖ panel is a second NN-authors run with
``first_layer="dense"`` (the authors' literal network), whose final loss is checked against the
first.

Writes results/covariance/market.csv (the table), market_eigenvalues.csv, market_theory.csv
(histories at log-spaced j), market_heatmaps.png, market_eigenvalues.png and market_theory.png.
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

OUT = pathlib.Path(__file__).resolve().parents[1] / "results" / "covariance"
RANK = 3
HIDDEN = (1000, 200, 200, 200)
EPS_SMOOTH = 0.01  # ε of the log-cosh μ (not the metric threshold ϵ)
# constant GD steps: the largest of {3e-6, 1e-5, 3e-5, 1e-4} with monotone φ
GD_STEP = {"sp500": 3e-5, "french": 1e-5}
RPCA_ALPHA = 0.1
PSD_TOL = 1e-5  # λ_min ≥ −PSD_TOL · λ_max counts as PSD (round-off)
SECTOR_ORDER = (
    "Energy",
    "Materials",
    "Industrials",
    "Real Estate",
    "Consumer Discretionary",
    "Consumer Staples",
    "Health Care",
    "Financials",
    "Information Technology",
    "Communication Services",
    "Utilities",
)
# Caption numbers of the paper (different data: compare qualitatively only).
PAPER = {
    "sp500": (
        "S&P500, 500 stocks, Fig. 1",
        {"NN-authors": (0.16, 0.69, 0.076), "FPCP": (0.24, 0.63, 0.079)},
    ),
    "french": (
        "real estate, 44 countries, Fig. 2 (nearest analogue)",
        {"NN-authors": (0.41, 0.76, 0.13), "FPCP": (0.41, 0.65, 0.24)},
    ),
}


# --- data -----------------------------------------------------------------------------------------


def load(name):
    """(Σ float64 (n, n), asset names, groups, description)."""
    from lowrank_jax.datasets.covariance import load_french_correlation, load_sp500_correlation

    if name == "sp500":
        last = load_sp500_correlation().dates[-250]
        d = load_sp500_correlation(start=str(last))
        assert len(d.dates) == 250
        order = sorted(
            range(len(d.names)), key=lambda i: (SECTOR_ORDER.index(d.groups[i]), d.names[i])
        )
        Sigma = d.Sigma[np.ix_(order, order)]
        names, groups = tuple(d.names[i] for i in order), tuple(d.groups[i] for i in order)
        desc = (
            f"S&P 500, 20 stocks, daily returns {d.dates[0]} … {d.dates[-1]} "
            f"({len(d.dates)} trading days), sorted by GICS sector"
        )
    elif name == "french":
        d = load_french_correlation()
        Sigma, names, groups = d.Sigma, d.names, d.groups
        desc = (
            f"Ken French 30 portfolios, monthly returns {d.dates[0]} … {d.dates[-1]} "
            f"({len(d.dates)} months)"
        )
    else:  # any other name ran the French portfolios under it
        raise ValueError(f"unknown data set {name!r}: choose sp500 or french")
    return np.asarray(Sigma), names, groups, desc


# --- runs -----------------------------------------------------------------------------------------


def timed(fn):
    """(result, seconds of the first call incl. compilation, seconds of a second, warm call)."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    return out, first, time.perf_counter() - t0


def run_methods(cv, name, Sigma64):
    """{method: dict(L, S, dtype, wall_first, wall, extra...)} and the Fig. 4 histories."""
    runs, hist = {}, {}
    n = Sigma64.shape[0]
    authors = dict(
        hidden=HIDDEN,
        activation="relu",
        loss="l1",
        optimizer="adam",
        lr=1e-4,
        max_iter=4000,
        tol=1e-6,
    )
    theory = dict(
        hidden=HIDDEN,
        activation="arctan",
        loss="logcosh",
        eps=EPS_SMOOTH,
        optimizer="armijo",
        lr=1e-3,
        max_iter=8000,
        tol=1e-14,
    )
    gd = dict(theory, optimizer="gd", lr=GD_STEP[name], tol=None)

    def nn(label, S, cfg, dtype, **extra):
        d, first, warm = timed(lambda: cv.decompose(S, RANK, **cfg))
        k = int(d.n_iter)
        runs[label] = dict(
            L=np.asarray(d.L, np.float64),
            S=np.asarray(d.S, np.float64),
            dtype=dtype,
            wall_first=first,
            wall=warm,
            n_iter=k,
            loss=float(d.loss),
            grad=float(d.grad_norm),
            grad_min=float(d.grad_norm_min),
            pmax=float(d.param_norm_max),
            step=float(d.step),
            **extra,
        )
        hist[label] = {
            f: np.asarray(d.history[f], np.float64)[:k]
            for f in ("loss", "grad_norm", "grad_norm_min", "param_norm_max", "step")
        }
        return d

    S32 = jnp.asarray(Sigma64, jnp.float32)
    nn("NN-authors", S32, authors, "float32")
    dense = cv.decompose(S32, RANK, first_layer="dense", **authors)
    kd = int(dense.n_iter)
    hist["NN-authors-dense"] = {
        f: np.asarray(dense.history[f], np.float64)[:kd]
        for f in ("loss", "grad_norm", "grad_norm_min", "param_norm_max", "step")
    }
    runs["NN-authors"]["dense_check"] = (kd, float(dense.loss))
    nn("NN-theory-f32", S32, dict(theory, tol=1e-7), "float32")

    with jax.enable_x64(True):
        S64 = jnp.asarray(Sigma64, jnp.float64)
        nn("NN-theory", S64, theory, "float64")
        nn("NN-gd", S64, gd, "float64")
        res, first, warm = timed(lambda: cv.fpcp(S64, RANK))
        runs["FPCP"] = dict(
            L=np.asarray(res.L),
            S=np.asarray(res.S),
            dtype="float64",
            wall_first=first,
            wall=warm,
            n_iter=int(res.n_iter),
            shrunk_already=True,
        )
        res, first, warm = timed(lambda: cv.ialm(S64, tol=1e-7))  # LRSLibrary's tolerance
        runs["IALM"] = dict(
            L=np.asarray(res.L),
            S=np.asarray(res.S),
            dtype="float64",
            wall_first=first,
            wall=warm,
            n_iter=int(res.n_iter),
        )
        res, first, warm = timed(lambda: cv.ncrpca(S64))
        runs["NC-RPCA"] = dict(
            L=np.asarray(res.L),
            S=np.asarray(res.S),
            dtype="float64",
            wall_first=first,
            wall=warm,
            n_iter=int(res.n_iter),
        )
        res, first, warm = timed(lambda: cv.rpca_gd(S64, RANK, alpha=RPCA_ALPHA, tol=1e-9))
        runs["RPCA-GD"] = dict(
            L=np.asarray(res.L),
            S=np.asarray(res.S),
            dtype="float64",
            wall_first=first,
            wall=warm,
            n_iter=int(res.n_iter),
        )
    for r in runs.values():
        t = 1.0 / np.sqrt(n)
        r["S_fig"] = (
            r["S"]
            if r.get("shrunk_already")
            else np.sign(r["S"]) * np.maximum(np.abs(r["S"]) - t, 0.0)
        )
    return runs, hist


def metrics(cv, Sigma, r):
    """The table's numbers of one run (all from float64 copies)."""
    L, S, S_fig = r["L"], r["S"], r["S_fig"]
    lam = np.linalg.eigvalsh(0.5 * (L + L.T))
    fro = np.linalg.norm
    # L = 0 (NC-RPCA here): no fit
    fit_L = float(fro(Sigma - L) / fro(L)) if fro(L) > 0 else float("inf")
    return dict(
        r_L=int(np.sum(lam > 0.01)),
        r_L_abs=int(np.sum(np.abs(lam) > 0.01)),
        s_S=float(cv.sparsity(S)),
        s_shrunk=float(cv.sparsity(S_fig)),
        fit_L=fit_L,
        fit_shrunk=float(fro(Sigma - L - S_fig) / fro(Sigma)),
        residual=float(fro(Sigma - L - S) / fro(Sigma)),
        min_eig_L=float(lam[0]),
        max_eig_L=float(lam[-1]),
        psd=bool(lam[0] >= -PSD_TOL * max(lam[-1], 0.0)),
        eig=lam[::-1],
    )


# --- figures --------------------------------------------------------------------------------------


def boundaries(groups):
    return [i + 0.5 for i in range(len(groups) - 1) if groups[i] != groups[i + 1]]


def heatmaps(plt, data, path):
    """Per data set a 3 × 3 grid: Σ | L | shrink(S) for NN-authors, FPCP, IALM; shared colour
    scale."""
    fig = plt.figure(figsize=(19, 12), layout="constrained")
    subs = fig.subfigures(1, len(data), wspace=0.03)
    shown = ("NN-authors", "FPCP", "IALM")
    for sub, (name, d) in zip(np.atleast_1d(subs), data.items()):
        Sigma, names, groups, runs, mets = (
            d["Sigma"],
            d["names"],
            d["groups"],
            d["runs"],
            d["metrics"],
        )
        mats = [Sigma] + [runs[m][x] for m in shown for x in ("L", "S_fig")]
        v = max(float(np.max(np.abs(a))) for a in mats)
        axes = sub.subplots(3, 3)
        fs = 5.5 if len(names) <= 20 else 4.5
        panels = {(0, 0): (Sigma, "Σ")}
        for row, m in enumerate(shown):
            mt = mets[m]
            panels[(row, 1)] = (
                runs[m]["L"],
                f"{m}: L, r(L) = {mt['r_L']}, λ_min = {mt['min_eig_L']:.1e}",
            )
            panels[(row, 2)] = (runs[m]["S_fig"], f"{m}: shrink(S, 1/√n), s = {mt['s_shrunk']:.2f}")
        im = None
        for (i, j), (A, title) in panels.items():
            ax = axes[i, j]
            im = ax.imshow(A, cmap="RdBu_r", vmin=-v, vmax=v, interpolation="nearest")
            ax.set_title(title, fontsize=8)
            ax.set_xticks(range(len(names)), names, rotation=90, fontsize=fs)
            ax.set_yticks(range(len(names)), names, fontsize=fs)
            ax.tick_params(length=1.5, pad=1)
            for b in boundaries(groups):
                ax.axhline(b, color="k", lw=0.4, alpha=0.5)
                ax.axvline(b, color="k", lw=0.4, alpha=0.5)
        axes[1, 0].axis("off")
        axes[2, 0].axis("off")
        lines = [f"{'method':<11}{'r(L)':>5}{'s(S~)':>7}{'Σ−L/L':>7}{'L+S~':>7}"]
        for m in ("NN-authors", "NN-theory", "FPCP", "IALM", "NC-RPCA", "RPCA-GD"):
            mt = mets[m]
            lines.append(
                f"{m:<11}{mt['r_L']:>5}{mt['s_shrunk']:>7.2f}{mt['fit_L']:>7.3f}{mt['fit_shrunk']:>7.3f}"
            )
        lines += ["", "Σ−L/L = ‖Σ−L‖F/‖L‖F", "L+S~ = ‖Σ−(L+S~)‖F/‖Σ‖F", "S~ = shrink(S, 1/√n)"]
        axes[1, 0].text(
            0.0,
            0.9,
            "\n".join(lines),
            family="monospace",
            fontsize=7,
            va="top",
            transform=axes[1, 0].transAxes,
        )
        sub.colorbar(
            im,
            ax=axes[2, 0],
            location="bottom",
            fraction=0.4,
            shrink=0.9,
            label=f"shared colour scale ±{v:.2f}",
        )
        sub.suptitle(
            f"{name}, k = {RANK}: {d['desc']}\n(lines: sector / portfolio-group boundaries)",
            fontsize=9,
        )
    fig.savefig(path, dpi=130)
    plt.close(fig)


EIG_METHODS = ("NN-authors", "NN-theory", "FPCP", "IALM", "NC-RPCA", "RPCA-GD")
EIG_STYLE = {
    "NN-authors": ("o", "C0"),
    "NN-theory": ("x", "C1"),
    "FPCP": ("s", "C2"),
    "IALM": ("^", "C3"),
    "NC-RPCA": ("D", "C5"),
    "RPCA-GD": ("v", "C4"),
}


def eigen_figure(plt, data, path):
    """Fig. 3 analogue: all eigenvalues (descending) of Σ and of each method's L, symlog scale, and
    a linear zoom around zero (negative eigenvalues = L not PSD)."""
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(2, len(data), figsize=(6.5 * len(data), 8), squeeze=False)
    for c, (name, d) in enumerate(data.items()):
        n = d["Sigma"].shape[0]
        idx = np.arange(1, n + 1)
        lam_S = np.linalg.eigvalsh(d["Sigma"])[::-1]
        for row in range(2):
            ax = axes[row, c]
            ax.plot(idx, lam_S, "k-", lw=1.2, label="Σ")
            for m in EIG_METHODS:
                mk, col = EIG_STYLE[m]
                ax.plot(
                    idx, d["metrics"][m]["eig"], mk, color=col, ms=4, mfc="none", label=f"L {m}"
                )
            ax.axhline(0, color="grey", lw=0.5)
            ax.set_xlabel("index i (descending)")
        for ax in axes[:, c]:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes[0, c].set_yscale("symlog", linthresh=1e-2)
        axes[0, c].axhline(0.01, color="grey", lw=0.5, ls=":")
        axes[0, c].set_title(
            f"{name}: eigenvalues of Σ and L (symlog, linear below 0.01)", fontsize=9
        )
        axes[0, c].set_ylabel("λ_i")
        lo = min(min(d["metrics"][m]["min_eig_L"] for m in EIG_METHODS), -0.005)
        axes[1, c].set_ylim(1.3 * lo, 0.1)
        axes[1, c].set_title("zoom near 0 (linear): negative λ(L) = L not PSD", fontsize=9)
        axes[1, c].set_ylabel("λ_i")
        axes[0, c].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


THEORY_RUNS = {
    "NN-theory": ("C1", "-", "Armijo, arctan/log-cosh, f64"),
    "NN-theory-f32": ("C1", ":", "Armijo, arctan/log-cosh, f32"),
    "NN-gd": ("C2", "-", "GD const. h, arctan/log-cosh, f64"),
    "NN-authors-dense": ("C0", "--", "Adam, ReLU/l1, f32 (dense 1st layer)"),
}


def envelope(gmin):
    """Tightest c with gmin_j ≤ c/√(j+1) for all j, and the j where it is attained."""
    prod = gmin * np.sqrt(np.arange(gmin.size) + 1.0)
    j = int(np.nanargmax(prod))
    return float(prod[j]), j


def theory_figure(plt, data, path):
    fig, axes = plt.subplots(3, len(data), figsize=(6.5 * len(data), 11), squeeze=False)
    for c, (name, d) in enumerate(data.items()):
        hist = d["hist"]
        for label, (col, ls, desc) in THEORY_RUNS.items():
            h = hist[label]
            j = np.arange(1, h["loss"].size + 1)  # plot against j + 1 on log axes
            if label != "NN-authors-dense":
                axes[0, c].loglog(j, h["loss"], color=col, ls=ls, label=desc)
            p = h["param_norm_max"]
            axes[1, c].loglog(
                j[1:],
                p[1:] - p[0],
                color=col,
                ls=ls,
                label=f"{desc}: ‖Θ₀‖ = {p[0]:.3f}, max ‖Θ_j‖ = {np.nanmax(p):.3f}",
            )
            if label != "NN-authors-dense":
                g = h["grad_norm_min"]
                cc, jj = envelope(g)
                axes[2, c].loglog(j, g, color=col, ls=ls, label=desc)
                axes[2, c].loglog(
                    j,
                    cc / np.sqrt(j),
                    color=col,
                    ls=ls,
                    lw=0.6,
                    alpha=0.6,
                    label=f"c/√(j+1), c = {cc:.3g} (attained at j = {jj})",
                )
        axes[0, c].set_title(f"{name}: φ(Θ_j) (log-cosh, ε = {EPS_SMOOTH})", fontsize=9)
        axes[1, c].set_title(
            f"{name}: running max ‖Θ_j‖ minus ‖Θ₀‖, j ≥ 1 (Fig. 4 analogue)", fontsize=9
        )
        axes[2, c].set_title(
            f"{name}: running min ‖∇φ(Θ_j)‖ and the tightest c/√(j+1) (eq. 14)", fontsize=9
        )
        for ax in axes[:, c]:
            ax.set_xlabel("j + 1")
            ax.legend(fontsize=6.5)
        axes[0, c].set_ylabel("φ")
        axes[1, c].set_ylabel("max_{i≤j} ‖Θ_i‖ − ‖Θ₀‖")
        axes[2, c].set_ylabel("min_{i≤j} ‖∇φ(Θ_i)‖")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --- output ---------------------------------------------------------------------------------------


def write(name, header, rows):
    with open(OUT / name, "w", newline="") as f:
        csv.writer(f).writerows([header] + rows)


COLUMNS = (
    "dataset",
    "method",
    "dtype",
    "r_L",
    "r_L_abs",
    "s_S",
    "s_shrunkS",
    "fit_L",
    "fit_shrunk",
    "residual",
    "min_eig_L",
    "max_eig_L",
    "psd",
    "n_iter",
    "wall_s_first",
    "wall_s_warm",
    "final_loss",
    "final_grad_norm",
    "grad_norm_min",
    "param_norm_max",
    "final_step",
)
TABLE_ORDER = (
    "NN-authors",
    "NN-theory",
    "NN-theory-f32",
    "NN-gd",
    "FPCP",
    "IALM",
    "NC-RPCA",
    "RPCA-GD",
)


def log_indices(n, per_decade=40):
    return np.unique(
        np.concatenate(
            [
                [0],
                np.round(np.logspace(0, np.log10(max(n - 1, 1)), per_decade * 4)).astype(int),
                [n - 1],
            ]
        )
    )


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--datasets", default="sp500,french", help="comma-separated subset of sp500,french"
    )
    args = ap.parse_args(argv)
    unknown = [d for d in args.datasets.split(",") if d not in ("sp500", "french")]
    if unknown:
        ap.error(
            "--datasets takes a comma-separated subset of sp500,french; "
            f"unknown: {', '.join(unknown)}"
        )
    OUT.mkdir(parents=True, exist_ok=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lowrank_jax import covariance as cv

    t_start = time.perf_counter()
    data = {}
    for name in args.datasets.split(","):
        Sigma, names, groups, desc = load(name)
        print(f"{name}: {desc}", flush=True)
        runs, hist = run_methods(cv, name, Sigma)
        mets = {m: metrics(cv, Sigma, r) for m, r in runs.items()}
        data[name] = dict(
            Sigma=Sigma, names=names, groups=groups, desc=desc, runs=runs, hist=hist, metrics=mets
        )

    rows, eig_rows, hist_rows = [], [], []
    for name, d in data.items():
        for m in TABLE_ORDER:
            r, mt = d["runs"][m], d["metrics"][m]
            rows.append(
                [
                    name,
                    m,
                    r["dtype"],
                    mt["r_L"],
                    mt["r_L_abs"],
                    mt["s_S"],
                    mt["s_shrunk"],
                    mt["fit_L"],
                    mt["fit_shrunk"],
                    mt["residual"],
                    mt["min_eig_L"],
                    mt["max_eig_L"],
                    mt["psd"],
                    r["n_iter"],
                    r["wall_first"],
                    r["wall"],
                    r.get("loss", ""),
                    r.get("grad", ""),
                    r.get("grad_min", ""),
                    r.get("pmax", ""),
                    r.get("step", ""),
                ]
            )
        lam_S = np.linalg.eigvalsh(d["Sigma"])[::-1]
        for i, v in enumerate(lam_S):
            eig_rows.append([name, "Sigma", i + 1, float(v)])
        for m in EIG_METHODS + ("NN-gd",):
            for i, v in enumerate(d["metrics"][m]["eig"]):
                eig_rows.append([name, m, i + 1, float(v)])
        for label, h in d["hist"].items():
            for j in log_indices(h["loss"].size):
                hist_rows.append(
                    [name, label, int(j)]
                    + [
                        float(h[f][j])
                        for f in ("loss", "grad_norm", "grad_norm_min", "param_norm_max", "step")
                    ]
                )
    write("market.csv", list(COLUMNS), rows)
    write("market_eigenvalues.csv", ["dataset", "matrix", "index", "eigenvalue"], eig_rows)
    write(
        "market_theory.csv",
        ["dataset", "run", "j", "loss", "grad_norm", "grad_norm_min", "param_norm_max", "step"],
        hist_rows,
    )
    heatmaps(plt, data, OUT / "market_heatmaps.png")
    eigen_figure(plt, data, OUT / "market_eigenvalues.png")
    theory_figure(plt, data, OUT / "market_theory.png")

    # --- printed summary ---
    for name, d in data.items():
        print(f"\n{name}: {d['desc']}; k = {RANK}")
        print(
            f"  {'method':<14}{'dtype':>8}{'r(L)':>5}{'s(S)':>6}{'s(S~)':>7}{'‖Σ−L‖/‖L‖':>11}"
            f"{'L+S~ err':>9}{'λmin(L)':>11}{'PSD':>5}{'iters':>6}{'t1st s':>8}{'twarm s':>8}"
        )
        for m in TABLE_ORDER:
            r, mt = d["runs"][m], d["metrics"][m]
            print(
                f"  {m:<14}{r['dtype']:>8}{mt['r_L']:>5}{mt['s_S']:>6.2f}{mt['s_shrunk']:>7.2f}"
                f"{mt['fit_L']:>11.3f}{mt['fit_shrunk']:>9.3f}{mt['min_eig_L']:>11.2e}"
                f"{'yes' if mt['psd'] else 'NO':>5}{r['n_iter']:>6}"
                f"{r['wall_first']:>8.2f}{r['wall']:>8.2f}"
            )
        caption, nums = PAPER[name]
        print(
            f"  paper ({caption}; other data, qualitative only): "
            + "; ".join(
                f"{m} ‖Σ−L‖/‖L‖ {a}, s(S~) {b}, L+S~ err {c}" for m, (a, b, c) in nums.items()
            )
        )
        kd, fd = d["runs"]["NN-authors"]["dense_check"]
        print(
            "  NN-authors fixed-input vs dense first layer: "
            f"φ = {d['runs']['NN-authors']['loss']:.5g} "
            f"({d['runs']['NN-authors']['n_iter']} it) vs {fd:.5g} ({kd} it)"
        )
        for label in THEORY_RUNS:
            h = d["hist"][label]
            p = h["param_norm_max"]
            grew = np.nonzero(np.diff(p) > 0)[0]
            line = (
                f"  {label:<17} {p.size} it: ‖Θ₀‖ {p[0]:.4f} → max ‖Θ_j‖ {np.nanmax(p):.4f} "
                f"(last increase at j = {grew[-1] + 1 if grew.size else 0})"
            )
            if label != "NN-authors-dense":
                g = h["grad_norm_min"]
                cc, jj = envelope(g)
                dec = np.diff(h["loss"])
                ups = int(np.sum(dec > 1e-12 * np.abs(h["loss"][1:])))
                line += (
                    f"; min‖∇φ‖: {g[0]:.3g} → {g[-1]:.3g} at j = {g.size - 1}, "
                    f"c = {cc:.3g} at j = {jj}, "
                    f"min‖∇φ‖·√(N+1)/c = {g[-1] * np.sqrt(g.size) / cc:.2e}; φ increases: {ups}; "
                    f"last step {h['step'][-1]:.2e}"
                )
            print(line)
    print(
        f"\nwrote {OUT}/market.csv, market_eigenvalues.csv, market_theory.csv, "
        "market_heatmaps.png, market_eigenvalues.png, market_theory.png; "
        f"total {time.perf_counter() - t_start:.0f} s"
    )


if __name__ == "__main__":
    main()
