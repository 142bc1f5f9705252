"""Supervised dictionary learning: LPGD (Algorithm 1) against block coordinate descent, training
loss per iteration and per second. Everything in float64.

(a) Synthetic, the generative model eq. (20) with κ = 1, no covariates, no intercept, in a regime
    where Theorem 2.1 applies (ξ = 1, λ = 0.5):
      SDL-H  p = 200, n = 100, r = 3, X = W*H*/√r + σE (σ = 0.1), y ~ Bernoulli(σ(β*ᵀH*));
      SDL-W  p = 50,  n = 500, r = 3, the same X rescaled to ‖X‖₂ = 2 (n ≥ p, so δ⁻ > 0; the scale
             keeps nδ⁺α⁺ small enough for L/μ < 3), y ~ Bernoulli(σ(A*ᵀx)) with A* = W*β*.
             (μ = min(2ξ, 2λ + nδ⁻α⁻) = 1 here comes from the ridge 2λ; δ⁻ is tiny.)
    μ, L, ρ and the best step τ = 2/(μ + L) come from sdl.theory with M = the largest |activation|
    seen at Z* and along the LPGD path, plus 0.5 (recomputed until the path stays inside it). Z* is
    a 1000-step LPGD run (its last step is ~1e-13). Plotted: ‖Z_t − Z*‖_F against Theorem E.2's
    bound ρ^t‖Z_0 − Z*‖_F (and (ρ/2)^t, the plain-PGD rate without the rank projection's factor 2),
    and the loss gap F(Z_t) − F* of LPGD (τ = best step, and τ = 1/L̄ the library default) and of
    BCD (sdl.bcd, the same start) per iteration.
(b) Real data, per-gene z-scores / 100 (the authors' normalisation), all samples, intercept on,
    ξ = 1, λ = 0.1 (the middle of the paper's CV grid), τ = 1/L̄ (sdl.fit's default step; the paper
    gives none for real data), rank r from the scree elbow (:func:`scree_rank`): Golub (3 051 × 38)
    SDL-W and SDL-H, and ALL B- vs T-cell (12 625 × 128) SDL-W. Loss vs iteration from a 1000-step
    run; loss vs seconds from jitted runs of k ∈ {10, 30, 100, 300, 1000} steps (compiled ahead of
    time, one warm-up call, then the runs interleaved and repeated: the median wall time of the run
    against F at its last iterate). F_ref is the smallest loss seen, after both solvers are run on
    for ``--ref-extra`` more steps.

Timing hygiene: OpenBLAS (which serves jax's CPU LAPACK calls) is capped at one thread, see
:func:`blas_threads` (``--blas-threads 0`` to leave it alone); the 1-minute load average is printed,
the machine being shared.

Writes results/sdl/convergence_synthetic.{csv,png} and results/sdl/convergence_real.{csv,png}.
"""

from __future__ import annotations

import argparse
import csv
import os
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

OUT = pathlib.Path(__file__).resolve().parents[1] / "results" / "sdl"


# --- shared with sdl_gene_groups.py ---------------------------------------------------------------


def load_normalised(name: str):
    """(GeneData, X) with X (samples, genes) the per-gene z-scores of all samples divided by 100
    (note §4.1, [EXT])."""
    from lowrank_jax.datasets import load_all_leukemia, load_golub, standardize

    loaders = {"golub": load_golub, "ALL": load_all_leukemia}
    if name not in loaders:  # any other name ran ALL under that name
        raise ValueError(f"unknown data set {name!r}: choose golub or ALL")
    g = loaders[name]()
    return g, standardize(g.X, scale=100.0)


def scree_rank(X, max_components: int = 20, lo: int = 2, hi: int = 10) -> int:
    """Scree elbow: the component k ≤ ``max_components`` whose (k, share of variance σ_k²/Σσ²) point
    lies farthest below the straight line from the first to the last point, both axes scaled to
    [0, 1] (the "kneedle" rule), clipped to [lo, hi]."""
    s = np.linalg.svd(np.asarray(X), compute_uv=False)[:max_components]
    share = s**2 / np.sum(np.asarray(X) ** 2)
    K = share.size
    x = np.arange(K) / (K - 1)
    yv = (share - share[-1]) / (share[0] - share[-1])
    return int(np.clip(np.argmax((1 - x) - yv) + 1, lo, hi))


