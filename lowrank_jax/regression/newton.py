"""Newton solvers for rescaled softmax regression: exact, diagonal (Algorithm 1 without sampling)
and sketched (Algorithm 1 with leverage-score SubSample).

    xₜ₊₁ = xₜ − H̃(xₜ)⁻¹ ∇L(xₜ),
    "exact":    H̃ = ∇²L = Aᵀ(B + W²)A              (Def. A.12; quadratic rate)
    "diagonal": H̃ = Aᵀ D A,  D = B_diag + W²       (Alg. 1 line 5; linear rate)
    "sketch":   H̃ = Aᵀ D̃ A,  D̃ = SubSample(D, A)   (Alg. 1 lines 6, 8; linear rate)

SubSample draws m rows of diag(√D) A i.i.d. by leverage scores (exact, or approximate through a
CountSketch, ``lowrank_jax.regression.sketch``): with approximate scores one iteration costs
O((nnz(A) + d^ω) polylog) plus O(m d²), the paper's claim, instead of O(n d²) for the exact Hessian.
It needs D > 0 (Lemma 6.4's precondition): a non-positive D makes the run's iterate NaN
and its status DIVERGED (with ``throw=True``, the default, the call raises, also under ``jit``).

Beyond the paper (its theorem assumes a start within 0.1 l / M of x*, a radius far below float64
resolution for any realistic R), for starts outside the basin; with both off the step is
the paper's full Newton step:

* ``damping`` λ ≥ 0: Δ = (H̃ + λI)⁻¹ ∇L. The fixed points stay those of ∇L = 0; for λ > −λ_min(H̃),
  H̃ + λI ≻ 0 makes Δ a descent direction of length ≤ ‖∇L‖/(λ + λ_min(H̃)), but near x* the exact
  method then contracts only linearly, by λ/(λ + λ_min(∇²L(x*))) per step (tested). Damping alone
  does not guarantee convergence: too small a λ can still overshoot, too large a λ crawls.
* ``line_search=True``: Armijo backtracking (halving from t = 1, constant 1e-4, with a slack of 16
  rounding units of L so that it does not stall near x*). Where H̃ + λI is indefinite and Δ points
  uphill (⟨∇L, Δ⟩ < 0), the search reverses Δ (recorded as a negative ``step``). Tested from starts
  where the Hessian is indefinite and the plain Newton step fails.

How the step is computed: every method's direction is the update of one optax transformation
``transforms.newton(curvature, damping, solve=direction, ...)``. Its ``hessian_fn`` builds H̃ from
the parts at xₜ (computed from the carried z = Axₜ; passed, with the iteration k and the previous
curvature, as extra arguments of ``update``): ∇²L for "exact", AᵀDA for "diagonal", and for
"sketch" a fresh draw (with (H̃ + λI)⁻¹ formed once) or, between ``resample`` draws, the one kept in
the transformation's state. Its ``solve`` returns (Δ, AΔ): ``transforms.newton_direction``
(Cholesky; LU for an indefinite H; the eigendecomposition's pseudo-inverse for a numerically
singular one) for "exact" and "diagonal"; for "sketch" the product (H̃ + λI)⁻¹∇L (``refine`` = 0)
or ``refine`` CG steps on (AᵀDA + λI)Δ = ∇L preconditioned by it. The update is −Δ and AΔ stays
in the state, so the loop around it (z = Ax carried, Armijo line search, diagnostics) takes
zₜ₊₁ = zₜ − t·AΔ without another pass over A.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from lowrank_jax import _checks, linalg, loop, transforms
from lowrank_jax.precision import full_precision
from lowrank_jax.regression import design, sketch
from lowrank_jax.regression import hyperbolic as hb
from lowrank_jax.result import Result, finish

METHODS = ("exact", "diagonal", "sketch")


class NewtonResult(Result):
    """The outcome of ``newton_solve``: its status, the last step's diagnostics and the iterate.

    The ``Result`` core (``status``, ``n_iter``, ``history``) plus the
    diagnostics, measured at the iterate *before* step t: each field holds the value of the last
    step run (t = ``n_iter`` − 1), ``history`` the same per step (key = field name, length
    ``max_iter``, NaN after ``n_iter``).

    Attributes:
      status: int32 ``Status``: CONVERGED (‖∇L(xₜ)‖ ≤ ``tol``),
        MAX_ITER, DIVERGED or INVALID.
      n_iter: int32, the steps run.
      history: dict of the fields below per step (``"loss"``, ``"grad_norm"``, ``"step"``, and
        ``"error"``, ``"eps0"`` when recorded), each of length ``max_iter``.
      loss: L(xₜ), scalar.
      grad_norm: ‖∇L(xₜ)‖, scalar (what ``tol`` bounds).
      step: the line-search step length t, scalar (1 without line search; −t where the direction
        pointed uphill and the line search reversed it).
      error: ‖xₜ − x*‖ with ``x_star``, else None (and no ``history["error"]``).
      eps0: with ``measure_eps``, ε₀ of H̃ against the exact Hessian (inf where the exact Hessian is
        not positive definite, so that no ε₀ is defined, Def. 6.2), else None.
      x: (d,) the final iterate, after ``n_iter`` steps.
    """

    loss: jax.Array
    grad_norm: jax.Array
    step: jax.Array
    error: jax.Array | None
    eps0: jax.Array | None
    x: jax.Array


def _sketch_size(value, name: str, args: dict) -> int:
    """m, the sampled rows: a static integer ≥ 1, by default
    ``lowrank_jax.regression.sketch.sketch_size`` at ε = 0.5, δ = 0.01 for A's d columns."""
    if value is None:
        return sketch.sketch_size(args["A"].shape[1], 0.5)
    return _checks.check_positive_int(value, name)


