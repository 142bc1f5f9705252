"""Supervised dictionary learning: closed forms vs autodiff, factor recovery, LPGD's linear rate
against Theorem 2.1's ρ^t bound on the paper's generative model, BCD, prediction, CV, bad input."""

import dataclasses
import functools
import importlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lowrank_jax import Status, prox, sdl
from lowrank_jax.sdl import model as sm


def generative(model, p, n, r, kappa=1, sigma=0.1, seed=0, q=0):
    """Eq. (20): x = B*[:, s] + noise with rank-r B* = W*H*, labels from the softmax of a*. Returns
    samples in rows, X (n, p) and X_aux (n, q); ``generative.planted_B`` is B* (p, n), the paper's
    layout."""
    rng = np.random.default_rng(seed)
    W, H = rng.normal(size=(p, r)), rng.normal(size=(r, n))
    X = W @ H / np.sqrt(r) + sigma * rng.normal(size=(p, n))
    X_aux = rng.normal(size=(q, n)) if q else None
    beta = 2 * rng.normal(size=(r, kappa))
    a = beta.T @ H if model == "H" else (W @ beta).T @ X / np.sqrt(p * r)
    if q:
        a = a + rng.normal(size=(q, kappa)).T @ X_aux
    P = np.exp(np.vstack([np.zeros((1, n)), a]))
    P /= P.sum(0)
    y = np.array([rng.choice(kappa + 1, p=P[:, s]) for s in range(n)])
    generative.planted_B = W @ H / np.sqrt(r)
    return X.T, y, (X_aux.T if q else None)


