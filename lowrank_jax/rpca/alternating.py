"""AltProj: non-convex robust PCA by alternating projections (Netrapalli et al., NeurIPS 2014).

Stage-wise in the rank. Stage k = 1..r alternates

    L ← P_k(Y − S)                              (best rank-k approximation)
    ζ ← β (σₖ₊₁(Y − S) + (1/2)ᵗ σₖ(Y − S))      (adaptive threshold, t: the
                                                 iteration within the stage)
    S ← H_ζ(Y − L)                              (hard threshold: keep |·| > ζ)

starting from S = H_ζ₀(Y) with ζ₀ = β₀ σ₁(Y). Constants chosen here (the paper's are proof
artefacts):

* β = ``threshold_scale`` = 1/(2 (n1 n2)^(1/4)) by default (as in the AccAltProj reference
  implementation; the theory's 4μ²r/n needs the unknown incoherence μ), β_0 =
  ``threshold_scale_init`` = 4β.
* A stage k < r ends when the decaying term of its threshold has fallen to the next singular value,
  (1/2)ᵗ⁺¹ σₖ ≤ σₖ₊₁, or after ``inner_iters`` = 10 iterations, instead of the proof's
  T = 10 log(nβ‖Y‖₂/ε): with the rank given, the early stages only peel off the largest outliers.
* The last stage (k = r) runs until ‖Y − L − S‖_F/‖Y‖_F < ``tol`` or ``max_iter`` iterations in all.
* P_k and σₖ₊₁ come from one randomized SVD of width r + 1 + ``oversample`` per iteration,
  warm-started from the previous iteration's right singular block (subspace iteration) with
  ``power_iters`` power steps, so its accuracy keeps improving while Y − S settles.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from lowrank_jax import _checks, linalg, loop
from lowrank_jax.precision import full_precision
from lowrank_jax.prox import hard_threshold
from lowrank_jax.result import finish
from lowrank_jax.rpca._common import (
    KEY,
    STOP,
    RPCAResult,
    declared,
    diverged,
    frob,
    make_result,
    relative_change,
    stopping,
    unreliable_message,
)


def _altproj_iteration(
    Y,
    threshold_scale,
    threshold_scale_init,
    tol,
    X_star,
    support,
    key,
    *,
    rank,
    inner_iters,
    oversample,
    power_iters,
    stop="residual",
) -> loop.Iteration:
    n1, n2 = Y.shape
    width = min(rank + 1 + oversample, n1, n2)
    y_norm = frob(Y)
    y_norm = jnp.where(y_norm > 0, y_norm, 1.0)
    first = linalg.randomized_svd(Y, width, key, oversample=0, power_iters=4)
    S0 = hard_threshold(Y, threshold_scale_init * first.s[0])
    idx = jnp.arange(width)

    def step(_, state):
        stage, t, S, V, L_p, R_p = state
        svd = linalg.randomized_svd(Y - S, width, start=V, power_iters=power_iters)
        keep = (idx < stage).astype(Y.dtype)
        sigma_next = (
            svd.s[jnp.minimum(stage, width - 1)] if width > rank else jnp.zeros((), Y.dtype)
        )
        zeta = threshold_scale * (sigma_next + 0.5**t * svd.s[stage - 1])
        root = jnp.sqrt(svd.s * keep)
        L_f, R_f = (svd.U * root)[:, :rank], (svd.V * root)[:, :rank]
        D = Y - L_f @ R_f.T
        S_new = hard_threshold(D, zeta)
        diag = {"residual": frob(D - S_new) / y_norm}
        settled = 0.5 ** (t + 1) * svd.s[stage - 1] <= sigma_next
        if stop == "change":
            s_sq = jnp.sum(jnp.square(S))
            diag["change"] = relative_change(
                L_f, R_f, L_p, R_p, jnp.sum(jnp.square(S_new - S)), s_sq
            )
            # While the threshold is above every outlier, S stays 0 and X stands still: a small
            # change then says nothing about convergence. The change rule applies once S holds
            # something (the previous S: its norm is at hand, no extra pass), the threshold has
            # settled, or the pair already fits Y to tol (no outliers: S rightly stays 0).
            diag["ready"] = (s_sq > 0) | settled | (diag["residual"] < tol)
        if X_star is not None:
            diag["error"] = linalg.relative_error(Y - D, X_star)
        if support is not None:
            diag["false_positives"] = jnp.sum((S_new != 0) & ~support).astype(jnp.int32)
        # Leave stage k once the decaying part of the threshold has reached the (k+1)-th singular
        # value (the threshold is then ≈ 2βσ_{k+1}: nothing more to gain at this rank), or after
        # inner_iters iterations.
        advance = (stage < rank) & (settled | (t + 1 >= inner_iters))
        stage_new = jnp.where(advance, stage + 1, stage)
        t_new = jnp.where(advance, 0, t + 1)
        return (stage_new, t_new, S_new, svd.V, L_f, R_f), diag

    zeros_l, zeros_r = jnp.zeros((n1, rank), Y.dtype), jnp.zeros((n2, rank), Y.dtype)
    state = (jnp.asarray(1, jnp.int32), jnp.asarray(0, jnp.int32), S0, first.V, zeros_l, zeros_r)

    def done(s, d):
        ready = d["ready"] if stop == "change" else True
        return (s[0] == rank) & (d[stop] < tol) & ready

    def result(out):
        _, _, S, _, L, R = out.state
        return make_result(L, R, S, out, y_norm)

    # a traced β, β_0 or tol that broke its declared rule arrives as NaN: INVALID, not a NaN run
    invalid = _checks.any_nan(tol, threshold_scale, threshold_scale_init)
    return loop.iteration(
        state,
        step,
        stop=done,
        diverged=lambda s, d: diverged(s[4], s[5], y_norm) | ~jnp.all(jnp.isfinite(s[2])),
        invalid=invalid,
        result=result,
    )


@functools.partial(
    jax.jit,
    static_argnames=("rank", "max_iter", "inner_iters", "oversample", "power_iters", "stop"),
)
def _altproj(Y, *args, max_iter, **static):
    it = _altproj_iteration(Y, *args, **static)
    out = loop.run(it, max_iter=max_iter)
    stage, t = out.state[:2]
    # the rank X was formed at: the last iteration's stage (t = 0 when that iteration advanced it)
    return it.result(out), stage - (t == 0)


def _below_full_rank(a) -> str:
    """The message of ``_BELOW_FULL_RANK``."""
    n1, n2 = a["Y"].shape
    return (
        f"altproj needs rank < min(n1, n2) = {min(n1, n2)}, got rank = {a['rank']}: its threshold "
        "β(σ_{r+1} + ½ᵗσ_r) needs a σ_{r+1}, and at full rank Y − S is rank r for every S, so "
        "any S is a fixed point. lrpca and scaledgd take rank = min(n1, n2)"
    )


# AltProj's rank leaves a σ_{r+1} (static: the rank and Y's shape).
_BELOW_FULL_RANK = _checks.Rule(
    lambda a: a["rank"] < min(a["Y"].shape), _checks.Message(_below_full_rank), uses=()
)


def _default_threshold_scale(a) -> float:
    """β = 1/(2 (n1 n2)^{1/4}), as in the AccAltProj reference implementation."""
    n1, n2 = a["Y"].shape
    return 1.0 / (2.0 * (n1 * n2) ** 0.25)


# β, β_0 > 0 in Y's dtype, arrays that may be traced
_SCALE = {"ndim": 0, "low": 0, "low_open": True, "dtype_of": "Y"}


def _stage_short_of(reached, n_iter, rank: int, max_iter: int) -> int | None:
    """The stage a run ended in when it used its whole budget before the last stage, else None.
    Only a run that used its whole budget: one stopped by tol may have formed X at a lower rank in
    its last iteration (the one that moved into stage r) because Y is fit to tol there (rank Y < r,
    or Y = 0); raising max_iter would change nothing."""
    stage = int(reached)
    return stage if stage < rank and int(n_iter) == max_iter else None


# What AltProj and its iteration accept (key last: its default is staged inside a caller's jit).
_ARGS = dict(
    **declared("Y", "oversample", "power_iters", "rank", "X_star", "support"),
    threshold_scale=_checks.Hyper(**_SCALE, default=_default_threshold_scale),
    threshold_scale_init=_checks.Hyper(**_SCALE, default=lambda a: 4 * a["threshold_scale"]),
    tol=_checks.Tol(dtype_of="Y"),
    stop=STOP,
)


@full_precision
@_checks.validate(
    _BELOW_FULL_RANK,
    **_ARGS,
    max_iter=_checks.Count(),
    inner_iters=_checks.Count(),
    throw=_checks.Flag(),
    key=KEY,
)
def altproj(
    Y,
    rank,
    *,
    threshold_scale=None,
    threshold_scale_init=None,
    tol=1e-6,
    max_iter=500,
    inner_iters=10,
    X_star=None,
    support=None,
    key=None,
    oversample=3,
    power_iters=1,
    stop="residual",
    throw=True,
) -> RPCAResult:
    """Robust PCA by alternating projections: AltProj, stage-wise in the rank, hard thresholding.

    Stage k = 1, …, r alternates, from S = H_ζ₀(Y) with ζ₀ = β₀ σ₁(Y) (Netrapalli et al.,
    NeurIPS 2014),

        L ← P_k(Y − S),   ζ ← β (σₖ₊₁(Y − S) + (1/2)ᵗ σₖ(Y − S)),   S ← H_ζ(Y − L),

    with P_k the best rank-k approximation, H_ζ the hard threshold (keep |·| > ζ) and t the
    iteration within the stage. A stage k < r ends once (1/2)ᵗ⁺¹ σₖ ≤ σₖ₊₁ or after
    ``inner_iters`` iterations; the last stage (k = r) runs until ``tol``.

    Args:
      Y: (n1, n2) observation.
      rank: target rank r, 1 ≤ r < min(n1, n2) (static): the threshold needs a σᵣ₊₁.
      threshold_scale: β, the threshold's constant (scalar, > 0; may be traced); default
        1/(2 (n1 n2)^(1/4)).
      threshold_scale_init: β₀ of the first threshold β₀ σ₁(Y) (scalar, > 0); default 4β.
      tol: stop, in the last stage, once ‖Y − L − S‖_F/‖Y‖_F < tol (default 1e-6), or with
        ``stop="change"`` once the paper's relative change max(‖ΔX‖_F/‖X‖_F, ‖ΔS‖_F/‖S‖_F) < tol.
        The change rule applies only once S holds an entry, the stage's threshold has settled
        (0.5ᵗ⁺¹ σᵣ ≤ σᵣ₊₁) or the residual is below tol: while the threshold is above every
        outlier, S stands still at 0 and so does X. With a tol below the noise floor, entries at
        the threshold enter and leave S and the change rule may take many iterations. None runs
        exactly ``max_iter`` iterations.
      max_iter: total iteration budget over all stages (static, ≥ 1; default 500).
      inner_iters: the most iterations of each stage k < r (static, ≥ 1; default 10).
      X_star: (n1, n2) ground truth, to record ‖X_k − X⋆‖_F/‖X⋆‖_F per iteration (default None).
      support: boolean (n1, n2) mask of supp(S⋆), to record #{S_k ≠ 0 outside it} (default None).
      key: ``jax.random`` key or integer seed of the first randomized SVD (default key(0)).
      oversample: sketch oversampling of each iteration's SVD (static, ≥ 0; default 3).
      power_iters: power steps of each iteration's SVD (static, ≥ 0; default 1).
      stop: what ``tol`` bounds, ``"residual"`` (default) or ``"change"``.
      throw: with a non-finite or exploding iterate (Y's scale overflowing its dtype), raise
        ``RuntimeError`` (True, default; also inside ``jit``/``vmap``) or only report
        ``status == Status.DIVERGED`` (False).

    Returns:
      ``RPCAResult``: ``status``, ``n_iter``, L, R, X = L Rᵀ, S, the final ``residual`` of
      the pair (L, S) after the last iteration (and ``error``, ``false_positives``, ``change`` when
      asked for), their ``history`` and S's ``density`` (above one half: ``Status.UNRELIABLE``,
      and a direct call warns). AltProj always stops by tolerance (a ``while_loop``), so
      ``jax.grad`` cannot pass it: for gradients use ``lrpca`` or ``scaledgd`` with a fixed number
      of iterations. Called directly, a ``max_iter`` that runs out before the last stage warns: X
      then has the rank of the stage reached, below r (under a transformation nothing is said;
      ``status == Status.MAX_ITER`` tells).

    Example:
        ```python
        import jax
        from lowrank_jax import datasets, rpca

        p = datasets.rpca_problem(jax.random.key(0), 300, 300, rank=5, alpha=0.1)
        out = rpca.altproj(p.Y, 5, tol=1e-5, X_star=p.X)  # stages of rank 1, 2, …, 5
        print(out)  # status=CONVERGED, n_iter=17, error ≈ 4e-6
        ```
    """
    _, tol = stopping(tol, Y.dtype)  # None: all max_iter iterations (no residual is below 0)
    out, reached = _altproj(
        Y,
        threshold_scale,
        threshold_scale_init,
        tol,
        X_star,
        support,
        key,
        rank=rank,
        max_iter=max_iter,
        inner_iters=inner_iters,
        oversample=oversample,
        power_iters=power_iters,
        stop=stop,
    )
    out = finish(
        out,
        throw,
        diverged="AltProj produced a non-finite iterate: Y's scale overflows its dtype "
        "(rescale Y or use float64)",
        invalid="AltProj: tol must be >= 0 and threshold_scale, threshold_scale_init > 0 "
        "(the result is NaN)",
        unreliable=unreliable_message(
            "AltProj",
            "Its thresholds follow the singular values of Y − S: a rank too low for the data, or "
            "data that are not low rank plus sparse, leave the rest to S; check the rank.",
        ),
    )
    stage = _checks.when_concrete(
        lambda r, n: _stage_short_of(r, n, rank, max_iter), reached, out.n_iter
    )
    if stage is not None:
        _checks.warn_caller(
            f"altproj's budget max_iter = {max_iter} ran out in stage {stage} of {rank}: "
            f"X has rank {stage}, not {rank}. Each stage k < r takes up to inner_iters = "
            f"{inner_iters} iterations; raise max_iter (or lower inner_iters)"
        )
    return out


@full_precision
@_checks.validate(_BELOW_FULL_RANK, **_ARGS, inner_iters=_checks.Count(), key=KEY)
def altproj_iteration(
    Y,
    rank,
    *,
    threshold_scale=None,
    threshold_scale_init=None,
    tol=1e-6,
    inner_iters=10,
    X_star=None,
    support=None,
    key=None,
    oversample=3,
    power_iters=1,
    stop="residual",
) -> loop.Iteration:
    """AltProj as an initial state and a step, to run, warm-start or stop as one wishes.

    The iteration that ``altproj`` runs (same arguments and equations): its state is
    ``(stage, t, S, V, L, R)``, the stage k (the rank of the current projection), the iteration t
    within it, the sparse estimate S, the right singular block that warm-starts the next SVD, and
    the factors of the last iteration (X = L Rᵀ); its diagnostics are those of ``altproj``'s
    history. The step reads no iteration index: a run resumed from a state goes on as the whole
    run would. So

        it = altproj_iteration(Y, r, ...)
        it.result(loop.run(it, max_iter=m))
            == altproj(Y, r, ..., max_iter=m, throw=False)

    Args:
      Y: (n1, n2) observation.
      rank: target rank r, 1 ≤ r < min(n1, n2) (static).
      threshold_scale: β, the threshold's constant (scalar, > 0; may be traced); default
        1/(2 (n1 n2)^(1/4)).
      threshold_scale_init: β₀ of the first threshold β₀ σ₁(Y) (scalar, > 0); default 4β.
      tol: ``it.stop`` holds in the last stage once ``diag[stop] < tol`` (with ``stop="change"``
        only once S holds an entry, the threshold has settled or the residual is below tol, as in
        ``altproj``); default 1e-6. None: a rule never met, so a run takes its whole budget
        unless it diverges.
      inner_iters: the most iterations of each stage k < r (static, ≥ 1; default 10).
      X_star: (n1, n2) ground truth, to record the error per iteration (default None).
      support: boolean (n1, n2) mask of supp(S⋆), to record false positives (default None).
      key: ``jax.random`` key or integer seed of the first randomized SVD (default key(0)).
      oversample: sketch oversampling of each iteration's SVD (static, ≥ 0; default 3).
      power_iters: power steps of each iteration's SVD (static, ≥ 0; default 1).
      stop: what ``tol`` bounds, ``"residual"`` (default) or ``"change"``.

    Returns:
      A ``lowrank_jax.loop.Iteration`` whose ``result`` gives an ``RPCAResult`` (no
      exception on failure: read its ``status``, or pass it to
      ``lowrank_jax.result.finish``); ``state[0]`` of the run's final state is the stage
      reached.

    Example:
        ```python
        import jax
        from lowrank_jax import datasets, loop, rpca

        p = datasets.rpca_problem(jax.random.key(0), 300, 300, rank=5, alpha=0.1)
        it = rpca.altproj_iteration(p.Y, 5, tol=1e-5, X_star=p.X)
        out = loop.run(it, max_iter=500)
        print(out.state[0], it.result(out).n_iter)     # 5 17: stages of rank 1, 2, …, 5
        ```
    """
    _, tol = stopping(tol, Y.dtype)  # None: a rule never met (no residual is below 0)
    return _altproj_iteration(
        Y,
        threshold_scale,
        threshold_scale_init,
        tol,
        X_star,
        support,
        key,
        rank=rank,
        inner_iters=inner_iters,
        oversample=oversample,
        power_iters=power_iters,
        stop=stop,
    )
