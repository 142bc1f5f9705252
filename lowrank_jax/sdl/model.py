"""Supervised dictionary learning (SDL) lifted to low-rank estimation: data, objective, gradients,
factor recovery and the constants of the convergence theorem.

Shapes follow the paper (columns are samples): X (p, n) data, X_aux (q, n) auxiliary covariates,
labels y ∈ {0, …, κ} with class 0 the reference of the softmax (κ = 1: binary logistic). Y (κ, n) is
the one-hot matrix with an all-zero column for class 0. For an activation a_s ∈ ℝ^κ,

    ℓ(y, a) = log(1 + Σ_c e^{a_c}) − a_y,   a_0 ≡ 0          (eq. 90; the main text drops the "1 +")

and P (κ, n) holds P[j, s] = e^{a_sj}/(1 + Σ_c e^{a_sc}). The two models and their lifted variables
(eqs. 9–10), both minimised over rank(θ) ≤ r:

    SDL-H  a_s = A[:, s] + γᵀx'_s,  θ = [A ∥ B] ((κ+p) × n),  A = βᵀH,  B = WH
    SDL-W  a_s = Aᵀx_s + γᵀx'_s,    θ = [A, B]  (p × (κ+n)),  A = Wβ,   B = WH

    F(θ, γ) = Σ_s ℓ(y_s, a_s) + ξ‖X − B‖²_F + λ(‖A‖²_F + ‖γ‖²_F)       (a sum over samples)

with gradients (eqs. 100, 107 — eq. (11) of the paper swaps the two models' labels)

    SDL-H  ∇_A F = (P − Y) + 2λA          SDL-W  ∇_A F = X(P − Y)ᵀ + 2λA
    both   ∇_B F = 2ξ(B − X),             ∇_γ F = X_aux(P − Y)ᵀ + 2λγ.

An intercept, when requested, is a row of ones appended to X_aux whose γ row is not penalised.
Reference: Lee, Lyu, Yao, "Interpretable feature extraction by supervised dictionary learning"
(ICML 2023 CompBio workshop; "Exponentially convergent algorithms for supervised matrix
factorization", NeurIPS 2023).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import _checks, linalg

MODELS = ("H", "W")


class SDLData(eqx.Module):
    """Validated training data: X (p, n), X_aux (q, n) (q may be 0), Y (κ, n) one-hot without class
    0, ``penalized`` (q,) 1 for covariates whose γ row is penalised, 0 for the intercept."""

    X: jax.Array
    X_aux: jax.Array
    Y: jax.Array
    penalized: jax.Array

    @property
    def kappa(self) -> int:
        return self.Y.shape[0]


def check_labels(y, n: int | None = None, num_classes: int | None = None) -> np.ndarray:
    """Labels as an int array in {0, …, κ} (samples are X's columns):
    :func:`lowrank_jax._checks.class_labels`."""
    return _checks.class_labels(
        y, n, num_classes, what="X has n = {n} columns (samples are columns)"
    )


def one_hot(y, kappa: int, dtype=jnp.float32) -> jax.Array:
    """Y (κ, n): Y[c − 1, s] = 1 if y_s = c ≥ 1; class 0 is the all-zero column.

    ``y`` (n,) holds labels in {0, …, κ} and ``kappa`` = κ ≥ 1. A label outside that range (κ + 1 or
    more, negative, non-integer) has no row and was read as the reference class 0 (an all-zero
    column); it is a ``ValueError`` naming the range (:func:`check_labels`). Traced labels (inside
    ``jit``) are checked for their shape only."""
    kappa = _checks.check_positive_int(kappa, "kappa")
    if _checks.is_concrete(y):
        y = check_labels(y, num_classes=kappa + 1)
    elif jnp.ndim(y) != 1:
        raise ValueError(f"y must be a 1-D array of labels, got shape {tuple(jnp.shape(y))}")
    return (jnp.asarray(y)[None, :] == jnp.arange(1, kappa + 1)[:, None]).astype(dtype)


def infer_num_classes(y_np: np.ndarray, num_classes: int | None = None) -> int:
    """κ + 1, the number of classes: ``num_classes`` when given (classes without a sample are then
    allowed, e.g. a training fold that misses a rare class), else max(y) + 1 — and then every class
    0, …, max(y) must occur, because a gap such as labels {0, 5} would silently create four empty
    classes with their own logits. Raises ``ValueError`` naming the missing classes."""
    if num_classes is not None:
        return int(num_classes)  # validated by check_labels
    k = int(y_np.max()) + 1 if y_np.size else 0
    missing = np.setdiff1d(np.arange(k), y_np)
    if missing.size:
        shown = ", ".join(map(str, missing[:10])) + (", …" if missing.size > 10 else "")
        raise ValueError(
            f"labels must use every class 0, …, max(y) = {k - 1}, but no sample has label "
            f"{shown} ({missing.size} of {k} classes empty); relabel to consecutive integers, or "
            f"pass num_classes={k} to fit empty classes on purpose"
        )
    return k


def prepare(
    X, y, X_aux=None, *, intercept: bool = False, num_classes: int | None = None
) -> SDLData:
    """Validate and bundle training data: X (p, n), samples in columns; y (n,) labels in {0, …, κ};
    X_aux optional (q, n) covariates. κ = num_classes − 1; by default κ = max(y), and then every
    label 0, …, max(y) must occur (:func:`infer_num_classes`). ``intercept``: append a ones row to
    the covariates whose coefficient is not penalised. Its default here is False, the paper's model,
    while :func:`lowrank_jax.sdl.fit` defaults to True (the authors' code): pass it explicitly when
    you build the data for :func:`lowrank_jax.sdl.lpgd` or :func:`lowrank_jax.sdl.bcd` to match
    a ``fit``."""
    X = _checks.as_matrix(X, "X")
    _checks.check_scale(X, "X")
    p, n = X.shape
    y_np = check_labels(y, n, num_classes)
    kappa = infer_num_classes(y_np, num_classes) - 1
    if kappa < 1:
        raise ValueError("need at least two classes (labels 0 and 1)")
    X_aux, pen = aux_matrix(X_aux, n, intercept, X.dtype)
    return SDLData(X, X_aux, one_hot(y_np, kappa, X.dtype), pen)


def given_aux(X_aux, n: int, name: str = "X_aux"):
    """A user's covariates checked: None, or a finite (q, n) matrix, one column per sample, at a
    scale whose sums of squares its dtype holds (:func:`lowrank_jax._checks.check_scale`, the check
    X gets: float32 covariates of 1e20 made ‖X_aux‖²₂ overflow, the step bound 0 or NaN and the fit
    diverge "at the safe step bound"). q = 0 (an empty (0, n) matrix) is the same as None, and
    returned as None: every solver, the step bound and prediction handle a γ with no rows."""
    if X_aux is None:
        return None
    X_aux = _checks.as_matrix(X_aux, name, min_rows=0)
    if X_aux.shape[1] != n:
        raise ValueError(
            f"{name} must have one column per sample, shape (q, {n}), got shape "
            f"{tuple(X_aux.shape)}"
        )
    if X_aux.shape[0] == 0:
        return None
    _checks.check_scale(X_aux, name)
    return X_aux


def aux_matrix(X_aux, n: int, intercept: bool, dtype, name: str = "X_aux"):
    """(X_aux with a ones row appended when ``intercept``, penalty mask); ``X_aux`` as
    :func:`given_aux` takes it (None or an empty (0, n) matrix for q = 0)."""
    intercept = _checks.check_flag(intercept, "intercept")
    X_aux = given_aux(X_aux, n, name)
    X_aux = jnp.zeros((0, n), dtype) if X_aux is None else X_aux.astype(dtype)
    pen = jnp.ones(X_aux.shape[0], dtype)
    if intercept:
        X_aux = jnp.concatenate([X_aux, jnp.ones((1, n), dtype)])
        pen = jnp.concatenate([pen, jnp.zeros(1, dtype)])
    return X_aux, pen


def theta_shape(model: str, p: int, n: int, kappa: int) -> tuple[int, int]:
    """Shape of the lifted θ: (κ + p, n) for SDL-H, θ = [βᵀH; WH]; (p, κ + n) for SDL-W,
    θ = [Wβ, WH]."""
    _check_model(model)
    return (kappa + p, n) if model == "H" else (p, kappa + n)


def split(theta, model: str, kappa: int):
    """(A, B) blocks of the lifted θ."""
    return (theta[:kappa], theta[kappa:]) if model == "H" else (theta[:, :kappa], theta[:, kappa:])


def join(A, B, model: str):
    """θ from its blocks, the inverse of :func:`split`: [A; B] stacked by rows
    (SDL-H, A (κ, n), B (p, n)) or [A, B] side by side (SDL-W, A (p, κ), B (p, n))."""
    return jnp.concatenate([A, B], axis=0 if model == "H" else 1)


def activations(theta, gamma, X, X_aux, model: str, kappa: int):
    """a (κ, n) of every sample."""
    A, _ = split(theta, model, kappa)
    lin = A if model == "H" else A.T @ X
    return lin + gamma.T @ X_aux


def log_partition(a):
    """log(1 + Σ_c e^{a_c}) per column of a (κ, n), stable."""
    zero = jnp.zeros((1,) + a.shape[1:], a.dtype)
    return jax.nn.logsumexp(jnp.concatenate([zero, a]), axis=0)


def nll(a, Y):
    """Σ_s ℓ(y_s, a_s) = Σ_s log(1 + Σ_c e^{a_cs}) − ⟨Y_s, a_s⟩ for activations a (κ, n) and one-hot
    labels Y (κ, n) (class 0, the reference, is the all-zero column); a scalar."""
    return jnp.sum(log_partition(a)) - jnp.sum(Y * a)


def class_probs(a):
    """(κ + 1, n) class probabilities, row 0 the reference class."""
    zero = jnp.zeros((1,) + a.shape[1:], a.dtype)
    return jax.nn.softmax(jnp.concatenate([zero, a]), axis=0)


def objective(theta, gamma, data: SDLData, xi, lam, model: str):
    """F(θ, γ) = Σ_s ℓ(y_s, a_s) + ξ‖X − B‖²_F + λ(‖A‖²_F + ‖γ_pen‖²_F), a scalar, eq. (9) (SDL-H)
    or (10) (SDL-W), for θ = [A ∥ B] (κ + p, n) or [A, B] (p, κ + n), γ (q, κ) and ``data`` from
    :func:`prepare`; γ_pen leaves the intercept's row out. Raises ``ValueError`` for a ``model``
    other than "H" or "W"."""
    _check_model(model)
    A, B = split(theta, model, data.kappa)
    a = activations(theta, gamma, data.X, data.X_aux, model, data.kappa)
    g_pen = gamma * data.penalized[:, None]
    return (
        nll(a, data.Y)
        + xi * jnp.sum((data.X - B) ** 2)
        + lam * (jnp.sum(A * A) + jnp.sum(g_pen * g_pen))
    )


def value_and_gradients(theta, gamma, data: SDLData, xi, lam, model: str, XT=None):
    """(F, (∇_θ F, ∇_γ F)) in closed form (module docstring), sharing the activations and X − B.

    With model "W" and ``XT`` = Xᵀ, θ is taken in the transposed layout θᵀ = [Aᵀ ∥ Bᵀ] ((κ+n) × p)
    and its gradient is returned in that layout too: the blocks are then contiguous rows, and the
    solver's SDL-W step is ~20 % faster on CPU than with column blocks.
    Raises ``ValueError`` for a ``model`` other than "H" or "W".
    """
    _check_model(model)
    k = data.kappa
    rows = model == "H" or XT is not None
    A, B = (theta[:k], theta[k:]) if rows else (theta[:, :k], theta[:, k:])
    if model == "H":
        a = A
    else:
        a = A @ data.X if rows else A.T @ data.X
    fit, R, g_gamma = label_terms(a, gamma, data, lam)
    D = B - (data.X if XT is None else XT)
    value = fit + xi * jnp.sum(D * D) + lam * jnp.sum(A * A)
    if model == "H":
        gA = R
    else:
        gA = R @ XT if rows else data.X @ R.T
    g_theta = jnp.concatenate([gA + 2 * lam * A, 2 * xi * D], axis=0 if rows else 1)
    return value, (g_theta, g_gamma)


def label_terms(lin, gamma, data: SDLData, lam):
    """The γ- and label-dependent part of F from the θ part of the activations, ``lin`` (κ, n)
    (A for SDL-H, AᵀX for SDL-W): (Σ_s ℓ(y_s, a_s) + λ‖γ_pen‖², R = P − Y (κ, n), ∇_γF) with
    a = lin + γᵀX_aux. Shared by the dense step and the one in :mod:`lowrank_jax.sdl.span`."""
    a = lin + gamma.T @ data.X_aux
    R = class_probs(a)[1:] - data.Y
    g_pen = gamma * data.penalized[:, None]
    return nll(a, data.Y) + lam * jnp.sum(g_pen * g_pen), R, data.X_aux @ R.T + 2 * lam * g_pen


def gradients(theta, gamma, data: SDLData, xi, lam, model: str):
    """Closed-form (∇_θ F, ∇_γ F), shaped like θ ((κ + p, n) for SDL-H, (p, κ + n) for SDL-W) and
    γ (q, κ), of the F of :func:`objective` (module docstring; eqs. 100 and 107, which eq. 11 of the
    paper prints with the two models' labels swapped). Raises ``ValueError`` for a ``model`` other
    than "H" or "W"."""
    return value_and_gradients(theta, gamma, data, xi, lam, model)[1]


class Factors(NamedTuple):
    """The factored SDL parameters behind a lifted θ: W (p, r) the dictionary, H (r, n) the codes,
    β (r, κ) the classifier, with A = βᵀH (SDL-H) or Wβ (SDL-W) and B = WH."""

    W: jax.Array
    H: jax.Array
    beta: jax.Array


def factors(theta, rank: int, model: str, kappa: int) -> Factors:
    """Algorithm 1's last lines: θ = UΣVᵀ (rank r);
    SDL-H: [βᵀ ∥ W] = UΣ^{1/2}, H = Σ^{1/2}Vᵀ;   SDL-W: W = U, [β, H] = ΣVᵀ.
    Unique up to an invertible r × r transform (the paper's conventions fix it). ``rank`` and
    ``kappa`` are integers (static).
    Raises ``ValueError`` for a ``model`` other than "H" or "W"."""
    _check_model(model)
    return _factors(
        theta, rank=as_rank(rank), model=model, kappa=_checks.check_positive_int(kappa, "kappa")
    )


# one program, not one per op
@functools.partial(jax.jit, static_argnames=("rank", "model", "kappa"))
def _factors(theta, *, rank: int, model: str, kappa: int) -> Factors:
    svd = linalg.truncated_svd(theta, rank)
    if model == "H":
        L, R = linalg.balanced_factors(svd)
        return Factors(L[kappa:], R.T, L[:kappa].T)
    SVt = svd.s[:, None] * svd.V.T
    return Factors(svd.U, SVt[:, kappa:], SVt[:, :kappa])


def lift(f: Factors, model: str) -> jax.Array:
    """θ from factors: [βᵀH ∥ WH] (SDL-H) or [Wβ, WH] (SDL-W). Raises ``ValueError`` for a ``model``
    other than "H" or "W"."""
    _check_model(model)
    A = f.beta.T @ f.H if model == "H" else f.W @ f.beta
    return join(A, f.W @ f.H, model)


def step_bound(data: SDLData, xi, lam, model: str):
    """A safe fixed step 1/L̄ for the gradient step on F (traced in ξ, λ): L̄ bounds the Hessian of
    F, max(2ξ, 2λ + α⁺‖Φ‖²₂) (SDL-W, Φ = [X ∥ X_aux]) or max(2ξ, 2λ + α⁺(1 + ‖X_aux‖²₂)) (SDL-H),
    with α⁺ ≥ λ_max(∇²ℓ): ¼ for binary labels, ½ for the softmax (:func:`softmax_curvature`).

    L̄ = 0 (F flat: X = 0, no covariates, ξ = λ = 0) gives step 1, any step being safe. A non-finite
    L̄ (‖Φ‖²₂ or 2ξ overflowing the dtype) gives NaN: not 0 (1/inf, which made LPGD stand still) nor
    1 (a NaN bound failed ``bound > 0`` and read as flat). :func:`check_step` refuses it by name.
    Raises ``ValueError`` for a ``model`` other than "H" or "W"."""
    _check_model(model)
    if model == "W":
        s = _spectral_sq(jnp.concatenate([data.X, data.X_aux]))
    else:
        s = 1.0 + (_spectral_sq(data.X_aux) if data.X_aux.shape[0] else 0.0)
    alpha_plus = 0.25 if data.kappa == 1 else 0.5
    bound = jnp.maximum(2 * xi, 2 * lam + alpha_plus * s)
    finite = jnp.isfinite(bound)
    step = 1.0 / jnp.where(finite & (bound > 0), bound, 1.0)
    return jnp.where(finite, jnp.where(bound > 0, step, 1.0), jnp.nan)


def _spectral_sq(M):
    small = M @ M.T if M.shape[0] <= M.shape[1] else M.T @ M
    return jnp.linalg.eigvalsh(small)[-1]


class Theory(NamedTuple):
    """Theorem 2.1 / E.2 quantities: μ, L of eq. (16), whether L/μ < 3, the admissible step interval
    (1/(2μ), 3/(2L)), the step 2/(μ + L) that minimises ρ and ρ(τ) = 2·max(|1 − τμ|, |1 − τL|) at
    that step (Theorem E.2's ρ; Theorem 2.1 prints 2(1 − τμ), App. I drops the 2)."""

    mu: float
    L: float
    condition: float
    holds: bool
    step_interval: tuple[float, float]
    best_step: float
    rho: float
    delta_minus: float
    delta_plus: float
    alpha_minus: float
    alpha_plus: float

    def rate(self, step: float) -> float:
        """ρ(τ) = 2·max(|1 − τμ|, |1 − τL|), Theorem E.2's contraction factor at step τ (below 1
        inside ``step_interval`` when ``holds``; ``rho`` is its value at ``best_step``)."""
        return _contraction(self.mu, self.L, float(step))


def _contraction(mu: float, L: float, step: float) -> float:
    """ρ(τ) = 2·max(|1 − τμ|, |1 − τL|) (Theorem E.2)."""
    return 2 * max(abs(1 - step * mu), abs(1 - step * L))


def softmax_curvature(M: float, kappa: int) -> tuple[float, float]:
    """Valid bounds (α⁻, α⁺) on the eigenvalues of Ḧ(a) = diag(g) − ggᵀ over ‖a‖ ≤ M (h = exp).

    Remark D.3's printed values are not bounds: for κ = 1 its α⁺ = e^M/(1 + e^M)² is the *smallest*
    curvature σ(M)σ(−M) (the largest is ¼, at a = 0) and its α⁻ = 1/(1 + e^M) exceeds σ(M)σ(−M).
    Used here instead:
      κ = 1: α⁻ = e^M/(1 + e^M)², α⁺ = ¼ (exact);
      κ ≥ 2: α⁻ = g₀,min · g_min with g₀,min = 1/(1 + κe^M),
                                       g_min = e^{−M}/(1 + e^{−M} + (κ − 1)e^M)
             (vᵀḦv = Σg_jv_j² − (Σg_jv_j)² ≥ g₀ Σ g_jv_j² by Cauchy–Schwarz), and α⁺ = ½
             (the variance of v_Y for a categorical Y and ‖v‖ = 1 is at most ½).
    """
    em = math.exp(-M)  # written with e^{−M} only: no overflow for large M
    if kappa == 1:
        return em / (1 + em) ** 2, 0.25
    return (em / (em + kappa)) * (em * em / (em + em * em + (kappa - 1))), 0.5


def softmax_curvature_printed(M: float, kappa: int) -> tuple[float, float]:
    """Remark D.3's (α⁻, α⁺) as printed (kept to document the erratum; not valid bounds)."""
    em, ep = math.exp(-M), math.exp(M)
    return em / (1 + em + (kappa - 1) * ep), ep * (1 + 2 * (kappa - 1) * ep) / (
        1 + ep + (kappa - 1) * em
    ) ** 2


@_checks.host_function("sdl.theory")
def theory(
    X, xi: float, lam: float, *, model: str, kappa: int = 1, X_aux=None, M: float = 1.0
) -> Theory:
    """μ, L of eq. (16) from the data. δ± are the extreme eigenvalues of n⁻¹ΦΦᵀ (Assumption C.2;
    δ⁻ = 0 whenever p + q > n, as for every microarray — Assumption C.2 fails there, yet the
    constants below can still certify L/μ < 3 through the ridge: μ ≥ min(2ξ, 2λ)), λ⁺ that of
    n⁻¹X_aux X_auxᵀ, α± from :func:`softmax_curvature` with the activation bound M (valid bounds;
    Remark D.3's printed α± are not, see there). Every row of ``X_aux`` counts as penalised here; an
    intercept row is not penalised by the model, so leave it out of ``X_aux`` for these constants.

        SDL-W  μ = min(2ξ, 2λ + nδ⁻α⁻),  L = max(2ξ, 2λ + nδ⁺α⁺)
        SDL-H  μ = min(2ξ, 2λ + α⁻),     L = max(2ξ, 2λ + α⁺)                 (no covariates, q = 0)
        SDL-H  μ = min(2ξ, 2λ),          L = max(2ξ, 2λ + α⁺(1 + λ⁺n))        (q ≥ 1; erratum)

    Erratum (SDL-H with covariates): eq. (16) prints μ = min(2ξ, 2λ + α⁻) and
    L = max(2ξ, 2λ + α⁺λ⁺n, 2λ + α⁺) for every q. But SDL-H's activations a_s = A[:, s] + γᵀx'_s
    map (A, γ) → a with a null space: along A = −γᵀX_aux (rank one, so inside the rank-r set) the
    label term is flat and F curves by 2λ only; and the map's largest squared singular value is
    1 + ‖X_aux‖²₂ = 1 + λ⁺n, not max(1, λ⁺n). Both printed constants overstate the conditioning,
    so ``holds`` could say True where the theorem's L/μ < 3 fails. With α⁺ = ¼ (κ = 1) both
    corrected constants are the extreme Hessian eigenvalues of F at a = 0 (tested).
    """
    _check_model(model)
    for v, name in ((xi, "xi"), (lam, "lam"), (M, "M")):
        _checks.as_hyper(v, name, ndim=0)  # finite, >= 0; the value itself stays float64
    xi, lam, M = float(xi), float(lam), float(M)
    kappa = _checks.check_positive_int(kappa, "kappa")
    X = np.asarray(_checks.as_matrix(X, "X"), np.float64)
    n = X.shape[1]
    X_aux = given_aux(X_aux, n)  # (q, n): one column per sample, as X
    Xa = np.zeros((0, n)) if X_aux is None else np.asarray(X_aux, np.float64)
    Phi = np.concatenate([X, Xa])
    ev = (
        np.linalg.eigvalsh(Phi @ Phi.T / n)
        if Phi.shape[0] <= n
        else np.linalg.eigvalsh(Phi.T @ Phi / n)
    )
    d_plus = float(ev[-1])
    d_minus = float(ev[0]) if Phi.shape[0] <= n else 0.0
    lam_plus = float(np.linalg.eigvalsh(Xa @ Xa.T / n)[-1]) if Xa.shape[0] else 0.0
    a_minus, a_plus = softmax_curvature(M, kappa)
    if model == "W":
        mu, L = (
            min(2 * xi, 2 * lam + n * d_minus * a_minus),
            max(2 * xi, 2 * lam + n * d_plus * a_plus),
        )
    elif Xa.shape[0]:
        mu, L = min(2 * xi, 2 * lam), max(2 * xi, 2 * lam + a_plus * (1 + lam_plus * n))
    else:
        mu, L = min(2 * xi, 2 * lam + a_minus), max(2 * xi, 2 * lam + a_plus)
    if L == 0:  # SDL-W only (SDL-H's L ≥ α⁺ > 0): ξ = λ = 0 and Φ = 0
        raise ValueError(
            "theory: L = 0, so eq. (16) gives no condition number, step or rate: "
            "with xi = lam = 0 and an all-zero X (and X_aux) SDL-W's F is constant; "
            "give xi > 0 or lam > 0"
        )
    cond = L / mu if mu > 0 else math.inf
    best = 2.0 / (mu + L)
    return Theory(
        mu,
        L,
        cond,
        cond < 3,
        (1 / (2 * mu) if mu > 0 else math.inf, 1.5 / L),
        best,
        _contraction(mu, L, best),
        d_minus,
        d_plus,
        a_minus,
        a_plus,
    )


def _check_model(model):
    if model not in MODELS:
        raise ValueError(
            f"model must be 'H' (SDL-H, feature-based) or 'W' (SDL-W, filter-based), got {model!r}"
        )


def as_rank(rank) -> int:
    """``rank`` as a Python int — a Python or NumPy integer or a concrete 0-d integer array
    (``np.array(2)``, ``jnp.int32(2)``) — or ``ValueError`` naming rank; the range is
    :func:`check_rank_for`'s."""
    as_integer = _checks.as_int(rank)
    if as_integer is None:
        raise ValueError(f"rank must be an integer, got {rank!r}")
    return as_integer


def check_rank_for(rank, model: str, p: int, n: int, kappa: int) -> int:
    """``rank`` as a Python int with 1 ≤ r ≤ min(p, n) for X of shape (p, n), or a ``ValueError``
    naming the bound and θ's shape (:func:`theta_shape`)."""
    rank = as_rank(rank)
    shape = theta_shape(model, p, n, kappa)
    limit = min(p, n)
    if not 1 <= rank <= limit:
        raise ValueError(
            f"rank must satisfy 1 <= rank <= min(p, n) = {limit} (θ has shape {shape}), got {rank}"
        )
    return rank


def check_hypers(data: SDLData, xi, lam):
    """(ξ, λ) for the solvers, in X's dtype: finite scalars ≥ 0 (a negative ξ or λ makes F unbounded
    below). Tracers (a ``vmap`` over ξ, λ) are checked for shape only."""
    return (
        _checks.as_hyper(xi, "xi", ndim=0, dtype=data.X.dtype),
        _checks.as_hyper(lam, "lam", ndim=0, dtype=data.X.dtype),
    )


def check_step(step, data: SDLData, xi, lam, model: str):
    """LPGD's τ in X's dtype: a finite positive scalar, or for ``step=None`` the safe
    :func:`step_bound` at (ξ, λ) (checked ones, :func:`check_hypers`). A concrete bound that is not
    finite (L̄ overflows X's dtype) is a ``ValueError``; a traced one (a ``vmap`` over ξ, λ) stays
    NaN at that point, whose run then reports ``Status.INVALID``."""
    if step is None:
        with _checks.eager_if_concrete(
            data, xi, lam
        ):  # checkable when closed over in a caller's jit
            bound = step_bound(data, xi, lam, model)
        if _checks.is_concrete(bound) and not np.isfinite(float(bound)):
            raise ValueError(
                "step=None: the safe step 1/L̄ is undefined, L̄ = max(2ξ, 2λ + α⁺‖Φ‖²₂) overflows "
                f"{data.X.dtype} (ξ = {float(xi):.3g}, λ = {float(lam):.3g}, X and X_aux as "
                "given): rescale X or X_aux, lower ξ or λ, or compute in float64"
            )
        return bound
    return _checks.as_hyper(step, "step", ndim=0, positive=True, dtype=data.X.dtype)


def check_start(theta0, gamma0, data: SDLData, model: str):
    """LPGD's start (θ₀, γ₀): θ₀ finite of :func:`theta_shape` (the model's layout; the other
    model's layout is named as such), γ₀ finite of shape (q, κ). Returns them as floating JAX
    arrays."""
    p, n = data.X.shape
    expected = theta_shape(model, p, n, data.kappa)
    theta0 = _checks.as_matrix(theta0, "theta0")
    if tuple(theta0.shape) != expected:
        other = "W" if model == "H" else "H"
        hint = (
            f": that is SDL-{other}'s layout, pass model={other!r} or θ₀ in SDL-{model}'s"
            if tuple(theta0.shape) == theta_shape(other, p, n, data.kappa)
            else ""
        )
        raise ValueError(
            f"theta0 must have shape {expected} for SDL-{model} "
            f"(p = {p}, n = {n}, κ = {data.kappa}), got {tuple(theta0.shape)}{hint}"
        )
    return theta0, check_gamma(gamma0, data)


def check_gamma(gamma0, data: SDLData):
    """γ₀ of shape (q, κ) (q = rows of ``data.X_aux``, the intercept included; q = 0 allowed),
    finite."""
    expected = (data.X_aux.shape[0], data.kappa)
    shape = tuple(np.shape(gamma0))
    if shape != expected:
        raise ValueError(
            f"gamma0 must have shape (q, κ) = {expected} (q = {expected[0]} covariate rows of "
            f"X_aux, the intercept included), got {shape}"
        )
    return _checks.as_matrix(gamma0, "gamma0") if expected[0] else jnp.asarray(gamma0, data.X.dtype)


def check_factors(factors0, data: SDLData) -> Factors:
    """BCD's start: (W, H, β) of shapes (p, r), (r, n), (r, κ) with one r ≥ 1, finite."""
    if not isinstance(factors0, (tuple, list)) or len(factors0) != 3:
        raise ValueError(
            f"factors0 must be Factors(W, H, beta) (three matrices), got {type(factors0).__name__}"
        )
    W, H, beta = (
        _checks.as_matrix(M, f"factors0.{name}") for M, name in zip(factors0, Factors._fields)
    )
    p, n = data.X.shape
    r = W.shape[1]
    expected = {"W": (p, r), "H": (r, n), "beta": (r, data.kappa)}
    for name, M in zip(Factors._fields, (W, H, beta)):
        if tuple(M.shape) != expected[name]:
            raise ValueError(
                f"factors0 must have W (p, r) = ({p}, r), H (r, n) = (r, {n}) and beta (r, κ) = "
                f"(r, {data.kappa}) with one rank r; got W {tuple(W.shape)}, H {tuple(H.shape)}, "
                f"beta {tuple(beta.shape)}"
            )
    return Factors(W, H, beta)
