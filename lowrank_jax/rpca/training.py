"""Learning LRPCA's parameters by deep unfolding (paper §3 and Appendix C.1).

Loss of a stage j (0 ≤ j ≤ K), on a mini-batch of B fresh instances (Y, X⋆) of the paper's
generator drawn inside the jitted step:

    ℓ_j(Θ) = (1/B) Σ_b (1/j) Σ_(k=1..j) log e_k(Y_b; Θ),
    e_k    = ‖X_k − X⋆‖_F / ‖X⋆‖_F,

with X_k the output of layer k (ℓ_0 = mean log e_0). Curriculum (the paper's layer-wise training,
schedule as in the authors' code): stage 0 trains ζ_0; stage j ≥ 1 first trains the new layer's
(ζ_j, η_j) alone ("pre-training"), then all layers 0..j together ("full training").

Choices, and why (numbers in docs/rpca.md):
- log ζ and log η instead of ζ, η: the thresholds span five decades (1e-2 … 1e-7), one learning
  rate fits all, and both stay positive (the authors' code restores a backup when a ζ turns
  negative; with η free, training drove some steps negative and the last one to ≈ 0, which left
  nothing for the FRMNN continuation to extend).
- Adam instead of SGD with per-layer learning rates ζₖ₋₁/5000: scale-free, far fewer steps.
- log of the relative error as the loss: every stage (errors 1e-1 … 1e-5) has gradients of the
  same size, and instances of different difficulty weigh alike. Averaged over the layers 1..j
  (deep supervision) rather than taken at layer j alone (the paper's eq. 12): with the last layer
  alone, training parked late layers (η ≈ 0) once the error reached a few 1e-6, and the
  continuation past K stalled there; with the average every layer must make progress.
- Initial values: the oracle schedule of Theorem 1 (ζₖ = ‖Xₖ₋₁ − X⋆‖∞ with η = 0.5), its
  geometric mean over a few training instances; η = 0.5. Training starts from a schedule that
  already converges, so few steps per stage suffice.
- Pre-training trains ζ_j as well as η_j. The authors' code resets ζⱼ to 0.1·ζⱼ₋₁ before every
  pre-training step, so it trains only η_j there; that quirk is not reproduced.
- Mini-batches through ``lax.map``: the instances of a batch run one after another (the mean loss
  and its gradient are the same as a ``vmap``'s; the memory is one instance's).

Every stage ends with a checkpoint (``lowrank_jax.rpca.params.save_params``, atomic); a run
restarted with the same arguments resumes after the last finished stage and ends with exactly the
parameters of an uninterrupted run (each stage's randomness is ``fold_in(key, stage)`` and each
phase starts a fresh optimiser).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import os
import time
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from lowrank_jax import _checks, datasets, linalg, loop
from lowrank_jax import progress as progress_bar
from lowrank_jax.precision import full_precision
from lowrank_jax.result import Status
from lowrank_jax.rpca._common import diverged, frob
from lowrank_jax.rpca.learned import (
    ORACLE_RULES,
    _layer_params,
    lrpca,
    lrpca_step,
    oracle_thresholds,
)
from lowrank_jax.rpca.params import LRPCAParams, data_scale, read_params, save_params


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """What ``train_lrpca`` trains on and how (a frozen dataclass, checked on creation).

    Stage j = 0..K trains layer j's (ζ_j, η_j) alone for ``pre_steps`` Adam steps, then layers
    0..j together for ``full_steps`` (stage 0: ζ_0 for both counts together), each step on
    ``batch`` fresh instances of the paper's generator. Theorem 1's oracle start
    (``init_rule``, ``init_scale``, ``init_eta``) = ("max", 1, 0.5) suits α ≤ 0.3; at higher
    outlier density ("rms", 2, 1/(1 − α)) starts from a schedule that converges.

    Attributes:
      n: the generator's size, square n × n, float32 (≥ 1; default 1000).
      rank: the generator's rank r (1 ≤ r ≤ n; default 5).
      alpha: the generator's outlier density α ∈ [0, 1) (default 0.1).
      num_layers: K, the number of learned layers (≥ 1; default 10).
      pre_steps: optimiser steps of each stage's pre-training phase (≥ 0; default 20).
      full_steps: optimiser steps of each stage's full-training phase (≥ 0; default 40).
      batch: instances per optimiser step (≥ 1; default 2).
      lr: Adam's learning rate, for log ζ and log η alike (> 0; default 0.03).
      init_instances: instances whose oracle schedule initialises ζ (≥ 1; default 4).
      init_rule: that oracle's rule, ``"max"`` (default) or ``"rms"`` (see
        ``oracle_thresholds``).
      init_scale: that oracle's factor c (> 0; default 1).
      init_eta: that oracle's step, and the initial η (> 0; default 0.5).
    """

    n: int = 1000
    rank: int = 5
    alpha: float = 0.1
    num_layers: int = 10
    pre_steps: int = 20
    full_steps: int = 40
    batch: int = 2
    lr: float = 0.03
    init_instances: int = 4
    init_rule: str = "max"
    init_scale: float = 1.0
    init_eta: float = 0.5

    def __post_init__(self):
        # Plain Python numbers: a NumPy integer made the checkpoint's JSON fail after stage 0 had
        # trained, and n = 40.5 passed here to fail inside the generator.
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for name, value in _config_fields(**fields).items():
            object.__setattr__(self, name, value)


def _number(value, name: str, args=None) -> float:
    """A finite real Python or NumPy number (not a bool, not a string) as a Python float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


