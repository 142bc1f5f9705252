"""Fitting and prediction for supervised dictionary learning: ``fit`` → ``SDLModel``,
``predict`` / ``predict_proba``, and cross-validation of (ξ, λ) as one ``vmap``ped program.

Every function here takes samples in rows: X (n, p), X_aux (n, q), X_new (n_new, p); the model's
factors keep the paper's layout (W (p, r), H (r, n)).

Prediction (App. A): SDL-W is a forward pass, a = βᵀWᵀx + γᵀx' = Aᵀx + γᵀx'. SDL-H needs a code h
for a new x: ``coding="lstsq"`` takes h = argmin ‖x − Wh‖² (the paper's cheap heuristic), and
``coding="supervised"`` solves eq. (6) — for every candidate label c,

    J_c(x) = min_h ℓ(c, βᵀh + γᵀx') + ξ‖x − Wh‖²
                  (convex in h, solved by damped Newton)

and predicts argmin_c J_c, with probabilities ∝ exp(−J_c) (J_c is the negative log of the joint
likelihood of (x, c) with the code profiled out, up to a constant).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import _checks, linalg, transforms
from lowrank_jax import progress as progress_bar
from lowrank_jax.precision import full_precision
from lowrank_jax.result import Result, Status, finish
from lowrank_jax.sdl import model as sm
from lowrank_jax.sdl import solvers


class SDLModel(Result):
    """A fitted SDL model, and the run that fitted it (the ``Result`` core: ``status``,
    ``n_iter``, ``history``): ``predict`` and ``predict_proba`` take it as is.

    Shapes are those of one fit; a ``vmap``ped fit adds its batch axes in front of every array.

    Attributes:
      status: int32 scalar, CONVERGED when ``tol`` stopped LPGD, MAX_ITER after ``max_iter``
        steps (always for ``solver="bcd"``), DIVERGED or INVALID (fits with ``throw=False``).
      n_iter: int32 scalar, the steps (or sweeps) taken.
      history: dict, ``history["loss"]`` per step (and ``history["step_norm"]`` for LPGD), each
        of length ``max_iter``, NaN after ``n_iter``.
      loss: float scalar, F at the iterate before the last step (or sweep).
      step_norm: float scalar, ‖Zₜ₊₁ − Zₜ‖_F of LPGD's last step; None for
        ``solver="bcd"``.
      W: (p, r) the dictionary, one atom (a feature group) per column.
      H: (r, n_train) the codes of the training samples.
      coef: β (r, κ), the classifier on the codes.
      aux_coef: γ (q, κ), the covariates' coefficients (the last row the intercept when
        ``intercept``).
      theta: the lifted θ in the model's layout: ((κ + p), n_train) for SDL-H,
        (p, (κ + n_train)) for SDL-W.
      xi: float scalar, the weight ξ of the reconstruction term.
      lam: float scalar, the ridge weight λ.
      lr: float scalar, LPGD's step size τ; NaN for ``solver="bcd"``, which takes per-block steps
        1/L_b recomputed every sweep.
      model: "H" or "W".
      intercept: whether γ's last row is the intercept.
      kappa: κ, the number of classes less one (a property).
      rank: r (a property).
    """

    loss: jax.Array
    step_norm: jax.Array | None
    W: jax.Array
    H: jax.Array
    coef: jax.Array
    aux_coef: jax.Array
    theta: jax.Array
    xi: jax.Array
    lam: jax.Array
    lr: jax.Array
    model: str = eqx.field(static=True)
    intercept: bool = eqx.field(static=True)

    @property
    def kappa(self) -> int:
        return self.coef.shape[1]

    @property
    def rank(self) -> int:
        return self.W.shape[1]


_INIT = _checks.Choice("svd", "random")

XI_DEFAULT = 1.0
"""ξ of ``fit``'s default on data whose samples have mean squared norm 1."""
LAM_DEFAULT = 0.01
"""λ of ``fit``'s default on data whose samples have mean squared norm 1."""


def _mean_square_norm(X):
    """s² = ‖X‖²_F / n of X (n, p), samples in rows; 1 for all-zero X."""
    s2 = jnp.sum(jnp.square(X)) / X.shape[0]
    return jnp.where(s2 > 0, s2, jnp.ones_like(s2))


def default_xi(X):
    """``fit``'s default ξ, from the scale of the data: with s² = ‖X‖²_F / n, the mean squared
    norm of a sample,

        ξ = ξ₀ / s²,   ξ₀ = 1 (``XI_DEFAULT``),

    so that ξ‖X − B‖²_F is ξ₀ times the reconstruction error relative to the data's size, whatever
    units X is in (1 for all-zero X).

    Args:
      X: (n, p) training data, samples in rows (may be traced).

    Returns:
      ξ, a scalar of X's dtype.
    """
    X = jnp.asarray(X)
    return (XI_DEFAULT / _mean_square_norm(X)).astype(X.dtype)


def default_lam(X, model: str):
    """``fit``'s default λ, from the scale of the data: with s² = ‖X‖²_F / n,

        SDL-H  λ = λ₀        (A holds the activations themselves),
        SDL-W  λ = λ₀ s²     (A multiplies x: rescaling X by c rescales A by 1/c),

    λ₀ = 0.01 (``LAM_DEFAULT``), a light ridge: larger λ shrinks the activations until the
    unpenalised intercept alone decides, and every sample gets the majority class.

    Args:
      X: (n, p) training data, samples in rows (may be traced).
      model: "H" or "W".

    Returns:
      λ, a scalar of X's dtype.
    """
    X = jnp.asarray(X)
    scale = _mean_square_norm(X) if model == "W" else jnp.ones((), X.dtype)
    return (LAM_DEFAULT * scale).astype(X.dtype)


