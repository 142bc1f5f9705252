"""Every solver traces its matrix products at full float32 precision unless the caller chose one.

JAX leaves an unnamed float32 product's precision to the backend: TF32 on NVIDIA GPUs, one bf16
pass on TPUs. On an H200 that left LRPCA above 1e-4 and made SDL's loss rise (see
lowrank_jax.precision). The check here runs on any backend: it records the precision of every
``dot_general`` bound while a solver traces (eagerly or under jit, forward and backward). A
product's precision is fixed when it is bound, at trace time, so most checks only trace
(``jax.make_jaxpr``: the same binds as a run, without compiling); a few run, for the calls that need
concrete values and for a caller's own jit, vmap and gradient."""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from lowrank_jax import covariance as cv
from lowrank_jax import linalg, pathnorm, precision, prox, rpca, sdl
from lowrank_jax import regression as rg
from lowrank_jax.datasets import rpca as rdata
from lowrank_jax.regression import sketch

HIGHEST = (lax.Precision.HIGHEST, lax.Precision.HIGHEST)


@contextlib.contextmanager
def recorded_precisions(monkeypatch):
    """Yield a list that fills with the ``precision`` of every dot_general bound inside the block;
    compiled programs are dropped first, so every jitted function is traced (and its products bound)
    again."""
    jax.clear_caches()
    seen = []
    bind = lax.dot_general_p.bind

    def recording_bind(*args, **params):
        seen.append(params.get("precision"))
        return bind(*args, **params)

    monkeypatch.setattr(lax.dot_general_p, "bind", recording_bind)
    try:
        yield seen
    finally:
        monkeypatch.undo()
        jax.clear_caches()


@pytest.fixture(scope="module")
def problem():
    return rdata.rpca_problem(jax.random.key(0), 40, 30, 2, 0.1)


def _rpca_cases(p):
    zeta = rpca.oracle_thresholds(p.Y, 2, p.X, 4)
    return {
        "lrpca": lambda: rpca.lrpca(p.Y, 2, zeta, jnp.full(4, 0.5), key=jax.random.key(1)).X,
        "lrpca (FRMNN, tol)": lambda: (
            rpca.lrpca(p.Y, 2, zeta, jnp.full(4, 0.5), beta=1.0, phi=0.7, tol=1e-5, max_iter=8).X
        ),
        "oracle_thresholds": lambda: rpca.oracle_thresholds(p.Y, 2, p.X, 3),
        "scaledgd": lambda: rpca.scaledgd(p.Y, 2, 0.1, max_iter=5).X,
        "altproj": lambda: rpca.altproj(p.Y, 2, max_iter=3).X,
        "lrpca_sharded": lambda: rpca.lrpca_sharded(p.Y, 2, zeta, jnp.full(4, 0.5)).X,
    }