_NUMBER = _checks.Convert(_number)


def _log_list(log, name: str, args=None):
    """None, or a list the per-stage entries are appended to."""
    if log is not None and not isinstance(log, list):
        raise TypeError(
            f"{name} must be a list (per-stage entries are appended) or None, got {log!r}"
        )
    return log


_CONFIG = _checks.Instance(TrainConfig, "build one with rpca.TrainConfig(**fields)")
_SAMPLER = _checks.Function("a function sampler(key, count) -> (Y, X_star)", optional=True)


@_checks.validate(
    _checks.Rule(
        lambda a: 0 <= a["alpha"] < 1, "alpha must be in [0, 1), got {alpha}", uses=("alpha",)
    ),
    _checks.Rule(
        lambda a: a["rank"] <= a["n"],
        "rank must be <= n, got rank = {rank}, n = {n}",
        uses=("rank", "n"),
    ),
    _checks.Rule(lambda a: a["lr"] > 0, "lr must be positive, got {lr}", uses=("lr",)),
    _checks.Rule(
        lambda a: a["init_scale"] > 0,
        "init_scale must be positive, got {init_scale}",
        uses=("init_scale",),
    ),
    _checks.Rule(
        lambda a: a["init_eta"] > 0, "init_eta must be positive, got {init_eta}", uses=("init_eta",)
    ),
    n=_checks.Count(),
    rank=_checks.Count(),
    num_layers=_checks.Count(),
    batch=_checks.Count(),
    init_instances=_checks.Count(),
    pre_steps=_checks.Count(minimum=0),
    full_steps=_checks.Count(minimum=0),
    alpha=_NUMBER,
    lr=_NUMBER,
    init_scale=_NUMBER,
    init_eta=_NUMBER,
    init_rule=_checks.Choice(*ORACLE_RULES),
)
def _config_fields(
    n,
    rank,
    alpha,
    num_layers,
    pre_steps,
    full_steps,
    batch,
    lr,
    init_instances,
    init_rule,
    init_scale,
    init_eta,
) -> dict:
    """The fields of a ``TrainConfig``, checked and as plain Python numbers."""
    return dict(
        n=n,
        rank=rank,
        alpha=alpha,
        num_layers=num_layers,
        pre_steps=pre_steps,
        full_steps=full_steps,
        batch=batch,
        lr=lr,
        init_instances=init_instances,
        init_rule=init_rule,
        init_scale=init_scale,
        init_eta=init_eta,
    )


def _instances(key, cfg: TrainConfig, count: int, sampler=None):
    """``count`` instances (Y, X⋆) stacked: ``sampler(key, count)`` if given (real data), else the
    paper's generator at ``cfg``, one instance after the other (``lax.map``, which on CPU is several
    times faster than the batched (``vmap``) generator)."""
    if sampler is not None:
        return sampler(key, count)
    keys = jax.random.split(key, count)
    p = jax.lax.map(lambda k: datasets.rpca_problem(k, cfg.n, cfg.n, cfg.rank, cfg.alpha), keys)
    return p.Y, p.X


