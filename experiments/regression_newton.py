"""Rescaled softmax regression: the experiments the paper does not have (it is theory only).

1. Convergence ‖x_t − x*‖ for exact / diagonal / sketched Newton and the three kinds (cosh and sinh:
   x* = 0, the trivial minimiser).
2. Lemma 6.5's bound r_{t+1} ≤ 2(ε₀ + M r_t/(l − M r_t)) r_t against the measured contraction, with
   l = λ_min(∇²L(x*)), M the largest ‖H(x) − H(y)‖/‖x − y‖ seen on random pairs near x* (the
   paper's M = n⁴e^{20R²} is astronomically larger) and the measured ε₀ of each step.
3. Sketch size m vs the measured ε₀ and the contraction factor of sketched Newton.
4. Seconds per iteration vs n and d, exact vs sketched, dense and sparse A (10 % non-zeros): the
   median over interleaved repeats, and the crossover n where each sketched variant's time per
   iteration drops below exact's (linear interpolation of log(t_sketch / t_exact) on log n; "below
   range" when sketching already wins at the smallest n, "none in range" when it never does).

``--parts`` picks any of convergence, lemma, sketch, cost (default all). Reference solutions x* are
exact Newton with the line search (30 steps), checked by ‖∇L(x*)‖.

All float64, A Gaussian/√n, b uniform on the simplex, w = 5 (moderate: enough for
D = B_diag + W² > 0, which sketching needs, up to n ≈ 10⁵ (w² > max_i n b_i); the theorem's w would
make the problem a quadratic). Every solve runs its full ``max_iter`` steps (``tol=None``).
Writes results/regression/{convergence,lemma65_contraction,sketch_size,cost,cost_crossover}.csv
and the PNGs convergence, lemma65_contraction, sketch_size, cost.
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

OUT = pathlib.Path(__file__).resolve().parents[1] / "results" / "regression"
METHODS = {
    "exact": dict(method="exact"),
    "diagonal": dict(method="diagonal"),
    "sketch": dict(method="sketch"),
    "sketch+2 PCG": dict(method="sketch", refine=2, resample=100, rescore=100),
}
# "sketch+2 PCG": one draw of H̃ per solve used as the preconditioner of 2 conjugate-gradient steps
# on the diagonal system per iteration (2 products with A, 1 with Aᵀ).


def problem(n, d, seed=0, density=None):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    A = jax.random.normal(k1, (n, d), jnp.float64) / jnp.sqrt(n)
    if density is not None:
        A = A * (jax.random.uniform(k3, (n, d)) < density) / np.sqrt(density)
    return A, jax.random.dirichlet(k2, jnp.ones(n, jnp.float64)), jnp.full(n, 5.0, jnp.float64)


def reference(rg, A, b, w, kind):
    """x* by exact Newton with the line search; prints ‖∇L(x*)‖ so a poor reference shows."""
    x_star = rg.newton_solve(
        A, b, w, jnp.zeros(A.shape[1]), kind, "exact", max_iter=30, tol=None, line_search=True
    ).x
    print(
        f"  x* ({kind}): ‖x*‖ = {float(jnp.linalg.norm(x_star)):.3g}, "
        f"‖∇L(x*)‖ = {float(jnp.linalg.norm(rg.gradient(x_star, A, b, w, kind))):.2e}",
        flush=True,
    )
    return x_star


def write(name, header, rows):
    with open(OUT / name, "w", newline="") as f:
        csv.writer(f).writerows([header] + rows)


def convergence(rg, n, d, plt):
    A, b, w = problem(n, d)
    rows = []
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), sharey=True)
    for ax, kind in zip(axes, rg.KINDS):
        x_star = reference(rg, A, b, w, kind)
        x0 = x_star + 0.05 * jax.random.normal(jax.random.key(3), (d,), jnp.float64)
        for name, kw in METHODS.items():
            res = rg.newton_solve(A, b, w, x0, kind, max_iter=15, tol=None, x_star=x_star, **kw)
            err = np.asarray(res.history["error"])
            rows += [[kind, name, t, float(e)] for t, e in enumerate(err)]
            ax.semilogy(np.maximum(err, 1e-17), marker="o", ms=3, label=name)
        ax.set_title(f"{kind}: ‖x*‖ = {float(jnp.linalg.norm(x_star)):.2g}")
        ax.set_xlabel("iteration t")
    axes[0].set_ylabel("‖x_t − x*‖")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "convergence.png", dpi=120)
    plt.close(fig)
    write("convergence.csv", ["kind", "method", "t", "error"], rows)


def lemma_bound(rg, n, d, plt):
    A, b, w = problem(n, d)
    x_star = reference(rg, A, b, w, "exp")
    H_star = rg.hessian(x_star, A, b, w)
    l = float(jnp.linalg.eigvalsh(H_star)[0])
    M = 0.0
    for s in range(20):
        dx = jax.random.normal(jax.random.key(100 + s), (d,), jnp.float64) * 0.1 / np.sqrt(d)
        M = max(
            M,
            float(
                jnp.linalg.norm(rg.hessian(x_star + dx, A, b, w) - H_star, 2) / jnp.linalg.norm(dx)
            ),
        )
    x0 = x_star + 0.05 * jax.random.normal(jax.random.key(3), (d,), jnp.float64)
    rows = []
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for (name, kw), colour in zip(METHODS.items(), ("C0", "C1", "C2", "C3")):
        # ε₀ of the refined direction is not that of H̃: no bound to compare
        if name == "sketch+2 PCG":
            continue
        res = rg.newton_solve(
            A, b, w, x0, "exp", max_iter=8, tol=None, x_star=x_star, measure_eps=True, **kw
        )
        r, eps = np.asarray(res.history["error"]), np.asarray(res.history["eps0"])
        ts, measured, bound = [], [], []
        for t in range(len(r) - 1):
            # below rounding of x*, or outside the bound's range
            if not (r[t + 1] > 1e-13 and M * r[t] < l):
                continue
            ratio, b_t = r[t + 1] / r[t], 2 * (eps[t] + M * r[t] / (l - M * r[t]))
            ts.append(t), measured.append(ratio), bound.append(b_t)
            rows.append(
                [
                    name,
                    t,
                    float(r[t]),
                    float(r[t + 1]),
                    float(ratio),
                    float(b_t),
                    float(eps[t]),
                    l,
                    M,
                ]
            )
        ax.semilogy(ts, measured, "o-", color=colour, label=f"{name}: measured")
        ax.semilogy(ts, bound, "x--", color=colour, label=f"{name}: Lemma 6.5 bound")
        mb = np.array(measured) / np.array(bound)
        print(
            f"  Lemma 6.5 {name}: steps {ts[0]}–{ts[-1]}, "
            f"ε₀ {np.min(eps[ts]):.3g}–{np.max(eps[ts]):.3g}, "
            f"measured {min(measured):.3g}–{max(measured):.3g}, "
            f"bound {min(bound):.3g}–{max(bound):.3g}, "
            f"bound / measured {np.min(1 / mb):.3g}–{np.max(1 / mb):.3g}, "
            f"holds at every step: {bool(np.all(mb <= 1))}"
        )
    ax.set_xlabel("iteration t")
    ax.set_ylabel("r_{t+1} / r_t")
    ax.set_title(f"exp, n = {n}, d = {d}: l = {l:.3g}, empirical M = {M:.2g}", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(OUT / "lemma65_contraction.png", dpi=120)
    plt.close(fig)
    write(
        "lemma65_contraction.csv",
        ["method", "t", "r_t", "r_t1", "measured_ratio", "bound_ratio", "eps0", "l", "M"],
        rows,
    )
    print(
        f"  Lemma 6.5: l = {l:.3g}, empirical M = {M:.3g} (the paper's n^4 e^(20R^2) with R = 4: "
        f"~1e{4 * np.log10(n) + 320 * np.log10(np.e):.0f})"
    )


def sketch_size(rg, n, d, plt):
    from lowrank_jax import Status
    from lowrank_jax.regression import sketch

    A, b, w = problem(n, d)
    x_star = reference(rg, A, b, w, "exp")
    x0 = x_star + 0.05 * jax.random.normal(jax.random.key(3), (d,), jnp.float64)
    D = rg.diagonal_curvature(x_star, A, b, w)
    H = rg.hessian(x_star, A, b, w)
    rows = []
    for mult in (2, 4, 8, 16, 32, 64):
        m = mult * d
        eps = [
            float(rg.approximation_error(sketch.sampled_gram(jax.random.key(k), A, D, m), H))
            for k in range(10)
        ]
        # contraction: geometric mean of r_{t+1}/r_t over the first 5 steps
        res = rg.newton_solve(
            A,
            b,
            w,
            x0,
            "exp",
            "sketch",
            max_iter=8,
            tol=None,
            x_star=x_star,
            sketch_size=m,
            throw=False,
        )
        if int(res.status) == Status.DIVERGED:  # too few rows: H̃ singular, the iterate blows up
            print(
                f"  m = {m}: sketched Newton diverged "
                f"(status DIVERGED within {int(res.n_iter)} steps)"
            )
            rate = float("nan")
        else:
            err = np.asarray(res.history["error"])
            rate = float(np.exp(np.mean(np.log(err[1:6] / err[:5]))))
        converges = bool(np.isfinite(rate) and rate < 1)
        rows.append(
            [
                m,
                mult,
                float(np.median(eps)),
                float(np.min(eps)),
                float(np.max(eps)),
                rate,
                converges,
            ]
        )
        print(
            f"  sketch size m = {m} ({mult}d): ε₀ median {rows[-1][2]:.3g} (min {rows[-1][3]:.3g}, "
            f"max {rows[-1][4]:.3g}), r_(t+1)/r_t {rate:.3g}"
            + ("" if converges else " (diverges)"),
            flush=True,
        )
    write(
        "sketch_size.csv",
        ["m", "m_over_d", "eps0_median", "eps0_min", "eps0_max", "contraction", "converges"],
        rows,
    )
    R = np.array([r[:6] for r in rows], dtype=float)
    R[R[:, 5] >= 1, 5] = np.nan  # a diverging run has no contraction to plot
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(R[:, 0], R[:, 2], "o-", label="ε₀ (median of 10 keys)")
    ax.fill_between(R[:, 0], R[:, 3], R[:, 4], alpha=0.2, label="ε₀ min–max")
    ax.loglog(R[:, 0], R[:, 5], "s-", label="measured contraction r_{t+1}/r_t")
    ax.loglog(R[:, 0], 2 * R[:, 2], ":", label="2 ε₀ (Lemma 6.5, M r → 0)")
    for row in rows:
        if not row[6]:
            ax.annotate(
                f"m = {row[0]}: diverges\n(r_(t+1)/r_t ≈ {row[5]:.2g})",
                (row[0], row[2]),
                xytext=(8, -30),
                textcoords="offset points",
                fontsize=7,
                arrowprops=dict(arrowstyle="->", lw=0.6),
            )
    ax.set_xlabel("sampled rows m")
    ax.set_title(f"sketched Newton, n = {n}, d = {d} (m = 2d..64d)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "sketch_size.png", dpi=120)
    plt.close(fig)


COST_METHODS = ("exact", "sketch", "sketch+2 PCG")
SKETCHED = ("sketch", "sketch+2 PCG")


def crossover(ns, t_exact, t_sketch):
    """n where t_sketch / t_exact first falls below 1 going up in n, interpolating log(ratio)
    linearly on log n. Returns (n or None, note)."""
    lr = np.log(np.asarray(t_sketch) / np.asarray(t_exact))
    if lr[0] < 0:
        return None, f"below range (sketch faster already at n = {int(ns[0])})"
    for i in range(len(ns) - 1):
        if lr[i] >= 0 > lr[i + 1]:
            a, c = np.log(ns[i]), np.log(ns[i + 1])
            return float(np.exp(a + (c - a) * lr[i] / (lr[i] - lr[i + 1]))), "interpolated"
    return None, "none in range"


def cost(rg, ns, ds, plt, reps=5, iters=6, blas=1):
    rows, cross = [], []
    for layout in ("dense", "sparse"):
        for d in ds:
            for n in ns:
                A, b, w = problem(n, d, density=0.1 if layout == "sparse" else None)
                A_in = (
                    rg.as_design(jax.experimental.sparse.BCOO.fromdense(A))
                    if layout == "sparse"
                    else A
                )
                del A
                x = jnp.zeros(d)
                fs = {
                    name: jax.jit(
                        lambda A, b, w, x, kw=METHODS[name]: (
                            rg.newton_solve(A, b, w, x, "exp", max_iter=iters, tol=None, **kw).x
                        )
                    )
                    for name in COST_METHODS
                }
                for f in fs.values():  # compile and warm up
                    jax.block_until_ready(f(A_in, b, w, x))
                times = {name: [] for name in COST_METHODS}
                # interleaved, so that load from other jobs hits every method alike
                for _ in range(reps):
                    for name, f in fs.items():
                        t0 = time.perf_counter()
                        jax.block_until_ready(f(A_in, b, w, x))
                        times[name].append((time.perf_counter() - t0) / iters)
                for name in COST_METHODS:
                    t = np.array(times[name])
                    rows.append(
                        [
                            layout,
                            n,
                            d,
                            name,
                            float(np.median(t)),
                            float(t.min()),
                            float(t.max()),
                            reps,
                        ]
                    )
                print(
                    f"  cost {layout} n = {n}, d = {d}: "
                    + ", ".join(f"{r[3]} {r[4] * 1e3:.1f} ms" for r in rows[-3:])
                    + f" per iteration (median of {reps}; {iters}-iteration solves,"
                    + " set-up included)",
                    flush=True,
                )
                del A_in, fs
    write(
        "cost.csv",
        [
            "layout",
            "n",
            "d",
            "method",
            "seconds_per_iteration_median",
            "seconds_min",
            "seconds_max",
            "repeats",
        ],
        rows,
    )
    R = np.array(rows, dtype=object)

    def series(layout, d, name):
        m = (R[:, 0] == layout) & (R[:, 2] == d) & (R[:, 3] == name)
        order = np.argsort(R[m, 1].astype(float))
        return R[m, 1].astype(float)[order], R[m, 4].astype(float)[order]

    for layout in ("dense", "sparse"):
        for d in ds:
            n_e, t_e = series(layout, d, "exact")
            for name in SKETCHED:
                n_s, t_s = series(layout, d, name)
                nc, note = crossover(n_e, t_e, t_s)
                cross.append(
                    [
                        layout,
                        d,
                        name,
                        "" if nc is None else round(nc),
                        note,
                        float(t_s[-1] / t_e[-1]),
                        int(n_e[-1]),
                    ]
                )
                print(
                    f"  crossover {layout}, d = {d}, {name} vs exact: "
                    + (f"n ≈ {nc:,.0f}" if nc is not None else note)
                    + f" (time ratio at n = {int(n_e[-1])}: {t_s[-1] / t_e[-1]:.2f})",
                    flush=True,
                )
    write(
        "cost_crossover.csv",
        [
            "layout",
            "d",
            "sketched_method",
            "crossover_n",
            "note",
            "time_ratio_sketch_over_exact_at_largest_n",
            "largest_n",
        ],
        cross,
    )

    fig, axes = plt.subplots(len(ds), 2, figsize=(11, 3.8 * len(ds)), squeeze=False)
    styles = {"exact": ("o-", "C0"), "sketch": ("s--", "C1"), "sketch+2 PCG": ("^:", "C2")}
    for i, d in enumerate(ds):
        for j, layout in enumerate(("dense", "sparse")):
            ax = axes[i, j]
            for name in COST_METHODS:
                nn, tt = series(layout, d, name)
                m = (R[:, 0] == layout) & (R[:, 2] == d) & (R[:, 3] == name)
                lo = R[m, 5].astype(float)[np.argsort(R[m, 1].astype(float))]
                hi = R[m, 6].astype(float)[np.argsort(R[m, 1].astype(float))]
                ax.errorbar(
                    nn,
                    tt,
                    yerr=[tt - lo, hi - tt],
                    fmt=styles[name][0],
                    color=styles[name][1],
                    ms=4,
                    capsize=2,
                    label=name,
                )
            for layout_, d_, name, nc, _note, *_ in cross:
                if layout_ == layout and d_ == d and nc != "":
                    n_e, t_e = series(layout, d, "exact")
                    y = np.exp(np.interp(np.log(nc), np.log(n_e), np.log(t_e)))
                    ax.axvline(nc, color=styles[name][1], lw=0.8, alpha=0.6)
                    ax.plot(
                        [nc],
                        [y],
                        "*",
                        color=styles[name][1],
                        ms=13,
                        mec="k",
                        label=f"{name} = exact at n ≈ {nc:,.0f}",
                    )
            notes = [
                f"{name}: {note}"
                for layout_, d_, name, nc, note, *_ in cross
                if layout_ == layout and d_ == d and nc == ""
            ]
            if notes:
                ax.text(0.02, 0.98, "\n".join(notes), transform=ax.transAxes, va="top", fontsize=7)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("n")
            ax.set_ylabel("seconds per iteration")
            ax.set_title(f"{layout} A, d = {d}", fontsize=10)
            ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(
        f"median of {reps} interleaved repeats, OpenBLAS threads: {blas or 'default'} "
        f"({iters}-iteration solves, set-up included; bars: min–max); "
        "★ crossover",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(OUT / "cost.png", dpi=120)
    plt.close(fig)


PARTS = ("convergence", "lemma", "sketch", "cost")


def blas_threads(k):
    """Limit the OpenBLAS behind jax's CPU LAPACK (Cholesky, QR, inverse) to k threads while timing.
    Its idle workers spin after each call; on a 2-core machine shared with other jobs that turned
    single repeats of a sketched step (several LAPACK calls per iteration) into 10x outliers
    (n = 5000, d = 50: 4 ms typical, 41 ms at worst; 1 thread: 3.6–4.3 ms). The d × d factorisations
    here gain nothing from a second thread. Needs threadpoolctl (a scikit-learn dependency)."""
    import contextlib

    if not k:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        print("  threadpoolctl missing: OpenBLAS threads left as they are")
        return contextlib.nullcontext()
    return threadpool_limits(k, user_api="blas")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=20000, help="n of parts convergence, lemma, sketch")
    ap.add_argument("--d", type=int, default=50, help="d of parts convergence, lemma, sketch")
    ap.add_argument(
        "--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}"
    )
    ap.add_argument(
        "--cost-n", default="5000,10000,20000,40000,80000,200000", help="n values of the cost part"
    )
    ap.add_argument("--cost-d", default="50,200", help="d values of the cost part")
    ap.add_argument(
        "--cost-reps", type=int, default=5, help="timed repeats per point (median reported)"
    )
    ap.add_argument(
        "--blas-threads",
        type=int,
        default=1,
        help="OpenBLAS threads during the cost part (0: leave as is); see blas_threads",
    )
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if bad := set(parts) - set(PARTS):
        ap.error(f"unknown parts {sorted(bad)}; choose from {PARTS}")
    OUT.mkdir(parents=True, exist_ok=True)
    import jax.experimental.sparse  # noqa: F401
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lowrank_jax import regression as rg

    with jax.enable_x64(True):
        for part in parts:
            t0 = time.perf_counter()
            print(f"## {part}", flush=True)
            if part == "convergence":
                convergence(rg, args.n, args.d, plt)
            elif part == "lemma":
                lemma_bound(rg, args.n, args.d, plt)
            elif part == "sketch":
                sketch_size(rg, args.n, args.d, plt)
            else:
                with blas_threads(args.blas_threads):
                    cost(
                        rg,
                        [int(v) for v in args.cost_n.split(",")],
                        [int(v) for v in args.cost_d.split(",")],
                        plt,
                        reps=args.cost_reps,
                        blas=args.blas_threads,
                    )
            print(f"## {part}: {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