@full_precision
@_checks.validate(
    model=sm.MODEL, rank=_checks.Convert(sm.rank_for_data), key=_checks.Key(), init=_INIT
)
def initial_point(data: sm.SDLData, rank: int, model: str, key, init: str = "svd"):
    """The starting point of ``fit``: θ₀ = lift(W₀, H₀, β₀) and γ₀ = 0.

    ``init="svd"``: W₀ = U_rΣ_r, H₀ = V_rᵀ from the rank-r SVD of X (p, n). ``init="random"``:
    W₀, H₀ with i.i.d. N(0, s²) entries, s² = ‖X‖_F/√(r(p + n)), so that
    E(‖W₀‖²_F + ‖H₀‖²_F) = ‖X‖_F √(r(p + n)); the product is larger than X, E‖W₀H₀‖_F ≈
    ‖X‖_F √(pn/(p + n)) (3.5x at p, n = 30, 20; 11x at 12625, 128), a start farther from the data
    that the first steps shrink. Both: β₀ ~ U[−1, 1], scaled down so that the initial activations
    lie in [−1, 1].

    Args:
      data: the training data, from ``lowrank_jax.sdl.prepare``.
      rank: r, 1 ≤ r ≤ min(p, n).
      model: "H" or "W" (anything else is a ``ValueError``).
      key: a ``jax.random`` key or an integer seed (None: key(0)); anything else is a
        ``TypeError``.
      init: "svd" (default) or "random".

    Returns:
      (θ₀ in the model's layout, γ₀ (q, κ) of zeros, the ``lowrank_jax.sdl.model.Factors``
      (W₀, H₀, β₀)).
    """
    return _initial_point(data, key, rank=rank, model=model, init=init)


# One program: run op by op, the SVD, draws and products compiled about 40 small programs of their
# own (0.85 s of sdl.fit's first call on Golub).
@functools.partial(jax.jit, static_argnames=("rank", "model", "init"))
def _initial_point(data: sm.SDLData, key, *, rank: int, model: str, init: str):
    p, n = data.X.shape
    k_beta, k_w, k_h = jax.random.split(key, 3)
    dtype = data.X.dtype
    if init == "svd":
        svd = linalg.truncated_svd(data.X, rank)
        W0, H0 = svd.U * svd.s, svd.V.T
    elif init == "random":
        scale = jnp.sqrt(jnp.linalg.norm(data.X) / jnp.sqrt(rank * (p + n)))
        W0 = scale * jax.random.normal(k_w, (p, rank), dtype)
        H0 = scale * jax.random.normal(k_h, (rank, n), dtype)
    beta0 = jax.random.uniform(k_beta, (rank, data.kappa), dtype, -1.0, 1.0)
    # Scale β₀ so that the initial activations stay within ±1: with W₀ = U_rΣ_r, SDL-W's βᵀW₀ᵀx
    # grows like σ₁², which saturates the softmax and stalls the first steps on unnormalised data.
    a0 = beta0.T @ (H0 if model == "H" else W0.T @ data.X)
    beta0 = beta0 / jnp.maximum(1.0, jnp.max(jnp.abs(a0)))
    f0 = sm.Factors(W0, H0, beta0)
    gamma0 = jnp.zeros((data.X_aux.shape[0], data.kappa), dtype)
    return sm.lift(f0, model), gamma0, f0


def _default_tol(tol) -> bool:
    """Whether ``tol`` is None or fit's default 1e-6, the values that ``solver="bcd"`` (no stopping
    rule) accepts."""
    return tol is None or _checks.as_real(tol) == 1e-6


def _fit_rank(rank, name: str, args) -> int:
    """``lowrank_jax.sdl.model.check_rank_for`` against the training data's arguments."""
    n, p = args["X"].shape
    return sm.check_rank_for(rank, args["model"], p, n, args["num_classes"] - 1)


# lr, tol, project and svd are LPGD's; BCD runs its sweeps with its own per-block steps. A traced
# tol or lr with solver="bcd" cannot raise: λ becomes NaN and the fit reports INVALID.
_LPGD_ONLY = _checks.Rule(
    lambda a: (
        a["solver"] == "lpgd"
        or (
            _default_tol(a["tol"])
            and a["project"] is None
            and a["svd"] == "gram"
            and a["lr"] is None
        )
    ),
    "lr, tol, project and svd apply to solver='lpgd' only; solver='bcd' runs `max_iter` "
    "sweeps of the factored problem with its own per-block steps (leave tol at its "
    "default or None)",
    uses=("solver", "tol", "project", "svd", "lr"),
    poison="lam",
)