def layer_error(params: LRPCAParams, Y, X_star, layers: int, *, throw: bool = True):
    """Relative error ‖X_j − X⋆‖_F/‖X⋆‖_F of LRPCA after its first j layers.

    Args:
      params: the ``LRPCAParams``.
      Y: (n1, n2) observation.
      X_star: (n1, n2) ground truth.
      layers: j, the number of layers to run (0: the initialisation).
      throw: as in ``lrpca`` (True, default: a diverging run raises
        ``RuntimeError``; False returns its error).

    Returns:
      The relative error, a scalar array.
    """
    out = lrpca(Y, params.rank, params.zeta[: layers + 1], params.eta[:layers], throw=throw)
    return linalg.relative_error(out.X, X_star)


def stage_loss(params: LRPCAParams, Y, X_star, layers: int, *, throw: bool = True):
    """One instance's training loss of stage j, the mean log relative error over layers 1..j.

        ℓ_j = (1/j) Σ_(k=1..j) log e_k,   e_k = ‖X_k − X⋆‖_F/‖X⋆‖_F   (ℓ_0 = log e_0)

    Args:
      params: the ``LRPCAParams``.
      Y: (n1, n2) observation.
      X_star: (n1, n2) ground truth.
      layers: j ≥ 0.
      throw: as in ``layer_error``; the training step passes False (see ``train_lrpca``).

    Returns:
      ℓ_j, a scalar array.
    """
    if layers == 0:
        return jnp.log(layer_error(params, Y, X_star, 0, throw=throw))
    out = lrpca(
        Y, params.rank, params.zeta[: layers + 1], params.eta[:layers], X_star=X_star, throw=throw
    )
    return jnp.mean(jnp.log(out.history["error"]))


def initial_params(key, cfg: TrainConfig, sampler=None) -> LRPCAParams:
    """The starting point of training: the geometric mean of oracle threshold schedules.

        log ζ = mean_b log ζ_oracle(Y_b, X⋆_b),   η_k = ``cfg.init_eta``

    over ``cfg.init_instances`` instances, the oracle with ``cfg.init_rule``, ``cfg.init_scale``
    and step ``cfg.init_eta`` (``oracle_thresholds``).

    Args:
      key: ``jax.random`` key of the instances.
      cfg: the ``TrainConfig``.
      sampler: as in ``train_lrpca`` (default None: the paper's generator).

    Returns:
      ``LRPCAParams`` with K = ``cfg.num_layers`` layers, β = φ = 1, ``scale`` the mean
      ``data_scale`` of the instances (the units of ζ) and ``alpha``
      ``cfg.alpha`` (None with a ``sampler``).
    """
    Y, X = _instances(key, cfg, cfg.init_instances, sampler)
    K = cfg.num_layers
    # One instance after the other, each a direct call whose schedule is checked on the host: inside
    # train_lrpca (a host function, whose JAX operations all run eagerly) the finiteness check of a
    # vmapped call, an equinox.error_if, raised whether or not the thresholds were finite.
    zetas = jnp.stack(
        [
            oracle_thresholds(
                Y[i], cfg.rank, X[i], K, cfg.init_eta, rule=cfg.init_rule, scale=cfg.init_scale
            )
            for i in range(Y.shape[0])
        ]
    )
    log_zeta = jnp.mean(jnp.log(zetas), axis=0)
    dtype = log_zeta.dtype  # one dtype for every leaf (x64, float64 samplers)
    log_eta = jnp.full((K,), jnp.log(cfg.init_eta), dtype)
    # the units ζ is learned in: the mean data scale of these instances (LRPCAParams.thresholds)
    scale = float(np.mean([float(data_scale(Y[i])) for i in range(Y.shape[0])]))
    return LRPCAParams(
        log_zeta,
        log_eta,
        jnp.ones((), dtype),
        jnp.ones((), dtype),
        rank=cfg.rank,
        n=cfg.n,
        scale=scale,
        alpha=None if sampler is not None else cfg.alpha,
    )


def _masks(params: LRPCAParams, layers: int, only_new: bool):
    """Which entries train: all layers 0..j, or only layer j's (ζ_j, η_j)."""
    K = params.num_layers
    z = np.zeros(K + 1, np.float32)
    e = np.zeros(K, np.float32)
    if only_new:
        z[layers] = 1
        if layers >= 1:
            e[layers - 1] = 1
    else:
        z[: layers + 1] = 1
        e[:layers] = 1
    return jnp.asarray(z), jnp.asarray(e)