def _other_cases():
    rng = np.random.default_rng(0)
    A = jnp.asarray(rng.standard_normal((60, 4)) / 8, jnp.float32)
    b = jnp.asarray(rng.dirichlet(np.ones(60)), jnp.float32)
    Xs = rng.standard_normal((30, 12)).astype(np.float32).T / 5  # 12 samples × 30 features
    ys = np.arange(12) % 2
    M = rng.standard_normal((10, 2))
    Sigma = (M @ M.T + np.eye(10)).astype(np.float32)
    Xp = rng.random((100, 6)).astype(np.float32)
    yp = (Xp[:, :3].sum(1) > Xp[:, 3:].sum(1)).astype(np.int32)
    net = pathnorm.train(
        Xp,
        yp,
        reg="path",
        method="prox",
        lr=0.1,
        lam=1e-3,
        epochs=1,
        batch=10,
        hidden=4,
        outputs=2,
        key=jax.random.key(0),
    ).model
    m = sdl.fit(Xs, ys, 2, max_iter=5)
    return {
        "newton_solve (exact)": lambda: (
            rg.newton_solve(A, b, 4.0, jnp.zeros(4), "exp", "exact", max_iter=2).x
        ),
        "newton_solve (sketch)": lambda: (
            rg.newton_solve(
                A,
                b,
                4.0,
                jnp.zeros(4),
                "exp",
                "sketch",
                max_iter=2,
                sketch_size=40,
                key=jax.random.key(2),
            ).x
        ),
        "sdl.fit": lambda: sdl.fit(Xs, ys, 2, max_iter=5).theta,
        # reads its factors in NumPy: cannot trace
        "sdl.mf_lr (run)": lambda: sdl.mf_lr(Xs, ys, 2).U,
        "sketch.approx_leverage_scores": lambda: sketch.approx_leverage_scores(
            jax.random.key(0), A
        ),
        "sketch.leverage_scores": lambda: sketch.leverage_scores(A),
        "sketch.sampled_gram": lambda: sketch.sampled_gram(jax.random.key(0), A, jnp.ones(60), 30),
        "sdl.fit (BCD)": lambda: sdl.fit(Xs, ys, 2, max_iter=3, solver="bcd").theta,
        "sdl.predict_proba (supervised)": lambda: sdl.predict_proba(m, Xs, coding="supervised"),
        "covariance.decompose": lambda: (
            cv.decompose(Sigma, 2, hidden=(8,), max_iter=3, tol=None, key=jax.random.key(0)).M
        ),
        "covariance.ialm": lambda: cv.ialm(Sigma, max_iter=3).L,
        "covariance.rpca_gd": lambda: cv.rpca_gd(Sigma, 2, max_iter=3).L,
        "pathnorm.train": lambda: (
            pathnorm.train(
                Xp,
                yp,
                reg="path",
                method="prox",
                lr=0.1,
                lam=1e-3,
                epochs=1,
                batch=10,
                hidden=4,
                outputs=2,
                key=jax.random.key(0),
            ).model.out.weight
        ),
        "pathnorm.robust_error": lambda: pathnorm.robust_error(
            net, Xp, yp, 0.05, key=jax.random.key(1), steps=2
        ),
    }


def _trace_or_run(run, trace=True):
    """Trace ``run`` (its products are bound as in a run; nothing compiles), or run it."""
    if trace:
        jax.make_jaxpr(run)()
    else:
        jax.block_until_ready(run())


def _check_full_precision(monkeypatch, run, trace=True):
    with recorded_precisions(monkeypatch) as seen:
        _trace_or_run(run, trace)
    assert seen, "no matrix product was recorded"
    assert all(p == HIGHEST for p in seen), sorted({str(p) for p in seen})


@pytest.mark.parametrize(
    "name", list(_rpca_cases(rdata.rpca_problem(jax.random.key(0), 8, 6, 1, 0.1)))
)
def test_rpca_solvers_trace_full_precision_products(name, problem, monkeypatch):
    _check_full_precision(monkeypatch, _rpca_cases(problem)[name])


def test_other_families_trace_full_precision_products(monkeypatch):
    for name, run in _other_cases().items():
        with recorded_precisions(monkeypatch) as seen:
            _trace_or_run(run, trace=not name.endswith("(run)"))
        assert seen, f"{name}: no matrix product was recorded"
        assert all(p == HIGHEST for p in seen), (name, sorted({str(p) for p in seen}))


def _product_cubed(factors):
    L, R = factors  # (no product here: the test's own would be recorded)
    return jnp.sum((L[:, None, :] * R[None, :, :]).sum(-1) ** 3)