def blas_threads(n: int):
    """Cap OpenBLAS's threads (threadpoolctl) for the duration: jax's CPU eigh/svd are LAPACK calls
    into scipy's OpenBLAS, and on this 2-core machine, whenever another process is busy, a 2-thread
    call stalls ~250 ms (an SVD of 3 051 × 38: 250 ms against 2 ms single-threaded), which made
    LPGD's step on ALL 130–165 ms instead of 26 ms. The matrices decomposed here are small
    (≤ 129 × 129 after the Gram trick), so one thread costs nothing when the machine is idle. n = 0:
    no cap."""
    import contextlib

    if n <= 0:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    # threadpoolctl only sees libraries already loaded: make jax load its LAPACK first.
    jax.block_until_ready((jnp.linalg.svd(jnp.eye(3)), jnp.linalg.eigh(jnp.eye(3))))
    return threadpool_limits(limits=n, user_api="blas")


def write_csv(name, header, rows):
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / name, "w", newline="") as f:
        csv.writer(f).writerows([header] + rows)


# --- (a) synthetic --------------------------------------------------------------------------------


def sample_eq20(model: str, p: int, n: int, r: int, sigma: float, seed: int, spectral_norm=None):
    """Eq. (20) with κ = 1, q = 0: X = B* + σE with B* = W*H*/√r of rank r; SDL-H a* = β*ᵀH*,
    SDL-W a* = A*ᵀx with A* = W*β* (so [A*, B*] has rank r), scaled to a standard deviation of 2;
    y ~ Bernoulli(σ(a*)). ``spectral_norm``: rescale X to that ‖X‖₂ first (before labelling).
    Returns X (n, p), samples in rows, and y (n,)."""
    rng = np.random.default_rng(seed)
    W, H = rng.normal(size=(p, r)), rng.normal(size=(r, n))
    X = W @ H / np.sqrt(r) + sigma * rng.normal(size=(p, n))
    if spectral_norm is not None:
        X = X * (spectral_norm / np.linalg.norm(X, 2))
    beta = rng.normal(size=(r, 1))
    a = (beta.T @ H if model == "H" else (W @ beta).T @ X)[0]
    a = 2.0 * a / a.std()
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-a))).astype(np.int64)
    return X.T, y


def lpgd_path(data, theta0, gamma0, xi, lam, tau, r, model, T, theta_star, gamma_star):
    """Iterates Z_0 … Z_T of LPGD (one jitted step of sdl.lpgd chained T times): distances to Z*,
    F(Z_t) and max |activation|."""
    from lowrank_jax import sdl
    from lowrank_jax.sdl import model as sm

    def step(th, g):
        out = sdl.lpgd(th, g, data, xi, lam, tau, r, model=model, max_iter=1, tol=None)
        return out.theta, out.aux_coef

    step = jax.jit(step)

    @jax.jit
    def measure(th, g):
        a = sm.activations(th, g, data.X, data.X_aux, model, data.kappa)
        d = jnp.sqrt(jnp.sum((th - theta_star) ** 2) + jnp.sum((g - gamma_star) ** 2))
        return jnp.stack([d, sm.objective(th, g, data, xi, lam, model), jnp.max(jnp.abs(a))])

    th, g = theta0, gamma0
    rows = [measure(th, g)]
    for _ in range(T):
        th, g = step(th, g)
        rows.append(measure(th, g))
    return np.asarray(jnp.stack(rows))