@full_precision
@_checks.validate(
    _LPGD_ONLY,
    **sm.DATA,
    model=sm.MODEL,
    rank=_checks.Convert(_fit_rank),
    solver=_checks.Choice("lpgd", "bcd"),
    xi=_checks.Hyper(ndim=0, dtype_of="X", default=lambda a: default_xi(a["X"])),
    lam=_checks.Hyper(ndim=0, dtype_of="X", default=lambda a: default_lam(a["X"], a["model"])),
    lr=_checks.Hyper(ndim=0, low=0, low_open=True, dtype_of="X", optional=True),
    max_iter=_checks.Count(),
    svd=solvers.SVD,
    key=_checks.Key(),
    init=_INIT,
    throw=_checks.Flag(),
)
def fit(
    X,
    y,
    rank: int,
    *,
    model: str = "H",
    xi=None,
    lam=None,
    lr=None,
    max_iter: int = 1000,
    tol=1e-6,
    X_aux=None,
    intercept: bool = True,
    key=None,
    init: str = "svd",
    solver: str = "lpgd",
    svd: str = "gram",
    num_classes: int | None = None,
    project=None,
    differentiable: bool = False,
    throw: bool = True,
) -> SDLModel:
    """Fit SDL-H (``model="H"``) or SDL-W (``"W"``) of rank r by LPGD (supervised dictionary
    learning lifted to low-rank estimation; Lee, Lyu, Yao 2023, Algorithm 1). With the lifted
    θ = [A ∥ B] ((κ + p) × n, SDL-H) or [A, B] (p × (κ + n), SDL-W) of rank ≤ r and the covariates'
    coefficients γ,

        F(θ, γ) = Σ_s ℓ(y_s, a_s) + ξ‖X − B‖²_F + λ(‖A‖²_F + ‖γ‖²_F),
        θ ← Π_r(θ − τ∇_θF),   γ ← γ − τ∇_γF,

    ℓ the multinomial negative log-likelihood with class 0 as reference, a_s the activations
    (SDL-H: A[:, s] + γᵀx'_s; SDL-W: Aᵀx_s + γᵀx'_s) and Π_r the best rank-r approximation (the SDL
    guide has both models in full).

    The fit is the solver's run on ``prepare(X, y, X_aux, intercept=…)`` from
    ``initial_point``: to step it by hand, build ``lowrank_jax.sdl.lpgd_iteration`` (or
    ``lowrank_jax.sdl.bcd_iteration``) on those.

    Args:
      X: (n, p) data, samples in rows; finite.
      y: (n,) labels in {0, …, κ} (0 = reference class).
      rank: r, 1 ≤ r ≤ min(p, n).
      model: "H" (SDL-H, default) or "W" (SDL-W).
      xi, lam: ξ, λ ≥ 0 of F (traced under ``vmap``). None (default) sets them from the scale of
        X, s² = ‖X‖²_F / n the mean squared norm of a sample: ξ = 1/s² (``default_xi``) and
        λ = 0.01 for SDL-H, 0.01·s² for SDL-W (``default_lam``) — ξ = 1, λ = 0.01 on data
        rescaled to s = 1, and the same objective for X and cX up to the rescaling of B (and of
        SDL-W's A). The fitted model records the values used (``xi``, ``lam``).
      lr: the step size τ > 0 (default None: the safe bound of
        ``lowrank_jax.sdl.model.step_bound``); LPGD only, the model records NaN for
        ``solver="bcd"``. With None (and no ``project``, and for SDL-W no ``X_aux``) LPGD solves
        the same problem on X/s, s² = ‖X‖²_F/n: F(θ; X, ξ, λ) = F(θ′; X/s, ξs², λ′) with
        B′ = B/s, λ′ = λ (SDL-H) or A′ = sA, λ′ = λ/s² (SDL-W), and the model is mapped back to
        X. The safe step on unscaled high-dimensional X is so small that the relative step
        tolerance stopped LPGD after a few steps, far from the optimum (z-scored ALL: 0.84 and 0.78
        test accuracy against 0.98 and 1.00); ``lr`` and ``step_norm`` are then the rescaled
        problem's.
      max_iter: the iteration cap, ≥ 1 (default 1000).
      tol: LPGD's relative step tolerance (> 0, default 1e-6): it stops after the first step with
        ‖Zₜ₊₁ − Zₜ‖_F ≤ tol · max(1, ‖Zₜ‖_F), Z = (θ, γ); ``n_iter`` counts the steps taken
        and ``history`` is NaN after them. ``tol=None`` runs exactly ``max_iter`` steps. With a
        ``tol`` the loop is a ``while_loop``, which ``jax.grad`` cannot pass: set
        ``differentiable=True`` for a masked ``scan`` instead, or pass ``tol=None``.
      X_aux: optional (n, q) covariates, one row per sample (an empty (n, 0) matrix is the same as
        None).
      intercept: append an unpenalised constant covariate (default True; beyond the paper, whose
        model has none; the authors' code adds one).
      key: ``jax.random`` key or integer seed (default key(0)) of the random parts of the start
        (β₀; W₀ and H₀ too with ``init="random"``) and of ``svd="randomized"``.
      init: "svd" (default) or "random" (``initial_point``).
      solver: "lpgd" (Algorithm 1, default) or "bcd" (the block-coordinate baseline, from the same
        start). BCD runs exactly ``max_iter`` sweeps with its own per-block steps: ``lr``,
        ``project`` and ``svd`` are LPGD-only and refused with it, and ``tol`` must stay at its
        default or None.
      svd: the rank projection, "gram" (default), "exact" or "randomized"
        (``lowrank_jax.sdl.solvers.lpgd``).
      num_classes: κ + 1 (default max(y) + 1, and then every label 0, …, max(y) must occur: labels
        {0, 5} raise a ``ValueError`` naming the empty classes 1–4; pass num_classes to allow them).
      project: optional convex projection Π_Θ(θ) → θ applied before the rank projection, a pure
        hashable function (static under ``jit``) of θ in this model's layout, (κ + p, n) for SDL-H
        and (p, κ + n) for SDL-W.
      differentiable: with ``tol``, a masked ``scan`` instead of a ``while_loop`` (default False).
      throw: a fit that diverges (a non-finite iterate or F, or F grown 10⁴-fold: a step too large,
        or data whose scale BCD's block steps cannot follow) raises ``RuntimeError`` (True, default;
        also inside ``jit``/``vmap``) or only reports ``status == Status.DIVERGED`` (False: a sweep
        over ξ, λ, τ keeps its other points). A traced ξ, λ, τ or ``tol`` outside its range gives
        ``Status.INVALID`` and NaN parameters.

    Returns:
      ``SDLModel``, the fitted model and its run: ``status`` (CONVERGED when ``tol`` stopped
      LPGD, MAX_ITER after ``max_iter`` steps), ``n_iter``, the final ``loss`` (and ``step_norm``
      for LPGD) with their ``history``, θ, the factors W (p, r), H (r, n), ``coef`` β (r, κ) and
      ``aux_coef`` γ (q, κ); ``predict`` and ``predict_proba`` apply it to new samples.

    Example:
        ```python
        import numpy as np
        from lowrank_jax import sdl

        rng = np.random.default_rng(0)
        # 2 feature groups, 80 samples; the label follows group 1
        W, H = rng.normal(size=(50, 2)), rng.normal(size=(2, 80))
        y = (H[0] > 0).astype(int)
        # X (n, p): samples in rows
        X = ((W @ H + 0.1 * rng.normal(size=(50, 80))) / np.sqrt(50)).T
        m = sdl.fit(X[:60], y[:60], rank=2, model="H", xi=1.0, lam=0.01)
        print(m)  # SDLModel(status=MAX_ITER, n_iter=1000, loss=13.75, W=f32[50,2], …)
        print(np.mean(sdl.predict(m, X[60:]) == y[60:]))  # held-out accuracy: 1.0
        ```
    """
    lr_given = lr is not None
    # LPGD at its safe step solves the equivalent problem on X/s (see the docstring), mapped back.
    s, xi_run, lam_run, X_run = None, xi, lam, X
    if solver == "lpgd" and not lr_given and project is None and (model == "H" or X_aux is None):
        s = jnp.sqrt(_mean_square_norm(X)).astype(X.dtype)
        X_run, xi_run, lam_run = X / s, xi * s**2, (lam if model == "H" else lam / s**2)
        overflow = _checks.when_concrete(
            lambda a, b: not (np.isfinite(a) and np.isfinite(b)), xi_run, lam_run
        )
        if overflow:
            # ξs² or λ/s² past the dtype: the problem as given, whose safe step says so by name
            s, xi_run, lam_run, X_run = None, xi, lam, X
    X = X_run
    data = sm.bundle(X, y, X_aux, intercept, num_classes)
    theta0, gamma0, f0 = initial_point(data, rank, model, key, init)
    # The solvers report; the model is checked once, below. The safe bound is passed on as
    # lr=None, so that the message does not advise leaving lr at None.
    if solver == "lpgd":
        res = solvers.lpgd(
            theta0,
            gamma0,
            data,
            xi_run,
            lam_run,
            lr if lr_given else None,
            rank,
            model=model,
            max_iter=max_iter,
            tol=tol,
            svd=svd,
            project=project,
            key=key,
            differentiable=differentiable,
            throw=False,
        )
        # the step LPGD took: the safe bound (checked by lpgd) where lr is None
        theta, gamma, step_norm, lr = res.theta, res.aux_coef, res.step_norm, res.lr
        if s is not None:  # θ of X/s to θ of X: B = s·B′, and SDL-W's A = A′/s
            A, B = sm.split(theta, model, data.kappa)
            theta = sm.join(A if model == "H" else A / s, B * s, model)
        f = sm.factors(theta, rank, model, data.kappa)
    else:
        res = solvers.bcd(f0, gamma0, data, xi, lam, model=model, max_iter=max_iter, throw=False)
        f, gamma, step_norm = res.factors, res.aux_coef, None
        theta = sm.lift(f, model)
        # BCD has no single step (1/L_b per block, recomputed every sweep): NaN in the model
        lr = jnp.asarray(jnp.nan, data.X.dtype)
    m = SDLModel(
        n_iter=res.n_iter,
        status=res.status,
        history=res.history,
        loss=res.loss,
        step_norm=step_norm,
        W=f.W,
        H=f.H,
        coef=f.coef,
        aux_coef=gamma,
        theta=theta,
        xi=xi,
        lam=lam,
        lr=lr,
        model=model,
        intercept=intercept,
    )
    return finish(
        m,
        throw,
        diverged=solvers._diverged_message(model, solver, lr_given),
        invalid=solvers._invalid_message(model, solver),
    )


