"""A 64-point hyperparameter sweep as one call (`lowrank_jax.sweep.run`) against 64 separate calls
of the same jitted function (compiled once; the loop a user would write), per family.

Target (issue): the sweep at least 3× faster in total on this CPU. Both sides exclude compilation
(one warm-up each); the separate calls are awaited one by one, as a loop that reads each result
would. The data go to both as arguments (``shared``), never as closed-over constants. Prints;
asserts nothing.

It also reads the process CPU time of both sides: the cores each keeps busy and W, the calls' CPU
time over the sweep's. The sweep is W × (its cores / the calls' cores) faster, so on P cores 3×
needs W ≥ 3 × (the calls' cores) / P whatever the sweep does with the cores (docs/benchmarks.md,
"What 3x on two cores would take").

JAX starts on a CPU with one device, which runs a program on about one core; this script starts it
with one device per core (``--cpu-devices``, ``jax_num_cpu_devices``), as a user who sweeps on a
CPU should, and also times the sweep on a single device. It must run as its own process (the
device count is fixed at JAX's first computation): ``bench/run_all.py`` starts it that way.
"""

from __future__ import annotations

import argparse
import os

import jax
import jax.numpy as jnp
import numpy as np
from _timing import median_ms_cpu


def _time(fn, reps):
    """(wall, process CPU) medians in ms after one warm-up call."""
    return median_ms_cpu(fn, reps=reps, warmup=1)