@functools.lru_cache(maxsize=64)
def _make_phase(cfg: TrainConfig, layers: int, sampler=None):
    """A jitted optimiser step for stage ``layers``: fresh batch from ``key``, loss, masked update
    (cached: both phases of a stage, and repeated runs, share one compiled step)."""
    optimizer = _optimizer(cfg)

    def loss_fn(diff, static, Y, X):
        params = eqx.combine(diff, static)
        # One instance after the other: batched (vmapped) QR and skinny dots are slower on CPU.
        # throw=False: an instance whose run diverges does not abort the step from inside; its loss
        # (large, or NaN once the iterate overflows) reaches train_lrpca's own check.
        return jnp.mean(
            jax.lax.map(lambda yx: stage_loss(params, yx[0], yx[1], layers, throw=False), (Y, X))
        )

    @eqx.filter_jit
    def step(params, opt_state, key, mask_z, mask_e):
        Y, X = _instances(key, cfg, cfg.batch, sampler)
        diff, static = eqx.partition(params, eqx.is_inexact_array)
        loss, grads = jax.value_and_grad(loss_fn)(diff, static, Y, X)
        grads = eqx.tree_at(
            lambda p: (p.log_zeta, p.log_eta, p.beta, p.phi),
            grads,
            (
                grads.log_zeta * mask_z,
                grads.log_eta * mask_e,
                jnp.zeros_like(grads.beta),
                jnp.zeros_like(grads.phi),
            ),
        )
        updates, opt_state = optimizer.update(grads, opt_state, diff)
        return eqx.apply_updates(params, updates), opt_state, loss

    return step


def _optimizer(cfg: TrainConfig):
    return optax.adam(cfg.lr)


def _phase_steps(cfg: TrainConfig, layers: int):
    """[(only_new, steps)] of stage ``layers``."""
    if layers == 0:
        return [(False, cfg.pre_steps + cfg.full_steps)]
    return [(True, cfg.pre_steps), (False, cfg.full_steps)]


