"""Supervised dictionary learning (SDL) lifted to low-rank estimation: data, objective, gradients,
factor recovery and the constants of the convergence theorem.

The public entry points take samples in rows: X (n, p), X_aux (n, q). ``prepare`` (and
``theory``) transpose them once; everything after works in the paper's layout, columns are
samples: X (p, n) data, X_aux (q, n) auxiliary covariates, labels y ∈ {0, …, κ} with class 0 the
reference of the softmax (κ = 1: binary logistic). Y (κ, n) is the one-hot matrix with an all-zero
column for class 0. For an activation a_s ∈ ℝ^κ,

    ℓ(y, a) = log(1 + Σ_c exp(a_c)) − a_y,   a_0 ≡ 0
                              (eq. 90; the main text drops the "1 +")

and P (κ, n) holds P[j, s] = exp(a_sj) / (1 + Σ_c exp(a_sc)). The two models and their lifted
variables (eqs. 9–10), both minimised over rank(θ) ≤ r:

    SDL-H  a_s = A[:, s] + γᵀx'_s,  θ = [A ∥ B] ((κ+p) × n),  A = βᵀH,  B = WH
    SDL-W  a_s = Aᵀx_s + γᵀx'_s,    θ = [A, B]  (p × (κ+n)),  A = Wβ,   B = WH

    F(θ, γ) = Σ_s ℓ(y_s, a_s) + ξ‖X − B‖²_F + λ(‖A‖²_F + ‖γ‖²_F)  (s: the samples)

with β the classifier (``coef``) and γ the covariates' coefficients (``aux_coef``),

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


def _check_model(model):
    if model not in MODELS:
        raise ValueError(
            f"model must be 'H' (SDL-H, feature-based) or 'W' (SDL-W, filter-based), got {model!r}"
        )


def _model(model, name: str, args=None) -> str:
    _check_model(model)
    return model


# Argument declarations of the family (``lowrank_jax._checks.validate``).
MODEL = _checks.Convert(_model)
KAPPA = _checks.Count()


def _data_X(args) -> jax.Array:
    """X of the argument ``data`` (its dtype is the solvers')."""
    return args["data"].X


# ξ, λ ≥ 0 of the solvers, in the dtype of ``data`` (a negative ξ or λ makes F unbounded below).
# Traced ones (a vmap over ξ, λ) out of range become NaN (the run reports INVALID).
HYPERS = {
    "xi": _checks.Hyper(ndim=0, dtype_of=_data_X),
    "lam": _checks.Hyper(ndim=0, dtype_of=_data_X),
}


class SDLData(eqx.Module):
    """Validated training data in the paper's layout (columns are samples), as ``prepare``
    builds it from samples in rows.

    Attributes:
      X: (p, n) data, the transpose of the (n, p) matrix given to ``prepare``.
      X_aux: (q, n) covariates, the intercept's ones row last when there is one (q may be 0).
      Y: (κ, n) one-hot labels without class 0 (the reference class is an all-zero column).
      penalized: (q,) 1 for covariates whose γ row is penalised, 0 for the intercept.
      kappa: κ, the number of classes less the reference (a property).
    """

    X: jax.Array
    X_aux: jax.Array
    Y: jax.Array
    penalized: jax.Array

    @property
    def kappa(self) -> int:
        return self.Y.shape[0]


def check_labels(y, n: int | None = None, num_classes: int | None = None) -> np.ndarray:
    """Labels checked by ``lowrank_jax._checks.class_labels``: integers in {0, …, κ}, one per
    sample (a row of X).

    Args:
      y: (n,) labels.
      n: the number of samples they must match (None: any).
      num_classes: κ + 1, the label range (None: inferred later, ``infer_num_classes``).

    Returns:
      The labels as a NumPy int array (n,); ``ValueError`` naming y otherwise.
    """
    return _checks.class_labels(y, n, num_classes, what="X has n = {n} rows (samples are rows)")


def _code_labels(y, name: str, args):
    """Labels in {0, …, κ} (``check_labels``, ``kappa`` declared before); traced labels
    (inside ``jit``) are checked for their shape only."""
    checked = _checks.when_concrete(lambda v: check_labels(v, num_classes=args["kappa"] + 1), y)
    if checked is not None:
        return checked
    if jnp.ndim(y) != 1:
        raise ValueError(f"y must be a 1-D array of labels, got shape {tuple(jnp.shape(y))}")
    return y


@_checks.validate(kappa=KAPPA, y=_checks.Convert(_code_labels))
def one_hot(y, kappa: int, dtype=jnp.float32) -> jax.Array:
    """One-hot labels without the reference class: Y[c − 1, s] = 1 if y_s = c ≥ 1.

    Args:
      y: (n,) labels in {0, …, κ}; a label outside that range (κ + 1 or more, negative,
        non-integer) is a ``ValueError`` naming the range (``check_labels``). Traced labels
        (inside ``jit``) are checked for their shape only.
      kappa: κ ≥ 1.
      dtype: the dtype of Y (default float32).

    Returns:
      Y (κ, n); class 0 is the all-zero column.
    """
    return _one_hot(y, kappa, dtype)


@functools.partial(jax.jit, static_argnames=("kappa", "dtype"))
def _one_hot(y, kappa: int, dtype) -> jax.Array:
    return (jnp.asarray(y)[None, :] == jnp.arange(1, kappa + 1)[:, None]).astype(dtype)


def infer_num_classes(y_np: np.ndarray, num_classes: int | None = None) -> int:
    """κ + 1, the number of classes.

    Args:
      y_np: (n,) checked labels (``check_labels``).
      num_classes: when given, the answer (classes without a sample are then allowed, e.g. a
        training fold that misses a rare class).

    Returns:
      ``num_classes``, else max(y) + 1 — and then every class 0, …, max(y) must occur, because a gap
      such as labels {0, 5} would silently create four empty classes with their own logits: a
      ``ValueError`` names the missing classes.
    """
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


def _training_labels(y, name: str, args) -> np.ndarray:
    """Labels of the rows of the argument ``X``, below ``num_classes`` when it is given."""
    return check_labels(y, args["X"].shape[0], args["num_classes"])


def _num_classes(num_classes, name: str, args) -> int:
    """κ + 1 (``infer_num_classes`` of the checked labels ``y``), at least two."""
    count = infer_num_classes(args["y"], num_classes)
    if count < 2:
        raise ValueError("need at least two classes (labels 0 and 1)")
    return count


def _rows_aux(X_aux, name: str, args):
    """``given_aux`` with one row per row of the argument ``X``."""
    return given_aux(X_aux, args["X"].shape[0], name)


# The training data of prepare and fit: X (n, p) finite at a scale its dtype holds, y (n,) labels,
# num_classes (κ + 1, at least two), X_aux (n, q) or None (q = 0), intercept a flag.
DATA = {
    "X": _checks.Matrix(scale=True),
    "y": _checks.Convert(_training_labels),
    "num_classes": _checks.Convert(_num_classes),
    "X_aux": _checks.Convert(_rows_aux, optional=True),
    "intercept": _checks.Flag(),
}


@functools.partial(jax.jit, static_argnames=("intercept", "num_classes"))
def bundle(X, y, X_aux, intercept: bool, num_classes) -> SDLData:
    """``SDLData`` of arguments checked as ``DATA`` declares them (one compiled program).

    Args:
      X: (n, p) data, samples in rows.
      y: (n,) checked labels.
      X_aux: (n, q) covariates or None.
      intercept: append the intercept's ones row.
      num_classes: κ + 1.

    Returns:
      ``SDLData`` in the paper's layout.
    """
    Xa, pen = _aux_block(X_aux, X.shape[0], intercept, X.dtype)
    return SDLData(X.T, Xa, _one_hot(y, num_classes - 1, X.dtype), pen)


@_checks.validate(**DATA)
def prepare(
    X, y, X_aux=None, *, intercept: bool = False, num_classes: int | None = None
) -> SDLData:
    """Validate and bundle training data for ``lowrank_jax.sdl.lpgd`` and
    ``lowrank_jax.sdl.bcd``, transposed once into the paper's layout (columns are samples).

    Args:
      X: (n, p) data, samples in rows; finite, at a scale whose sums of squares its dtype holds.
      y: (n,) labels in {0, …, κ}, class 0 the reference.
      X_aux: optional (n, q) covariates, one row per sample (an empty (n, 0) matrix is the same as
        None).
      intercept: append a constant covariate whose coefficient is not penalised. The default here
        is False, the paper's model, while ``lowrank_jax.sdl.fit`` defaults to True (the
        authors' code): pass it explicitly to match a ``fit``.
      num_classes: κ + 1; by default max(y) + 1, and then every label 0, …, max(y) must occur
        (``infer_num_classes``).

    Returns:
      ``SDLData`` with X (p, n), X_aux (q, n) (the intercept's ones row last), Y (κ, n).
    """
    return bundle(X, y, X_aux, intercept, num_classes)


def given_aux(X_aux, n: int, name: str = "X_aux"):
    """A user's covariates checked, in the user's layout (samples in rows).

    Args:
      X_aux: None, or a finite (n, q) matrix, one row per sample, at a scale whose sums of squares
        its dtype holds (``lowrank_jax._checks.check_scale``, the check X gets: covariates
        whose ‖X_aux‖²₂ overflows would make the step bound 0 or NaN).
      n: the number of samples.
      name: the argument's name in error messages.

    Returns:
      None for None or q = 0 (an empty (n, 0) matrix: every solver, the step bound and prediction
      handle a γ with no rows), else the (n, q) matrix.
    """
    if X_aux is None:
        return None
    shape = tuple(np.shape(X_aux))
    if len(shape) != 2 or shape[1] > 0:  # else q = 0: no covariates, checked for its height only
        X_aux = _checks.as_matrix(X_aux, name)
    if shape[0] != n:
        raise ValueError(f"{name} must have one row per sample, shape ({n}, q), got shape {shape}")
    if shape[1] == 0:
        return None
    _checks.check_scale(X_aux, name)
    return X_aux


def aux_matrix(X_aux, n: int, intercept: bool, dtype, name: str = "X_aux"):
    """The covariate block of ``SDLData``, transposed into the paper's layout.

    Args:
      X_aux: as ``given_aux`` takes it: None, or (n, q) with samples in rows.
      n: the number of samples.
      intercept: append a ones row, unpenalised.
      dtype: the dtype of the result.
      name: the argument's name in error messages.

    Returns:
      (X_aux (q, n) with the ones row last when ``intercept``, penalty mask (q,): 1 for a penalised
      row, 0 for the intercept).
    """
    intercept = _checks.check_flag(intercept, "intercept")
    return _aux_block(given_aux(X_aux, n, name), n, intercept, dtype)


def _aux_block(X_aux, n: int, intercept: bool, dtype):
    """``aux_matrix`` of a checked X_aux (None or (n, q))."""
    X_aux = jnp.zeros((0, n), dtype) if X_aux is None else X_aux.T.astype(dtype)
    pen = jnp.ones(X_aux.shape[0], dtype)
    if intercept:
        X_aux = jnp.concatenate([X_aux, jnp.ones((1, n), dtype)])
        pen = jnp.concatenate([pen, jnp.zeros(1, dtype)])
    return X_aux, pen


@_checks.validate(model=MODEL)
def theta_shape(model: str, p: int, n: int, kappa: int) -> tuple[int, int]:
    """Shape of the lifted θ: (κ + p, n) for SDL-H, θ = [βᵀH; WH]; (p, κ + n) for SDL-W,
    θ = [Wβ, WH].

    Args:
      model: "H" or "W".
      p, n: features and samples.
      kappa: κ.

    Returns:
      The shape, a tuple of two ints.
    """
    return (kappa + p, n) if model == "H" else (p, kappa + n)


def split(theta, model: str, kappa: int):
    """The blocks of the lifted θ.

    Args:
      theta: θ in the model's layout (``theta_shape``).
      model: "H" or "W".
      kappa: κ.

    Returns:
      (A, B): A (κ, n), B (p, n) for SDL-H; A (p, κ), B (p, n) for SDL-W.
    """
    return (theta[:kappa], theta[kappa:]) if model == "H" else (theta[:, :kappa], theta[:, kappa:])


def join(A, B, model: str):
    """θ from its blocks, the inverse of ``split``.

    Args:
      A: (κ, n) for SDL-H, (p, κ) for SDL-W.
      B: (p, n).
      model: "H" or "W".

    Returns:
      θ = [A; B] stacked by rows (SDL-H) or [A, B] side by side (SDL-W).
    """
    return jnp.concatenate([A, B], axis=0 if model == "H" else 1)


def activations(theta, aux_coef, X, X_aux, model: str, kappa: int):
    """The activations of the training samples: a = A + γᵀX_aux (SDL-H), AᵀX + γᵀX_aux (SDL-W).

    Args:
      theta: θ in the model's layout.
      aux_coef: γ (q, κ).
      X: (p, n) data in the paper's layout (``SDLData.X``).
      X_aux: (q, n) covariates (``SDLData.X_aux``).
      model: "H" or "W".
      kappa: κ.

    Returns:
      a (κ, n).
    """
    A, _ = split(theta, model, kappa)
    lin = A if model == "H" else A.T @ X
    return lin + aux_coef.T @ X_aux


@jax.jit
def log_partition(a):
    """log(1 + Σ_c exp(a_c)) per column, computed stably (a log-sum-exp with a zero row).

    Args:
      a: activations (κ, n).

    Returns:
      (n,).
    """
    zero = jnp.zeros((1,) + a.shape[1:], a.dtype)
    return jax.nn.logsumexp(jnp.concatenate([zero, a]), axis=0)


@jax.jit
def nll(a, Y):
    """The multinomial negative log-likelihood Σ_s ℓ(y_s, a_s), eq. 90:
    Σ_s log(1 + Σ_c exp(a_cs)) − ⟨Y_s, a_s⟩.

    Args:
      a: activations (κ, n).
      Y: one-hot labels (κ, n) (class 0, the reference, is the all-zero column).

    Returns:
      A scalar.
    """
    return jnp.sum(log_partition(a)) - jnp.sum(Y * a)


@jax.jit
def class_probs(a):
    """Class probabilities P[c, s] = exp(a_cs) / (1 + Σ_j exp(a_js)), with a_0 ≡ 0.

    Args:
      a: activations (κ, n).

    Returns:
      (κ + 1, n), row 0 the reference class.
    """
    zero = jnp.zeros((1,) + a.shape[1:], a.dtype)
    return jax.nn.softmax(jnp.concatenate([zero, a]), axis=0)


@_checks.validate(model=MODEL)
@_checks.compiled
def objective(theta, aux_coef, data: SDLData, xi, lam, model: str):
    """The lifted objective of eq. (9) (SDL-H) or (10) (SDL-W),

        F(θ, γ) = Σ_s ℓ(y_s, a_s) + ξ‖X − B‖²_F + λ(‖A‖²_F + ‖γ_pen‖²_F),

    γ_pen leaving the intercept's row out.

    Args:
      theta: θ = [A ∥ B] (κ + p, n) for SDL-H or [A, B] (p, κ + n) for SDL-W.
      aux_coef: γ (q, κ).
      data: from ``prepare``.
      xi, lam: ξ, λ ≥ 0.
      model: "H" or "W" (anything else is a ``ValueError``).

    Returns:
      F, a scalar.
    """
    A, B = split(theta, model, data.kappa)
    a = activations(theta, aux_coef, data.X, data.X_aux, model, data.kappa)
    g_pen = aux_coef * data.penalized[:, None]
    return (
        nll(a, data.Y)
        + xi * jnp.sum((data.X - B) ** 2)
        + lam * (jnp.sum(A * A) + jnp.sum(g_pen * g_pen))
    )


@_checks.validate(model=MODEL)
@_checks.compiled
def value_and_gradients(theta, aux_coef, data: SDLData, xi, lam, model: str, XT=None):
    """F and its closed-form gradients (module docstring), sharing the activations and X − B.

    Args:
      theta: θ in the model's layout, or for model "W" with ``XT`` the transposed layout
        θᵀ = [Aᵀ ∥ Bᵀ] ((κ + n) × p), whose blocks are contiguous rows (the solver's SDL-W step).
      aux_coef: γ (q, κ).
      data: from ``prepare``.
      xi, lam: ξ, λ ≥ 0.
      model: "H" or "W" (anything else is a ``ValueError``).
      XT: None, or Xᵀ (n, p) for the transposed SDL-W layout.

    Returns:
      (F, (∇_θF, ∇_γF)), ∇_θF in the layout θ was given in.
    """
    k = data.kappa
    rows = model == "H" or XT is not None
    A, B = (theta[:k], theta[k:]) if rows else (theta[:, :k], theta[:, k:])
    if model == "H":
        a = A
    else:
        a = A @ data.X if rows else A.T @ data.X
    fit, R, g_gamma = label_terms(a, aux_coef, data, lam)
    D = B - (data.X if XT is None else XT)
    value = fit + xi * jnp.sum(D * D) + lam * jnp.sum(A * A)
    if model == "H":
        gA = R
    else:
        gA = R @ XT if rows else data.X @ R.T
    g_theta = jnp.concatenate([gA + 2 * lam * A, 2 * xi * D], axis=0 if rows else 1)
    return value, (g_theta, g_gamma)


def label_terms(lin, aux_coef, data: SDLData, lam):
    """The γ- and label-dependent part of F, with a = lin + γᵀX_aux. Shared by the dense step and
    the one in ``lowrank_jax.sdl.span``.

    Args:
      lin: the θ part of the activations (κ, n): A for SDL-H, AᵀX for SDL-W.
      aux_coef: γ (q, κ).
      data: from ``prepare``.
      lam: λ ≥ 0.

    Returns:
      (Σ_s ℓ(y_s, a_s) + λ‖γ_pen‖²_F, R = P − Y (κ, n), ∇_γF (q, κ)).
    """
    a = lin + aux_coef.T @ data.X_aux
    R = class_probs(a)[1:] - data.Y
    g_pen = aux_coef * data.penalized[:, None]
    return nll(a, data.Y) + lam * jnp.sum(g_pen * g_pen), R, data.X_aux @ R.T + 2 * lam * g_pen


@_checks.validate(model=MODEL)
@_checks.compiled
def gradients(theta, aux_coef, data: SDLData, xi, lam, model: str):
    """The closed-form gradients of the F of ``objective`` (module docstring; eqs. 100 and 107,
    which eq. 11 of the paper prints with the two models' labels swapped).

    Args:
      theta: θ, (κ + p, n) for SDL-H or (p, κ + n) for SDL-W.
      aux_coef: γ (q, κ).
      data: from ``prepare``.
      xi, lam: ξ, λ ≥ 0.
      model: "H" or "W" (anything else is a ``ValueError``).

    Returns:
      (∇_θF, ∇_γF), shaped like θ and γ.
    """
    return value_and_gradients(theta, aux_coef, data, xi, lam, model)[1]


class Factors(NamedTuple):
    """The factored SDL parameters behind a lifted θ, with A = βᵀH (SDL-H) or Wβ (SDL-W) and
    B = WH.

    Attributes:
      W: (p, r) the dictionary (one atom, a gene group, per column).
      H: (r, n) the codes of the training samples.
      coef: β (r, κ), the classifier on the codes.
    """

    W: jax.Array
    H: jax.Array
    coef: jax.Array


@_checks.validate(model=MODEL, rank=_checks.Convert(lambda v, name, args: as_rank(v)), kappa=KAPPA)
def factors(theta, rank: int, model: str, kappa: int) -> Factors:
    """The factors behind θ, Algorithm 1's last lines: θ = UΣVᵀ (rank r),

        SDL-H: [βᵀ ∥ W] = UΣ^(1/2), H = Σ^(1/2)Vᵀ;   SDL-W: W = U, [β, H] = ΣVᵀ,

    unique up to an invertible r × r transform (the paper's conventions fix it).

    Args:
      theta: θ in the model's layout.
      rank: r, a Python integer (static).
      model: "H" or "W" (anything else is a ``ValueError``).
      kappa: κ, a Python integer (static).

    Returns:
      ``Factors`` (W (p, r), H (r, n), coef (r, κ)).
    """
    return _factors(theta, rank=rank, model=model, kappa=kappa)


# one program, not one per op
@functools.partial(jax.jit, static_argnames=("rank", "model", "kappa"))
def _factors(theta, *, rank: int, model: str, kappa: int) -> Factors:
    svd = linalg.truncated_svd(theta, rank)
    if model == "H":
        L, R = linalg.balanced_factors(svd)
        return Factors(L[kappa:], R.T, L[:kappa].T)
    SVt = svd.s[:, None] * svd.V.T
    return Factors(svd.U, SVt[:, kappa:], SVt[:, :kappa])


@_checks.validate(model=MODEL)
@_checks.compiled
def lift(f: Factors, model: str) -> jax.Array:
    """θ from factors: [βᵀH ∥ WH] (SDL-H) or [Wβ, WH] (SDL-W), the inverse of ``factors``.

    Args:
      f: ``Factors`` (W (p, r), H (r, n), coef (r, κ)).
      model: "H" or "W" (anything else is a ``ValueError``).

    Returns:
      θ, (κ + p, n) for SDL-H or (p, κ + n) for SDL-W.
    """
    A = f.coef.T @ f.H if model == "H" else f.W @ f.coef
    return join(A, f.W @ f.H, model)


@_checks.validate(model=MODEL)
@_checks.compiled
def step_bound(data: SDLData, xi, lam, model: str):
    """A safe fixed step size 1/L̄ for the gradient step on F (LPGD's default ``lr``): L̄ bounds
    the Hessian of F,

        SDL-W  L̄ = max(2ξ, 2λ + α⁺‖Φ‖²₂),  Φ = [X ∥ X_aux]
        SDL-H  L̄ = max(2ξ, 2λ + α⁺(1 + ‖X_aux‖²₂)),

    with α⁺ ≥ λ_max(∇²ℓ): ¼ for binary labels, ½ for the softmax (``softmax_curvature``).

    Args:
      data: from ``prepare``.
      xi, lam: ξ, λ ≥ 0 (traced under ``vmap``).
      model: "H" or "W" (anything else is a ``ValueError``).

    Returns:
      1/L̄, a scalar; 1 where L̄ = 0 (F flat: X = 0, no covariates, ξ = λ = 0: any step is safe),
      NaN where L̄ is not finite (‖Φ‖²₂ or 2ξ overflowing the dtype), which the rule
      ``SAFE_STEP`` refuses by name.
    """
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
    """Theorem 2.1 / E.2 quantities, as ``theory`` computes them.

    Attributes:
      mu: μ of eq. (16), the strong-convexity constant (a float, as are the other numbers).
      L: L of eq. (16), the smoothness constant.
      condition: L/μ (inf where μ = 0).
      holds: whether L/μ < 3, the theorem's condition.
      step_interval: the admissible step sizes (1/(2μ), 3/(2L)).
      best_step: 2/(μ + L), the step size that minimises ρ.
      rho: ρ(τ) = 2·max(|1 − τμ|, |1 − τL|) at ``best_step`` (Theorem E.2's ρ; Theorem 2.1 prints
        2(1 − τμ), App. I drops the 2).
      delta_minus: δ⁻, the smallest eigenvalue of n⁻¹ΦΦᵀ.
      delta_plus: δ⁺, the largest eigenvalue of n⁻¹ΦΦᵀ.
      alpha_minus: α⁻, the lower curvature bound of ``softmax_curvature``.
      alpha_plus: α⁺, the upper curvature bound of ``softmax_curvature``.
    """

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

    def rate(self, lr: float) -> float:
        """ρ(τ) = 2·max(|1 − τμ|, |1 − τL|), Theorem E.2's contraction factor at the step size
        τ = ``lr`` (below 1 inside ``step_interval`` when ``holds``; ``rho`` is its value at
        ``best_step``).

        Args:
          lr: τ > 0.

        Returns:
          ρ(τ), a Python float.
        """
        return _contraction(self.mu, self.L, float(lr))


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
                                       g_min = e^(−M)/(1 + e^(−M) + (κ − 1)e^M)
             (vᵀḦv = Σg_jv_j² − (Σg_jv_j)² ≥ g₀ Σ g_jv_j² by Cauchy–Schwarz), and α⁺ = ½
             (the variance of v_Y for a categorical Y and ‖v‖ = 1 is at most ½).

    Args:
      M: the activation bound, ≥ 0.
      kappa: κ ≥ 1.

    Returns:
      (α⁻, α⁺), Python floats.
    """
    em = math.exp(-M)  # written with e^{−M} only: no overflow for large M
    if kappa == 1:
        return em / (1 + em) ** 2, 0.25
    return (em / (em + kappa)) * (em * em / (em + em * em + (kappa - 1))), 0.5


def softmax_curvature_printed(M: float, kappa: int) -> tuple[float, float]:
    """Remark D.3's (α⁻, α⁺) as printed, which are not valid bounds (``softmax_curvature``).

    Args:
      M: the activation bound, ≥ 0.
      kappa: κ ≥ 1.

    Returns:
      (α⁻, α⁺) as the remark prints them, Python floats.
    """
    em, ep = math.exp(-M), math.exp(M)
    return em / (1 + em + (kappa - 1) * ep), ep * (1 + 2 * (kappa - 1) * ep) / (
        1 + ep + (kappa - 1) * em
    ) ** 2


def _float_hyper(value, name: str, args=None):
    """A finite scalar ≥ 0 (``lowrank_jax._checks.as_hyper``), returned as given so that a
    float64 value keeps every bit."""
    _checks.as_hyper(value, name, ndim=0)
    return value


_FLOAT_HYPER = _checks.Convert(_float_hyper)


@_checks.host_function("sdl.theory")
@_checks.validate(
    model=MODEL,
    xi=_FLOAT_HYPER,
    lam=_FLOAT_HYPER,
    M=_FLOAT_HYPER,
    kappa=KAPPA,
    X=_checks.Matrix(),
    X_aux=_checks.Convert(_rows_aux, optional=True),
)
def theory(
    X, xi: float, lam: float, *, model: str, kappa: int = 1, X_aux=None, M: float = 1.0
) -> Theory:
    """The constants of Theorem 2.1 / E.2 from the data: μ, L of eq. (16), the condition L/μ < 3,
    the admissible step sizes and the contraction factor ρ.

    δ± are the extreme eigenvalues of n⁻¹ΦΦᵀ, Φ = [X ∥ X_aux] in the paper's layout (Assumption C.2;
    δ⁻ = 0 whenever p + q > n, as for every microarray — Assumption C.2 fails there, yet the
    constants below can still certify L/μ < 3 through the ridge: μ ≥ min(2ξ, 2λ)), λ⁺ that of
    n⁻¹X_aux X_auxᵀ, α± from ``softmax_curvature`` with the activation bound M (valid bounds;
    Remark D.3's printed α± are not, see there).

        SDL-W  μ = min(2ξ, 2λ + nδ⁻α⁻),  L = max(2ξ, 2λ + nδ⁺α⁺)
        SDL-H  μ = min(2ξ, 2λ + α⁻),     L = max(2ξ, 2λ + α⁺)
                                              (no covariates, q = 0)
        SDL-H  μ = min(2ξ, 2λ),          L = max(2ξ, 2λ + α⁺(1 + λ⁺n))
                                              (q ≥ 1; erratum)

    Erratum (SDL-H with covariates): eq. (16) prints μ = min(2ξ, 2λ + α⁻) and
    L = max(2ξ, 2λ + α⁺λ⁺n, 2λ + α⁺) for every q. But SDL-H's activations a_s = A[:, s] + γᵀx'_s
    map (A, γ) → a with a null space: along A = −γᵀX_aux (rank one, so inside the rank-r set) the
    label term is flat and F curves by 2λ only; and the map's largest squared singular value is
    1 + ‖X_aux‖²₂ = 1 + λ⁺n, not max(1, λ⁺n). Both printed constants overstate the conditioning,
    so ``holds`` could say True where the theorem's L/μ < 3 fails. With α⁺ = ¼ (κ = 1) both
    corrected constants are the extreme Hessian eigenvalues of F at a = 0 (tested).

    Args:
      X: (n, p) data, samples in rows.
      xi, lam: ξ, λ ≥ 0, finite.
      model: "H" or "W".
      kappa: κ ≥ 1 (default 1, binary labels).
      X_aux: optional (n, q) covariates. Every column counts as penalised here; the model does not
        penalise an intercept, so leave it out of ``X_aux`` for these constants.
      M: the activation bound of α± (≥ 0, finite; default 1).

    Returns:
      ``Theory``. ``ValueError`` where L = 0 (SDL-W with ξ = λ = 0 and all-zero data: F is
      constant).
    """
    xi, lam, M = float(xi), float(lam), float(M)
    X = np.asarray(X, np.float64).T  # (p, n), the paper's layout
    n = X.shape[1]
    Xa = np.zeros((0, n)) if X_aux is None else np.asarray(X_aux, np.float64).T
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


def as_rank(rank) -> int:
    """The rank as a Python int (its range is ``check_rank_for``'s).

    Args:
      rank: a Python or NumPy integer or a concrete 0-d integer array (``np.array(2)``,
        ``jnp.int32(2)``).

    Returns:
      The int; ``ValueError`` naming rank for anything else.
    """
    as_integer = _checks.as_int(rank)
    if as_integer is None:
        raise ValueError(f"rank must be an integer, got {rank!r}")
    return as_integer


def check_rank_for(rank, model: str, p: int, n: int, kappa: int) -> int:
    """The rank checked against the data: 1 ≤ r ≤ min(p, n).

    Args:
      rank: as ``as_rank`` takes it.
      model: "H" or "W".
      p, n: features and samples.
      kappa: κ.

    Returns:
      r as a Python int; a ``ValueError`` naming the bound and θ's shape (``theta_shape``)
      otherwise.
    """
    rank = as_rank(rank)
    shape = theta_shape(model, p, n, kappa)
    limit = min(p, n)
    if not 1 <= rank <= limit:
        raise ValueError(
            f"rank must satisfy 1 <= rank <= min(p, n) = {limit} (θ has shape {shape}), got {rank}"
        )
    return rank


def _bound_message(args) -> str:
    data, xi, lam = args["data"], args["xi"], args["lam"]
    return (
        "lr=None: the safe step 1/L̄ is undefined, L̄ = max(2ξ, 2λ + α⁺‖Φ‖²₂) overflows "
        f"{data.X.dtype} (ξ = {float(xi):.3g}, λ = {float(lam):.3g}, X and X_aux as "
        "given): rescale X or X_aux, lower ξ or λ, or compute in float64"
    )


# lr=None takes the safe step bound (``step_bound``) at (ξ, λ): a concrete bound that is not
# finite (L̄ overflows X's dtype) is refused; a traced one (a vmap over ξ, λ) is NaN at that point,
# whose run then reports Status.INVALID.
SAFE_STEP = _checks.Rule(
    lambda a: (
        True
        if a["lr"] is not None
        else jnp.isfinite(step_bound(a["data"], a["xi"], a["lam"], a["model"]))
    ),
    _checks.Message(_bound_message),
    uses=("data", "xi", "lam", "lr"),
    compiled=True,
)
LR = _checks.Hyper(ndim=0, low=0, low_open=True, dtype_of=_data_X, optional=True)


def start_theta(theta0, name: str, args) -> jax.Array:
    """LPGD's start θ₀ checked against the arguments ``data`` and ``model``: finite, of
    ``theta_shape`` in the model's layout (the other model's layout is named as such in the
    error).

    Args:
      theta0: θ₀.
      name: its name in messages.
      args: the arguments (``data`` from ``prepare``, ``model`` "H" or "W", checked).

    Returns:
      θ₀ as a floating JAX array.
    """
    data, model = args["data"], args["model"]
    p, n = data.X.shape
    expected = theta_shape(model, p, n, data.kappa)
    theta0 = _checks.as_matrix(theta0, name)
    if tuple(theta0.shape) != expected:
        other = "W" if model == "H" else "H"
        hint = (
            f": that is SDL-{other}'s layout, pass model={other!r} or θ₀ in SDL-{model}'s"
            if tuple(theta0.shape) == theta_shape(other, p, n, data.kappa)
            else ""
        )
        raise ValueError(
            f"{name} must have shape {expected} for SDL-{model} "
            f"(p = {p}, n = {n}, κ = {data.kappa}), got {tuple(theta0.shape)}{hint}"
        )
    return theta0


def start_aux_coef(aux_coef0, name: str, args) -> jax.Array:
    """A starting γ₀ checked against the argument ``data``.

    Args:
      aux_coef0: γ₀, finite, of shape (q, κ) (q covariates, the intercept included; q = 0
        allowed).
      name: its name in messages.
      args: the arguments (``data`` from ``prepare``).

    Returns:
      γ₀ as a JAX array; a ``ValueError`` naming it otherwise.
    """
    data = args["data"]
    expected = (data.X_aux.shape[0], data.kappa)
    shape = tuple(np.shape(aux_coef0))
    if shape != expected:
        raise ValueError(
            f"{name} must have shape (q, κ) = {expected} (q = {expected[0]} covariates of "
            f"X_aux, the intercept included), got {shape}"
        )
    if expected[0]:
        return _checks.as_matrix(aux_coef0, name)
    return jnp.asarray(aux_coef0, data.X.dtype)


def start_factors(factors0, name: str, args) -> Factors:
    """BCD's start checked against the argument ``data``.

    Args:
      factors0: (W, H, β) of shapes (p, r), (r, n), (r, κ) with one r ≥ 1, finite.
      name: its name in messages.
      args: the arguments (``data`` from ``prepare``).

    Returns:
      ``Factors`` of JAX arrays; a ``ValueError`` naming it otherwise.
    """
    data = args["data"]
    if not isinstance(factors0, (tuple, list)) or len(factors0) != 3:
        raise ValueError(
            f"{name} must be Factors(W, H, coef) (three matrices), got {type(factors0).__name__}"
        )
    W, H, coef = (
        _checks.as_matrix(M, f"{name}.{field}") for M, field in zip(factors0, Factors._fields)
    )
    p, n = data.X.shape
    r = W.shape[1]
    expected = {"W": (p, r), "H": (r, n), "coef": (r, data.kappa)}
    for field, M in zip(Factors._fields, (W, H, coef)):
        if tuple(M.shape) != expected[field]:
            raise ValueError(
                f"{name} must have W (p, r) = ({p}, r), H (r, n) = (r, {n}) and coef (r, κ) = "
                f"(r, {data.kappa}) with one rank r; got W {tuple(W.shape)}, H {tuple(H.shape)}, "
                f"coef {tuple(coef.shape)}"
            )
    return Factors(W, H, coef)


def rank_for_data(rank, name: str, args) -> int:
    """The rank declared against the arguments ``data`` and ``model`` (``check_rank_for``).

    Args:
      rank: as ``as_rank`` takes it.
      name: the argument's name (unused: the messages name ``rank``).
      args: the converted arguments, holding ``data`` (an ``SDLData``) and ``model``.

    Returns:
      r as a Python int, 1 ≤ r ≤ min(p, n).
    """
    data = args["data"]
    p, n = data.X.shape
    return check_rank_for(rank, args["model"], p, n, data.kappa)
