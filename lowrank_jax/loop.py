"""The one place that runs an update rule: a fixed number of times, or until a tolerance.

An update rule is a pure function ``step(k, state) -> (state, diag)`` where ``k`` is the 0-based
iteration index (an int32 scalar; rules with per-iteration hyperparameters index their arrays with
it) and ``diag`` is a pytree of per-iteration diagnostics (usually scalars). Both drivers run inside
``jit`` and return a ``LoopResult`` whose ``history`` stacks ``diag`` along a leading axis of
length ``num_steps`` / ``max_iter``.

Under ``vmap`` an early-stopping loop runs until its last point stops. JAX's own batching of a
``while_loop`` whose predicate differs per point re-selects every carried array each iteration, the
whole ``(max_iter, ...)`` history buffer included, and turns the history write into a scatter at a
per-point index: O(max_iter) work per iteration, O(max_iter²) per run. ``run_until`` instead
keeps one shared iteration counter and loop predicate ("some point still runs") and freezes the
points that have stopped itself (one select of the state per iteration), so an iteration's cost does
not grow with ``max_iter``; a single run pays nothing for it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.custom_batching import custom_vmap

from lowrank_jax import _checks
from lowrank_jax.precision import full_precision
from lowrank_jax.progress import CompiledBar
from lowrank_jax.result import Status

Step = Callable[[jax.Array, Any], tuple[Any, Any]]
Predicate = Callable[[Any, Any], jax.Array]


def non_finite(state, diag=None) -> jax.Array:
    """Whether any floating-point leaf of ``state`` holds a NaN or an infinity.

    The default divergence rule of the drivers: pass it as ``diverged=loop.non_finite``.

    Args:
      state: any pytree; leaves that are not floating point are ignored.
      diag: the step's diagnostics (unused; the signature of a ``diverged`` rule).

    Returns:
      A boolean 0-d array (False when ``state`` has no floating-point leaf).
    """
    leaves = [x for x in jax.tree.leaves(state) if jnp.issubdtype(jnp.result_type(x), jnp.inexact)]
    if not leaves:
        return jnp.asarray(False)
    return jnp.logical_not(jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves])))


def _flag(pred, state, diag):
    """``pred(state, diag)``, or'ed with a NaN in any floating-point diagnostic (a NaN residual can
    never meet a tolerance: the run has failed, whatever the iterate looks like). False without
    ``pred``: loops that judge no divergence."""
    if pred is None:
        return jnp.asarray(False)
    nan = [
        jnp.any(jnp.isnan(d))
        for d in jax.tree.leaves(diag)
        if jnp.issubdtype(jnp.result_type(d), jnp.inexact)
    ]
    return jnp.asarray(pred(state, diag), bool) | (jnp.any(jnp.stack(nan)) if nan else False)


def _code(converged, diverged, running=Status.MAX_ITER):
    """The status after a step: DIVERGED before CONVERGED (a residual that a diverged iterate drove
    to 0 is no convergence), else ``running``."""
    return jnp.where(
        diverged, Status.DIVERGED, jnp.where(converged, Status.CONVERGED, running)
    ).astype(jnp.int32)


class LoopResult(NamedTuple):
    """What ``run_fixed`` and ``run_until`` return.

    Attributes:
      state: the final state.
      history: ``diag`` stacked along a leading iteration axis (rows past ``n_iter`` are NaN / -1 /
        False).
      n_iter: int32, the number of steps taken.
      final: ``diag`` of the last step taken (blank, as the padding, when no step ran).
      status: int32 ``lowrank_jax.result.Status`` code: CONVERGED (``stop`` was true),
        MAX_ITER (the budget ran out; always so for ``run_fixed`` unless it diverged), DIVERGED
        (``diverged`` was true; ``run_until`` stops there), INVALID (``invalid`` was true).
    """

    state: Any
    history: Any
    n_iter: jax.Array
    final: Any
    status: jax.Array


def _blank_like(diag):
    """Padding for history rows that were never written: NaN for floats, -1 for integers, False for
    booleans (a -1 cast to bool would read True)."""

    def blank(x):
        x = jnp.asarray(x)
        fill = (
            jnp.nan
            if jnp.issubdtype(x.dtype, jnp.inexact)
            else False
            if x.dtype == jnp.bool_
            else -1
        )
        return jnp.full(x.shape, fill, x.dtype)

    return jax.tree.map(blank, diag)


@custom_vmap
def _any_running(running):
    """``running`` itself; under ``vmap``, whether any point of the batch is running (unbatched), so
    that the ``while_loop`` predicate, and with it the iteration counter, stays shared."""
    return running


@_any_running.def_vmap
def _any_running_batched(axis_size, in_batched, running):
    return (jnp.any(running) if in_batched[0] else running), False


@custom_vmap
def _unless_stopped(stopped, new, old):
    """``new`` where the point still runs, ``old`` where it had stopped. A single run's body only
    executes while it runs, so outside ``vmap`` this is ``new`` and costs nothing."""
    return new


@_unless_stopped.def_vmap
def _unless_stopped_batched(axis_size, in_batched, stopped, new, old):
    # Selects even when the flag is shared by this batch: an enclosing vmap (a sweep around jacfwd,
    # which vmaps over tangents) may batch the flag, and it sees this rule's ops, not the wrapper.
    b_stop, b_new, b_old = in_batched
    b_out = jax.tree.map(lambda bn, bo: b_stop or bn or bo, b_new, b_old)

    def pick(n, bn, o, bo, batched):
        grow = lambda v, bv: (
            v if bv or not batched else jnp.broadcast_to(v, (axis_size,) + jnp.shape(v))
        )  # noqa: E731
        n, o = grow(n, bn), grow(o, bo)
        flag = stopped.reshape((axis_size,) + (1,) * (jnp.ndim(n) - 1)) if b_stop else stopped
        return jnp.where(flag, o, n)

    return jax.tree.map(pick, new, b_new, old, b_old, b_out), b_out


@jax.custom_jvp
def _unless_stopped_flat(stopped, new, old):
    """``_unless_stopped`` on lists of arrays, with its forward-mode rule written out: the
    tangents are selected by the same flag. JAX's own JVP of a ``custom_vmap`` function calls the
    batching rule with only the arguments batched in both primal and tangent marked batched; the
    flag, a bool whose tangent is never batched, was then mapped over a second time and
    ``vmap(jvp(...))`` built (batch, batch) arrays that failed to compile."""
    return _unless_stopped(stopped, new, old)


@_unless_stopped_flat.defjvp
def _unless_stopped_flat_jvp(primals, tangents):
    stopped, new, old = primals
    _, t_new, t_old = tangents
    real = [jnp.dtype(t.dtype) != jax.dtypes.float0 for t in t_new]  # integer / key leaves: float0
    picked = iter(
        _unless_stopped(
            stopped, [t for t, r in zip(t_new, real) if r], [t for t, r in zip(t_old, real) if r]
        )
    )
    return (
        _unless_stopped(stopped, new, old),
        [next(picked) if r else t for t, r in zip(t_new, real)],
    )


def _keep_running(stopped, new, old):
    """``new`` where the point still runs, ``old`` where it had stopped (same structure), on their
    leaves: the ``custom_vmap`` / ``custom_jvp`` pair takes flat lists of arrays, since forward mode
    (``jacfwd``) cannot match a ``None`` in a state (a solver's unused slot) with its tangent."""
    leaves_new, tree = jax.tree.flatten(new)
    return tree.unflatten(_unless_stopped_flat(stopped, leaves_new, tree.flatten_up_to(old)))


def run_fixed(
    step: Step,
    state,
    num_steps: int,
    *,
    start: int = 0,
    diverged: Predicate | None = None,
    invalid=None,
) -> LoopResult:
    """Run ``step`` exactly ``num_steps`` times with ``lax.scan`` (reverse-mode differentiable).

    The iteration index passed to ``step`` runs from ``start`` to ``start + num_steps − 1``; the
    history has ``num_steps`` rows. ``diverged`` is checked after every step, together with a NaN in
    any floating-point entry of ``diag``; once true the status is DIVERGED (the scan still runs its
    fixed length).

    Args:
      step: the update rule ``step(k, state) -> (state, diag)``, k an int32 scalar.
      state: the initial state, any pytree the step takes and returns.
      num_steps: the number of steps, an integer ≥ 0.
      start: the index passed to the first step, default 0 (a solver resuming a run, or whose first
        step was taken apart, passes where it is); may be traced.
      diverged: ``diverged(state, diag) -> bool``, e.g. ``non_finite``. None (default): no
        divergence check, the status is MAX_ITER.
      invalid: a boolean scalar, as in ``run_until``; None (default): no such check.

    Returns:
      A ``LoopResult`` with ``n_iter = num_steps`` and status MAX_ITER, DIVERGED or INVALID.
    """
    num_steps = _checks.check_positive_int(num_steps, "num_steps", minimum=0)
    _, diag_shape = jax.eval_shape(lambda s: step(jnp.asarray(start, jnp.int32), s), state)
    blank = _blank_like(jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), diag_shape))

    def body(carry, k):
        s, bad, _ = carry
        s, diag = step(k, s)
        return (s, bad | _flag(diverged, s, diag), diag), diag

    ks = jnp.arange(num_steps, dtype=jnp.int32) + start  # start may be traced, as in run_until
    (state, bad, final), history = lax.scan(body, (state, jnp.asarray(False), blank), ks)
    out = LoopResult(state, history, jnp.asarray(num_steps, jnp.int32), final, _code(False, bad))
    return out if invalid is None else _poison(out, invalid)


