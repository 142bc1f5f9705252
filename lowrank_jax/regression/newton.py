"""Newton solvers for rescaled hyperbolic regression: exact, diagonal (Algorithm 1 without sampling)
and sketched (Algorithm 1 with leverage-score SubSample).

    x_{t+1} = x_t − H̃(x_t)⁻¹ ∇L(x_t),
    "exact":    H̃ = ∇²L = Aᵀ(B + W²)A                       (Def. A.12; quadratic convergence)
    "diagonal": H̃ = Aᵀ D A,  D = B_diag + W²               (Alg. 1 line 5; linear)
    "sketch":   H̃ = Aᵀ D̃ A,  D̃ = SubSample(D, A)         (Alg. 1 lines 6, 8; linear)

SubSample draws m rows of diag(√D) A i.i.d. by leverage scores (exact, or approximate through a
CountSketch, :mod:`lowrank_jax.sketch`): with approximate scores one iteration costs
O((nnz(A) + d^ω) polylog) plus O(m d²), the paper's claim, instead of O(n d²) for the exact Hessian.
It needs D > 0 (Lemma 6.4's precondition, note G14): a non-positive D raises.

Beyond the paper (its theorem assumes a start within 0.1 l / M of x*, a radius far below float64
resolution for any realistic R, note G12): ``damping`` adds λ I to H̃, and ``line_search=True``
backtracks (halving, Armijo constant 1e-4) so that starts outside the basin also converge; with both
off the step is the paper's full Newton step. The update is ``transforms.newton_direction``, the
same solve as the generic ``transforms.newton`` optax transformation.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from lowrank_jax import _checks, design, loop, sketch, transforms
from lowrank_jax.regression import hyperbolic as hb

METHODS = ("exact", "diagonal", "sketch")


class NewtonResult(NamedTuple):
    """``x`` final iterate; ``n_iter`` steps taken; per-iteration histories (padding NaN after
    ``n_iter``) measured at the iterate *before* step t: ``loss``, ``grad_norm``, ``error`` = ‖x_t − x*‖
    (NaN without ``x_star``), ``eps0`` = ε₀ of H̃ against the exact Hessian (NaN unless requested),
    ``step`` the line-search step length (1 without line search)."""

    x: jax.Array
    n_iter: jax.Array
    loss: jax.Array
    grad_norm: jax.Array
    error: jax.Array
    eps0: jax.Array
    step: jax.Array


def newton_solve(A, b, w, x0, kind: str = "exp", method: str = "exact", *, iters: int = 20, tol=None,
                 x_star=None, key=None, sketch_size: int | None = None, leverage: str = "approx",
                 refine: int = 0, rescore: int = 1, damping=0.0, line_search: bool = False,
                 measure_eps: bool = False) -> NewtonResult:
    """Minimise L(x) = ½‖u(Ax) − ⟨u(Ax), 1⟩ b‖² + ½‖diag(w)Ax‖² by (approximate) Newton steps.

    Args:
      A: (n, d) dense, ``BCOO`` or :class:`lowrank_jax.design.RowSparse`; b, w: (n,) (w may be a
        scalar); x0: (d,) start; kind: "exp" | "cosh" | "sinh".
      method: "exact" | "diagonal" | "sketch" (module docstring).
      iters: number of steps, or the cap when ``tol`` is given; tol: stop once ‖∇L(x_t)‖ ≤ tol.
      x_star: reference solution, to record ‖x_t − x*‖.
      key: ``jax.random`` key of the sampling ("sketch"; default ``key(0)``); sketch_size: rows m
        (default :func:`lowrank_jax.sketch.sketch_size` for ε = 0.5, δ = 0.01); leverage: "approx"
        (CountSketch) or "exact" scores.
      refine: "sketch" only: k ≥ 0 preconditioned conjugate-gradient steps on Aᵀ D A Δ = ∇L with the
        sampled H̃ as preconditioner (sketch-and-precondition; each step one product with A and one
        with Aᵀ, O(nnz)). k = 0 is the paper's Algorithm 1 (Δ = H̃⁻¹∇L, contraction ≈ 2ε₀ with
        ε₀ ~ √(d log d / m)); a few steps give the diagonal method's direction, and its iteration
        count, at the sketch's cost.
      rescore: "sketch" only: recompute the leverage scores every ``rescore`` iterations (1: every
        iteration, as Algorithm 1). Sampling with scores from an earlier D stays unbiased; it costs
        variance by the factor max_i D_i/D_i^old, which is ≈ 1 once the iterates settle, and saves
        the scores' pass over A and their scatter (the dominant cost of a sketched step).
      damping: λ ≥ 0 added to H̃ (traced); line_search: Armijo backtracking.
      measure_eps: also record ε₀ of H̃ against the exact Hessian each step (costs the exact Hessian).

    ``b``, ``w``, ``x0``, ``x_star``, ``damping`` are traced: ``vmap`` over them (or over instances)
    works without recompiling.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if leverage not in ("approx", "exact"):
        raise ValueError(f"leverage must be 'approx' or 'exact', got {leverage!r}")
    A, b, w, x0 = hb.check_problem(A, b, w, x0, kind=kind)
    n, d = A.shape
    iters = _checks.check_positive_int(iters, "iters")
    if x_star is not None:
        x_star = _checks.as_hyper(x_star, "x_star", ndim=1, nonnegative=False, dtype=A.dtype)
    damping = _checks.as_hyper(damping, "damping", ndim=0, dtype=A.dtype)
    tol = None if tol is None else _checks.as_hyper(tol, "tol", ndim=0, positive=True, dtype=A.dtype)
    m = sketch_size or sketch.sketch_size(d, 0.5)
    m = _checks.check_positive_int(m, "sketch_size")
    key = jax.random.key(0) if key is None else key
    refine = _checks.check_positive_int(refine, "refine", minimum=0)
    rescore = _checks.check_positive_int(rescore, "rescore")
    out = _solve(A, b, w, x0, x_star, damping, tol, key, kind=kind, method=method, iters=iters, m=m,
                 leverage=leverage, refine=refine, rescore=rescore, line_search=line_search,
                 measure_eps=measure_eps)
    return out