@pytest.mark.parametrize("method", ["gram", "randomized", "exact"])
def test_linalg_factorisations_trace_full_precision_products(method, monkeypatch):
    """The factorisations that stand in for jnp.linalg.svd (itself full precision everywhere): on an
    H200's TF32 default the Gram route moved σ₁ by 1.5e-4 between A and 1e-30 A. Forward and
    gradient, wide and tall, through project_rank too."""
    A = jax.random.normal(jax.random.key(0), (20, 7))
    cases = [
        lambda: linalg.best_rank_approximation(A, 2, method=method),
        lambda: jax.grad(
            lambda A: jnp.sum(linalg.best_rank_approximation(A.T, 2, method=method) ** 3)
        )(A),
        lambda: jax.grad(lambda A: jnp.sum(prox.project_rank(A, 2, method=method) ** 3))(A),
    ]
    if method != "exact":
        cases.append(
            lambda: jax.grad(lambda A: _product_cubed(linalg.low_rank_factors(A, 2, method)))(A)
        )
    if method == "gram":
        cases += [lambda: linalg.gram_svd(A.T, 3), lambda: linalg.gram_rank_factors(A, 3)]
    if method == "randomized":
        cases.append(lambda: linalg.randomized_svd(A, 3, 1))
    for run in cases:
        _check_full_precision(monkeypatch, run)


def test_inside_a_callers_jit_vmap_and_gradient(problem, monkeypatch):
    """The precision is part of the trace: a caller's jit and vmap keep it, and so does the backward
    pass, whose custom VJP rules (randomized spectral initialisation) are traced after the solver
    returned."""
    Y, X = problem.Y, problem.X
    zeta = rpca.oracle_thresholds(Y, 2, X, 4)

    def err(z, eta):
        return jnp.sum((rpca.lrpca(Y, 2, z, eta, key=jax.random.key(1)).X - X) ** 2)

    _check_full_precision(
        monkeypatch, lambda: jax.jit(jax.grad(err))(zeta, jnp.full(4, 0.5)), trace=False
    )
    # The caller's jit inside the gradient: the custom rules' forward and JVP passes are traced when
    # the already-traced program is differentiated, after the solver's context has closed.
    _check_full_precision(
        monkeypatch, lambda: jax.grad(jax.jit(err))(zeta, jnp.full(4, 0.5)), trace=False
    )
    _check_full_precision(
        monkeypatch,
        lambda: jax.grad(
            jax.jit(
                lambda z: jnp.sum(
                    rpca.lrpca(
                        Y,
                        2,
                        z,
                        jnp.full(4, 0.5),
                        svd="exact",
                        differentiable=True,
                        tol=1e-6,
                        max_iter=4,
                    ).X
                )
            )
        )(zeta),
        trace=False,
    )
    _check_full_precision(
        monkeypatch,
        lambda: jax.vmap(lambda e: err(zeta, jnp.full(4, e)))(jnp.array([0.4, 0.6])),
        trace=False,
    )


def test_a_precision_the_caller_chose_is_kept(problem, monkeypatch):
    """With jax.default_matmul_precision set, the solvers trace what the caller asked for (TF32 on a
    GPU is HIGH), and the setting is restored afterwards."""
    zeta = rpca.oracle_thresholds(problem.Y, 2, problem.X, 4)
    with jax.default_matmul_precision("tensorfloat32"):
        with recorded_precisions(monkeypatch) as seen:
            jax.block_until_ready(rpca.lrpca(problem.Y, 2, zeta, jnp.full(4, 0.5)).X)
        assert seen and all(p == (lax.Precision.HIGH, lax.Precision.HIGH) for p in seen), set(seen)
        assert precision.chosen() == "tensorfloat32"
    assert precision.chosen() is None


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the claim is about XLA's CPU products")
def test_on_a_cpu_full_precision_changes_no_number(problem):
    """The docs promise CPU users nothing changes: the solver's result with the backend's default
    products equals the full-precision one bit for bit."""
    zeta = rpca.oracle_thresholds(problem.Y, 2, problem.X, 4)
    full = rpca.lrpca(problem.Y, 2, zeta, jnp.full(4, 0.5)).X
    with jax.default_matmul_precision("default"):
        default = rpca.lrpca(problem.Y, 2, zeta, jnp.full(4, 0.5)).X
    np.testing.assert_array_equal(np.asarray(full), np.asarray(default))