def run_until(
    step: Step,
    state,
    *,
    max_iter: int,
    stop: Predicate,
    diverged: Predicate | None = None,
    start: int = 0,
    differentiable: bool = False,
    progress: str | None = None,
    invalid=None,
) -> LoopResult:
    """Run ``step`` until ``stop`` or ``diverged`` is true, or ``max_iter`` steps were taken.

    After every step ``stop(state, diag)`` and ``diverged(state, diag)`` (or'ed with a NaN in any
    floating-point entry of ``diag``, as in ``run_fixed``) are evaluated; the status says which
    ended the run. DIVERGED wins over CONVERGED: a residual that a blown-up iterate drove to 0 is no
    convergence.

    ``differentiable=False`` uses ``lax.while_loop``: steps after the stop are never executed;
    forward mode (``jvp``, ``jacfwd``, and ``vmap`` of them) works, reverse mode does not (``grad``
    raises JAX's "Reverse-mode differentiation does not work for lax.while_loop …").
    ``differentiable=True`` uses a ``lax.scan`` of length ``max_iter`` whose body is a ``lax.cond``
    that skips the work once stopped, so ``grad`` works. Either way the history rows after the last
    step are padding (NaN / -1 / False).

    Args:
      step: the update rule ``step(k, state) -> (state, diag)``, k an int32 scalar.
      state: the initial state, any pytree the step takes and returns.
      max_iter: the iteration budget, an integer ≥ 0 (keyword-only).
      stop: ``stop(state, diag) -> bool scalar``, the convergence rule (e.g.
        ``lambda s, d: d["residual"] < tol``); anything but a boolean scalar raises ``TypeError``.
      diverged: ``diverged(state, diag) -> bool``, e.g. ``non_finite``. None (default): no
        divergence check.
      start: the index passed to the first step, as in ``run_fixed`` (default 0).
      differentiable: False (default) for a ``while_loop``, True for a ``scan`` that ``grad`` can
        differentiate.
      progress: a channel name of ``lowrank_jax.progress.CompiledBar``; the loop then reports
        the iterations done to the bar open on that channel, about a hundred times per ``max_iter``
        (never per iteration: each report is a trip to the host). None (default) compiles no report.
      invalid: a boolean scalar, typically ``jnp.isnan(tol)`` for the tolerance that ``stop``
        compares with (a traced tolerance that breaks its rule arrives as NaN). Where it is true the
        status is INVALID, the floating-point leaves of the final state are NaN and the diagnostics
        are blank (NaN, −1, False). None (default): no such check.

    Returns:
      A ``LoopResult``: the final state, the history (``max_iter`` rows), ``n_iter``, the last
      diagnostics and the status (CONVERGED, MAX_ITER, DIVERGED or INVALID).

    Example:
        ```python
        import jax.numpy as jnp
        from lowrank_jax import loop

        step = lambda k, x: (x / 2, {"size": jnp.abs(x / 2)})   # diag: the new |x|
        stop = lambda x, diag: diag["size"] < 1e-3
        out = loop.run_until(step, jnp.float32(1.0), max_iter=50, stop=stop)
        print(out.n_iter, out.status, out.state)  # 10 0 0.0009765625: CONVERGED
        ```
    """
    max_iter = _checks.check_positive_int(max_iter, "max_iter", minimum=0)
    out = _run_until(step, state, max_iter, stop, diverged, start, differentiable, progress)
    return out if invalid is None else _poison(out, invalid)