def _x_new(X_new, name: str, args) -> jax.Array:
    """New samples (n_new, p) in rows with the features of the fitted model ``m``, in its dtype."""
    m = args["m"]
    X_new = _checks.as_matrix(X_new, name).astype(m.W.dtype)
    p = m.W.shape[0]
    if X_new.shape[1] != p:
        raise ValueError(
            f"{name} must have p = {p} columns (features, as the training X), shape (n_new, {p}); "
            f"got shape {tuple(X_new.shape)}"
        )
    return X_new


def _x_aux_new(X_aux_new, name: str, args) -> jax.Array:
    """The new samples' covariates checked against the fitted model ``m`` (one row per row of
    ``X_new``, its q covariates), as the (q, n_new) block of the paper's layout with the intercept's
    row."""
    m, n_new = args["m"], args["X_new"].shape[0]
    q_user = m.aux_coef.shape[0] - int(m.intercept)
    # None and an empty (n, 0) matrix both give q = 0
    Xa, _ = sm.aux_matrix(X_aux_new, n_new, m.intercept, args["X_new"].dtype, name)
    q_given = Xa.shape[0] - int(m.intercept)
    if q_given == 0 and q_user > 0:
        raise ValueError(
            f"{name} is required: the model was fitted with q = {q_user} auxiliary covariates "
            f"(X_aux); pass their values for the new samples, shape ({n_new}, {q_user})"
        )
    if q_given > 0 and q_user == 0:
        raise ValueError(
            f"{name} must be None: the model was fitted without auxiliary covariates (X_aux)"
        )
    if q_given != q_user:
        raise ValueError(f"{name} must have {q_user} columns (covariates), got {q_given}")
    return Xa