@_checks.host_function("rpca.train_lrpca")
@full_precision
@_checks.validate(
    cfg=_CONFIG,
    key=_checks.Key(),
    checkpoint=_checks.FilePath(optional=True),
    progress=_checks.Flag(),
    callback=_checks.Function("a function callback(stage, params)", optional=True),
    log=_checks.Convert(_log_list),
    sampler=_SAMPLER,
)
def train_lrpca(
    cfg: TrainConfig = TrainConfig(),
    *,
    key=None,
    checkpoint=None,
    progress: bool = True,
    callback=None,
    log=None,
    sampler=None,
) -> LRPCAParams:
    """Learn a K-layer LRPCA network layer by layer (Cai, Liu, Yin 2021, §3; deep unfolding).

    Stage j = 0..K minimises, over mini-batches of fresh instances (Y, X⋆),

        ℓ_j(Θ) = (1/B) Σ_b (1/j) Σ_(k=1..j) log ‖X_k(Y_b; Θ) − X⋆_b‖_F/‖X⋆_b‖_F

    with Adam on (log ζ, log η): first layer j's (ζ_j, η_j) alone, then layers 0..j together. The
    FRMNN factors stay β = φ = 1; ``frmnn_grid_search`` chooses them after.

    Args:
      cfg: ``TrainConfig``.
      key: ``jax.random`` key or integer seed (default key(0)); the whole run is a deterministic
        function of it and ``cfg``.
      checkpoint: path of the checkpoint file, written after every stage; if it exists and was
        written for the same ``cfg``, training resumes after its last finished stage.
      progress: show a tqdm progress bar (one tick per optimiser step).
      callback: ``callback(stage, params)`` after each stage's checkpoint (e.g. to stop early).
      log: optional list; per stage a dict (stage, seconds, first and last loss) is appended.
      sampler: optional jittable ``sampler(key, count) -> (Y, X⋆)`` stacked (count, n1, n2), to
        train on real data (e.g. video clips with pseudo ground truth) instead of the generator;
        then ``cfg.alpha`` is unused and ``cfg.n`` should be √(n1 n2).

    Returns:
      ``LRPCAParams`` with ζ, η trained and β = φ = 1. The loss runs
      ``lrpca`` with ``throw=False``, so an instance whose run diverges
      does not abort the compiled step; while its error stays finite (factors past the growth
      bound) the loss is large and Adam steps away from it. A non-finite batch loss raises
      ``RuntimeError`` naming the stage and step (lower ``cfg.lr``); the checkpoint then holds the
      last finished stage.
    """
    K = cfg.num_layers
    k_init, k_train = jax.random.split(key)
    start = 0
    params = None
    key_tag = _key_tag(key)
    if checkpoint is not None and os.path.exists(checkpoint):
        params, meta = _load_checkpoint(checkpoint, cfg, key_tag)
        start = meta["stage"] + 1
    if params is None:
        params = initial_params(k_init, cfg, sampler)
    optimizer = _optimizer(cfg)
    total = sum(s for j in range(start, K + 1) for _, s in _phase_steps(cfg, j))
    # no bar for a checkpoint that is already complete (it printed an empty "0step" bar)
    show = progress and total > 0
    bar = progress_bar.bar(total, "LRPCA layer-wise training", "step", show)
    try:
        for j in range(start, K + 1):
            t0 = time.perf_counter()
            stage_key = jax.random.fold_in(k_train, j)
            losses = []
            for phase, (only_new, steps) in enumerate(_phase_steps(cfg, j)):
                if steps == 0:
                    continue
                step = _make_phase(cfg, j, sampler)
                mask_z, mask_e = _masks(params, j, only_new)
                opt_state = optimizer.init(eqx.filter(params, eqx.is_inexact_array))
                phase_key = jax.random.fold_in(stage_key, phase)
                for i in range(steps):
                    params, opt_state, loss = step(
                        params, opt_state, jax.random.fold_in(phase_key, i), mask_z, mask_e
                    )
                    losses.append(float(loss))
                    if not np.isfinite(losses[-1]):
                        raise RuntimeError(
                            f"training loss became {losses[-1]} at stage {j}, step {i} "
                            "(the LRPCA runs diverged); lower cfg.lr"
                        )
                    bar.update(1)
                    bar.set_postfix(stage=j, err=f"{np.exp(losses[-1]):.2e}")
            entry = {
                "stage": j,
                "seconds": time.perf_counter() - t0,
                "first_error": float(np.exp(losses[0])) if losses else None,
                "last_error": float(np.exp(np.mean(losses[-5:]))) if losses else None,
            }
            if log is not None:
                log.append(entry)
            if checkpoint is not None:
                save_params(
                    checkpoint,
                    params,
                    {"stage": j, "config": dataclasses.asdict(cfg), "key": key_tag},
                )
            if callback is not None:
                callback(j, params)
    finally:
        bar.close()
    return params


def _key_tag(key):
    """The key's raw words, as a list for the checkpoint's JSON header."""
    key = _checks.as_key(key)
    data = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    return [int(v) for v in np.asarray(data).ravel()]


def _load_checkpoint(path, cfg: TrainConfig, key_tag):
    """The parameters and meta of a checkpoint, after ``read_params``'s checks (magic, header
    fields, payload length and SHA-256, shapes) and the run's: the meta holds exactly ``stage`` (an
    integer in 0..K), ``config`` (this run's) and ``key`` (this run's), and the parameters are of
    the configuration's rank, size and layer count. Anything else is a ``ValueError`` naming the
    path."""
    with open(path, "rb") as f:
        params, header = read_params(f.read(), source=os.fspath(path))
    meta = header["meta"]
    if set(meta) != {"stage", "config", "key"}:
        raise ValueError(
            f"checkpoint {path} is corrupt: meta fields {sorted(meta)}, expected "
            "['config', 'key', 'stage']; delete it to train from the start"
        )
    if meta["config"] != dataclasses.asdict(cfg):
        raise ValueError(
            f"checkpoint {path} was written for another configuration "
            f"({meta['config']}); delete it or pass the same TrainConfig"
        )
    # A resume with another key trained the remaining stages on other instances: a mix of two runs
    # that equals neither.
    if meta["key"] != key_tag:
        raise ValueError(
            f"checkpoint {path} was written by a run with another key; delete it or pass the "
            "same key to resume"
        )
    stage = meta["stage"]
    if isinstance(stage, bool) or not isinstance(stage, int) or not 0 <= stage <= cfg.num_layers:
        raise ValueError(
            f"checkpoint {path} is corrupt: stage {stage!r} is not an integer in "
            f"0..{cfg.num_layers}; delete it to train from the start"
        )
    if (params.num_layers, params.rank, params.n) != (cfg.num_layers, cfg.rank, cfg.n):
        raise ValueError(
            f"checkpoint {path} is corrupt: parameters of {params.num_layers} layers, rank "
            f"{params.rank}, n = {params.n} for a configuration of {cfg.num_layers} layers, rank "
            f"{cfg.rank}, n = {cfg.n}; delete it to train from the start"
        )
    return params, meta