def _draw_count(value, name: str, args: dict):
    """``sketch_rows``: an integer scalar, maybe traced, returned as given (its range is a rule)."""
    dtype = jnp.result_type(value)
    if not jnp.issubdtype(dtype, jnp.integer) or jnp.ndim(value):
        raise ValueError(f"{name} must be an integer scalar, got {dtype} {jnp.shape(value)}")
    return value


_PROBLEM_RULES, _PROBLEM = hb.problem("x0")


# What newton_solve and its iteration accept: the problem, the method and its options, checked
# in this order (a spec may refer to one declared before it), then the rules.
_RULES = (
    *_PROBLEM_RULES,
    hb.length("x_star", 1),
    hb.length("scores", 0),
    _checks.Rule(
        lambda a: a["rescore"] % a["resample"] == 0,
        "rescore ({rescore}) must be a multiple of resample ({resample}): scores are "
        "recomputed only at iterations that draw a new sample",
        uses=(),
    ),
    _checks.Rule(
        lambda a: a["scores"] is None or jnp.sum(a["scores"]) > 0,
        "scores must have a positive sum (rows are sampled with p ∝ scores)",
        uses=("scores",),
        poison="scores",
    ),
    _checks.Rule(
        lambda a: (
            a["sketch_rows"] is None
            or ((1 <= a["sketch_rows"]) & (a["sketch_rows"] <= a["sketch_size"]))
        ),
        "sketch_rows must lie in [1, sketch_size = {sketch_size}], got {sketch_rows}",
        uses=("sketch_rows",),
        poison="damping",
    ),
    _checks.Rule(
        lambda a: (
            a["method"] != "sketch" or a["sketch_size"] >= a["A"].shape[1] or a["damping"] > 0
        ),
        "sketch_size = {sketch_size} rows cannot span d = {A.shape[1]} columns: the sketched "
        "Hessian is singular; use sketch_size >= d (default: the Chernoff bound at ε = 0.5) "
        "or damping > 0",
        uses=("damping",),
        poison="damping",
    ),
    hb.finite_loss("x0"),
)
_ARGS = dict(
    method=_checks.Choice(*METHODS),
    leverage=_checks.Choice("approx", "exact"),
    **_PROBLEM,
    line_search=_checks.Flag(),
    measure_eps=_checks.Flag(),
    x_star=_checks.Hyper(ndim=1, low=None, dtype_of="A", optional=True),
    damping=_checks.Hyper(ndim=0, dtype_of="A"),
    tol=_checks.Tol(dtype_of="A"),
    sketch_size=_checks.Convert(_sketch_size),
    key=_checks.Key(),
    sketch_rows=_checks.Convert(_draw_count, optional=True),
    refine=_checks.Count(minimum=0),
    rescore=_checks.Count(),
    resample=_checks.Count(),
    scores=_checks.Hyper(ndim=1, dtype_of="A", optional=True),
)