@pytest.mark.parametrize("model", ["H", "W"])
@pytest.mark.parametrize("kappa", [1, 2])
def test_closed_form_gradients_equal_autodiff(model, kappa, x64):
    X, y, X_aux = generative(model, 12, 9, 2, kappa=kappa, q=2)
    data = sm.prepare(X, y, X_aux, intercept=True, num_classes=kappa + 1)
    rng = np.random.default_rng(1)
    theta = jnp.asarray(rng.normal(size=sm.theta_shape(model, 12, 9, kappa)))
    gamma = jnp.asarray(rng.normal(size=(3, kappa)))
    g_theta, g_gamma = sm.gradients(theta, gamma, data, 0.7, 0.3, model)
    a_theta, a_gamma = jax.jit(
        jax.grad(lambda t, g: sm.objective(t, g, data, 0.7, 0.3, model), argnums=(0, 1))
    )(theta, gamma)
    np.testing.assert_allclose(g_theta, a_theta, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g_gamma, a_gamma, rtol=1e-10, atol=1e-12)
    if model == "W":  # the solver's transposed layout θᵀ = [Aᵀ ∥ Bᵀ] gives the transposed gradient
        f_t, (gt_theta, gt_gamma) = sm.value_and_gradients(
            theta.T, gamma, data, 0.7, 0.3, "W", data.X.T
        )
        np.testing.assert_allclose(gt_theta.T, g_theta, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(f_t, sm.objective(theta, gamma, data, 0.7, 0.3, "W"), rtol=1e-12)
    # The intercept row of γ is not penalised: its gradient is the data term alone.
    R = sm.class_probs(sm.activations(theta, gamma, data.X, data.X_aux, model, kappa))[1:] - data.Y
    np.testing.assert_allclose(g_gamma[-1], R.sum(1), rtol=1e-10)


def test_loss_has_the_reference_class_one(x64):
    """ℓ(y, a) = log(1 + Σ e^{a_c}) − a_y (eq. 90), not the main text's log Σ e^{a_c} − a_y."""
    a = jnp.array([[0.3], [-1.2]])
    for y in (0, 1, 2):
        Y = sm.one_hot(jnp.array([y]), 2, jnp.float64)
        direct = jnp.log(1 + jnp.exp(0.3) + jnp.exp(-1.2)) - (0.0 if y == 0 else a[y - 1, 0])
        np.testing.assert_allclose(sm.nll(a, Y), direct, rtol=1e-14)
    np.testing.assert_allclose(sm.class_probs(a).sum(0), 1.0, rtol=1e-14)


@pytest.mark.parametrize("model", ["H", "W"])
def test_factor_recovery_reproduces_theta(model, x64):
    rng = np.random.default_rng(2)
    kappa, p, n, r = 2, 15, 10, 3
    f = sm.Factors(
        jnp.asarray(rng.normal(size=(p, r))),
        jnp.asarray(rng.normal(size=(r, n))),
        jnp.asarray(rng.normal(size=(r, kappa))),
    )
    theta = sm.lift(f, model)
    assert theta.shape == sm.theta_shape(model, p, n, kappa)
    g = sm.factors(theta, r, model, kappa)
    np.testing.assert_allclose(sm.lift(g, model), theta, rtol=1e-10, atol=1e-10)
    if model == "W":  # W = U: orthonormal gene groups
        np.testing.assert_allclose(g.W.T @ g.W, np.eye(r), atol=1e-12)
    else:  # balanced split: [βᵀ ∥ W]ᵀ[βᵀ ∥ W] = H Hᵀ = Σ
        L = jnp.concatenate([g.coef.T, g.W])
        np.testing.assert_allclose(L.T @ L, g.H @ g.H.T, rtol=1e-10, atol=1e-10)


def _small_sdl_problem():
    """A κ = 1 problem (p, n = 12, 20, an intercept row in X_aux: what
    ``prepare(X.T, y, intercept=True)`` builds, without its checks) and rank-2 factors; X (p, n) in
    the paper's layout."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(12, 20))
    data = sm.SDLData(
        jnp.asarray(X), jnp.ones((1, 20)), jnp.asarray(X[:1] > 0, float), jnp.zeros(1)
    )
    f = sm.Factors(*(jnp.asarray(rng.normal(size=shape)) for shape in ((12, 2), (2, 20), (2, 1))))
    return X, data, f


# SDL-H's θ and γ for _small_sdl_problem
_ZERO_H, _ZERO_GAMMA = np.zeros((1 + 12, 20)), np.zeros((1, 1))
_MODEL_CALLS = {
    "objective": lambda d, f, m: sdl.objective(_ZERO_H, _ZERO_GAMMA, d, 1.0, 0.1, m),
    "gradients": lambda d, f, m: sdl.gradients(_ZERO_H, _ZERO_GAMMA, d, 1.0, 0.1, m),
    "value_and_gradients": lambda d, f, m: sm.value_and_gradients(
        _ZERO_H, _ZERO_GAMMA, d, 1.0, 0.1, m
    ),
    "factors": lambda d, f, m: sdl.factors(_ZERO_H, 2, m, 1),
    "lift": lambda d, f, m: sdl.lift(f, m),
    "step_bound": lambda d, f, m: sdl.step_bound(d, 1.0, 0.1, m),
    "initial_point": lambda d, f, m: sdl.initial_point(d, 2, m, jax.random.key(0)),
    "jit objective": lambda d, f, m: jax.jit(sdl.objective, static_argnames="model")(
        _ZERO_H, _ZERO_GAMMA, d, 1.0, 0.1, model=m
    ),
}


@pytest.mark.parametrize("call", _MODEL_CALLS)
def test_building_blocks_refuse_an_unknown_model(call, x64):
    """The exported building blocks read every model but "H" as SDL-W: factors, lift, step_bound and
    initial_point gave SDL-W results for "h", objective and gradients failed inside dot_general.
    Each now names ``model`` (at trace time under jit: the model is static)."""
    _, data, f = _small_sdl_problem()
    for bad in ("h", "w", "x", None):
        with pytest.raises(
            ValueError, match=r"model must be 'H' .* or 'W' .*, got " + re.escape(repr(bad))
        ):
            _MODEL_CALLS[call](data, f, bad)


def test_building_blocks_keep_their_values_for_h_and_w(x64):
    """With the model check added, "H" and "W" give the values they gave (by hand)."""
    X, data, f = _small_sdl_problem()
    n = X.shape[1]
    zeros = {m: jnp.zeros(sm.theta_shape(m, *X.shape, 1)) for m in sm.MODELS}
    # one compiled program (eager, each small op compiles on its own)
    values, lifted, steps = jax.jit(
        lambda d, f: tuple(
            [g(m) for m in sm.MODELS]
            for g in (
                lambda m: sdl.objective(zeros[m], _ZERO_GAMMA, d, 1.0, 0.1, m),
                lambda m: sdl.lift(f, m),
                lambda m: sdl.step_bound(d, 1.0, 0.1, m),
            )
        )
    )(data, f)
    # θ = 0, γ = 0: a = 0, so F = n log 2 + ξ‖X‖²_F in both models
    np.testing.assert_allclose(values, [n * np.log(2) + np.sum(X * X)] * 2, rtol=1e-12)
    W, H, beta = (np.asarray(v) for v in f)
    np.testing.assert_allclose(lifted[0], np.vstack([beta.T @ H, W @ H]), rtol=1e-12)
    np.testing.assert_allclose(lifted[1], np.hstack([W @ beta, W @ H]), rtol=1e-12)
    # 1/max(2ξ, 2λ + ¼s) with s = 1 + ‖ones‖² = 21 (SDL-H) or ‖[X; ones]‖²₂ (SDL-W)
    s_w = np.linalg.norm(np.vstack([X, np.ones((1, n))]), 2) ** 2
    np.testing.assert_allclose(
        steps, [1 / max(2.0, 0.2 + 21 / 4), 1 / max(2.0, 0.2 + s_w / 4)], rtol=1e-10
    )


def test_initial_point_takes_an_integer_seed(x64):
    """initial_point(data, r, model, 0) raised JAX's "invalid PRNG key data" (and None "unexpected
    PRNG key type") where fit and every other entry point take a seed. A Python, NumPy or 0-d array
    integer is now the key of that seed and None key(0), as in fit; a float is a TypeError naming
    key."""
    X, data, _ = _small_sdl_problem()
    keys = (jax.random.key(0), 0, np.int64(0), jnp.int32(0), None, 1)
    # one compiled program (eager, each small op compiles on its own); the seeds stay Python values
    starts, start_w = jax.jit(
        lambda d: ([sdl.initial_point(d, 2, "H", k) for k in keys], sdl.initial_point(d, 2, "W", 0))
    )(data)
    ref = starts[0]
    assert ref[0].shape == (1 + 12, 20) and start_w[0].shape == (12, 1 + 20)
    for start in starts[1:5]:
        for a, b in zip(jax.tree.leaves(start), jax.tree.leaves(ref)):
            np.testing.assert_array_equal(a, b)
    assert not np.allclose(starts[5][2].coef, ref[2].coef)
    with pytest.raises(TypeError, match="key must be"):
        sdl.initial_point(data, 2, "H", 0.5)


@pytest.mark.parametrize(
    "model, p, n, scale", [("H", 30, 60, 1.0), ("W", 10, 300, 1 / np.sqrt(300))]
)
def test_lpgd_meets_the_theorem_bound_on_the_generative_model(model, p, n, scale, x64):
    """Where L/μ < 3 (ξ = 1, λ = 0.5; SDL-W needs n ≥ p for δ⁻ > 0) and τ = 2/(μ + L), LPGD
    contracts at least as fast as ρ^t (Theorem E.2's ρ) towards the unique rank-r minimiser, which
    lies near the planted low-rank signal."""
    X, y, _ = generative(model, p, n, 3, sigma=0.05)
    X = X * scale
    xi, lam = 1.0, 0.5
    long = sdl.fit(X, y, 3, model=model, xi=xi, lam=lam, max_iter=400, tol=None, intercept=False)
    data = sm.prepare(X, y)
    a = sm.activations(long.theta, long.aux_coef, data.X, data.X_aux, model, 1)
    th = sdl.theory(X, xi, lam, model=model, M=float(jnp.max(jnp.abs(a))) + 0.5)
    assert th.holds and th.rho < 1 and th.step_interval[0] < th.best_step < th.step_interval[1]
    assert th.rate(th.best_step) == th.rho
    theta0, gamma0, _ = sdl.initial_point(data, 3, model, jax.random.key(0))
    run = functools.partial(sdl.lpgd, theta0, gamma0, data, xi, lam, model=model, tol=None)
    star = run(th.best_step, 3, max_iter=300)
    dist0 = float(jnp.linalg.norm(theta0 - star.theta))
    errs = []
    for t in (1, 3, 6, 10):
        z = run(th.best_step, 3, max_iter=t)
        errs.append(float(jnp.linalg.norm(z.theta - star.theta)))
        assert errs[-1] <= th.rho**t * dist0 * (1 + 1e-9), (t, errs[-1], th.rho**t * dist0)
    assert errs[-1] < 1e-3 * dist0
    # Other steps inside the interval contract at their own ρ(τ) < 1 (the theorem holds for every
    # τ there, not only the best): halfway from the best step to each end of the interval.
    lo, hi = th.step_interval
    for lr in ((lo + th.best_step) / 2, (th.best_step + hi) / 2):
        rho = th.rate(lr)
        assert th.rho < rho < 1
        for t in (1, 4, 8):
            z = run(lr, 3, max_iter=t)
            err = float(jnp.linalg.norm(z.theta - star.theta))
            assert err <= rho**t * dist0 * (1 + 1e-9), (lr, t, err, rho**t * dist0)
    # The minimiser's B block recovers the planted low-rank signal B* = W*H* (noise σ = 0.05
    # removed): closer to B* than the noisy data are.
    _, B = sm.split(star.theta, model, 1)
    B_star = generative.planted_B * scale
    rel = float(jnp.linalg.norm(B - B_star) / jnp.linalg.norm(B_star))
    assert rel < 0.05 and rel < float(np.linalg.norm(X.T - B_star) / np.linalg.norm(B_star))


def test_bcd_and_lpgd_reach_the_same_loss_neither_stalls(x64):
    """SDL-W, p > n, random start, ξ = λ = 0.1: BCD leads early (it takes a block-wise step), both
    reach the same loss by 1000 iterations (rel. 1e-5) and BCD descends monotonically. We found no
    case where BCD stalls at a worse point (documented in docs/sdl.md), so this pins the
    opposite."""
    X, y, _ = generative("W", 200, 60, 4, sigma=0.5)
    X = (X - X.mean(0, keepdims=True)) / X.std(0, keepdims=True) / 10  # per gene (column)
    kw = dict(model="W", xi=0.1, lam=0.1, init="random", tol=None)
    lp, bc = (
        sdl.fit(X, y, 4, max_iter=1000, **kw),
        sdl.fit(X, y, 4, solver="bcd", max_iter=1000, **kw),
    )
    np.testing.assert_allclose(float(bc.loss), float(lp.loss), rtol=1e-5)
    # the final value is the last row
    np.testing.assert_array_equal(bc.loss, bc.history["loss"][-1])
    assert float(bc.history["loss"][99]) < float(lp.history["loss"][99])
    bc_loss = np.asarray(bc.history["loss"])
    assert np.all(np.diff(bc_loss) <= 1e-9 * np.abs(bc_loss[1:]))  # BCD is monotone


def test_prediction_and_supervised_coding(x64):
    X, y, _ = generative("H", 40, 80, 3, kappa=2, seed=3)
    m = sdl.fit(X, y, 3, model="H", xi=1.0, lam=0.1, max_iter=300)
    P = sdl.predict_proba(m, X)
    assert P.shape == (80, 3)
    np.testing.assert_allclose(P.sum(1), 1.0, rtol=1e-12)
    majority = np.bincount(y).max() / y.size
    assert np.mean(np.asarray(sdl.predict(m, X)) == y) > majority + 0.15
    # Supervised coding: J_c is the minimum over h (gradient zero, below the least-squares code's
    # cost), less the class-independent ξ‖x − W h_ls‖², added back here.
    from lowrank_jax.sdl.fit import _supervised_costs

    Xa, Xp = jnp.ones((1, 5)), X[:5].T  # the first five samples in the paper's layout (p, 5)
    h_ls = jnp.linalg.lstsq(m.W, Xp)[0]
    J = _supervised_costs(m.W, m.coef, m.aux_coef, m.xi, Xp, Xa)
    J = J + m.xi * jnp.sum((Xp - m.W @ h_ls) ** 2, axis=0)[:, None]
    for s in range(5):
        for c in range(3):

            def cost(h):
                a = m.coef.T @ h + m.aux_coef.T @ Xa[:, s]
                return (
                    sm.log_partition(a[:, None])[0]
                    - (a[c - 1] if c else 0.0)
                    + m.xi * jnp.sum((Xp[:, s] - m.W @ h) ** 2)
                )

            assert float(J[s, c]) <= float(cost(h_ls[:, s])) + 1e-12
            # Brute force: plain gradient descent from the least-squares code reaches the same
            # value.
            lr = 0.5 / (2 * m.xi * jnp.linalg.norm(m.W, 2) ** 2 + jnp.linalg.norm(m.coef, 2) ** 2)
            h = jax.jit(
                lambda h0: jax.lax.fori_loop(0, 2000, lambda _, h: h - lr * jax.grad(cost)(h), h0)
            )(h_ls[:, s])
            np.testing.assert_allclose(J[s, c], cost(h), rtol=1e-8)
    Ps = sdl.predict_proba(m, X, coding="supervised")
    assert np.mean(np.asarray(jnp.argmax(Ps, 1)) == y) > majority + 0.15


def test_supervised_coding_keeps_the_class_differences_in_float32(x64):
    """Raw-intensity data (entries ~1e4): ξ‖x − W h_ls‖² ~ 1e8 was part of every class's cost, so in
    float32 the O(1) differences between classes rounded to 0 and every probability read ½. The
    float32 model now gives the float64 model's probabilities."""
    rng = np.random.default_rng(3)
    H, W = rng.normal(size=(3, 40)), rng.normal(size=(300, 3))
    y = (H[0] > 0).astype(int)
    X = ((W @ H + 0.1 * rng.normal(size=(300, 40))) * 1e4).T
    m64 = sdl.fit(X, y, 3, max_iter=300, tol=None)
    m32 = jax.tree.map(
        lambda a: (
            a.astype(jnp.float32) if isinstance(a, jax.Array) and a.dtype == jnp.float64 else a
        ),
        m64,
    )
    P64 = np.asarray(sdl.predict_proba(m64, X, coding="supervised"))
    P32 = np.asarray(sdl.predict_proba(m32, X.astype(np.float32), coding="supervised"))
    assert np.ptp(P64[:, 1]) > 0.5  # the classes are told apart ...
    np.testing.assert_allclose(P32, P64, atol=2e-3)  # ... in float32 too


def test_supervised_coding_refuses_xi_zero_and_survives_a_rank_deficient_dictionary(monkeypatch):
    """At ξ = 0 supervised coding returned NaN costs, which predict read as class 0 and
    cross_validate scored as accuracy; W = 0 (all-zero training data) made its solve singular."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, 16)).T, np.array([0, 1] * 8)
    m = sdl.fit(X, y, 2, xi=0.0, max_iter=50)
    with pytest.raises(ValueError, match="ξ > 0"):
        sdl.predict(m, X, coding="supervised")
    with pytest.raises(ValueError, match="ξ > 0"):
        sdl.cross_validate(X, y, 2, [0.0, 1.0], [0.1], coding="supervised", folds=2)
    # W = 0 (all-zero training data), with unbalanced labels so that γ's intercept is not 0: every
    # code reconstructs nothing and the code stays h = 0, so the probabilities are those of the
    # least-squares code, the class frequencies, not the uniform ones of an unbounded βᵀh.
    y_unbalanced = np.array([0] * 12 + [1] * 4)
    m0 = sdl.fit(np.zeros((16, 20)), y_unbalanced, 2, xi=1.0, lam=0.1)
    assert not np.any(m0.W)
    P = np.asarray(sdl.predict_proba(m0, X, coding="supervised"))
    P_ls = np.asarray(sdl.predict_proba(m0, X))
    assert abs(P_ls[0, 0] - 0.75) < 0.05
    np.testing.assert_allclose(P, P_ls, rtol=1e-5)


def test_supervised_coding_moves_the_code_only_where_w_reconstructs():
    """Rank above the data's: W's extra column is rounding, and β along it made every class's cost
    tend to 0 (J ≈ 2e-6 for both classes). The code now moves within the row space of W only: the
    costs are those of a strongly convex problem there, checked against a direct minimisation."""
    import importlib

    import scipy.optimize

    fit_mod = importlib.import_module("lowrank_jax.sdl.fit")

    rng = np.random.default_rng(0)
    W = np.linalg.qr(rng.normal(size=(12, 2)))[0] @ np.diag([3.0, 1.0])
    W = np.concatenate([W, np.zeros((12, 1))], axis=1)  # rank 2 of 3
    beta = rng.normal(size=(3, 1))
    gamma, xi = np.array([[0.3]]), 0.5
    X, Xa = rng.normal(size=(12, 4)), np.ones((1, 4))
    J = np.asarray(
        fit_mod._supervised_costs(
            jnp.asarray(W),
            jnp.asarray(beta),
            jnp.asarray(gamma),
            xi,
            jnp.asarray(X),
            jnp.asarray(Xa),
        )
    )
    assert np.all(np.abs(J) > 1e-2)
    for s in range(4):
        h_ls = np.linalg.lstsq(W, X[:, s], rcond=None)[0]
        for c in range(2):

            def cost(u):  # u: the code's first two entries
                h = np.array([u[0], u[1], h_ls[2]])
                a = float(beta[:, 0] @ h + gamma[0, 0])
                return (
                    np.logaddexp(0.0, a)
                    - (a if c == 1 else 0.0)
                    + xi * (np.sum((X[:, s] - W @ h) ** 2) - np.sum((X[:, s] - W @ h_ls) ** 2))
                )

            best = scipy.optimize.minimize(cost, h_ls[:2], method="BFGS", options={"gtol": 1e-10})
            np.testing.assert_allclose(J[s, c], best.fun, rtol=1e-6, atol=1e-9)


def test_supervised_costs_are_the_minima_at_small_xi_and_large_beta(x64):
    """ξ = 2.8e-5 and β entries up to 340: the reconstruction term barely holds the code and the
    softmax is steep, so the damped Newton needs its Armijo backtracking. Each class's cost must be
    the minimum over h that a brute-force search finds (an Armijo test with the wrong sign accepted
    rising steps and stopped at h_ls: 89.24 where the minimum is 7.3e-6)."""
    import scipy.optimize

    fit_mod = importlib.import_module("lowrank_jax.sdl.fit")
    rng = np.random.default_rng(0)
    kappa = int(rng.integers(1, 4))  # 3
    W = rng.normal(size=(5, 2))
    beta = rng.normal(size=(2, kappa)) * 10 ** rng.uniform(0, 4)
    gamma = rng.normal(size=(1, kappa)) * 5
    x = (rng.normal(size=(5, 8)) * 10 ** rng.uniform(-1, 2))[:, 2]
    xi = 10 ** rng.uniform(-5, 0)  # 2.84e-5
    J = np.asarray(
        fit_mod._supervised_costs(
            jnp.asarray(W),
            jnp.asarray(beta),
            jnp.asarray(gamma),
            xi,
            jnp.asarray(x[:, None]),
            jnp.ones((1, 1)),
        )
    )[0]
    h_ls = np.linalg.lstsq(W, x, rcond=None)[0]

    def cost(h, c):
        a = beta.T @ h + gamma[0]
        ell = np.logaddexp.reduce(np.concatenate([[0.0], a])) - (a[c - 1] if c > 0 else 0.0)
        return ell + xi * (np.sum((x - W @ h) ** 2) - np.sum((x - W @ h_ls) ** 2))

    starts = [h_ls] + [h_ls + s * rng.normal(size=2) for s in (1.0, 10.0, 100.0) for _ in range(3)]
    assert kappa == 3 and abs(xi - 2.84e-5) < 1e-7 and np.abs(beta).max() > 300
    for c in range(kappa + 1):
        best = min(
            scipy.optimize.minimize(
                cost,
                h0,
                args=(c,),
                method="Nelder-Mead",
                options={"xatol": 1e-12, "fatol": 1e-15, "maxiter": 20000},
            ).fun
            for h0 in starts
        )
        assert J[c] <= cost(h_ls, c) + 1e-12  # never above the starting code's cost
        np.testing.assert_allclose(J[c], best, rtol=1e-4, atol=1e-9)


def test_supervised_coding_keeps_a_weak_direction_of_w(x64):
    """W = Q diag(1, 3e-7), p = 2000: WᵀW's eigenvalues are 1 and 9e-14, above the rounding of its
    2000-term sums (r·√p·ε = 2e-14), so the weak atom is W's range and the code may use it. With β
    along it (β = (0, 1)), both classes' costs go to 0 (the minimum over h of a loss whose label
    term can be driven to 0 at a reconstruction cost of 9e-14·h²). Swapping the cut-off's
    arguments (p·√r·ε = 6.3e-13) dropped the atom, and the costs were 2.1 and 0.13."""
    fit_mod = importlib.import_module("lowrank_jax.sdl.fit")
    Q = np.linalg.qr(np.random.default_rng(0).normal(size=(2000, 2)))[0]
    W = Q * np.array([1.0, 3e-7])
    J = fit_mod._supervised_costs(
        jnp.asarray(W),
        jnp.array([[0.0], [1.0]]),
        jnp.array([[2.0]]),
        1.0,
        jnp.asarray(Q[:, :1]),
        jnp.ones((1, 1)),
    )
    assert float(jnp.max(J)) < 1e-8


@pytest.mark.parametrize("p, seed", [(2000, 5), (7129, 4)])
def test_supervised_coding_with_dependent_atoms_of_many_features(x64, p, seed):
    """W's third atom is the sum of the first two, with Golub's p = 7129 features (and 2000). WᵀW,
    formed from p-term sums, has its null(W) eigenvalue at 4 to 7·ε·max, above r·ε·max: counted as
    range, it let the code run off along null(W) and every cost fell to 1e-10. The costs must be
    those of the same problem written in an exact basis Q of W's row space: W → WQ, β → Qᵀβ."""
    fit_mod = importlib.import_module("lowrank_jax.sdl.fit")
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((p, 3))
    W[:, 2] = W[:, 0] + W[:, 1]
    v = np.array([1.0, 1.0, -1.0]) / np.sqrt(3.0)  # null(W)
    Q = np.linalg.svd(np.eye(3) - np.outer(v, v))[0][:, :2]  # its orthogonal complement
    beta, gamma = rng.standard_normal((3, 2)), rng.standard_normal((1, 2))
    X = jnp.asarray(W[:, :2] @ rng.standard_normal((2, 5)) + 0.1 * rng.standard_normal((p, 5)))
    Xa = jnp.ones((1, 5))
    J = fit_mod._supervised_costs(
        jnp.asarray(W), jnp.asarray(beta), jnp.asarray(gamma), 0.01, X, Xa
    )
    J_row = fit_mod._supervised_costs(
        jnp.asarray(W @ Q), jnp.asarray(Q.T @ beta), jnp.asarray(gamma), 0.01, X, Xa
    )
    assert float(jnp.min(J_row)) > 1e-3
    np.testing.assert_allclose(J, J_row, rtol=1e-10, atol=1e-12)


def test_a_diverged_grid_point_is_nan_and_never_the_best(monkeypatch):
    """Fits whose iterates overflow predicted class 0 everywhere and scored that as accuracy."""
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(20, 16)).T, np.array([0, 1] * 8)
    with pytest.raises(ValueError, match="rescale X"):  # a scale whose squares overflow: refused
        sdl.cross_validate(X * 1e20, y, 2, [1.0], [0.1], folds=2)
    # A grid point whose fit fails for real (ξ = 3e38: the safe step 1/(2ξ) overflows float32, an
    # INVALID run) does not stop the vmapped grid, whose fits run with throw=False.
    acc, best = sdl.cross_validate(X, y, 2, [0.1, 3e38], [0.1], folds=2, max_iter=20)
    assert np.isnan(acc[1, 0]) and np.isfinite(acc[0, 0]) and best == (0.1, 0.1)
    import importlib

    fit_mod = importlib.import_module("lowrank_jax.sdl.fit")
    real = fit_mod._grid_predict

    def diverging(points):
        def grid_predict(*args, **kw):
            preds, finite = real(*args, **kw)
            return preds, finite.at[points].set(False)

        return grid_predict

    monkeypatch.setattr(fit_mod, "_grid_predict", diverging(1))
    result = sdl.cross_validate(X, y, 2, [0.1, 1.0], [0.1], folds=2)
    acc, best = result  # a CrossValidation unpacks as (accuracy, best)
    assert (
        isinstance(result, sdl.CrossValidation) and result.accuracy is acc and result.best is best
    )
    assert np.isnan(acc[1, 0]) and np.isfinite(acc[0, 0]) and best == (0.1, 0.1)
    monkeypatch.setattr(fit_mod, "_grid_predict", diverging(slice(None)))
    with pytest.raises(RuntimeError, match="every"):
        sdl.cross_validate(X, y, 2, [0.1, 1.0], [0.1], folds=2)


