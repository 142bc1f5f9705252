"""Training a ``ShallowNet`` by SGD or Prox-SGD: the optimizer, one run
(``train``), its epochs as an initial state and a step (``train_iteration``), and many
runs in one ``vmap`` (``sweep``).

An epoch is one step of ``train_iteration``, run by ``lowrank_jax.loop.run``: training has
no stopping rule, so a run that trains all its epochs ends in ``Status.MAX_ITER``. It ends in
``Status.DIVERGED`` when, after some epoch, the weights are not finite or the bound on the logits
over the data (see ``GROWTH_LIMIT``) has grown more than 10⁴-fold: the sign of a learning rate
far too large.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from lowrank_jax import _checks, loop, transforms
from lowrank_jax import progress as progress_bar
from lowrank_jax.pathnorm.network import (
    METHOD,
    REG,
    ShallowNet,
    check_inputs,
    labels,
    loss_fn,
    nonzero_fraction,
    outputs_of,
    penalty,
    prox_step,
    shallow_net,
)
from lowrank_jax.precision import full_precision
from lowrank_jax.result import Result, finish

# Divergence: after an epoch the weights are non-finite, or the bound B(θ) on the logits over the
# data (``_logit_bound``) exceeds GROWTH_LIMIT · max(B(θ₀), 1), θ₀ the starting network. A
# learning rate far too large can keep the weights finite while they grow a million-fold (ELU units
# pushed to their flat negative side stop passing gradients back), so non-finiteness alone misses
# it.
GROWTH_LIMIT = 1e4

_DIVERGED_MESSAGE = (
    "pathnorm.train diverged (non-finite weights, or logits grown beyond 1e4 times "
    "their starting bound): lower lr or, with method='sgd', λ (lam)"
)
_INVALID_MESSAGE = (
    "pathnorm.train: lr must be > 0 and lam >= 0 (a traced value broke this); the result is NaN"
)


class TrainResult(Result):
    """The result of ``train`` and ``sweep``: the trained network and its training record.

    The ``Result`` core (``status``, ``n_iter``, ``history``) plus the final loss, the share of
    non-zero weights and the model; ``sweep`` adds its leading (seeds, configurations) axes to
    every leaf.

    Attributes:
      n_iter: int32 scalar, the epochs run (all of them: training has no stopping rule).
      status: int32 scalar, ``Status.MAX_ITER`` for a run that trained; ``DIVERGED`` when the
        weights became non-finite or exploded (``GROWTH_LIMIT``); ``INVALID`` for a traced
        lr ≤ 0 or λ < 0.
      history: dict, ``history["loss"]`` (the minibatch regularised loss CE + λ g) and
        ``history["nonzero"]`` (``nonzero_fraction``), each of shape (epochs, logs_per_epoch):
        logged ``logs_per_epoch`` times per epoch.
      loss: float scalar, the last logged loss, ``history["loss"][-1, -1]``.
      nonzero: float scalar, the trained network's share of non-zero weights,
        ``history["nonzero"][-1, -1]``.
      model: the trained ``ShallowNet``.
    """

    loss: jax.Array
    nonzero: jax.Array
    model: ShallowNet


@_checks.validate(reg=REG, method=METHOD)
def optimizer(reg: str, method: str, lr, lam) -> optax.GradientTransformation:
    """The optax training rule of (``reg``, ``method``): SGD, or SGD followed by the prox.

        "sgd":  W ← W − lr ∇(CE + λ g)(W)
        "prox": W ← prox_{s g}(W − lr ∇CE(W)),   s = lr·λ ("path", "l1") or λ ("layer")

    ``optax.sgd(lr)`` for ``"sgd"`` (the penalty is in the loss,
    ``loss_fn``); ``transforms.proximal(optax.sgd(lr), prox_step, s)``
    for ``"prox"`` (``prox_step``; for ``"layer"`` the projection on the
    ℓ1 balls of radius 1/λ).

    Args:
      reg: ``"path"``, ``"l1"`` or ``"layer"`` (``REGULARIZERS``).
      method: ``"sgd"`` or ``"prox"`` (``METHODS``).
      lr: the learning rate > 0 (scalar; may be traced).
      lam: the regularisation weight λ ≥ 0 (scalar; may be traced).

    Returns:
      An ``optax.GradientTransformation`` whose ``update`` takes the params (a
      ``ShallowNet``).
    """
    if method == "sgd":
        return optax.sgd(lr)
    strength = lam if reg == "layer" else lr * lam

    def prox_fn(params, s):
        return prox_step(params, s, reg)

    return transforms.proximal(optax.sgd(lr), prox_fn, strength)


def _start(model, name: str, args):
    """The starting network: None, or a ``ShallowNet`` taking the
    columns of the argument ``X`` as its inputs."""
    model = shallow_net(model, name)
    check_inputs(model, args["X"])
    return model


def _given_outputs(args) -> int | None:
    """The number of outputs fixed by the arguments: ``outputs`` (a positive integer) or the
    starting model's, which must agree; None when neither is given."""
    outputs, model = args["outputs"], args["model"]
    if outputs is not None:
        outputs = _checks.check_positive_int(outputs, "outputs")
    if model is None:
        return outputs
    if outputs is not None and outputs != outputs_of(model):
        raise ValueError(f"outputs = {outputs} but model has {outputs_of(model)} outputs")
    return outputs_of(model)