_CODING = _checks.Choice("lstsq", "supervised")
_SUPERVISED_IS_H = _checks.Rule(  # static: the coding and the model's kind
    lambda a: a["coding"] != "supervised" or a["m"].model == "H",
    "supervised coding is for SDL-H; SDL-W predicts by a forward pass",
    uses=(),
)
# At ξ = 0 the code h has no reconstruction term: every class's cost has infimum 0 and no minimiser.
_XI_MESSAGE = (
    "supervised coding needs ξ > 0: at ξ = 0 min_h ℓ(c, βᵀh) is 0 for every class c "
    "(use coding='lstsq')"
)
_SUPERVISED_XI = _checks.Rule(
    lambda a: a["coding"] != "supervised" or jnp.all(a["m"].xi > 0), _XI_MESSAGE, uses=("m",)
)


# The new samples of a fitted model m: X_new (n_new, p), X_aux_new (n_new, q) or None.
def _fitted(m, name: str, args) -> SDLModel:
    if not isinstance(m, SDLModel):
        raise TypeError(
            f"{name} must be a fitted model (what sdl.fit returns), got {type(m).__name__}"
        )
    return m


_NEW = {
    "m": _checks.Convert(_fitted),
    "X_new": _checks.Convert(_x_new),
    "X_aux_new": _checks.Convert(_x_aux_new),
}


@full_precision
@_checks.validate(
    _SUPERVISED_IS_H,
    _checks.Rule(  # static
        lambda a: a["coding"] == "lstsq",
        "activations use the least-squares code; supervised coding has one code per class "
        "(use predict_proba(..., coding='supervised'))",
        uses=(),
    ),
    coding=_CODING,
    **_NEW,
)
def activations(m: SDLModel, X_new, X_aux_new=None, *, coding: str = "lstsq"):
    """The activations of new samples: SDL-W a = Aᵀx + γᵀx' (a forward pass), SDL-H a = βᵀh + γᵀx'
    with the least-squares code h = argmin_h ‖x − Wh‖ of each sample x.

    Args:
      m: a fitted ``SDLModel``.
      X_new: (n_new, p) new samples, in rows.
      X_aux_new: their (n_new, q) covariates, required when the model was fitted with some.
      coding: "lstsq" only: SDL-H's supervised code is a per-class minimisation with no single
        activation (use ``predict_proba``).

    Returns:
      a (n_new, κ), one row per sample (class 0, the reference, has activation 0).
    """
    return _activations(m, X_new.T, X_aux_new).T


def _activations(m: SDLModel, X, Xa):
    """a (κ, n) of the samples X (p, n) with covariates Xa (q, n), the paper's layout."""
    if m.model == "W":
        return sm.split(m.theta, "W", m.kappa)[0].T @ X + m.aux_coef.T @ Xa
    h = jnp.linalg.lstsq(m.W, X)[0]
    return m.coef.T @ h + m.aux_coef.T @ Xa


_PREDICT = (_SUPERVISED_IS_H, _SUPERVISED_XI)


@full_precision
@_checks.validate(*_PREDICT, coding=_CODING, **_NEW, throw=_checks.Flag())
def predict_proba(m: SDLModel, X_new, X_aux_new=None, *, coding: str = "lstsq", throw: bool = True):
    """Class probabilities of new samples: the softmax of the activations (with class 0's ≡ 0), or
    for SDL-H's supervised coding the softmax of −J with

        J_c(x) = min_h ℓ(c, βᵀh + γᵀx') + ξ‖x − Wh‖²,

    the cost of class c with a code chosen for that class (the paper's prediction for SDL-H,
    eq. 6).

    Args:
      m: a fitted ``SDLModel``.
      X_new: (n_new, p) new samples, in rows; computed in the model's dtype (a float32 model casts
        float64 data down: fit in float64 for float64 predictions).
      X_aux_new: their (n_new, q) covariates, required when the model was fitted with some.
      coding: "lstsq" (default; the activations of ``activations``, SDL-H coding each sample
        by least squares) or "supervised" (SDL-H with ξ > 0 only).
      throw: with a model whose fit diverged or was invalid (``m.status`` DIVERGED or INVALID: a
        fit with ``throw=False``), or probabilities that come out non-finite (overflow in the model
        or in supervised coding's costs), raise ``RuntimeError`` (True, default; eagerly and inside
        ``jit``/``vmap``) or return them as they are (False).

    Returns:
      (n_new, κ + 1) probabilities, column 0 the reference class.
    """
    return _proba(m, X_new.T, X_aux_new, coding, throw)


