"""Smoke test of an installed lowrank_jax: one small solve per family and a shipped model loaded.

``make test`` builds the wheel, installs it into a fresh virtual environment (with the lowest
dependency releases the package admits) and runs this file there, from outside the repository, so
what is tested is the installed package as a user meets it: its data files, its shipped models and
its declared dependencies, not the source tree.

    python scripts/smoke_test.py          # exits 1 with the failed checks listed
"""

import importlib.metadata
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parents[1]


def main() -> int:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import lowrank_jax
    from lowrank_jax import Status, covariance, datasets, pathnorm, regression, rpca, sdl

    failures: list[str] = []

    def check(name, ok, detail):
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
        if not ok:
            failures.append(name)

    where = pathlib.Path(lowrank_jax.__file__).resolve()
    installed = "site-packages" in where.parts and where.parent != HERE / "lowrank_jax"
    check("installed", installed, f"lowrank_jax from {where.parent}")
    version = importlib.metadata.version("lowrank-jax")
    check("version", version == lowrank_jax.__version__, f"{version}")
    versions = {d: importlib.metadata.version(d) for d in ("jax", "numpy", "optax", "equinox")}
    print("     with", ", ".join(f"{k} {v}" for k, v in versions.items()))
    t0 = time.perf_counter()

    # Robust PCA: a shipped model (its file inside the wheel), on the paper's generator.
    p = datasets.rpca_problem(jax.random.key(0), 100, 100, rank=5, alpha=0.1)
    model = rpca.pretrained(alpha=0.1, n=100)
    out = model(p.Y, tol=1e-4, X_star=p.X)
    err = float(out.error)
    check("rpca", bool(out.converged) and err < 1e-3, f"{Status(int(out.status)).name}, {err:.1e}")

    # Rescaled softmax regression: Newton's method to a gradient tolerance.
    n, d = 400, 8
    A = jax.random.normal(jax.random.key(1), (n, d)) / jnp.sqrt(n)
    b = jax.random.dirichlet(jax.random.key(2), jnp.ones(n))
    res = regression.newton_solve(A, b, jnp.full(n, 5.0), jnp.zeros(d), kind="exp", tol=1e-5)
    g = float(jnp.linalg.norm(regression.gradient(res.x, A, b, jnp.full(n, 5.0), "exp")))
    check(
        "regression", bool(res.converged) and g <= 1e-5, f"{Status(int(res.status)).name}, {g:.1e}"
    )

    # 1-path-norm prox: at strength 0 it returns its input; at a large one, zero.
    W_in = jax.random.normal(jax.random.key(3), (16, 8))
    W_out = jax.random.normal(jax.random.key(4), (3, 16))
    same = pathnorm.path_norm_prox(W_in, W_out, 0.0)
    zero = pathnorm.path_norm_prox(W_in, W_out, 1e6)
    ok = bool(jnp.allclose(same[0], W_in) and jnp.allclose(same[1], W_out))
    ok = ok and not bool(jnp.any(zero[0] * zero[1].sum(0)[:, None]))
    check("pathnorm", ok, "prox at 0 is the identity, at 1e6 the zero network")

    # SDL on the Golub leukaemia fixture that ships with the package.
    gene = datasets.load_golub()
    m = sdl.fit(gene.X, gene.y, rank=2, model="H")
    acc = float(np.mean(np.asarray(sdl.predict(m, gene.X)) == np.asarray(gene.y)))
    check("sdl", acc >= 0.9, f"training accuracy {acc:.2f}")

    # Covariance: L = MM^T + S on the 20-stock correlation matrix that ships with the package.
    Sigma = datasets.sp500_demo_matrix().Sigma
    dec = covariance.decompose(Sigma, 3, hidden=(64, 32), max_iter=300, lr=1e-3)
    r = covariance.report(Sigma, dec.L, dec.S)  # r(L), the share of S's zeros, L's least eigenvalue
    ok = r["r_L"] == 3 and r["min_eig_L"] > -1e-4 and 0 < r["s_S"] < 1
    detail = f"rank(L) {r['r_L']}, min eig(L) {r['min_eig_L']:.1e}, S sparsity {r['s_S']:.2f}"
    check("covariance", ok, detail)

    print(f"     {time.perf_counter() - t0:.1f} s")
    if failures:
        print("smoke test failed:", ", ".join(failures))
        return 1
    print("smoke test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