def cases():
    """name → (f, points, shared): f a function of the point's values and the shared data, 64
    points."""
    from lowrank_jax import covariance as cv
    from lowrank_jax import pathnorm, rpca, sdl, sweep
    from lowrank_jax import regression as rg
    from lowrank_jax.datasets import load_golub
    from lowrank_jax.datasets import rpca as rdata

    out = {}
    Y = rdata.rpca_problem(jax.random.key(0), 200, 200, 5, 0.1).Y
    out["ScaledGD (α, η), 200×200, 40 its"] = (
        lambda alpha, eta, Y: (
            rpca.scaledgd(Y, 5, alpha, eta=eta, tol=None, max_iter=40, key=jax.random.key(0)).X
        ),
        sweep.grid(alpha=jnp.linspace(0.08, 0.2, 8), eta=jnp.linspace(0.3, 0.9, 8)),
        {"Y": Y},
    )
    p = rpca.pretrained(0.1)
    out["LRPCA (ζ scale, η), 200×200"] = (
        lambda scale, eta, Y: (
            rpca.lrpca(Y, 5, p.zeta * scale, jnp.full_like(p.eta, eta), key=jax.random.key(0)).X
        ),
        sweep.grid(scale=jnp.linspace(0.5, 2.0, 8), eta=jnp.linspace(0.3, 0.9, 8)),
        {"Y": Y},
    )
    k1, k2 = jax.random.split(jax.random.key(1))
    A = jax.random.normal(k1, (4000, 20)) / 60
    b = jax.random.dirichlet(k2, jnp.ones(4000))
    out["Newton (w, sketch rows), 4000×20, 6 its"] = (
        lambda w, rows, A, b: (
            rg.newton_solve(
                A,
                b,
                w,
                jnp.zeros(20),
                "exp",
                "sketch",
                max_iter=6,
                tol=None,
                sketch_size=800,
                sketch_rows=rows,
                key=jax.random.key(2),
            ).x
        ),
        sweep.grid(w=jnp.linspace(4.0, 8.0, 8), rows=jnp.arange(100, 801, 100)),
        {"A": A, "b": b},
    )
    g = load_golub()
    Xg = (  # per-gene z-scores of the (samples, genes) matrix, / √p
        (g.X - g.X.mean(0, keepdims=True))
        / (g.X.std(0, keepdims=True) + 1e-8)
        / np.sqrt(g.X.shape[1])
    )
    out["SDL-H (ξ, λ, τ), Golub, 100 its"] = (
        lambda xi, lam, lr, X: (
            sdl.fit(X, g.y, 5, xi=xi, lam=lam, lr=lr, max_iter=100, tol=None).theta
        ),
        sweep.grid(
            xi=jnp.array([0.1, 0.3, 1.0, 3.0]),
            lam=jnp.array([1e-3, 3e-3, 1e-2, 3e-2]),
            lr=jnp.array([0.05, 0.1, 0.2, 0.4]),
        ),
        {"X": jnp.asarray(Xg, jnp.float32)},
    )
    rng = np.random.default_rng(0)
    M = rng.standard_normal((30, 3))
    Sig = (M @ M.T + np.eye(30)).astype(np.float32)
    out["covariance (lr, ε), n = 30, 200 steps"] = (
        lambda lr, eps, Sigma: (
            cv.decompose(
                Sigma,
                3,
                hidden=(100, 50),
                loss="huber",
                eps=eps,
                lr=lr,
                max_iter=200,
                tol=None,
                key=jax.random.key(0),
            ).M
        ),
        sweep.grid(lr=jnp.geomspace(1e-4, 1e-2, 8), eps=jnp.geomspace(1e-3, 1e-1, 8)),
        {"Sigma": jnp.asarray(Sig)},
    )
    Xp = rng.random((400, 64)).astype(np.float32)
    yp = (Xp[:, :32].sum(1) > Xp[:, 32:].sum(1)).astype(np.int32)
    out["path-norm Prox-SGD (lr, λ), 400×64, 2 epochs"] = (
        lambda lr, lam, X, y: (
            pathnorm.train(
                X,
                y,
                reg="path",
                method="prox",
                lr=lr,
                lam=lam,
                epochs=2,
                batch=40,
                hidden=32,
                outputs=2,
                key=jax.random.key(0),
            ).model.out.weight
        ),
        sweep.grid(lr=jnp.geomspace(0.01, 0.3, 8), lam=jnp.geomspace(1e-4, 1e-2, 8)),
        {"X": jnp.asarray(Xp), "y": jnp.asarray(yp)},
    )
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--cpu-devices",
        type=int,
        default=os.cpu_count(),
        help="CPU devices to start JAX with (default: one per core); must come before any "
        "JAX computation, so run this file as its own process",
    )
    ap.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="WORD",
        help=(
            "run only the families whose row name contains one of these words "
            "(e.g. LRPCA path-norm)"
        ),
    )
    args = ap.parse_args(argv)
    if args.cpu_devices is not None and args.cpu_devices < 1:
        ap.error(f"--cpu-devices must be >= 1, got {args.cpu_devices}")
    if args.cpu_devices and args.cpu_devices > 1:
        jax.config.update("jax_num_cpu_devices", args.cpu_devices)
    from lowrank_jax import sweep

    devices = jax.devices()
    print(
        f"64-point sweeps on {len(devices)} {devices[0].platform} device(s): one sweep.run call on "
        "all of them, and on one device\n"
        "(one vmap), vs 64 calls of the jitted single run (ms, median); last two columns: "
        "64 calls of the public API\n"
        "in a Python loop, as a notebook would write it, against the sweep on all devices.\n"
        "Cores: process CPU time over wall time of the sweep and of the 64 calls. Work W: the 64 "
        "calls' CPU time over the\n"
        "sweep's (all devices; one device). The sweep is W x (its cores / the calls' cores) faster "
        "than the calls, so\n"
        "on P cores 3x needs W >= 3 x the calls' cores / P (last column)"
    )
    print(
        f"{'family (swept hyperparameters)':46s} {'sweep':>7s} {'1 dev':>7s} {'64 calls':>8s} "
        f"{'ratio':>6s} {'1 dev':>6s} {'API loop':>8s} {'ratio':>6s} {'cores':>9s} {'W':>5s} "
        f"{'W 1dev':>6s} {'3x needs':>8s}"
    )
    cores = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )
    ratios, short = [], []
    for name, (f, pts, shared) in cases().items():
        if args.only and not any(word in name for word in args.only):
            continue
        single = jax.jit(f)
        n = len(jax.tree.leaves(pts)[0])
        rows = [{k: v[i] for k, v in pts.items()} for i in range(n)]

        def loop():
            return [jax.block_until_ready(single(**r, **shared)) for r in rows]

        def api_loop():
            return [jax.block_until_ready(f(**r, **shared)) for r in rows]

        t_sweep, c_sweep = _time(lambda: sweep.run(f, pts, shared=shared), args.reps)
        t_one, c_one = _time(
            lambda: sweep.run(f, pts, shared=shared, devices=devices[:1]), args.reps
        )
        t_loop, c_loop = _time(loop, args.reps)
        t_api, _ = _time(api_loop, 1)
        ratios.append(t_loop / t_sweep)
        work, needs = c_loop / c_sweep, 3 * c_loop / t_loop / cores
        if work < needs:
            short.append(name.split(" (")[0])
        print(
            f"{name:46s} {t_sweep:7.0f} {t_one:7.0f} {t_loop:8.0f} {t_loop / t_sweep:5.1f}x "
            f"{t_loop / t_one:5.1f}x {t_api:8.0f} {t_api / t_sweep:5.1f}x "
            f"{c_sweep / t_sweep:4.2f}/{c_loop / t_loop:4.2f} {work:5.2f} {c_loop / c_one:6.2f} "
            f"{needs:8.2f}",
            flush=True,
        )
    if not ratios:
        raise SystemExit(f"no family matches --only {args.only}")
    print(
        f"  sweep on all devices vs 64 jitted calls: {min(ratios):.1f}x to {max(ratios):.1f}x "
        f"(target: >= 3x)"
    )
    if short:
        print(f"  work W short of what 3x needs on {cores} cores: {', '.join(short)}")


if __name__ == "__main__":
    main()
