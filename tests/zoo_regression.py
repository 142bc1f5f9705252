"""Newton solvers of rescaled hyperbolic regression in the problem zoo (see tests/zoo.py): one case
per method of ``regression.newton_solve``."""

import jax
import jax.numpy as jnp
import numpy as np
from zoo import ZooCase

from lowrank_jax import regression

# n = 12, d = 4, w = 0.1: x0 = 0 converges; from 2·v the diagonal method's first step lands at
# |Ax| ≈ 143, beyond float32's exp overflow (88.7), and the next loss is NaN.
_RNG = np.random.default_rng(102)
_A = jnp.asarray(0.5 * _RNG.standard_normal((12, 4)), jnp.float32)
_B = jnp.asarray(_RNG.dirichlet(np.ones(12)), jnp.float32)
_V = jnp.asarray(_RNG.standard_normal(4), jnp.float32)

# n = 200, d = 5: at x = 0, D = B_diag + w² has negative entries for w = 1 (Lemma 6.4 fails: the
# sketched Hessian is NaN), none for w = 2.
_A2 = jax.random.normal(jax.random.key(3), (200, 5)) / 4
_B2 = jax.random.dirichlet(jax.random.key(4), jnp.ones(200))


def _exact(h, throw):
    # Exact Newton has no step size; a start 1000·v overflows exp (the loss at x0 is inf): refused
    # when concrete, DIVERGED at the first step when traced.
    return regression.newton_solve(
        _A, _B, 0.1, h["scale"] * _V, "exp", "exact", max_iter=30, tol=1e-4, throw=throw
    )


def _diagonal(h, throw):
    return regression.newton_solve(
        _A, _B, 0.1, h["scale"] * _V, "exp", "diagonal", max_iter=30, tol=1e-4, throw=throw
    )


def _sketch(h, throw):
    return regression.newton_solve(
        _A2, _B2, h["w"], jnp.zeros(5), "exp", "sketch", max_iter=30, tol=1e-4, throw=throw
    )


def _iteration(A, B, w, x0, method):
    return regression.newton_solve_iteration(A, B, w, x0, "exp", method, tol=1e-4)


CASES = [
    ZooCase(
        "regression.newton_solve.exact",
        _exact,
        {"scale": 0.0},
        {"scale": 1e3},
        ("x",),
        iterate=lambda h: _iteration(_A, _B, 0.1, h["scale"] * _V, "exact"),
        max_iter=30,
        refused_eagerly=True,
    ),
    ZooCase(
        "regression.newton_solve.diagonal",
        _diagonal,
        {"scale": 0.0},
        {"scale": 2.0},
        ("x",),
        iterate=lambda h: _iteration(_A, _B, 0.1, h["scale"] * _V, "diagonal"),
        max_iter=30,
    ),
    ZooCase(
        "regression.newton_solve.sketch",
        _sketch,
        {"w": 2.0},
        {"w": 1.0},
        ("x",),
        iterate=lambda h: _iteration(_A2, _B2, h["w"], jnp.zeros(5), "sketch"),
        max_iter=30,
    ),
]
