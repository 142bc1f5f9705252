"""Solvers for supervised dictionary learning: lifted projected gradient descent (LPGD, Algorithm 1)
and the block-coordinate baseline on the factored problem.

LPGD, one iteration from Z = (θ, γ) (both blocks from the same old iterate, fixed step τ):

    θ⁺ = Π_r(Π_Θ(θ − τ∇_θF(θ, γ))),   γ⁺ = γ − τ∇_γF(θ, γ)

with Π_r the rank-r truncated SVD (``lowrank_jax.prox.project_rank``: θ is thin, p ≫ n, so by
default through the eigendecomposition of its n × n Gram matrix; or QR + SVD, or randomized) and Π_Θ
an optional convex projection (default none). It is ``transforms.projected(optax.sgd(τ), Π)``
applied to the pytree (θ, γ); τ, ξ and λ are traced, so ``vmap`` over them sweeps hyperparameters in
one compiled program. Theorem 2.1: when L/μ < 3 and τ ∈ (1/(2μ), 3/(2L)), ‖Zₜ − Z⋆‖ ≤ ρᵗ ‖Z₀ − Z⋆‖
(``lowrank_jax.sdl.model.theory``).

BCD: cyclic block prox-linear steps (Xu & Yin 2013) over W, H, β, γ of the factored objective
G(W, H, β, γ) = F(lift(W, H, β), γ), each block a gradient step of length 1/L_b with L_b the block's
Lipschitz bound recomputed at the current point (every block problem is convex).

Both return a ``Result`` (``status``, ``n_iter``, the final diagnostics,
their ``history``). A run diverges when its iterate or F(Z_t) becomes non-finite, or F(Z_t) exceeds
``GROWTH_LIMIT`` · F(Z_0) (both methods descend at their safe steps); with ``throw=True`` it
then raises ``RuntimeError``, else reports ``Status.DIVERGED``. Each is its iteration run by
``lowrank_jax.loop.run``: ``lpgd_iteration`` and ``bcd_iteration`` give the initial
state and the step, to step by hand, warm-start or stop on a rule of one's own.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from lowrank_jax import _checks, linalg, loop, prox, transforms
from lowrank_jax.precision import full_precision
from lowrank_jax.result import Result, Status, finish
from lowrank_jax.sdl import model as sm
from lowrank_jax.sdl import span as sp


class SolveResult(Result):
    """What ``lpgd`` returns (the ``Result`` core: ``status``, ``n_iter``, ``history``).

    Attributes:
      status: int32 scalar, CONVERGED when ``tol`` stopped the run, MAX_ITER after ``max_iter``
        steps, DIVERGED or INVALID.
      n_iter: int32 scalar, the steps taken.
      loss: float scalar, F(Z_t) at the last step's start (the iterate before the final step).
      step_norm: float scalar, ‖Zₜ₊₁ − Zₜ‖_F of the last step (the gradient mapping times τ).
      history: dict, ``history["loss"]`` and ``history["step_norm"]`` per step, each of length
        ``max_iter``, NaN after ``n_iter``.
      theta: the final θ in the model's layout: ((κ + p), n) for SDL-H, (p, (κ + n)) for SDL-W.
      aux_coef: (q, κ) the final γ.
      lr: float scalar, the step size τ the run took (the safe bound where ``lr=None``).
    """

    loss: jax.Array
    step_norm: jax.Array
    theta: jax.Array
    aux_coef: jax.Array
    lr: jax.Array


# Divergence: a non-finite iterate or objective, or the objective beyond this many times its value
# at the start. LPGD at a step up to the safe bound 1/L̄ and BCD descend (F never rises; Theorem
# 2.1's steps up to 3/(2L) contract); a step far too large multiplies F every iteration long before
# it overflows.
GROWTH_LIMIT = 1e4


def diverged(iterate, loss, loss0) -> jax.Array:
    """The SDL solvers' divergence rule: a non-finite iterate, a non-finite F(Z_t) (data whose
    squares overflow), or F(Z_t) > ``GROWTH_LIMIT`` · F(Z_0).

    Args:
      iterate: the current iterate, a pytree.
      loss: F(Z_t).
      loss0: F(Z_0).

    Returns:
      A boolean scalar.
    """
    return loop.non_finite(iterate) | ~jnp.isfinite(loss) | (loss > GROWTH_LIMIT * loss0)


def _invalid_message(model: str, solver: str) -> str:
    """What ``lpgd``, ``bcd`` and ``lowrank_jax.sdl.fit`` say for a traced
    hyperparameter that breaks its rule (concrete ones are refused by name)."""
    rules = "xi or lam negative or NaN"
    if solver == "lpgd":
        rules += "; lr or tol not positive, or the safe step bound overflowing the dtype"
    return f"SDL-{model}: a traced hyperparameter is out of range ({rules}); the result is NaN"


def _project(project, name: str, args):
    """None, or a function θ → θ keeping the shape and dtype of the argument ``theta0`` (traced
    abstractly, nothing computed: a projection that changes θ's shape failed deep in the loop, one
    that changes its dtype in the scan)."""
    if not callable(project):
        raise ValueError(
            f"{name} must be a function θ -> θ (a convex projection) or None, got {project!r}"
        )
    theta0 = args["theta0"]
    out = jax.eval_shape(project, jax.ShapeDtypeStruct(theta0.shape, theta0.dtype))
    if getattr(out, "shape", None) != theta0.shape or getattr(out, "dtype", None) != theta0.dtype:
        raise ValueError(
            f"{name} must return θ's shape and dtype {theta0.shape} {theta0.dtype} (the "
            f"model's own layout), got {getattr(out, 'shape', out)} {getattr(out, 'dtype', '')}"
        )
    return project


def _span(span, name: str, args) -> bool:
    return resolve_span(span, args["data"], args["svd"], args["project"])


SVD = _checks.Choice("gram", "exact", "randomized")

# What LPGD and its iteration accept (the span choice last: it reads svd, project and data).
_LPGD_ARGS = dict(
    model=sm.MODEL,
    rank=_checks.Convert(sm.rank_for_data),
    svd=SVD,
    theta0=_checks.Convert(sm.start_theta),
    aux_coef0=_checks.Convert(sm.start_aux_coef),
    project=_checks.Convert(_project, optional=True),
    **sm.HYPERS,
    lr=sm.LR,
    tol=_checks.Tol(dtype_of=sm._data_X),
    key=_checks.Key(),
    span=_checks.Convert(_span),
)


def _bound_after_start(data, xi, lam, model, theta0):
    """``model.step_bound`` computed after the start θ₀: its eigenvalues and θ₀'s SVD are both
    batched LAPACK kernels under vmap over X, and side by side on a CPU they can hang jaxlib's
    thread pool (``linalg.after``)."""
    return sm.step_bound(
        eqx.tree_at(lambda d: d.X, data, linalg.after(data.X, theta0)), xi, lam, model
    )


@full_precision
@_checks.validate(
    sm.SAFE_STEP,
    **_LPGD_ARGS,
    max_iter=_checks.Count(),
    differentiable=_checks.Flag(),
    throw=_checks.Flag(),
)
def lpgd(
    theta0,
    aux_coef0,
    data: sm.SDLData,
    xi,
    lam,
    lr,
    rank: int,
    *,
    model: str,
    max_iter: int = 1000,
    tol=1e-6,
    svd: str = "gram",
    project=None,
    key=None,
    span: bool | None = None,
    differentiable: bool = False,
    throw: bool = True,
) -> SolveResult:
    """Lifted projected gradient descent, Algorithm 1 (Lee, Lyu, Yao 2023), from (θ₀, γ₀):

        θ⁺ = Π_r(Π_Θ(θ − τ∇_θF(θ, γ))),   γ⁺ = γ − τ∇_γF(θ, γ)

    with F the lifted objective (``lowrank_jax.sdl.model.objective``), Π_r the best rank-r
    approximation and Π_Θ an optional convex projection.

    Args:
      theta0: θ₀ of ``lowrank_jax.sdl.model.theta_shape`` in this model's layout, finite.
      aux_coef0: γ₀ (q, κ), finite.
      data: the training data, from ``lowrank_jax.sdl.prepare``.
      xi, lam: ξ, λ ≥ 0, scalars (traced under ``vmap``).
      lr: the step size τ > 0, or None for the safe bound 1/L̄ of
        ``lowrank_jax.sdl.model.step_bound`` (as in ``lowrank_jax.sdl.fit``).
      rank: r, 1 ≤ r ≤ min(p, n).
      model: "H" (SDL-H) or "W" (SDL-W).
      max_iter: the step budget, ≥ 1 (default 1000).
      tol: stop after the first step with ‖Zₜ₊₁ − Zₜ‖_F ≤ tol · max(1, ‖Zₜ‖_F), Z = (θ, γ)
        (> 0, default 1e-6); None runs exactly ``max_iter`` steps.
      svd: the rank projection: "gram" (default; θ is thin, so the eigendecomposition of its small
        Gram matrix, ``lowrank_jax.linalg.gram_rank_factors``), "exact" (QR + SVD) or
        "randomized" (``key`` seeds it); each differentiable wherever σᵣ > σᵣ₊₁
        (``lowrank_jax.linalg.best_rank_approximation``).
      project: optional convex projection Π_Θ(θ) → θ applied before the rank projection, a pure
        function of θ in the model's layout returning its shape and dtype.
      key: ``jax.random`` key or integer seed of ``svd="randomized"`` (default key(0)).
      span: take every step after the first in the span of [X, U₁] (``lowrank_jax.sdl.span``:
        the same iterates, O((n + κ)³) per step instead of O(p n²)); needs ``svd="gram"`` and no
        ``project``. Default (None): on when those hold and p ≥ 2(n + κ), where it pays.
      differentiable: with ``tol``, run a masked ``scan`` of ``max_iter`` steps (the steps after
        the stop skipped) instead of a ``while_loop``, so that ``jax.grad`` passes it.
      throw: a run that diverges (a non-finite iterate or F, or F(Z_t) > 10⁴ F(Z_0): a step too
        large for the data) raises ``RuntimeError`` (True, default; also inside ``jit``/``vmap``),
        or only reports ``status == Status.DIVERGED`` (False: a sweep over τ, ξ, λ keeps its other
        points). A traced ξ, λ, τ or ``tol`` outside its range gives ``Status.INVALID`` and a NaN
        (θ, γ).

    Returns:
      ``SolveResult``: ``status`` (CONVERGED when ``tol`` stopped the run, MAX_ITER after
      ``max_iter`` steps), ``n_iter``, the final ``loss`` and ``step_norm``, their ``history``, and
      the final ``theta`` and ``aux_coef``.

    Example:
        ```python
        import numpy as np
        from lowrank_jax import sdl

        rng = np.random.default_rng(0)
        X, y = rng.normal(size=(20, 30)) / 5, np.arange(20) % 2  # X (n, p)
        data = sdl.prepare(X, y, intercept=True)
        theta0, aux_coef0, _ = sdl.initial_point(data, 2, "H", 0)
        out = sdl.lpgd(theta0, aux_coef0, data, 1.0, 0.1, None, 2, model="H")
        print(out)  # SolveResult(status=CONVERGED, n_iter=269, loss=26.38, …)
        ```
    """
    lr_given = lr is not None
    if lr is None:
        lr = _bound_after_start(data, xi, lam, model, theta0)
    res = _lpgd(
        theta0,
        aux_coef0,
        data,
        xi,
        lam,
        lr,
        tol,
        key,
        rank=rank,
        model=model,
        max_iter=max_iter,
        svd=svd,
        project=project,
        span=span,
        differentiable=differentiable,
    )
    return finish(
        res,
        throw,
        diverged=_diverged_message(model, "lpgd", lr_given),
        invalid=_invalid_message(model, "lpgd"),
    )


@full_precision
@_checks.validate(sm.SAFE_STEP, **_LPGD_ARGS)
def lpgd_iteration(
    theta0,
    aux_coef0,
    data: sm.SDLData,
    xi,
    lam,
    lr,
    rank: int,
    *,
    model: str,
    tol=1e-6,
    svd: str = "gram",
    project=None,
    key=None,
    span: bool | None = None,
) -> loop.Iteration:
    """LPGD as an initial state and a step, to run, warm-start or stop as one wishes.

    The iteration that ``lpgd`` runs (same arguments and equations). Its state is
    ``((θ, γ), opt_state)``: θ in the model's layout for SDL-H and transposed for SDL-W
    ((κ + n) × p, the layout the steps take), or with ``span`` its coordinates in the span of
    [X, U₁] (``lowrank_jax.sdl.span``); ``opt_state`` the state of the projected SGD (it holds no
    memory). Its diagnostics are those of ``lpgd``'s history, F(Z_t) (``"loss"``) and
    ‖Zₜ₊₁ − Zₜ‖_F (``"step_norm"``), with ‖Zₜ‖_F (``"size"``) when ``tol`` is given. So

        it = lpgd_iteration(θ₀, γ₀, data, ξ, λ, τ, r, model=m, ...)
        it.result(loop.run(it, max_iter=k))
            == lpgd(θ₀, γ₀, data, ξ, λ, τ, r, model=m, ..., max_iter=k, throw=False)

    With ``span`` the first step, on the dense θ, is taken when the iteration is built: ``it.state``
    is Z₁ and ``it.result`` counts that step (one more in ``n_iter``, its diagnostics first in the
    history), so ``lpgd``'s budget k is ``loop.run(it, max_iter=k − 1, start=1)`` (which
    ``lpgd`` skips when the first step already met ``tol``).

    Args:
      theta0: θ₀ of ``lowrank_jax.sdl.model.theta_shape`` in this model's layout, finite.
      aux_coef0: γ₀ (q, κ), finite.
      data: the training data, from ``lowrank_jax.sdl.prepare``.
      xi, lam: ξ, λ ≥ 0, scalars (may be traced; out of range: ``Status.INVALID``).
      lr: the step size τ > 0, or None for the safe bound 1/L̄ of
        ``lowrank_jax.sdl.model.step_bound``.
      rank: r, 1 ≤ r ≤ min(p, n).
      model: "H" (SDL-H) or "W" (SDL-W).
      tol: ``it.stop`` is ‖Zₜ₊₁ − Zₜ‖_F ≤ tol · max(1, ‖Zₜ‖_F) (> 0, default 1e-6); None: no
        stopping rule.
      svd: the rank projection, "gram" (default), "exact" or "randomized" (as in ``lpgd``).
      project: optional convex projection Π_Θ(θ) → θ applied before the rank projection, a pure
        function of θ in the model's layout returning its shape and dtype.
      key: ``jax.random`` key or integer seed of ``svd="randomized"`` (default key(0)).
      span: the steps after the first in the span of [X, U₁], as in ``lpgd`` (default None: on
        for ``svd="gram"`` without ``project`` when p ≥ 2(n + κ)).

    Returns:
      A ``lowrank_jax.loop.Iteration`` whose ``result`` gives a ``SolveResult`` (no
      exception on failure: read its ``status``, or pass it to ``lowrank_jax.result.finish``).

    Example:
        ```python
        import jax
        import numpy as np
        from lowrank_jax import loop, sdl

        rng = np.random.default_rng(0)
        X, y = rng.normal(size=(20, 30)) / 5, np.arange(20) % 2  # X (n, p)
        data = sdl.prepare(X, y, intercept=True)
        theta0, aux_coef0, _ = sdl.initial_point(data, 2, "H", 0)
        it = sdl.lpgd_iteration(theta0, aux_coef0, data, 1.0, 0.1, None, 2, model="H")
        step, state = jax.jit(it.step), it.state
        for k in range(3):  # steps by hand
            state, diag = step(k, state)
            print(k, diag["loss"])  # F falls
        # as sdl.lpgd: CONVERGED, n_iter=269
        print(it.result(loop.run(it, max_iter=1000)))
        ```
    """
    if lr is None:
        lr = _bound_after_start(data, xi, lam, model, theta0)
    it, _ = _lpgd_iteration(
        theta0,
        aux_coef0,
        data,
        xi,
        lam,
        lr,
        tol,
        key,
        rank=rank,
        model=model,
        svd=svd,
        project=project,
        span=span,
    )
    return it


def _diverged_message(model: str, solver: str, lr_given: bool = False) -> str:
    """What ``lpgd``, ``bcd`` and ``lowrank_jax.sdl.fit`` say when a run diverges: only
    advice that applies to the solver and the step that ran (BCD takes no ``lr``; the safe bound
    cannot be lowered by leaving ``lr=None``). A static string: the step size may be traced."""
    head = f"SDL-{model} diverged (non-finite iterate or F, or F grew 10⁴-fold)"
    rescale = "rescale X (e.g. lowrank_jax.datasets.standardize)"
    if solver == "bcd":
        return (
            f"{head} with solver='bcd', whose per-block steps 1/L_b follow the data's scale: "
            f"{rescale}, or use solver='lpgd'"
        )
    if lr_given:
        return (
            f"{head}: the step size lr is too large for these data; "
            "leave lr=None for the safe bound or lower it"
        )
    return f"{head} at the safe step bound: {rescale}"


@_checks.validate(
    _checks.Rule(
        lambda a: not a["span"] or (a["svd"] == "gram" and a["project"] is None),
        "span=True needs svd='gram' and project=None (a convex projection or another SVD "
        "leaves the span of [X, U₁])",
        uses=("span", "svd", "project"),
    )
)
def resolve_span(span: bool | None, data: sm.SDLData, svd: str = "gram", project=None) -> bool:
    """``lpgd``'s choice of the span steps (``lowrank_jax.sdl.span``).

    Args:
      span: True, False, or None for the default: on for ``svd="gram"`` without ``project`` when
        p ≥ 2(n + κ).
      data: from ``lowrank_jax.sdl.prepare``.
      svd: ``lpgd``'s ``svd``.
      project: ``lpgd``'s ``project``.

    Returns:
      Whether the span steps run; ``span=True`` with another ``svd`` or a ``project`` is a
      ``ValueError``.
    """
    p, n = data.X.shape
    if span is None:
        return svd == "gram" and project is None and p >= 2 * (n + data.kappa)
    return bool(span)


def _stop(tol):
    return lambda s, d: d["step_norm"] <= tol * jnp.maximum(1.0, d["size"])


def _iteration(value_and_grads, theta_sq, opt, params0, tol, loss0, invalid, result):
    """The LPGD iteration shared by the dense and the span representation of θ: steps of ``opt`` =
    ``transforms.projected(optax.sgd(τ), Π)`` from ``params0`` = (θ, γ), recording F,
    ‖Zₜ₊₁ − Zₜ‖ and (with ``tol``) ‖Zₜ‖, ``theta_sq`` giving ‖θ‖²_F in the representation.
    ``loss0`` = F(Z_0) for the divergence rule; ``invalid``: a traced hyperparameter out of range;
    ``result`` reads the ``SolveResult`` from the loop's output."""

    def step(k, state):
        params, opt_state = state
        theta, gamma = params
        f, grads = value_and_grads(theta, gamma)
        upd, opt_state = opt.update(grads, opt_state, params)
        diag = {"loss": f, "step_norm": jnp.sqrt(theta_sq(upd[0]) + jnp.sum(upd[1] * upd[1]))}
        if tol is not None:
            diag["size"] = jnp.sqrt(theta_sq(theta) + jnp.sum(gamma * gamma))
        return (optax.apply_updates(params, upd), opt_state), diag

    return loop.iteration(
        (params0, opt.init(params0)),
        step,
        stop=None if tol is None else _stop(tol),
        diverged=lambda s, d: diverged(s[0], d["loss"], loss0),
        invalid=invalid,
        result=result,
    )


