"""ScaledGD for robust PCA (Tong, Ma, Chi, JMLR 2021), the LRPCA paper's main baseline.

    S₀ = T_α₀(Y);  L₀, R₀ = balanced factors of SVD_r(Y − S₀)
    for k = 0, 1, ...:
        Sₖ₊₁ = T_α̃(Y − Lₖ Rₖᵀ)       (T: the top-fraction sparsifier, eq. 4)
        Lₖ₊₁, Rₖ₊₁ = scaled-gradient step with E = Lₖ Rₖᵀ + Sₖ₊₁ − Y

Defaults: α₀ = α and α̃ = 2α as in the authors' reference code; η = 2/3, the largest step its
convergence theorem admits (their code uses 0.5, which takes about a third more iterations).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from lowrank_jax import _checks, loop
from lowrank_jax.precision import full_precision
from lowrank_jax.prox import apply_top_fraction, sparsify_top_fraction, top_fraction_thresholds
from lowrank_jax.result import finish
from lowrank_jax.rpca._common import (
    COMMON,
    KEY,
    STOP,
    RPCAResult,
    change_stats,
    diagnostics,
    frob,
    layer_iteration,
    make_result,
    residual_stats,
    residual_step,
    spectral_init,
    stopping,
    unreliable_message,
)


@full_precision
@_checks.validate(
    alpha=_checks.Hyper(ndim=0, high=1, dtype_of="Y"),
    eta=_checks.Hyper(ndim=0, low=0, low_open=True, dtype_of="Y"),
)
def scaledgd_step(Y, L, R, alpha, eta, cuts=None, support=None, prev=None):
    """One ScaledGD iteration: the sparsifier T_α, then one scaled-gradient step on (L, R).

        S⁺ = T_α(Y − L Rᵀ),   E = L Rᵀ + S⁺ − Y,
        L⁺ = L − η E R (RᵀR)⁻¹,   R⁺ = R − η Eᵀ L (LᵀL)⁻¹

    (Tong, Ma, Chi, JMLR 2021), both factors from the old (L, R). T_α keeps the entries among the
    α-fraction largest in magnitude of both their row and their column (ties at the cut-off kept).

    Args:
      Y: (n1, n2) observation.
      L: (n1, r) and R: (n2, r), the current factors.
      alpha: the fraction α ∈ [0, 1] of T_α (scalar, in Y's dtype; may be traced: a traced one
        outside [0, 1] is NaN, and so is the step).
      eta: step size η > 0 (scalar, likewise).
      cuts: (row_cut (n1,), col_cut (n2,)) of the previous iteration, warm starts of the exact
        selection only (they never change the result); default None, a cold start.
      support: boolean (n1, n2) mask of supp(S⋆), to count #{S⁺ ≠ 0 outside it}; default None.
      prev: (L_p, R_p), the factors whose residual the cut-offs ``cuts`` sparsified into the
        current S, to also sum ‖S⁺ − S‖_F² and ‖S‖_F²; default None.

    Returns:
      ``(L⁺, R⁺, stats, cuts⁺)``: the new factors; ``stats`` a dict of sums, ``"sq"`` = ‖E‖_F²
      (and ``"false_positives"`` with ``support``, ``"ds"`` and ``"sp"`` with ``prev``); the new
      cut-offs (row_cut, col_cut) for the next call.
    """
    D = Y - L @ R.T
    row_guess, col_guess = (None, None) if cuts is None else cuts
    row_cut, col_cut = top_fraction_thresholds(
        jnp.abs(D), alpha, row_guess=row_guess, col_guess=col_guess
    )

    def fn(D, row_cut_rows, *rows):
        S = apply_top_fraction(D, jnp.abs(D), row_cut_rows, col_cut)
        E = S - D
        stats = residual_stats(S, E, rows[0] if support is not None else None)
        if prev is not None:
            y, l_prev, prev_row_cut = rows[-3:]
            # as the previous step formed it: same entries at the cut-offs
            D_prev = y - l_prev @ prev[1].T
            stats.update(
                change_stats(
                    S, apply_top_fraction(D_prev, jnp.abs(D_prev), prev_row_cut, col_guess)
                )
            )
        return E, stats

    row_args = (row_cut,) + (() if support is None else (support,))
    if prev is not None:
        row_args += (Y, prev[0], row_guess)
    L_new, R_new, stats = residual_step(Y, L, R, eta, fn, row_args)
    return L_new, R_new, stats, (row_cut, col_cut)


def _scaledgd_iteration(
    Y,
    alpha_init,
    alpha_iter,
    eta,
    tol,
    X_star,
    support,
    key,
    *,
    rank,
    use_tol,
    svd,
    oversample,
    power_iters,
    stop="residual",
) -> loop.Iteration:
    y_norm = frob(Y)
    y_norm = jnp.where(y_norm > 0, y_norm, 1.0)
    S0 = sparsify_top_fraction(Y, alpha_init, gather=False)  # once per run: the smaller program
    L0, R0 = spectral_init(
        Y - S0, rank, svd=svd, key=key, oversample=oversample, power_iters=power_iters
    )
    # A traced fraction outside [0, 1] (a sweep point; concrete ones raise) arrives as NaN and the
    # run is INVALID. With α_iter > 1 the iterations' T_α kept every entry, so S = Y − X and X
    # never moved: a frozen, finite, wrong run (a vmap over α up to 0.6 with the default 2α).
    invalid = _checks.any_nan(alpha_init, alpha_iter, eta, tol)
    n1, n2 = Y.shape

    track = stop == "change"

    def step(k, state):
        L, R, L_p, R_p, cuts = state
        L_new, R_new, stats, cuts = scaledgd_step(
            Y, L, R, alpha_iter, eta, cuts, support, (L_p, R_p) if track else None
        )
        diag = diagnostics(stats, y_norm, L_new, R_new, X_star, (L, R) if track else None)
        if track:  # the first iteration has no previous S of its own kind: never stop there
            diag["change"] = jnp.where(k == 0, jnp.inf, diag["change"])
        return (L_new, R_new, L, R, cuts), diag

    def result(out):
        L, R, L_prev, R_prev, (row_cut, col_cut) = out.state
        D = Y - L_prev @ R_prev.T
        S = jnp.where(out.n_iter > 0, apply_top_fraction(D, jnp.abs(D), row_cut, col_cut), S0)
        S = jnp.where(invalid, jnp.nan, S)
        return make_result(L, R, S, out, y_norm)

    # Initial cut-offs: the first step starts its selection cold (the guesses are only hints).
    cuts0 = (jnp.zeros((n1,), Y.dtype), jnp.zeros((n2,), Y.dtype))
    return layer_iteration(
        step,
        (L0, R0, L0, R0, cuts0),
        y_norm=y_norm,
        tol=tol,
        use_tol=use_tol,
        stop=stop,
        invalid=invalid,
        result=result,
    )


@functools.partial(
    jax.jit,
    static_argnames=(
        "rank",
        "budget",
        "use_tol",
        "svd",
        "oversample",
        "power_iters",
        "stop",
        "differentiable",
    ),
)
def _scaledgd(Y, *args, budget, differentiable=False, **static):
    it = _scaledgd_iteration(Y, *args, **static)
    return it.result(loop.run(it, max_iter=budget, differentiable=differentiable))


def _ties_flooded_the_support(S, alpha_init, alpha_iter) -> str | None:
    """T_α keeps at most ⌊α n2⌋ entries of a row unless values tie at its cut-off, and then keeps
    them all. On data with repeated values (binary, counts, saturated pixels) that can be most of Y:
    S absorbs the low-rank part and X stays 0. The warning to give when the final S holds more
    entries than T_α can keep without ties (one count, not another T_α), else None. Evaluated on
    concrete results and α only (``lowrank_jax._checks.when_concrete``)."""
    n1, n2 = S.shape
    alpha = max(float(alpha_init), float(alpha_iter))
    kept = int(jnp.count_nonzero(S))
    if kept <= alpha * n1 * n2 + n1:
        return None
    return (
        f"ScaledGD's sparsifier kept {kept / (n1 * n2):.0%} of Y's entries at "
        f"alpha = {alpha:.3g}: values tied at its cut-offs (repeated values such as binary "
        "or saturated data) are all kept, so S absorbs the low-rank part. Use altproj or "
        "lrpca, or break the ties (add noise far below the outliers' size)."
    )


# Fractions α ∈ [0, 1] in Y's dtype, arrays that may be traced (vmapped, swept): a traced value
# outside the range is NaN and the run reports INVALID.
_FRACTION = _checks.Hyper(ndim=0, high=1, dtype_of="Y")


# What ScaledGD and its iteration accept (key last: its default is staged inside a caller's jit,
# and a default computed from the arguments, such as 2·alpha, is evaluated eagerly only when every
# argument before it holds values).
_ARGS = dict(
    **COMMON,
    alpha=_FRACTION,
    alpha_iter=_checks.Hyper(
        ndim=0,
        high=1,
        dtype_of="Y",
        default=lambda a: 2 * a["alpha"],
        label="alpha_iter (default 2·alpha: pass alpha_iter ≤ 1)",
    ),
    alpha_init=_checks.Hyper(ndim=0, high=1, dtype_of="Y", default=lambda a: a["alpha"]),
    eta=_checks.Hyper(ndim=0, low=0, low_open=True, dtype_of="Y"),
    tol=_checks.Tol(dtype_of="Y"),
    stop=STOP,
)

_DIVERGED = (
    "ScaledGD diverged (non-finite or exploding factors): the step eta is too large for these "
    "data (theory: eta <= 2/3), or alpha_iter is too small to remove the outliers"
)
_INVALID = (
    "ScaledGD: alpha_iter must lie in [0, 1] (as must alpha and alpha_init), eta must be >= 0 "
    "and tol > 0 (the result is NaN)"
)


@full_precision
@_checks.validate(
    **_ARGS,
    differentiable=_checks.Flag(),
    throw=_checks.Flag(),
    max_iter=_checks.Count(minimum=0),
    key=KEY,
)
def scaledgd(
    Y,
    rank,
    alpha,
    *,
    eta=2 / 3,
    tol=1e-6,
    max_iter=500,
    alpha_iter=None,
    alpha_init=None,
    X_star=None,
    support=None,
    key=None,
    svd="randomized",
    oversample=10,
    power_iters=4,
    stop="residual",
    differentiable=False,
    throw=True,
) -> RPCAResult:
    """Robust PCA by ScaledGD: S by the top-fraction sparsifier T_α, (L, R) by scaled gradients.

    From S₀ = T_α₀(Y) (α₀ = ``alpha_init``) and the balanced factors L₀, R₀ of SVD_r(Y − S₀),
    iteration k is

        Sₖ₊₁ = T_α̃(Y − Lₖ Rₖᵀ),   E = Lₖ Rₖᵀ + Sₖ₊₁ − Y,
        Lₖ₊₁ = Lₖ − η E Rₖ (RₖᵀRₖ)⁻¹,   Rₖ₊₁ = Rₖ − η Eᵀ Lₖ (LₖᵀLₖ)⁻¹,

    (Tong, Ma, Chi, JMLR 2021) with T_α keeping the entries among the α-fraction largest in
    magnitude of both their row and their column (eq. 4 of Cai, Liu, Yin 2021; ties at the cut-off
    are kept; the exact cut-offs come from ``lowrank_jax.selection.kth_largest``) and
    α̃ = ``alpha_iter``. Defaults follow the authors' reference code.

    Args:
      Y: (n1, n2) observation.
      rank: target rank r, 1 ≤ r ≤ min(n1, n2) (static).
      alpha: outlier fraction estimate α ∈ [0, 1] (scalar; may be traced, ``vmap`` over it works).
      eta: step size η > 0 (scalar; may be traced), default 2/3, the theory's largest (the
        authors' code: 0.5); 0, which would return the start as the answer, is refused.
      tol: stop once ‖Y − Xₖ₋₁ − Sₖ‖_F/‖Y‖_F < tol (> 0, default 1e-6), or, with
        ``stop="change"``, once the paper's relative change max(‖ΔX‖_F/‖X‖_F, ‖ΔS‖_F/‖S‖_F) < tol.
        None runs exactly ``max_iter`` iterations. A tolerance stop is a ``while_loop``, which
        ``jax.grad`` cannot pass: for gradients pass ``differentiable=True`` (a masked ``scan`` of
        ``max_iter`` steps) or ``tol=None``. Forward mode (``jax.jvp``, ``jacfwd``) is refused
        either way: the step kernel and the rank-r projection carry custom reverse-mode rules.
      max_iter: the iteration budget (static, ≥ 0; default 500).
      alpha_iter: the fraction α̃ ∈ [0, 1] of the iterations, default 2α (the reference code).
      alpha_init: the fraction α₀ ∈ [0, 1] of the initialisation, default α.
      X_star: (n1, n2) ground truth, to record ‖X_k − X⋆‖_F/‖X⋆‖_F per iteration (default None).
      support: boolean (n1, n2) mask of supp(S⋆), to record #{S_k ≠ 0 outside it} (default None).
      key: ``jax.random`` key or integer seed of the randomized initial SVD (default key(0)).
      svd: ``"randomized"`` (default) or ``"exact"``, the initial SVD.
      oversample: the randomized SVD's oversampling (static, ≥ 0; default 10).
      power_iters: the randomized SVD's power iterations (static, ≥ 0; default 4).
      stop: what ``tol`` bounds, ``"residual"`` (default) or ``"change"``.
      differentiable: with ``tol``, run a masked ``scan`` that ``jax.grad`` can pass (default
        False).
      throw: with a run that diverges (non-finite factors, or ‖L‖_F‖R‖_F beyond 10⁴ ‖Y‖_F), raise
        ``RuntimeError`` (True, default; also inside ``jit``/``vmap``) or only report
        ``status == Status.DIVERGED`` (False: a sweep keeps its other points). A traced α, α̃,
        α₀, η or ``tol`` that breaks its rule (a concrete one raises ``ValueError``) gives
        ``Status.INVALID`` and NaN X and S, raised the same way.

    Returns:
      ``RPCAResult``: ``status``, ``n_iter``, L, R, X = L Rᵀ, S = T_α̃(Y − Xₖ₋₁), the final
      ``residual`` (and ``error``, ``false_positives``, ``change`` when asked for), their
      ``history`` and S's ``density`` (above one half, an α too large for a sparse S:
      ``Status.UNRELIABLE``, and a direct call warns). Because T_α keeps ties, data with many
      repeated values (binary, saturated) can put most of Y into S; a ``UserWarning`` says so when
      the final S holds more entries than T_α keeps without ties.

    Example:
        ```python
        import jax
        from lowrank_jax import datasets, rpca

        # Y = X⋆ + S⋆
        p = datasets.rpca_problem(jax.random.key(0), 300, 300, rank=5, alpha=0.1)
        out = rpca.scaledgd(p.Y, 5, alpha=0.1, tol=1e-5, X_star=p.X)
        # RPCAResult(status=CONVERGED, n_iter=66, ..., error=2e-05, ...),
        # error = ‖X − X⋆‖_F / ‖X⋆‖_F
        print(out)
        ```
    """
    use_tol, tol = stopping(tol, Y.dtype)
    out = _scaledgd(
        Y,
        alpha_init,
        alpha_iter,
        eta,
        tol,
        X_star,
        support,
        key,
        rank=rank,
        budget=max_iter,
        use_tol=use_tol,
        svd=svd,
        oversample=oversample,
        power_iters=power_iters,
        stop=stop,
        differentiable=differentiable,
    )
    out = finish(
        out,
        throw,
        diverged=_DIVERGED,
        invalid=_INVALID,
        unreliable=unreliable_message(
            "ScaledGD",
            "T_α keeps the fraction alpha_iter of each row and column: lower alpha (and "
            "alpha_iter) to the outlier fraction of the data.",
        ),
    )
    ties = _checks.when_concrete(_ties_flooded_the_support, out.S, alpha_init, alpha_iter)
    if ties is not None:
        _checks.warn_caller(ties)
    return out


@full_precision
@_checks.validate(**_ARGS, key=KEY)
def scaledgd_iteration(
    Y,
    rank,
    alpha,
    *,
    eta=2 / 3,
    tol=1e-6,
    alpha_iter=None,
    alpha_init=None,
    X_star=None,
    support=None,
    key=None,
    svd="randomized",
    oversample=10,
    power_iters=4,
    stop="residual",
) -> loop.Iteration:
    """ScaledGD as an initial state and a step, to run, warm-start or stop as one wishes.

    The iteration that ``scaledgd`` runs (same arguments and equations): its state is
    ``(L, R, L_prev, R_prev, cuts)``, the factors after and before the last step and T_α's cut-offs
    (warm starts of the selection); its diagnostics those of ``scaledgd``'s history. So

        it = scaledgd_iteration(Y, r, α, ...)
        it.result(loop.run(it, max_iter=m))
            == scaledgd(Y, r, α, ..., max_iter=m, throw=False)

    Args:
      Y: (n1, n2) observation.
      rank: target rank r, 1 ≤ r ≤ min(n1, n2) (static).
      alpha: outlier fraction estimate α ∈ [0, 1] (scalar; may be traced).
      eta: step size η > 0 (scalar; may be traced), default 2/3.
      tol: ``it.stop`` is ``diag[stop] < tol`` (> 0, default 1e-6); None: no stopping rule.
      alpha_iter: the fraction α̃ ∈ [0, 1] of the iterations, default 2α.
      alpha_init: the fraction α₀ ∈ [0, 1] of the initialisation, default α.
      X_star: (n1, n2) ground truth, to record the error per iteration (default None).
      support: boolean (n1, n2) mask of supp(S⋆), to record false positives (default None).
      key: ``jax.random`` key or integer seed of the randomized initial SVD (default key(0)).
      svd: ``"randomized"`` (default) or ``"exact"``, the initial SVD.
      oversample: the randomized SVD's oversampling (static, ≥ 0; default 10).
      power_iters: the randomized SVD's power iterations (static, ≥ 0; default 4).
      stop: what ``tol`` bounds, ``"residual"`` (default) or ``"change"``.

    Returns:
      A ``lowrank_jax.loop.Iteration`` whose ``result`` gives an ``RPCAResult`` (no
      exception on failure: read its ``status``, or pass it to
      ``lowrank_jax.result.finish``).

    Example:
        ```python
        import jax
        from lowrank_jax import datasets, loop, rpca

        p = datasets.rpca_problem(jax.random.key(0), 200, 200, rank=3, alpha=0.1)
        it = rpca.scaledgd_iteration(p.Y, 3, alpha=0.1, X_star=p.X)
        first = loop.run(it, max_iter=10)  # ten steps
        warm = it._replace(state=first.state)  # ... then on from there
        print(it.result(loop.run(warm, max_iter=100)))  # status=CONVERGED, …
        ```
    """
    use_tol, tol = stopping(tol, Y.dtype)
    return _scaledgd_iteration(
        Y,
        alpha_init,
        alpha_iter,
        eta,
        tol,
        X_star,
        support,
        key,
        rank=rank,
        use_tol=use_tol,
        svd=svd,
        oversample=oversample,
        power_iters=power_iters,
        stop=stop,
    )