def _training_labels(y, name: str, args) -> jax.Array:
    """y as int32 labels, one per row of X, below the outputs fixed by ``_given_outputs``."""
    return labels(y, args["X"].shape[0], _given_outputs(args))[0]


def _outputs(outputs, name: str, args) -> int:
    """The network's outputs: given, the starting model's, or max(y) + 1 of the (checked) labels;
    at least two."""
    outputs = _given_outputs(args)
    if outputs is None:
        outputs = int(np.max(np.asarray(args["y"]))) + 1
    if outputs < 2:
        raise ValueError(
            f"need at least two classes (outputs >= 2), got {outputs}: the softmax "
            "cross-entropy of a one-output network is 0 whatever its weights, so nothing "
            "would train; for labels of one class pass outputs= the number of classes"
        )
    return outputs


def _hidden(hidden, name: str, args):
    """The hidden width, at least one unit when the network is built here (unused with a
    ``model``)."""
    return hidden if args["model"] is not None else _checks.check_positive_int(hidden, name)


# What train and sweep take: X as a finite float matrix (integer pixels are converted, not
# scaled), y integer labels below the number of outputs (that of ``model`` when one is given, else
# ``outputs``, else max(y) + 1), at least two outputs, and the counts as Python ints (the compiled
# training slices with them, so they must be static).
_DATA = {
    "reg": REG,
    "method": METHOD,
    "batch": _checks.Count(),
    "logs_per_epoch": _checks.Count(),
    "X": _checks.Matrix(scale=True),
    "model": _checks.Convert(_start, optional=True),
    "y": _checks.Convert(_training_labels),
    "outputs": _checks.Convert(_outputs),
    "key": _checks.Key(),
    "hidden": _checks.Convert(_hidden),
}
_MINIBATCHES = _checks.Rule(  # shapes only
    lambda a: a["X"].shape[0] // a["batch"] >= a["logs_per_epoch"],
    "need at least {logs_per_epoch} minibatches of {batch} per epoch, got {X.shape[0]} examples",
    uses=(),
)


# What train and its iteration accept: the data and model, one learning rate and one λ.
_ARGS = dict(
    **_DATA,
    lr=_checks.Hyper(ndim=0, low=0, low_open=True, dtype_of="X"),
    lam=_checks.Hyper(ndim=0, dtype_of="X"),
)