def _solve_result(res: loop.LoopResult, theta, gamma, lr) -> SolveResult:
    keep = ("loss", "step_norm")  # ‖Zₜ‖ (with tol) served the stopping rule only
    return SolveResult(
        n_iter=res.n_iter,
        status=res.status,
        history={k: res.history[k] for k in keep},
        loss=res.final["loss"],
        step_norm=res.final["step_norm"],
        theta=theta,
        aux_coef=gamma,
        lr=lr,
    )


def _lpgd_iteration(
    theta0, gamma0, data, xi, lam, step, tol, key, *, rank, model, svd, project, span
) -> tuple[loop.Iteration, dict | None]:
    """(LPGD's iteration, the diagnostics of its first step when the iteration took it on the dense
    θ before the span steps (``span``), else None)."""
    # Concrete values out of range were refused; traced ones arrive as NaN (_checks.Hyper), and a
    # traced safe bound that overflows is NaN too (model.step_bound).
    invalid = _checks.any_nan(xi, lam, step, tol)
    if span:
        return _lpgd_span_iteration(
            theta0, gamma0, data, xi, lam, step, tol, invalid, rank=rank, model=model
        )
    # SDL-W runs on θᵀ = [Aᵀ ∥ Bᵀ] (contiguous row blocks; Π_r commutes with the transpose).
    XT = data.X.T if model == "W" else None
    if model == "W":
        theta0 = theta0.T
        if project is not None:
            user_project = project
            project = lambda t: user_project(t.T).T  # noqa: E731

    def project_fn(params):
        theta, gamma = params
        theta = theta if project is None else project(theta)
        return prox.project_rank(theta, rank, method=svd, key=key), gamma

    def result(res):
        (theta, gamma), _ = res.state
        return _solve_result(res, theta.T if model == "W" else theta, gamma, step)

    value_and_grads = lambda th, g: sm.value_and_gradients(th, g, data, xi, lam, model, XT)  # noqa: E731
    loss0 = value_and_grads(theta0, gamma0)[0]  # the first step's loss; its gradient is dead code
    it = _iteration(
        value_and_grads,
        lambda th: jnp.sum(th * th),
        transforms.projected(optax.sgd(step), project_fn),
        (theta0, gamma0),
        tol,
        loss0,
        invalid,
        result,
    )
    return it, None