def synthetic_case(model, p, n, r, xi, lam, sigma, seed, spectral_norm, T, gap_iters, star_iters):
    from lowrank_jax import sdl
    from lowrank_jax.sdl import model as sm

    X, y = sample_eq20(model, p, n, r, sigma, seed, spectral_norm)
    data = sm.prepare(jnp.asarray(X), y)
    theta0, gamma0, f0 = sdl.initial_point(data, r, model, jax.random.key(seed))
    safe = float(sm.step_bound(data, xi, lam, model))
    fixed = dict(model=model, tol=None)  # every run takes exactly max_iter steps
    pre = sdl.lpgd(theta0, gamma0, data, xi, lam, safe, r, max_iter=star_iters, **fixed)
    a_star = sm.activations(pre.theta, pre.aux_coef, data.X, data.X_aux, model, 1)
    M = float(jnp.max(jnp.abs(a_star))) + 0.5
    for _ in range(6):  # the constants must hold on the whole path: grow M until it covers it
        th = sdl.theory(X, xi, lam, model=model, M=M)
        if not th.holds:
            raise RuntimeError(
                f"SDL-{model}: L/μ = {th.condition:.3g} ≥ 3 with M = {M:.3g}; Theorem 2.1 does not "
                "apply to these settings"
            )
        star = sdl.lpgd(
            theta0, gamma0, data, xi, lam, th.best_step, r, max_iter=star_iters, **fixed
        )
        path = lpgd_path(
            data, theta0, gamma0, xi, lam, th.best_step, r, model, T, star.theta, star.aux_coef
        )
        a_path = sm.activations(star.theta, star.aux_coef, data.X, data.X_aux, model, 1)
        reach = max(float(path[:, 2].max()), float(jnp.max(jnp.abs(a_path))))
        if reach <= M:
            break
        M = reach + 0.5
    tau = th.best_step
    lp = sdl.lpgd(theta0, gamma0, data, xi, lam, tau, r, max_iter=gap_iters, **fixed)
    lp_safe = sdl.lpgd(theta0, gamma0, data, xi, lam, safe, r, max_iter=gap_iters, **fixed)
    bc = sdl.bcd(f0, gamma0, data, xi, lam, model=model, max_iter=gap_iters)
    bc_long = sdl.bcd(bc.factors, bc.aux_coef, data, xi, lam, model=model, max_iter=star_iters)

    def with_final(hist, final):
        return np.append(np.asarray(hist), float(final))

    curves = {
        f"LPGD τ = 2/(μ+L) = {tau:.3g}": with_final(
            lp.history["loss"], sm.objective(lp.theta, lp.aux_coef, data, xi, lam, model)
        ),
        f"LPGD τ = 1/L̄ = {safe:.3g} (default)": with_final(
            lp_safe.history["loss"],
            sm.objective(lp_safe.theta, lp_safe.aux_coef, data, xi, lam, model),
        ),
        "BCD": with_final(
            bc.history["loss"],
            sdl.factored_objective(bc.factors, bc.aux_coef, data, xi, lam, model),
        ),
    }
    F_star = float(sm.objective(star.theta, star.aux_coef, data, xi, lam, model))
    F_bcd_long = float(
        sdl.factored_objective(bc_long.factors, bc_long.aux_coef, data, xi, lam, model)
    )
    F_ref = min(F_star, F_bcd_long, *(float(c.min()) for c in curves.values()))
    return dict(
        model=model,
        p=p,
        n=n,
        r=r,
        xi=xi,
        lam=lam,
        theory=th,
        M=M,
        reach=reach,
        tau=tau,
        safe=safe,
        path=path,
        curves=curves,
        F_star=F_star,
        F_ref=F_ref,
        F_bcd_long=F_bcd_long,
        star_step=float(star.step_norm),  # ‖Z_T − Z_{T−1}‖ of the last step
        B_rel=float(
            jnp.linalg.norm(sm.split(star.theta, model, 1)[1] - data.X) / jnp.linalg.norm(data.X)
        ),
        scale=float(jnp.linalg.norm(star.theta)),
    )


def analyse_path(c):
    """Empirical rate, bound check (ignoring t where the bound is below the float64 floor)."""
    d, rho = c["path"][:, 0], c["theory"].rho
    t = np.arange(d.size)
    bound = rho**t * d[0]
    floor = 1e-14 * max(c["scale"], 1.0)  # ~50 ulps of ‖θ*‖: below it the distance is rounding
    live = (d > floor) & (t >= 1)
    rate = (
        float(np.exp(np.polyfit(t[live], np.log(d[live]), 1)[0]))
        if live.sum() >= 2
        else float("nan")
    )
    ratios = d[1:][live[1:]] / d[:-1][live[1:]]
    checked = (bound > floor) & (t >= 1)
    viol = checked & (d > bound * (1 + 1e-9))
    return dict(
        bound=bound,
        floor=floor,
        rate=rate,
        worst_ratio=float(ratios.max()) if ratios.size else float("nan"),
        checked=int(checked.sum()),
        violations=t[viol].tolist(),
        tightest=float(np.min(bound[checked] / d[checked])) if checked.any() else float("nan"),
        t_floor=int(t[live].max()) if live.any() else 0,
    )