@pytest.mark.parametrize("model, coding", [("W", "lstsq"), ("H", "lstsq"), ("H", "supervised")])
def test_cross_validation_grid_equals_separate_fits(model, coding, x64):
    """Every prediction branch of the vmapped grid (SDL-W; SDL-H's least-squares and supervised
    coding) against fit + predict on each fold."""
    X, y, _ = generative(model, 30, 40, 2, seed=4)
    X = X / np.sqrt(40)
    acc, best = sdl.cross_validate(
        X, y, 2, [0.1, 1.0], [0.1, 1.0], model=model, folds=3, max_iter=50, coding=coding
    )
    assert acc.shape == (2, 2) and best[0] in (0.1, 1.0)
    # One grid point by hand: fit on each training fold, score on the held-out fold.
    manual = 0.0
    # cross_validate's folds: the shuffle key is folded off its key (default key(0)); its fits run
    # every step (no tolerance)
    for train, val in sdl.stratified_folds(y, 3, key=jax.random.fold_in(jax.random.key(0), 1)):
        m = sdl.fit(X[train], y[train], 2, model=model, xi=1.0, lam=0.1, max_iter=50, tol=None)
        manual += np.mean(np.asarray(sdl.predict(m, X[val], coding=coding)) == y[val]) / 3
    np.testing.assert_allclose(acc[1, 0], manual, atol=1e-12)


def test_stratified_folds_partition_the_samples_and_spread_every_class():
    """The validation parts partition 0..n−1, each training part is the rest, and every class is
    spread over the folds to within one sample."""
    y = np.repeat([0, 1, 2], [7, 5, 3])
    folds = sdl.stratified_folds(y, 3, key=2)
    vals = np.concatenate([val for _, val in folds])
    np.testing.assert_array_equal(np.sort(vals), np.arange(y.size))
    for train, val in folds:
        np.testing.assert_array_equal(np.sort(np.concatenate([train, val])), np.arange(y.size))
        assert not set(train) & set(val)
    for c in range(3):
        per_fold = [int(np.sum(y[val] == c)) for _, val in folds]
        assert max(per_fold) - min(per_fold) <= 1


def test_stratified_folds_are_balanced_in_size_too():
    """Each class continues where the last one stopped, so the fold sizes differ by at most one and
    no fold is empty while folds ≤ n. Starting every class at fold 0 kept each class spread but
    made sizes [8, 4] for four classes of three, and an empty fold for y = [0, 1, 2] with 2 folds,
    on which cross_validate failed."""
    rng = np.random.default_rng(0)
    cases = [(np.array([0, 1, 2]), 2), (np.repeat([0, 1, 2, 3], 3), 2)]
    cases += [
        (
            rng.integers(0, int(rng.integers(2, 6)), size=int(rng.integers(6, 40))),
            int(rng.integers(2, 6)),
        )
        for _ in range(20)
    ]
    for y, k in cases:
        sizes = [val.size for _, val in sdl.stratified_folds(y, k, key=1)]
        assert max(sizes) - min(sizes) <= 1 and min(sizes) > 0, (y, k, sizes)


def test_cross_validation_accuracy_has_xi_along_rows_and_lambda_along_columns(monkeypatch):
    """acc[i, j] belongs to (xis[i], lams[j]): a stand-in grid that predicts right (class 0 where
    y = 0) at one (ξ, λ) only must light up that cell and return that pair as the best."""
    fit_module = importlib.import_module("lowrank_jax.sdl.fit")
    xis, lams, target = [0.1, 0.2], [1.0, 2.0, 3.0], (0.2, 1.0)

    def grid_predict(theta0, gamma0, data, grid_xi, grid_lam, X_val, Xa_val, **kw):
        hit = np.isclose(np.asarray(grid_xi), target[0]) & np.isclose(
            np.asarray(grid_lam), target[1]
        )
        preds = np.where(hit[:, None], 0, -1) * np.ones((1, X_val.shape[1]), int)
        return jnp.asarray(preds), jnp.ones(grid_xi.shape[0], bool)

    monkeypatch.setattr(fit_module, "_grid_predict", grid_predict)
    X, y, _ = generative("H", 6, 24, 1, kappa=2, seed=1)
    acc, best = sdl.cross_validate(X, y, 1, xis, lams, folds=2, max_iter=1)
    assert best == target
    lit = np.zeros((2, 3), bool)
    lit[1, 0] = True
    assert np.all(acc[lit] > 0) and np.all(acc[~lit] == 0)


def test_random_start_has_the_documented_scale(x64):
    """init="random": W₀, H₀ entries N(0, s²) with s² = ‖X‖_F/√(r(p + n)), so that
    E(‖W₀‖²_F + ‖H₀‖²_F) = ‖X‖_F √(r(p + n)) (150 squared normals here: a spread of about 12 %)."""
    rng = np.random.default_rng(0)
    p, n, r = 30, 20, 3
    X = 100 * rng.normal(size=(p, n)).T / np.sqrt(p * n)  # (n, p)
    y = np.arange(n) % 2
    data = sm.prepare(X, y, None, intercept=False)
    ratios = []
    for seed in range(4):
        _, _, f0 = sdl.initial_point(data, r, "H", jax.random.key(seed), init="random")
        total = float(jnp.sum(f0.W**2) + jnp.sum(f0.H**2))
        ratios.append(total / (np.linalg.norm(X) * np.sqrt(r * (p + n))))
    assert 0.8 < np.mean(ratios) < 1.2, ratios


def test_curvature_bounds_bracket_the_softmax_hessian_and_remark_d3_does_not():
    rng = np.random.default_rng(7)
    for kappa in (1, 2, 4):
        M = 2.0
        a = rng.normal(size=(4000, kappa))
        a = a / np.linalg.norm(a, axis=1, keepdims=True) * M * rng.uniform(0, 1, (4000, 1)) ** 0.2
        a = np.vstack([a, np.zeros((1, kappa))])
        g = np.exp(a) / (1 + np.exp(a).sum(1, keepdims=True))
        eig = np.linalg.eigvalsh(
            np.einsum("si,ij->sij", g, np.eye(kappa)) - g[:, :, None] * g[:, None, :]
        )
        lo, hi = sm.softmax_curvature(M, kappa)
        assert lo <= eig.min() and eig.max() <= hi
    # Remark D.3 as printed, binary case: its α⁺ is the smallest curvature (the largest, ¼, is at
    # a = 0) and its α⁻ lies above the curvature at |a| = M.
    p_lo, p_hi = sm.softmax_curvature_printed(2.0, 1)
    sig = 1 / (1 + np.exp(-2.0))
    np.testing.assert_allclose(p_hi, sig * (1 - sig), rtol=1e-12)
    assert p_hi < 0.25 and p_lo > sig * (1 - sig)