@functools.partial(
    jax.jit,
    static_argnames=("rank", "model", "max_iter", "svd", "project", "span", "differentiable"),
)
def _lpgd(
    theta0,
    gamma0,
    data,
    xi,
    lam,
    step,
    tol,
    key,
    *,
    rank,
    model,
    max_iter,
    svd,
    project,
    span=False,
    differentiable=False,
):
    it, first = _lpgd_iteration(
        theta0,
        gamma0,
        data,
        xi,
        lam,
        step,
        tol,
        key,
        rank=rank,
        model=model,
        svd=svd,
        project=project,
        span=span and max_iter > 1,
    )
    if first is None:
        return it.result(loop.run(it, max_iter=max_iter, differentiable=differentiable))

    # The span iteration took the first step when it was built: the loop runs the others.
    def rest():
        return loop.run(it, max_iter=max_iter - 1, start=1, differentiable=differentiable)

    if tol is None:
        return it.result(rest())

    def none():  # the first step met the tolerance
        blank = jax.tree.map(lambda d: jnp.full((max_iter - 1,), jnp.nan, d.dtype), first)
        return loop.LoopResult(
            it.state,
            blank,
            jnp.asarray(0, jnp.int32),
            jax.tree.map(lambda d: jnp.full_like(d, jnp.nan), first),
            jnp.asarray(Status.CONVERGED, jnp.int32),
        )

    return it.result(jax.lax.cond(_stop(tol)(None, first), none, rest))


