"""LPGD steps in the span of the data: every iterate after the first, in O((n + κ)³) per step.

X is the data in the paper's layout, p × n (``SDLData.X``). After LPGD's first step θ₁ = U₁V₁ᵀ
has rank r (U₁ of p-rows, V₁ the kept right singular vectors). Every later gradient step moves
θ's p-rows only along the columns of X and U₁,

    SDL-H  B ← B − 2τξ(B − X)                                θ = [A ∥ B],
                                                             B the p rows
    SDL-W  A ← A − τ(X(P − Y)ᵀ + 2λA),  B ← B − 2τξ(B − X)   θ = [A, B], all p rows

and the rank projection θ ↦ θ V_r V_rᵀ multiplies on the right. So, with the fixed basis E = [X, U]
(p × (n + r), U = the p rows of U₁), every later iterate is

    SDL-H  θ = [A ∥ X M + U N],   A (κ, n),  M (n, n),        N (r, n)
    SDL-W  θ = X M + U N,                    M (n, κ + n),    N (r, κ + n)

and the step needs θ only through small matrices: its Gram θᵀθ = [M; N]ᵀ K [M; N] (+ AᵀA) with
K = EᵀE (blocks XᵀX, UᵀX, UᵀU, formed once), the activations (SDL-W: AᵀX = M_AᵀXᵀX + N_AᵀUᵀX) and
‖X − B‖² = tr([M_B − I; N_B]ᵀ K [M_B − I; N_B]). The gradient of F in these coordinates is the
coordinate vector of ∇_θF — e.g. 2ξ(B − X) = X·2ξ(M_B − I) + U·2ξN_B — so a step of ``optax.sgd``
on (M, N) *is* the step on θ, and the rank projection is (M, N) ← (M, N) V_r V_rᵀ with V_r the top
eigenvectors of θ'ᵀθ' (``lowrank_jax.linalg.top_eigenspace``, the eigendecomposition the dense
``svd="gram"`` projection uses). The iterates are LPGD's own, equal to the dense ones to rounding
(tested); one step costs O((n + κ)²(n + r)) instead of the dense O(p n²) — p = 12 625, n = 128:
a few 10⁷ flops against 10⁹ — plus O(p n²) once for XᵀX, UᵀX and the final θ = XM + UN.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from lowrank_jax import linalg
from lowrank_jax.sdl import model as sm


class Basis(NamedTuple):
    """The fixed basis E = [X, U] of the span steps, through its Gram blocks and QR factor.

    Attributes:
      XtX: XᵀX (n, n).
      UtX: UᵀX (r, n).
      UtU: UᵀU (r, r).
      R: (≤ n + r, n + r), the triangular factor of E = QR, for norms.
    """

    XtX: jax.Array
    UtX: jax.Array
    UtU: jax.Array
    R: jax.Array


def basis(X, U) -> Basis:
    """The basis E = [X, U] of the span steps.

    Args:
      X: (p, n) data in the paper's layout (``SDLData.X``).
      U: (p, r) the p rows of the first step's left factor.

    Returns:
      ``Basis``: E's Gram blocks and the R of E = QR.
    """
    return Basis(
        X.T @ X, U.T @ X, U.T @ U, jnp.linalg.qr(jnp.concatenate([X, U], axis=1), mode="r")
    )


def _images(K: Basis, M, N):
    """(XᵀY, UᵀY) for Y = XM + UN."""
    return K.XtX @ M + K.UtX.T @ N, K.UtX @ M + K.UtU @ N


def gram(K: Basis, M, N):
    """YᵀY for Y = XM + UN, from the Gram blocks (symmetrised).

    Args:
      K: the ``Basis``.
      M: (n, c) coordinates along X.
      N: (r, c) coordinates along U.

    Returns:
      (c, c).
    """
    XtY, UtY = _images(K, M, N)
    G = M.T @ XtY + N.T @ UtY
    return 0.5 * (G + G.T)


def sq_norm(K: Basis, M, N):
    """‖XM + UN‖²_F = ‖R [M; N]‖²_F with E = [X, U] = QR: a sum of squares.

    Not the Gram form Σ M∘(XᵀXM + XᵀUN) + Σ N∘(UᵀXM + UᵀUN): its terms are of size ‖X‖²‖[M; N]‖²
    and cancel when XM + UN is small against them (the fit residual X − B, a step; U nearly in
    the span of X), which in float32 on unscaled data (entries ~1e3) leaves a few digits or a
    negative value. Through R the error is of size eps·‖E‖‖[M; N]‖ before squaring, the square
    root of the Gram form's.

    Args:
      K: the ``Basis``.
      M: (n, c) coordinates along X.
      N: (r, c) coordinates along U.

    Returns:
      A scalar.
    """
    n = M.shape[0]
    Y = K.R[:, :n] @ M + K.R[:, n:] @ N
    return jnp.sum(Y * Y)


def coords_sq_norm(coords, K: Basis, model: str):
    """‖θ‖²_F of θ given by its coordinates.

    Args:
      coords: (A, M, N) for SDL-H, (M, N) for SDL-W (module docstring).
      K: the ``Basis``.
      model: "H" or "W".

    Returns:
      A scalar.
    """
    if model == "H":
        A, M, N = coords
        return jnp.sum(A * A) + sq_norm(K, M, N)
    return sq_norm(K, *coords)


def from_first_step(U1, V1, kappa: int, model: str, dtype):
    """The coordinates of LPGD's first iterate θ₁ = U₁V₁ᵀ, and the p rows U of the basis.

    Args:
      U1: θ₁'s left factor, in θ's layout ((κ + p, r) for SDL-H, (p, r) for SDL-W).
      V1: θ₁'s right factor ((n, r) for SDL-H, (κ + n, r) for SDL-W).
      kappa: κ.
      model: "H" or "W".
      dtype: the dtype of the zero coordinates.

    Returns:
      ``(coords, U)``: (A, M, N) or (M, N) (module docstring), and U (p, r).
    """
    c = V1.shape[0]
    if model == "H":
        return (U1[:kappa] @ V1.T, jnp.zeros((c, c), dtype), V1.T), U1[kappa:]
    n = c - kappa
    return (jnp.zeros((n, c), dtype), V1.T), U1


def expand(coords, X, U, model: str):
    """The dense θ from its coordinates: [A ∥ XM + UN] (SDL-H) or XM + UN (SDL-W).

    Args:
      coords: (A, M, N) for SDL-H, (M, N) for SDL-W.
      X: (p, n) data in the paper's layout.
      U: (p, r) the basis's other columns.
      model: "H" or "W".

    Returns:
      θ in the model's layout.
    """
    if model == "H":
        A, M, N = coords
        return jnp.concatenate([A, X @ M + U @ N], axis=0)
    M, N = coords
    return X @ M + U @ N


def value_and_gradients(coords, aux_coef, K: Basis, data: sm.SDLData, xi, lam, model: str):
    """F and its gradients with θ in the coordinates of the module docstring:
    ``lowrank_jax.sdl.model.value_and_gradients`` in the span.

    Args:
      coords: (A, M, N) for SDL-H, (M, N) for SDL-W.
      aux_coef: γ (q, κ).
      K: the ``Basis``.
      data: from ``lowrank_jax.sdl.prepare``.
      xi, lam: ξ, λ ≥ 0.
      model: "H" or "W".

    Returns:
      (F, (the coordinates of ∇_θF, ∇_γF)).
    """
    k = data.kappa
    eye = jnp.eye(data.X.shape[1], dtype=data.X.dtype)
    if model == "H":
        A, MB, NB = coords
        lin, a_sq = A, jnp.sum(A * A)
    else:
        M, N = coords
        MA, MB, NA, NB = M[:, :k], M[:, k:], N[:, :k], N[:, k:]
        lin, a_sq = MA.T @ K.XtX + NA.T @ K.UtX, sq_norm(K, MA, NA)  # AᵀX (κ, n), ‖A‖²
    fit, R, g_gamma = sm.label_terms(lin, aux_coef, data, lam)
    DM, DN = MB - eye, NB  # B − X = X DM + U DN
    value = fit + xi * sq_norm(K, DM, DN) + lam * a_sq
    if model == "H":
        return value, ((R + 2 * lam * A, 2 * xi * DM, 2 * xi * DN), g_gamma)
    # X(P − Y)ᵀ + 2λA = X(Rᵀ + 2λM_A) + U·2λN_A
    gM = jnp.concatenate([R.T + 2 * lam * MA, 2 * xi * DM], axis=1)
    gN = jnp.concatenate([2 * lam * NA, 2 * xi * DN], axis=1)
    return value, ((gM, gN), g_gamma)


def project_rank(coords, K: Basis, rank: int, model: str):
    """The coordinates of Π_r(θ) = θ V_r V_rᵀ, V_r a basis of the top-r eigenspace of θᵀθ
    (``lowrank_jax.linalg.top_eigenspace``: differentiable at tied eigenvalues too).

    Args:
      coords: (A, M, N) for SDL-H, (M, N) for SDL-W.
      K: the ``Basis``.
      rank: r.
      model: "H" or "W".

    Returns:
      The projected coordinates, shaped as ``coords``.
    """
    if model == "H":
        A, M, N = coords
        G = A.T @ A + gram(K, M, N)
    else:
        G = gram(K, *coords)
    V = linalg.top_eigenspace(G, rank)
    return tuple((C @ V) @ V.T for C in coords)


__all__ = [
    "Basis",
    "basis",
    "coords_sq_norm",
    "expand",
    "from_first_step",
    "gram",
    "project_rank",
    "sq_norm",
    "value_and_gradients",
]