class Iteration(NamedTuple):
    """An iterative solver opened up: its first state, its update rule and its rules for stopping,
    as values a user can run, step by hand, warm-start or stop on a rule of their own.

    Every solver ``f`` of the families has a companion ``f_iteration`` taking the same arguments
    (less ``max_iter`` and ``throw``), and ``f`` is ``finish(it.result(run(it, max_iter=…)))``:

        state₀ = it.state,   (stateₖ₊₁, diagₖ) = it.step(k, stateₖ),
        stop when it.stop(stateₖ₊₁, diagₖ) or it.diverged(stateₖ₊₁, diagₖ).

    Attributes:
      state: the initial state, a pytree (replace it to warm-start: ``it._replace(state=…)``).
      step: the update rule ``step(k, state) -> (state, diag)``, k the 0-based iteration (int32).
      stop: the solver's convergence rule ``stop(state, diag) -> bool`` (its ``tol`` applied), or
        None when it runs a fixed number of iterations (``tol=None``, or no tolerance).
      diverged: the solver's divergence rule ``diverged(state, diag) -> bool``, or None.
      invalid: a boolean scalar, true when a traced hyperparameter broke its declared rule (a
        negative ``tol``, a fraction outside [0, 1], ...); the run then reports
        ``Status.INVALID``.
      result: ``result(loop_result) -> Result``, the solver's result (status, ``n_iter``, final
        diagnostics, history, solution fields) from what ``run`` returns.
      max_steps: the number of steps the method defines, or None (no bound): LRPCA without its
        FRMNN extension has exactly K learned layers; ``run`` refuses to go past it.

    Example:
        ```python
        import jax
        from lowrank_jax import datasets, loop, rpca

        p = datasets.rpca_problem(jax.random.key(0), 200, 200, rank=3, alpha=0.1)
        it = rpca.scaledgd_iteration(p.Y, 3, alpha=0.1)
        step = jax.jit(it.step)
        state = it.state
        for k in range(5):  # a loop of one's own: print, plot, stop
            state, diag = step(k, state)
            print(k, diag["residual"])
        looser = lambda s, d: d["residual"] < 1e-4
        out = it.result(loop.run(it, max_iter=200, stop=looser))
        print(out.status, out.n_iter)  # 0 (CONVERGED), fewer steps than tol=1e-6
        ```
    """

    state: Any
    step: Step
    stop: Predicate | None
    diverged: Predicate | None
    invalid: Any
    result: Callable[[LoopResult], Any]
    max_steps: int | None = None