def _lpgd_span_iteration(
    theta0, gamma0, data, xi, lam, step, tol, invalid, *, rank, model
) -> tuple[loop.Iteration, dict]:
    """LPGD with the first step on the dense θ, kept as its factors θ₁ = U₁V₁ᵀ, and the rest in the
    span of [X, U₁] (``lowrank_jax.sdl.span``) by the same iteration as the dense solver: the
    iteration starts from Z₁, and its ``result`` counts the first step (its diagnostics, also
    returned, lead the history)."""
    f0, grads0 = sm.value_and_gradients(theta0, gamma0, data, xi, lam, model)
    # the dense step, Π_r by svd="gram"
    U1, V1 = linalg.gram_rank_factors(theta0 - step * grads0[0], rank)
    theta1, gamma1 = U1 @ V1.T, gamma0 - step * grads0[1]
    diag0 = {
        "loss": f0,
        "step_norm": jnp.sqrt(jnp.sum((theta1 - theta0) ** 2) + jnp.sum((gamma1 - gamma0) ** 2)),
    }
    if tol is not None:
        diag0["size"] = jnp.sqrt(jnp.sum(theta0 * theta0) + jnp.sum(gamma0 * gamma0))

    coords1, U = sp.from_first_step(U1, V1, data.kappa, model, data.X.dtype)
    K = sp.basis(data.X, U)
    opt = transforms.projected(
        optax.sgd(step), lambda prm: (sp.project_rank(prm[0], K, rank, model), prm[1])
    )

    def result(res):
        (coords, gamma), _ = res.state
        # The first step's row leads the history; it is the final one when the loop took no step.
        history = jax.tree.map(lambda d, h: jnp.concatenate([d[None], h]), diag0, res.history)
        final = jax.tree.map(lambda d, last: jnp.where(res.n_iter > 0, last, d), diag0, res.final)
        res = res._replace(history=history, final=final, n_iter=res.n_iter + 1)
        return _solve_result(res, sp.expand(coords, data.X, U, model), gamma, step)

    it = _iteration(
        lambda c, g: sp.value_and_gradients(c, g, K, data, xi, lam, model),
        lambda c: sp.coords_sq_norm(c, K, model),
        opt,
        (coords1, gamma1),
        tol,
        f0,
        invalid,
        result,
    )
    return it, diag0