def first_below(curve, F_ref, rel):
    hit = np.nonzero(curve - F_ref <= rel * max(abs(F_ref), 1.0))[0]
    return int(hit[0]) if hit.size else None


def synthetic(args, plt):
    cases = [
        synthetic_case(
            "H",
            args.syn_p_h,
            args.syn_n_h,
            3,
            1.0,
            0.5,
            0.1,
            0,
            None,
            args.syn_T,
            args.syn_iters,
            args.syn_star_iters,
        ),
        synthetic_case(
            "W",
            args.syn_p_w,
            args.syn_n_w,
            3,
            1.0,
            0.5,
            0.1,
            0,
            2.0,
            args.syn_T,
            args.syn_iters,
            args.syn_star_iters,
        ),
    ]
    rows = []
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    print("(a) synthetic, eq. (20), ξ = 1, λ = 0.5, r = 3, float64")
    for c, (ax_d, ax_f) in zip(cases, axes):
        th, an = c["theory"], analyse_path(c)
        d = c["path"][:, 0]
        t = np.arange(d.size)
        ax_d.semilogy(t, np.maximum(d, 1e-17), "o-", ms=3, label="LPGD ‖Z_t − Z*‖_F")
        ax_d.semilogy(
            t, np.maximum(an["bound"], 1e-17), "k--", label=f"bound ρ^t‖Z_0 − Z*‖, ρ = {th.rho:.3f}"
        )
        ax_d.semilogy(
            t,
            np.maximum((th.rho / 2) ** t * d[0], 1e-17),
            color="0.5",
            ls="-.",
            label="(ρ/2)^t‖Z_0 − Z*‖ (PGD rate, no rank factor 2)",
        )
        ax_d.axhline(
            an["floor"], color="0.6", lw=0.8, ls=":", label="float64 floor (not checked below)"
        )
        ax_d.set_ylim(1e-16, 2 * d[0])
        ax_d.set_xlabel("iteration t")
        ax_d.set_ylabel("distance to Z*")
        ax_d.set_title(
            f"SDL-{c['model']}, p = {c['p']}, n = {c['n']}: μ = {th.mu:.3g}, L = {th.L:.3g}, "
            f"L/μ = {th.condition:.2f}, τ = {c['tau']:.3g}",
            fontsize=9,
        )
        ax_d.legend(fontsize=8)
        for s in range(d.size):
            rows.append(
                [
                    c["model"],
                    c["p"],
                    c["n"],
                    "LPGD best step (path)",
                    s,
                    d[s],
                    an["bound"][s],
                    c["path"][s, 1],
                    c["path"][s, 1] - c["F_ref"],
                    c["path"][s, 2],
                ]
            )
        for name, curve in c["curves"].items():
            gap = curve - c["F_ref"]
            ax_f.semilogy(np.arange(gap.size), np.maximum(gap, 1e-16 * abs(c["F_ref"])), label=name)
            rows += [
                [c["model"], c["p"], c["n"], name, s, "", "", curve[s], gap[s], ""]
                for s in range(gap.size)
            ]
        done = [first_below(curve, c["F_ref"], 1e-12) for curve in c["curves"].values()]
        ax_f.set_xlim(
            0, min(len(curve), max(20, 1.3 * max(v if v is not None else len(curve) for v in done)))
        )
        ax_f.set_xlabel("iteration (LPGD step / BCD sweep)")
        ax_f.set_ylabel("F(Z_t) − F*")
        ax_f.set_title(f"SDL-{c['model']}: loss gap, F* = {c['F_ref']:.6g}", fontsize=9)
        ax_f.legend(fontsize=8)
        hits = {
            short: first_below(curve, c["F_ref"], 1e-10)
            for short, curve in zip(("LPGD best τ", "LPGD default τ", "BCD"), c["curves"].values())
        }
        print(
            f"  SDL-{c['model']} p = {c['p']}, n = {c['n']}: M = {c['M']:.2f} "
            f"(max |a| on path and at Z* {c['reach']:.2f}), δ⁻ = {th.delta_minus:.3g}, "
            f"δ⁺ = {th.delta_plus:.3g}, α⁻ = {th.alpha_minus:.3g}; "
            f"μ = {th.mu:.4g}, L = {th.L:.4g}, L/μ = {th.condition:.3f} (< 3: {th.holds}), "
            f"τ ∈ ({th.step_interval[0]:.3g}, {th.step_interval[1]:.3g}), "
            f"best τ = {c['tau']:.4g}, ρ = {th.rho:.4f}"
        )
        verdict = (
            "holds at every one" if not an["violations"] else f"VIOLATED at t = {an['violations']}"
        )
        print(
            f"    Z*: last step ‖Z_t+1 − Z_t‖ = {c['star_step']:.1e}, "
            f"‖B* − X‖/‖X‖ = {c['B_rel']:.3f}; "
            f"measured rate {an['rate']:.4f} per step "
            f"(worst single step {an['worst_ratio']:.4f}) vs ρ = {th.rho:.4f}; "
            f"bound checked at {an['checked']} t ≥ 1 above the floor: {verdict}, "
            f"tightest bound/measured = {an['tightest']:.3g}"
        )
        print(
            "    steps to F − F* ≤ 1e-10·|F*|: "
            + ", ".join(
                f"{k} {v if v is not None else '> ' + str(args.syn_iters)}" for k, v in hits.items()
            )
            + f"; BCD after {args.syn_iters + args.syn_star_iters} sweeps: "
            + f"F − F* = {c['F_bcd_long'] - c['F_ref']:.2e}"
        )
    fig.suptitle(
        "LPGD on the generative model (20): linear convergence and Theorem 2.1's bound (float64)"
    )
    fig.tight_layout()
    fig.savefig(OUT / "convergence_synthetic.png", dpi=110)
    plt.close(fig)
    write_csv(
        "convergence_synthetic.csv",
        [
            "model",
            "p",
            "n",
            "method",
            "t",
            "dist_to_star",
            "bound",
            "loss",
            "loss_gap",
            "max_abs_activation",
        ],
        rows,
    )