@full_precision
@_checks.validate(
    *_RULES,
    **_ARGS,
    differentiable=_checks.Flag(),
    throw=_checks.Flag(),
    max_iter=_checks.Count(),
)
def newton_solve(
    A,
    b,
    w,
    x0,
    kind: str = "exp",
    method: str = "exact",
    *,
    max_iter: int = 20,
    tol=1e-6,
    x_star=None,
    key=None,
    sketch_size: int | None = None,
    sketch_rows=None,
    leverage: str = "approx",
    refine: int = 0,
    rescore: int = 1,
    resample: int = 1,
    scores=None,
    damping=0.0,
    line_search: bool = False,
    measure_eps: bool = False,
    differentiable: bool = False,
    throw: bool = True,
) -> NewtonResult:
    """Minimise the rescaled softmax regression loss by exact, diagonal or sketched Newton steps.

    Gao, Song, Yin, Algorithm 1: from x0, for t = 0, 1, …

        xₜ₊₁ = xₜ − sₜ (H̃(xₜ) + λI)⁻¹ ∇L(xₜ),
        L(x) = ½‖u(Ax) − ⟨u(Ax), 1⟩ b‖² + ½‖diag(w) A x‖²,

    with H̃ = ∇²L for "exact", Aᵀ diag(D) A with D = B_diag + w² (the diagonal of B, its rank-one
    terms dropped) for "diagonal", and Aᵀ D̃ A with D̃ a leverage-score row sample of D (Lemma 6.4)
    for "sketch"; λ = ``damping`` (0: the paper's step) and sₜ = 1 unless ``line_search`` (module
    docstring). Step t measures ‖∇L(xₜ)‖ (``history["grad_norm"][t]``) and then steps, so with
    ``tol`` the returned x is one Newton step past the first xₜ with ‖∇L(xₜ)‖ ≤ tol (a start at
    x* gives ``n_iter`` = 1), and ``grad_norm`` is the gradient before that last step.

    A concrete start whose loss overflows is refused (``ValueError`` naming the rows of Ax beyond
    the safe limit); a traced one reports DIVERGED at its first step. ``b``, ``w``, ``x0``,
    ``x_star``, ``damping`` and ``tol`` are traced: ``vmap`` over them (or over instances) works
    without recompiling.

    Args:
      A: (n, d) design: dense, ``BCOO``, ``scipy.sparse`` or
        ``lowrank_jax.regression.design.RowSparse``.
      b: (n,) target (the paper's b lies on the simplex).
      w: (n,) non-negative weights of the regulariser ½‖diag(w) A x‖², or a scalar for every row.
      x0: (d,) start.
      kind: u applied entrywise to Ax, "exp" (default), "cosh" or "sinh".
      method: "exact" (default), "diagonal" or "sketch" (module docstring).
      max_iter: the most steps (static, ≥ 1; default 20).
      tol: stop once ‖∇L(xₜ)‖ ≤ tol (absolute; > 0; default 1e-6). None runs exactly
        ``max_iter`` steps.
      x_star: (d,) reference solution, to record ‖xₜ − x*‖ per step (default None).
      key: ``jax.random`` key or integer seed of the sampling ("sketch"; default key(0)); the draw
        of iteration k uses ``jax.random.fold_in(key, k)``.
      sketch_size: sampled rows m ("sketch"; static, ≥ 1; default
        ``lowrank_jax.regression.sketch.sketch_size`` at ε = 0.5, δ = 0.01). Below d the
        sampled Hessian is singular and ``damping`` > 0 is required.
      sketch_rows: traced integer, how many of the m draws are used (1 ≤ sketch_rows ≤
        ``sketch_size``; default all): the first ``sketch_rows`` of the i.i.d. draws, so that
        ``vmap`` can sweep the sample size at the static capacity ``sketch_size``.
      leverage: "approx" (CountSketch, default) or "exact" (QR) leverage scores ("sketch").
      refine: "sketch" only: k ≥ 0 preconditioned conjugate-gradient steps from 0 on
        Aᵀ D A Δ = ∇L with the sampled H̃ as preconditioner (sketch-and-precondition; k steps cost
        k products with A and k − 1 with Aᵀ, O(nnz) each). k = 0 (default) is the paper's
        Algorithm 1 (Δ = H̃⁻¹∇L, contraction ≈ ε₀ ~ √(d log d / m)); k = 1 the same direction with
        its optimal length; k = 2 or 3 give the diagonal method's direction to a few digits, hence
        its iteration count, at the sketch's cost.
      rescore: "sketch" only: recompute the leverage scores every ``rescore`` iterations (≥ 1;
        default 1, every iteration, as Algorithm 1). Sampling with scores from an earlier D stays
        unbiased; it costs variance by the factor max_i D_i/D_i^old, which is ≈ 1 once the iterates
        settle, and saves the scores' pass over A and their scatter (the dominant cost of a
        sketched step).
      resample: "sketch" only: draw a new H̃ every ``resample`` iterations and keep it in between
        (≥ 1; default 1; ``rescore`` must be a multiple). With ``refine`` ≥ 2, H̃ is only a
        preconditioner: a stale one slows the conjugate gradients a little and leaves the fixed
        point alone, so one large sample (small ε₀) per solve beats a fresh small one per step.
        With ``refine`` = 0 the kept H̃ misses the change of D and the contraction degrades
        accordingly.
      scores: "sketch" only: (n,) leverage scores τ(A) of the unweighted A, e.g. from
        ``lowrank_jax.regression.sketch.approx_leverage_scores`` (default None: computed at
        each rescore). They depend on A alone, so compute them once per design and share them
        across solves (and a ``vmap`` over b, w). Each step then samples by p_i ∝ D_i τ_i(A),
        which is β-approximate for diag(√D)A with β = min D / max D (τ_i(√D A) ≤ (D_i / min D)
        τ_i(A)), and no step makes a pass over A for scores.
      damping: λ ≥ 0 added to H̃ (scalar, traced; default 0).
      line_search: Armijo backtracking, reversing an uphill direction (default False; module
        docstring).
      measure_eps: also record ε₀ of H̃ against the exact Hessian each step (default False; costs
        the exact Hessian). ε₀ is defined for a positive definite exact Hessian only (Def. 6.2): a
        step whose exact Hessian is not (outside the region where the paper's lemma makes it so,
        or a rank-deficient A) records inf.
      differentiable: with ``tol``, stop by a ``lax.scan`` of ``max_iter`` steps that skips the
        work once converged (``lowrank_jax.loop.run_until``), so that reverse-mode ``grad``
        passes the solve (default False: a ``while_loop``, which has no reverse mode). With
        ``tol=None`` every solve is a scan.
      throw: with a run that diverges (DIVERGED: the iterate x or Ax became non-finite, |Ax|
        reached the overflow of u, where the loss is infinite, or a diagnostic became NaN), raise a
        ``RuntimeError`` naming the usual causes, called directly and inside ``jit``/``vmap``/
        ``lowrank_jax.sweep.run`` alike; also for INVALID (a traced ``damping`` < 0, ``tol``
        ≤ 0, ``scores`` negative or summing to 0, ``sketch_rows`` outside [1, ``sketch_size``], or
        ``damping`` = 0 with fewer sketch rows than columns: the iterate is NaN). False: return
        the result, whose ``status`` says so (a sweep keeps its other points). Default True.

    Returns:
      ``NewtonResult``: ``status``, ``n_iter``, the last step's ``loss``, ``grad_norm``,
      ``step``, ``error``, ``eps0``, their ``history``, and the final iterate ``x`` (d,).

    Example:
        ```python
        import jax, jax.numpy as jnp
        from lowrank_jax import regression

        n, d = 2000, 10
        A = jax.random.normal(jax.random.key(0), (n, d)) / jnp.sqrt(n)
        b = jax.random.dirichlet(jax.random.key(1), jnp.ones(n))  # b on the simplex
        res = regression.newton_solve(A, b, 5.0, jnp.zeros(d), "exp", "exact", tol=1e-5)
        # True, 3 steps, ‖∇L‖ ≈ 2e-6 before the last
        print(res.converged, res.n_iter, res.grad_norm)
        print(res)  # NewtonResult(status=CONVERGED, n_iter=3, ...)
        ```
    """
    out = _solve(
        A,
        b,
        w,
        x0,
        x_star,
        damping,
        tol,
        key,
        scores,
        sketch_rows,
        kind=kind,
        method=method,
        max_iter=max_iter,
        m=sketch_size,
        leverage=leverage,
        refine=refine,
        rescore=rescore,
        resample=resample,
        line_search=line_search,
        measure_eps=measure_eps,
        differentiable=bool(differentiable),
    )
    return finish(
        out,
        throw,
        diverged="newton_solve diverged (non-finite Newton iterate: overflow of exp/cosh at |Ax| "
        "too large, an indefinite H̃, or a singular one: A without full column rank, or fewer "
        "sketch rows than columns): use "
        + (
            "float64, damping or a closer start"
            if line_search
            else "float64, damping, line_search=True or a closer start"
        )
        + (
            "; method='sketch' also needs D = B_diag + W² > 0 at every iterate (Lemma 6.4): "
            "increase w, or use method='diagonal' or 'exact'"
            if method == "sketch"
            else ""
        ),
        invalid="newton_solve: a traced damping must be >= 0 (> 0 with method='sketch' and "
        "sketch_size < d), a traced tol > 0, traced scores non-negative with a positive sum and a "
        "traced sketch_rows in [1, sketch_size] (the result is NaN)",
    )