class BCDResult(Result):
    """What ``bcd`` returns (the ``Result`` core: ``status``, ``n_iter``, ``history``).

    Attributes:
      status: int32 scalar, MAX_ITER (BCD has no stopping rule), DIVERGED or INVALID.
      n_iter: int32 scalar, the sweeps run, ``max_iter``.
      history: dict, ``history["loss"]`` per sweep, of length ``max_iter``.
      loss: float scalar, F at the iterate before the last sweep.
      factors: the final (W (p, r), H (r, n), coef (r, κ)), a ``Factors``.
      aux_coef: (q, κ) the final γ.
    """

    loss: jax.Array
    factors: sm.Factors
    aux_coef: jax.Array


@_checks.validate(model=sm.MODEL)
def factored_objective(f: sm.Factors, aux_coef, data, xi, lam, model):
    """The objective BCD decreases: G(W, H, β, γ) = F(lift(W, H, β), γ), eq. (9)/(10) at the
    factors.

    Args:
      f: ``lowrank_jax.sdl.model.Factors`` (W (p, r), H (r, n), coef (r, κ)).
      aux_coef: γ (q, κ).
      data: from ``lowrank_jax.sdl.prepare``.
      xi, lam: ξ, λ ≥ 0.
      model: "H" or "W".

    Returns:
      G, a scalar.
    """
    return sm.objective(sm.lift(f, model), aux_coef, data, xi, lam, model)