def _proba(m: SDLModel, X_new, Xa, coding: str, throw: bool):
    """``predict_proba`` of checked samples X_new (p, n_new), covariates Xa (q, n_new)."""
    if coding == "supervised":
        J = _supervised_costs(m.W, m.coef, m.aux_coef, m.xi, X_new, Xa)
        P = jax.nn.softmax(-J, axis=1)
        overflow = (
            "supervised coding gave non-finite class costs (overflow in the data or the model): "
            "use coding='lstsq'"
        )
    else:
        P = sm.class_probs(_activations(m, X_new, Xa)).T
        overflow = (
            "non-finite class probabilities: the activations overflow (rescale X_new, or refit)"
        )
    if not throw:
        return P
    return _refuse_failed(P, m.status, overflow)


@eqx.filter_jit
def _refuse_failed(P, status, overflow):
    """``P``, or an error (eagerly and in the caller's ``jit``/``vmap``): first for a model whose
    fit failed, then for non-finite probabilities (message ``overflow``)."""
    status = jnp.asarray(status)
    failed = (status == Status.DIVERGED) | (status == Status.INVALID)
    bad = failed | ~jnp.all(jnp.isfinite(P))
    fit_failed = (
        "the model's fit diverged or was invalid (status DIVERGED or INVALID, fitted with "
        "throw=False): refit it (a lower lr, rescaled X) before predicting"
    )
    return eqx.branched_error_if(P, bad, jnp.where(failed, 0, 1), [fit_failed, overflow])


@full_precision
@_checks.validate(*_PREDICT, coding=_CODING, **_NEW, throw=_checks.Flag())
def predict(m: SDLModel, X_new, X_aux_new=None, *, coding: str = "lstsq", throw: bool = True):
    """Predicted labels of new samples: the argmax over classes of ``predict_proba``.

    Args:
      m: a fitted ``SDLModel``.
      X_new: (n_new, p) new samples, in rows.
      X_aux_new: their (n_new, q) covariates, required when the model was fitted with some.
      coding: "lstsq" (default) or "supervised" (``predict_proba``).
      throw: as in ``predict_proba``.

    Returns:
      (n_new,) integer labels in {0, …, κ}.
    """
    return jnp.argmax(_proba(m, X_new.T, X_aux_new, coding, throw), axis=1)


@functools.partial(jax.jit, static_argnames=("newton_iters",))
def _supervised_costs(W, beta, gamma, xi, X, Xa, newton_iters: int = 30):
    """J (n, κ + 1): J[s, c] = min_h ℓ(c, βᵀh + γᵀx'_s) + ξ‖x_s − Wh‖² − ξ‖x_s − W h_ls‖² (damped
    Newton from the least-squares code h_ls; the problem is strongly convex when W has full column
    rank and ξ > 0). For a rank-deficient W (all-zero data fit W = 0, or a rank above the data's)
    the code is the minimum-norm least-squares one plus a move within the row space of W only:
    h = h_ls + Q z, Q spanning range(WᵀW) (eigenvalues above r·√p·ε·max, the rounding of the p-term
    sums that form WᵀW: ``linalg.gram_rounding_size``). Along null(W) the reconstruction term is
    flat, so a free h would send βᵀh to ±∞ and every class's cost to its infimum 0 (uniform
    probabilities, whatever the data); with W = 0 the code stays h_ls = 0. With the cut-off
    r·ε·max of a matrix known to working precision, WᵀW's rounding-size eigenvalue along null(W)
    (up to 7·ε·max for p = 7129, r = 3) counted as range, and those costs fell to 1e-10.

    The Newton iterations run in the r-dimensional code space: the least-squares residual
    x − W h_ls is orthogonal to the range of W, so
    ‖x − Wh‖² = ‖x − W h_ls‖² + (h − h_ls)ᵀ WᵀW (h − h_ls) exactly, and only the r × r Gram matrix
    WᵀW enters the loop (no product with the p × r W).
    The per-sample constant ξ‖x_s − W h_ls‖² is left out: it changes neither the argmin over c nor
    the softmax, and kept in, it is as large as ξ‖x‖² (here ~1e8 for raw intensities), so float32
    rounded the O(1) differences between the classes away and every class read alike."""
    kappa = beta.shape[1]
    h_ls = jnp.linalg.lstsq(W, X)[0]  # (r, n)
    G = W.T @ W  # (r, r)
    offset = gamma.T @ Xa  # (κ, n)
    mu, V = jnp.linalg.eigh(G)
    # range(G); zero columns elsewhere. G is formed from p-term sums: rounding up to r·√p·ε·max|μ|
    Q = V * linalg.above_rounding(mu, linalg.gram_rounding_size(W.shape[1], W.shape[0]))
    beta_q, G_q = Q.T @ beta, Q.T @ G @ Q  # the problem in z, h = h0 + Q z

    def cost(z, c, h0, off):
        a = beta.T @ h0 + beta_q.T @ z + off
        ell = sm.log_partition(a[:, None])[0] - jnp.where(c > 0, a[jnp.maximum(c - 1, 0)], 0.0)
        return ell + xi * (z @ G_q @ z)

    def solve_one(c, h0, off):
        f = functools.partial(cost, c=c, h0=h0, off=off)

        def newton(_, z):
            g = jax.grad(f)(z)
            # minimum norm (a pseudo-inverse where the Hessian is singular): no move in Q's zero
            # columns
            dz = transforms.newton_direction(jax.hessian(f)(z), g)
            t = transforms.backtracking(lambda t: f(z - t * dz), f(z), jnp.dot(g, dz), t_min=1e-8)
            return z - t * dz

        z = jax.lax.fori_loop(0, newton_iters, newton, jnp.zeros_like(h0))
        return f(z)

    per_sample = jax.vmap(
        lambda h0, off: jax.vmap(lambda c: solve_one(c, h0, off))(jnp.arange(kappa + 1))
    )
    return per_sample(h_ls.T, offset.T)