def _continue(params: LRPCAParams, Y, L, R, beta, phi, extra: int):
    """Run layers K+1..K+``extra`` from (L_K, R_K) with LRPCA's own FRMNN schedule (eq. 13); returns
    (L, R, whether the run diverged by ``lrpca``'s rule)."""
    K = params.num_layers
    y_norm = frob(Y)
    y_norm = jnp.where(y_norm > 0, y_norm, 1.0)

    def step(k, state):
        z, e = _layer_params(k, params.zeta, params.eta, beta, phi, K, True)
        L, R, _ = lrpca_step(Y, state[0], state[1], z, e)
        return (L, R), None

    out = loop.run_fixed(
        step, (L, R), extra, start=K, diverged=lambda s, _: diverged(s[0], s[1], y_norm)
    )
    return out.state[0], out.state[1], out.status == Status.DIVERGED


def frmnn_grid() -> tuple[jax.Array, jax.Array]:
    """The default grid of ``frmnn_grid_search`` (step 0.1, as the paper).

    Returns:
      ``(betas, phis)``: float32 arrays β ∈ {0.5, …, 2.0} (16 values) and φ ∈ {0.1, …, 1.0} (10).
    """
    return jnp.round(jnp.arange(0.5, 2.01, 0.1), 2), jnp.round(jnp.arange(0.1, 1.01, 0.1), 2)


class FRMNNSearch(NamedTuple):
    """What ``frmnn_grid_search`` returns; it unpacks as ``params, errors``.

    Attributes:
      params: the trained model (``LRPCAParams``) with the chosen β, φ.
      errors: (len(betas), len(phis)), the grid's mean relative errors at layer K̄ (+inf where a
        point diverged).
    """

    params: LRPCAParams
    errors: jax.Array


# One axis of the FRMNN grid: a non-empty 1-D float32 array of finite values > 0.
_GRID_AXIS = {
    "ndim": 1,
    "low": 0,
    "low_open": True,
    "dtype_of": jax.ShapeDtypeStruct((), jnp.float32),
}