# What BCD and its iteration accept.
_BCD_ARGS = dict(
    model=sm.MODEL,
    inner_iters=_checks.Count(),
    factors0=_checks.Convert(sm.start_factors),
    aux_coef0=_checks.Convert(sm.start_aux_coef),
    **sm.HYPERS,
)


@full_precision
@_checks.validate(**_BCD_ARGS, max_iter=_checks.Count(), throw=_checks.Flag())
def bcd(
    factors0: sm.Factors,
    aux_coef0,
    data: sm.SDLData,
    xi,
    lam,
    *,
    model: str,
    max_iter: int = 1000,
    inner_iters: int = 1,
    throw: bool = True,
) -> BCDResult:
    """Cyclic block coordinate descent on the factored problem (W, H, β, γ) (Xu & Yin 2013), the
    paper's baseline: ``inner_iters`` gradient steps per block per sweep, each of length 1/L_b with
    the block Lipschitz bounds (½ bounds the softmax curvature)

        SDL-H  L_W = 2ξ‖H‖²,  L_H = (½ + 2λ)‖β‖² + 2ξ‖W‖²,  L_β = (½ + 2λ)‖H‖²
        SDL-W  L_W = (½‖X‖² + 2λ)‖β‖² + 2ξ‖H‖²,  L_H = 2ξ‖W‖²,  L_β = (½‖X‖² + 2λ)‖W‖²
        both   L_γ = ½‖X_aux‖² + 2λ

    recomputed at the current point.

    Args:
      factors0: the start, ``lowrank_jax.sdl.model.Factors`` (W (p, r), H (r, n),
        coef (r, κ)), finite.
      aux_coef0: γ₀ (q, κ), finite.
      data: the training data, from ``lowrank_jax.sdl.prepare``.
      xi, lam: ξ, λ ≥ 0, scalars (traced under ``vmap``; out of range: ``Status.INVALID``).
      model: "H" (SDL-H) or "W" (SDL-W).
      max_iter: the sweeps, ≥ 1 (default 1000); BCD has no stopping rule and runs them all.
      inner_iters: gradient steps per block per sweep, ≥ 1 (default 1).
      throw: a run that diverges (non-finite factors or γ, or F grown 10⁴-fold: data whose scale
        overflows the block bounds) raises ``RuntimeError`` (True, default; also inside
        ``jit``/``vmap``), or only reports ``status == Status.DIVERGED`` (False).

    Returns:
      ``BCDResult``: ``status`` (MAX_ITER), ``n_iter`` = ``max_iter``, the final ``loss`` and
      its ``history``, ``factors`` and ``aux_coef``.
    """
    res = _bcd(
        factors0, aux_coef0, data, xi, lam, model=model, max_iter=max_iter, inner_iters=inner_iters
    )
    return finish(
        res, throw, diverged=_diverged_message(model, "bcd"), invalid=_invalid_message(model, "bcd")
    )