@full_precision
@_checks.validate(_MINIBATCHES, **_ARGS, epochs=_checks.Count(), throw=_checks.Flag())
def train(
    X,
    y,
    *,
    reg: str,
    method: str,
    lr,
    lam,
    epochs: int = 20,
    batch: int = 100,
    hidden: int = 200,
    logs_per_epoch: int = 10,
    model: ShallowNet | None = None,
    outputs: int | None = None,
    key=None,
    progress: bool = False,
    throw: bool = True,
) -> TrainResult:
    """Train a ``ShallowNet`` by minibatch SGD or Prox-SGD on CE + λ g.

        min_W  CE(W) + λ g(W),   CE the mean softmax cross-entropy on (X, y),
        "sgd":  W ← W − lr ∇(CE + λ g)(W)        (g's subgradient, by autodiff)
        "prox": W ← prox_h(W − lr ∇CE(W)),  h = lr·λ·g   (Prox-SGD: exact zeros)

    (Latorre, Rolland, Hallak, Cevher 2020: §3 and the experiments of §7), with the minibatches
    reshuffled every epoch and a constant learning rate. An epoch runs
    ⌊⌊samples/batch⌋/logs_per_epoch⌋ · logs_per_epoch minibatches; the few examples left over are
    a different random set each epoch. One jitted program; ``key``, ``lr`` and ``lam`` are traced,
    so a ``vmap`` over them trains many networks in one call (``sweep``).

    Divergence: after every epoch the weights are checked. With B(θ) = max_k (|b_out,k| +
    Σ_j |W_out,kj| (‖W_in,j‖₁ max|X| + |b_in,j|)), a bound on every logit over the data's range
    (|elu(z)| ≤ |z|), the run has diverged when a weight is not finite or B(θ) > 10⁴ · max(B(θ₀), 1)
    for the starting network θ₀ (``GROWTH_LIMIT``).

    Args:
      X: (samples, inputs) examples in [0, 1], one per row. An integer X is converted to float,
        not rescaled: divide raw pixels by 255 first.
      y: (samples,) integer labels 0, 1, … below ``outputs``.
      reg: the regulariser g: ``"path"`` (the 1-path-norm, the sum of |W_out[k, j]| |W_in[j, i]|
        over k, j, i),
        ``"l1"`` (Σ|W_in| + Σ|W_out|) or ``"layer"`` (each row of W_in and W_out in the ℓ1 ball of
        radius 1/λ for ``"prox"``; the penalty Σ_layers max-row-ℓ1 for ``"sgd"``;
        ``penalty``).
      method: ``"sgd"`` (subgradient steps on CE + λ g) or ``"prox"`` (Prox-SGD with the exact prox,
        ``prox_step``: for ``"path"`` the global prox of
        ``path_norm_prox``, for ``"layer"`` the projection on the balls).
      lr: the learning rate > 0 (scalar; may be traced).
      lam: the regularisation weight λ ≥ 0 (scalar; may be traced).
      epochs: passes over the data (≥ 1, static; default 20). Training has no stopping rule.
      batch: minibatch size (≥ 1; default 100).
      hidden: width of the hidden layer of a new network (≥ 1; default 200).
      logs_per_epoch: how many times per epoch the loss and the share of non-zero weights are
        logged (≥ 1, at most the number of minibatches per epoch; default 10).
      model: a ``ShallowNet`` to start from instead of a new one (its
        sizes then rule, and ``hidden`` is not used); default None.
      outputs: the number of classes (≥ 2); default max(y) + 1 (needs a concrete y). Labels of a
        single class need it given, since a one-output network's cross-entropy is 0 whatever its
        weights.
      key: ``jax.random`` key or integer seed of the starting network and the shuffles (default
        key(0)).
      progress: show a tqdm bar of epochs, moved from inside the compiled program through
        ``jax.debug.callback`` (default False).
      throw: with a run that diverges, raise ``RuntimeError`` (True, default; also inside
        ``jit``/``vmap``/``lowrank_jax.sweep.run``), or only report
        ``status == Status.DIVERGED`` (False). A traced lr ≤ 0 or λ < 0 (a sweep point) is
        ``Status.INVALID`` with NaN weights; concrete ones are refused with a ``ValueError``.

    Returns:
      ``TrainResult``: ``status`` (``Status.MAX_ITER`` for a run that trained all its epochs),
      ``n_iter`` = epochs, the final ``loss`` (the minibatch CE + λ g) and ``nonzero`` (the share
      of non-zero weights), their ``history`` (epochs, logs_per_epoch), and the trained ``model``.

    Example:
        ```python
        import jax, jax.numpy as jnp
        from sklearn.datasets import load_digits
        from lowrank_jax import pathnorm

        d = load_digits()
        X, y = jnp.asarray(d.data / 16, jnp.float32), jnp.asarray(d.target)
        res = pathnorm.train(
            X[:1400], y[:1400], reg="path", method="prox", lr=0.1, lam=3e-3,
            epochs=5, hidden=64, key=jax.random.key(0),
        )
        # 1 (Status.MAX_ITER: all epochs ran), 5, CE + λ g ≈ 2.2
        print(res.status, res.n_iter, res.loss)
        print(
            pathnorm.error_rate(res.model, X[1400:], y[1400:]),  # clean error ≈ 0.26
            res.nonzero,  # ≈ 0.94: Prox-SGD sets exact zeros
            pathnorm.robust_error(
                res.model, X[1400:], y[1400:], eps=0.05, key=jax.random.key(1)
            ),  # ≈ 0.38
        )
        ```
    """
    progress = progress_bar.wanted(progress, key, X, y, lr, lam)
    with progress_bar.CompiledBar(
        epochs, f"training ({reg}/{method})", "epoch", progress, channel="training"
    ):
        out = _train(
            key,
            X,
            y,
            lr,
            lam,
            model,
            reg=reg,
            method=method,
            epochs=epochs,
            batch=batch,
            hidden=hidden,
            logs_per_epoch=logs_per_epoch,
            outputs=outputs,
            progress=progress,
        )
        if progress:
            jax.block_until_ready(out)  # the bar closes when the epochs are done, not at dispatch
    return finish(out, throw, diverged=_DIVERGED_MESSAGE, invalid=_INVALID_MESSAGE)


