"""The solver contract, checked for every iterative solver on the problem zoo (tests/zoo_*.py):

- a solvable problem ends in ``Status.CONVERGED`` with finite final diagnostics;
- a diverging one raises ``RuntimeError`` by default, eagerly and under ``jax.jit``, and with
  ``throw=False`` reports ``Status.DIVERGED`` instead;
- the same answer eager, jitted, and vmapped over a batch that mixes a good and a diverging point
  (which leaves the good point alone);
- a readable ``repr`` (no array dumped whole).
"""

import importlib
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lowrank_jax import Status
from lowrank_jax.result import Result

_HERE = pathlib.Path(__file__).parent
CASES = [
    case
    for path in sorted(_HERE.glob("zoo_*.py"))
    for case in importlib.import_module(path.stem).CASES
]


def _as_arrays(h):
    return {k: jnp.asarray(v) for k, v in h.items()}


def _field(result, name):
    value = result
    for part in name.split("."):
        value = getattr(value, part)
    return np.asarray(value)


@pytest.fixture(scope="module", params=CASES, ids=lambda c: c.name)
def case(request):
    return request.param


def test_solvable_problem_converges_and_prints_briefly(case):
    """(``case.done`` is MAX_ITER only for solvers without a stopping rule.)"""
    out = case.solve(_as_arrays(case.good), True)
    assert isinstance(out, Result)
    assert int(out.status) == case.done, out
    assert 0 < int(out.n_iter)
    text = repr(out)
    assert f"status={case.done.name}" in text and len(text) < 1000, text
    for name in case.solution:
        assert np.all(np.isfinite(_field(out, name))), name


def test_diverging_run_raises_by_default_and_reports_without_throw(case):
    bad = _as_arrays(case.bad)
    if case.refused_eagerly:
        for throw in (True, False):
            with pytest.raises(ValueError):
                case.solve(bad, throw)
        out = jax.jit(lambda h: case.solve(h, False))(bad)
    else:
        with pytest.raises(RuntimeError, match="(?i)diverge|non-finite"):
            case.solve(bad, True)
        out = case.solve(bad, False)
    assert int(out.status) == Status.DIVERGED, out


def test_diverging_run_raises_inside_jit(case):
    run = jax.jit(lambda h: case.solve(h, True).status)
    with pytest.raises(RuntimeError, match="(?i)diverge|non-finite"):
        jax.block_until_ready(run(_as_arrays(case.bad)))


def test_same_answer_eager_jitted_and_vmapped(case):
    good = _as_arrays(case.good)
    eager = case.solve(good, False)
    jitted = jax.jit(lambda h: case.solve(h, False))(good)
    batch = jax.tree.map(
        lambda a, b: jnp.stack([a, jnp.asarray(b, a.dtype)]), good, _as_arrays(case.bad)
    )
    mapped = jax.vmap(lambda h: case.solve(h, False))(batch)
    assert int(jitted.status) == int(eager.status) == case.done
    assert int(jitted.n_iter) == int(eager.n_iter)
    assert np.asarray(mapped.status).tolist() == [case.done, Status.DIVERGED]
    assert int(mapped.n_iter[0]) == int(eager.n_iter)
    for name in case.solution:
        want = _field(eager, name)
        np.testing.assert_allclose(
            _field(jitted, name), want, rtol=case.rtol, atol=case.rtol * np.abs(want).max()
        )
        np.testing.assert_allclose(
            _field(mapped, name)[0], want, rtol=case.rtol, atol=case.rtol * np.abs(want).max()
        )