def iteration(
    state, step, *, stop=None, diverged=None, invalid=None, result, max_steps=None
) -> Iteration:
    """An ``Iteration`` whose ``step``, rules and ``result`` trace float32 matrix products at
    full precision (``lowrank_jax.precision.full_precision``), as the solver that built it does:
    they are traced later, when the user runs them, outside the solver's own context.

    Args:
      state: the initial state.
      step: the update rule ``(k, state) -> (state, diag)``.
      stop: the convergence rule, or None (a fixed budget).
      diverged: the divergence rule, or None.
      invalid: a boolean scalar, or None (False).
      result: ``LoopResult -> Result``.
      max_steps: the number of steps the method defines, or None (default: no bound).

    Returns:
      The ``Iteration``.
    """
    wrap = full_precision
    return Iteration(
        state=state,
        step=wrap(step),
        stop=None if stop is None else wrap(stop),
        diverged=None if diverged is None else wrap(diverged),
        invalid=jnp.asarray(False) if invalid is None else invalid,
        result=wrap(result),
        max_steps=max_steps,
    )


def run(
    it: Iteration,
    *,
    max_iter: int,
    stop: Predicate | None = None,
    start: int = 0,
    differentiable: bool = False,
    progress: str | None = None,
) -> LoopResult:
    """Run an ``Iteration``: ``run_until`` with its ``stop`` rule, or ``run_fixed``
    for exactly ``max_iter`` steps when it has none.

    To go on from an earlier run's state (a warm start), pass its state and its iteration count:
    ``run(it._replace(state=first.state), max_iter=m, start=int(first.n_iter))``; a solver whose
    step depends on k (LRPCA's per-layer parameters) then takes the steps it would have taken.

    Args:
      it: the iteration, from a solver's ``*_iteration`` function.
      max_iter: the iteration budget, an integer ≥ 0.
      stop: a stopping rule ``stop(state, diag) -> bool`` replacing the iteration's own (default
        None: the iteration's).
      start: the index k of the first step (default 0).
      differentiable: with a stopping rule, a masked ``scan`` that ``jax.grad`` can pass (default
        False: a ``while_loop``).
      progress: a progress channel, as in ``run_until`` (default None).

    Returns:
      The ``LoopResult``; ``it.result`` of it is the solver's result.

    Raises:
      ValueError: when ``start + max_iter`` passes the iteration's ``max_steps``.
    """
    max_iter = _checks.check_positive_int(max_iter, "max_iter", minimum=0)
    if it.max_steps is not None and _checks.as_int(start) is not None:
        if int(start) + max_iter > it.max_steps:
            raise ValueError(
                f"this iteration defines {it.max_steps} steps, and start + max_iter = "
                f"{int(start)} + {max_iter} goes past them (LRPCA without beta and phi has one "
                "step per learned layer: pass beta and phi to continue by FRMNN)"
            )
    stop = it.stop if stop is None else stop
    if stop is None:
        return run_fixed(
            it.step, it.state, max_iter, start=start, diverged=it.diverged, invalid=it.invalid
        )
    return run_until(
        it.step,
        it.state,
        max_iter=max_iter,
        stop=stop,
        start=start,
        diverged=it.diverged,
        differentiable=differentiable,
        progress=progress,
        invalid=it.invalid,
    )