@full_precision
@_checks.validate(*_RULES, **_ARGS)
def newton_solve_iteration(
    A,
    b,
    w,
    x0,
    kind: str = "exp",
    method: str = "exact",
    *,
    tol=1e-6,
    x_star=None,
    key=None,
    sketch_size: int | None = None,
    sketch_rows=None,
    leverage: str = "approx",
    refine: int = 0,
    rescore: int = 1,
    resample: int = 1,
    scores=None,
    damping=0.0,
    line_search: bool = False,
    measure_eps: bool = False,
) -> loop.Iteration:
    """The Newton solver of rescaled softmax regression as an initial state and a step, to run,
    warm-start or stop as one wishes.

    The iteration that ``newton_solve`` runs (same arguments and equations): its state is
    ``(x, z, opt_state)``, the iterate xₜ, z = A xₜ (carried, so that a step makes no pass over
    A for the loss, the gradient and the line search) and the state of the ``transforms.newton``
    transformation (the curvature H̃ of the last step, with the sketch's kept draw and scores, and
    AΔ); its diagnostics are those of ``newton_solve``'s history. Step k draws the sketch with
    ``jax.random.fold_in(key, k)`` and follows the ``rescore`` / ``resample`` schedule by k, so a
    run resumed with ``start=k`` takes the steps the whole run takes. So

        it = newton_solve_iteration(A, b, w, x0, kind, method, ...)
        out = it.result(loop.run(it, max_iter=m))
        # out == newton_solve(A, b, w, x0, kind, method, ..., max_iter=m, throw=False)

    Args:
      A: (n, d) design: dense, ``BCOO``, ``scipy.sparse`` or
        ``lowrank_jax.regression.design.RowSparse``.
      b: (n,) target.
      w: (n,) non-negative weights of the regulariser ½‖diag(w) A x‖², or a scalar for every row.
      x0: (d,) start.
      kind: u applied entrywise to Ax, "exp" (default), "cosh" or "sinh".
      method: "exact" (default), "diagonal" or "sketch".
      tol: ``it.stop`` is ‖∇L(xₜ)‖ ≤ tol (> 0, default 1e-6); None: no stopping rule.
      x_star: (d,) reference solution, to record ‖xₜ − x*‖ per step (default None).
      key: ``jax.random`` key or integer seed of the sampling ("sketch"; default key(0)).
      sketch_size: sampled rows m ("sketch"; static, ≥ 1; default
        ``lowrank_jax.regression.sketch.sketch_size`` at ε = 0.5, δ = 0.01).
      sketch_rows: traced integer, how many of the m draws are used (1 ≤ sketch_rows ≤
        ``sketch_size``; default all).
      leverage: "approx" (CountSketch, default) or "exact" (QR) leverage scores ("sketch").
      refine: "sketch" only: preconditioned conjugate-gradient steps per Newton step (≥ 0;
        default 0).
      rescore: "sketch" only: recompute the leverage scores every ``rescore`` steps (≥ 1; default
        1).
      resample: "sketch" only: draw a new H̃ every ``resample`` steps (≥ 1; default 1; ``rescore``
        must be a multiple).
      scores: "sketch" only: (n,) leverage scores τ(A) of the unweighted A (default None).
      damping: λ ≥ 0 added to H̃ (scalar, traced; default 0).
      line_search: Armijo backtracking, reversing an uphill direction (default False).
      measure_eps: also record ε₀ of H̃ against the exact Hessian each step (default False).

    Returns:
      A ``lowrank_jax.loop.Iteration`` whose ``result`` gives a ``NewtonResult`` (no
      exception on failure: read its ``status``, or pass it to
      ``lowrank_jax.result.finish``).

    Example:
        ```python
        import jax, jax.numpy as jnp
        from lowrank_jax import loop, regression

        n, d = 2000, 10
        A = jax.random.normal(jax.random.key(0), (n, d)) / jnp.sqrt(n)
        b = jax.random.dirichlet(jax.random.key(1), jnp.ones(n))
        it = regression.newton_solve_iteration(
            A, b, 5.0, jnp.zeros(d), "exp", "diagonal"
        )
        step, state = jax.jit(it.step), it.state
        for k in range(3):  # steps by hand: ‖∇L‖ falls each step
            state, diag = step(k, state)
            print(k, diag["grad_norm"])
        stop = lambda s, d: d["grad_norm"] < 1e-4
        out = it.result(loop.run(it, max_iter=50, stop=stop))
        print(out.status, out.n_iter)  # 0 3: CONVERGED in three steps
        ```
    """
    return _newton_iteration(
        A,
        b,
        w,
        x0,
        x_star,
        damping,
        tol,
        key,
        scores,
        sketch_rows,
        kind=kind,
        method=method,
        m=sketch_size,
        leverage=leverage,
        refine=refine,
        rescore=rescore,
        resample=resample,
        line_search=line_search,
        measure_eps=measure_eps,
    )