# --- (b) real data --------------------------------------------------------------------------------


def real_case(dataset, model, xi, lam, ks, reps, ref_extra, rank=None, quarter=True):
    from lowrank_jax import sdl
    from lowrank_jax.sdl import model as sm

    g, X = load_normalised(dataset)
    r = scree_rank(X) if rank is None else rank
    data = sm.prepare(jnp.asarray(X), g.y, intercept=True)
    theta0, gamma0, f0 = sdl.initial_point(data, r, model, jax.random.key(0))
    tau = float(sm.step_bound(data, xi, lam, model))
    th_int = sdl.theory(X, xi, lam, model=model, X_aux=np.ones((X.shape[0], 1)), M=5.0)
    th_plain = sdl.theory(X, xi, lam, model=model, M=5.0)
    th_half = sdl.theory(X, xi, 0.5, model=model, M=5.0)

    def lpgd_k(k):
        return jax.jit(
            lambda th, gm, d: sdl.lpgd(
                th, gm, d, xi, lam, tau, r, model=model, max_iter=k, tol=None
            )
        ).lower(theta0, gamma0, data)

    def bcd_k(k):
        return jax.jit(lambda f, gm, d: sdl.bcd(f, gm, d, xi, lam, model=model, max_iter=k)).lower(
            f0, gamma0, data
        )

    t0 = time.perf_counter()
    runs = {}
    for k in ks:
        runs[("LPGD", k)] = (lpgd_k(k).compile(), (theta0, gamma0, data))
        runs[("BCD", k)] = (bcd_k(k).compile(), (f0, gamma0, data))
    compile_s = time.perf_counter() - t0
    for name in ("LPGD", "BCD"):  # warm-up
        fn, a = runs[(name, ks[0])]
        jax.block_until_ready(fn(*a))
    times = {key: [] for key in runs}
    outs = {}
    order = list(runs)
    for rep in range(reps):
        for key in order if rep % 2 == 0 else order[::-1]:
            fn, a = runs[key]
            t1 = time.perf_counter()
            outs[key] = jax.block_until_ready(fn(*a))
            times[key].append(time.perf_counter() - t1)

    def final_loss(name, out):
        if name == "LPGD":
            return float(sm.objective(out.theta, out.aux_coef, data, xi, lam, model))
        return float(sdl.factored_objective(out.factors, out.aux_coef, data, xi, lam, model))

    kmax = max(ks)
    hist = {
        name: np.append(
            np.asarray(outs[(name, kmax)].history["loss"]), final_loss(name, outs[(name, kmax)])
        )
        for name in ("LPGD", "BCD")
    }
    timed = {
        name: [
            (
                k,
                final_loss(name, outs[(name, k)]),
                np.median(times[(name, k)]),
                min(times[(name, k)]),
                max(times[(name, k)]),
            )
            for k in ks
        ]
        for name in ("LPGD", "BCD")
    }
    # Reference value: both solvers continued from their last iterate.
    lp_end, bc_end = outs[("LPGD", kmax)], outs[("BCD", kmax)]
    refs = [float(np.min(h)) for h in hist.values()]
    if ref_extra:
        lp_more = sdl.lpgd(
            lp_end.theta,
            lp_end.aux_coef,
            data,
            xi,
            lam,
            tau,
            r,
            model=model,
            max_iter=ref_extra,
            tol=None,
        )
        bc_more = sdl.bcd(
            bc_end.factors, bc_end.aux_coef, data, xi, lam, model=model, max_iter=ref_extra
        )
        refs += [
            final_loss("LPGD", lp_more),
            final_loss("BCD", bc_more),
            float(jnp.min(lp_more.history["loss"])),
            float(jnp.min(bc_more.history["loss"])),
        ]
    if quarter:  # same step with the exact binary curvature bound ¼ instead of ½: τ' = 1/L̄'
        Phi_sq = (
            float(jnp.linalg.norm(jnp.concatenate([data.X, data.X_aux]), 2)) ** 2
            if model == "W"
            else 1.0 + float(jnp.linalg.norm(data.X_aux, 2)) ** 2
        )
        tau_q = 1.0 / max(2 * xi, 2 * lam + 0.25 * Phi_sq)
        # sdl.step_bound already uses α⁺ = ¼ for binary labels: then τ' = τ and the curve would only
        # repeat LPGD's, so it is drawn only where the two steps differ (κ ≥ 2, where step_bound
        # uses ½).
        if abs(tau_q - tau) > 1e-9 * tau:
            q = sdl.lpgd(
                theta0, gamma0, data, xi, lam, tau_q, r, model=model, max_iter=kmax, tol=None
            )
            hist[f"LPGD τ' = {tau_q:.3g}"] = np.append(
                np.asarray(q.history["loss"]), final_loss("LPGD", q)
            )
            refs.append(float(np.min(hist[f"LPGD τ' = {tau_q:.3g}"])))
    F_ref = min(refs)
    bc_theta = sm.lift(bc_end.factors, model)
    return dict(
        dataset=dataset,
        model=model,
        p=X.shape[1],
        n=X.shape[0],
        r=r,
        xi=xi,
        lam=lam,
        tau=tau,
        hist=hist,
        timed=timed,
        F_ref=F_ref,
        compile_s=compile_s,
        th_int=th_int,
        th_plain=th_plain,
        th_half=th_half,
        theta_gap=float(jnp.linalg.norm(lp_end.theta - bc_theta) / jnp.linalg.norm(lp_end.theta)),
        ref_extra=ref_extra,
    )