def test_every_solver_of_the_contract_is_in_the_zoo():
    names = {c.name for c in CASES}
    expected = {
        "rpca.lrpca",
        "rpca.lrpca_sharded",
        "rpca.scaledgd",
        "rpca.altproj",
        "pathnorm.train",
        "sdl.lpgd",
        "sdl.bcd",
        "sdl.fit",
        "sdl.fit_bcd",
        "covariance.decompose",
        "covariance.ialm",
        "covariance.ncrpca",
        "covariance.fpcp",
        "covariance.rpca_gd",
        "regression.newton_solve.exact",
        "regression.newton_solve.diagonal",
        "regression.newton_solve.sketch",
    }
    assert expected <= names, expected - names


ITERATED = [c for c in CASES if c.iterate is not None]


@pytest.mark.parametrize("case", ITERATED, ids=lambda c: c.name)
def test_the_iteration_is_the_solver_opened_up(case):
    """``solver_iteration`` is what ``solver`` runs: the same answer through ``loop.run``; a run
    cut in two (the second half warm-started from the first's state) ends where the whole run
    does; a stopping rule of one's own ends the run earlier; stepping by hand under ``jax.jit``
    gives the driver's states."""
    from lowrank_jax import loop

    good = _as_arrays(case.good)
    it = case.iterate(good)
    whole = loop.run(it, max_iter=case.max_iter)
    out, ref = it.result(whole), case.solve(good, False)
    assert int(out.status) == int(ref.status) == case.done
    assert int(out.n_iter) == int(ref.n_iter)
    for name in case.solution:
        want = _field(ref, name)
        np.testing.assert_allclose(
            _field(out, name), want, rtol=case.rtol, atol=case.rtol * np.abs(want).max()
        )

    k = int(whole.n_iter) // 2
    first = loop.run(it._replace(stop=None), max_iter=k)
    rest = loop.run(it._replace(state=first.state), max_iter=case.max_iter - k, start=k)
    assert int(rest.n_iter) + k == int(whole.n_iter)
    for a, b in zip(jax.tree.leaves(rest.state), jax.tree.leaves(whole.state), strict=True):
        np.testing.assert_allclose(a, b, rtol=case.rtol, atol=case.rtol * np.abs(b).max())

    early = loop.run(it, max_iter=case.max_iter, stop=lambda s, d: jnp.asarray(True))
    assert int(early.n_iter) == 1 and int(early.status) == Status.CONVERGED

    step, state = jax.jit(it.step), it.state
    for j in range(3):
        state, _ = step(jnp.int32(j), state)
    three = loop.run(it._replace(stop=None), max_iter=3)
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(three.state), strict=True):
        np.testing.assert_allclose(a, b, rtol=case.rtol, atol=case.rtol * np.abs(b).max())


def test_every_solver_is_exposed_as_steps():
    """Each solver of the contract has its iteration in the zoo; row-sharded LRPCA runs LRPCA's
    own iteration over a mesh (its per-device rows exist only inside the sharded program)."""
    assert {c.name for c in CASES if c.iterate is None} == {"rpca.lrpca_sharded"}


def test_an_iteration_with_a_defined_number_of_steps_refuses_to_run_past_it():
    """LRPCA without FRMNN has K learned layers: no step K + 1 that silently reuses layer K."""
    from lowrank_jax import datasets, loop, rpca

    p = datasets.rpca_problem(jax.random.key(0), 40, 40, rank=2, alpha=0.1)
    zeta = rpca.oracle_thresholds(p.Y, 2, p.X, num_layers=4)
    it = rpca.lrpca_iteration(p.Y, 2, zeta, jnp.full(4, 0.5), tol=None)
    assert it.max_steps == 4
    assert int(loop.run(it, max_iter=4).n_iter) == 4
    first = loop.run(it, max_iter=2)
    with pytest.raises(ValueError, match="defines 4 steps"):
        loop.run(it._replace(state=first.state), max_iter=3, start=2)
    frmnn = rpca.lrpca_iteration(p.Y, 2, zeta, jnp.full(4, 0.5), beta=1.0, phi=0.9, tol=None)
    assert frmnn.max_steps is None and int(loop.run(frmnn, max_iter=6).n_iter) == 6
