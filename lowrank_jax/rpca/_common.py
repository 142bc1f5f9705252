"""Pieces shared by the robust-PCA solvers: the result type, diagnostics, argument declarations."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import _checks, linalg, loop
from lowrank_jax.result import Result, Status
from lowrank_jax.rpca.panels import residual_map_products
from lowrank_jax.transforms import scaled_gradient_step


class RPCAResult(Result):
    """Result of a robust PCA solver: Y ≈ X + S with X = L Rᵀ of rank r and S sparse.

    Shapes are those of one run; a ``vmap``ped run adds its batch axes in front of every field.

    Attributes:
      n_iter: int32 scalar, the iterations run.
      status: int32 scalar, a ``Status`` code (CONVERGED, MAX_ITER, DIVERGED, INVALID or
        UNRELIABLE).
      history: dict of the diagnostics below per iteration (``history["residual"]`` etc.), each
        of length ``max_iter``, padded past ``n_iter`` (NaN for floats, −1 for integers).
      L: (n1, r) the left factor, X = L Rᵀ.
      R: (n2, r) the right factor.
      X: (n1, n2) the low-rank estimate, L Rᵀ.
      S: (n1, n2) the sparse estimate.
      residual: float scalar, the final ‖Y − X − S‖_F / ‖Y‖_F (each solver says which X and S it
        pairs).
      error: float scalar, the final ‖X − X⋆‖_F / ‖X⋆‖_F (``lowrank_jax.linalg.relative_error``)
        when ``X_star`` was given, else None.
      false_positives: int32 scalar, the final count of nonzero entries of S outside ``support``
        when ``support`` was given, else None.
      change: float scalar, the final relative change max(‖ΔX‖_F / ‖X‖_F, ‖ΔS‖_F / ‖S‖_F) with
        ``stop="change"``, else None.
      density: float scalar, the fraction of S's entries that are outliers,
        |S_ij| > 10⁻³ ‖Y‖_F / √(n1 n2) (entries below a thousandth of Y's root-mean-square count
        as zero). Above one half the run's status is ``Status.UNRELIABLE``: robust PCA assumes a
        sparse S, and a dense one means that S absorbed what X should explain (thresholds far too
        small for the data's units, or data that are not low rank plus sparse).
    """

    L: jax.Array
    R: jax.Array
    X: jax.Array
    S: jax.Array
    residual: jax.Array
    error: jax.Array | None = None
    false_positives: jax.Array | None = None
    change: jax.Array | None = None
    density: jax.Array | None = None


# The sanity check of an answer (RPCAResult.density): entries of S below this fraction of Y's
# root-mean-square are noise, not outliers, and an S with more than DENSE_FRACTION outliers is not
# sparse.
NOISE_FLOOR = 1e-3
DENSE_FRACTION = 0.5


def outlier_density(S, y_norm, entries, axis_name=None):
    """The fraction of the ``entries`` = n1 n2 entries of S with |S_ij| > 10⁻³ ‖Y‖_F/√(n1 n2)
    (``RPCAResult.density``); ``axis_name``: S is split by rows over that ``shard_map`` mesh
    axis (the counts are summed across it)."""
    floor = NOISE_FLOOR * y_norm / jnp.sqrt(jnp.asarray(entries, y_norm.dtype))
    count = jnp.sum(jnp.abs(S) > floor).astype(jnp.float32)
    if axis_name is not None:
        count = jax.lax.psum(count, axis_name)
    return count / entries


# Divergence: the iterate is non-finite, or ‖L‖_F ‖R‖_F (≥ ‖L Rᵀ‖_F) exceeds this many times ‖Y‖_F.
# A solution has ‖X‖_F ≤ ‖Y‖_F + ‖S‖_F; a step size far too large multiplies the factors each
# iteration until a sparse part that absorbs the whole residual makes it look converged.
GROWTH_LIMIT = 1e4


def diverged(L, R, y_norm, axis_name=None):
    """The RPCA solvers' divergence rule on the factors L, R (or on their Frobenius norms, as 0-d
    arrays); see ``GROWTH_LIMIT``. ``axis_name``: L is split by rows over that ``shard_map``
    mesh axis (its norm is summed across devices), R replicated."""
    size = frob(L, axis_name) * frob(R)
    return ~jnp.isfinite(size) | (size > GROWTH_LIMIT * y_norm)


def frob(x, axis_name=None):
    """‖x‖_F; with ``axis_name``, of the array whose blocks the devices of that ``shard_map`` mesh
    axis hold (the sum of squares is summed across them)."""
    sq = jnp.sum(jnp.square(x))
    if axis_name is not None:
        sq = jax.lax.psum(sq, axis_name)
    return jnp.sqrt(sq)


def spectral_init(A, rank, *, svd, key, oversample=10, power_iters=4, axis_name=None, rows=None):
    """Balanced factors of the best rank-r approximation of A: L = UΣ^{1/2}, R = VΣ^{1/2}.

    Reverse mode: with ``svd="randomized"`` through ``lowrank_jax.linalg.low_rank_factors``'s
    rank-r projection rule applied to the sketch's rank + oversample triplets (fast; the exact
    derivative of the projection of the sketched Q Qᵀ A, valid here because the RPCA iterations
    are equivariant under (L, R) → (LQ, RQ⁻ᵀ)); with ``svd="exact"`` the same rule on all the
    triplets of the thin SVD: the exact derivative of P_r(A) wherever σ_r > σ_{r+1}, also for a
    rank-deficient A and where kept singular values tie (slow at large n).

    ``axis_name``: A is split by rows over that ``shard_map`` mesh axis (``rows`` rows in all), and
    the factors are those of ``lowrank_jax.linalg.randomized_svd``'s row-split form (``svd`` is
    not read there), L split like A and R replicated."""
    if axis_name is not None:
        factors = linalg.randomized_svd(
            A,
            rank,
            key,
            axis_name=axis_name,
            rows=rows,
            oversample=oversample,
            power_iters=power_iters,
        )
        return linalg.balanced_factors(factors)
    return linalg.projected_factors(A, rank, svd, key, oversample, power_iters)


# The arguments every solver shares, declared for ``lowrank_jax._checks.validate``: Y as a
# finite real matrix at a scale whose sums of squares its dtype holds (half precision computed in
# float32), the static rank, the optional diagnostics' X⋆ and supp(S⋆), and the initial SVD's
# choices (the counts are static arguments of the jitted solvers).
MATRIX = _checks.Matrix(scale=True)
RANK = _checks.Rank(of="Y")
X_STAR = _checks.Matrix(like="Y", optional=True)
SUPPORT = _checks.Mask(like="Y")
SVD = _checks.Choice("exact", "randomized")
COUNT = _checks.Count(minimum=0)  # oversample, power_iters
COMMON = {
    "Y": MATRIX,
    "oversample": COUNT,
    "power_iters": COUNT,
    "rank": RANK,
    "X_star": X_STAR,
    "support": SUPPORT,
    "svd": SVD,
}
# Declared after the hyperparameters: inside a caller's trace the default key(0) is staged, and a
# default computed while a staged argument is at hand (alpha_iter = 2·alpha) is staged too, so a
# closed-over alpha = 0.6 would no longer be refused by name.
KEY = _checks.Key()


def declared(*names: str) -> dict:
    """The entries of ``COMMON`` named, in its order (a solver without ``X_star`` or ``svd``
    declares the others)."""
    return {name: spec for name, spec in COMMON.items() if name in names}


def residual_step(Y, L, R, eta, fn, row_args=(), axis_name=None):
    """One scaled-gradient update of (L, R) for f = ½‖L Rᵀ + S − Y‖_F² where S is a row-wise
    function of the residual D = Y − L Rᵀ, given as ``fn(D, *row_args) -> (E, stats)`` with
    E = L Rᵀ + S − Y = S − D:

        L⁺ = L − η E R (RᵀR)⁻¹,   R⁺ = R − η Eᵀ L (LᵀL)⁻¹      (LRPCA eq. 9, both from the old L, R)

    The products E R and Eᵀ L come from ``lowrank_jax.rpca.panels.residual_map_products`` (row
    panels, E never formed whole); the preconditioning and step from
    ``lowrank_jax.transforms.scaled_gradient_step``. Returns (L⁺, R⁺, stats summed over rows).

    ``axis_name``: inside ``shard_map`` with Y, L (and row_args) split by rows over that mesh axis
    and R replicated: Eᵀ L (n2, r), the stats and the Gram LᵀL (r, r) are summed across devices.
    """
    g_l, g_r, stats = residual_map_products(Y, L, R, fn, row_args)
    if axis_name is not None:
        g_r, stats = jax.lax.psum((g_r, stats), axis_name)
    L_new, R_new = scaled_gradient_step((L, R), (g_l, g_r), eta, axis_name)
    return L_new, R_new, stats


def residual_stats(S, E, support_rows=None):
    """Per-panel statistics summed by the solvers: ‖E‖² and, with a support mask, false
    positives."""
    stats = {"sq": jnp.sum(jnp.square(E))}
    if support_rows is not None:
        stats["false_positives"] = jnp.sum((S != 0) & ~support_rows).astype(jnp.int32)
    return stats


STOP_RULES = ("residual", "change")
STOP = _checks.Choice(*STOP_RULES)


def change_stats(S, S_prev):
    """Panel sums for ‖S_k − S_{k−1}‖_F / ‖S_{k−1}‖_F."""
    return {"ds": jnp.sum(jnp.square(S - S_prev)), "sp": jnp.sum(jnp.square(S_prev))}


def factor_change(L, R, L_prev, R_prev):
    """‖L Rᵀ − L_p R_pᵀ‖_F / ‖L_p R_pᵀ‖_F from the factors, O((n1 + n2) r²).

    The difference is [L, L_p] [R, −R_p]ᵀ = Q_1 T_1 T_2ᵀ Q_2ᵀ with thin QRs, so its norm is that of
    the small T_1 T_2ᵀ: accurate to working precision even when the factors' gauge jumps between
    iterations (AltProj's SVD factors), where Gram-matrix formulas lose half the digits."""
    T1 = jnp.linalg.qr(jnp.concatenate([L, L_prev], axis=1), mode="r")
    T2 = jnp.linalg.qr(jnp.concatenate([R, -R_prev], axis=1), mode="r")
    num = jnp.sum(jnp.square(T1 @ T2.T))
    den = jnp.sum((L_prev.T @ L_prev) * (R_prev.T @ R_prev))
    return _ratio(num, den)


def _ratio(num_sq, den_sq):
    """√(num/den), with 0/0 = 0 and x/0 = inf."""
    safe = jnp.where(den_sq > 0, den_sq, 1.0)
    return jnp.where(den_sq > 0, jnp.sqrt(num_sq / safe), jnp.where(num_sq > 0, jnp.inf, 0.0))


def relative_change(L_new, R_new, L, R, ds, sp):
    """The paper's halting quantity (Table 2):
    max(‖X_k − X_{k−1}‖_F/‖X_{k−1}‖_F, ‖S_k − S_{k−1}‖_F/‖S_{k−1}‖_F)."""
    return jnp.maximum(factor_change(L_new, R_new, L, R), _ratio(ds, sp))


def diagnostics(stats, y_norm, L_new, R_new, X_star, prev=None):
    """Per-iteration diagnostics: residual ‖E‖_F/‖Y‖_F, error vs X⋆, false-positive outliers, and
    with ``prev`` = (L, R) the relative change (needs ``stats`` from ``change_stats``)."""
    diag = {"residual": jnp.sqrt(stats["sq"]) / y_norm}
    if prev is not None:
        diag["change"] = relative_change(L_new, R_new, prev[0], prev[1], stats["ds"], stats["sp"])
    if X_star is not None:
        diag["error"] = linalg.relative_error(L_new @ R_new.T, X_star)
    if "false_positives" in stats:
        diag["false_positives"] = stats["false_positives"]
    return diag


def stopping(tol, dtype):
    """``(use_tol, tol)`` for the loop: a declared tolerance as it is, or for ``None`` 0 in
    ``dtype`` with ``use_tol`` False (the whole budget runs)."""
    return tol is not None, (jnp.zeros((), dtype) if tol is None else tol)


def layer_iteration(
    step, state, *, y_norm, tol, use_tol, stop, invalid, result, axis_name=None, max_steps=None
) -> loop.Iteration:
    """An RPCA solver's ``lowrank_jax.loop.Iteration`` (state starting with the factors L, R):
    it stops once ``diag[stop] < tol`` when ``use_tol`` (else it has no stopping rule and runs its
    budget), divergence is judged by ``diverged`` on the factors (L split by rows over the mesh
    axis ``axis_name`` when given), ``invalid`` gives INVALID (the solvers pass
    ``lowrank_jax._checks.any_nan`` of their hyperparameters, ``tol`` among them: a traced
    value that broke its declared rule is NaN), and ``result`` reads the ``RPCAResult`` from
    the loop's output; ``max_steps`` bounds the steps where the method defines a number (LRPCA's
    K learned layers)."""
    return loop.iteration(
        state,
        step,
        stop=(lambda s, d: d[stop] < tol) if use_tol else None,
        diverged=lambda s, d: diverged(s[0], s[1], y_norm, axis_name),
        invalid=invalid,
        result=result,
        max_steps=max_steps,
    )


def make_result(L, R, S, loop_result, y_norm, *, entries=None, axis_name=None):
    """The ``RPCAResult`` of a loop whose diagnostics are those of ``diagnostics`` (an
    INVALID run's are blank: ``lowrank_jax.loop.run_until``'s ``invalid``), with S's
    ``outlier_density`` (``y_norm`` = ‖Y‖_F; ``entries`` = n1 n2, default S's size; S split
    over the mesh axis ``axis_name`` when given): a run that ended normally with a dense S is
    UNRELIABLE."""
    last = loop_result.final
    density = outlier_density(S, y_norm, S.size if entries is None else entries, axis_name)
    ended = (loop_result.status == Status.CONVERGED) | (loop_result.status == Status.MAX_ITER)
    status = jnp.where(ended & (density > DENSE_FRACTION), Status.UNRELIABLE, loop_result.status)
    return RPCAResult(
        n_iter=loop_result.n_iter,
        status=status.astype(jnp.int32),
        history=loop_result.history,
        L=L,
        R=R,
        X=L @ R.T,
        S=S,
        residual=last["residual"],
        error=last.get("error"),
        false_positives=last.get("false_positives"),
        change=last.get("change"),
        density=density,
    )


def unreliable_message(solver: str, remedy: str):
    """The warning of an UNRELIABLE run of ``solver`` (``lowrank_jax.result.finish``'s
    ``unreliable``): the outlier density found and ``remedy``, what to do instead."""

    def message(out: RPCAResult) -> str:
        density = np.asarray(out.density, dtype=np.float64)
        return (
            f"{solver}: the sparse part S is dense ({np.max(density):.0%} of its entries are "
            "outliers, status UNRELIABLE): robust PCA assumes a sparse S, and this answer's X is "
            f"not to be trusted. {remedy}"
        )

    return message
