"""LRPCA: ScaledGD unfolded with per-layer thresholds and step sizes (Cai, Liu, Yin, NeurIPS 2021).

Algorithm 1 of the paper (the box's garbled line 9 restored as in eq. 9):

    S₀ = S_ζ₀(Y);   [U₀, Σ₀, V₀] = SVD_r(Y − S₀);
    L₀ = U₀ Σ₀^(1/2),   R₀ = V₀ Σ₀^(1/2)
    for k = 0, 1, ...:
        Sₖ₊₁ = S_ζₖ₊₁(Y − Lₖ Rₖᵀ)                            (eq. 7)
        E    = Lₖ Rₖᵀ + Sₖ₊₁ − Y      (= −clip(Y − Lₖ Rₖᵀ, −ζ, ζ))
        Lₖ₊₁ = Lₖ − ηₖ₊₁ E Rₖ (RₖᵀRₖ)⁻¹                      (eq. 9)
        Rₖ₊₁ = Rₖ − ηₖ₊₁ Eᵀ Lₖ (LₖᵀLₖ)⁻¹    (the old Lₖ: both at once)

with S_ζ the soft threshold. FRMNN (eq. 13) continues past the K learned layers with
ζ_k = φ^(k−K) ζ_K and η_k = β^(k−K) η_K.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import _checks, loop
from lowrank_jax.precision import full_precision
from lowrank_jax.prox import clip_symmetric, soft_threshold
from lowrank_jax.result import ensure_finite, finish
from lowrank_jax.rpca._common import (
    COMMON,
    KEY,
    STOP,
    RPCAResult,
    change_stats,
    declared,
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

# What to do when an LRPCA run's S comes out dense (Status.UNRELIABLE).
LRPCA_REMEDY = (
    "The thresholds zeta are too small for these data: a shipped model (rpca.pretrained) rescales "
    "them to the data's scale, but was trained on the paper's generator; for other data use "
    "rpca.scaledgd or rpca.altproj, or train LRPCA on data like these (rpca.train_lrpca)."
)


@full_precision
@_checks.validate(
    zeta=_checks.Hyper(ndim=0, dtype_of="Y"),  # as lrpca: in Y's dtype
    eta=_checks.Hyper(ndim=0, dtype_of="Y"),
)
def lrpca_step(Y, L, R, zeta, eta, support=None, prev=None, axis_name=None):
    """One LRPCA layer (Cai, Liu, Yin 2021, eq. 7 + 9): soft threshold, then a scaled-gradient step.

    With D = Y − L Rᵀ,

        S⁺ = S_ζ(D),   E = L Rᵀ + S⁺ − Y = −clip(D, −ζ, ζ),
        L⁺ = L − η E R (RᵀR)⁻¹,   R⁺ = R − η Eᵀ L (LᵀL)⁻¹,

    both factors from the old (L, R). S⁺ itself is not formed (``lrpca`` rebuilds the final S).

    Args:
      Y: (n1, n2) observation.
      L: (n1, r) and R: (n2, r), the current factors.
      zeta: threshold ζ ≥ 0 (scalar, in Y's dtype; may be traced: a traced one that breaks its
        rule is NaN, and so is the step).
      eta: step size η ≥ 0 (scalar, likewise).
      support: boolean (n1, n2) mask of supp(S⋆), to count #{S⁺ ≠ 0 outside it}; default None.
      prev: (L_p, R_p, ζ_p), the factors and threshold that made the current
        S = S_ζ(Y − L_p R_pᵀ) with ζ = ζ_p, to also sum ‖S⁺ − S‖_F² and ‖S‖_F² (one more rank-r
        product per entry); default None.
      axis_name: the ``shard_map`` mesh axis over which Y and L are split by rows (R replicated):
        the column-side sums are taken across devices; default None, one device.

    Returns:
      ``(L⁺, R⁺, stats)``: the new factors and a dict of sums, ``"sq"`` = ‖E‖_F², the squared
      residual of the pair (L Rᵀ, S⁺) (and ``"false_positives"`` with ``support``, ``"ds"`` and
      ``"sp"`` with ``prev``).
    """

    def fn(D, *rows):
        S = soft_threshold(D, zeta)
        E = S - D
        stats = residual_stats(S, E, rows[0] if support is not None else None)
        if prev is not None:
            y, l_prev = rows[-2:]
            S_prev = soft_threshold(y - l_prev @ prev[1].T, prev[2])
            stats.update(change_stats(S, S_prev))
        return E, stats

    rows = (() if support is None else (support,)) + (() if prev is None else (Y, prev[0]))
    return residual_step(Y, L, R, eta, fn, rows, axis_name)


def _layer_params(k, zeta, eta, beta, phi, num_layers, frmnn):
    """(ζ, η) of the loop's k-th step (0-based), i.e. of layer k + 1: past the K learned layers,
    ζ_K φ^p and η_K β^p (FRMNN, p = layer − K).

    A layer whose threshold is 0 gets η = 0. There S = S_0(Y − L Rᵀ) takes the whole residual, so
    E = 0 and the step is 0 for every finite η; with β > 1 and φ < 1 the thresholds underflow to 0
    (in float32 near p ≈ 100 for the shipped models) and the iterate freezes, but η_K β^p went on
    to overflow (p ≈ 170) and ∞ · 0 turned the frozen iterate into NaN. Where ζ > 0 nothing
    changes: a β that grows the steps until they overflow still ends in a non-finite iterate (a
    divergence the solvers report)."""
    layer = k + 1
    if not frmnn:
        return zeta[layer], eta[layer - 1]
    j = jnp.minimum(layer, num_layers)
    p = jnp.maximum(layer - num_layers, 0)
    z = zeta[j] * phi**p
    frozen = z == 0
    e = eta[j - 1] * beta ** jnp.where(frozen, 0, p)  # no ∞ in the unused branch (finite gradients)
    return z, jnp.where(frozen, jnp.zeros_like(e), e)


def _first_threshold(a) -> str:
    """The message of the rule ζ_0 > 0 (read with NumPy: inside a caller's trace even ``zeta[0]``
    of a closed-over concrete ζ is staged)."""
    return (
        f"zeta[0] must be > 0, got {float(np.asarray(a['zeta'])[0])}: at ζ₀ = 0 the initial "
        "S₀ = Y and L₀ = R₀ = 0, a fixed point of every layer (X stays 0)"
    )


# LRPCA's layers, for lrpca, its iteration and lrpca_sharded alike: ζ (K+1,) and η (K,) in Y's
# dtype, the FRMNN factors β, φ > 0 (both or neither) and the tolerance. Values may be traced: one
# that breaks its rule arrives as NaN and the run reports INVALID.
LAYERS = {
    "zeta": _checks.Hyper(ndim=1, dtype_of="Y"),
    "eta": _checks.Hyper(ndim=1, low=0, low_open=True, dtype_of="Y"),
    "beta": _checks.Hyper(ndim=0, low=0, low_open=True, dtype_of="Y", optional=True),
    "phi": _checks.Hyper(ndim=0, low=0, low_open=True, dtype_of="Y", optional=True),
    "tol": _checks.Tol(dtype_of="Y"),
}
LAYER_RULES = (
    _checks.Rule(
        lambda a: a["zeta"].shape[0] == a["eta"].shape[0] + 1,
        "zeta must have one more entry than eta (zeta[0] initialises): got "
        "len(zeta) = {zeta.shape[0]}, len(eta) = {eta.shape[0]}",
        uses=(),
    ),
    # ζ₀ = 0 starts from S₀ = Y, L₀ = R₀ = 0, a fixed point with residual 0: a sweep ranking its
    # points by the residual took it for the best.
    _checks.Rule(
        lambda a: a["zeta"][0] > 0,
        _checks.Message(_first_threshold),
        uses=("zeta",),
        poison="zeta",
    ),
    _checks.Rule(
        lambda a: (a["beta"] is None) == (a["phi"] is None),
        "beta and phi (FRMNN continuation) must be given together",
        uses=(),
    ),
    _checks.Rule(
        lambda a: a["beta"] is None or a["eta"].shape[0] >= 1,
        "FRMNN needs at least one learned layer (len(eta) >= 1)",
        uses=(),
    ),
)
# The layer schedule of a run: the layers and the number of them (max_iter), which a K-layer
# schedule without FRMNN cannot exceed.
SCHEDULE = {**LAYERS, "max_iter": _checks.Count(minimum=0, optional=True)}
SCHEDULE_RULES = LAYER_RULES + (
    _checks.Rule(
        lambda a: a["beta"] is None or a["tol"] is not None or a["max_iter"] is not None,
        "FRMNN (beta, phi) needs tol or max_iter to know when to stop",
        uses=(),
    ),
    _checks.Rule(
        lambda a: (
            a["beta"] is not None or a["max_iter"] is None or a["max_iter"] <= a["eta"].shape[0]
        ),
        "max_iter must be <= the number of layers {eta.shape[0]} without FRMNN "
        "(pass beta and phi to continue), got {max_iter}",
        uses=(),
    ),
)


def schedule(Y, zeta, eta, beta, phi, max_iter):
    """LRPCA's layer schedule from its declared arguments (``SCHEDULE``), for ``lrpca``,
    ``lrpca_iteration`` (``max_iter`` None; the budget is the caller's) and
    ``lrpca_sharded``.

    A K-layer schedule runs ζ_0 (initialisation) and (ζ_k, η_k), k = 1..K; with the FRMNN factors
    (β, φ) it continues past layer K with ζ_k = φ^(k−K) ζ_K and η_k = β^(k−K) η_K (eq. 13).

    Args:
      Y: the (n1, n2) observation, whose dtype the hyperparameters have.
      zeta: (K+1,) thresholds.
      eta: (K,) step sizes.
      beta, phi: FRMNN factors (scalars), both or neither (None).
      max_iter: number of layers or None: without FRMNN K, with FRMNN 1000 (``tol`` then stops).

    Returns:
      ``(zeta, eta, beta, phi, frmnn, budget)``: β = φ = 1 without FRMNN, ``frmnn`` whether
      (β, φ) continue past layer K, and ``budget`` the number of layers to run. With no learned
      layer (K = 0) ζ and η get a placeholder layer, which the budget of 0 never runs, so that the
      loop stays traceable.
    """
    num_layers = eta.shape[0]
    frmnn = beta is not None
    if frmnn:
        budget = 1000 if max_iter is None else max_iter
    else:
        budget = num_layers if max_iter is None else max_iter
        beta = phi = jnp.ones((), Y.dtype)
    if num_layers == 0:
        eta = jnp.zeros((1,), Y.dtype)
        zeta = jnp.concatenate([zeta, zeta])
    return zeta, eta, beta, phi, frmnn, budget


def _lrpca_iteration(
    Y,
    zeta,
    eta,
    beta,
    phi,
    tol,
    X_star,
    support,
    key,
    *,
    rank,
    frmnn,
    use_tol,
    svd,
    oversample,
    power_iters,
    stop="residual",
    axis_name=None,
    rows=None,
) -> loop.Iteration:
    """LRPCA's iteration on a whole Y, or with ``axis_name`` on the rows of Y held by one device
    inside ``shard_map`` (``rows`` of them in all; R replicated): the norms and the step's column
    sums are then taken across the mesh axis, the initial SVD is the row-split randomized one and
    only the residual is recorded (X_star and support None, stop "residual")."""
    num_layers = eta.shape[0]
    y_norm = frob(Y, axis_name)
    y_norm = jnp.where(y_norm > 0, y_norm, 1.0)
    L0, R0 = spectral_init(
        clip_symmetric(Y, zeta[0]),  # Y − S_0 = Y − S_{ζ_0}(Y) = clip(Y, −ζ_0, ζ_0)
        rank,
        svd=svd,
        key=key,
        oversample=oversample,
        power_iters=power_iters,
        axis_name=axis_name,
        rows=rows,
    )

    track = stop == "change"

    def step(k, state):
        L, R, L_p, R_p, z_p = state
        z, e = _layer_params(k, zeta, eta, beta, phi, num_layers, frmnn)
        prev = (L_p, R_p, z_p) if track else None
        L_new, R_new, stats = lrpca_step(Y, L, R, z, e, support, prev, axis_name)
        diag = diagnostics(stats, y_norm, L_new, R_new, X_star, (L, R) if track else None)
        return (L_new, R_new, L, R, z), diag

    # A traced hyperparameter that broke its declared rule (ζ₀ ≤ 0 in a sweep over ζ's scale, which
    # would return X = 0 with a residual of 0, the best point by that residual) arrives as NaN:
    # INVALID instead.
    invalid = _checks.any_nan(zeta, eta, beta, phi, tol)

    def result(out):
        L, R, L_prev, R_prev, z_last = out.state
        S = soft_threshold(Y - L_prev @ R_prev.T, z_last)
        entries = None if rows is None else rows * Y.shape[1]
        S = jnp.where(invalid, jnp.nan, S)
        return make_result(L, R, S, out, y_norm, entries=entries, axis_name=axis_name)

    # The previous factors and threshold are carried so that S is rebuilt once at the end instead of
    # being written every iteration; with no iteration they give S_0 = S_{ζ_0}(Y − 0).
    return layer_iteration(
        step,
        (L0, R0, jnp.zeros_like(L0), jnp.zeros_like(R0), zeta[0]),
        y_norm=y_norm,
        tol=tol,
        use_tol=use_tol,
        stop=stop,
        invalid=invalid,
        result=result,
        axis_name=axis_name,
        max_steps=None if frmnn else num_layers,
    )


@functools.partial(
    jax.jit,
    static_argnames=(
        "rank",
        "budget",
        "frmnn",
        "use_tol",
        "differentiable",
        "svd",
        "oversample",
        "power_iters",
        "stop",
    ),
)
def _lrpca(Y, *args, budget, differentiable, **static):
    it = _lrpca_iteration(Y, *args, **static)
    return it.result(loop.run(it, max_iter=budget, differentiable=differentiable))


# What LRPCA and its iteration accept (key last, as everywhere: its default is staged inside a
# caller's jit).
_ARGS = dict(**COMMON, **LAYERS, stop=STOP)


@full_precision
@_checks.validate(
    *SCHEDULE_RULES,
    **_ARGS,
    max_iter=SCHEDULE["max_iter"],
    differentiable=_checks.Flag(),
    throw=_checks.Flag(),
    key=KEY,
)
def lrpca(
    Y,
    rank,
    zeta,
    eta,
    *,
    beta=None,
    phi=None,
    tol=None,
    max_iter=None,
    X_star=None,
    support=None,
    key=None,
    svd="randomized",
    oversample=10,
    power_iters=4,
    differentiable=False,
    stop="residual",
    throw=True,
) -> RPCAResult:
    """Learned Robust PCA: ScaledGD unfolded with a learned threshold ζ_k and step η_k per layer.

    Algorithm 1 of Cai, Liu, Yin (NeurIPS 2021), as a K-layer feed-forward net or with FRMNN
    continuation. From S₀ = S_ζ₀(Y) and the balanced factors L₀, R₀ of SVD_r(Y − S₀), layer
    k + 1 is

        Sₖ₊₁ = S_ζₖ₊₁(Y − Lₖ Rₖᵀ),   E = Lₖ Rₖᵀ + Sₖ₊₁ − Y,
        Lₖ₊₁ = Lₖ − ηₖ₊₁ E Rₖ (RₖᵀRₖ)⁻¹,   Rₖ₊₁ = Rₖ − ηₖ₊₁ Eᵀ Lₖ (LₖᵀLₖ)⁻¹,

    with S_ζ the soft threshold; past layer K (FRMNN, eq. 13) ζ_k = φ^(k−K) ζ_K and
    η_k = β^(k−K) η_K. A learned schedule runs its layers: ``tol=None`` and ``max_iter=None`` run
    the K layers of ``eta`` (LRPCA is the one solver whose budget defaults to its schedule's
    length).

    Args:
      Y: (n1, n2) observation Y = X⋆ + S⋆.
      rank: target rank r, 1 ≤ r ≤ min(n1, n2) (static).
      zeta: (K+1,) thresholds; ``zeta[0] > 0`` initialises (S₀ = S_ζ₀(Y)), ``zeta[k]`` is
        layer k's.
      eta: (K,) step sizes η_k > 0 of layers 1..K (there is no η_0).
      beta, phi: FRMNN factors (scalars > 0, eq. 13): past layer K, ηₖ = β ηₖ₋₁ and
        ζₖ = φ ζₖ₋₁. Give both or neither (default None: the K layers only).
      tol: stop once ‖Y − Xₖ₋₁ − Sₖ‖_F/‖Y‖_F < tol (the residual of layer k's scaled-gradient
        step, free to compute), before layer K too; default None, the whole budget.
      max_iter: total number of layers (static, ≥ 0): without FRMNN at most K, default K; with
        FRMNN required unless ``tol`` is given (then default 1000).
      X_star: (n1, n2) ground truth, to record ‖X_k − X⋆‖_F/‖X⋆‖_F after every layer (costs one
        pass); default None.
      support: boolean (n1, n2) mask of supp(S⋆), to record #{S_k ≠ 0 outside it} per layer;
        default None.
      key: ``jax.random`` key or integer seed of the randomized initial SVD (default key(0)).
      svd: ``"randomized"`` (default; ``oversample`` extra columns and ``power_iters`` power
        iterations, as the authors' training code, which uses no oversampling) or ``"exact"``
        (their MATLAB ``svds``).
      oversample: the randomized SVD's oversampling (static, ≥ 0; default 10).
      power_iters: the randomized SVD's power iterations (static, ≥ 0; default 4).
      differentiable: with ``tol``, run a masked ``scan`` so that reverse-mode ``jax.grad`` works
        (default False: a ``while_loop``).
      stop: what ``tol`` bounds: ``"residual"`` (above, default) or ``"change"``, the paper's video
        halting rule max(‖Xₖ − Xₖ₋₁‖_F/‖Xₖ₋₁‖_F, ‖Sₖ − Sₖ₋₁‖_F/‖Sₖ₋₁‖_F) (recorded in
        ``change``; costs one more rank-r product per entry and iteration).
      throw: with a run that diverges (non-finite factors, or ‖L‖_F‖R‖_F beyond 10⁴ ‖Y‖_F), raise
        ``RuntimeError`` (True, default; also inside ``jit``/``vmap``) or only report
        ``status == Status.DIVERGED`` (False: a sweep keeps its other points). A traced ζ, η, β, φ
        or ``tol`` that breaks its rule (ζ₀ ≤ 0 among them; a concrete one raises ``ValueError``)
        gives ``Status.INVALID`` and NaN X and S, raised the same way.

    Returns:
      ``RPCAResult``: ``status``, ``n_iter``, L, R, X = L Rᵀ, S = S_ζₖ(Y − Xₖ₋₁), the
      final ``residual`` (and ``error`` with X_star, ``false_positives`` with support, ``change``
      with ``stop="change"``), their ``history`` and S's ``density``: an S with more than half of
      its entries outliers (thresholds far too small for the data) gives ``Status.UNRELIABLE``, and
      a direct call warns with what to use instead. ``zeta``, ``eta``, ``beta``, ``phi``, ``tol``
      are traced: new values never recompile, and ``jax.vmap``/``jax.grad`` apply to them
      (``grad`` needs the fixed-length path or ``differentiable=True``).

    Example:
        ```python
        import jax, jax.numpy as jnp
        from lowrank_jax import datasets, rpca

        p = datasets.rpca_problem(jax.random.key(0), 300, 300, rank=5, alpha=0.1)
        # ζ_0 … ζ_10 from the truth (Theorem 1)
        zeta = rpca.oracle_thresholds(p.Y, 5, p.X, num_layers=10)
        eta = jnp.full(10, 0.5)
        out = rpca.lrpca(p.Y, 5, zeta, eta, beta=1.0, phi=0.7, tol=1e-5, X_star=p.X)
        # status=CONVERGED, n_iter=29 (10 layers, then FRMNN ones, eq. 14), error ≈ 3e-6
        print(out)
        ```
    """
    zeta, eta, beta, phi, frmnn, budget = schedule(Y, zeta, eta, beta, phi, max_iter)
    use_tol, tol = stopping(tol, Y.dtype)
    out = _lrpca(
        Y,
        zeta,
        eta,
        beta,
        phi,
        tol,
        X_star,
        support,
        key,
        rank=rank,
        budget=budget,
        frmnn=frmnn,
        use_tol=use_tol,
        differentiable=differentiable,
        svd=svd,
        oversample=oversample,
        power_iters=power_iters,
        stop=stop,
    )
    return finish(
        out,
        throw,
        diverged="LRPCA diverged (non-finite or exploding factors): the step sizes eta are too "
        "large (or the thresholds zeta too small) for these data"
        + (", or beta > 1 grows the FRMNN steps without bound" if frmnn else ""),
        invalid="LRPCA: zeta[0] must be > 0, zeta >= 0 and eta > 0, beta and phi > 0 and tol > 0 "
        "(the result is NaN)",
        unreliable=unreliable_message("LRPCA", LRPCA_REMEDY),
    )


@full_precision
@_checks.validate(*LAYER_RULES, **_ARGS, key=KEY)
def lrpca_iteration(
    Y,
    rank,
    zeta,
    eta,
    *,
    beta=None,
    phi=None,
    tol=None,
    X_star=None,
    support=None,
    key=None,
    svd="randomized",
    oversample=10,
    power_iters=4,
    stop="residual",
) -> loop.Iteration:
    """LRPCA as an initial state and a step, to run, warm-start or stop as one wishes.

    The iteration that ``lrpca`` runs (same arguments and equations): its state is
    ``(L, R, L_prev, R_prev, zeta_last)``, the factors after and before the last layer and that
    layer's threshold (S = S_ζ(Y − L_prev R_prevᵀ) is formed only by ``result``); step k applies
    layer k + 1, whose (ζ, η) it reads from the schedule by k, so a run resumed with ``start=k``
    takes the layers it would have taken. Its diagnostics are those of ``lrpca``'s history. So

        it = lrpca_iteration(Y, r, ζ, η, ...)
        it.result(loop.run(it, max_iter=m))
            == lrpca(Y, r, ζ, η, ..., max_iter=m, throw=False)

    Without β, φ the schedule has K = len(eta) layers, and ``lowrank_jax.loop.run`` refuses to
    run it past them (``it.max_steps`` is K).

    Args:
      Y: (n1, n2) observation.
      rank: target rank r, 1 ≤ r ≤ min(n1, n2) (static).
      zeta: (K+1,) thresholds; ``zeta[0] > 0`` initialises, ``zeta[k]`` is layer k's.
      eta: (K,) step sizes η_k > 0 of layers 1..K.
      beta, phi: FRMNN factors (scalars > 0, eq. 13) continuing the schedule past layer K; both or
        neither (default None).
      tol: ``it.stop`` is ``diag[stop] < tol`` (> 0); default None: no stopping rule.
      X_star: (n1, n2) ground truth, to record the error per layer (default None).
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
        import jax, jax.numpy as jnp
        from lowrank_jax import datasets, loop, rpca

        p = datasets.rpca_problem(jax.random.key(0), 300, 300, rank=5, alpha=0.1)
        zeta = rpca.oracle_thresholds(p.Y, 5, p.X, num_layers=10)
        eta = jnp.full(10, 0.5)
        it = rpca.lrpca_iteration(p.Y, 5, zeta, eta, beta=1.0, phi=0.7, tol=1e-5)
        # the ten learned layers, then FRMNN from layer 11
        learned = loop.run(it._replace(stop=None), max_iter=10)
        frmnn = it._replace(state=learned.state)
        out = it.result(loop.run(frmnn, max_iter=100, start=10))
        print(out.status, out.n_iter)  # 0 (CONVERGED) 19
        ```
    """
    zeta, eta, beta, phi, frmnn, _ = schedule(Y, zeta, eta, beta, phi, None)
    use_tol, tol = stopping(tol, Y.dtype)
    return _lrpca_iteration(
        Y,
        zeta,
        eta,
        beta,
        phi,
        tol,
        X_star,
        support,
        key,
        rank=rank,
        frmnn=frmnn,
        use_tol=use_tol,
        svd=svd,
        oversample=oversample,
        power_iters=power_iters,
        stop=stop,
    )


@functools.partial(
    jax.jit, static_argnames=("rank", "num_layers", "rule", "svd", "oversample", "power_iters")
)
def _oracle(Y, X_star, eta, scale, key, *, rank, num_layers, rule, svd, oversample, power_iters):
    zeta0 = jnp.max(jnp.abs(X_star))
    L0, R0 = spectral_init(
        clip_symmetric(Y, zeta0),
        rank,
        svd=svd,
        key=key,
        oversample=oversample,
        power_iters=power_iters,
    )
    gap = Y - X_star  # X_{k−1} − X⋆ = (Y − X⋆) − (Y − L Rᵀ)

    def step(k, state):
        L, R = state
        E = gap - (Y - L @ R.T)
        if rule == "max":
            z = jnp.max(jnp.abs(E))
        else:
            z = jnp.sqrt(jnp.mean(jnp.square(E)))
        z = scale * z
        L, R, _ = lrpca_step(Y, L, R, z, eta[k])
        return (L, R), z

    out = loop.run_fixed(step, (L0, R0), num_layers)
    return jnp.concatenate([zeta0[None], out.history])


ORACLE_RULES = ("max", "rms")


@full_precision
@_checks.validate(
    _checks.Rule(
        lambda a: a["X_star"] is not None,
        "X_star is required for the oracle thresholds",
        uses=(),
    ),
    _checks.Rule(
        lambda a: a["eta"].ndim == 0 or a["eta"].shape == (a["num_layers"],),
        "eta must be a scalar or have shape ({num_layers},), got {eta.shape}",
        uses=(),
    ),
    **declared("Y", "oversample", "power_iters", "rank", "X_star", "svd"),
    rule=_checks.Choice(*ORACLE_RULES),
    num_layers=_checks.Count(),
    scale=_checks.Hyper(ndim=0, low=0, low_open=True, dtype_of="Y"),
    eta=_checks.Hyper(low=0, low_open=True, dtype_of="Y"),
    key=KEY,
)
def oracle_thresholds(
    Y,
    rank,
    X_star,
    num_layers,
    eta=0.5,
    *,
    rule="max",
    scale=1.0,
    key=None,
    svd="randomized",
    oversample=10,
    power_iters=4,
):
    """Oracle threshold schedules for LRPCA, from the ground truth (Cai, Liu, Yin 2021, Thm. 1).

    ζ_0 = ‖X⋆‖∞ and, along the LRPCA run, for layer k ≥ 1

        rule="max" (Theorem 1):  ζₖ = c ‖Xₖ₋₁ − X⋆‖∞
        rule="rms":              ζₖ = c ‖Xₖ₋₁ − X⋆‖_F / √(n1 n2)

    with c = ``scale``. Passing the result to ``lrpca`` with the same ``eta``, ``key``,
    ``svd``, ``oversample`` and ``power_iters`` reproduces the oracle run exactly, so the schedule
    works as an ordinary hyperparameter array (ablations, initial values for learning). Under
    Theorem 1's assumptions the "max" rule creates no false-positive outlier: supp(S_k) ⊆ supp(S⋆).

    Why "rms": at convergence Eₖ = −clip(Y − Xₖ₋₁, ζₖ) carries a bias ±ζₖ on every outlier
    entry, ‖P_T(bias)‖_F ≈ ζₖ √(2 α r n) for n × n, against a pull of (1 − α)‖Xₖ₋₁ − X⋆‖_F
    from the clean entries. With ζₖ at the maximum (≈ 5× the rms of Xₖ₋₁ − X⋆ for incoherent
    errors) the bias wins once α ≳ 0.45 (n = 1000, r = 5) and the run stalls; with c ≈ 2 times the
    rms, the clean entries keep most of their pull (clip only trims their tails) and the bias is
    2.5× smaller: with η ≈ 1/(1 − α) the paper's instances converge to 1e-6 up to α = 0.65.

    Args:
      Y: (n1, n2) observation.
      rank: target rank r, 1 ≤ r ≤ min(n1, n2) (static).
      X_star: (n1, n2) ground truth X⋆ (required).
      num_layers: K, the number of layers to run (≥ 1).
      eta: step size(s) of the run, a scalar or (K,) (default 0.5).
      rule: ``"max"`` (default) or ``"rms"``, as above.
      scale: the factor c > 0 (default 1).
      key, svd, oversample, power_iters: the initial SVD's, as in ``lrpca``.

    Returns:
      (K+1,) array of thresholds ζ_0, …, ζ_K. A schedule that becomes non-finite (η too large for
      the problem) raises ``RuntimeError``, also under ``jit``.
    """
    if eta.ndim == 0:
        eta = jnp.full((num_layers,), eta)
    zeta = _oracle(
        Y,
        X_star,
        eta,
        scale,
        key,
        rank=rank,
        num_layers=num_layers,
        rule=rule,
        svd=svd,
        oversample=oversample,
        power_iters=power_iters,
    )
    return ensure_finite(
        zeta,
        "the oracle thresholds became non-finite: the steps eta are too large for this "
        "problem (the oracle iterates diverged)",
    )