@full_precision
@_checks.validate(**_BCD_ARGS)
def bcd_iteration(
    factors0: sm.Factors, aux_coef0, data: sm.SDLData, xi, lam, *, model: str, inner_iters: int = 1
) -> loop.Iteration:
    """BCD as an initial state and a sweep, to run, warm-start or stop as one wishes.

    The iteration that ``bcd`` runs (same arguments and equations): its state is
    ``(factors, γ)``, a ``lowrank_jax.sdl.model.Factors`` (W, H, coef) and γ; one step is one
    sweep over the blocks W, H, β, γ; its diagnostics ``{"loss": G}`` at the sweep's start, as in
    ``bcd``'s history. It has no stopping rule (``it.stop`` is None: a run takes its whole
    budget unless given a rule of one's own). So

        it = bcd_iteration(f₀, γ₀, data, ξ, λ, model=m)
        it.result(loop.run(it, max_iter=k))
            == bcd(f₀, γ₀, data, ξ, λ, model=m, max_iter=k, throw=False)

    Args:
      factors0: the start, ``lowrank_jax.sdl.model.Factors`` (W (p, r), H (r, n),
        coef (r, κ)), finite.
      aux_coef0: γ₀ (q, κ), finite.
      data: the training data, from ``lowrank_jax.sdl.prepare``.
      xi, lam: ξ, λ ≥ 0, scalars (may be traced; out of range: ``Status.INVALID``).
      model: "H" (SDL-H) or "W" (SDL-W).
      inner_iters: gradient steps per block per sweep, ≥ 1 (default 1).

    Returns:
      A ``lowrank_jax.loop.Iteration`` whose ``result`` gives a ``BCDResult`` (no
      exception on failure: read its ``status``, or pass it to ``lowrank_jax.result.finish``).

    Example:
        ```python
        import numpy as np
        from lowrank_jax import loop, sdl

        rng = np.random.default_rng(0)
        X, y = rng.normal(size=(20, 30)) / 5, np.arange(20) % 2  # X (n, p)
        data = sdl.prepare(X, y, intercept=True)
        _, aux_coef0, factors0 = sdl.initial_point(data, 2, "H", 0)
        it = sdl.bcd_iteration(factors0, aux_coef0, data, 1.0, 0.1, model="H")
        first = loop.run(it, max_iter=50)  # fifty sweeps
        warm = it._replace(state=first.state)  # ... then fifty more
        out = it.result(loop.run(warm, max_iter=50, start=50))
        # G falls: True
        print(out.loss, out.history["loss"][-1] <= first.history["loss"][-1])
        ```
    """
    return _bcd_iteration(factors0, aux_coef0, data, xi, lam, model=model, inner_iters=inner_iters)