@full_precision
@_checks.validate(_MINIBATCHES, **_ARGS)
def train_iteration(
    X,
    y,
    *,
    reg: str,
    method: str,
    lr,
    lam,
    batch: int = 100,
    hidden: int = 200,
    logs_per_epoch: int = 10,
    model: ShallowNet | None = None,
    outputs: int | None = None,
    key=None,
) -> loop.Iteration:
    """Path-norm training as an initial state and an epoch step, to run, warm-start or stop as one
    wishes.

    The iteration that ``train`` runs (same arguments and equations), one step an epoch: its
    state is ``(params, opt_state)``, the network's arrays (``eqx.partition(model,
    eqx.is_array)[0]``, a ``ShallowNet`` with None in its other fields)
    and the state of ``optimizer``'s rule; its diagnostics per epoch are ``{"loss": …,
    "nonzero": …}``, each (logs_per_epoch,), as a row of ``train``'s history. Epoch k shuffles
    with a key derived from ``key`` and k alone, so a run resumed with ``start=k`` trains as the
    whole run does. It has no stopping rule (``it.stop`` is None); its divergence rule is
    ``train``'s, against the starting network's logit bound. So

        it = train_iteration(X, y, reg=…, method=…, lr=…, lam=…, ...)
        it.result(loop.run(it, max_iter=e))
            == train(X, y, ..., epochs=e, throw=False)

    Args:
      X: (samples, inputs) examples in [0, 1], one per row.
      y: (samples,) integer labels 0, 1, … below ``outputs``.
      reg: the regulariser g: ``"path"``, ``"l1"`` or ``"layer"``.
      method: ``"sgd"`` or ``"prox"``.
      lr: the learning rate > 0 (scalar; may be traced).
      lam: the regularisation weight λ ≥ 0 (scalar; may be traced).
      batch: minibatch size (≥ 1; default 100).
      hidden: width of the hidden layer of a new network (≥ 1; default 200).
      logs_per_epoch: how many times per epoch the loss and the share of non-zero weights are
        logged (≥ 1, at most the number of minibatches per epoch; default 10).
      model: a ``ShallowNet`` to start from instead of a new one
        (default None).
      outputs: the number of classes (≥ 2); default max(y) + 1.
      key: ``jax.random`` key or integer seed of the starting network and the shuffles (default
        key(0)).

    Returns:
      A ``lowrank_jax.loop.Iteration`` whose ``result`` gives a ``TrainResult`` (no
      exception on failure: read its ``status``, or pass it to
      ``lowrank_jax.result.finish``).

    Example:
        ```python
        import jax, jax.numpy as jnp
        from sklearn.datasets import load_digits
        from lowrank_jax import loop, pathnorm

        d = load_digits()
        X, y = jnp.asarray(d.data[:400] / 16, jnp.float32), jnp.asarray(d.target[:400])
        it = pathnorm.train_iteration(
            X, y, reg="path", method="prox", lr=0.1, lam=3e-3,
            hidden=16, logs_per_epoch=2,
        )
        first = loop.run(it, max_iter=2)  # two epochs
        warm = it._replace(state=first.state)  # ... then two more from there
        out = it.result(loop.run(warm, max_iter=2, start=2))
        # 2 2.4 0.97: the loss and nonzero of train(…, epochs=4)
        print(out.n_iter, out.loss, out.nonzero)
        ```
    """
    return _train_iteration(
        key,
        X,
        y,
        lr,
        lam,
        model,
        reg=reg,
        method=method,
        batch=batch,
        hidden=hidden,
        logs_per_epoch=logs_per_epoch,
        outputs=outputs,
    )


