"""Classical baselines of the covariance low-rank + sparse paper (Baes et al. 2021, Table II):
PCP by inexact ALM, its non-convex γ-norm variant (NC-RPCA), fast PCP (FPCP) and RPCA by gradient
descent on a symmetric factor (RPCA-GD). IALM and NC-RPCA share one augmented Lagrangian loop.

Each runs under one ``jit`` with its iterations in ``lowrank_jax.loop`` (``lax`` loops);
hyperparameters (λ, tolerances, ρ, α, ``lr``) are arrays, so they may be traced or ``vmap``-ed,
while sizes, ranks and iteration budgets are static. They are keyword-only after Σ (and the rank
of ``fpcp`` and ``rpca_gd``), so ``ialm(S, 1e-6)`` is a ``TypeError``, not λ = 1e-6. Each
returns a ``BaselineResult`` (a ``lowrank_jax.result.Result``: ``status``, ``n_iter``,
the final ``residual``, and ``history["residual"]``, NaN after ``n_iter``) and takes ``throw``: a
run that diverges raises ``RuntimeError`` (also inside ``jit``/``vmap``) unless ``throw=False``.
The solvers that stop on a tolerance (``ialm``, ``ncrpca``, ``rpca_gd``) take ``tol``,
default 1e-6 on the relative residual ‖Σ − L − S‖_F/‖Σ‖_F; ``tol=None`` runs exactly ``max_iter``
iterations. ``fpcp`` has no tolerance and always runs ``max_iter`` loops.

Each solver ``f`` has a companion ``f_iteration`` (same arguments less ``max_iter``, ``throw`` and
``return_factor``) returning its ``lowrank_jax.loop.Iteration``: the initial state and the
step that ``f`` runs by ``lowrank_jax.loop.run``, to step by hand, warm-start or stop on a rule
of one's own.

How the forced rank k reaches each method (the paper does not say):

* ``ialm`` ignores k — PCP picks the rank through the nuclear norm (Table II's IALM rows do not
  depend on k either). So does ``ncrpca``, through the γ-norm.
* ``fpcp`` uses k as its fixed partial-SVD rank (default) or, with ``grow=True``, as the maximum
  of LRSLibrary's rank-growth rule.
* ``rpca_gd`` uses k as the width of the factor U (L = UUᵀ, rank ≤ k, PSD).

Inputs must be square, finite and symmetric to 1e-6 · max|Σ|
(``lowrank_jax.covariance.metrics.check_symmetric``); all four methods act on general
matrices but the outputs are only meaningful for symmetric ones.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from lowrank_jax import _checks, linalg, loop
from lowrank_jax.covariance._common import SIGMA, SYMMETRIC
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
    """The split Σ ≈ L + S returned by a baseline, with its run's status and residual history.

    Attributes:
      status: int32 scalar, a ``Status`` code: CONVERGED, MAX_ITER, DIVERGED or INVALID.
      n_iter: int32 scalar, the iterations run.
      history: dict, ``history["residual"]`` of shape (max_iter,): the residual after each
        iteration (NaN past ``n_iter``).
      residual: float scalar, the final ‖Σ − L − S‖_F / ‖Σ‖_F of the pair (L, S) returned.
      L: (n, n) the low-rank part.
      S: (n, n) the method's sparse part (see each method).
      rank: int32 scalar, the rank the method used for L (IALM, NC-RPCA: the number of non-zero
        singular values of the last L-step; FPCP: the final partial-SVD rank; RPCA-GD: k).
      U: (n, k) the factor of L = UUᵀ (``rpca_gd``); None for the other methods.
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
    ``size`` (‖L‖_F, or a bound on it) is non-finite or beyond ``GROWTH_LIMIT`` · ‖Σ‖_F."""
    return loop.non_finite(iterate) | ~jnp.isfinite(size) | (size > GROWTH_LIMIT * d_norm)


def _result(out, L, S, rank, U=None):
    """The ``BaselineResult`` of a loop whose diagnostics are ``{"residual": …}``."""
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


def _below(residual, tol):
    """The stopping rule residual < tol; never for ``tol=None``, which runs the whole budget."""
    return jnp.zeros((), bool) if tol is None else residual < tol


# Hyperparameters in Σ's dtype, arrays that may be traced: a traced value that breaks its rule is
# NaN (the run reports INVALID, _checks.any_nan).
_POSITIVE = _checks.Hyper(ndim=0, low=0, low_open=True, dtype_of="Sigma")
_NONNEGATIVE = _checks.Hyper(ndim=0, dtype_of="Sigma")


def _inverse_sqrt_n(args) -> float:
    """The default λ = 1/√n of every baseline."""
    return 1.0 / args["Sigma"].shape[0] ** 0.5


# --- augmented Lagrangian methods: PCP (IALM) and its γ-norm variant (NC-RPCA) --------------------


def _alm_iteration(
    D, lam, tol, rho, mu0, mu_bar, Y0, invalid, *, sv_map, s_prox, l_first
) -> loop.Iteration:
    """The iteration shared by ``ialm`` and ``ncrpca``: min R(L) + λ‖S‖ s.t. D = L + S with

        S ← s_prox(D − L + Y/μ, λ/μ)
        L ← U diag(σ') Vᵀ,  σ' = sv_map(σ, μ, σ'_prev),  U diag(σ) Vᵀ = SVD(D − S + Y/μ)
        Z = D − L − S;  Y ← Y + μZ;  μ ← min(ρμ, μ̄)

    (the L-step first when ``l_first``), until ‖Z‖_F/‖D‖_F < tol. The state is (L, S, Y, μ, σ'),
    σ' the last L-step's singular values (0 at the start): NC-RPCA's DC steps start from it, IALM's
    SVT ignores it, and ``rank`` is its number of non-zero values; ``tol=None`` never stops early.
    ``invalid``: a traced hyperparameter broke its rule (the status says INVALID)."""
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

    def result(out):
        L, S, _, _, kept = out.state
        return _result(out, L, S, jnp.sum(kept > 0).astype(jnp.int32))

    zeros = jnp.zeros_like(D)
    return loop.iteration(
        (zeros, zeros, Y0, mu0, jnp.zeros(full, D.dtype)),
        step,
        stop=lambda s, d: _below(d["residual"], tol),
        diverged=lambda s, d: _diverged(d_norm, linalg.frob(s[0]), *s[:4]),
        invalid=invalid,
        result=result,
    )


# The arguments shared by ialm and ncrpca: Σ, λ > 0 (default 1/√n), the tolerance and ρ > 1 (in Σ's
# dtype: 1 + 1e-8 is 1 in float32; a smaller ρ shrinks μ to 0 and Y/μ overflows).
_ALM = {
    **SIGMA,
    "lam": _checks.Hyper(ndim=0, low=0, low_open=True, dtype_of="Sigma", default=_inverse_sqrt_n),
    "tol": _checks.Tol(dtype_of="Sigma"),
    "rho": _checks.Hyper(ndim=0, low=1, low_open=True, dtype_of="Sigma"),
}


def _ialm_iteration(D, lam, tol, rho, mu_factor) -> loop.Iteration:
    norm_two = _safe_norm(jnp.linalg.norm(D, 2))
    norm_inf = jnp.max(jnp.abs(D)) / lam
    mu0 = 1.25 / norm_two
    invalid = _checks.any_nan(lam, tol, rho, mu_factor)
    return _alm_iteration(
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
    )


@functools.partial(jax.jit, static_argnames=("max_iter",))
def _ialm(D, lam, tol, rho, mu_factor, *, max_iter):
    it = _ialm_iteration(D, lam, tol, rho, mu_factor)
    return it.result(loop.run(it, max_iter=max_iter))


# What ialm and ialm_iteration accept.
_IALM = dict(**_ALM, mu_factor=_POSITIVE)
_IALM_DIVERGED = (
    "IALM diverged (non-finite or exploding iterate): Sigma's scale overflows its dtype "
    "(rescale Sigma or use float64)"
)
_IALM_INVALID = (
    "IALM: a traced lam, mu_factor or tol is negative or NaN, or rho <= 1 (the result is NaN)"
)


@full_precision
@_checks.validate(SYMMETRIC, **_IALM, max_iter=_checks.Count(), throw=_checks.Flag())
def ialm(
    Sigma, *, lam=None, tol=1e-6, max_iter: int = 1000, rho=1.5, mu_factor=1e7, throw: bool = True
) -> BaselineResult:
    """Principal component pursuit min ‖L‖∗ + λ‖S‖₁ s.t. Σ = L + S by the inexact ALM.

    Lin, Chen, Ma 2010, Alg. 5, with the defaults of LRSLibrary's ``inexact_alm_rpca``:

        λ = 1/√n,  Y₀ = Σ / max(‖Σ‖₂, ‖Σ‖∞/λ),  μ₀ = 1.25/‖Σ‖₂,
        μ̄ = 10⁷ μ₀,  L₀ = S₀ = 0
        repeat:  S ← shrink(Σ − L + Y/μ, λ/μ)             (soft thresholding)
                 L ← U shrink(Σ_sv, 1/μ) Vᵀ,  U Σ_sv Vᵀ = SVD(Σ − S + Y/μ)
                                                        (SVT, full SVD)
                 Z = Σ − L − S;  Y ← Y + μZ;  μ ← min(ρμ, μ̄)
        until ‖Z‖_F/‖Σ‖_F < tol or max_iter iterations.

    ‖·‖∞ is the largest |entry|. The S-step comes first, as in the reference code (the paper's
    (3)–(4) list the L-step first; the fixed point is the same). The forced rank k is not an
    argument: PCP chooses the rank itself. L is symmetric up to round-off for symmetric Σ but not
    necessarily PSD.

    Args:
      Sigma: (n, n) symmetric (to 1e-6 · max|Σ|), finite.
      lam: λ > 0 (array, may be traced), default 1/√n.
      tol: stop when ‖Σ − L − S‖_F/‖Σ‖_F < tol (array, > 0), default 1e-6; None runs exactly
        ``max_iter`` iterations. LRSLibrary's default is 1e-7, which float32 does not reach (the
        loop then runs all ``max_iter`` iterations): pass it with float64 (``jax.enable_x64``).
      max_iter: iteration budget, a positive integer (static), default 1000.
      rho: μ growth factor > 1 (array), default 1.5.
      mu_factor: μ̄/μ₀ > 0 (array), default 10⁷.
      throw: with a run that diverges (a non-finite or exploding iterate: Σ's scale overflows its
        dtype, which a direct call refuses, so only a traced Σ gets here), raise ``RuntimeError``
        (True, default; also inside ``jit``/``vmap``) or only report ``status ==
        Status.DIVERGED`` (False). A traced λ, tol, ρ or ``mu_factor`` that breaks its rule (ρ ≤ 1,
        say) gives ``Status.INVALID`` and NaN L and S, raised the same way.

    Returns:
      ``BaselineResult``: ``status`` CONVERGED when ``residual`` = ‖Σ − L − S‖_F/‖Σ‖_F < tol,
      else MAX_ITER; ``history["residual"]`` per iteration; L, S (n, n); ``rank`` the number of
      singular values above the last threshold 1/μ.

    Example:
        ```python
        import numpy as np
        from lowrank_jax import covariance

        rng = np.random.default_rng(0)
        M0 = rng.normal(size=(20, 3))
        Sigma = M0 @ M0.T + np.diag(rng.uniform(0.5, 1.0, 20))
        res = covariance.ialm(Sigma)  # PCP with λ = 1/√n
        print(res)  # BaselineResult(status=CONVERGED, …)
        fit = covariance.relative_error(res.L + res.S, Sigma)
        print(covariance.rank_above(res.L), fit)  # 3, < 1e-6
        ```
    """
    out = _ialm(Sigma, lam, tol, rho, mu_factor, max_iter=max_iter)
    return finish(out, throw, diverged=_IALM_DIVERGED, invalid=_IALM_INVALID)


@full_precision
@_checks.validate(SYMMETRIC, **_IALM)
def ialm_iteration(Sigma, *, lam=None, tol=1e-6, rho=1.5, mu_factor=1e7) -> loop.Iteration:
    """PCP by the inexact ALM (``ialm``) as an initial state and a step, to run, warm-start or
    stop as one wishes.

    The iteration that ``ialm`` runs (same arguments and equations): its state is
    ``(L, S, Y, μ, σ')``, the two parts, the multiplier, the penalty and the singular values kept
    by the last L-step (0 at the start); its diagnostics ``{"residual": ‖Σ − L − S‖_F/‖Σ‖_F}``. So

        it = ialm_iteration(Σ, ...)
        it.result(loop.run(it, max_iter=m))
            == ialm(Σ, ..., max_iter=m, throw=False)

    Args:
      Sigma: (n, n) symmetric (to 1e-6 · max|Σ|), finite.
      lam: λ > 0 (array, may be traced), default 1/√n.
      tol: ``it.stop`` is ‖Σ − L − S‖_F/‖Σ‖_F < tol (array, > 0), default 1e-6; None: a rule that
        never holds (the run takes its whole budget unless it diverges).
      rho: μ growth factor > 1 (array), default 1.5.
      mu_factor: μ̄/μ₀ > 0 (array), default 10⁷.

    Returns:
      A ``lowrank_jax.loop.Iteration`` whose ``result`` gives a ``BaselineResult`` (no
      exception on failure: read its ``status``, or pass it to
      ``lowrank_jax.result.finish``).

    Example:
        ```python
        import numpy as np
        from lowrank_jax import covariance, loop

        rng = np.random.default_rng(0)
        M0 = rng.normal(size=(20, 3))
        Sigma = M0 @ M0.T + np.diag(rng.uniform(0.5, 1.0, 20))
        it = covariance.ialm_iteration(Sigma)
        first = loop.run(it, max_iter=10)          # ten steps
        warm = it._replace(state=first.state)      # ... then on from there
        out = it.result(loop.run(warm, max_iter=500, start=10))
        print(out)                                 # BaselineResult(status=CONVERGED, …)
        ```
    """
    return _ialm_iteration(Sigma, lam, tol, rho, mu_factor)


@_checks.validate(
    inner_iters=_checks.Count(),
    s=_checks.Convert(lambda x, name, args: _checks.as_floating(x)),
    gamma=_checks.Hyper(low=0, low_open=True, dtype_of="s"),
    mu=_checks.Hyper(low=0, low_open=True, dtype_of="s"),
    start=_checks.Convert(lambda x, name, args: jnp.asarray(x, args["s"].dtype), optional=True),
)
def gamma_norm_shrink(s, mu, gamma, start=None, *, inner_iters: int = 100, tol=1e-6):
    """NC-RPCA's L-step on the singular values: a local minimiser of the γ-norm's proximal problem.

    Kang, Peng, Cheng 2015. For singular values s ≥ 0 it minimises, locally,

        Σ_i f(σ_i) + (μ/2) ‖σ − s‖²,   f(σ) = (1 + γ) σ / (γ + σ)
                                       (the γ-norm ‖L‖_γ = Σ f(σ_i(L))),

    by difference of convex functions: f is concave, so each step minimises its tangent majorant,

        σ ← max(s − w/μ, 0),   w_i = f'(σ_i) = (1 + γ) γ / (γ + σ_i)²,

    from ``start``, for at most ``inner_iters`` steps or until ‖Δσ‖² < tol (the reference code's
    100 and 1e-6, an absolute test). The objective never increases along the steps, which end at a
    stationary point near the start: from 0 that can be σ = 0 although a far lower minimum exists
    (s = 5, μ = 1, γ = 0.01: 12.5 at σ = 0 against 1.008 at σ ≈ 5.0). f rises from 0 to 1 within a
    few γ, so it interpolates between rank(L) (γ → 0) and the nuclear norm (γ → ∞, f ≈ σ).

    Args:
      s: (m,) singular values ≥ 0 (an integer array is taken as floating).
      mu: μ > 0, the proximal weight (array, may be traced).
      gamma: γ > 0, the γ-norm's parameter (array, may be traced).
      start: (m,) the first σ; default None, σ = 0 (w = (1 + γ)/γ, the strongest shrink).
      inner_iters: the most DC steps, a positive integer, default 100.
      tol: stop once ‖Δσ‖² < tol (absolute), default 1e-6.

    Returns:
      (m,) the new σ, in s's dtype.
    """
    sigma = jnp.zeros_like(s) if start is None else start

    def body(c):
        t, prev, _ = c
        new = jnp.maximum(s - (1 + gamma) * gamma / jnp.square(gamma + prev) / mu, 0.0)
        return t + 1, new, jnp.sum(jnp.square(new - prev))

    _, sigma, _ = jax.lax.while_loop(
        lambda c: (c[0] < inner_iters) & (c[2] >= tol),
        body,
        (jnp.asarray(0), sigma, jnp.asarray(jnp.inf, s.dtype)),
    )
    return sigma


def _ncrpca_iteration(D, lam, tol, rho, mu0, gamma, *, norm) -> loop.Iteration:
    s_prox = soft_threshold if norm == "l1" else (lambda x, t: group_soft_threshold(x, t, axis=0))

    invalid = _checks.any_nan(lam, tol, rho, mu0, gamma)
    mu0, no_cap = jnp.asarray(mu0, D.dtype), jnp.asarray(jnp.inf, D.dtype)
    return _alm_iteration(
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
    )


@functools.partial(jax.jit, static_argnames=("max_iter", "norm"))
def _ncrpca(D, lam, tol, rho, mu0, gamma, *, max_iter, norm):
    it = _ncrpca_iteration(D, lam, tol, rho, mu0, gamma, norm=norm)
    return it.result(loop.run(it, max_iter=max_iter))


NORMS = ("l1", "l21")

# What ncrpca and ncrpca_iteration accept.
_NCRPCA = dict(norm=_checks.Choice(*NORMS), **_ALM, mu0=_POSITIVE, gamma=_POSITIVE)
_NCRPCA_DIVERGED = (
    "NC-RPCA diverged (non-finite or exploding iterate): mu = mu0 * rho^t overflows its dtype "
    "(lower rho or max_iter), or Sigma's scale does (rescale it or use float64)"
)
_NCRPCA_INVALID = (
    "NC-RPCA: a traced lam, mu0, gamma or tol is negative or NaN, or rho <= 1 (the result is NaN)"
)


@full_precision
@_checks.validate(SYMMETRIC, **_NCRPCA, max_iter=_checks.Count(), throw=_checks.Flag())
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
    """Robust PCA with the non-convex γ-norm (NC-RPCA) by the augmented Lagrangian method.

    Kang, Peng, Cheng 2015, "Robust PCA via nonconvex rank approximation": min ‖L‖_γ + λ‖S‖
    s.t. Σ = L + S, with the reference code's settings (the ones the paper's Table II ran):

        λ = 1/√n,  μ₀ = 0.9,  L₀ = S₀ = Y₀ = 0,  σ₀ = 0
        repeat:  L ← U diag(σ) Vᵀ,  U Σ_sv Vᵀ = SVD(Σ − S + Y/μ),
                        σ = gamma_norm_shrink(Σ_sv, μ, γ, start = previous σ)
                 S ← prox of (λ/μ)‖·‖ at (Σ − L + Y/μ)
                 Z = Σ − L − S;  Y ← Y + μZ;  μ ← ρμ   (ρ = 1.1, no cap)
        until ‖Z‖_F/‖Σ‖_F < tol or max_iter iterations.

    The sparse term ‖·‖ is the ℓ2,1 norm (the sum of the columns' Euclidean norms, the reference
    code's ``type = 21``: S is column-sparse and its prox is
    ``lowrank_jax.prox.group_soft_threshold``) or the entrywise ℓ1 norm, as in the covariance
    paper's description (then the scheme is ``ialm``'s with ‖L‖∗ replaced by ‖L‖_γ). γ = 1e-2
    makes ‖L‖_γ close to the rank. The forced rank k is not an argument: like PCP the method picks
    the rank. Because σ starts at 0, the first L-steps shrink by up to (1 + γ)/(γμ₀) ≈ 112: L stays
    0 until μ has grown or a singular value of Σ − S + Y/μ exceeds that. L is not necessarily PSD.

    Args:
      Sigma: (n, n) symmetric (to 1e-6 · max|Σ|), finite.
      lam: λ > 0 (array, may be traced), default 1/√n.
      tol: stop when ‖Σ − L − S‖_F/‖Σ‖_F < tol (array, > 0), default 1e-6 (the reference code's);
        None runs exactly ``max_iter`` iterations.
      max_iter: iteration budget, a positive integer (static), default 500.
      rho: μ growth factor > 1 (array), default 1.1.
      mu0: μ₀ > 0 (array), default 0.9.
      gamma: γ > 0 of the γ-norm (array), default 1e-2.
      norm: the sparse term, "l21" (default) or "l1" (static).
      throw: with a run that diverges (a non-finite or exploding iterate: μ = μ₀ρᵗ has no cap and
        overflows the dtype when ρ is too large for the budget, e.g. ρ^max_iter beyond 10³⁸ in
        float32; or a traced Σ out of its dtype's range), raise ``RuntimeError`` (True, default;
        also inside ``jit``/``vmap``) or only report ``status == Status.DIVERGED`` (False). A traced
        hyperparameter that breaks its rule (ρ ≤ 1, γ ≤ 0, …) gives ``Status.INVALID`` and NaN L
        and S, raised the same way.

    Returns:
      ``BaselineResult``: ``status`` CONVERGED when ``residual`` < tol, else MAX_ITER;
      ``history["residual"]`` per iteration; L, S (n, n); ``rank`` the number of non-zero σ of the
      last L-step.

    Example:
        ```python
        import numpy as np
        from lowrank_jax import covariance

        rng = np.random.default_rng(0)
        M0 = 5 * rng.normal(size=(20, 2))  # singular values above (1 + γ)/(γμ₀) ≈ 112
        L0 = M0 @ M0.T
        Sigma = L0 + np.diag(rng.uniform(0.5, 1.0, 20))
        res = covariance.ncrpca(Sigma, norm="l1")
        print(res)  # BaselineResult(status=CONVERGED, n_iter=24, …)
        err = covariance.relative_error(res.L, L0)
        print(covariance.rank_above(res.L), err)  # 2, ≈ 1e-6
        ```
    """
    out = _ncrpca(Sigma, lam, tol, rho, mu0, gamma, max_iter=max_iter, norm=norm)
    return finish(out, throw, diverged=_NCRPCA_DIVERGED, invalid=_NCRPCA_INVALID)


@full_precision
@_checks.validate(SYMMETRIC, **_NCRPCA)
def ncrpca_iteration(
    Sigma, *, lam=None, tol=1e-6, rho=1.1, mu0=0.9, gamma=1e-2, norm: str = "l21"
) -> loop.Iteration:
    """NC-RPCA (``ncrpca``) as an initial state and a step, to run, warm-start or stop as one
    wishes.

    The iteration that ``ncrpca`` runs (same arguments and equations): its state is
    ``(L, S, Y, μ, σ)``, the two parts, the multiplier, the penalty and the singular values of the
    last L-step (the start of the next one's DC steps; 0 at the start); its diagnostics
    ``{"residual": ‖Σ − L − S‖_F/‖Σ‖_F}``. So

        it = ncrpca_iteration(Σ, ...)
        it.result(loop.run(it, max_iter=m))
            == ncrpca(Σ, ..., max_iter=m, throw=False)

    Args:
      Sigma: (n, n) symmetric (to 1e-6 · max|Σ|), finite.
      lam: λ > 0 (array, may be traced), default 1/√n.
      tol: ``it.stop`` is ‖Σ − L − S‖_F/‖Σ‖_F < tol (array, > 0), default 1e-6; None: a rule that
        never holds (the run takes its whole budget unless it diverges).
      rho: μ growth factor > 1 (array), default 1.1.
      mu0: μ₀ > 0 (array), default 0.9.
      gamma: γ > 0 of the γ-norm (array), default 1e-2.
      norm: the sparse term, "l21" (default) or "l1" (static).

    Returns:
      A ``lowrank_jax.loop.Iteration`` whose ``result`` gives a ``BaselineResult`` (no
      exception on failure: read its ``status``, or pass it to
      ``lowrank_jax.result.finish``).

    Example:
        ```python
        import numpy as np
        from lowrank_jax import covariance, loop

        rng = np.random.default_rng(0)
        M0 = 5 * rng.normal(size=(20, 2))
        Sigma = M0 @ M0.T + np.diag(rng.uniform(0.5, 1.0, 20))
        it = covariance.ncrpca_iteration(Sigma, norm="l1")
        looser = lambda s, d: d["residual"] < 1e-3
        out = loop.run(it, max_iter=500, stop=looser)
        print(it.result(out))  # status=CONVERGED, in fewer steps than tol=1e-6
        ```
    """
    return _ncrpca_iteration(Sigma, lam, tol, rho, mu0, gamma, norm=norm)


# --- fast PCP -------------------------------------------------------------------------------------


def _fpcp_iteration(
    D, lam, lam_factor, rank_threshold, rank0, key, *, rank, grow, svd
) -> loop.Iteration:
    d_norm = _safe_norm(linalg.frob(D))
    invalid = _checks.any_nan(lam, lam_factor, rank_threshold)
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

    def result(out):
        L, S, r, _, _ = out.state
        return _result(out, L, S, r)

    r0 = rank0 if grow else jnp.asarray(rank, jnp.int32)
    zeros = jnp.zeros_like(D)
    return loop.iteration(
        (zeros, zeros, jnp.asarray(r0, jnp.int32), lam, jnp.asarray(False)),
        step,
        diverged=lambda s, d: _diverged(d_norm, linalg.frob(s[0]), s[0], s[1]),
        invalid=invalid,
        result=result,
    )


@functools.partial(jax.jit, static_argnames=("rank", "max_iter", "grow", "svd"))
def _fpcp(D, *args, max_iter, **static):
    it = _fpcp_iteration(D, *args, **static)
    return it.result(loop.run(it, max_iter=max_iter))


# What fpcp and fpcp_iteration accept (fpcp checks its max_iter after these).
_FPCP = dict(
    **SIGMA,
    rank=_checks.Rank(of="Sigma"),
    lam=_checks.Hyper(ndim=0, dtype_of="Sigma", default=_inverse_sqrt_n),
    rank0=_checks.Convert(lambda v, name, args: _checks.check_rank(v, (args["rank"],), name)),
    grow=_checks.Flag(),
    rank_threshold=_NONNEGATIVE,
    lam_factor=_POSITIVE,
    svd=_checks.Choice("exact", "randomized"),
    key=_checks.Key(),
)
_FPCP_DIVERGED = (
    "FPCP produced a non-finite iterate: Sigma's scale overflows its dtype (rescale Sigma or use "
    "float64)"
)
_FPCP_INVALID = (
    "FPCP: a traced lam, lam_factor or rank_threshold is negative or NaN (the result is NaN)"
)


@full_precision
@_checks.validate(SYMMETRIC, **_FPCP, max_iter=_checks.Count(), throw=_checks.Flag())
def fpcp(
    Sigma,
    rank: int,
    *,
    lam=None,
    max_iter: int = 2,
    grow: bool = False,
    rank0: int = 1,
    rank_threshold=0.01,
    lam_factor=1.0,
    svd: str = "exact",
    key=None,
    throw: bool = True,
) -> BaselineResult:
    """Fast principal component pursuit (FPCP): alternating rank-k partial SVD and shrinkage.

    Rodriguez & Wohlberg 2013, for the minimum over L, S of λ‖S‖₁ + ½‖Σ − L − S‖²_F subject to
    rank L = k (the covariance paper's (5)–(7)):

        L₁ = P_k(Σ),  S₁ = shrink(Σ − L₁, λ)
        for t = 2..max_iter:  L_t = P_k(Σ − Sₜ₋₁)   (partial SVD, top k)
                              S_t = shrink(Σ − L_t, λ)

    with λ = 1/√n (LRSLibrary's ``1/sqrt(max(size))``) and two loops (its default). The returned
    S is shrink(Σ − L, λ): with the default λ this is exactly the paper's 1/√n post-shrinkage of
    FPCP's output (so S ≠ Σ − L; use ``Sigma - L`` for the unshrunk residual), and
    ``lowrank_jax.covariance.report`` / ``real_data_errors`` recognise it and do not shrink it
    again.

    How k is passed: ``grow=False`` (default) — fixed rank k in every loop (rank L ≤ k).
    ``grow=True`` — LRSLibrary's rank growth with k as the maximum: start at ``rank0``; before each
    later loop, if the previous loop's growth test passed, rank ← rank + 1 (≤ k) and λ ← λ ·
    ``lam_factor`` (while the rank is below k); the test is σᵣ / (σ₁ + … + σᵣ₋₁) >
    ``rank_threshold`` on that loop's partial SVD, taken afresh every loop, so a failed test skips
    one growth and a later pass resumes it (as LRSLibrary's ``fastpcp.m`` resets its flag each
    loop). With two loops the rank reaches at most ``rank0`` + 1, as in LRSLibrary; raise
    ``max_iter`` to grow further. ``grow=True`` with ``max_iter`` = k is the variant that reproduces
    Table II's FPCP rows (see the covariance guide); the fixed rank recovers L₀ far better, since
    growing the rank after S has absorbed the unexplained part of Σ stalls it below k₀.

    The partial SVD is ``lowrank_jax.linalg.low_rank_svd`` at width k; L is symmetric only up
    to round-off and may have negative eigenvalues (top singular values of Σ − S, not
    eigenvalues). FPCP has no step size and no tolerance: it runs exactly ``max_iter`` loops and
    ends in ``Status.MAX_ITER``.

    Args:
      Sigma: (n, n) symmetric (to 1e-6 · max|Σ|), finite.
      rank: k, 1 ≤ k ≤ n (static): the fixed partial-SVD rank, or the maximum with ``grow``.
      lam: λ ≥ 0 of the shrinkage (array, may be traced), default 1/√n.
      max_iter: the number of loops, a positive integer (static), default 2.
      grow: LRSLibrary's rank growth (True) or the fixed rank k (False, default).
      rank0: the starting rank with ``grow``, 1 ≤ rank0 ≤ k, default 1.
      rank_threshold: the growth test's threshold ≥ 0 (array), default 0.01.
      lam_factor: λ's factor per rank increase, > 0 (array), default 1.
      svd: "exact" (thin SVD, default) or "randomized" (randomized range finder with ``key``).
      key: ``jax.random`` key or int seed of the randomized SVD, default key(0).
      throw: FPCP can only diverge on a Σ whose scale overflows its dtype, which a direct call
        refuses (``ValueError``); a traced Σ reports ``Status.DIVERGED`` (non-finite or exploding
        L or S), and with ``throw=True`` (default) raises ``RuntimeError`` (also inside
        ``jit``/``vmap``); ``throw=False`` only reports it. A traced λ, ``lam_factor`` or
        ``rank_threshold`` that is negative or NaN gives ``Status.INVALID`` and NaN L and S.

    Returns:
      ``BaselineResult``: ``status`` MAX_ITER, ``n_iter`` = ``max_iter``, the last loop's
      ``residual`` and ``history["residual"]`` per loop, L, S = shrink(Σ − L, λ) (n, n) and
      ``rank`` the final partial-SVD rank.

    Example:
        ```python
        from lowrank_jax import covariance, datasets

        p = datasets.lrs_problem(0, 40, 3, 0.95)  # Σ = L₀ + S₀, rank 3
        res = covariance.fpcp(p.Sigma, 3, max_iter=10)
        print(res)  # BaselineResult(status=MAX_ITER, n_iter=10, …)
        rep = covariance.report(p.Sigma, res.L, res.S, p.L0, p.S0)
        print(rep["rel_error_L"])  # ≈ 0.01
        ```
    """
    out = _fpcp(
        Sigma,
        lam,
        lam_factor,
        rank_threshold,
        jnp.asarray(rank0, jnp.int32),
        key,
        rank=rank,
        max_iter=max_iter,
        grow=grow,
        svd=svd,
    )
    return finish(out, throw, diverged=_FPCP_DIVERGED, invalid=_FPCP_INVALID)


@full_precision
@_checks.validate(SYMMETRIC, **_FPCP)
def fpcp_iteration(
    Sigma,
    rank: int,
    *,
    lam=None,
    grow: bool = False,
    rank0: int = 1,
    rank_threshold=0.01,
    lam_factor=1.0,
    svd: str = "exact",
    key=None,
) -> loop.Iteration:
    """FPCP (``fpcp``) as an initial state and a step, to run, warm-start or stop as one
    wishes.

    The iteration that ``fpcp`` runs (same arguments and equations): its state is
    ``(L, S, r, λ_t, grow_next)``, the two parts, the partial-SVD rank and the shrinkage level in
    use, and whether the next loop grows the rank (``grow=True``); its diagnostics
    ``{"residual": ‖Σ − L − S‖_F/‖Σ‖_F}``. FPCP has no tolerance: ``it.stop`` is None, and
    ``lowrank_jax.loop.run`` takes exactly ``max_iter`` loops unless given a rule. So

        it = fpcp_iteration(Σ, k, ...)
        it.result(loop.run(it, max_iter=m))
            == fpcp(Σ, k, ..., max_iter=m, throw=False)

    Args:
      Sigma: (n, n) symmetric (to 1e-6 · max|Σ|), finite.
      rank: k, 1 ≤ k ≤ n (static): the fixed partial-SVD rank, or the maximum with ``grow``.
      lam: λ ≥ 0 of the shrinkage (array, may be traced), default 1/√n.
      grow: LRSLibrary's rank growth (True) or the fixed rank k (False, default).
      rank0: the starting rank with ``grow``, 1 ≤ rank0 ≤ k, default 1.
      rank_threshold: the growth test's threshold ≥ 0 (array), default 0.01.
      lam_factor: λ's factor per rank increase, > 0 (array), default 1.
      svd: "exact" (thin SVD, default) or "randomized" (randomized range finder with ``key``).
      key: ``jax.random`` key or int seed of the randomized SVD, default key(0).

    Returns:
      A ``lowrank_jax.loop.Iteration`` whose ``result`` gives a ``BaselineResult`` (no
      exception on failure: read its ``status``, or pass it to
      ``lowrank_jax.result.finish``).

    Example:
        ```python
        from lowrank_jax import covariance, datasets, loop

        p = datasets.lrs_problem(0, 40, 3, 0.95)  # Σ = L₀ + S₀, rank 3
        it = covariance.fpcp_iteration(p.Sigma, 3)
        # the same as covariance.fpcp(p.Sigma, 3, max_iter=10)
        out = it.result(loop.run(it, max_iter=10))
        print(out.status, out.n_iter, out.residual)  # 1 (MAX_ITER), 10, …
        ```
    """
    return _fpcp_iteration(
        Sigma,
        lam,
        lam_factor,
        rank_threshold,
        jnp.asarray(rank0, jnp.int32),
        key,
        rank=rank,
        grow=grow,
        svd=svd,
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
    ``lowrank_jax.selection.kth_largest`` is used (on CPU its counting selection, warm-started;
    on GPUs and TPUs a sort); otherwise a sort."""
    mag = jnp.abs(R)
    if cuts is None:
        cut = _symmetric_cuts_sorted(mag, alpha)
    else:
        cut = kth_largest(mag, top_fraction_count(alpha, R.shape[1]), axis=1, guess=cuts)
    return apply_top_fraction(R, mag, cut, cut), cut


def _rpca_gd_iteration(D, alpha, alpha_iter, lr, tol, *, rank) -> loop.Iteration:
    d_norm = _safe_norm(linalg.frob(D))
    D = 0.5 * (D + D.T)
    S_init, _ = _symmetric_sparsify(D, alpha)
    lam_all, Q = jnp.linalg.eigh(D - S_init)
    lam, Q = lam_all[::-1][:rank], Q[:, ::-1][:, :rank]
    U0 = Q * jnp.sqrt(jnp.maximum(lam, 0.0))
    # A traced fraction outside [0, 1] (a sweep point; a concrete one was refused) arrives as NaN
    # and is INVALID, not the L = 0 that an empty or full selection returned with a residual of 0,
    # as if converged; a NaN start makes that run stop after one iteration.
    invalid = _checks.any_nan(alpha, alpha_iter, lr, tol)
    U0 = jnp.where(invalid, jnp.nan, U0)
    # σ₁ = ‖Σ − S_init‖₂, the largest |λ| (Yi et al.'s top singular value). Not the largest λ: for a
    # Σ far from PSD that is much smaller than the curvature and the step diverges.
    sigma1 = _safe_norm(jnp.max(jnp.abs(lam_all)))
    eta = lr / sigma1

    def low_rank(U):
        L = U @ U.T
        return 0.5 * (L + L.T)  # exactly symmetric, so Σ − L is too: row cut-offs = column cut-offs

    def sparse_part(U, cut=None):
        """S = T_α̃(Σ − UUᵀ) and E = UUᵀ + S − Σ (symmetric; E U is the gradient of
        ¼‖UUᵀ + S − Σ‖_F² in U), with the new cut-offs."""
        R = D - low_rank(U)
        S, cut = _symmetric_sparsify(R, alpha_iter, cut)
        return S, S - R, cut

    def body(_, state):
        # The step, then the new iterate's S and residual: the history entry and the stop test are
        # those of the (L, S) that the run returns after this iteration, as in ialm and fpcp.
        U, _, E, cut = state
        U = U - eta * (E @ U)
        S, E, cut = sparse_part(U, cut)
        return (U, S, E, cut), {"residual": linalg.frob(E) / d_norm}

    def result(out):
        U, S = out.state[:2]
        return _result(out, low_rank(U), S, jnp.asarray(rank, jnp.int32), U)

    # ‖UUᵀ‖_F ≤ ‖U‖_F²: the growth rule on L without forming it
    blown_up = lambda s, d: _diverged(d_norm, jnp.sum(jnp.square(s[0])), s[0], s[1])  # noqa: E731
    return loop.iteration(
        (U0, *sparse_part(U0)),
        body,
        stop=lambda s, d: _below(d["residual"], tol),
        diverged=blown_up,
        invalid=invalid,
        result=result,
    )


@functools.partial(jax.jit, static_argnames=("rank", "max_iter"))
def _rpca_gd(D, alpha, alpha_iter, lr, tol, *, rank, max_iter):
    it = _rpca_gd_iteration(D, alpha, alpha_iter, lr, tol, rank=rank)
    return it.result(loop.run(it, max_iter=max_iter))


_FRACTION = _checks.Hyper(ndim=0, high=1, dtype_of="Sigma")  # α ∈ [0, 1]

# What rpca_gd and rpca_gd_iteration accept.
_RPCA_GD = dict(
    **SIGMA,
    rank=_checks.Rank(of="Sigma"),
    alpha=_FRACTION,
    alpha_iter=_checks.Hyper(
        ndim=0,
        high=1,
        dtype_of="Sigma",
        default=lambda a: 2 * a["alpha"],
        label="alpha_iter (default 2·alpha: pass alpha_iter ≤ 1)",
    ),
    lr=_POSITIVE,
    tol=_checks.Tol(dtype_of="Sigma"),
)
_RPCA_GD_DIVERGED = "RPCA-GD diverged (non-finite or exploding factor U): lower lr"
_RPCA_GD_INVALID = (
    "RPCA-GD: a traced alpha or alpha_iter lies outside [0, 1], or lr or tol is not positive "
    "(the result is NaN)"
)


@full_precision
@_checks.validate(
    SYMMETRIC,
    **_RPCA_GD,
    max_iter=_checks.Count(),
    return_factor=_checks.Flag(),
    throw=_checks.Flag(),
)
def rpca_gd(
    Sigma,
    rank: int,
    *,
    alpha=0.1,
    lr=0.5,
    max_iter: int = 200,
    alpha_iter=None,
    tol=1e-6,
    return_factor: bool = False,
    throw: bool = True,
):
    """Robust PCA by gradient descent on a symmetric factor (RPCA-GD): L = UUᵀ, PSD of rank ≤ k.

    Yi, Park, Chen, Caramanis 2016, with U ∈ ℝⁿˣᵏ:

        S_init = T_α(Σ);  U₀ = V_k Λ_k^(1/2) from the top-k eigenpairs of Σ − S_init
                          (λ clipped at 0)
        repeat:  S = T_α̃(Σ − UUᵀ),  E = UUᵀ + S − Σ,  U ← U − (η/σ₁) E U
        until ‖E‖_F/‖Σ‖_F < tol or ``max_iter`` iterations
              (all of them for ``tol=None``).

    T_α is the sparsifier keeping the entries that are among the ⌊α n⌋ largest in magnitude of
    both their row and their column (``lowrank_jax.prox.sparsify_top_fraction``, shared with
    ScaledGD), α̃ = ``alpha_iter`` (2α by default, as in Yi et al.'s analysis and ScaledGD's
    reference code). Σ is symmetrised, ½(Σ + Σᵀ), and L = UUᵀ is formed exactly symmetric, so the
    residual is symmetric and only the row cut-offs are computed (they are the column cut-offs): in
    the iterations by the shared selection (on CPU counting, warm-started from the previous
    cut-offs), before and after them by a sort (same values). E U is the gradient of
    ¼‖UUᵀ + S − Σ‖_F² in U for symmetric E; σ₁ = ‖Σ − S_init‖₂ (the largest |λ|: Yi et al.'s top
    singular value, which for a far-from-PSD Σ exceeds λ₁ and keeps the step stable) and η =
    ``lr`` (Yi et al.'s ``step_const``). The projection onto an incoherence ball of the paper's
    analysis is omitted (it needs the unknown incoherence μ).

    Args:
      Sigma: (n, n) symmetric (to 1e-6 · max|Σ|), finite.
      rank: k, 1 ≤ k ≤ n (static): the width of U.
      alpha: α ∈ [0, 1], the corruption fraction per row/column (array, may be traced), default
        0.1. The paper picks it "by inspection of Σ"; 0.1 is twice the average 5 % of non-zeros per
        row of the s₀ = 0.95 generator.
      lr: η > 0, the step in units of 1/σ₁ (array), default 0.5 (Yi et al.'s ``step_const``).
      max_iter: iteration budget, a positive integer (static), default 200.
      alpha_iter: α̃ ∈ [0, 1], the fraction kept in the iterations (array); default None, 2α.
      tol: stop when ‖E‖_F/‖Σ‖_F < tol (array, > 0), default 1e-6; None runs exactly
        ``max_iter`` iterations.
      return_factor: also return U, as the pair (result, U); default False.
      throw: with a run that diverges (a non-finite factor U, or ‖U‖_F² ≥ ‖UUᵀ‖_F beyond 10⁴
        ‖Σ‖_F: too large an ``lr``), raise ``RuntimeError`` (True, default; also inside
        ``jit``/``vmap``) or only report ``status == Status.DIVERGED`` (False: a sweep keeps its
        other points). A traced α or α̃ outside [0, 1], or a traced ``lr`` or ``tol`` that breaks
        its rule, gives ``Status.INVALID`` and NaN L and S, raised the same way.

    Returns:
      ``BaselineResult``: ``status`` CONVERGED when ``residual`` = ‖E‖_F/‖Σ‖_F < tol, else
      MAX_ITER; ``history["residual"]`` per iteration; L = UUᵀ (n, n); ``S`` the method's sparse
      estimate T_α̃(Σ − L) (use ``Sigma - L`` for the paper's DNN-style dense residual); ``rank``
      = k; ``U`` (n, k) the factor. With ``return_factor=True`` the pair (result, U).

    Example:
        ```python
        from lowrank_jax import covariance, datasets

        p = datasets.lrs_problem(0, 40, 3, 0.95)  # Σ = L₀ + S₀, rank 3
        res = covariance.rpca_gd(p.Sigma, 3, alpha=0.1, max_iter=500)
        print(res)  # BaselineResult(status=CONVERGED, n_iter=336, …)
        print(covariance.relative_error(res.L, p.L0))  # ≈ 4e-6
        ```
    """
    out = _rpca_gd(Sigma, alpha, alpha_iter, lr, tol, rank=rank, max_iter=max_iter)
    out = finish(out, throw, diverged=_RPCA_GD_DIVERGED, invalid=_RPCA_GD_INVALID)
    return (out, out.U) if return_factor else out


@full_precision
@_checks.validate(SYMMETRIC, **_RPCA_GD)
def rpca_gd_iteration(Sigma, rank: int, *, alpha=0.1, lr=0.5, alpha_iter=None, tol=1e-6):
    """RPCA-GD (``rpca_gd``) as an initial state and a step, to run, warm-start or stop as one
    wishes.

    The iteration that ``rpca_gd`` runs (same arguments and equations): its state is
    ``(U, S, E, cuts)``, the factor, S = T_α̃(Σ − UUᵀ), E = UUᵀ + S − Σ and the row cut-offs of
    T_α̃ (warm starts of the next selection); its diagnostics ``{"residual": ‖E‖_F/‖Σ‖_F}``. So

        it = rpca_gd_iteration(Σ, k, ...)
        it.result(loop.run(it, max_iter=m))
            == rpca_gd(Σ, k, ..., max_iter=m, throw=False)

    Args:
      Sigma: (n, n) symmetric (to 1e-6 · max|Σ|), finite.
      rank: k, 1 ≤ k ≤ n (static): the width of U.
      alpha: α ∈ [0, 1], the corruption fraction per row/column (array, may be traced), default
        0.1.
      lr: η > 0, the step in units of 1/σ₁ (array), default 0.5.
      alpha_iter: α̃ ∈ [0, 1], the fraction kept in the iterations (array); default None, 2α.
      tol: ``it.stop`` is ‖E‖_F/‖Σ‖_F < tol (array, > 0), default 1e-6; None: a rule that never
        holds (the run takes its whole budget unless it diverges).

    Returns:
      A ``lowrank_jax.loop.Iteration`` whose ``result`` gives a ``BaselineResult`` with
      ``U`` (no exception on failure: read its ``status``, or pass it to
      ``lowrank_jax.result.finish``).

    Example:
        ```python
        import jax
        from lowrank_jax import covariance, datasets, loop

        p = datasets.lrs_problem(0, 40, 3, 0.95)  # Σ = L₀ + S₀, rank 3
        it = covariance.rpca_gd_iteration(p.Sigma, 3, alpha=0.1)
        step, state = jax.jit(it.step), it.state
        for k in range(3):  # steps by hand
            state, diag = step(k, state)
            print(k, diag["residual"])
        print(it.result(loop.run(it, max_iter=500)))  # status=CONVERGED, …
        ```
    """
    return _rpca_gd_iteration(Sigma, alpha, alpha_iter, lr, tol, rank=rank)
