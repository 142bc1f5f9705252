"""How fast ScaledGD could be against AccAltProj: its iterations against an iteration's floor.

ScaledGD's time to a tolerance is (iterations) × (time per iteration). This measures, at n = 1000
and 3000 (r = 5, α = 0.1, float32), for tolerances 1e-4 and 1e-6:

* the peer: AccAltProj from PyPI (``rpca`` 0.1.6, its NumPy code, column centring off: see
  ``_peers.accaltproj``), its time and iterations;
* ScaledGD (α̃ = 2α) at the authors' step η = 0.5 and at the default η = 2/3, the theory's
  largest: time, iterations and ‖X − X⋆‖_F/‖X⋆‖_F;
* one ScaledGD iteration (``rpca.scaledgd_step`` with warm cut-offs, as inside the solver) and the
  same iteration with cut-offs given in advance: the library's own masking and row-panel
  scaled-gradient step without the exact selection. No selection can take ScaledGD below that
  second time, since it reads the same residual at least once more;
* the floor: the iteration count at η = 0.5 times that masked iteration, plus the start, and the
  speed-up over the peer it would give (the target is 1.5x).

Solver times are medians over rounds, each round timing the peer and both steps once in turn.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np
from _peers import accaltproj
from _timing import median_s_and_result, table

from lowrank_jax import datasets, rpca
from lowrank_jax.prox import apply_top_fraction, top_fraction_thresholds
from lowrank_jax.rpca._common import residual_stats, residual_step

RANK, ALPHA = 5, 0.1


@jax.jit
def _masked_step(Y, L, R, row_cut, col_cut, eta):
    """``rpca.scaledgd_step`` with its cut-offs given: the same masking (``apply_top_fraction``) and
    row-panel step (``residual_step``), no selection."""

    def fn(D, row_cut_rows):
        S = apply_top_fraction(D, jnp.abs(D), row_cut_rows, col_cut)
        E = S - D
        return E, residual_stats(S, E)

    return residual_step(Y, L, R, eta, fn, (row_cut,))


def _row(n, tol, name, its, err, secs, ratio):
    return [n, f"{tol:g}", name, its, err, f"{secs:.3f}", f"{ratio:.2f}x"]


def main(sizes=(1000, 3000), reps=5):
    rows = []
    for n in sizes:
        p = datasets.rpca_problem(jax.random.key(n), n, n, RANK, ALPHA)
        norm_x = float(jnp.linalg.norm(p.X))
        # one iteration, at an iterate of the run (after 5 iterations), cut-offs warm
        mid = rpca.scaledgd(p.Y, RANK, ALPHA, tol=None, max_iter=5)
        L, R = mid.L, mid.R
        D = jnp.abs(p.Y - L @ R.T)
        cuts = top_fraction_thresholds(D, 2 * ALPHA)
        step = jax.jit(lambda L, R, c: rpca.scaledgd_step(p.Y, L, R, 2 * ALPHA, 0.5, c)[:3])
        t_step, _ = median_s_and_result(lambda: step(L, R, cuts), 20 * reps)
        t_mask, _ = median_s_and_result(lambda: _masked_step(p.Y, L, R, *cuts, 0.5), 20 * reps)
        t_start, _ = median_s_and_result(
            lambda: rpca.scaledgd(p.Y, RANK, ALPHA, tol=None, max_iter=1), reps
        )
        t_start -= t_step
        etas = (0.5, 2 / 3)
        for tol in (1e-4, 1e-6):
            Yn = np.asarray(p.Y, np.float64)
            solvers = {
                eta: (
                    lambda eta=eta: rpca.scaledgd(p.Y, RANK, ALPHA, eta=eta, tol=tol, max_iter=500)
                )
                for eta in etas
            }
            outs = {eta: jax.block_until_ready(f()) for eta, f in solvers.items()}  # compile
            times = {key: [] for key in ("peer",) + etas}
            for _ in range(reps):  # rounds: the peer, then each step size, in turn
                t0 = time.perf_counter()
                model = accaltproj(Yn, RANK, tol)
                times["peer"].append(time.perf_counter() - t0)
                for eta, f in solvers.items():
                    t0 = time.perf_counter()
                    outs[eta] = jax.block_until_ready(f())
                    times[eta].append(time.perf_counter() - t0)
            med = {key: float(np.median(t)) for key, t in times.items()}
            peer_err = float(np.linalg.norm(model.L_ - np.asarray(p.X)) / norm_x)
            rows.append(
                _row(
                    n,
                    tol,
                    "AccAltProj (PyPI rpca)",
                    model.end_iter_,
                    f"{peer_err:.1e}",
                    med["peer"],
                    1.0,
                )
            )
            for eta in etas:
                its = int(outs[eta].n_iter)
                err = float(jnp.linalg.norm(outs[eta].X - p.X)) / norm_x
                secs = med[eta]
                rows.append(
                    _row(
                        n,
                        tol,
                        f"ScaledGD η = {eta:.3g}",
                        its,
                        f"{err:.1e}",
                        secs,
                        med["peer"] / secs,
                    )
                )
                if eta == 0.5:
                    floor = t_start + its * t_mask
                    rows.append(
                        _row(
                            n,
                            tol,
                            "  floor: start + its × masked iteration",
                            its,
                            "",
                            floor,
                            med["peer"] / floor,
                        )
                    )
        print(
            f"n = {n}: iteration {1e3 * t_step:.2f} ms, of which everything but the selection "
            f"{1e3 * t_mask:.2f} ms; start {1e3 * t_start:.1f} ms"
        )
    print(
        f"\n== ScaledGD against AccAltProj, r = {RANK}, α = {ALPHA}, float32 "
        f"(peer float64), {jax.devices()[0].platform} =="
    )
    table(rows, ["n", "tol", "solver", "iterations", "‖X−X⋆‖/‖X⋆‖", "seconds", "vs AccAltProj"])


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000])
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    main(tuple(a.sizes), a.reps)
