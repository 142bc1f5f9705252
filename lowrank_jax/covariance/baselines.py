"""Classical baselines of the covariance low-rank + sparse paper (Baes et al. 2021, Table II):
PCP by inexact ALM, its non-convex γ-norm variant (NC-RPCA), fast PCP (FPCP) and RPCA by gradient
descent on a symmetric factor (RPCA-GD). IALM and NC-RPCA share one augmented Lagrangian loop.

Each runs under one ``jit`` with its iterations in :mod:`lowrank_jax.loop` (``lax`` loops);
hyperparameters (λ, tolerances, ρ, α, step) are arrays, so they may be traced or ``vmap``-ed,
while sizes, ranks and iteration budgets are static. They are keyword-only after Σ (and the rank
of :func:`fpcp` and :func:`rpca_gd`): positional, ``ialm(S, 1e-6)`` set λ where a tolerance was
meant, as the other families' solvers would read it. Each returns a :class:`BaselineResult`
(a :class:`lowrank_jax.result.Result`: ``status``, ``n_iter``, the final ``residual``, and
``history["residual"]``, NaN after ``n_iter``) and takes ``throw``: a run that diverges raises
``RuntimeError`` (also inside ``jit``/``vmap``) unless ``throw=False``.

How the forced rank k reaches each method (the paper does not say; the note's gotcha 7):

* :func:`ialm` ignores k — PCP picks the rank through the nuclear norm (Table II's IALM rows do not
  depend on k either). So does :func:`ncrpca`, through the γ-norm.
* :func:`fpcp` uses k as its fixed partial-SVD rank (default) or, with ``grow=True``, as the maximum
  of LRSLibrary's rank-growth rule.
* :func:`rpca_gd` uses k as the width of the factor U (L = UUᵀ, rank ≤ k, PSD).

Inputs must be square, finite and symmetric to 1e-6 · max|Σ|
(:func:`lowrank_jax.covariance.metrics.check_symmetric`); all four methods act on general
matrices but the outputs are only meaningful for symmetric ones.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from lowrank_jax import _checks, linalg, loop
from lowrank_jax.covariance.metrics import check_symmetric
from lowrank_jax.precision import full_precision
from lowrank_jax.prox import (
    apply_top_fraction,
    group_soft_threshold,
    soft_threshold,
    top_fraction_count,
)
from lowrank_jax.result import Result, finish
from lowrank_jax.selection import kth_largest


class BaselineResult(Result):
    """Σ ≈ L + S from a baseline (the :class:`~lowrank_jax.result.Result` core: ``status``,
    ``n_iter``, ``history``).

    Attributes:
      residual: final ‖Σ − L − S‖_F / ‖Σ‖_F, of the pair (L, S) returned.
      L: (n, n) the low-rank part. S: (n, n) the method's sparse part (see each method).
      rank: int32, the rank the method used for L (IALM: the number of singular values above its
        last threshold 1/μ).
      U: (n, k) the factor of L = UUᵀ (:func:`rpca_gd`); None for the other methods.
      history: ``history["residual"]``, shape (budget,): the residual after each iteration (NaN
        past ``n_iter``).
    """

    residual: jax.Array
    L: jax.Array
    S: jax.Array
    rank: jax.Array
    U: jax.Array | None = None


# Divergence: the iterate is non-finite (its Frobenius norm included), or ‖L‖_F exceeds this
# many times ‖Σ‖_F. A solution has ‖L‖_F ≤ ‖Σ‖_F + ‖S‖_F; too long a step (RPCA-GD) sends it off
# without bound, a μ growing past the dtype's range (NC-RPCA with a huge ρ) makes it non-finite.
GROWTH_LIMIT = 1e4


def _diverged(d_norm, size, *iterate):
    """The baselines' divergence rule: an ``iterate`` array (L, S, multipliers, …) is non-finite, or
    ``size`` (‖L‖_F, or a bound on it) is non-finite or beyond :data:`GROWTH_LIMIT` · ‖Σ‖_F."""
    return loop.non_finite(iterate) | ~jnp.isfinite(size) | (size > GROWTH_LIMIT * d_norm)


def _result(out, L, S, rank, U=None):
    """The :class:`BaselineResult` of a loop whose diagnostics are ``{"residual": …}``."""
    return BaselineResult(
        n_iter=out.n_iter,
        status=out.status,
        history=out.history,
        residual=out.final["residual"],
        L=L,
        S=S,
        rank=rank,
        U=U,
    )


def _safe_norm(x):
    return jnp.where(x > 0, x, 1.0)


# --- augmented Lagrangian methods: PCP (IALM) and its γ-norm variant (NC-RPCA) --------------------


def _alm(D, lam, tol, rho, mu0, mu_bar, Y0, invalid, *, sv_map, s_prox, l_first, max_iter):
    """The loop shared by :func:`ialm` and :func:`ncrpca`: min R(L) + λ‖S‖ s.t. D = L + S with

        S ← s_prox(D − L + Y/μ, λ/μ)
        L ← U diag(σ') Vᵀ,  σ' = sv_map(σ, μ, σ'_prev),  U diag(σ) Vᵀ = SVD(D − S + Y/μ)
        Z = D − L − S;  Y ← Y + μZ;  μ ← min(ρμ, μ̄)

    (the L-step first when ``l_first``), until ‖Z‖_F/‖D‖_F < tol. The loop carries the last σ'
    (0 at the start): NC-RPCA's DC steps start from it, IALM's SVT ignores it, and ``rank`` is its
    number of non-zero values. ``invalid``: a traced hyperparameter broke its rule (the status says
    INVALID)."""
    n1, n2 = D.shape
    d_norm = _safe_norm(linalg.frob(D))
    full = min(n1, n2)

    def l_step(S, Y, mu, kept):
        U, s, V = linalg.truncated_svd(D - S + Y / mu, full)
        kept = sv_map(s, mu, kept)
        return (U * kept) @ V.T, kept

    def step(_, state):
        L, S, Y, mu, kept = state
        if l_first:
            L, kept = l_step(S, Y, mu, kept)
            S = s_prox(D - L + Y / mu, lam / mu)
        else:
            S = s_prox(D - L + Y / mu, lam / mu)
            L, kept = l_step(S, Y, mu, kept)
        Z = D - L - S
        Y = Y + mu * Z
        return (L, S, Y, jnp.minimum(mu * rho, mu_bar), kept), {"residual": linalg.frob(Z) / d_norm}

    zeros = jnp.zeros_like(D)
    state = (zeros, zeros, Y0, mu0, jnp.zeros(full, D.dtype))
    out = loop.run_until(
        step,
        state,
        max_iter=max_iter,
        stop=lambda s, d: d["residual"] < tol,
        diverged=lambda s, d: _diverged(d_norm, linalg.frob(s[0]), *s[:4]),
        invalid=invalid,
    )
    L, S, _, _, kept = out.state
    return _result(out, L, S, jnp.sum(kept > 0).astype(jnp.int32))


def _alm_arguments(Sigma, lam, max_iter, **positive):
    """Checks shared by :func:`ialm` and :func:`ncrpca`: Σ symmetric, λ (default 1/√n) and the named
    hyperparameters positive scalars of Σ's dtype, ρ > 1, an integer budget. Returns (Σ, (λ, *the
    named values in order)), max_iter)."""
    Sigma = check_symmetric(Sigma)
    dtype = Sigma.dtype
    lam = 1.0 / Sigma.shape[0] ** 0.5 if lam is None else lam
    names = ("lam", *positive)
    values = [
        _checks.as_tolerance(v, dtype)
        if name == "tol"
        else _checks.as_hyper(v, name, ndim=0, positive=True, dtype=dtype)
        for name, v in zip(names, (lam, *positive.values()))
    ]
    rho = values[names.index("rho")]  # in Σ's dtype: 1 + 1e-8 is 1 in float32
    if _checks.is_concrete(rho) and float(rho) <= 1:
        raise ValueError(f"rho must be > 1 in {dtype}, got {float(rho)}")
    return Sigma, tuple(values), _checks.check_positive_int(max_iter, "max_iter")


def _alm_invalid(values, rho):
    """The traced hyperparameters that broke their rule: NaN (:func:`lowrank_jax._checks.as_hyper`),
    or ρ ≤ 1 (μ would shrink to 0 and Y/μ overflow)."""
    return jnp.any(jnp.isnan(jnp.stack(values))) | ~(rho > 1)


@functools.partial(jax.jit, static_argnames=("max_iter",))
def _ialm(D, lam, tol, rho, mu_factor, *, max_iter):
    norm_two = _safe_norm(jnp.linalg.norm(D, 2))
    norm_inf = jnp.max(jnp.abs(D)) / lam
    mu0 = 1.25 / norm_two
    invalid = _alm_invalid((lam, tol, rho, mu_factor), rho)
    return _alm(
        D,
        lam,
        tol,
        rho,
        mu0,
        mu_factor * mu0,
        D / jnp.maximum(norm_two, norm_inf),
        invalid,
        sv_map=lambda s, mu, _: soft_threshold(s, 1.0 / mu),  # SVT at 1/μ
        s_prox=soft_threshold,
        l_first=False,
        max_iter=max_iter,
    )


@full_precision
def ialm(
    Sigma, *, lam=None, tol=1e-7, max_iter: int = 1000, rho=1.5, mu_factor=1e7, throw: bool = True
) -> BaselineResult:
    """Principal component pursuit min ‖L‖_* + λ‖S‖₁ s.t. Σ = L + S by the inexact ALM
    (Lin, Chen, Ma 2010, Alg. 5) with the defaults of LRSLibrary's ``inexact_alm_rpca``:

        λ = 1/√n,  Y₀ = Σ / max(‖Σ‖₂, ‖Σ‖_∞/λ),  μ₀ = 1.25/‖Σ‖₂,  μ̄ = 10⁷ μ₀,  L₀ = S₀ = 0
        repeat:  S ← shrink(Σ − L + Y/μ, λ/μ)                    (soft thresholding)
                 L ← U shrink(Σ_sv, 1/μ) Vᵀ,  U Σ_sv Vᵀ = SVD(Σ − S + Y/μ)   (SVT, full SVD)
                 Z = Σ − L − S;  Y ← Y + μZ;  μ ← min(ρμ, μ̄)
        until ‖Z‖_F/‖Σ‖_F < tol or max_iter iterations.

    ‖·‖_∞ is the largest |entry|. The S-step comes first, as in the reference code (the paper's
    (3)–(4) list the L-step first; the fixed point is the same). The forced rank k is not an
    argument: PCP chooses the rank itself. L is symmetric up to round-off for symmetric Σ but not
    necessarily PSD.

    Args:
      Sigma: (n, n) symmetric.
      lam: λ (array), default 1/√n.
      tol: relative residual tolerance (array; None runs all ``max_iter`` iterations).
      max_iter: iteration budget (static).
      rho: μ growth factor > 1 (array).
      mu_factor: μ̄/μ₀ (array).
      throw: with a run that diverges (a non-finite or exploding iterate: Σ's scale overflows its
        dtype, which a direct call refuses, so only a traced Σ gets here), raise ``RuntimeError``
        (True, default; also inside ``jit``/``vmap``) or only report ``status ==
        Status.DIVERGED`` (False). A traced λ, tol, ρ or ``mu_factor`` that breaks its rule (ρ ≤ 1,
        say) gives ``Status.INVALID`` and NaN L and S, raised the same way.

    The default tol = 1e-7 (LRSLibrary's, for double precision) is below what float32 reaches: in
    float32 the loop then runs all ``max_iter`` iterations (and ends less accurate than with
    tol = 1e-6, once μ has hit μ̄); use float64 (``jax.enable_x64``) or tol ≥ 1e-6 there.

    Returns:
      :class:`BaselineResult`; ``status`` CONVERGED when ``residual`` = ‖Σ − L − S‖_F/‖Σ‖_F < tol,
      else MAX_ITER (``history["residual"]`` per iteration).

    Example:
        ```python
        import numpy as np
        from lowrank_jax import covariance

        rng = np.random.default_rng(0)
        M0 = rng.normal(size=(20, 3))
        Sigma = M0 @ M0.T + np.diag(rng.uniform(0.5, 1.0, 20))
        res = covariance.ialm(Sigma)  # PCP with λ = 1/√n
        print(res)                    # BaselineResult(status=CONVERGED, …)
        # 3, ≈ 4e-7
        print(covariance.rank_above(res.L), covariance.relative_error(res.L + res.S, Sigma))
        ```
    """
    Sigma, (lam, tol, rho, mu_factor), max_iter = _alm_arguments(
        Sigma, lam, max_iter, tol=tol, rho=rho, mu_factor=mu_factor
    )
    throw = _checks.check_flag(throw, "throw")
    out = _ialm(Sigma, lam, tol, rho, mu_factor, max_iter=max_iter)
    return finish(
        out,
        throw,
        diverged="IALM diverged (non-finite or exploding iterate): Sigma's scale overflows "
        "its dtype (rescale Sigma or use float64)",
        invalid="IALM: a traced lam, mu_factor or tol is negative or NaN, or rho <= 1 "
        "(the result is NaN)",
    )


def gamma_norm_shrink(s, mu, gamma, start=None, *, inner: int = 100, tol=1e-6):
    """NC-RPCA's L-step on the singular values s ≥ 0 (Kang, Peng, Cheng 2015): a local minimiser of

        Σ_i f(σ_i) + (μ/2) ‖σ − s‖²,   f(σ) = (1 + γ) σ / (γ + σ)
                                       (the γ-norm ‖L‖_γ = Σ f(σ_i(L))),

    by difference of convex functions: f is concave, so each step minimises its tangent majorant,

        σ ← max(s − w/μ, 0),   w_i = f'(σ_i) = (1 + γ) γ / (γ + σ_i)²,

    from ``start`` (default 0: w = (1 + γ)/γ, the strongest shrink), for at most ``inner`` steps or
    until ‖Δσ‖² < tol (the reference code's 100 and 1e-6, an absolute test). The objective never
    increases along the steps, which end at a stationary point near the start: from 0 that can be
    σ = 0 although a far lower minimum exists (s = 5, μ = 1, γ = 0.01: 12.5 at σ = 0 against 1.008
    at σ ≈ 5.0). f rises from 0 to 1 within a few γ, so it interpolates between rank(L) (γ → 0)
    and the nuclear norm (γ → ∞, f ≈ σ). Returns the new σ."""
    s = jnp.asarray(s)
    if not jnp.issubdtype(s.dtype, jnp.inexact):
        s = s.astype(jnp.result_type(float))
    gamma = _checks.as_hyper(gamma, "gamma", positive=True, dtype=s.dtype)
    mu = _checks.as_hyper(mu, "mu", positive=True, dtype=s.dtype)
    sigma = jnp.zeros_like(s) if start is None else jnp.asarray(start, s.dtype)

    def body(c):
        t, prev, _ = c
        new = jnp.maximum(s - (1 + gamma) * gamma / jnp.square(gamma + prev) / mu, 0.0)
        return t + 1, new, jnp.sum(jnp.square(new - prev))

    _, sigma, _ = jax.lax.while_loop(
        lambda c: (c[0] < inner) & (c[2] >= tol),
        body,
        (jnp.asarray(0), sigma, jnp.asarray(jnp.inf, s.dtype)),
    )
    return sigma


@functools.partial(jax.jit, static_argnames=("max_iter", "norm"))
def _ncrpca(D, lam, tol, rho, mu0, gamma, *, max_iter, norm):
    s_prox = soft_threshold if norm == "l1" else (lambda x, t: group_soft_threshold(x, t, axis=0))

    invalid = _alm_invalid((lam, tol, rho, mu0, gamma), rho)
    mu0, no_cap = jnp.asarray(mu0, D.dtype), jnp.asarray(jnp.inf, D.dtype)
    return _alm(
        D,
        lam,
        tol,
        rho,
        mu0,
        no_cap,
        jnp.zeros_like(D),
        invalid,
        sv_map=lambda s, mu, previous: gamma_norm_shrink(s, mu, gamma, previous),
        s_prox=s_prox,
        l_first=True,
        max_iter=max_iter,
    )


NORMS = ("l1", "l21")


@full_precision
def ncrpca(
    Sigma,
    *,
    lam=None,
    tol=1e-6,
    max_iter: int = 500,
    rho=1.1,
    mu0=0.9,
    gamma=1e-2,
    norm: str = "l21",
    throw: bool = True,
) -> BaselineResult:
    """NC-RPCA: robust PCA with the non-convex γ-norm (Kang, Peng, Cheng 2015, "Robust PCA via
    nonconvex rank approximation"), min ‖L‖_γ + λ‖S‖ s.t. Σ = L + S, by the augmented Lagrangian
    method with the reference code's settings (the ones the paper's Table II ran):

        λ = 1/√n,  μ₀ = 0.9,  L₀ = S₀ = Y₀ = 0,  σ₀ = 0
        repeat:  L ← U diag(σ) Vᵀ,  σ = gamma_norm_shrink(Σ_sv, μ, γ, start = previous σ),
                        U Σ_sv Vᵀ = SVD(Σ − S + Y/μ)
                 S ← prox_{(λ/μ)‖·‖}(Σ − L + Y/μ)
                 Z = Σ − L − S;  Y ← Y + μZ;  μ ← ρμ   (ρ = 1.1, no cap)
        until ‖Z‖_F/‖Σ‖_F < tol (1e-6) or max_iter (500) iterations.

    ``norm``: the sparse term. "l21" (default, the reference code's ``type = 21``): the sum of the
    columns' Euclidean norms, so S is column-sparse and its prox is
    :func:`lowrank_jax.prox.group_soft_threshold`; "l1": entrywise, as in the covariance paper's
    description (the same scheme as :func:`ialm` with ‖L‖_* replaced by ‖L‖_γ). γ = 1e-2 makes
    ‖L‖_γ close to the rank. The forced rank k is not an argument: like PCP the method picks the
    rank.

    Because σ starts at 0, the first L-steps shrink by up to (1 + γ)/(γμ₀) ≈ 112: L stays 0 until
    μ has grown or a singular value of Σ − S + Y/μ exceeds that. L is not necessarily PSD.

    Args:
      Sigma: (n, n) symmetric.
      lam, tol, rho (> 1), mu0, gamma (> 0): arrays, may be traced; tol=None runs all
        ``max_iter`` iterations.
      max_iter: iteration budget (static).
      norm: "l21" or "l1" (static).
      throw: with a run that diverges (a non-finite or exploding iterate: μ = μ₀ρᵗ has no cap and
        overflows the dtype when ρ is too large for the budget, e.g. ρ^max_iter beyond 10³⁸ in
        float32; or a traced Σ out of its dtype's range), raise ``RuntimeError`` (True, default;
        also inside ``jit``/``vmap``) or only report ``status == Status.DIVERGED`` (False). A traced
        hyperparameter that breaks its rule (ρ ≤ 1, γ ≤ 0, …) gives ``Status.INVALID`` and NaN L
        and S, raised the same way.

    Returns:
      :class:`BaselineResult`; ``status`` CONVERGED when ``residual`` < tol, else MAX_ITER;
      ``rank`` = the number of non-zero σ of the last L-step.
    """
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
    Sigma, (lam, tol, rho, mu0, gamma), max_iter = _alm_arguments(
        Sigma, lam, max_iter, tol=tol, rho=rho, mu0=mu0, gamma=gamma
    )
    throw = _checks.check_flag(throw, "throw")
    out = _ncrpca(Sigma, lam, tol, rho, mu0, gamma, max_iter=max_iter, norm=norm)
    return finish(
        out,
        throw,
        diverged="NC-RPCA diverged (non-finite or exploding iterate): mu = mu0 * rho^t "
        "overflows its dtype (lower rho or max_iter), or Sigma's scale does "
        "(rescale it or use float64)",
        invalid="NC-RPCA: a traced lam, mu0, gamma or tol is negative or NaN, or rho <= 1 "
        "(the result is NaN)",
    )


# --- fast PCP -------------------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnames=("rank", "loops", "grow", "svd"))
def _fpcp(D, lam, lam_factor, rank_threshold, rank0, key, *, rank, loops, grow, svd):
    d_norm = _safe_norm(linalg.frob(D))
    invalid = jnp.isnan(lam) | jnp.isnan(lam_factor) | jnp.isnan(rank_threshold)
    idx = jnp.arange(rank)

    def partial_svd(A, r):
        """Rank-r truncation of A from a static-width (k) SVD: singular values past r are
        dropped."""
        U, s, V = linalg.low_rank_svd(A, rank, method=svd, key=key)
        s_kept = jnp.where(idx < r, s, 0.0)
        return (U * s_kept) @ V.T, s

    def grows(s, r):
        """LRSLibrary's rule: keep growing while σ_r / Σ_{i<r} σ_i > rankThreshold."""
        last = s[r - 1]
        others = jnp.sum(jnp.where(idx < r - 1, s, 0.0))
        return jnp.where(others > 0, last / _safe_norm(others), jnp.inf) > rank_threshold

    def step(k, state):
        L, S, r, lam_t, inc = state
        if grow:
            bump = inc & (r < rank)
            lam_t = jnp.where(bump, lam_t * lam_factor, lam_t)
            r = jnp.where(bump, r + 1, r)
        L, s = partial_svd(D - S, r)  # the first loop: S = 0, L = P_r(Σ)
        S = soft_threshold(D - L, lam_t)
        if grow:
            # LRSLibrary starts with inc_rank = 1 (no test after the first loop); later the test is
            # taken afresh every loop: a failed test pauses the growth, not ends it
            inc = (k == 0) | grows(s, r)
        return (L, S, r, lam_t, inc), {"residual": linalg.frob(D - L - S) / d_norm}

    r0 = rank0 if grow else jnp.asarray(rank, jnp.int32)
    zeros = jnp.zeros_like(D)
    state = (zeros, zeros, jnp.asarray(r0, jnp.int32), lam, jnp.asarray(False))
    out = loop.run_fixed(
        step,
        state,
        loops,
        invalid=invalid,
        diverged=lambda s, d: _diverged(d_norm, linalg.frob(s[0]), s[0], s[1]),
    )
    L, S, r, _, _ = out.state
    return _result(out, L, S, r)


@full_precision
def fpcp(
    Sigma,
    rank: int,
    *,
    lam=None,
    loops: int = 2,
    grow: bool = False,
    rank0: int = 1,
    rank_threshold=0.01,
    lam_factor=1.0,
    svd: str = "exact",
    key=None,
    throw: bool = True,
) -> BaselineResult:
    """Fast principal component pursuit (Rodriguez & Wohlberg 2013) for
    min_{L,S} λ‖S‖₁ + ½‖Σ − L − S‖_F²  s.t.  rank L = k   (the paper's (5)–(7)):

        L₁ = P_k(Σ),  S₁ = shrink(Σ − L₁, λ)
        for t = 2..loops:  L_t = P_k(Σ − S_{t−1})  (partial SVD, top k),  S_t = shrink(Σ − L_t, λ)

    with λ = 1/√n (LRSLibrary's ``1/sqrt(max(size))``) and ``loops`` = 2 (its default). The returned
    S is shrink(Σ − L, λ): with the default λ this is exactly the paper's 1/√n post-shrinkage of
    FPCP's output (so S ≠ Σ − L; use ``Sigma - L`` for the unshrunk residual), and
    :func:`lowrank_jax.covariance.report` / ``real_data_errors`` recognise it and do not shrink it
    again.

    How k is passed: ``grow=False`` (default) — fixed rank k in every loop (rank L ≤ k).
    ``grow=True`` — LRSLibrary's rank growth with k as the maximum: start at ``rank0``; before each
    later loop, if the previous loop's growth test passed, rank ← rank + 1 (≤ k) and λ ← λ ·
    ``lam_factor`` (while the rank is below k); the test is σ_r / Σ_{i<r} σ_i > ``rank_threshold``
    (0.01) on that loop's partial SVD, taken afresh every loop, so a failed test skips one growth
    and a later pass resumes it (LRSLibrary's ``fastpcp.m`` resets its flag each loop). With the
    default two loops the rank reaches at most ``rank0`` + 1, as in LRSLibrary; raise ``loops``.
    Measured on the paper's generator (n = 100, k₀ = 10, s₀ = 0.95, ``"code"`` pairs), ``grow=True``
    with ``loops`` = k reproduces Table II's FPCP rows closely (k = 10, 10 seeds: r(L) 9.0, s(S)
    0.07, rel.error(S) 5.96, rel.error(L) 0.74 against the paper's 9, 0.07, 5.64, 0.74), whereas the
    fixed rank recovers L₀ far better (rel.error(L) 0.03 with 2 loops, 0.004 with 50): growing the
    rank after S has absorbed the unexplained part of Σ stalls it below k₀.

    The partial SVD is :func:`lowrank_jax.linalg.low_rank_svd` at width k (``svd="exact"``: thin
    SVD; ``"randomized"``: randomized range finder with ``key``); L is symmetric only up to
    round-off and may have negative eigenvalues (top singular values of Σ − S, not eigenvalues).

    FPCP has no step size and no tolerance: it runs its ``loops`` and ends in ``Status.MAX_ITER``
    with ``n_iter`` = ``loops``. It can only diverge on a Σ whose scale overflows its dtype, which a
    direct call refuses (``ValueError``); a traced Σ reports ``Status.DIVERGED`` (non-finite or
    exploding L or S), and with ``throw=True`` (default) raises ``RuntimeError`` (also inside
    ``jit``/``vmap``); ``throw=False`` only reports it. A traced λ, ``lam_factor`` or
    ``rank_threshold`` that is negative or NaN gives ``Status.INVALID`` and NaN L and S.

    Returns:
      :class:`BaselineResult` with ``rank`` the final partial-SVD rank, the last loop's ``residual``
      and ``history["residual"]`` per loop.
    """
    Sigma = check_symmetric(Sigma)
    rank = _checks.check_rank(rank, Sigma.shape)
    dtype = Sigma.dtype
    n = Sigma.shape[0]
    lam = _checks.as_hyper(1.0 / n**0.5 if lam is None else lam, "lam", ndim=0, dtype=dtype)
    loops = _checks.check_positive_int(loops, "loops")
    rank0 = _checks.check_rank(rank0, (rank,), "rank0")  # 1 <= rank0 <= rank
    grow = _checks.check_flag(grow, "grow")
    rank_threshold = _checks.as_hyper(rank_threshold, "rank_threshold", ndim=0, dtype=dtype)
    lam_factor = _checks.as_hyper(lam_factor, "lam_factor", ndim=0, positive=True, dtype=dtype)
    if svd not in ("exact", "randomized"):
        raise ValueError(f"svd must be 'exact' or 'randomized', got {svd!r}")
    key = _checks.as_key(key)
    throw = _checks.check_flag(throw, "throw")
    out = _fpcp(
        Sigma,
        lam,
        lam_factor,
        rank_threshold,
        jnp.asarray(rank0, jnp.int32),
        key,
        rank=rank,
        loops=loops,
        grow=bool(grow),
        svd=svd,
    )
    return finish(
        out,
        throw,
        diverged="FPCP produced a non-finite iterate: Sigma's scale overflows its dtype "
        "(rescale Sigma or use float64)",
        invalid="FPCP: a traced lam, lam_factor or rank_threshold is negative or NaN "
        "(the result is NaN)",
    )


# --- RPCA by gradient descent on a symmetric factor -----------------------------------------------


def _symmetric_cuts_sorted(magnitude, alpha):
    """Per-row cut-offs of T_α for a symmetric ``magnitude`` (column cut-offs are the same): the
    ⌊α n⌋-th largest entry of each row (+inf when ⌊α n⌋ = 0), by a sort. Used once before and once
    after the iterations, where it compiles much faster than the counting selection."""
    n = magnitude.shape[1]
    count = top_fraction_count(alpha, n)
    ordered = jnp.sort(magnitude, axis=1)[:, ::-1]
    cut = ordered[:, jnp.clip(count - 1, 0, n - 1)]
    return jnp.where(count > 0, cut, jnp.inf)


def _symmetric_sparsify(R, alpha, cuts=None):
    """T_α(R) for a symmetric R: keep R_ij when |R_ij| is among the ⌊α n⌋ largest of row i and of
    row j (= column j). With ``cuts`` (the previous cut-offs)
    :func:`lowrank_jax.selection.kth_largest` is used (on CPU its counting selection, warm-started;
    on GPUs and TPUs a sort); otherwise a sort."""
    mag = jnp.abs(R)
    if cuts is None:
        cut = _symmetric_cuts_sorted(mag, alpha)
    else:
        cut = kth_largest(mag, top_fraction_count(alpha, R.shape[1]), axis=1, guess=cuts)
    return apply_top_fraction(R, mag, cut, cut), cut


@functools.partial(jax.jit, static_argnames=("rank", "max_iter"))
def _rpca_gd(D, alpha, alpha_iter, step, tol, *, rank, max_iter):
    d_norm = _safe_norm(linalg.frob(D))
    D = 0.5 * (D + D.T)
    S_init, _ = _symmetric_sparsify(D, alpha)
    lam_all, Q = jnp.linalg.eigh(D - S_init)
    lam, Q = lam_all[::-1][:rank], Q[:, ::-1][:, :rank]
    U0 = Q * jnp.sqrt(jnp.maximum(lam, 0.0))
    # A traced fraction outside [0, 1] (a sweep point; a concrete one was refused) is INVALID, not
    # the L = 0 that an empty or full selection returned with a residual of 0, as if converged; a
    # NaN start makes that run stop after one iteration. NaN: a traced value that broke its rule.
    invalid = ~((alpha <= 1) & (alpha_iter <= 1)) | jnp.isnan(step) | jnp.isnan(tol)
    U0 = jnp.where(invalid, jnp.nan, U0)
    # σ₁ = ‖Σ − S_init‖₂, the largest |λ| (Yi et al.'s top singular value). Not the largest λ: for a
    # Σ far from PSD that is much smaller than the curvature and the step diverges.
    sigma1 = _safe_norm(jnp.max(jnp.abs(lam_all)))
    eta = step / sigma1

    def low_rank(U):
        L = U @ U.T
        return 0.5 * (L + L.T)  # exactly symmetric, so Σ − L is too: row cut-offs = column cut-offs

    def sparse_part(U, cut=None):
        """S = T_{γα}(Σ − UUᵀ) and E = UUᵀ + S − Σ (symmetric; E U is the gradient of
        ¼‖UUᵀ + S − Σ‖_F² in U), with the new cut-offs."""
        R = D - low_rank(U)
        S, cut = _symmetric_sparsify(R, alpha_iter, cut)
        return S, S - R, cut

    def body(_, state):
        # The step, then the new iterate's S and residual: the history entry and the stop test are
        # those of the (L, S) that the run returns after this iteration (they were the previous
        # iterate's, one step behind, while ialm and fpcp record the pair they return).
        U, _, E, cut = state
        U = U - eta * (E @ U)
        S, E, cut = sparse_part(U, cut)
        return (U, S, E, cut), {"residual": linalg.frob(E) / d_norm}

    # ‖UUᵀ‖_F ≤ ‖U‖_F²: the growth rule on L without forming it
    blown_up = lambda s, d: _diverged(d_norm, jnp.sum(jnp.square(s[0])), s[0], s[1])  # noqa: E731
    out = loop.run_until(
        body,
        (U0, *sparse_part(U0)),
        max_iter=max_iter,
        stop=lambda s, d: d["residual"] < tol,
        diverged=blown_up,
        invalid=invalid,
    )
    U, S = out.state[:2]
    return _result(out, low_rank(U), S, jnp.asarray(rank, jnp.int32), U)


@full_precision
def rpca_gd(
    Sigma,
    rank: int,
    *,
    alpha=0.1,
    step=0.5,
    max_iter: int = 200,
    gamma=2.0,
    tol=1e-9,
    return_factor: bool = False,
    throw: bool = True,
):
    """Robust PCA by gradient descent (Yi, Park, Chen, Caramanis 2016) on a symmetric factor,
    L = UUᵀ with U ∈ ℝ^{n×k} (so L is PSD of rank ≤ k):

        S_init = T_α(Σ);  U₀ = V_k Λ_k^{1/2} from the top-k eigenpairs of Σ − S_init
                          (λ clipped at 0)
        repeat:  S = T_{γα}(Σ − UUᵀ),  E = UUᵀ + S − Σ,  U ← U − (η/σ₁) E U
        until ‖E‖_F/‖Σ‖_F < tol or ``max_iter`` iterations (all of them for ``tol=None``).

    T_α is the sparsifier keeping the entries that are among the ⌊α n⌋ largest in magnitude of
    both their row and their column (:func:`lowrank_jax.prox.sparsify_top_fraction`, shared with
    ScaledGD). Σ is symmetrised, ½(Σ + Σᵀ), and L = UUᵀ is formed exactly symmetric, so the residual
    is symmetric and only the row cut-offs are computed (they are the column cut-offs): in the
    iterations by the shared selection (on CPU counting, warm-started from the previous cut-offs),
    before and after them by a sort (same values; much quicker to compile). E U is the gradient of
    ¼‖UUᵀ + S − Σ‖_F² in U for symmetric E;
    σ₁ = ‖Σ − S_init‖₂ (the largest |λ|: Yi et al.'s top singular value, which for a far-from-PSD Σ
    exceeds λ₁ and keeps the step stable) and η = ``step`` (0.5, Yi et al.'s ``step_const``). γ = 2
    as in their analysis (and ScaledGD's reference code). The projection onto an incoherence ball of
    the paper's analysis is omitted (it needs the unknown incoherence μ).

    α — the corruption fraction per row/column — must be given "by inspection of Σ" (the paper);
    the default 0.1 is a documented constant: twice the average 5 % of non-zeros per row of the
    s₀ = 0.95 generator (whose ``"code"`` variant piles more non-zeros onto low indices).

    ``throw``: with a run that diverges (a non-finite factor U, or ‖U‖_F² ≥ ‖UUᵀ‖_F beyond 10⁴
    ‖Σ‖_F: too large a ``step``), raise ``RuntimeError`` (True, default; also inside
    ``jit``/``vmap``) or only report ``status == Status.DIVERGED`` (False: a sweep keeps its other
    points). A traced α or γα outside [0, 1], or a traced ``step``, γ or ``tol`` that breaks its
    rule, gives ``Status.INVALID`` and NaN L and S, raised the same way.

    Returns:
      :class:`BaselineResult`; ``status`` CONVERGED when ``residual`` = ‖E‖_F/‖Σ‖_F < tol, else
      MAX_ITER; ``S`` is the method's sparse estimate T_{γα}(Σ − L) (use ``Sigma - L`` for the
      paper's DNN-style dense residual); ``U`` the factor. With ``return_factor=True`` the pair
      (result, U).
    """
    Sigma = check_symmetric(Sigma)
    rank = _checks.check_rank(rank, Sigma.shape)
    dtype = Sigma.dtype
    alpha = _checks.as_hyper(alpha, "alpha", ndim=0, dtype=dtype)
    gamma = _checks.as_hyper(gamma, "gamma", ndim=0, positive=True, dtype=dtype)
    with _checks.eager_if_concrete(alpha, gamma):  # checkable when closed over in a caller's jit
        alpha_iter = gamma * alpha
    for name, a in (("alpha", alpha), ("gamma * alpha", alpha_iter)):
        if _checks.is_concrete(a) and float(a) > 1:
            raise ValueError(f"{name} must lie in [0, 1], got {float(a)}")
    step = _checks.as_hyper(step, "step", ndim=0, positive=True, dtype=dtype)
    tol = _checks.as_tolerance(tol, dtype)
    max_iter = _checks.check_positive_int(max_iter, "max_iter")
    # before the run, not after it
    return_factor = _checks.check_flag(return_factor, "return_factor")
    throw = _checks.check_flag(throw, "throw")
    out = _rpca_gd(Sigma, alpha, alpha_iter, step, tol, rank=rank, max_iter=max_iter)
    out = finish(
        out,
        throw,
        diverged="RPCA-GD diverged (non-finite or exploding factor U): lower step",
        invalid="RPCA-GD: a traced alpha or gamma * alpha lies outside [0, 1], or step, "
        "gamma or tol is not positive (the result is NaN)",
    )
    return (out, out.U) if return_factor else out