def _pcg_from_zero(A, D, damping, precond, g, steps: int):
    """``steps`` ≥ 1 preconditioned conjugate-gradient iterations on (Aᵀ D A + λI) Δ = g from Δ = 0.

    Returns (Δ, AΔ). Every step costs one product A p; every step but the last also one Aᵀ(D∘Ap)
    (the last needs only pᵀMp = ‖√D∘Ap‖² + λ‖p‖², not the new residual), and AΔ is accumulated from
    the A p's, so the caller gets A xₜ₊₁ without another pass: k steps cost 2k − 1 passes over A.
    One step is the sketched direction H̃⁻¹g with its optimal length.

    A zero residual (g = 0 at a converged iterate, or ⟨r, Pr⟩ underflowed, as for cosh/sinh whose
    minimiser is x = 0) ends the iteration with step 0 (not the 0/0 = NaN of the plain recursion).
    """

    def ratio(num, den, rz):
        return jnp.where(rz > 0, num / jnp.where(rz > 0, den, 1.0), 0.0)

    def half(p, r, rz, x, Ax):
        Ap = design.matvec(A, p)
        a = ratio(rz, jnp.dot(Ap, D * Ap) + damping * jnp.dot(p, p), rz)
        return x + a * p, Ax + a * Ap, Ap, a

    def body(_, st):
        x, Ax, r, p, rz = st
        x, Ax, Ap, a = half(p, r, rz, x, Ax)
        r = r - a * (design.rmatvec(A, D * Ap) + damping * p)
        z = precond(r)
        rz_new = jnp.dot(r, z)
        return x, Ax, r, z + ratio(rz_new, rz, rz) * p, rz_new

    z = precond(g)
    st = (jnp.zeros_like(g), jnp.zeros(A.shape[0], g.dtype), g, z, jnp.dot(g, z))
    for i in range(steps - 1):  # unrolled (k is small and static): XLA:CPU fuses better than a loop
        st = body(i, st)
    x, Ax, r, p, rz = st
    x, Ax, _, _ = half(p, r, rz, x, Ax)
    return x, Ax