def test_theory_and_cross_validate_name_bad_arguments():
    """theory(λ = NaN) said the condition holds (Python's min/max skip NaN), κ = 0 gave a negative
    α⁻ and still 'holds', M = 1e3 overflowed math.exp; cross_validate indexed a wrong-width X_aux
    (IndexError) and took max_iter = 0. Each is refused by name, as is a key that is none."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, 16)).T, np.array([0, 1] * 8)
    for kw, match in [
        (dict(lam=float("nan")), "lam"),
        (dict(kappa=0), "kappa"),
        (dict(M=-1.0), "M"),
        (dict(xi=-1.0), "xi"),
        (dict(M=float("inf")), "M"),
    ]:
        with pytest.raises(ValueError, match=match):
            sdl.theory(X, **({"xi": 1.0, "lam": 0.5, "model": "H"} | kw))
    for kw, match in [
        (dict(X_aux=np.ones((5, 1))), "one row per sample"),
        (dict(X_aux=np.ones(16)), "2-D"),
        (dict(max_iter=0), "max_iter"),
    ]:
        with pytest.raises(ValueError, match=match):
            sdl.cross_validate(X, y, 2, [1.0], [0.1], folds=2, **kw)
    with pytest.raises(TypeError, match="key"):
        sdl.cross_validate(X, y, 2, [1.0], [0.1], folds=2, key=0.5)
    # the curvature bounds written with e^{−M} only: equal to the direct formulas, finite at M = 1e3
    for M in (0.0, 1.0, 5.0):
        np.testing.assert_allclose(
            sm.softmax_curvature(M, 1)[0], np.exp(M) / (1 + np.exp(M)) ** 2, rtol=1e-13
        )
        direct = (1 / (1 + 3 * np.exp(M))) * np.exp(-M) / (1 + np.exp(-M) + 2 * np.exp(M))
        np.testing.assert_allclose(sm.softmax_curvature(M, 3)[0], direct, rtol=1e-13)
    assert sm.softmax_curvature(1e3, 3) == (0.0, 0.5)
    # a flat objective (X = 0, no covariates, ξ = λ = 0) has Hessian bound 0: the default step was
    # 1/0 and the fit "diverged, lower the step" although lr was left at None
    flat = sdl.fit(
        np.zeros((16, 20)), y, 2, model="W", intercept=False, xi=0.0, lam=0.0, max_iter=20
    )
    assert float(flat.lr) == 1.0 and np.all(np.isfinite(np.asarray(flat.theta)))


def test_theory_helper():
    X = np.random.default_rng(5).normal(size=(50, 20)).T  # p > n: δ⁻ = 0, SDL-W's μ is 2λ
    th = sdl.theory(X, 1.0, 0.0, model="W")
    assert th.delta_minus == 0.0 and not th.holds and th.step_interval[0] >= th.step_interval[1]
    # Without covariates μ = min(2ξ, 2λ + α⁻) and L = max(2ξ, 2λ + α⁺): L/μ < 3 exactly when
    # max(ξ/3 − α⁻/2, (α⁺ − 3α⁻)/4) < λ < 3ξ − α⁺/2 (test_theory_holds_on_the_closed_form_range...).
    # The paper's "α⁺/4 < λ < ξ/3" (SDL §3.6) has the ξ/3 side reversed.
    th = sdl.theory(X, 1.0, 0.5, model="H")  # λ > ξ/3: holds, though outside the printed range
    assert th.holds and th.rho < 1 and th.step_interval[0] < th.best_step < th.step_interval[1]
    for xi, lam in ((1.0, 0.2), (3.0, 0.5)):  # inside the printed range, and L/μ > 3
        th = sdl.theory(X, xi, lam, model="H")
        assert th.alpha_plus / 4 < lam < xi / 3 and th.condition > 3 and not th.holds, (
            xi,
            lam,
            th.condition,
        )


def _closed_form_range(xi, a_minus, a_plus):
    """SDL-H without covariates: L/μ < 3 ⇔ lo < λ < hi (docs/sdl.md, from μ = min(2ξ, 2λ + α⁻) and
    L = max(2ξ, 2λ + α⁺)); the three bounds, lo the larger of the first two."""
    return xi / 3 - a_minus / 2, (a_plus - 3 * a_minus) / 4, 3 * xi - a_plus / 2


@pytest.mark.parametrize("kappa, M", [(1, 1.0), (1, 3.0), (3, 0.5)])
def test_theory_holds_on_the_closed_form_range_without_covariates(kappa, M):
    """docs/sdl.md said L/μ < 3 (SDL-H, q = 0) holds "only when λ is above both α⁺/4 and about
    ξ/3 − α⁻/2"; the exact condition is max(ξ/3 − α⁻/2, (α⁺ − 3α⁻)/4) < λ < 3ξ − α⁺/2.
    theory().holds equals it on a grid that puts λ just below and just above every one of the three
    bounds at every ξ, and each bound alone decides some points. The guide's old reading fails on
    both sides: points with λ < α⁺/4 hold, and points above both its lower bounds do not
    (λ > 3ξ − α⁺/2)."""
    X = np.random.default_rng(5).normal(size=(50, 20)).T
    a_minus, a_plus = sdl.softmax_curvature(M, kappa)
    decided_by = {0: 0, 1: 0, 2: 0}
    old_reading_wrong = {"holds below α⁺/4": 0, "fails above both old lower bounds": 0}
    checked = 0
    for xi in np.geomspace(0.01, 4.0, 40):
        bounds = _closed_form_range(xi, a_minus, a_plus)
        lams = list(np.linspace(0.0, 14.0, 57))
        for b in bounds:
            lams += [b * (1 - 1e-6) - 1e-9, b * (1 + 1e-6) + 1e-9]
        for lam in (v for v in lams if v >= 0):
            lo1, lo2, hi = bounds
            expected = max(lo1, lo2) < lam < hi
            th = sdl.theory(X, float(xi), float(lam), model="H", kappa=kappa, M=M)
            assert th.holds == expected, (xi, lam, th.condition, bounds)
            assert (th.condition < 3) == expected
            checked += 1
            fails = [lam <= lo1, lam <= lo2, lam >= hi]
            if sum(fails) == 1:
                decided_by[fails.index(True)] += 1
            old_reading_wrong["holds below α⁺/4"] += expected and lam < a_plus / 4
            old_reading_wrong["fails above both old lower bounds"] += (
                not expected and lam > a_plus / 4 and lam > lo1
            )
    assert checked >= 2000
    assert decided_by[0] > 0 and decided_by[2] > 0, decided_by
    if (a_plus - 3 * a_minus) / 4 > 0:  # κ = 1, M = 3 and κ = 3: the α⁻-corrected bound binds
        assert decided_by[1] > 0, decided_by
    assert old_reading_wrong["fails above both old lower bounds"] > 0, old_reading_wrong
    if kappa == 1 and M == 1.0:
        assert old_reading_wrong["holds below α⁺/4"] > 0, old_reading_wrong
        # the guide's worked cases (50 × 20 Gaussian X, M = 1, κ = 1)
        for (xi, lam), ratio, holds in [
            ((1.0, 0.2), 3.4, False),
            ((3.0, 0.5), 5.0, False),
            ((1.0, 0.5), 1.7, True),
            ((0.1, 0.01), 1.35, True),
            ((1.0, 5.0), 5.1, False),
        ]:
            th = sdl.theory(X, xi, lam, model="H")
            assert th.holds == holds and th.condition == pytest.approx(ratio, abs=0.05), (
                xi,
                lam,
                th.condition,
            )


@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_theory_delta_minus_is_the_smallest_eigenvalue_up_to_a_square_phi(extra):
    """δ⁻ = λ_min(ΦΦᵀ/n) of Φ = [X; X_aux] ((p + q) × n), which is positive up to p + q = n and 0
    beyond. At exactly p + q = n a strict comparison set it to 0 (μ = 0, 'holds' False, where
    X = 2I gives δ⁻ = 2)."""
    rng = np.random.default_rng(7)
    n = 6
    X, Xa = rng.normal(size=(n - 1 + extra, n)), rng.normal(size=(1, n))
    Phi = np.concatenate([X, Xa])
    th = sdl.theory(X.T, 1.0, 0.1, model="W", X_aux=Xa.T)
    expected = np.linalg.eigvalsh(Phi @ Phi.T / n)[0] if Phi.shape[0] <= n else 0.0
    assert (expected > 1e-3) == (extra <= 0)
    np.testing.assert_allclose(th.delta_minus, expected, rtol=1e-6, atol=1e-12)  # X read as float32
    square = sdl.theory(2.0 * np.eye(2), 1.0, 0.0, model="W", M=0.0)
    assert square.delta_minus == pytest.approx(2.0) and square.holds


def test_theory_constants_are_eq_16_with_the_mu_order_of_the_proofs():
    """μ and L of eq. (16) evaluated by hand for p + q < n, where δ⁻ > 0 and λ⁺ > 0: SDL-W's μ has
    nδ⁻α⁻, SDL-H's μ has α⁻ (the order of eqs. 103 and 129; the paper labels only L) when there are
    no covariates, and with covariates SDL-H's corrected constants (erratum: the label term is flat
    along A = −γᵀX_aux, and the activation map's norm² is 1 + λ⁺n); ρ is Theorem E.2's
    2·max(|1 − τμ|, |1 − τL|) at the best step τ = 2/(μ + L), i.e. 2(L − μ)/(L + μ)."""
    rng = np.random.default_rng(7)
    X, Xa = rng.normal(size=(6, 40)) / 3, rng.normal(size=(2, 40)) / 3
    n, xi, lam = 40, 0.6, 0.2  # 2ξ between μ and L: no min or max is 2ξ
    Phi = np.concatenate([X, Xa])
    ev = np.linalg.eigvalsh(Phi @ Phi.T / n)
    lam_plus = np.linalg.eigvalsh(Xa @ Xa.T / n)[-1]
    a_minus, a_plus = sdl.softmax_curvature(1.0, 1)
    expected = {
        ("W", True): (
            min(2 * xi, 2 * lam + n * ev[0] * a_minus),
            max(2 * xi, 2 * lam + n * ev[-1] * a_plus),
        ),
        ("H", False): (min(2 * xi, 2 * lam + a_minus), max(2 * xi, 2 * lam + a_plus)),
        ("H", True): (min(2 * xi, 2 * lam), max(2 * xi, 2 * lam + a_plus * (1 + lam_plus * n))),
    }
    assert expected["W", True][0] != expected["H", False][0]
    assert 2 * xi not in (*expected["W", True], *expected["H", False][:1], *expected["H", True])
    for (model, aux), (mu, L) in expected.items():
        th = sdl.theory(X.T, xi, lam, model=model, X_aux=Xa.T if aux else None)
        np.testing.assert_allclose([th.mu, th.L], [mu, L], rtol=1e-6)
        if aux:
            np.testing.assert_allclose(th.delta_minus, ev[0], rtol=1e-6)
        np.testing.assert_allclose(th.best_step, 2 / (mu + L), rtol=1e-6)
        np.testing.assert_allclose(th.rho, 2 * (L - mu) / (L + mu), rtol=1e-6)
        np.testing.assert_allclose(th.step_interval, (1 / (2 * mu), 1.5 / L), rtol=1e-6)


@pytest.mark.parametrize("model", ["H", "W"])
def test_theory_constants_bound_the_hessian_of_f(model, x64):
    """At θ = 0, γ = 0 (all activations 0, where the logistic curvature ¼ = α⁺ is attained), L is
    the largest Hessian eigenvalue of F exactly, and μ is at most the smallest (SDL-H with
    covariates: equal to it, the label term being flat along A = −γᵀX_aux; eq. (16)'s printed
    SDL-H constants, 2λ + α⁻ and max(2λ + α⁺λ⁺n, 2λ + α⁺), miss both)."""
    rng = np.random.default_rng(0)
    p, n = 5, 30
    X, Xa = rng.normal(size=(p, n)), rng.normal(size=(2, n))
    y = np.arange(n) % 2
    xi, lam = 2.0, 0.05
    data = sm.prepare(X.T, y, Xa.T, intercept=False)
    shape = sm.theta_shape(model, p, n, 1)
    size = int(np.prod(shape))

    def F(v):
        return sm.objective(v[:size].reshape(shape), v[size:].reshape(2, 1), data, xi, lam, model)

    ev = np.linalg.eigvalsh(np.asarray(jax.jit(jax.hessian(F))(jnp.zeros(size + 2))))
    th = sdl.theory(X.T, xi, lam, model=model, X_aux=Xa.T)
    np.testing.assert_allclose(th.L, ev[-1], rtol=1e-10)
    assert th.mu <= ev[0] * (1 + 1e-10)
    if model == "H":
        np.testing.assert_allclose(th.mu, ev[0], rtol=1e-10)
        a_minus, a_plus = sdl.softmax_curvature(1.0, 1)
        lam_plus = np.linalg.eigvalsh(Xa @ Xa.T / n)[-1]
        printed_mu, printed_L = (
            2 * lam + a_minus,
            max(2 * lam + a_plus * lam_plus * n, 2 * lam + a_plus),
        )
        assert printed_mu > 1.5 * ev[0] and printed_L < ev[-1]


def test_mf_lr_baseline():
    X, y, _ = generative("H", 40, 100, 2, seed=6)
    m = sdl.mf_lr(X, y, 2)
    np.testing.assert_allclose(m.U.T @ m.U, np.eye(2), atol=1e-5)
    assert np.mean(m.predict(X) == y) > 0.6


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda X, y: sdl.fit(X, np.where(y == 1, 3, y), 2, num_classes=2), "labels must be in"),
        (lambda X, y: sdl.fit(X, y - 1, 2), "labels must be in"),
        (lambda X, y: sdl.fit(X, y + 0.5, 2), "integers"),
        (lambda X, y: sdl.fit(X, y[:-1], 2), "X has n = 20 rows"),
        (lambda X, y: sdl.fit(X, y, 25), "rank must satisfy"),
        (lambda X, y: sdl.fit(X.at[0, 0].set(np.nan), y, 2), "non-finite"),
        (lambda X, y: sdl.fit(X, y, 2, model="Z"), "model must be"),
        (lambda X, y: sdl.fit(X, np.zeros_like(y), 2), "two classes"),
        (lambda X, y: sdl.predict(sdl.fit(X, y, 2, max_iter=2), X[:, :5]), "p = 30 columns"),
        (
            lambda X, y: sdl.predict(sdl.fit(X, y, 2, max_iter=2), X, np.ones((20, 1))),
            "X_aux_new must be None",
        ),
        (lambda X, y: sdl.fit(X, y, 2, num_classes=1.5), "num_classes must be a positive integer"),
        (lambda X, y: sdl.fit(X, y, 2, tol=-1.0), "tol must be positive"),
        (lambda X, y: sdl.fit(X, y, 2, solver="bcd", tol=1e-3), "lpgd' only"),
        # ignored, yet recorded on the model
        (lambda X, y: sdl.fit(X, y, 2, solver="bcd", lr=1e-6), "lpgd' only"),
        (lambda X, y: sdl.fit(X, y, 2, project="ball"), "project must be a function"),
        # a projection that changes θ's shape failed in the loop ("sub got incompatible shapes"),
        # naming nothing
        (
            lambda X, y: sdl.fit(X, y, 2, project=lambda t: t[:-1]),
            r"project must return θ's shape and dtype",
        ),
        (
            lambda X, y: sdl.fit(X, y, 2, model="W", project=lambda t: t.astype(jnp.float16)),
            "project must return",
        ),
        # as fit; it used to run
        (lambda X, y: sdl.mf_lr(X, 2 * y, 2), "labels must use every class"),
        (
            lambda X, y: sdl.fit(X, np.array([str(v) for v in y]), 2),
            "labels must be integers.*dtype",
        ),
        # cross_validate checks its grid as fit checks one value (a negative ξ or a NaN λ used to
        # run and could be returned as the best pair), and its coding and folds
        (
            lambda X, y: sdl.cross_validate(X, y, 2, [-1.0], [0.01], folds=3, max_iter=2),
            "xis must be non-negative",
        ),
        (
            lambda X, y: sdl.cross_validate(X, y, 2, [1.0], [np.nan], folds=3, max_iter=2),
            "lams has non-finite",
        ),
        (
            lambda X, y: sdl.cross_validate(
                X, y, 2, [1.0], [0.1], folds=3, max_iter=2, coding="bogus"
            ),
            "coding must be",
        ),
        (
            lambda X, y: sdl.cross_validate(
                X, y, 2, [1.0], [0.1], model="W", folds=3, max_iter=2, coding="supervised"
            ),
            "supervised coding is for SDL-H",
        ),
        (
            lambda X, y: sdl.cross_validate(X, y, 2, [1.0], [0.1], folds=21, max_iter=2),
            "more than the 20 samples",
        ),
        (
            lambda X, y: sdl.cross_validate(X, y, 20, [1.0], [0.1], folds=4, max_iter=2),
            "each fit sees 15 of the 20",
        ),
        (
            lambda X, y: sdl.activations(sdl.fit(X, y, 2, max_iter=2), X, coding="supervised"),
            "least-squares code",
        ),
        (
            lambda X, y: sdl.activations(sdl.fit(X, y, 2, max_iter=2), X, coding="bogus"),
            "coding must be",
        ),
    ],
)
def test_bad_input(call, match):
    X, y, _ = generative("H", 30, 20, 2)
    with pytest.raises(ValueError, match=match):
        call(jnp.asarray(X), y)


@pytest.mark.parametrize("model", ["H", "W"])
def test_fit_and_predict_with_covariates(model, x64):
    """With X_aux (q = 2) the prediction is the trained model's: a = (SDL part) + γᵀ[x'; 1], so the
    log-odds log(P_c / P_0) move by exactly γ[:q]ᵀδ when X_aux_new moves by δ, and for SDL-W they
    equal the training activations on the training samples. A model fitted with covariates needs
    them."""
    X, y, X_aux = generative(model, 12, 40, 2, q=2, seed=11)
    m = sdl.fit(X, y, 2, model=model, xi=1.0, lam=0.1, max_iter=200, X_aux=X_aux)
    assert m.aux_coef.shape == (3, 1)  # 2 covariates + the intercept
    P = np.asarray(sdl.predict_proba(m, X, X_aux))
    assert P.shape == (40, 2)
    np.testing.assert_allclose(P.sum(1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(sdl.predict(m, X, X_aux), P.argmax(1))
    log_odds = lambda P: np.log(P[:, 1:] / P[:, :1])  # noqa: E731  (= a_c, class 0 the reference)
    delta = np.random.default_rng(12).normal(size=X_aux.shape)
    moved = log_odds(np.asarray(sdl.predict_proba(m, X, X_aux + delta))) - log_odds(P)
    np.testing.assert_allclose(moved, delta @ np.asarray(m.aux_coef[:2]), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(log_odds(P), sdl.activations(m, X, X_aux), rtol=1e-9, atol=1e-9)
    if model == "W":  # the training activations, in the paper's layout
        Xa1 = np.vstack([X_aux.T, np.ones((1, 40))])
        a = sm.activations(m.theta, m.aux_coef, jnp.asarray(X.T), jnp.asarray(Xa1), "W", 1)
        np.testing.assert_allclose(log_odds(P), np.asarray(a).T, rtol=1e-9, atol=1e-9)
    # better than the majority class
    assert np.mean(P.argmax(1) == y) > np.bincount(y).max() / y.size
    with pytest.raises(ValueError, match=r"X_aux_new is required.*q = 2"):
        sdl.predict(m, X)
    with pytest.raises(ValueError, match=r"X_aux_new is required"):
        sdl.predict_proba(m, X, coding="supervised" if model == "H" else "lstsq")
    with pytest.raises(ValueError, match=r"X_aux_new must have 2 columns"):
        sdl.predict(m, X, X_aux[:, :1])
    with pytest.raises(ValueError, match=r"X_aux_new must have one row per sample"):
        sdl.predict(m, X, X_aux[:1])


def _a_block_ball(model, kappa, radius):
    """Π onto {θ : ‖A‖_F ≤ radius} (A the logit block of θ in the model's layout): convex, and kept
    by the rank projection too (Π_r multiplies θ by an orthogonal projector from the side that keeps
    A's block intact, which cannot increase ‖A‖_F)."""

    def project(theta):
        A, B = sm.split(theta, model, kappa)
        return sm.join(
            A * jnp.minimum(1.0, radius / jnp.maximum(jnp.linalg.norm(A), 1e-300)), B, model
        )

    return project


@pytest.mark.parametrize("model", ["H", "W"])
def test_projection_keeps_the_iterate_in_the_set(model, x64):
    X, y, _ = generative(model, 15, 30, 2, seed=13)
    kw = dict(model=model, xi=1.0, lam=0.01, intercept=False)
    free = sdl.fit(X, y, 2, max_iter=200, **kw)
    norm_A = lambda m: float(jnp.linalg.norm(sm.split(m.theta, model, 1)[0]))  # noqa: E731
    radius = 0.5 * norm_A(free)
    project = _a_block_ball(model, 1, radius)
    for iters in (1, 200):
        m = sdl.fit(X, y, 2, max_iter=iters, project=project, **kw)
        assert norm_A(m) <= radius * (1 + 1e-12), (iters, norm_A(m), radius)
        assert (
            np.linalg.matrix_rank(np.asarray(m.theta), tol=1e-8 * float(jnp.linalg.norm(m.theta)))
            <= 2
        )
    # Not vacuous: the unconstrained solution lies outside the set (radius = half its ‖A‖_F).
    assert norm_A(free) > 1.5 * radius and float(
        jnp.linalg.norm(m.theta - free.theta)
    ) > 0.1 * norm_A(free)


def test_bcd_on_sdl_h_is_monotone(x64):
    """Every BCD block step is a gradient step of length 1/L_b on a convex block problem, so F never
    increases from sweep to sweep (SDL-H, random start, two classes + the reference)."""
    X, y, _ = generative("H", 20, 30, 2, kappa=2, seed=14)
    m = sdl.fit(X, y, 2, model="H", xi=0.5, lam=0.1, max_iter=300, solver="bcd", init="random")
    loss = np.asarray(m.history["loss"])
    assert np.all(np.isfinite(loss)) and int(m.n_iter) == 300 and int(m.status) == Status.MAX_ITER
    assert np.all(np.diff(loss) <= 1e-10 * np.abs(loss[1:])), np.diff(loss).max()
    assert loss[-1] < 0.5 * loss[0]


@pytest.mark.parametrize("model", ["H", "W"])
def test_one_lpgd_step_projects_on_the_convex_set_then_on_rank_r(x64, model):
    """Algorithm 1's step: θ₁ = Π_r(Π_Θ(θ₀ − τ∇_θF)) and a plain γ₁ = γ₀ − τ∇_γF from the old
    iterate. Π_Θ is an entrywise box, which does not commute with Π_r: the other order gives another
    θ₁."""
    X, y, _ = generative(model, 30, 20, 2, seed=16)
    data = sm.prepare(X, y, intercept=True)
    theta0, gamma0, _ = sdl.initial_point(data, 2, model, jax.random.key(0))
    lr, xi, lam = 0.5, 1.0, 0.1
    _, (g_theta, g_gamma) = sm.value_and_gradients(theta0, gamma0, data, xi, lam, model)
    moved = theta0 - lr * g_theta
    c = 0.5 * float(jnp.max(jnp.abs(moved)))
    box = lambda t: jnp.clip(t, -c, c)  # noqa: E731
    one = sdl.lpgd(
        theta0, gamma0, data, xi, lam, lr, 2, model=model, max_iter=1, project=box, svd="exact"
    )
    expected = prox.project_rank(box(moved), 2)
    np.testing.assert_allclose(one.theta, expected, atol=1e-10)
    np.testing.assert_allclose(one.aux_coef, gamma0 - lr * g_gamma, atol=1e-12)
    assert float(jnp.max(jnp.abs(box(prox.project_rank(moved, 2)) - expected))) > 1e-3


def test_tolerance_stops_early_at_the_first_small_step(x64):
    """tol = 1e-7: fewer than `iters` steps; the last step is the first with ‖Z_{t+1} − Z_t‖ ≤
    tol·max(1, ‖Z_t‖); the stopped iterate equals a fixed-length run of n_iter steps."""
    X, y, _ = generative("H", 30, 20, 2, seed=15)
    data = sm.prepare(X, y, intercept=True)
    theta0, gamma0, _ = sdl.initial_point(data, 2, "H", jax.random.key(0))
    step = sm.step_bound(data, 1.0, 0.1, "H")
    tol, cap = 1e-7, 5000
    res = sdl.lpgd(theta0, gamma0, data, 1.0, 0.1, step, 2, model="H", max_iter=cap, tol=tol)
    n = int(res.n_iter)
    assert 2 < n < cap and int(res.status) == Status.CONVERGED
    s = np.asarray(res.history["step_norm"])
    assert float(res.step_norm) == s[n - 1] and float(res.loss) == float(res.history["loss"][n - 1])
    assert np.all(np.isfinite(s[:n])) and np.all(np.isnan(s[n:]))
    fixed = sdl.lpgd(theta0, gamma0, data, 1.0, 0.1, step, 2, model="H", max_iter=n, tol=None)
    np.testing.assert_allclose(res.theta, fixed.theta, rtol=1e-12, atol=1e-14)
    # a step norm is a difference of iterates of size 1: rounding of 1e-16·‖θ‖ on each (on a GPU the
    # while and the scan program differed by 5e-15 at step norms of 1e-3)
    np.testing.assert_allclose(s[:n], fixed.history["step_norm"], rtol=1e-12, atol=1e-13)
    assert int(fixed.status) == Status.MAX_ITER  # no tol: the budget ran out
    z_n = float(np.sqrt(jnp.sum(res.theta**2) + jnp.sum(res.aux_coef**2)))
    # ‖Z_{n−1}‖ ≥ ‖Z_n‖ − s_{n−1} and ‖Z_{n−2}‖ ≤ ‖Z_n‖ + s_{n−1} + s_{n−2} (triangle inequality):
    assert s[n - 1] <= tol * max(1.0, z_n - s[n - 1])  # relative change below tol
    assert s[n - 2] > tol * max(1.0, z_n + s[n - 1] + s[n - 2])  # ... for the first time
    # fit passes tol through (at the same step: at lr=None it solves the problem on X/s)
    m = sdl.fit(X, y, 2, model="H", xi=1.0, lam=0.1, lr=step, max_iter=cap, tol=tol)
    assert int(m.n_iter) == n and np.all(np.isnan(np.asarray(m.history["loss"])[n:]))
    np.testing.assert_allclose(m.theta, res.theta, rtol=1e-12, atol=1e-14)
    # Where ‖Z‖ < 1 the rule is absolute, ‖Z_{t+1} − Z_t‖ ≤ tol (a rule relative to ‖Z_t‖ alone
    # stops later)
    small = sm.prepare(1e-3 * X, y, intercept=True)
    theta0, gamma0, _ = sdl.initial_point(small, 2, "H", jax.random.key(0))
    step = sm.step_bound(small, 1.0, 5.0, "H")
    res = sdl.lpgd(
        1e-3 * theta0, 1e-3 * gamma0, small, 1.0, 5.0, step, 2, model="H", max_iter=cap, tol=1e-5
    )
    n, s = int(res.n_iter), np.asarray(res.history["step_norm"])
    assert (
        2 < n < cap
        and float(np.sqrt(jnp.sum(res.theta**2) + jnp.sum(res.aux_coef**2))) + s[n - 2] < 1
    )
    assert s[n - 1] <= 1e-5 < s[n - 2]


@pytest.mark.parametrize("model", ["H", "W"])
def test_randomized_svd_gives_the_gram_iterate(model, x64):
    """θ − τ∇F has a large gap after σ_r (θ has rank r, the step is short), so the randomized range
    finder (r + 10 columns of 40, 4 power iterations) finds the same top-r subspace as the exact
    Gram eigendecomposition to near working precision, and 30 LPGD steps agree."""
    X, y, _ = generative(model, 60, 40, 3, seed=8, sigma=0.3)
    data = sm.prepare(X, y, intercept=True)
    theta0, gamma0, _ = sdl.initial_point(data, 3, model, jax.random.key(0))
    step = sm.step_bound(data, 1.0, 0.1, model)
    run = lambda svd: sdl.lpgd(
        theta0,
        gamma0,
        data,
        1.0,
        0.1,
        step,
        3,
        model=model,
        max_iter=30,
        tol=None,
        svd=svd,  # noqa
        key=jax.random.key(3),
    )
    gram, rand = run("gram"), run("randomized")
    np.testing.assert_allclose(
        rand.theta, gram.theta, rtol=0, atol=1e-9 * float(jnp.linalg.norm(gram.theta))
    )
    np.testing.assert_allclose(rand.aux_coef, gram.aux_coef, rtol=0, atol=1e-9)
    np.testing.assert_allclose(rand.history["loss"], gram.history["loss"], rtol=1e-10)


def test_labels_with_a_gap_need_num_classes():
    """Labels {0, 5} would silently create four empty classes: without num_classes that is an error
    naming them; with num_classes=6 it is allowed (κ = 5, six probability columns)."""
    X, y, _ = generative("H", 30, 20, 2)
    y5 = np.where(y == 1, 5, 0)
    with pytest.raises(ValueError, match=r"no sample has label 1, 2, 3, 4 .*num_classes=6"):
        sdl.fit(X, y5, 2)
    with pytest.raises(ValueError, match=r"no sample has label 1, 2, 3, 4 .*num_classes=6"):
        sdl.cross_validate(X, y5, 2, [1.0], [0.1], folds=2, max_iter=5)
    with pytest.raises(ValueError, match=r"no sample has label 0 "):
        sdl.fit(X, y + 1, 2)
    m = sdl.fit(X, y5, 2, num_classes=6, max_iter=50)
    assert m.kappa == 5
    P = np.asarray(sdl.predict_proba(m, X))
    assert P.shape == (20, 6)
    # The empty classes' logits only ever get pushed down (their gradient P_c + 2λA_c starts
    # positive): less probability than either observed class, on average over the samples.
    assert P[:, 1:5].mean(0).max() < min(P[:, 0].mean(), P[:, 5].mean())


@pytest.mark.parametrize("model", ["H", "W"])
@pytest.mark.parametrize("kappa", [1, 2])
def test_span_steps_are_the_dense_steps(model, kappa, x64):
    """LPGD in the span of [X, U₁] (sdl.span, the default when p ≥ 2(n + κ)) takes the same iterates
    as the dense θ: final (θ, γ), loss and step-norm histories to 1e-12, with covariates and an
    intercept, for a fixed number of steps and with a tolerance (same stopping step); and a vmap
    over (ξ, λ) equals the separate runs."""
    X, y, X_aux = generative(model, 200, 30, 3, kappa=kappa, seed=21, q=2)
    data = sm.prepare(X / np.sqrt(30), y, X_aux, intercept=True)
    assert sdl.resolve_span(None, data)
    theta0, gamma0, _ = sdl.initial_point(data, 3, model, jax.random.key(1))
    step = sm.step_bound(data, 1.0, 0.1, model)

    def run(span, **kw):
        return sdl.lpgd(theta0, gamma0, data, 1.0, 0.1, step, 3, model=model, span=span, **kw)

    for kw in ({"max_iter": 40, "tol": None}, {"max_iter": 2000, "tol": 1e-7}):
        dense, fast = run(False, **kw), run(True, **kw)
        assert int(fast.n_iter) == int(dense.n_iter)
        if "tol" in kw:
            assert 2 < int(dense.n_iter) < 2000
        scale = float(jnp.max(jnp.abs(dense.theta)))
        np.testing.assert_allclose(fast.theta, dense.theta, rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(fast.aux_coef, dense.aux_coef, rtol=0, atol=1e-12)
        assert int(fast.status) == int(dense.status)
        np.testing.assert_allclose(fast.history["loss"], dense.history["loss"], rtol=1e-12)
        np.testing.assert_allclose(fast.loss, dense.loss, rtol=1e-12)
        # ‖Z_{t+1} − Z_t‖ (down to 1e-6 here) is computed from the coordinates' Gram: rounding ~
        # ε‖θ‖.
        np.testing.assert_allclose(
            fast.history["step_norm"],
            dense.history["step_norm"],
            rtol=1e-9,
            atol=1e-12 * float(jnp.linalg.norm(dense.theta)),
        )
    # A tolerance met by the very first (dense) step: one step, histories padded after it.
    first = run(True, max_iter=30, tol=1e3)
    assert int(first.n_iter) == 1 and np.all(np.isnan(np.asarray(first.history["loss"])[1:]))
    assert int(first.status) == Status.CONVERGED and float(first.loss) == float(
        first.history["loss"][0]
    )
    np.testing.assert_allclose(
        first.theta, run(False, max_iter=1, tol=None).theta, rtol=0, atol=1e-12 * scale
    )
    # vmap over (ξ, λ) through the span path equals separate runs.
    xis, lams = jnp.asarray([0.5, 2.0]), jnp.asarray([0.05, 0.3])
    swept = jax.vmap(
        lambda xi, lam: (
            sdl.lpgd(
                theta0, gamma0, data, xi, lam, step / 4, 3, model=model, max_iter=15, span=True
            ).theta
        )
    )(xis, lams)
    for i in range(2):
        one = sdl.lpgd(
            theta0, gamma0, data, xis[i], lams[i], step / 4, 3, model=model, max_iter=15, span=False
        )
        np.testing.assert_allclose(swept[i], one.theta, rtol=0, atol=1e-12 * scale)


@pytest.mark.parametrize("model", ["H", "W"])
def test_lpgd_derivative_in_the_hyperparameters_span_equals_dense_equals_differences(model, x64):
    """d/d(ξ, λ) of ⟨C, θ_T⟩ after 8 LPGD steps: reverse mode through the span solver (first step's
    rank projection by gram_rank_factors, the rest by top_eigenspace), through the dense one and
    central differences agree."""
    X, y, _ = generative(model, 120, 16, 2, seed=4)
    data = sm.prepare(X / 4.0, y)
    theta0, gamma0, _ = sdl.initial_point(data, 2, model, jax.random.key(2))
    step = sm.step_bound(data, 1.0, 0.1, model)
    C = jnp.asarray(np.random.default_rng(0).standard_normal(theta0.shape))

    def value(hyper, span):
        out = sdl.lpgd(
            theta0,
            gamma0,
            data,
            hyper[0],
            hyper[1],
            step,
            2,
            model=model,
            max_iter=8,
            tol=None,
            span=span,
        )
        return jnp.sum(C * out.theta)

    hyper = jnp.asarray([1.0, 0.1])
    g_span = jax.jit(jax.grad(lambda h: value(h, True)))(hyper)
    g_dense = jax.jit(jax.grad(lambda h: value(h, False)))(hyper)
    h = 1e-6
    fd = [
        (value(hyper.at[i].add(h), False) - value(hyper.at[i].add(-h), False)) / (2 * h)
        for i in range(2)
    ]
    assert float(jnp.max(jnp.abs(g_dense))) > 1e-3
    np.testing.assert_allclose(g_span, g_dense, rtol=1e-8)
    np.testing.assert_allclose(g_dense, fd, rtol=1e-6, atol=1e-6 * float(jnp.max(jnp.abs(g_dense))))


def test_span_needs_the_gram_projection():
    X, y, _ = generative("H", 200, 20, 2)
    data = sm.prepare(X, y)
    theta0, gamma0, _ = sdl.initial_point(data, 2, "H", jax.random.key(0))
    for kw in ({"svd": "exact"}, {"project": lambda t: t}):
        with pytest.raises(ValueError, match="span=True needs svd='gram' and project=None"):
            sdl.lpgd(theta0, gamma0, data, 1.0, 0.1, 0.1, 2, model="H", max_iter=3, span=True, **kw)
    small = sm.prepare(X[:, :30], y)  # p = 30 < 2(n + κ): the dense steps by default
    assert not sdl.resolve_span(None, small) and sdl.resolve_span(None, data)


@pytest.mark.parametrize("model", ["H", "W"])
def test_the_span_iteration_starts_after_the_dense_first_step(model):
    """On the span path lpgd_iteration takes the first (dense) step when it is built: its state is
    Z₁ in span coordinates, and lpgd's budget k is the iteration run k − 1 times from start=1, its
    result counting the first step (n_iter, the history's first row). A run cut in two ends where
    the whole run does; with tol, the stop is lpgd's. (The iteration's first step runs eagerly,
    lpgd's compiled: float32 rounding apart.)"""
    from lowrank_jax import loop

    def close(a, b):
        b = np.asarray(b)
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.nanmax(np.abs(b)))

    _, data, theta0, gamma0, _ = _small_problem(200, model=model)
    assert sdl.resolve_span(None, data)
    args = (theta0, gamma0, data, 1.0, 0.1, None, 2)
    for tol, budget in ((None, 12), (1e-3, 400)):
        ref = sdl.lpgd(*args, model=model, tol=tol, max_iter=budget)
        it = sdl.lpgd_iteration(*args, model=model, tol=tol)
        out = it.result(loop.run(it, max_iter=budget - 1, start=1))
        assert int(out.status) == int(ref.status) and int(out.n_iter) == int(ref.n_iter)
        assert (int(out.status) == Status.CONVERGED) == (tol is not None)
        close(out.theta, ref.theta)
        close(out.aux_coef, ref.aux_coef)
        np.testing.assert_array_equal(np.isnan(out.history["loss"]), np.isnan(ref.history["loss"]))
        close(np.nan_to_num(out.history["loss"]), np.nan_to_num(ref.history["loss"]))
    k = int(ref.n_iter) // 2
    first = loop.run(it._replace(stop=None), max_iter=k - 1, start=1)
    rest = loop.run(it._replace(state=first.state), max_iter=budget - k, start=k)
    whole = it.result(rest)
    assert int(rest.n_iter) + k == int(ref.n_iter)
    close(whole.theta, ref.theta)


def test_span_steps_keep_the_loss_and_step_norms_in_float32_on_unscaled_data():
    """Entries ~1e3 in float32 (p ≥ 2(n + κ): the span path). Norms as Gram quadratic forms
    cancelled down to a few digits: the loss history was off by 0.1 % (rising at half the steps)
    and SDL-H's step norms came out NaN. Through the triangular factor of [X, U] both follow the
    dense steps."""
    rng = np.random.default_rng(5)
    X = (1000 + 50 * rng.standard_normal((600, 20)) * rng.random((600, 1))).astype(np.float32).T
    y = np.arange(20) % 2
    kw = dict(xi=1.0, lam=0.1, max_iter=60, tol=None)
    for model in "HW":
        span = sdl.fit(X, y, 3, model=model, **kw)
        dense = sdl.fit(X, y, 3, model=model, project=lambda t: t, **kw)
        np.testing.assert_allclose(
            np.asarray(span.history["loss"]), np.asarray(dense.history["loss"]), rtol=5e-5
        )
    data = sm.prepare(X, y, None, intercept=True)
    theta0, gamma0, _ = sdl.initial_point(data, 3, "H", jax.random.key(0))
    run = sdl.lpgd(
        theta0,
        gamma0,
        data,
        1.0,
        0.1,
        sm.step_bound(data, 1.0, 0.1, "H"),
        3,
        model="H",
        max_iter=60,
        tol=None,
    )
    assert np.all(np.isfinite(np.asarray(run.history["step_norm"])))


def _small_problem(p=30, n=20, model="H"):
    """A float32 two-class problem with an intercept and its default starting point; X (n, p)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(p, n)).astype(np.float32).T
    data = sm.prepare(X, np.arange(n) % 2, intercept=True)
    theta0, gamma0, f0 = sdl.initial_point(data, 2, model, jax.random.key(0))
    return X, data, theta0, gamma0, f0


@pytest.mark.parametrize("p", [30, 200])  # the dense steps, and the span path (p ≥ 2(n + κ))
def test_lpgd_lr_none_is_the_safe_bound(p):
    """lpgd(lr=None) is the safe bound 1/L̄, as in fit, on the dense and the span path (None handed
    on to optax.sgd would mean 'no scaling', an ascent step)."""
    _, data, theta0, gamma0, _ = _small_problem(p)
    auto = sdl.lpgd(theta0, gamma0, data, 1.0, 0.1, None, 2, model="H", max_iter=4)
    safe = sdl.lpgd(
        theta0, gamma0, data, 1.0, 0.1, sm.step_bound(data, 1.0, 0.1, "H"), 2, model="H", max_iter=4
    )
    np.testing.assert_array_equal(np.asarray(auto.theta), np.asarray(safe.theta))
    loss = np.asarray(auto.history["loss"])
    # a descent method
    assert np.all(np.diff(loss) <= 1e-6 * np.abs(loss[1:])) and loss[-1] < loss[0]


def _bad_solver_calls():
    """(call on (data, θ₀, γ₀, factors₀), the argument its error must name)."""
    ok = dict(model="H", max_iter=3)

    def lp(theta0, gamma0, data, xi=1.0, lam=0.1, lr=0.1, **kw):
        return sdl.lpgd(theta0, gamma0, data, xi, lam, lr, 2, **(ok | kw))

    def bc(f0, gamma0, data, xi=1.0, lam=0.1, **kw):
        return sdl.bcd(f0, gamma0, data, xi, lam, **(ok | kw))

    return [
        (lambda d, t, g, f: lp(t, g, d, xi=-1.0), "xi must be non-negative"),
        (lambda d, t, g, f: lp(t, g, d, lam=-0.1), "lam must be non-negative"),
        (lambda d, t, g, f: lp(t, g, d, lr=float("nan")), "lr has non-finite"),
        (lambda d, t, g, f: lp(t, g, d, lr=0.0), "lr must be positive"),
        (lambda d, t, g, f: lp(t, g, d, lr=jnp.array([0.1, 0.2])), "lr must have 0 dimension"),
        (lambda d, t, g, f: lp(t, g, d, tol=-1.0), "tol must be positive"),
        (lambda d, t, g, f: lp(t, g, d, max_iter=0), "max_iter"),
        (lambda d, t, g, f: lp(t[:-1], g, d), r"theta0 must have shape \(31, 20\)"),
        (lambda d, t, g, f: lp(t.at[0, 0].set(jnp.nan), g, d), "theta0 has non-finite"),
        (lambda d, t, g, f: lp(t, g, d, model="W"), "theta0 .*SDL-H's layout"),
        (
            lambda d, t, g, f: lp(t, g.T.repeat(2, 0), d),
            r"aux_coef0 must have shape \(q, κ\) = \(1, 1\)",
        ),
        (lambda d, t, g, f: lp(t, g[:0], d), "aux_coef0 must have shape"),
        (lambda d, t, g, f: lp(t, g, d, project="ball"), "project must be a function"),
        (lambda d, t, g, f: bc(f, g, d, xi=-1.0), "xi must be non-negative"),
        (lambda d, t, g, f: bc(f, g, d, lam=np.nan), "lam has non-finite"),
        (lambda d, t, g, f: bc(f, g, d, inner_iters=0), "inner_iters must be an integer >= 1"),
        (lambda d, t, g, f: bc(f, g, d, max_iter=0), "max_iter must be an integer >= 1"),
        (
            lambda d, t, g, f: bc(f._replace(H=f.H[:, :-1]), g, d),
            r"factors0 must have .*H \(2, 19\)",
        ),
        (lambda d, t, g, f: bc(f._replace(coef=f.coef[:1]), g, d), "factors0 must have"),
        (lambda d, t, g, f: bc(f[:2], g, d), "factors0 must be Factors"),
        (lambda d, t, g, f: bc(f, g[:0], d), "aux_coef0 must have shape"),
    ]


@pytest.mark.parametrize("case", range(len(_bad_solver_calls())))
def test_lpgd_and_bcd_name_bad_arguments(case):
    """lpgd and bcd checked none of their inputs: ξ < 0 (F unbounded below) ran to a negative loss,
    a NaN step ran to NaN, a mis-shaped θ₀/γ₀ or factors₀ (or an SDL-H θ₀ with model="W") failed
    with a TypeError from inside the traced step, inner_iters = 0 was a silent no-op. They refuse
    each by name, through the checks fit uses."""
    call, match = _bad_solver_calls()[case]
    _, data, theta0, gamma0, f0 = _small_problem()
    with pytest.raises(ValueError, match=match):
        call(data, theta0, gamma0, f0)


def test_lpgd_and_bcd_accept_traced_hyperparameters():
    """The new checks look only at the shape of a traced ξ, λ or τ: a vmap over (ξ, λ) through lpgd
    and bcd still equals the separate runs."""
    _, data, theta0, gamma0, f0 = _small_problem()
    xis, lams = jnp.asarray([0.5, 2.0]), jnp.asarray([0.05, 0.3])
    lp = jax.vmap(
        lambda xi, lam: (
            sdl.lpgd(theta0, gamma0, data, xi, lam, None, 2, model="H", max_iter=3).theta
        )
    )
    bc = jax.vmap(
        lambda xi, lam: sdl.bcd(f0, gamma0, data, xi, lam, model="H", max_iter=3).history["loss"]
    )
    swept_lp, swept_bc = lp(xis, lams), bc(xis, lams)
    for i in range(2):
        one = sdl.lpgd(theta0, gamma0, data, xis[i], lams[i], None, 2, model="H", max_iter=3).theta
        np.testing.assert_allclose(swept_lp[i], one, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(
            swept_bc[i],
            sdl.bcd(f0, gamma0, data, xis[i], lams[i], model="H", max_iter=3).history["loss"],
            rtol=1e-5,
        )


def test_rank_as_a_0d_integer_array():
    """A rank given as np.array(2) or jnp.int32(2) was refused ("rank must be an integer, got
    array(2)"), and cross_validate added its folds hint ("use fewer folds or a lower rank") to that
    type error and to a bad model; the hint is now only for a rank out of a fold's range."""
    X, data, *_ = _small_problem()
    y = np.arange(20) % 2
    ref = sdl.fit(X, y, 2, max_iter=3)
    for rank in (np.array(2), jnp.int32(2), np.int64(2)):
        m = sdl.fit(X, y, rank, max_iter=3)
        assert m.rank == 2
        np.testing.assert_array_equal(np.asarray(m.theta), np.asarray(ref.theta))
        assert sm.check_rank_for(rank, "W", 30, 20, 1) == 2
    acc, _ = sdl.cross_validate(X, y, np.array(2), [1.0], [0.1], folds=2, max_iter=2)
    assert acc.shape == (1, 1)
    for rank, model, match in [
        (2.5, "H", "rank must be an integer"),
        (True, "H", "rank must be an integer"),
        (2, "Z", "model must be"),
    ]:
        with pytest.raises(ValueError, match=match) as err:
            sdl.cross_validate(X, y, rank, [1.0], [0.1], model=model, folds=2, max_iter=2)
        assert "fewer folds" not in str(err.value)
    with pytest.raises(ValueError, match="each fit sees 10 of the 20 samples.*fewer folds"):
        sdl.cross_validate(X, y, np.array(12), [1.0], [0.1], folds=2, max_iter=2)


def test_num_classes_as_a_0d_integer_array():
    """num_classes=np.array(3) was refused as not an integer (the check lives in
    lowrank_jax._checks.class_labels); it is the number 3."""
    X, *_ = _small_problem()
    y = np.arange(20) % 2
    m = sdl.fit(X, y, 2, num_classes=np.array(3), max_iter=3)
    assert m.kappa == 2 and sdl.predict_proba(m, X).shape == (20, 3)


def test_an_empty_x_aux_is_no_covariates():
    """SDLData documents q = 0 and every solver handles it (it is what X_aux=None builds): an
    explicit (n, 0) X_aux fits, predicts and cross-validates as X_aux=None; an (n', 0) matrix of
    the wrong height is refused."""
    X, *_ = _small_problem()
    y = np.arange(20) % 2
    for solver in ("lpgd", "bcd"):
        none = sdl.fit(X, y, 2, max_iter=3, solver=solver)
        empty = sdl.fit(X, y, 2, max_iter=3, solver=solver, X_aux=np.zeros((20, 0), np.float32))
        np.testing.assert_array_equal(np.asarray(empty.theta), np.asarray(none.theta))
        np.testing.assert_array_equal(
            np.asarray(sdl.predict_proba(empty, X, np.zeros((20, 0)))),
            np.asarray(sdl.predict_proba(none, X)),
        )
    no_aux = sdl.fit(X, y, 2, max_iter=3, intercept=False, X_aux=np.zeros((20, 0)))
    assert no_aux.aux_coef.shape == (0, 1)
    acc, _ = sdl.cross_validate(X, y, 2, [1.0], [0.1], folds=2, max_iter=2, X_aux=np.zeros((20, 0)))
    assert np.isfinite(acc).all()
    with pytest.raises(ValueError, match="X_aux must have one row per sample"):
        sdl.fit(X, y, 2, max_iter=3, X_aux=np.zeros((19, 0)))
    with pytest.raises(ValueError, match="X_aux_new is required"):
        sdl.predict(sdl.fit(X, y, 2, max_iter=3, X_aux=np.ones((20, 1))), X, np.zeros((20, 0)))


def test_bcd_records_no_lr_and_divergence_messages_fit_the_run(monkeypatch):
    """BCD uses no single step size: a BCD fit records lr = NaN, and a diverged fit's message
    advises only what applies to the run (BCD and an LPGD fit at the default safe bound: rescale X;
    an LPGD fit with a given lr: lower it or leave lr=None)."""
    X, *_ = _small_problem()
    y = np.arange(20) % 2
    assert np.isnan(float(sdl.fit(X, y, 2, max_iter=3, solver="bcd").lr))
    assert float(sdl.fit(X, y, 2, max_iter=3).lr) > 0
    solvers = importlib.import_module("lowrank_jax.sdl.solvers")
    real_bcd, real_lpgd = solvers._bcd, solvers._lpgd
    # Runs that report DIVERGED whatever the solver: the message is chosen by what ran.
    failed = lambda res: dataclasses.replace(res, status=jnp.asarray(Status.DIVERGED, jnp.int32))  # noqa: E731
    monkeypatch.setattr(solvers, "_bcd", lambda *a, **k: failed(real_bcd(*a, **k)))
    monkeypatch.setattr(solvers, "_lpgd", lambda *a, **k: failed(real_lpgd(*a, **k)))
    with pytest.raises(RuntimeError, match="solver='bcd'.*rescale X") as err:
        sdl.fit(X, y, 2, max_iter=3, solver="bcd")
    assert "lr=None" not in str(err.value)
    with pytest.raises(RuntimeError, match="safe step bound: rescale X") as err:
        sdl.fit(X, y, 2, max_iter=3)
    assert "lr=None" not in str(err.value)
    with pytest.raises(RuntimeError, match="lr is too large.*leave lr=None"):
        sdl.fit(X, y, 2, max_iter=3, lr=0.01)
    assert int(sdl.fit(X, y, 2, max_iter=3, lr=0.01, throw=False).status) == Status.DIVERGED


def test_lpgd_and_bcd_raise_on_divergence_like_fit(monkeypatch):
    """A step far too large (lr = 50 on a 12 × 50 Gaussian X) makes LPGD diverge: sdl.lpgd and
    sdl.fit raise RuntimeError with the same message, called directly and inside jit; with
    throw=False the run reports Status.DIVERGED, and a vmapped sweep over the step keeps its good
    point, equal to its single run. BCD, whose steps follow the data, diverges on data whose
    squares overflow: refused by the scale check when concrete, DIVERGED (or the error) when
    traced."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 12)).T, np.array([0, 1] * 6)
    data = sdl.prepare(X, y)
    th0, g0, f0 = sdl.initial_point(data, 2, "H", 0)
    with pytest.raises(RuntimeError, match="SDL-H diverged.*lr is too large.*leave lr=None"):
        sdl.lpgd(th0, g0, data, 1.0, 0.1, 50.0, 2, model="H", max_iter=200)
    with pytest.raises(RuntimeError, match="lr is too large"):
        sdl.fit(X, y, 2, xi=1.0, lam=0.1, lr=50.0, max_iter=200, intercept=False)
    with pytest.raises(RuntimeError, match="lr is too large"):
        jax.block_until_ready(
            jax.jit(
                lambda t: sdl.lpgd(th0, g0, data, 1.0, 0.1, t, 2, model="H", max_iter=200).theta
            )(50.0)
        )
    fixed = dict(model="H", max_iter=200, tol=None)
    out = sdl.lpgd(th0, g0, data, 1.0, 0.1, 50.0, 2, throw=False, **fixed)
    # a fixed count runs to its end
    assert int(out.status) == Status.DIVERGED and int(out.n_iter) == 200
    lrs = jnp.array([0.1, 50.0])
    swept = jax.jit(
        jax.vmap(lambda t: sdl.lpgd(th0, g0, data, 1.0, 0.1, t, 2, throw=False, **fixed))
    )(lrs)
    assert np.asarray(swept.status).tolist() == [Status.MAX_ITER, Status.DIVERGED]
    assert (
        np.isfinite(np.asarray(swept.theta[0])).all()
        and not np.isfinite(np.asarray(swept.theta[1])).all()
    )
    np.testing.assert_allclose(
        swept.theta[0],
        sdl.lpgd(th0, g0, data, 1.0, 0.1, 0.1, 2, **fixed).theta,
        rtol=1e-4,
        atol=1e-5,
    )
    # BCD on SDL-W, X scaled past the float32 sums of squares' range.
    fw = sdl.initial_point(data, 2, "W", 0)[2]
    with pytest.raises(ValueError, match="rescale X"):
        sdl.prepare(X * 1e20, y)

    def bcd(scale, throw):
        return sdl.bcd(
            fw, g0, sdl.prepare(X * scale, y), 1.0, 0.1, model="W", max_iter=3, throw=throw
        )

    with pytest.raises(RuntimeError, match="SDL-W diverged.*solver='bcd'.*rescale X"):
        jax.block_until_ready(jax.jit(lambda s: bcd(s, True).factors.W)(1e20))
    traced = jax.jit(lambda s: bcd(s, False))(1e20)
    assert int(traced.status) == Status.DIVERGED and not np.isfinite(float(traced.loss))
    assert int(jax.jit(lambda s: bcd(s, False))(1.0).status) == Status.MAX_ITER
    solvers = importlib.import_module("lowrank_jax.sdl.solvers")
    real_lpgd = solvers._lpgd
    monkeypatch.setattr(
        solvers,
        "_lpgd",
        lambda *a, **k: dataclasses.replace(
            real_lpgd(*a, **k), status=jnp.asarray(Status.DIVERGED, jnp.int32)
        ),
    )
    with pytest.raises(RuntimeError, match="safe step bound: rescale X"):
        sdl.lpgd(th0, g0, data, 1.0, 0.1, None, 2, model="H", max_iter=3)


def test_a_growing_objective_stops_lpgd_before_it_overflows():
    """Divergence is judged on the iterate: non-finite, or F(Z_t) beyond 10⁴ F(Z_0) (LPGD descends
    at the safe step). Ten times the safe step diverges geometrically; with tol the run stops as
    soon as F passed the bound, DIVERGED, with a finite iterate and every earlier F below the
    bound."""
    _, data, theta0, gamma0, _ = _small_problem()
    step = 10 * float(sm.step_bound(data, 1.0, 0.1, "H"))
    out = sdl.lpgd(
        theta0, gamma0, data, 1.0, 0.1, step, 2, model="H", max_iter=500, tol=1e-6, throw=False
    )
    n, loss = int(out.n_iter), np.asarray(out.history["loss"])
    assert int(out.status) == Status.DIVERGED and 1 < n < 500
    assert (
        np.isfinite(np.asarray(out.theta)).all()
        and np.isfinite(loss[:n]).all()
        and np.isnan(loss[n:]).all()
    )
    assert loss[n - 1] > 1e4 * loss[0] and np.all(loss[: n - 1] <= 1e4 * loss[0])
    assert float(out.loss) == loss[n - 1]


def test_traced_hyperparameters_out_of_range_are_invalid():
    """A traced ξ or λ below 0 (or a τ, tol ≤ 0) cannot raise at the boundary: the run reports
    Status.INVALID with NaN parameters, the sweep's other point is its single run, and with
    throw=True the run raises inside jit naming the range."""
    X, data, theta0, gamma0, f0 = _small_problem()
    y = np.arange(20) % 2
    runs = {
        "lpgd": lambda lam, t: sdl.lpgd(
            theta0, gamma0, data, 1.0, lam, None, 2, model="H", max_iter=5, tol=None, throw=t
        ),
        "bcd": lambda lam, t: sdl.bcd(f0, gamma0, data, 1.0, lam, model="H", max_iter=5, throw=t),
        "fit": lambda lam, t: sdl.fit(X, y, 2, lam=lam, max_iter=5, tol=None, throw=t),
    }
    for name, run in runs.items():
        swept = jax.vmap(lambda lam, run=run: run(lam, False))(jnp.array([0.1, -1.0], jnp.float32))
        assert np.asarray(swept.status).tolist() == [Status.MAX_ITER, Status.INVALID], name
        assert (
            np.isnan(np.asarray(swept.aux_coef[1])).all()
            and np.isfinite(np.asarray(swept.aux_coef[0])).all()
        ), name
        np.testing.assert_allclose(swept.aux_coef[0], run(0.1, True).aux_coef, rtol=1e-5, atol=1e-6)
        with pytest.raises(RuntimeError, match="out of range"):
            jax.block_until_ready(jax.jit(lambda lam, run=run: run(lam, True).aux_coef)(-1.0))

    def lpgd(lr, tol):
        return sdl.lpgd(
            theta0, gamma0, data, 1.0, 0.1, lr, 2, model="H", max_iter=5, tol=tol, throw=False
        )

    for res in (
        jax.jit(lambda tol: lpgd(None, tol))(-1.0),
        jax.jit(lambda lr: lpgd(lr, 1e-3))(0.0),
    ):
        assert int(res.status) == Status.INVALID and np.isnan(np.asarray(res.theta)).all()


def test_predicting_with_a_failed_fit_raises_unless_told_not_to():
    """predict_proba / predict refuse a model whose fit diverged (fitted with throw=False), and
    non-finite probabilities, with RuntimeError, also inside jit; throw=False returns them."""
    X, *_ = _small_problem()
    y = np.arange(20) % 2
    bad = sdl.fit(X, y, 2, lr=100.0, max_iter=30, throw=False)
    good = sdl.fit(X, y, 2, max_iter=30)
    assert int(bad.status) == Status.DIVERGED
    for call in (
        lambda m, t: sdl.predict_proba(m, X, throw=t),
        lambda m, t: sdl.predict(m, X, throw=t),
        lambda m, t: sdl.predict_proba(m, X, coding="supervised", throw=t),
    ):
        with pytest.raises(RuntimeError, match="fit diverged or was invalid"):
            call(bad, True)
        with pytest.raises(RuntimeError, match="fit diverged or was invalid"):
            jax.block_until_ready(jax.jit(lambda m, call=call: call(m, True))(bad))
        assert np.asarray(call(bad, False)).shape[0] == 20
        np.testing.assert_array_equal(np.asarray(call(good, True)), np.asarray(call(good, False)))
    # A model whose status reads fine but whose γ is NaN (edited by hand): the probabilities are
    # refused by name.
    broken = dataclasses.replace(good, aux_coef=jnp.full_like(good.aux_coef, jnp.nan))
    with pytest.raises(RuntimeError, match="non-finite class probabilities"):
        sdl.predict_proba(broken, X)
    with pytest.raises(RuntimeError, match="supervised coding gave non-finite class costs"):
        sdl.predict_proba(broken, X, coding="supervised")
    assert np.isnan(np.asarray(sdl.predict_proba(broken, X, throw=False))).all()


def test_x_aux_gets_xs_scale_check_and_a_non_finite_step_bound_is_not_a_step():
    """X_aux was never scale-checked: float32 covariates of 1e20 overflowed ‖X_aux‖²₂, step_bound
    returned 0.0 (1/inf) or 1.0 (a NaN bound read as 'F flat') and fit failed later with "diverged
    at the safe step bound 1". X_aux now gets X's check (fit, prepare, cross_validate, theory,
    predict's X_aux_new); a bound that overflows gives NaN from step_bound, never a step, and
    lr=None refuses it by name. The flat objective (bound 0) keeps step 1."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 10)).astype(np.float32).T, np.array([0, 1] * 5)
    huge = (1e20 * rng.normal(size=(1, 10))).astype(np.float32).T  # (n, q) = (10, 1)
    for call in (
        lambda: sdl.prepare(X, y, huge),
        lambda: sdl.fit(X, y, 2, X_aux=huge, max_iter=3),
        lambda: sdl.fit(X, y, 2, X_aux=huge, max_iter=3, intercept=False),
        lambda: sdl.cross_validate(X, y, 2, [1.0], [0.1], folds=2, max_iter=2, X_aux=huge),
        lambda: sdl.predict(sdl.fit(X, y, 2, X_aux=huge / 1e20, max_iter=3), X, huge),
    ):
        with pytest.raises(
            ValueError, match="X_aux(_new)?'s largest entry is 3.77e\\+20.*rescale X_aux"
        ):
            call()
    d = sm.prepare(X, y)
    # step_bound itself, on data built past the checks: both an inf and a NaN bound give NaN
    for Xa in (jnp.asarray(huge.T), jnp.concatenate([jnp.asarray(huge.T), jnp.ones((1, 10))])):
        raw = sm.SDLData(d.X, Xa, d.Y, jnp.ones(Xa.shape[0], jnp.float32))
        for model in ("H", "W"):
            assert np.isnan(float(sm.step_bound(raw, 1.0, 0.1, model))), (Xa.shape, model)
    assert np.isnan(float(sm.step_bound(d, jnp.float32(3e38), 0.1, "H")))  # 2ξ overflows float32
    with pytest.raises(
        ValueError, match="lr=None: the safe step 1/L̄ is undefined.*overflows float32"
    ):
        sdl.fit(X, y, 2, xi=3e38, max_iter=3)
    swept = jax.vmap(lambda xi: sm.step_bound(d, xi, 0.1, "H"))(jnp.array([1.0, 3e38], jnp.float32))
    assert float(swept[0]) == pytest.approx(1 / max(2.0, 0.2 + 0.25)) and np.isnan(float(swept[1]))
    flat = sm.prepare(np.zeros((10, 30), np.float32), y)
    assert float(sm.step_bound(flat, 0.0, 0.0, "W")) == 1.0


def test_theory_and_one_hot_name_bad_arguments():
    """theory with an X_aux of the wrong width raised NumPy's "all the input array dimensions except
    for the concatenation axis must match"; theory(0·X, 0, 0, model="W") raised ZeroDivisionError
    (L = 0: F is constant); one_hot([0, 1, 2], κ = 1) mapped label 2 to the reference class 0. Each
    is a ValueError saying what is wrong; one_hot keeps its values for labels in 0..κ, also
    traced."""
    X = np.random.default_rng(0).normal(size=(20, 10)).T
    with pytest.raises(
        ValueError,
        match=r"X_aux must have one row per sample, shape \(10, q\), got shape \(11, 1\)",
    ):
        sdl.theory(X, 1.0, 0.0, model="H", X_aux=np.ones((11, 1)))
    for X_aux in (None, np.zeros((10, 2))):
        with pytest.raises(ValueError, match="L = 0.*xi > 0 or lam > 0"):
            sdl.theory(0 * X, 0.0, 0.0, model="W", X_aux=X_aux)
    th = sdl.theory(0 * X, 0.0, 0.1, model="W")  # λ > 0: defined, and not well-conditioned
    assert th.L == pytest.approx(0.2) and th.mu == 0.0 and not th.holds
    for y, kappa, match in [
        ([0, 1, 2], 1, r"labels must be in 0, …, 1 \(2 classes\); got 2"),
        ([0, -1], 1, "got -1"),
        ([0, 1.5], 2, "non-integer"),
        ([0, 1], 0, "kappa"),
        ([[0, 1]], 1, "1-D"),
    ]:
        with pytest.raises(ValueError, match=match):
            sdl.one_hot(np.array(y), kappa)
    expected = [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]
    np.testing.assert_array_equal(sdl.one_hot(np.array([0, 2, 1]), 2), expected)
    np.testing.assert_array_equal(
        jax.jit(lambda v: sdl.one_hot(v, 2))(jnp.array([0, 2, 1])), expected
    )


def test_mf_lr_predict_names_x_new():
    """MFLR.predict of samples with a feature missing names X_new and the shape it needs (not an
    error from inside NumPy's matmul)."""
    X, y, _ = generative("H", 30, 20, 2)
    m = sdl.mf_lr(X, y, 2)
    for call in (m.predict, m.predict_proba):
        with pytest.raises(
            ValueError, match=r"X_new must have p = 30 columns .*got shape \(20, 29\)"
        ):
            call(X[:, :-1])
        with pytest.raises(ValueError, match="X_new has non-finite"):
            call(np.where(np.eye(20, 30) > 0, np.nan, X))
    np.testing.assert_array_equal(m.predict(X), m.predict_proba(X).argmax(1))


@pytest.mark.parametrize(
    "model, kappa, aux",
    [
        ("H", 1, False),
        ("H", 2, False),
        ("H", 3, True),
        ("W", 1, True),
        ("W", 2, True),
        ("W", 3, True),
    ],
)
def test_step_bound_is_the_hessians_peak_where_the_softmax_curvature_peaks(model, kappa, aux, x64):
    """1/step_bound = max(2ξ, 2λ + α⁺‖Φ‖²) must bound λ_max(∇²F) everywhere, and is reached where
    the label curvature is: at a = 0 for binary labels (α⁺ = ¼), and for κ ≥ 2 where two classes
    share the probability ½ (α⁺ = ½, the eigenvalue of diag(p) − ppᵀ along e₁ − e₂). Every sample
    is put there (by θ's A for SDL-H, by γ on a constant covariate otherwise): λ_max equals the
    bound to e⁻¹², so α⁺ = ¼ for κ ≥ 2 (a step twice 1/L) fails, and so would a bound that is not
    tight."""
    rng = np.random.default_rng(0)
    p, n = 3, 6
    X = rng.normal(size=(p, n)).T
    y = np.arange(n) % (kappa + 1)
    data = sm.prepare(X, y, np.ones((n, 1)) if aux else None, intercept=False)
    shape, q = sm.theta_shape(model, p, n, kappa), data.X_aux.shape[0]
    size = int(np.prod(shape))
    peak = np.zeros(kappa) if kappa == 1 else np.r_[12.0, 12.0, np.full(kappa - 2, -12.0)]
    theta, gamma = np.zeros(shape), np.zeros((q, kappa))
    if aux:
        gamma[0] = peak
    else:
        theta[:kappa] = peak[:, None]  # SDL-H: A is the activations
    xi, lam = 0.1, 0.05

    def F(v):
        return sm.objective(
            v[:size].reshape(shape), v[size:].reshape(q, kappa), data, xi, lam, model
        )

    top = np.linalg.eigvalsh(
        np.asarray(jax.jit(jax.hessian(F))(jnp.concatenate([theta.ravel(), gamma.ravel()])))
    )[-1]
    bound = 1.0 / float(sm.step_bound(data, xi, lam, model))
    assert bound > 2 * xi  # the label term sets the bound
    assert 1 - 1e-4 <= top / bound <= 1 + 1e-9, (top, bound)


@pytest.mark.parametrize("model", ["H", "W"])
def test_one_bcd_sweep_from_beta_zero_is_two_exact_least_squares_steps(model, x64):
    """With β = 0 the label and λ terms are flat in W and H, and at rank 1 a gradient step of length
    1/L with L_W = 2ξ‖H‖², L_H = 2ξ‖W‖² is the exact minimiser of ξ‖X − WH‖² in that block:
    W₁ = XH₀ᵀ/‖H₀‖², then H₁ = W₁ᵀX/‖W₁‖² (the sweep's order is W, H, β, γ). A Lipschitz constant
    off by a factor (ξ‖W‖²) still descends, so only this closed form pins it."""
    X, y, _ = generative(model, 7, 9, 1, seed=3)
    data = sm.prepare(X, y, None, intercept=False)
    rng = np.random.default_rng(4)
    f0 = sm.Factors(
        jnp.asarray(rng.normal(size=(7, 1))),
        jnp.asarray(rng.normal(size=(1, 9))),
        jnp.zeros((1, 1)),
    )
    out = sdl.bcd(f0, jnp.zeros((0, 1)), data, 0.7, 0.2, model=model, max_iter=1)
    Xp = X.T  # (p, n), the paper's layout
    W1 = Xp @ np.asarray(f0.H).T / np.sum(np.asarray(f0.H) ** 2)
    np.testing.assert_allclose(out.factors.W, W1, rtol=1e-10)
    np.testing.assert_allclose(out.factors.H, W1.T @ Xp / np.sum(W1**2), rtol=1e-10)


@pytest.mark.parametrize("model", ["H", "W"])
@pytest.mark.parametrize("init", ["svd", "random"])
def test_initial_beta_is_only_ever_scaled_down(model, init, x64):
    """β₀ is a U[−1, 1] draw divided by max(1, max|a₀|): activations within ±1, and on data whose
    raw activations are already small it is the draw itself (dividing by max|a₀| alone blew β₀ up to
    make every start's activations reach ±1)."""
    X, y, _ = generative(model, 12, 20, 3, seed=1)
    starts = {}
    for scale in (1.0, 1e-4, 1e-5):
        data = sm.prepare(scale * X, y, None, intercept=False)
        _, _, f0 = sdl.initial_point(data, 3, model, jax.random.key(2), init=init)
        a0 = f0.coef.T @ (f0.H if model == "H" else f0.W.T @ data.X)
        assert float(jnp.max(jnp.abs(a0))) <= 1 + 1e-12 and float(jnp.max(jnp.abs(f0.coef))) <= 1
        starts[scale] = f0.coef
    if model == "W" or init == "random":  # SDL-H's svd start H₀ = V_rᵀ does not shrink with X
        np.testing.assert_array_equal(starts[1e-4], starts[1e-5])


@pytest.mark.parametrize("model", ["H", "W"])
def test_one_bcd_sweep_steps_beta_and_gamma_by_their_lipschitz_bounds(model, x64):
    """After W and H, a sweep takes one gradient step on β of length 1/L_β (SDL-H (½ + 2λ)‖H‖²₂,
    SDL-W (½‖X‖²₂ + 2λ)‖W‖²₂), then one on γ of length 1/L_γ, L_γ = ½‖X_aux‖²₂ + 2λ: checked against
    autodiff of the factored objective at the sweep's own W₁, H₁ (a constant off by 2λ → λ still
    descends, so the descent tests cannot see it)."""
    xi, lam = 0.7, 0.3
    X, y, X_aux = generative(model, 9, 11, 2, kappa=2, seed=3, q=2)
    data = sm.prepare(X, y, X_aux, intercept=False)
    rng = np.random.default_rng(4)
    f0 = sm.Factors(*(jnp.asarray(rng.normal(size=s)) for s in ((9, 2), (2, 11), (2, 2))))
    g0 = jnp.asarray(rng.normal(size=(2, 2)))
    out = sdl.bcd(f0, g0, data, xi, lam, model=model, max_iter=1)
    W1, H1 = out.factors.W, out.factors.H
    sq = lambda M: np.linalg.norm(np.asarray(M), 2) ** 2  # noqa: E731
    grad = jax.grad(sdl.factored_objective, argnums=(0, 1))
    L_beta = (0.5 + 2 * lam) * sq(H1) if model == "H" else (0.5 * sq(data.X) + 2 * lam) * sq(W1)
    beta1 = f0.coef - grad(sm.Factors(W1, H1, f0.coef), g0, data, xi, lam, model)[0].coef / L_beta
    gamma1 = g0 - grad(sm.Factors(W1, H1, beta1), g0, data, xi, lam, model)[1] / (
        0.5 * sq(data.X_aux) + 2 * lam
    )
    assert (
        float(jnp.max(jnp.abs(beta1 - f0.coef))) > 0.01
        and float(jnp.max(jnp.abs(gamma1 - g0))) > 0.01
    )
    np.testing.assert_allclose(out.factors.coef, beta1, atol=1e-12)
    np.testing.assert_allclose(out.aux_coef, gamma1, atol=1e-12)


def test_a_projection_turns_the_default_span_steps_off(x64):
    """Wide data (p ≥ 2(n + κ)) take the span steps by default, which cannot apply a convex
    projection: with ``project`` the default is the dense step, and the iterate stays in the set."""
    X, y, _ = generative("H", 80, 20, 2, seed=5)
    data = sm.prepare(X, y, None, intercept=False)
    kw = dict(model="H", xi=1.0, lam=0.01, intercept=False, max_iter=3)
    norm_A = lambda m: float(jnp.linalg.norm(sm.split(m.theta, "H", 1)[0]))  # noqa: E731
    radius = 0.5 * norm_A(sdl.fit(X, y, 2, **kw))
    project = _a_block_ball("H", 1, radius)
    assert sdl.resolve_span(None, data) and not sdl.resolve_span(None, data, "gram", project)
    assert norm_A(sdl.fit(X, y, 2, project=project, **kw)) <= radius * (1 + 1e-12)


def test_cross_validation_progress_bar_counts_the_folds(recorded_bars):
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(20, 18)).T, np.array([0, 1] * 9)
    acc, best = sdl.cross_validate(X, y, 2, [0.1, 1.0], [0.1], folds=3, max_iter=20, progress=True)
    (bar,) = recorded_bars
    assert bar.total == 3 and bar.n == 3 and bar.closed
    np.testing.assert_array_equal(
        acc, sdl.cross_validate(X, y, 2, [0.1, 1.0], [0.1], folds=3, max_iter=20)[0]
    )
    with pytest.raises(ValueError, match="lower rank"):  # a fold that fails still closes its bar
        sdl.cross_validate(X, y, 15, [0.1], [0.1], folds=3, progress=True)
    assert recorded_bars[-1].closed and recorded_bars[-1].n == 0


@pytest.mark.parametrize("p", [50, 100])  # 100: the span representation (p >= 2(n + κ))
def test_fit_with_tol_is_differentiable_on_request(p, x64):
    """differentiable=True: LPGD's tolerance stop as a masked scan, so jax.grad passes it; same θ
    and count as the while_loop, and the gradient of the fixed-length fit of that many steps."""
    rng = np.random.default_rng(0)
    W, H = rng.normal(size=(p, 2)), rng.normal(size=(2, 30))
    y = (H[0] > 0).astype(int)
    X = ((W @ H + 0.1 * rng.normal(size=(p, 30))) / np.sqrt(p)).T
    data = sm.prepare(X, y, intercept=True)
    assert sdl.resolve_span(None, data) == (p == 100)
    plain = sdl.fit(X, y, 2, xi=1.0, lam=0.1, max_iter=400, tol=1e-6)
    masked = sdl.fit(X, y, 2, xi=1.0, lam=0.1, max_iter=400, tol=1e-6, differentiable=True)
    n = int(plain.n_iter)
    assert 0 < n < 400 and int(masked.n_iter) == n
    np.testing.assert_allclose(masked.theta, plain.theta, rtol=1e-12, atol=1e-12)

    def size(xi, **kw):
        return jnp.sum(sdl.fit(X, y, 2, xi=xi, lam=0.1, **kw).theta ** 2)

    g = jax.grad(lambda xi: size(xi, max_iter=400, tol=1e-6, differentiable=True))(1.0)
    np.testing.assert_allclose(
        g, jax.grad(lambda xi: size(xi, max_iter=n, tol=None))(1.0), rtol=1e-9
    )
    assert abs(float(g)) > 1e-3


@pytest.mark.parametrize("model", ["H", "W"])
def test_fit_at_the_safe_step_does_not_depend_on_the_units_of_X(model):
    """At lr=None fit solves the equivalent problem on X/s (s² the mean squared sample norm) and
    maps it back: X and 1000·X give the same predictions, B scaled by 1000 (SDL-W's A by 1/1000),
    and the same objective. On unscaled X the relative step tolerance used to stop LPGD after a few
    tiny safe steps."""
    X, y, _ = generative(model, 30, 20, 2, seed=15)
    X = np.asarray(X, np.float32)
    a = sdl.fit(X, y, 2, model=model, max_iter=200, tol=None)
    b = sdl.fit(1000 * X, y, 2, model=model, max_iter=200, tol=None)
    np.testing.assert_allclose(float(b.loss), float(a.loss), rtol=1e-3)
    A_a, B_a = sm.split(a.theta, model, 1)
    A_b, B_b = sm.split(b.theta, model, 1)
    np.testing.assert_allclose(B_b, 1000 * B_a, rtol=2e-3, atol=2e-3 * float(jnp.abs(B_b).max()))
    scale = 1.0 if model == "H" else 1e-3
    np.testing.assert_allclose(A_b, scale * A_a, rtol=2e-3, atol=2e-3 * float(jnp.abs(A_b).max()))
    np.testing.assert_array_equal(sdl.predict(b, 1000 * X), sdl.predict(a, X))