@_checks.host_function("rpca.frmnn_grid_search")
@full_precision
@_checks.validate(
    _checks.Rule(lambda a: a["betas"].shape[0] > 0, "betas must hold at least one value", uses=()),
    _checks.Rule(lambda a: a["phis"].shape[0] > 0, "phis must hold at least one value", uses=()),
    cfg=_CONFIG,
    sampler=_SAMPLER,
    progress=_checks.Flag(),
    key=_checks.Key(),
    num_instances=_checks.Count(),
    extra_layers=_checks.Count(minimum=0),
    betas=_checks.Hyper(**_GRID_AXIS, default=lambda a: frmnn_grid()[0]),
    phis=_checks.Hyper(**_GRID_AXIS, default=lambda a: frmnn_grid()[1]),
)
def frmnn_grid_search(
    params: LRPCAParams,
    cfg: TrainConfig,
    *,
    num_instances: int = 20,
    extra_layers: int = 5,
    betas=None,
    phis=None,
    sampler=None,
    key=None,
    progress: bool = False,
):
    """Choose FRMNN's continuation (β, φ) by grid search, the K learned layers frozen (eq. 14).

        (β, φ) = argmin over the grid of mean_b e_b(β, φ),
        e_b(β, φ) = ‖X_K̄(Y_b; ζ, η, β, φ) − X⋆_b‖_F / ‖X⋆_b‖_F,
        K̄ = K + ``extra_layers``,

    over ``num_instances`` fresh instances, past layer K with ζ_k = φ^(k−K) ζ_K and
    η_k = β^(k−K) η_K. The K frozen layers run once per instance; the continuation over the whole
    grid is vmapped (in chunks of ``GRID_CHUNK``) inside one jitted call. The objective sees layer
    K̄ only: a continuation chosen at K̄ = K + 5 may do worse a few layers later, and a larger
    ``extra_layers`` (30 for the shipped n = 300 and 100 models) favours continuations that keep
    descending.

    Args:
      params: the trained K-layer model (``train_lrpca``); its ζ, η stay frozen.
      cfg: the ``TrainConfig`` whose generator (n, rank, α) draws the instances.
      num_instances: instances averaged (≥ 1; default 20).
      extra_layers: K̄ − K (≥ 0; default 5, as the paper).
      betas, phis: 1-D grids of values > 0 (default None: ``frmnn_grid``, β ∈ {0.5, …, 2.0},
        φ ∈ {0.1, …, 1.0}).
      sampler: instead of the generator, a function ``sampler(key, count) -> (Y, X⋆)`` returning
        ``count`` stacked instances ((count, n1, n2) each), e.g. patches of real data.
      key: ``jax.random`` key or integer seed (default key(0)) of the instances.
      progress: show a tqdm bar of the instances done (default False).

    Returns:
      ``FRMNNSearch`` ``(params with the chosen β, φ, errors)``, ``errors`` of shape
      (len(betas), len(phis)): the grid's mean errors, +inf at a point that diverged on some
      instance (by ``lrpca``'s rule: non-finite factors, or ‖L‖_F‖R‖_F
      beyond 10⁴ ‖Y‖_F, in the K frozen layers or the continuation). If every point diverges,
      ``RuntimeError``.
    """
    Y, X = _instances(key, cfg, num_instances, sampler)
    progress = progress_bar.wanted(progress, params, Y, betas, phis)
    with progress_bar.CompiledBar(
        num_instances,
        f"FRMNN grid search ({betas.shape[0] * phis.shape[0]} (β, φ))",
        "instance",
        progress,
        channel=_GRID_CHANNEL,
    ):
        errors = _grid_errors(
            params, Y, X, betas, phis, extra_layers, _GRID_CHANNEL if progress else None
        )
    if not bool(jnp.any(jnp.isfinite(errors))):
        raise RuntimeError(
            "every (beta, phi) of the grid diverged: the learned layers (or the grid) "
            "do not suit these instances; no continuation was chosen"
        )
    i, j = np.unravel_index(int(jnp.argmin(errors)), errors.shape)
    chosen = eqx.tree_at(lambda p: (p.beta, p.phi), params, (betas[i], phis[j]))
    return FRMNNSearch(chosen, errors)


# Grid points vmapped together (lax.map's batch_size): chunks of 8 run 1.4x faster than one point at
# a time at n = 1000 (22 s vs 31 s for 160 points x 4 instances), while one vmap over all 160
# points, or chunks of 32, never finished on XLA:CPU (jax 0.10.2; all threads asleep after minutes).
GRID_CHUNK = 8


_GRID_CHANNEL = "frmnn-grid"  # progress channel of frmnn_grid_search's bar


@eqx.filter_jit
def _grid_errors(params, Y, X, betas, phis, extra_layers, progress=None):
    # The frozen K layers once per instance; then the continuation for every grid point, vmapped
    # in chunks of GRID_CHUNK, all in one compiled call. ``progress``: a CompiledBar channel that
    # hears of each instance once its grid is done (None: no callback is compiled).
    B, P = jnp.meshgrid(betas, phis, indexing="ij")

    def per_instance(iyx):
        i, y, x = iyx
        # throw=False: frozen layers that diverge on an instance make every point +inf, and the
        # search says so by name (below, in frmnn_grid_search) instead of aborting inside the call.
        base = lrpca(y, params.rank, params.zeta, params.eta, throw=False)
        base_diverged = base.status == Status.DIVERGED

        def one(bp):
            L, R, blown_up = _continue(params, y, base.L, base.R, bp[0], bp[1], extra_layers)
            return jnp.where(base_diverged | blown_up, jnp.inf, linalg.relative_error(L @ R.T, x))

        errs = jax.lax.map(one, (B.ravel(), P.ravel()), batch_size=GRID_CHUNK)
        if progress is not None:  # the errors as an argument: the report waits for them
            jax.debug.callback(
                lambda done, _: progress_bar.CompiledBar.reach(done, channel=progress), i + 1, errs
            )
        return errs

    grid = jax.lax.map(per_instance, (jnp.arange(Y.shape[0]), Y, X))  # (instances, grid)
    err = jnp.mean(grid, axis=0)
    err = jnp.where(jnp.isfinite(err), err, jnp.inf)
    return err.reshape(B.shape)