class _Curvature(NamedTuple):
    """The curvature that ``_solve``'s ``transforms.newton`` keeps in its state: ``H`` = H̃ (d, d);
    ``P`` = (H̃ + λI)⁻¹ ("sketch"; None otherwise); ``D`` = B_diag + W² at the current iterate (n,)
    (None for "exact"); ``scores`` the leverage scores the last draw used ("sketch" without
    ``scores``: reused until the next rescore; None otherwise)."""

    H: jax.Array
    P: jax.Array | None
    D: jax.Array | None
    scores: jax.Array | None


def _newton_iteration(
    A,
    b,
    w,
    x0,
    x_star,
    damping,
    tol,
    key,
    base_scores,
    rows,
    *,
    kind,
    method,
    m,
    leverage,
    refine,
    rescore,
    resample,
    line_search,
    measure_eps,
) -> loop.Iteration:
    n, d = A.shape
    unit = (
        design.equilibrator(
            A, math.sqrt(linalg.gram_rounding_size(d, n) * float(jnp.finfo(x0.dtype).eps))
        ).astype(x0.dtype)
        if method != "sketch"
        else None
    )

    def scores_for(D, k):
        k_scores = jax.random.fold_in(jax.random.fold_in(key, k), 1)
        if leverage == "approx":
            return sketch.approx_leverage_scores(k_scores, A, D)
        return sketch.leverage_scores(A, D)

    def inverse(H):
        """(H̃ + λI)⁻¹, formed once per draw: applying it is then a d × d product, not a LAPACK
        call per iteration (on CPU each LAPACK call leaves OpenBLAS's worker threads spinning, which
        slows the passes over A that follow it)."""
        eye = jnp.eye(H.shape[0], dtype=H.dtype)
        chol = jax.scipy.linalg.cho_factor(H + damping * eye, lower=True)
        P = jax.scipy.linalg.cho_solve(chol, eye)
        return 0.5 * (P + P.T)

    def curvature(x, *, parts, k, previous):
        """``hessian_fn`` of the transformation: the ``_Curvature`` at x, from the parts at x
        (computed from the carried z = Ax, so no pass over A for them), the iteration k (the keys
        and the rescore / resample schedule) and the previous curvature (the kept draw and
        scores)."""
        del x
        p = parts
        if method == "exact":
            return _Curvature(hb._hessian_at(p, A, b, w), None, None, None)
        D = hb._b_diag(p, b) + w * w
        if method == "diagonal":
            return _Curvature(design.gram(A, D), None, D, None)
        # Lemma 6.4 needs D > 0; otherwise the sampling weights τ_i D_i are meaningless. NaN marks
        # the run as failed (its iterate turns NaN: status DIVERGED).
        D = jnp.where(jnp.all(D > 0), D, jnp.nan)
        scores = previous.scores

        def draw():
            if base_scores is not None:  # τ_i(A) D_i: β = min D / max D, no pass over A
                new = scores
                H = sketch.sampled_gram(
                    jax.random.fold_in(key, k), A, D, m, scores=base_scores * D, active=rows
                )
            else:
                if rescore == 1:
                    new = scores_for(D, k)
                else:
                    new = jax.lax.cond(k % rescore == 0, lambda: scores_for(D, k), lambda: scores)
                H = sketch.sampled_gram(
                    jax.random.fold_in(key, k), A, D, m, scores=new, active=rows
                )
            return (H, inverse(H)), new

        if resample == 1:
            (H, P), scores = draw()
        else:
            (H, P), scores = jax.lax.cond(
                k % resample == 0, draw, lambda: ((previous.H, previous.P), scores)
            )
        return _Curvature(H, P, D, scores)

    def direction(curv, g, lam):
        """``solve`` of the transformation: (Δ, AΔ) with (H̃ + λI)Δ = g ("exact", "diagonal"),
        Δ = P g ("sketch", ``refine`` = 0), or ``refine`` PCG steps on (AᵀDA + λI)Δ = g
        preconditioned by P. AΔ is the aux output: the loop updates z = Ax from it."""
        if method != "sketch":
            # H was formed from n-term sums over A's rows: its rounding is up to about d·√n·ε·‖H‖
            # (size·ε·‖H‖), and per entry ≈ √n·ε·‖a_i‖‖a_j‖. Judged on H itself, a column j counts
            # only when ‖a_j‖² > size·ε·max‖a‖²: a column in other units (float32, n = 2000, d = 5,
            # ‖a_j‖ = 3e-3 of the others) was dropped as rounding and the run stalled. So the solve
            # runs in units where A's columns have norm 1, (SHS + λS²)(S⁻¹Δ) = Sg with
            # S = design.equilibrator(A, √(size·ε)): a column then counts when
            # ‖a_j‖ > size·ε·max‖a‖, and one below (what rounding leaves of a centred constant
            # column) is still dropped.
            Hl = curv.H + lam * jnp.eye(d, dtype=curv.H.dtype)
            dx = unit * transforms.newton_direction(
                unit[:, None] * Hl * unit[None, :], unit * g, size=linalg.gram_rounding_size(d, n)
            )
            return dx, design.matvec(A, dx)
        if refine == 0:
            dx = curv.P @ g
            return dx, design.matvec(A, dx)
        return _pcg_from_zero(A, curv.D, lam, lambda r: curv.P @ r, g, refine)

    def init_curvature(x):
        zeros_dd, zeros_n = jnp.zeros((d, d), x.dtype), jnp.zeros(n, x.dtype)
        if method == "exact":
            return _Curvature(zeros_dd, None, None, None)
        if method == "diagonal":
            return _Curvature(zeros_dd, None, zeros_n, None)
        return _Curvature(zeros_dd, zeros_dd, zeros_n, jnp.ones(n, x.dtype))

    opt = transforms.newton(
        curvature,
        damping,
        solve=direction,
        init_curvature=init_curvature,
        init_aux=lambda x: jnp.zeros(n, x.dtype),
    )

    def f(z):
        return hb._loss_at(hb.parts_from_z(z, b, kind), w)

    def step(k, state):
        x, z, nstate = state
        p = hb.parts_from_z(z, b, kind)  # z = Ax is carried: no pass over A here
        fx = hb._loss_at(p, w)
        g = hb._gradient_at(p, A, b, w)
        # The Newton step: update = −Δ, with AΔ in the new state's aux.
        update, nstate = opt.update(g, nstate, x, parts=p, k=k, previous=nstate.curvature)
        dx, Adx = -update, nstate.aux
        if line_search:  # trial losses from z − tAΔ: no pass either
            slope = jnp.dot(g, dx)
            # An indefinite H̃ + λI ("exact" outside the convex region) can give an uphill Δ,
            # ⟨∇L, Δ⟩ < 0: no t > 0 then decreases L along −Δ, and the Armijo test (whose bound
            # fx − 1e-4 t ⟨∇L, Δ⟩ then lies above fx) would accept small uphill steps. Reversing Δ
            # makes it a descent direction (a negative-curvature step), at no extra pass over A.
            sign = jnp.where(slope < 0, -1.0, 1.0).astype(x.dtype)
            dx, Adx, slope = sign * dx, sign * Adx, sign * slope
            # Rounding slack: near x* the decrease of a step falls below the rounding of L; the
            # strict test then fails for every t and the search stalls at t = 1e-10 with ‖∇L‖ ≈
            # √(l·eps·L) (1e-7 – 1e-10 measured) instead of reaching tol. A step that raises L by no
            # more than its rounding is accepted.
            # A trial whose loss is NaN (an overflowed exp/cosh/sinh gives inf − inf) is rejected.
            slack = 16 * jnp.finfo(x.dtype).eps * jnp.abs(fx)
            t = transforms.backtracking(lambda t: f(z - t * Adx), fx, slope, slack=slack)
            t_rec = sign * t
        else:
            t = t_rec = jnp.ones((), x.dtype)
        diag = {"loss": fx, "grad_norm": jnp.linalg.norm(g), "step": t_rec}
        if x_star is not None:
            diag["error"] = jnp.linalg.norm(x - x_star)
        if measure_eps:
            H_tilde = nstate.curvature.H
            H_exact = H_tilde if method == "exact" else hb._hessian_at(p, A, b, w)
            eps0 = hb._approximation_error(H_tilde, H_exact)
            # NaN from a finite H̃ and H means "H not positive definite": no ε₀ (inf). A NaN in the
            # history counts as divergence, which a finite but indefinite Hessian is not.
            finite = jnp.all(jnp.isfinite(H_tilde)) & jnp.all(jnp.isfinite(H_exact))
            undefined = jnp.isnan(eps0) & finite
            diag["eps0"] = jnp.where(undefined, jnp.inf, eps0)
        return (x - t * dx, z - t * Adx, nstate), diag

    # Divergence, judged on the iterate: x or z = Ax non-finite, or |Ax| beyond log(largest float),
    # where u = exp/cosh/sinh overflows: the loss there is infinite and no gradient step leads back.
    # (A NaN in any diagnostic counts too, loop.run_until.) Without it a run that jumped that far at
    # its last step would report MAX_ITER with a finite x whose loss is inf.
    overflow = math.log(float(jnp.finfo(x0.dtype).max))

    def diverged(state, diag):
        x, z, _ = state
        return loop.non_finite((x, z)) | (jnp.max(jnp.abs(z)) > overflow)

    def result(res):
        last = res.final
        return NewtonResult(
            n_iter=res.n_iter,
            status=res.status,
            history=res.history,
            loss=last["loss"],
            grad_norm=last["grad_norm"],
            step=last["step"],
            error=last.get("error"),
            eps0=last.get("eps0"),
            x=res.state[0],
        )

    return loop.iteration(
        (x0, design.matvec(A, x0), opt.init(x0)),
        step,
        stop=None if tol is None else (lambda s, diag: diag["grad_norm"] <= tol),
        diverged=diverged,
        invalid=_checks.any_nan(damping, tol, base_scores),
        result=result,
    )


@functools.partial(
    jax.jit,
    static_argnames=(
        "kind",
        "method",
        "max_iter",
        "m",
        "leverage",
        "refine",
        "rescore",
        "resample",
        "line_search",
        "measure_eps",
        "differentiable",
    ),
)
def _solve(A, *args, max_iter, differentiable=False, **static):
    it = _newton_iteration(A, *args, **static)
    return it.result(loop.run(it, max_iter=max_iter, differentiable=differentiable))


__all__ = ["METHODS", "NewtonResult", "newton_solve", "newton_solve_iteration"]