def _as_numpy(x):
    return None if x is None else np.asarray(x)


class CrossValidation(NamedTuple):
    """What ``cross_validate`` returns; it unpacks as ``accuracy, best``.

    Attributes:
      accuracy: NumPy array (len(xis), len(lams)), the mean validation accuracy over the folds (NaN
        where a fit diverged or was invalid on any fold).
      best: (ξ, λ) as Python floats, the pair of highest accuracy."""

    accuracy: np.ndarray
    best: tuple[float, float]


def _grid(values, name: str, args=None) -> np.ndarray:
    """A 1-D grid of ξ or λ ≥ 0, checked as given (strings, complex, 2-D refused by name) and
    returned as float64 NumPy values, so that the best pair comes back as given, not rounded."""
    _checks.as_hyper(values, name, ndim=1)
    return np.asarray(values, float)


_CV_RULES = (
    _checks.Rule(  # shapes only
        lambda a: a["xis"].size > 0 and a["lams"].size > 0,
        "xis and lams need at least one value each, got {xis.size} and {lams.size}",
        uses=(),
    ),
    _checks.Rule(  # static: the coding and the model
        lambda a: a["coding"] != "supervised" or a["model"] == "H",
        "supervised coding is for SDL-H; SDL-W predicts by a forward pass",
        uses=(),
    ),
    _checks.Rule(
        lambda a: a["coding"] != "supervised" or np.all(a["xis"] > 0), _XI_MESSAGE, uses=()
    ),
    _checks.Rule(  # shapes only
        lambda a: a["folds"] <= a["y"].size,
        "folds = {folds} is more than the {y.size} samples: every fold needs a validation sample",
        uses=(),
    ),
)


@_checks.host_function("sdl.cross_validate")
@full_precision
@_checks.validate(
    *_CV_RULES,
    X=_checks.Convert(lambda v, name, args: np.asarray(_checks.as_matrix(v, name))),
    y=_checks.Convert(
        lambda v, name, args: sm.check_labels(v, args["X"].shape[0], args["num_classes"])
    ),
    model=sm.MODEL,
    # its range depends on the fold size, checked (with a hint) per fold
    rank=_checks.Convert(lambda v, name, args: sm.as_rank(v)),
    max_iter=_checks.Count(),
    X_aux=_checks.Convert(
        lambda v, name, args: _as_numpy(sm._rows_aux(v, name, args)), optional=True
    ),
    num_classes=_checks.Convert(lambda v, name, args: sm.infer_num_classes(args["y"], v)),
    xis=_checks.Convert(_grid),
    lams=_checks.Convert(_grid),
    coding=_CODING,
    folds=_checks.Count(minimum=2),
    intercept=_checks.Flag(),
    key=_checks.Key(),
    progress=_checks.Flag(),
)
def cross_validate(
    X,
    y,
    rank: int,
    xis,
    lams,
    *,
    model: str = "H",
    folds: int = 5,
    max_iter: int = 300,
    X_aux=None,
    intercept: bool = True,
    coding: str = "lstsq",
    key=None,
    num_classes: int | None = None,
    progress: bool = False,
):
    """Mean validation accuracy over stratified folds for every (ξ, λ) in xis × lams.

    Each fold fits the whole grid in one compiled, ``vmap``ped LPGD program (no Python loop over
    the grid), with the step size τ of ``lowrank_jax.sdl.model.step_bound`` for each point.

    Args:
      X: (n, p) data, samples in rows.
      y: (n,) labels in {0, …, κ}.
      rank: r, at most min(p, n_train) of every fold's training part.
      xis, lams: 1-D grids of ξ and λ ≥ 0 (every pair is fitted).
      model: "H" (default) or "W".
      folds: number of stratified folds (≥ 2, at most the number of samples; default 5).
      max_iter: LPGD steps of each fit (default 300; no tolerance: every fit runs them all).
      X_aux, intercept: as in ``fit`` (X_aux (n, q), one row per sample).
      coding: how the validation samples are predicted (``predict_proba``);
        ``"supervised"`` needs every ξ > 0.
      key: ``jax.random`` key or integer seed (default key(0)). The fits start from
        ``initial_point`` with ``key`` itself, as ``fit`` with that key does, the same for
        every fold and grid point; the folds are shuffled with ``jax.random.fold_in(key, 1)``
        (``stratified_folds`` with that key gives them).
      num_classes: as in ``fit`` (by default max(y) + 1, every class present in ``y``; a fold's
        training part may then still miss a rare class, which is allowed there).
      progress: show a tqdm bar of the folds done.

    Returns:
      ``CrossValidation`` ``(accuracy (len(xis), len(lams)), best (ξ, λ))`` — the mean
      validation accuracy over the folds, and the pair that maximises it. A grid point whose fit
      fails on any fold (``Status.DIVERGED`` or ``INVALID``: the fits run with ``throw=False``) has
      accuracy NaN and is never the best; if every point fails, ``RuntimeError``.

    Example:
        ```python
        import numpy as np
        from lowrank_jax import sdl

        rng = np.random.default_rng(0)
        W, H = rng.normal(size=(50, 2)), rng.normal(size=(2, 80))
        y = (H[0] > 0).astype(int)
        X = ((W @ H + 0.1 * rng.normal(size=(50, 80))) / np.sqrt(50)).T   # (n, p)
        acc, (xi, lam) = sdl.cross_validate(X, y, 2, [0.1, 1.0], [1e-3, 1e-2], folds=3)
        # acc (2, 2): the mean validation accuracy per (ξ, λ); then the best pair
        print(acc.shape, xi, lam)
        ```
    """
    y_np = y
    grid_xi, grid_lam = (g.ravel() for g in np.meshgrid(xis, lams, indexing="ij"))
    acc = np.zeros(grid_xi.size)
    bar = progress_bar.bar(
        folds, f"cross-validation ({grid_xi.size} (ξ, λ) pairs)", "fold", progress
    )
    try:
        for train, val in stratified_folds(y_np, folds, key=jax.random.fold_in(key, 1)):
            data = sm.prepare(
                X[train],
                y_np[train],
                None if X_aux is None else X_aux[train],
                intercept=intercept,
                num_classes=num_classes,
            )
            p, n = data.X.shape
            try:
                rank_f = sm.check_rank_for(rank, model, p, n, data.kappa)
            except ValueError as err:
                raise ValueError(
                    f"{err}: with {folds} folds each fit sees {data.X.shape[1]} of the {y_np.size} "
                    "samples (use fewer folds or a lower rank)"
                ) from None
            theta0, gamma0, _ = initial_point(data, rank_f, model, key)
            X_val = jnp.asarray(X[val].T, data.X.dtype)  # (p, n_val), the paper's layout
            Xa_val, _ = sm.aux_matrix(
                None if X_aux is None else X_aux[val],
                len(val),
                intercept,
                data.X.dtype,
            )
            preds, ok = _grid_predict(
                theta0,
                gamma0,
                data,
                jnp.asarray(grid_xi, data.X.dtype),
                jnp.asarray(grid_lam, data.X.dtype),
                X_val,
                Xa_val,
                rank=rank_f,
                model=model,
                max_iter=max_iter,
                coding=coding,
                span=solvers.resolve_span(None, data),
            )
            fold_acc = np.mean(np.asarray(preds) == y_np[val][None, :], axis=1)
            acc += np.where(np.asarray(ok), fold_acc, np.nan) / folds
            bar.update()
    finally:
        bar.close()
    acc = acc.reshape(xis.size, lams.size)
    if np.all(np.isnan(acc)):
        raise RuntimeError(
            "every (ξ, λ) fit diverged (non-finite or exploding iterates): rescale X (e.g. "
            "datasets.standardize) or lower ξ, λ"
        )
    i, j = np.unravel_index(np.nanargmax(acc), acc.shape)
    return CrossValidation(acc, (float(xis[i]), float(lams[j])))