def seconds_at(timed, k):
    """Wall time to k steps, interpolated (in k) between the median times of the timed runs."""
    ks = np.array([row[0] for row in timed], float)
    return float(np.interp(k, ks, [row[2] for row in timed]))


def real(args, plt):
    ks = sorted(int(v) for v in args.ks.split(","))
    cases = []
    print(
        "\n(b) real data: per-gene z-score / 100, all samples, intercept, "
        f"ξ = {args.xi}, λ = {args.lam}, τ = 1/L̄ (library default), float64; timed runs k = {ks}"
    )
    specs = [("golub", "W", args.reps), ("golub", "H", args.reps)]
    if args.all_model != "none":
        specs.append(("ALL", args.all_model, args.all_reps))
    for dataset, model, reps in specs:
        t0 = time.perf_counter()
        c = real_case(
            dataset,
            model,
            args.xi,
            args.lam,
            ks,
            reps,
            args.ref_extra if dataset == "golub" else args.all_ref_extra,
            args.rank,
        )
        c["wall"] = time.perf_counter() - t0
        cases.append(c)
        print(
            f"  {dataset} SDL-{model} p = {c['p']}, n = {c['n']}, r = {c['r']} "
            f"({'scree elbow' if args.rank is None else '--rank'}), τ = {c['tau']:.4g}; "
            f"F_ref = {c['F_ref']:.10g}; case wall {c['wall']:.0f} s "
            f"(compile {c['compile_s']:.0f} s)"
        )
        print(
            f"    sdl.theory (M = 5): L/μ = {c['th_int'].condition:.3g} with the intercept row, "
            f"{c['th_plain'].condition:.3g} without (δ⁻ = 0 as p > n; μ = 2λ) → Theorem 2.1 "
            f"{'applies' if c['th_int'].holds else 'does not apply'} to this fit "
            f"(no intercept and λ = 0.5 would give L/μ = {c['th_half'].condition:.3g})"
        )
        for name, h in c["hist"].items():
            gaps = {k: h[k] - c["F_ref"] for k in (10, 100, 300, len(h) - 1) if k < len(h)}
            i6 = first_below(h, c["F_ref"], 1e-6)
            line = (
                f"    {name:14s}: gap "
                + ", ".join(f"@{k} {v:.2e}" for k, v in gaps.items())
                + f"; rel. gap ≤ 1e-6 at step {i6 if i6 is not None else '> ' + str(len(h) - 1)}"
            )
            if name in c["timed"]:
                T = c["timed"][name]
                line += (
                    (f" ≈ {seconds_at(T, i6):.2f} s" if i6 is not None else "")
                    + f"; {T[-1][2] / T[-1][0] * 1e3:.2f} ms/step over {T[-1][0]} steps "
                    + "(median; fastest rep "
                    + f"{T[-1][3] / T[-1][0] * 1e3:.2f}); median s: "
                    + ", ".join(f"k={k} {sec:.3f}" for k, _, sec, _, _ in T)
                )
            else:
                line += " (untimed: same cost per step as LPGD)"
            print(line)
        print(f"    ‖θ_LPGD − lift(BCD)‖/‖θ_LPGD‖ after {max(ks)} steps: {c['theta_gap']:.2e}")
    write_real(cases, plt)
    return cases


