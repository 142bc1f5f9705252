"""How far a rank-deficient design's Hessian sits from singular after rounding, on whatever device
JAX sees: the cut-offs of ``transforms.newton_direction`` compare it with size·ε·max.

A has its last column equal to the sum of the first two, so H = Aᵀ(B + W²)A (the exact Hessian)
and AᵀDA (the diagonal method's curvature) are singular in exact arithmetic. For each (n, d) and
dtype this prints, over 8 random points x, the largest ratio min|μ|/(ε·max|μ|) of the eigenvalues μ
of H as the device forms it, and the largest min_i L_ii²/(ε·max_i H_ii) over the Cholesky factors
that exist (nan: none did). Ratios above the cut-off's size let the rounding-size eigenvalue count
as signal. Prints; asserts nothing.

    PYTHONPATH=. python bench/device/rounding_probe.py
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from lowrank_jax.regression import design  # noqa: E402
from lowrank_jax.regression import hyperbolic as hb  # noqa: E402


def ratios(H, eps):
    mu = jnp.linalg.eigvalsh(H)
    eig = jnp.min(jnp.abs(mu)) / (eps * jnp.max(jnp.abs(mu)))
    L = jnp.linalg.cholesky(H)
    piv = jnp.min(jnp.diagonal(L)) ** 2 / (eps * jnp.max(jnp.diagonal(H)))
    return eig, jnp.where(jnp.all(jnp.isfinite(L)), piv, jnp.nan)


def main():
    print(jax.devices())
    print(
        f"{'n':>5s} {'d':>3s} {'dtype':8s} {'exact: eig':>11s} {'pivot²':>9s} "
        f"{'diag: eig':>10s} {'pivot²':>9s}"
    )
    for n, d in ((50, 4), (400, 6), (4000, 20)):
        rng = np.random.default_rng(n)
        A = rng.standard_normal((n, d)) / np.sqrt(n)
        A[:, d - 1] = A[:, 0] + A[:, 1]
        b = rng.dirichlet(np.ones(n))
        X = 0.3 * rng.standard_normal((8, d))
        for dt in (jnp.float64, jnp.float32):
            Aj, bj, Xj = jnp.asarray(A, dt), jnp.asarray(b, dt), jnp.asarray(X, dt)
            eps = jnp.finfo(dt).eps

            @jax.jit
            def one(x):
                p = hb.parts(x, Aj, bj, "exp")
                D = hb._b_diag(p, bj) + 1.0
                return ratios(hb.hessian(x, Aj, bj, 1.0, "exp"), eps) + ratios(
                    design.gram(Aj, D), eps
                )

            r = np.asarray(jax.lax.map(one, Xj))  # (8, 4)
            with np.errstate(all="ignore"):
                top = [
                    np.nanmax(r[:, i]) if np.any(np.isfinite(r[:, i])) else np.nan for i in range(4)
                ]
            print(
                f"{n:5d} {d:3d} {np.dtype(dt).name:8s} {top[0]:11.2f} {top[1]:9.2f} "
                f"{top[2]:10.2f} {top[3]:9.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
