"""The problem zoo's interface: each family's ``tests/zoo_<family>.py`` lists ``CASES``, one
:class:`ZooCase` per iterative solver, which ``tests/test_contract.py`` runs through the result
contract (status, failure semantics, the same answer eager, jitted and vmapped)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from lowrank_jax import Status


class ZooCase(NamedTuple):
    """One solver on one small problem.

    name: "family.solver" (the test id).
    solve: ``solve(hyper, throw) -> Result``, with ``hyper`` a dict of scalar arrays (the traced
      hyperparameters: jitted and vmapped over) and ``throw`` passed to the solver as is.
    good: hyperparameters with which the run ends in ``done``.
    bad: hyperparameters with which it ends in ``Status.DIVERGED`` (a step size far too large, say).
    solution: names of the result's fields compared between eager, jitted and vmapped runs.
    rtol: tolerance of that comparison (compiled programs may round differently).
    done: the status a good run ends in: ``Status.CONVERGED`` for a solver with a tolerance;
      ``Status.MAX_ITER`` for one that runs a fixed count (epochs) and has no stopping rule.
    iterate: ``iterate(hyper) -> loop.Iteration``, the solver's ``*_iteration`` companion on the
      same problem and hyperparameters (``max_iter`` aside), or None where it has none yet.
    max_iter: the budget ``solve`` passes, for running ``iterate``'s iteration to the same answer.
    refused_eagerly: the ``bad`` input is refused at the boundary (``ValueError``) when concrete: a
      solver with no step size diverges only on data out of its dtype's range, which a direct call
      checks; traced (jit, vmap) the run reports DIVERGED.
    """

    name: str
    solve: Callable[[dict, bool], Any]
    good: dict
    bad: dict
    solution: tuple[str, ...]
    rtol: float = 1e-4
    iterate: Callable[[dict], Any] | None = None
    max_iter: int = 0
    refused_eagerly: bool = False
    done: Status = Status.CONVERGED