@functools.partial(jax.jit, static_argnames=("rank", "model", "max_iter", "coding", "span"))
def _grid_predict(
    theta0, gamma0, data, xis, lams, X_val, Xa_val, *, rank, model, max_iter, coding, span
):
    """Predicted labels (grid, n_val) of the validation samples X_val (p, n_val), and for each grid
    point whether its fit ran without failing (a diverged fit reports, ``throw=False``, and the
    other points go on)."""

    def one(xi, lam):
        res = solvers.lpgd(
            theta0,
            gamma0,
            data,
            xi,
            lam,
            None,
            rank,
            model=model,
            max_iter=max_iter,
            tol=None,
            span=span,
            throw=False,
        )
        ok = (res.status != Status.DIVERGED) & (res.status != Status.INVALID)
        if model == "W":
            a = sm.split(res.theta, "W", data.kappa)[0].T @ X_val + res.aux_coef.T @ Xa_val
            return jnp.argmax(sm.class_probs(a), axis=0), ok
        f = sm.factors(res.theta, rank, model, data.kappa)
        if coding == "supervised":
            J = _supervised_costs(f.W, f.coef, res.aux_coef, xi, X_val, Xa_val)
            return jnp.argmin(J, axis=1), ok & jnp.all(jnp.isfinite(J))
        h = jnp.linalg.lstsq(f.W, X_val)[0]
        return jnp.argmax(sm.class_probs(f.coef.T @ h + res.aux_coef.T @ Xa_val), axis=0), ok

    return jax.vmap(one)(xis, lams)


@_checks.host_function("sdl.stratified_folds")
@_checks.validate(
    y=_checks.Convert(lambda v, name, args: np.asarray(v)),
    folds=_checks.Count(minimum=2),
    key=_checks.Key(),
)
def stratified_folds(y, folds: int, *, key=None):
    """Stratified k-fold split: each class's samples, shuffled, are dealt to the folds in turn, each
    class starting where the previous one stopped, so that every class is spread over the folds to
    within one sample and the fold sizes differ by at most one.

    Args:
      y: (n,) labels.
      folds: the number of folds, ≥ 2.
      key: ``jax.random`` key or integer seed of the shuffle (default key(0)).

    Returns:
      A list of ``folds`` pairs (train_idx, val_idx) of index arrays; the validation parts
      partition 0, …, n − 1.
    """
    rng = np.random.default_rng(np.asarray(jax.random.key_data(key)))
    assign = np.empty(y.size, int)
    start = 0
    for c in np.unique(y):
        idx = rng.permutation(np.nonzero(y == c)[0])
        assign[idx] = (np.arange(idx.size) + start) % folds
        start += idx.size
    return [(np.nonzero(assign != f)[0], np.nonzero(assign == f)[0]) for f in range(folds)]