def _logit_bound(model, x_max):
    """B = max_k (|b_out,k| + Σ_j |W_out,kj| (‖W_in,j‖₁ x_max + |b_in,j|)): no logit of ``model``
    exceeds B in magnitude on inputs with ‖x‖∞ ≤ x_max (|elu(z)| ≤ |z|). NaN or inf for a model
    with a non-finite parameter."""
    # (hidden,)
    unit = jnp.sum(jnp.abs(model.hidden.weight), axis=1) * x_max + jnp.abs(model.hidden.bias)
    return jnp.max(jnp.abs(model.out.bias) + jnp.abs(model.out.weight) @ unit)


def _train_iteration(
    key,
    X,
    y,
    lr,
    lam,
    model,
    *,
    reg,
    method,
    batch,
    hidden,
    logs_per_epoch,
    outputs,
    progress=False,
) -> loop.Iteration:
    k_init, k_data = jax.random.split(key)
    if model is None:
        # in X's dtype (as lr and λ are): with x64 on, float32 data trained a float64 network
        model = ShallowNet(X.shape[1], hidden, outputs, key=k_init, dtype=X.dtype)
    params, static = eqx.partition(model, eqx.is_array)
    opt = optimizer(reg, method, lr, lam)
    steps = X.shape[0] // batch
    per_log = steps // logs_per_epoch
    x_max = jnp.max(jnp.abs(X))
    limit = GROWTH_LIMIT * jnp.maximum(_logit_bound(params, x_max), 1.0)

    def sgd_step(carry, idx):
        params, state = carry
        m = eqx.combine(params, static)

        def objective(p):
            return loss_fn(eqx.combine(p, static), X[idx], y[idx], reg, method, lam)

        loss, g = jax.value_and_grad(objective)(params)
        upd, state = opt.update(g, state, params)
        params = optax.apply_updates(params, upd)
        reg_loss = loss if method == "sgd" else loss + lam * penalty(m, reg)
        return (params, state), reg_loss

    def epoch(e, carry):
        used = per_log * logs_per_epoch * batch
        # The shuffle of epoch e is drawn from fold_in(k_data, e) (with JAX's partitionable
        # threefry the same key as split(k_data, epochs)[e]): known from e alone, so a run resumed
        # at epoch e shuffles as the whole run does.
        perm = jax.random.permutation(jax.random.fold_in(k_data, e), X.shape[0])[:used]
        perm = perm.reshape(logs_per_epoch, per_log, batch)

        def chunk(carry, idxs):
            carry, losses = jax.lax.scan(sgd_step, carry, idxs)
            return carry, (losses[-1], nonzero_fraction(eqx.combine(carry[0], static)))

        carry, (loss, nnz) = jax.lax.scan(chunk, carry, perm)
        if progress:
            jax.debug.callback(
                functools.partial(progress_bar.CompiledBar.reach, channel="training"), e + 1
            )
        return carry, {"loss": loss, "nonzero": nnz}

    def diverged(carry, diag):
        return ~(_logit_bound(carry[0], x_max) <= limit)  # NaN (a non-finite weight) counts too

    def result(out):
        return TrainResult(
            n_iter=out.n_iter,
            status=out.status,
            history=out.history,
            loss=out.final["loss"][-1],
            nonzero=out.final["nonzero"][-1],
            model=eqx.combine(out.state[0], static),
        )

    return loop.iteration(
        (params, opt.init(params)),
        epoch,
        diverged=diverged,
        invalid=_checks.any_nan(lr, lam),
        result=result,
    )


@eqx.filter_jit
def _train(key, X, y, lr, lam, model, *, epochs, **static):
    it = _train_iteration(key, X, y, lr, lam, model, **static)
    return it.result(loop.run(it, max_iter=epochs))


def _grid(values, name: str, args) -> jax.Array:
    """A 1-D grid of hyperparameters as ``lowrank_jax._checks.Hyper`` checks them (``lrs``
    > 0, ``lams`` ≥ 0), a scalar taken as one configuration."""
    spec = _checks.Hyper(low=0, low_open=name == "lrs", dtype_of="X")
    return jnp.atleast_1d(spec.convert(values, name, args))


