"""Per-iteration cost of the LRPCA and ScaledGD steps (n = 1000, r = 5, float32) beside NumPy.

Prints medians and ratios; asserts nothing. Both sides run 20 consecutive steps per timed call
(a jitted ``lax.scan`` here, a Python loop for NumPy) and the time is divided by 20: the
per-iteration cost inside a solver, as in the paper's Figure 4. The NumPy steps are written here
with care: the LRPCA one uses E = L Rᵀ + S − Y = −clip(Y − L Rᵀ, −ζ, ζ) in place and small
r × r solves; the ScaledGD one finds the row/column cut-offs of T_α with ``np.partition``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from _timing import interleaved_ms, median_ms, table

from lowrank_jax import datasets, rpca
from lowrank_jax.prox import sparsify_top_fraction
from lowrank_jax.rpca._common import spectral_init

N, R, ALPHA = 1000, 5, 0.1
STEPS = 20  # steps per timed run; times are per step


def numpy_lrpca_step(Y, L, R, zeta, eta, buf=None):
    """``buf``: an optional preallocated (n1, n2) work array (saves page faults on fresh 4 MB)."""
    E = np.matmul(L, R.T, out=buf)
    np.subtract(Y, E, out=E)  # D = Y − L Rᵀ
    np.clip(E, -zeta, zeta, out=E)  # clip(D) = −E
    GL, GR = E @ R, E.T @ L  # = −∇
    L_new = L + eta * np.linalg.solve(R.T @ R, GL.T).T
    R_new = R + eta * np.linalg.solve(L.T @ L, GR.T).T
    return L_new, R_new


def numpy_scaledgd_step(Y, L, R, alpha, eta):
    n1, n2 = Y.shape
    D = Y - L @ R.T
    A = np.abs(D)
    kr, kc = int(np.floor(alpha * n2)), int(np.floor(alpha * n1))
    row = -np.partition(-A, kr - 1, axis=1)[:, kr - 1]
    col = -np.partition(-A, kc - 1, axis=0)[kc - 1, :]
    S = np.where((A >= row[:, None]) & (A >= col[None, :]), D, 0)
    E = S - D
    L_new = L - eta * np.linalg.solve(R.T @ R, (E @ R).T).T
    R_new = R - eta * np.linalg.solve(L.T @ L, (E.T @ L).T).T
    return L_new, R_new


def copy_bandwidth(nbytes: int) -> float:
    """Bytes per second of a large array copy (read + write counted)."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    ms = median_ms(lambda: np.copyto(dst, src), reps=20)
    return 2 * nbytes / (ms / 1e3)


def jax_loop(step, steps):
    """A jitted run of ``steps`` consecutive steps (the way a solver calls them: no dispatch
    between steps, inputs still in cache); ``step(Y, L, R, carry) -> (L, R, carry)``. Y is an
    argument, as in the solvers: closed over, it would be a 4 MB constant of the program."""

    def run(Y, L, R, carry):
        def body(c, _):
            return step(Y, *c), None

        return jax.lax.scan(body, (L, R, carry), None, length=steps)[0][0]

    return jax.jit(run)


def numpy_loop(step, steps):
    def run(L, R):
        for _ in range(steps):
            L, R = step(L, R)
        return L

    return run


def main(steps: int = STEPS):
    p = datasets.rpca_problem(jax.random.key(0), N, N, R, ALPHA)
    Y = p.Y
    # Start where the solvers start: the spectral initialisation after T_α (ScaledGD's own).
    L, R_ = spectral_init(
        Y - sparsify_top_fraction(Y, ALPHA),
        R,
        svd="randomized",
        key=None,
        oversample=10,
        power_iters=4,
    )
    zeta, eta, a2 = jnp.float32(1e-3), jnp.float32(0.5), jnp.float32(2 * ALPHA)
    Yn, Ln, Rn = (np.asarray(a) for a in (Y, L, R_))

    lr = jax_loop(lambda Y, L, R, c: rpca.lrpca_step(Y, L, R, zeta, eta)[:2] + (c,), steps)
    warm = jax_loop(
        lambda Y, L, R, c: (lambda o: (o[0], o[1], o[3]))(rpca.scaledgd_step(Y, L, R, a2, eta, c)),
        steps,
    )
    cold = jax_loop(lambda Y, L, R, c: rpca.scaledgd_step(Y, L, R, a2, eta)[:2] + (c,), steps)
    cuts = rpca.scaledgd_step(Y, L, R_, a2, eta)[3]
    buf = np.empty_like(Yn)
    np_lr = numpy_loop(lambda L, R: numpy_lrpca_step(Yn, L, R, 1e-3, 0.5, buf), steps)
    np_sg = numpy_loop(lambda L, R: numpy_scaledgd_step(Yn, L, R, 2 * ALPHA, 0.5), steps)
    t = interleaved_ms(
        {
            "lrpca_jax": lambda: lr(Y, L, R_, None),
            "lrpca_numpy": lambda: np_lr(Ln, Rn),
            "sgd_jax_warm": lambda: warm(Y, L, R_, cuts),
            "sgd_jax_cold": lambda: cold(Y, L, R_, None),
            "sgd_numpy": lambda: np_sg(Ln, Rn),
        },
        reps=15,
    )
    t = {name: ms / steps for name, ms in t.items()}  # per iteration
    bw = copy_bandwidth(N * N * 4)  # Y stays in the last-level cache between iterations ...
    bw_dram = copy_bandwidth(1 << 28)  # ... the floor from main memory, for a cold Y
    floor_ms = 1e3 * (N * N * 4) / bw  # the step must at least read Y once
    floor_dram = 1e3 * (N * N * 4) / bw_dram
    rows = [
        [
            "LRPCA step (jax)",
            f"{t['lrpca_jax']:.2f}",
            f"{t['lrpca_numpy'] / t['lrpca_jax']:.2f}x vs careful NumPy",
            f"{4.6 / t['lrpca_jax']:.2f}x vs authors' PyTorch (4.6 ms, quoted)",
        ],
        ["LRPCA step (careful NumPy)", f"{t['lrpca_numpy']:.2f}", "", ""],
        [
            "ScaledGD step (jax, warm cut-offs)",
            f"{t['sgd_jax_warm']:.2f}",
            f"{t['sgd_numpy'] / t['sgd_jax_warm']:.2f}x vs NumPy partition",
            "",
        ],
        [
            "ScaledGD step (jax, cold cut-offs)",
            f"{t['sgd_jax_cold']:.2f}",
            f"{t['sgd_numpy'] / t['sgd_jax_cold']:.2f}x vs NumPy partition",
            "",
        ],
        ["ScaledGD step (NumPy partition)", f"{t['sgd_numpy']:.2f}", "", ""],
        [
            "memory floor: read Y once",
            f"{floor_ms:.2f}",
            f"LRPCA step = {t['lrpca_jax'] / floor_ms:.1f}x floor",
            f"copy bandwidth {bw / 1e9:.1f} GB/s (Y in cache)",
        ],
        [
            "memory floor: read Y from DRAM",
            f"{floor_dram:.2f}",
            f"LRPCA step = {t['lrpca_jax'] / floor_dram:.1f}x floor",
            f"copy bandwidth {bw_dram / 1e9:.1f} GB/s",
        ],
    ]
    print(f"\n== Step cost, n = {N}, r = {R}, float32, {jax.devices()[0].platform} ==")
    table(rows, ["what", "ms", "ratio", "note"])
    return t


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=STEPS, help="ScaledGD steps timed per case")
    main(ap.parse_args().steps)