def _pcg(apply_M, precond, g, x0, steps: int):
    """``steps`` iterations of preconditioned conjugate gradients on M x = g from x0."""
    r = g - apply_M(x0)
    z = precond(r)
    state = (x0, r, z, z, jnp.dot(r, z))

    def body(_, st):
        x, r, z, p, rz = st
        Mp = apply_M(p)
        a = rz / jnp.dot(p, Mp)
        x, r = x + a * p, r - a * Mp
        z = precond(r)
        rz_new = jnp.dot(r, z)
        return x, r, z, z + (rz_new / rz) * p, rz_new

    return jax.lax.fori_loop(0, steps, body, state)[0]


@functools.partial(jax.jit, static_argnames=("kind", "method", "iters", "m", "leverage", "refine", "rescore",
                                             "line_search", "measure_eps"))
def _solve(A, b, w, x0, x_star, damping, tol, key, *, kind, method, iters, m, leverage, refine, rescore,
           line_search, measure_eps):
    nan = jnp.full((), jnp.nan, x0.dtype)

    def scores_for(D, k):
        k_scores = jax.random.fold_in(jax.random.fold_in(key, k), 1)
        if leverage == "approx":
            return sketch.approx_leverage_scores(k_scores, A, D)
        return sketch.leverage_scores(A, D)

    def curvature(p, k, scores):
        """(H̃, D, scores): D = B_diag + W² (None for "exact")."""
        if method == "exact":
            return hb._hessian_at(p, A, b, w), None, scores
        D = hb._b_diag(p, b) + w * w
        if method == "diagonal":
            return design.gram(A, D), D, scores
        D = eqx.error_if(D, jnp.any(D <= 0), "sketched Newton needs D = B_diag + W² > 0 (Lemma 6.4): "
                                              "increase w, or use method='diagonal' or 'exact'")
        if rescore == 1:
            scores = scores_for(D, k)
        else:
            scores = jax.lax.cond(k % rescore == 0, lambda: scores_for(D, k), lambda: scores)
        H = sketch.sampled_gram(jax.random.fold_in(key, k), A, D, m, scores=scores)
        return H, D, scores

    def direction(H, D, g):
        dx = transforms.newton_direction(H, g, damping)
        if method != "sketch" or refine == 0:
            return dx
        Hd = H + damping * jnp.eye(H.shape[0], dtype=H.dtype)
        chol = jax.scipy.linalg.cho_factor(Hd, lower=True)

        def apply_M(v):
            return design.rmatvec(A, D * design.matvec(A, v)) + damping * v

        return _pcg(apply_M, lambda r: jax.scipy.linalg.cho_solve(chol, r), g, dx, refine)

    def f(x):
        return hb._loss(x, A, b, w, kind)[0]

    def step(k, state):
        x, scores = state
        p = hb.parts(x, A, b, kind)                       # one pass over A for z, the loss and D
        fx = 0.5 * jnp.sum(p.c * p.c) + 0.5 * jnp.sum((w * p.z) ** 2)
        g = design.rmatvec(A, p.c * p.v - jnp.dot(b, p.c) * p.v + w * w * p.z)
        H, D, scores = curvature(p, k, scores)
        dx = direction(H, D, g)
        if line_search:
            slope = jnp.dot(g, dx)

            def shrink(t):
                return (f(x - t * dx) > fx - 1e-4 * t * slope) & (t > 1e-10)

            t = jax.lax.while_loop(shrink, lambda t: 0.5 * t, jnp.ones((), x.dtype))
        else:
            t = jnp.ones((), x.dtype)
        eps0 = hb.approximation_error(H, hb._hessian_at(p, A, b, w)) if measure_eps else nan
        err = nan if x_star is None else jnp.linalg.norm(x - x_star)
        diag = (fx, jnp.linalg.norm(g), err, eps0, t)
        return (x - t * dx, scores), diag

    state0 = (x0, jnp.ones(A.shape[0], x0.dtype))
    if tol is None:
        res = loop.run_fixed(step, state0, iters)
    else:
        res = loop.run_until(step, state0, max_iter=iters, stop=lambda s, diag: diag[1] <= tol)
    x = res.state[0]
    x = eqx.error_if(x, jnp.logical_not(jnp.all(jnp.isfinite(x))),
                     "Newton iterate became non-finite (overflow of exp/cosh at |Ax| too large, or an "
                     "indefinite H̃): use float64, damping, line_search=True or a closer start")
    loss_h, gnorm, err, eps0, t = res.history
    return NewtonResult(x, res.n_iter, loss_h, gnorm, err, eps0, t)


__all__ = ["METHODS", "NewtonResult", "newton_solve"]