def _bcd_iteration(factors0, gamma0, data, xi, lam, *, model, inner_iters) -> loop.Iteration:
    def sq(*Ms, last=()):
        """‖M‖₂² of each M (an SVD each), one after another and after ``last`` (the previous
        ones): under vmap on a CPU two batched SVDs side by side can hang jaxlib's thread pool
        (linalg.after)."""
        out = list(last)
        for M in Ms:
            M = linalg.after(M, *out[-1:])
            out.append(jnp.linalg.norm(M, 2) ** 2 if M.size else jnp.zeros((), data.X.dtype))
        return out[len(last) :]

    # after the start's factors: under vmap over X the start's SVD of X is batched too
    x_sq, aux_sq = sq(data.X, data.X_aux, last=(factors0.W,))
    tiny = jnp.finfo(data.X.dtype).tiny

    def obj(f, g):
        return factored_objective(f, g, data, xi, lam, model)

    def lipschitz(name, f, last):
        """(L_b of block ``name``, the last norm computed); the norms come after ``last``."""
        if model == "H":
            if name == "H":
                beta_sq, w_sq = sq(f.coef, f.W, last=last)
                return (0.5 + 2 * lam) * beta_sq + 2 * xi * w_sq, w_sq
            (h_sq,) = sq(f.H, last=last)
            return {"W": 2 * xi, "coef": 0.5 + 2 * lam}[name] * h_sq, h_sq
        if name == "W":
            beta_sq, h_sq = sq(f.coef, f.H, last=last)
            return (0.5 * x_sq + 2 * lam) * beta_sq + 2 * xi * h_sq, h_sq
        (w_sq,) = sq(f.W, last=last)
        return {"H": 2 * xi, "coef": 0.5 * x_sq + 2 * lam}[name] * w_sq, w_sq

    def block_step(name, f, g, last):
        for _ in range(inner_iters):
            if name == "gamma":
                if g.size == 0:
                    return f, g, last
                grad = jax.grad(obj, argnums=1)(f, g)
                g = g - grad / (0.5 * aux_sq + 2 * lam + tiny)
            else:
                grad = getattr(jax.grad(obj)(f, g), name)
                L, norm = lipschitz(name, f, last)
                last = (norm,)
                f = f._replace(**{name: getattr(f, name) - grad / (L + tiny)})
        return f, g, last

    def body(k, state):
        f, g = state
        val = obj(f, g)
        last = ()
        for name in ("W", "H", "coef", "gamma"):
            f, g, last = block_step(name, f, g, last)
        return (f, g), {"loss": val}

    def result(res):
        f, g = res.state
        return BCDResult(
            n_iter=res.n_iter,
            status=res.status,
            history=res.history,
            loss=res.final["loss"],
            factors=f,
            aux_coef=g,
        )

    loss0 = obj(factors0, gamma0)
    return loop.iteration(
        (factors0, gamma0),
        body,
        diverged=lambda s, d: diverged(s, d["loss"], loss0),
        invalid=_checks.any_nan(xi, lam),
        result=result,
    )


@functools.partial(jax.jit, static_argnames=("model", "max_iter", "inner_iters"))
def _bcd(factors0, gamma0, data, xi, lam, *, model, max_iter, inner_iters):
    it = _bcd_iteration(factors0, gamma0, data, xi, lam, model=model, inner_iters=inner_iters)
    return it.result(loop.run(it, max_iter=max_iter))