def write_real(cases, plt):
    rows = []
    fig, axes = plt.subplots(len(cases), 2, figsize=(12, 3.6 * len(cases)), squeeze=False)
    colors = {"LPGD": "C0", "BCD": "C3"}
    for c, (ax_i, ax_s) in zip(cases, axes):
        floor = 1e-15 * max(abs(c["F_ref"]), 1.0)
        label = f"{c['dataset']} SDL-{c['model']} (p = {c['p']}, n = {c['n']}, r = {c['r']})"
        for name, h in c["hist"].items():
            if name not in colors:
                ax_i.semilogy(
                    np.arange(h.size),
                    np.maximum(h - c["F_ref"], floor),
                    color="C0",
                    ls="--",
                    label=f"{name} (α⁺ = ¼ in L̄)",
                )
                rows += [
                    [
                        c["dataset"],
                        c["model"],
                        c["r"],
                        name,
                        "iteration",
                        t,
                        h[t],
                        h[t] - c["F_ref"],
                        "",
                        "",
                        "",
                    ]
                    for t in range(h.size)
                ]
                continue
            ax_i.semilogy(
                np.arange(h.size),
                np.maximum(h - c["F_ref"], floor),
                color=colors[name],
                label=f"{name} (τ = {c['tau']:.3g})" if name == "LPGD" else name,
            )
            rows += [
                [
                    c["dataset"],
                    c["model"],
                    c["r"],
                    name,
                    "iteration",
                    t,
                    h[t],
                    h[t] - c["F_ref"],
                    "",
                    "",
                    "",
                ]
                for t in range(h.size)
            ]
            T = np.array(c["timed"][name], float)
            ax_s.loglog(
                T[:, 2],
                np.maximum(T[:, 1] - c["F_ref"], floor),
                "o-",
                color=colors[name],
                label=name,
            )
            ax_s.errorbar(
                T[:, 2],
                np.maximum(T[:, 1] - c["F_ref"], floor),
                xerr=[T[:, 2] - T[:, 3], T[:, 4] - T[:, 2]],
                fmt="none",
                ecolor=colors[name],
                alpha=0.5,
            )
            for k, _, s, _, _ in c["timed"][name]:
                ax_s.annotate(
                    str(int(k)),
                    (s, max(T[T[:, 0] == k, 1][0] - c["F_ref"], floor)),
                    fontsize=7,
                    textcoords="offset points",
                    xytext=(3, 3),
                    color=colors[name],
                )
            rows += [
                [
                    c["dataset"],
                    c["model"],
                    c["r"],
                    name,
                    "timed run",
                    int(k),
                    f,
                    f - c["F_ref"],
                    med,
                    lo,
                    hi,
                ]
                for k, f, med, lo, hi in c["timed"][name]
            ]
        ax_i.set_xlabel("iteration (LPGD step / BCD sweep)")
        ax_i.set_ylabel("F − F_ref")
        ax_i.set_title(f"{label}: loss vs iteration", fontsize=9)
        ax_i.legend(fontsize=8)
        ax_s.set_xlabel("wall seconds of a jitted run of k steps (median; bars min–max)")
        ax_s.set_ylabel("F(last iterate) − F_ref")
        ax_s.set_title(f"{label}: loss vs time (labels: k)", fontsize=9)
        ax_s.legend(fontsize=8)
    fig.suptitle(
        f"SDL, LPGD vs BCD on gene expression (ξ = {cases[0]['xi']}, λ = {cases[0]['lam']}, "
        "intercept, float64; F_ref = lowest loss seen)",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(OUT / "convergence_real.png", dpi=110)
    plt.close(fig)
    write_csv(
        "convergence_real.csv",
        [
            "dataset",
            "model",
            "rank",
            "method",
            "kind",
            "k",
            "loss",
            "loss_gap",
            "median_s",
            "min_s",
            "max_s",
        ],
        rows,
    )


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--part", choices=["all", "synthetic", "real"], default="all")
    ap.add_argument("--syn-p-h", type=int, default=200)
    ap.add_argument("--syn-n-h", type=int, default=100)
    ap.add_argument("--syn-p-w", type=int, default=50)
    ap.add_argument("--syn-n-w", type=int, default=500)
    ap.add_argument(
        "--syn-T", type=int, default=60, help="LPGD iterates whose distance to Z* is measured"
    )
    ap.add_argument("--syn-iters", type=int, default=300, help="iterations of the loss-gap curves")
    ap.add_argument(
        "--syn-star-iters",
        type=int,
        default=1000,
        help="LPGD steps of the reference run Z* (and extra BCD sweeps for F*)",
    )
    ap.add_argument("--xi", type=float, default=1.0)
    ap.add_argument("--lam", type=float, default=0.1)
    ap.add_argument("--rank", type=int, default=None, help="override the scree-elbow rank")
    ap.add_argument(
        "--ks",
        default="10,30,100,300,1000",
        help="lengths of the timed runs (the largest = curves)",
    )
    ap.add_argument("--reps", type=int, default=3, help="timed repetitions per run length (Golub)")
    ap.add_argument(
        "--ref-extra", type=int, default=4000, help="extra steps of each solver for F_ref (Golub)"
    )
    ap.add_argument(
        "--all-model", choices=["W", "H", "none"], default="W", help="ALL case (none: skip)"
    )
    ap.add_argument("--all-reps", type=int, default=2)
    ap.add_argument("--all-ref-extra", type=int, default=300)
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
    OUT.mkdir(parents=True, exist_ok=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = time.perf_counter()
    load0 = os.getloadavg()[0]
    with blas_threads(args.blas_threads), jax.enable_x64(True):
        if args.part in ("all", "synthetic"):
            synthetic(args, plt)
        if args.part in ("all", "real"):
            real(args, plt)
    print(
        f"wrote {OUT}/convergence_*.csv/png in {time.perf_counter() - t0:.0f} s "
        f"(1-min load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, "
        f"on {os.cpu_count()} CPUs: "
        "timings are wall-clock and shared with whatever else runs)"
    )


if __name__ == "__main__":
    main()