def _not_empty(name: str) -> _checks.Rule:
    return _checks.Rule(  # shapes only
        lambda a: a[name].size > 0,
        f"{name} is empty: pass at least one configuration (lrs and lams of equal length)",
        uses=(),
    )


_GRID = (
    _not_empty("lrs"),
    _not_empty("lams"),
    _checks.Rule(  # shapes only
        lambda a: a["lrs"].shape == a["lams"].shape and a["lrs"].ndim == 1,
        "lrs and lams must be 1-D of equal length, got {lrs.shape} and {lams.shape}",
        uses=(),
    ),
)


@full_precision
@_checks.validate(
    _MINIBATCHES,
    *_GRID,
    **_DATA,
    lrs=_checks.Convert(_grid),
    lams=_checks.Convert(_grid),
    seeds=_checks.Count(),
    epochs=_checks.Count(),
)
def sweep(
    X,
    y,
    *,
    reg: str,
    method: str,
    lrs,
    lams,
    seeds: int = 1,
    epochs: int = 20,
    batch: int = 100,
    hidden: int = 200,
    logs_per_epoch: int = 10,
    model: ShallowNet | None = None,
    outputs: int | None = None,
    key=None,
    progress: bool = False,
) -> TrainResult:
    """Train one network per (seed, lr, λ) with ``train``, all in one ``vmap``ped, jitted call.

        keys = jax.random.split(key, seeds)
        res[s, c] = train(X, y, lr=lrs[c], lam=lams[c], key=keys[s], …)

    so even ``seeds=1`` differs from ``train(…, key=key)``: it equals
    ``train(…, key=jax.random.split(key, 1)[0])``. Nothing is raised for a configuration whose
    training diverges (a learning rate too large): its ``status`` is ``Status.DIVERGED`` and the
    other networks are unaffected (``train`` with ``throw=False``). Select the networks that
    trained with ``res.status == Status.MAX_ITER``.

    Args:
      X, y, reg, method, epochs, batch, hidden, logs_per_epoch, model, outputs, progress: as in
        ``train``.
      lrs: (configurations,) learning rates > 0, non-empty.
      lams: (configurations,) regularisation weights λ ≥ 0, ``lrs``'s length (one configuration
        per pair; use ``jnp.meshgrid`` for a grid).
      seeds: how many networks per configuration, each from its own key (≥ 1; default 1).
      key: ``jax.random`` key or integer seed split into the ``seeds`` keys (default key(0)).

    Returns:
      ``TrainResult`` whose leaves carry leading axes (seeds, configurations): ``status``,
      ``n_iter``, ``loss`` and ``nonzero`` (seeds, configurations), ``history["loss"]`` (seeds,
      configurations, epochs, logs_per_epoch), and the ``model``'s weights.

    Example:
        ```python
        import jax.numpy as jnp
        from sklearn.datasets import load_digits
        from lowrank_jax import pathnorm

        d = load_digits()
        X, y = jnp.asarray(d.data[:400] / 16, jnp.float32), jnp.asarray(d.target[:400])
        res = pathnorm.sweep(
            X, y, reg="path", method="prox",
            lrs=jnp.full(2, 0.1), lams=jnp.array([0.0, 3e-3]),
            seeds=2, epochs=2, hidden=16, logs_per_epoch=2,
        )
        # status (2, 2): seeds × configurations
        print(res.status.shape, res.loss.mean(axis=0), res.nonzero.mean(axis=0))
        ```
    """
    progress = progress_bar.wanted(progress, key, X, y, lrs, lams)

    def one(k, lr, lam):
        return _train(
            k,
            X,
            y,
            lr,
            lam,
            model,
            reg=reg,
            method=method,
            epochs=epochs,
            batch=batch,
            hidden=hidden,
            logs_per_epoch=logs_per_epoch,
            outputs=outputs,
            progress=progress,
        )

    with progress_bar.CompiledBar(
        epochs,
        f"training ({reg}/{method}, {seeds * lrs.shape[0]} networks)",
        "epoch",
        progress,
        channel="training",
    ):
        out = jax.vmap(jax.vmap(one, in_axes=(None, 0, 0)), in_axes=(0, None, None))(
            jax.random.split(key, seeds), lrs, lams
        )
        if progress:
            jax.block_until_ready(out)
        return out