def _poison(out: LoopResult, invalid) -> LoopResult:
    """Where ``invalid`` is true: status INVALID, NaN in the state's floating-point leaves, and the
    diagnostics (history and final) blanked as the history's padding is. The steps ran on a
    hyperparameter outside its range (a threshold of 0 gives a residual of 0): a sweep that ranks
    its points by a diagnostic must not find such a point best."""
    poisoned = jax.tree.map(
        lambda a: (
            jnp.where(invalid, jnp.nan, a) if jnp.issubdtype(jnp.result_type(a), jnp.inexact) else a
        ),
        out.state,
    )
    blank = _blank_like(out.final)
    final = jax.tree.map(lambda b, f: jnp.where(invalid, b, f), blank, out.final)
    history = jax.tree.map(lambda b, h: jnp.where(invalid, b, h), blank, out.history)
    status = jnp.where(invalid, Status.INVALID, out.status).astype(jnp.int32)
    return out._replace(state=poisoned, history=history, final=final, status=status)


def _run_until(step, state, max_iter, stop, diverged, start, differentiable, progress):
    # Trace one step abstractly to learn the diagnostics' structure for the history buffer.
    _, diag_shape = jax.eval_shape(lambda s: step(jnp.asarray(start, jnp.int32), s), state)
    stop_shape = jax.eval_shape(stop, state, diag_shape)
    if not (
        hasattr(stop_shape, "dtype") and stop_shape.dtype == jnp.bool_ and stop_shape.shape == ()
    ):
        raise TypeError(
            f"stop(state, diag) must return a boolean scalar, got {stop_shape} "
            "(compare with a tolerance, e.g. diag['residual'] < tol)"
        )
    blank = _blank_like(jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), diag_shape))
    history0 = jax.tree.map(lambda b: jnp.broadcast_to(b, (max_iter,) + b.shape), blank)

    zero = jnp.asarray(0, jnp.int32)
    running = jnp.asarray(Status.MAX_ITER, jnp.int32)  # what a run that never stops reports
    if max_iter == 0:  # no step: the state as given, an empty history
        return LoopResult(state, history0, zero, blank, running)

    def write(hist, i, row):
        return jax.tree.map(lambda h, d: lax.dynamic_update_index_in_dim(h, d, i, 0), hist, row)

    def report(done):
        """Send ``done`` iterations to the progress channel every ``every`` of them."""
        if progress is None:
            return
        every = -(-max_iter // 100)  # ⌈max_iter / 100⌉: at most 100 reports
        send = functools.partial(CompiledBar.reach, channel=progress)
        lax.cond(
            (done % every == 0) | (done == max_iter),
            lambda: jax.debug.callback(send, done),
            lambda: None,
        )

    def judge(s, diag):
        conv, div = stop(s, diag), _flag(diverged, s, diag)
        return conv | div, _code(conv, div)

    if not differentiable:
        # i counts the loop's iterations (shared by a vmapped batch), n a point's own steps.
        def cond(carry):
            i, _, _, _, _, _, done = carry
            return (i < max_iter) & _any_running(jnp.logical_not(done))

        def body(carry):
            i, n, s, hist, last, code, done = carry
            s_new, diag = step(start + i, s)
            hist = write(hist, i, _keep_running(done, diag, blank))
            stopped, new_code = judge(s_new, diag)
            s_new, n, last, code = _keep_running(
                done, (s_new, i + 1, diag, new_code), (s, n, last, code)
            )
            report(i + 1)
            return i + 1, n, s_new, hist, last, code, done | stopped

        carry = (zero, zero, state, history0, blank, running, jnp.asarray(False))
        _, n, state, history, last, code, _ = lax.while_loop(cond, body, carry)
        return LoopResult(state, history, n, last, code)

    def scan_body(carry, i):
        n, s, hist, last, code, done = carry

        def go(args):
            n, s, hist, _, _ = args
            s, diag = step(start + i, s)
            report(n + 1)
            stopped, new_code = judge(s, diag)
            return n + 1, s, write(hist, i, diag), diag, new_code, stopped

        def skip(args):
            return (*args, jnp.asarray(True))

        return lax.cond(done, skip, go, (n, s, hist, last, code)), None

    carry = (zero, state, history0, blank, running, jnp.asarray(False))
    (n, state, history, last, code, _), _ = lax.scan(
        scan_body, carry, jnp.arange(max_iter, dtype=jnp.int32)
    )
    return LoopResult(state, history, n, last, code)
