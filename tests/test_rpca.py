"""Robust PCA solvers: recovery, the no-false-positive property, vmap/grad/jit behaviour, bad
input."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lowrank_jax import Status, datasets, prox, rpca
from lowrank_jax.rpca import learned as lrpca_module


@pytest.fixture(scope="module")
def problem64():
    """The acceptance instance: n = 500, r = 5, α = 0.1, float64."""
    with jax.enable_x64(True):
        yield datasets.rpca_problem(jax.random.key(0), 500, 500, 5, 0.1, dtype=jnp.float64)


def test_oracle_lrpca_recovers_with_no_false_positives(problem64, x64):
    p = problem64
    K = 60
    zeta = rpca.oracle_thresholds(p.Y, 5, p.X, K, 0.5)
    out = rpca.lrpca(p.Y, 5, zeta, jnp.full(K, 0.5), X_star=p.X, support=p.S != 0)
    assert int(out.status) == Status.MAX_ITER and int(out.n_iter) == K  # no tol: the K layers
    assert float(out.error) <= 1e-8
    # Theorem 1: supp(S_k) ⊆ supp(S⋆) at every layer ...
    fp = out.history["false_positives"]
    assert fp.shape == (K,) and int(fp.max()) == 0 and int(out.false_positives) == 0
    # ... and at the initialisation, S_0 = S_{ζ_0}(Y) with ζ_0 = ‖X⋆‖_∞: a run of no layers returns
    # it. Its support lies in supp(S⋆) (here it is empty: the outliers, U[−E|X⋆|, E|X⋆|], all sit
    # below ‖X⋆‖_∞); a lower ζ_0 gives a non-empty S_0, the soft threshold of Y exactly.
    init = rpca.lrpca(p.Y, 5, zeta[:1], jnp.zeros(0))
    assert not bool(jnp.any((init.S != 0) & (p.S == 0)))
    low = rpca.lrpca(p.Y, 5, 0.3 * zeta[:1], jnp.zeros(0))
    assert int(jnp.sum(low.S != 0)) > 1000
    np.testing.assert_array_equal(low.S, prox.soft_threshold(p.Y, 0.3 * zeta[0]))
    # The error decreases monotonically and linearly. (Theorem 1's rate 1 − 0.6η = 0.7 needs
    # α ≤ 1e-4/(μ r^1.5 κ), far below this α = 0.1; about 0.75 per layer is observed here.)
    err = np.asarray(out.history["error"])
    assert np.all(err[1:] < err[:-1])
    assert err[-1] / err[9] < 0.8 ** (K - 10)
    assert float(out.error) == err[-1]  # the final diagnostic is the last row
    # Returned pieces are consistent: X = L Rᵀ, and S is the last layer's soft threshold.
    np.testing.assert_allclose(out.X, out.L @ out.R.T, atol=1e-14)
    assert float(jnp.max(jnp.abs(out.S - p.S))) < 1e-8


def test_oracle_thresholds_reproduce_the_oracle_run(problem64, x64):
    """ζ from oracle_thresholds drives lrpca to exactly the theorem's schedule
    ζ_k = ‖X_{k−1} − X⋆‖_∞."""
    p = problem64
    zeta = rpca.oracle_thresholds(p.Y, 5, p.X, 8, 0.5)
    np.testing.assert_allclose(zeta[0], jnp.max(jnp.abs(p.X)))
    # ζ_k equals ‖X_{k−1} − X⋆‖_∞ of the run with K = k − 1 layers.
    for k in (1, 3, 6):
        prev = rpca.lrpca(p.Y, 5, zeta[:k], jnp.full(k - 1, 0.5))
        np.testing.assert_allclose(zeta[k], jnp.max(jnp.abs(prev.X - p.X)), rtol=1e-10)


def test_rms_oracle_recovers_where_the_theorem_oracle_stalls():
    """At α = 0.5 (outliers U[−mean|X⋆|, mean|X⋆|]) Theorem 1's ζ_k = ‖X_{k−1} − X⋆‖_∞ leaves a
    bias ±ζ_k on every outlier entry that outweighs the clean entries' pull: the run stalls at a
    few percent. ζ_k = 2·rms(X_{k−1} − X⋆) with η = 1/(1 − α) converges linearly."""
    n, r, alpha, K = 300, 3, 0.5, 80
    p = datasets.rpca_problem(jax.random.key(1), n, n, r, alpha)
    eta = 1.0 / (1.0 - alpha)
    z_rms = rpca.oracle_thresholds(p.Y, r, p.X, K, eta, rule="rms", scale=2.0)
    err_rms = np.asarray(rpca.lrpca(p.Y, r, z_rms, jnp.full(K, eta), X_star=p.X).history["error"])
    z_max = rpca.oracle_thresholds(p.Y, r, p.X, K, 0.5)
    err_max = np.asarray(rpca.lrpca(p.Y, r, z_max, jnp.full(K, 0.5), X_star=p.X).history["error"])
    assert err_rms[-1] < 1e-5
    assert err_max[-1] > 1e-2 and err_max[-1] > 0.9 * err_max[39]  # stalled, not slow
    # The rule itself: ζ_k = c‖X_{k−1} − X⋆‖_F/n along the run (reproduced by lrpca).
    for k in (1, 5, 20):
        prev = rpca.lrpca(p.Y, r, z_rms[:k], jnp.full(k - 1, eta))
        rms = jnp.linalg.norm(prev.X - p.X) / n
        np.testing.assert_allclose(z_rms[k], 2.0 * rms, rtol=1e-4)


def test_scaledgd_and_altproj_recover_the_same_instance(problem64, x64):
    p = problem64
    sgd = rpca.scaledgd(p.Y, 5, 0.1, tol=None, max_iter=150, X_star=p.X)
    assert float(sgd.error) <= 1e-6
    alt = rpca.altproj(p.Y, 5, X_star=p.X, tol=1e-9)
    assert int(alt.n_iter) < 500 and int(alt.status) == Status.CONVERGED
    assert float(jnp.linalg.norm(alt.X - p.X) / jnp.linalg.norm(p.X)) <= 1e-6
    assert float(jnp.linalg.norm(alt.S - p.S) / jnp.linalg.norm(p.S)) <= 1e-4


def test_lrpca_hand_set_schedule_converges_in_float32():
    p = datasets.rpca_problem(jax.random.key(1), 300, 300, 3, 0.1)
    K = 40
    zeta0 = float(jnp.max(jnp.abs(p.Y)))
    zeta = zeta0 * 0.1 * 0.8 ** jnp.arange(K + 1)
    zeta = zeta.at[0].set(zeta0 * 0.3)
    out = rpca.lrpca(p.Y, 3, zeta, jnp.full(K, 0.6), X_star=p.X)
    assert float(out.error) < 1e-4


def test_lrpca_step_is_the_simultaneous_update_of_eq_9(x64):
    """One layer against NumPy: E = −clip(Y − LRᵀ, ±ζ), L⁺ = L − ηER(RᵀR)⁻¹ and R⁺ = R −
    ηEᵀL(LᵀL)⁻¹, both from the old L and R (the note's reading of the garbled line 9), not R⁺ from
    L⁺."""
    rng = np.random.default_rng(3)
    Y, L, R = (
        rng.standard_normal((30, 20)),
        rng.standard_normal((30, 3)),
        rng.standard_normal((20, 3)),
    )
    zeta, eta = 0.5, 0.4
    E = -np.clip(Y - L @ R.T, -zeta, zeta)
    L_new = L - eta * E @ R @ np.linalg.inv(R.T @ R)
    R_new = R - eta * E.T @ L @ np.linalg.inv(L.T @ L)
    got_L, got_R, stats = rpca.lrpca_step(*(jnp.asarray(a) for a in (Y, L, R)), zeta, eta)
    np.testing.assert_allclose(got_L, L_new, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got_R, R_new, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(stats["sq"], np.sum(E**2), rtol=1e-12)
    sequential = R - eta * E.T @ L_new @ np.linalg.inv(L_new.T @ L_new)
    assert np.max(np.abs(sequential - R_new)) > 1e-2


def test_frmnn_equals_explicit_continuation(x64):
    p = datasets.rpca_problem(jax.random.key(2), 120, 100, 3, 0.1, dtype=jnp.float64)
    K, total = 4, 12
    zeta = rpca.oracle_thresholds(p.Y, 3, p.X, K, 0.5)
    eta = jnp.linspace(0.7, 0.5, K)
    beta, phi = 0.9, 0.7  # β ≠ 1, so the η continuation η_K β^{k−K} is checked too
    cont = rpca.lrpca(p.Y, 3, zeta, eta, beta=beta, phi=phi, max_iter=total)
    k = jnp.arange(1, total - K + 1)
    zeta_long = jnp.concatenate([zeta, zeta[-1] * phi**k])
    eta_long = jnp.concatenate([eta, eta[-1] * beta**k])
    explicit = rpca.lrpca(p.Y, 3, zeta_long, eta_long)
    np.testing.assert_allclose(cont.X, explicit.X, rtol=1e-12, atol=1e-15)
    assert int(cont.n_iter) == total


def test_a_long_frmnn_run_stays_frozen_where_beta_power_overflows():
    """Float32, β = 1.7, φ = 0.4 (the shipped α = 0.1 model's): ζ_K φ^p underflows to 0 near p ≈
    100, so S takes the residual, E = 0 and the iterate freezes; η_K β^p overflowed near p ≈ 170 and
    ∞ · 0 turned the frozen iterate into NaN (a FloatingPointError blaming β, NaN under jit). A
    layer with ζ = 0 now takes step 0 (any finite η gives the same); the earlier steps are as
    before, and a β that overflows the steps while ζ > 0 still raises (test_multidevice)."""
    p = datasets.rpca_problem(jax.random.key(0), 60, 50, 2, 0.1)
    zeta = rpca.oracle_thresholds(p.Y, 2, p.X, 4, 0.5)
    eta = jnp.full(4, 0.5)
    out = rpca.lrpca(p.Y, 2, zeta, eta, beta=1.7, phi=0.4, max_iter=260, X_star=p.X)
    assert int(out.status) == Status.MAX_ITER
    err = np.asarray(out.history["error"])
    assert np.all(np.isfinite(err)) and np.all(np.isfinite(np.asarray(out.X)))
    assert np.all(err[150:] == err[150])  # frozen, as the thresholds are 0
    short = rpca.lrpca(p.Y, 2, zeta, eta, beta=1.7, phi=0.4, max_iter=154, X_star=p.X)
    np.testing.assert_array_equal(short.history["error"], err[:154])


def test_tolerance_stops_at_the_first_layer_below_tol(x64):
    p = datasets.rpca_problem(jax.random.key(3), 150, 150, 3, 0.1, dtype=jnp.float64)
    zeta = rpca.oracle_thresholds(p.Y, 3, p.X, 10, 0.5)
    eta = jnp.full(10, 0.5)
    full = rpca.lrpca(p.Y, 3, zeta, eta, beta=1.0, phi=0.8, max_iter=80)
    tol = 1e-6
    curve = np.asarray(full.history["residual"])
    first = int(np.argmax(curve < tol)) + 1
    stopped = rpca.lrpca(p.Y, 3, zeta, eta, beta=1.0, phi=0.8, tol=tol, max_iter=80)
    assert int(stopped.n_iter) == first and int(stopped.status) == Status.CONVERGED
    assert np.all(np.isnan(np.asarray(stopped.history["residual"][first:])))  # padding past n_iter
    np.testing.assert_allclose(stopped.history["residual"][:first], curve[:first], rtol=1e-12)
    np.testing.assert_allclose(stopped.residual, curve[first - 1], rtol=1e-12)  # the final one
    assert float(stopped.residual) < tol <= float(curve[first - 2])
    masked = rpca.lrpca(
        p.Y, 3, zeta, eta, beta=1.0, phi=0.8, tol=tol, max_iter=80, differentiable=True
    )
    assert int(masked.n_iter) == first and int(masked.status) == Status.CONVERGED
    np.testing.assert_allclose(masked.X, stopped.X, rtol=1e-12, atol=1e-15)


def test_vmap_over_instances_equals_separate_calls():
    keys = jax.random.split(jax.random.key(4), 4)
    probs = jax.vmap(lambda k: datasets.rpca_problem(k, 80, 60, 2, 0.1))(keys)
    zeta = jnp.concatenate([jnp.array([0.05]), 0.01 * 0.7 ** jnp.arange(15)])
    eta = jnp.full(15, 0.5)
    batched = jax.vmap(lambda Y: rpca.lrpca(Y, 2, zeta, eta))(probs.Y)
    for i in range(4):
        single = rpca.lrpca(probs.Y[i], 2, zeta, eta)
        np.testing.assert_allclose(batched.X[i], single.X, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(batched.S[i], single.S, rtol=1e-5, atol=1e-6)
    sg = jax.vmap(lambda Y: rpca.scaledgd(Y, 2, 0.1, max_iter=20))(probs.Y[:2])
    np.testing.assert_allclose(
        sg.X[1], rpca.scaledgd(probs.Y[1], 2, 0.1, max_iter=20).X, rtol=1e-5, atol=1e-6
    )
    alt = jax.vmap(lambda Y: rpca.altproj(Y, 2, max_iter=40))(probs.Y[:2])
    np.testing.assert_allclose(
        alt.X[0], rpca.altproj(probs.Y[0], 2, max_iter=40).X, rtol=1e-4, atol=1e-6
    )


def test_vmap_over_hyperparameters():
    p = datasets.rpca_problem(jax.random.key(5), 80, 80, 2, 0.1)
    zeta = jnp.concatenate([jnp.array([0.05]), 0.01 * 0.7 ** jnp.arange(10)])
    etas = jnp.stack([jnp.full(10, 0.3), jnp.full(10, 0.6)])
    swept = jax.vmap(lambda e: rpca.lrpca(p.Y, 2, zeta, e, X_star=p.X).error)(etas)
    for e, err in zip(etas, swept):
        np.testing.assert_allclose(err, rpca.lrpca(p.Y, 2, zeta, e, X_star=p.X).error, rtol=1e-4)
    # ScaledGD over (α, η): test_sweep.py::test_sweep_scaledgd_alpha_eta.
    # ScaledGD's default step is η = 2/3, the largest its theorem admits (a traced hyperparameter:
    # one program for all three); it reaches the tolerance in fewer iterations than the authors'
    # 0.5, with an error of the same size.
    default, largest, other = (
        rpca.scaledgd(p.Y, 2, 0.1, tol=1e-4, max_iter=200, X_star=p.X, **kw)
        for kw in ({}, {"eta": 2 / 3}, {"eta": 0.5})
    )
    np.testing.assert_array_equal(default.X, largest.X)
    assert int(default.n_iter) < int(other.n_iter) < 200
    assert float(default.error) <= 1.5 * float(other.error)


def test_grad_wrt_zeta_and_eta_matches_finite_differences(x64):
    """Exact-SVD gradients of LRPCA. Y has four zero columns: its thin SVD then has tied zero
    singular values below the kept ones, where autodiff through the full SVD gave NaN."""
    p = datasets.rpca_problem(jax.random.key(6), 60, 50, 2, 0.1, dtype=jnp.float64)
    Y = p.Y.at[:, :4].set(0.0)
    K = 5
    zeta = rpca.oracle_thresholds(Y, 2, p.X, K, 0.5) * 0.8
    eta = jnp.full(K, 0.5)

    def loss(z, e):
        out = rpca.lrpca(Y, 2, z, e, svd="exact")
        return jnp.sum((out.X - p.X) ** 2)

    gz, ge = jax.grad(loss, argnums=(0, 1))(zeta, eta)
    assert bool(jnp.all(jnp.isfinite(gz))) and bool(jnp.all(jnp.isfinite(ge)))
    assert float(jnp.max(jnp.abs(ge))) > 0 and float(jnp.max(jnp.abs(gz))) > 0
    rng = np.random.default_rng(0)
    for _ in range(3):
        dz = jnp.asarray(rng.standard_normal(K + 1)) * zeta * 1e-6
        de = jnp.asarray(rng.standard_normal(K)) * 1e-6
        fd = (loss(zeta + dz, eta + de) - loss(zeta - dz, eta - de)) / 2
        np.testing.assert_allclose(jnp.dot(gz, dz) + jnp.dot(ge, de), fd, rtol=1e-4)


def test_scaledgd_gradient_in_eta_with_fixed_iterations_and_no_forward_mode(x64):
    """What scaledgd's docstring promises: jax.grad in η through a fixed iteration count (tol=None)
    matches central differences; forward mode is refused (custom reverse rules), with or without
    tol."""
    p = datasets.rpca_problem(
        jax.random.key(6), 60, 50, 2, 0.1, dtype=jnp.float64
    )  # the instance above
    # The initialisation does not depend on η, so the default randomized SVD gives the exact
    # derivative in η (and compiles faster than the exact SVD's).
    # One compiled program gives the values for the central difference and the gradient.
    value_and_grad = jax.jit(
        jax.value_and_grad(
            lambda e: jnp.sum(
                (rpca.scaledgd(p.Y, 2, 0.1, eta=e, tol=None, max_iter=4).X - p.X) ** 2
            )
        )
    )
    g = value_and_grad(0.5)[1]
    fd = (value_and_grad(0.5 + 1e-6)[0] - value_and_grad(0.5 - 1e-6)[0]) / 2e-6
    assert abs(float(g)) > 0
    np.testing.assert_allclose(g, fd, rtol=1e-5)
    for kw in ({"max_iter": 4, "tol": None}, {"max_iter": 50, "tol": 1e-3}):
        with pytest.raises(TypeError, match="forward-mode"):
            jax.jvp(lambda e: rpca.scaledgd(p.Y, 2, 0.1, eta=e, **kw).X.sum(), (0.5,), (1.0,))


def test_randomized_init_gradient_rule_is_close_to_the_exact_gradient(x64):
    """The randomized path's reverse rule (rank-r projection, O(σ_{r+1}/σ_r)) against autodiff of
    the exact SVD on the same instance."""
    p = datasets.rpca_problem(jax.random.key(6), 60, 50, 2, 0.1, dtype=jnp.float64)
    K = 5
    zeta = rpca.oracle_thresholds(p.Y, 2, p.X, K, 0.5) * 0.8
    eta = jnp.full(K, 0.5)

    def loss(z, e, svd):
        out = rpca.lrpca(p.Y, 2, z, e, svd=svd)
        return jnp.sum((out.X - p.X) ** 2)

    exact = jax.grad(loss, argnums=(0, 1))(zeta, eta, "exact")
    fast = jax.grad(loss, argnums=(0, 1))(zeta, eta, "randomized")
    for a, b in zip(exact, fast):
        np.testing.assert_allclose(b, a, rtol=2e-2, atol=1e-3 * float(jnp.max(jnp.abs(a))))


def test_new_hyperparameter_values_do_not_recompile():
    p = datasets.rpca_problem(jax.random.key(7), 64, 64, 2, 0.1)
    eta = jnp.full(6, 0.5)
    rpca.lrpca(p.Y, 2, jnp.full(7, 0.01), eta)
    before = lrpca_module._lrpca._cache_size()
    for scale in (0.5, 2.0, 3.0):
        rpca.lrpca(p.Y, 2, jnp.full(7, 0.01 * scale), eta * scale)
        rpca.lrpca(p.Y, 2, np.full(7, 0.01 * scale, np.float32), [0.4] * 6)
    assert lrpca_module._lrpca._cache_size() == before


BAD_INPUTS = [
    (dict(Y=np.ones(10)), "Y"),
    (dict(Y=np.ones((2, 3, 4))), "Y"),
    (dict(Y=np.full((10, 10), np.nan)), "Y"),
    (dict(rank=0), "rank"),
    (dict(rank=11), "rank"),
    (dict(rank=2.5), "rank"),
    (dict(zeta=-np.ones(4)), "zeta"),
    (dict(eta=-np.ones(3)), "eta"),
    (dict(zeta=np.ones(5)), "zeta"),
    (dict(zeta=np.ones((4, 1))), "zeta"),
    (dict(beta=1.0), "beta"),
    (dict(beta=-1.0, phi=0.5, tol=1e-3), "beta"),
    (dict(beta=1.0, phi=0.5), "tol or max_iter"),
    (dict(tol=-1.0), "tol"),
    (dict(max_iter=9), "max_iter"),
    (dict(X_star=np.ones((3, 3))), "X_star"),
]


@pytest.mark.parametrize("change, name", BAD_INPUTS)
def test_lrpca_rejects_bad_input_before_computing(change, name):
    args = (
        dict(
            Y=np.random.default_rng(0).standard_normal((10, 10)),
            rank=2,
            zeta=np.full(4, 0.1),
            eta=np.full(3, 0.5),
        )
        | change
    )
    before = lrpca_module._lrpca._cache_size()
    with pytest.raises(ValueError, match=name):
        rpca.lrpca(args.pop("Y"), args.pop("rank"), args.pop("zeta"), args.pop("eta"), **args)
    assert lrpca_module._lrpca._cache_size() == before


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda Y: rpca.scaledgd(Y, 2, -0.1, max_iter=5), "alpha"),
        (lambda Y: rpca.scaledgd(Y, 2, 1.5, max_iter=5), "alpha"),
        (lambda Y: rpca.scaledgd(Y, 2, 0.1, eta=-1.0, max_iter=5), "eta"),
        (lambda Y: rpca.scaledgd(Y, 2, 0.1, max_iter=None), "max_iter"),
        (lambda Y: rpca.scaledgd(Y[0], 2, 0.1, max_iter=5), "Y"),
        (lambda Y: rpca.altproj(Y, 0), "rank"),
        (lambda Y: rpca.altproj(Y, 2, threshold_scale=0.0), "threshold_scale"),
        (lambda Y: rpca.altproj(Y, 2, threshold_scale_init=-1.0), "threshold_scale_init"),
        (lambda Y: rpca.altproj(Y.at[0, 0].set(jnp.inf), 2), "Y"),
        (
            lambda Y: rpca.altproj(Y[:, :4], 4),
            r"rank < min\(n1, n2\) = 4",
        ),  # full rank: any S is a fixed point
        (lambda Y: rpca.oracle_thresholds(Y, 2, None, 5), "X_star"),
        (lambda Y: rpca.oracle_thresholds(Y, 2, Y, 5, rule="median"), "rule"),
        (lambda Y: rpca.oracle_thresholds(Y, 2, Y, 5, scale=0.0), "scale"),
        (lambda Y: rpca.scaledgd(Y, 2, 0.6, max_iter=5), r"alpha_iter \(default 2·alpha"),
        (lambda Y: rpca.altproj(Y, 2, oversample=-4), "oversample"),
        (lambda Y: rpca.lrpca(Y, 2, jnp.ones(3), jnp.ones(2), oversample=-3), "oversample"),
        (lambda Y: rpca.scaledgd(Y, 2, 0.1, max_iter=5, power_iters=-1), "power_iters"),
        (
            lambda Y: rpca.lrpca_sharded(Y, 2, jnp.ones(3), jnp.ones(2), beta=1.0, phi=0.8),
            "needs tol or max_iter",
        ),
    ],
)
def test_baselines_reject_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call(jnp.ones((10, 10)))


def test_a_traced_scaledgd_fraction_above_one_is_invalid():
    """Called directly, α_iter = 2α = 1.2 raises ValueError. Traced (a vmap over α, or a jitted
    α_iter), T_α with α_iter > 1 kept every entry: S = Y − X, X never moved from its initialisation,
    and the run returned a finite, frozen error curve. Such a point now has status INVALID, NaN
    solution and diagnostics (final and history), and its neighbours are unchanged; with the default
    throw=True the traced call raises."""
    p = datasets.rpca_problem(jax.random.key(3), 60, 60, 2, 0.1)
    swept = jax.vmap(lambda a: rpca.scaledgd(p.Y, 2, a, max_iter=5, X_star=p.X, throw=False))(
        jnp.array([0.1, 0.6])
    )
    single = rpca.scaledgd(p.Y, 2, 0.1, max_iter=5, X_star=p.X)
    assert np.asarray(swept.status).tolist() == [Status.MAX_ITER, Status.INVALID]
    np.testing.assert_allclose(swept.history["error"][0], single.history["error"], rtol=1e-5)
    np.testing.assert_allclose(swept.X[0], single.X, rtol=1e-5, atol=1e-6)
    for curve in (
        swept.history["error"][1],
        swept.history["residual"][1],
        swept.error[1],
        swept.residual[1],
        swept.X[1],
        swept.S[1],
    ):
        assert bool(jnp.all(jnp.isnan(curve)))
    jitted = jax.jit(lambda ai: rpca.scaledgd(p.Y, 2, 0.1, alpha_iter=ai, max_iter=5, throw=False))
    bad, good = jitted(1.5), jitted(0.2)
    assert int(bad.status) == Status.INVALID and bool(jnp.all(jnp.isnan(bad.X)))
    assert int(good.status) == Status.MAX_ITER and bool(jnp.all(jnp.isfinite(good.X)))
    with pytest.raises(RuntimeError, match=r"alpha_iter must lie in \[0, 1\]"):
        jax.block_until_ready(
            jax.jit(lambda ai: rpca.scaledgd(p.Y, 2, 0.1, alpha_iter=ai, max_iter=5).X)(1.5)
        )


def test_a_diverging_point_of_a_sweep_stops_there_and_leaves_the_others():
    """vmap over FRMNN's β with a tolerance: β = 10 grows the steps without bound. With throw=False
    that point stops at the layer where its factors blew up (DIVERGED, its history NaN after it) and
    the β = 1 point keeps the run it has alone; with the default throw=True the vmapped call
    raises."""
    p = datasets.rpca_problem(jax.random.key(0), 60, 50, 3, 0.1)
    zeta, eta = rpca.oracle_thresholds(p.Y, 3, p.X, 8), jnp.full(8, 0.5)

    def run(beta, throw):
        return rpca.lrpca(p.Y, 3, zeta, eta, beta=beta, phi=0.7, tol=1e-4, max_iter=60, throw=throw)

    swept = jax.vmap(lambda b: run(b, False))(jnp.array([1.0, 10.0]))
    alone = run(1.0, True)
    assert np.asarray(swept.status).tolist() == [Status.CONVERGED, Status.DIVERGED]
    assert int(swept.n_iter[0]) == int(alone.n_iter)
    np.testing.assert_allclose(swept.X[0], alone.X, rtol=1e-5, atol=1e-6)
    n = int(swept.n_iter[1])
    assert 8 < n < 60  # past the K learned layers, before the budget
    assert np.all(np.isnan(np.asarray(swept.history["residual"][1, n:])))
    with pytest.raises(RuntimeError, match="beta > 1 grows the FRMNN steps"):
        jax.block_until_ready(jax.vmap(lambda b: run(b, True).X)(jnp.array([1.0, 10.0])))


def test_a_traced_first_threshold_at_zero_is_invalid_not_the_best_residual():
    """A traced ζ₀ = 0 (a sweep over ζ's scale that reaches 0) starts from S₀ = Y, L₀ = R₀ = 0, a
    fixed point: X = 0 with residual 0, which a sweep ranking its points by the residual took for
    the best. That point is INVALID with NaN residual and X; the point beside it is unchanged; a
    concrete ζ₀ = 0 is refused (ValueError) and a traced one raises under the default throw=True."""
    p = datasets.rpca_problem(jax.random.key(5), 40, 30, 2, 0.1)
    zeta, eta = rpca.oracle_thresholds(p.Y, 2, p.X, 3), jnp.full(3, 0.5)
    for solver in (rpca.lrpca, rpca.lrpca_sharded):
        swept = jax.vmap(lambda s: solver(p.Y, 2, zeta * s, eta, throw=False))(
            jnp.array([1.0, 0.0])
        )
        assert np.asarray(swept.status).tolist() == [Status.MAX_ITER, Status.INVALID], solver
        np.testing.assert_allclose(swept.X[0], solver(p.Y, 2, zeta, eta).X, rtol=1e-5, atol=1e-6)
        assert bool(jnp.isnan(swept.residual[1])) and bool(
            jnp.all(jnp.isnan(swept.history["residual"][1]))
        )
        assert bool(jnp.all(jnp.isnan(swept.X[1]))) and bool(jnp.all(jnp.isnan(swept.S[1])))
        with pytest.raises(RuntimeError, match=r"zeta\[0\] must be > 0"):
            jax.block_until_ready(jax.jit(lambda s: solver(p.Y, 2, zeta * s, eta).X)(0.0))


@pytest.mark.parametrize("solver", ["lrpca", "lrpca_sharded"])
@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(zeta=jnp.ones(3), eta=jnp.ones(3)), "zeta must have one more entry than eta"),
        (dict(beta=1.0), "beta and phi .FRMNN continuation. must be given together"),
        (
            dict(zeta=jnp.ones(1), eta=jnp.ones(0), beta=1.0, phi=0.8, max_iter=3),
            "FRMNN needs at least one learned layer",
        ),
        (dict(beta=1.0, phi=0.8), "needs tol or max_iter"),
        (dict(max_iter=3), "max_iter must be <= the number of layers 2 without FRMNN"),
        (dict(max_iter=-1), "max_iter"),
        (dict(beta=-1.0, phi=0.8, max_iter=3), "beta"),
        (dict(tol=-1.0), "tol"),
        (
            dict(zeta=jnp.array([0.0, 1.0, 1.0])),
            r"zeta\[0\] must be > 0",
        ),  # S₀ = Y, L₀ = R₀ = 0: X stays 0
    ],
)
def test_lrpca_and_its_sharded_form_check_the_schedule_alike(solver, kw, message):
    """One check of the layer schedule (the declarations rpca.learned.SCHEDULE and SCHEDULE_RULES)
    for both solvers: the sharded one had its own copy, with other messages and without the
    FRMNN-needs-a-layer check."""
    args = dict(zeta=jnp.ones(3), eta=jnp.ones(2)) | kw
    with pytest.raises(ValueError, match=message):
        getattr(rpca, solver)(jnp.ones((10, 10)), 2, **args)


@pytest.mark.parametrize("solver", ["lrpca", "lrpca_sharded"])
def test_hyperparameters_closed_over_in_a_callers_jit(solver):
    """ζ and η closed over (concrete) inside the caller's jit: the schedule check read ζ₀ with
    ``zeta[0]``, which a trace stages even for a concrete ζ, and the call failed with a
    ConcretizationTypeError. It equals the direct call, and a closed-over ζ₀ = 0 is still
    refused."""
    p = datasets.rpca_problem(jax.random.key(5), 40, 30, 2, 0.1)
    zeta, eta = rpca.oracle_thresholds(p.Y, 2, p.X, 3), jnp.full(3, 0.5)
    f = getattr(rpca, solver)
    np.testing.assert_allclose(
        jax.jit(lambda Y: f(Y, 2, zeta, eta).X)(p.Y), f(p.Y, 2, zeta, eta).X, rtol=1e-5, atol=1e-6
    )
    zeta0 = zeta.at[0].set(0.0)
    with pytest.raises(ValueError, match=r"zeta\[0\] must be > 0"):
        jax.jit(lambda Y: f(Y, 2, zeta0, eta).X)(p.Y)


def _brute_change(runs):
    """max(‖X_k − X_{k−1}‖/‖X_{k−1}‖, ‖S_k − S_{k−1}‖/‖S_{k−1}‖) from separate runs of 0..k
    iterations."""
    out = []
    for a, b in zip(runs[:-1], runs[1:]):
        out.append(
            max(
                float(jnp.linalg.norm(b.X - a.X) / jnp.linalg.norm(a.X)),
                float(jnp.linalg.norm(b.S - a.S) / jnp.linalg.norm(a.S)),
            )
        )
    return np.array(out)


def _runs_of(solve, recorded):
    """Separate runs of exactly 1, …, n − 1 iterations (n = recorded.n_iter), then ``recorded``.
    Each is ``solve(tol)`` stopped by the residual rule just above the recorded k-th residual: one
    compiled solver for every k (the test is compile-bound) instead of one per iteration count."""
    res = np.asarray(recorded.history["residual"])
    runs = [solve(float(res[k - 1]) * (1 + 1e-9)) for k in range(1, int(recorded.n_iter))]
    assert [int(r.n_iter) for r in runs] == list(range(1, int(recorded.n_iter))), (
        "residuals must fall"
    )
    return runs + [recorded]


@pytest.mark.filterwarnings("ignore:altproj.s budget")
def test_relative_change_halting_rule_matches_brute_force(x64):
    """stop="change" records the paper's video halting quantity; checked against runs of 1..k
    iterations, and the solvers stop at the first iteration below tol."""
    p = datasets.rpca_problem(jax.random.key(3), 80, 70, 3, 0.1, dtype=jnp.float64)
    K = 4
    z = rpca.oracle_thresholds(p.Y, 3, p.X, K, 0.5) * 0.7
    # With tol = 1e-30 nothing stops early, so each recording run is the longest of its runs.
    lr = rpca.lrpca(p.Y, 3, z, jnp.full(K, 0.5), tol=1e-30, stop="change")
    assert int(lr.n_iter) == K
    runs = _runs_of(lambda tol: rpca.lrpca(p.Y, 3, z, jnp.full(K, 0.5), tol=tol), lr)
    np.testing.assert_allclose(np.asarray(lr.history["change"])[1:], _brute_change(runs), rtol=1e-6)
    assert float(lr.change) == float(lr.history["change"][-1])
    np.testing.assert_allclose(
        lr.X, rpca.lrpca(p.Y, 3, z, jnp.full(K, 0.5), tol=1e-30).X, rtol=1e-12
    )

    sg = rpca.scaledgd(p.Y, 3, 0.1, max_iter=3, tol=1e-30, stop="change")
    assert np.isinf(sg.history["change"][0]) and int(sg.n_iter) == 3
    runs = _runs_of(lambda tol: rpca.scaledgd(p.Y, 3, 0.1, max_iter=3, tol=tol), sg)
    np.testing.assert_allclose(np.asarray(sg.history["change"])[1:], _brute_change(runs), rtol=1e-6)

    ap = rpca.altproj(p.Y, 3, tol=1e-30, max_iter=3, stop="change")
    assert int(ap.n_iter) == 3
    # (AltProj stops by tolerance only in its last stage, so a residual stop cannot end its first
    # runs)
    runs = [rpca.altproj(p.Y, 3, tol=1e-30, max_iter=k) for k in range(1, 3)] + [ap]
    np.testing.assert_allclose(
        np.asarray(ap.history["change"])[1:], _brute_change(runs), rtol=1e-6, atol=1e-13
    )

    # Stopping: the first iteration whose change is below tol is the last one run.
    tol = float(np.sort(np.asarray(lr.history["change"]))[2])
    stopped = rpca.lrpca(p.Y, 3, z, jnp.full(K, 0.5), tol=tol * 1.0001, stop="change")
    first = int(np.argmax(np.asarray(lr.history["change"]) < tol * 1.0001)) + 1
    assert int(stopped.n_iter) == first and int(stopped.status) == Status.CONVERGED
    assert float(stopped.change) < tol * 1.0001
    with pytest.raises(ValueError, match="stop"):
        rpca.lrpca(p.Y, 3, z, jnp.full(K, 0.5), tol=1e-3, stop="residuals")


def test_altproj_change_rule_waits_for_the_outliers():
    """With stop="change", AltProj stopped in its last stage while the threshold
    β(σ_{r+1} + 0.5^t σ_r) was still above every outlier: S stayed 0, so ‖ΔS‖/‖S‖ = 0/0 = 0 and X
    stood still, and the rule fired (200 × 200, r = 5: 6 iterations, error 3e-2, no outlier found).
    It now applies once S holds an entry (or the threshold has settled, or the residual is below
    tol), and reaches the residual rule's accuracy; data without outliers still stop at once (a
    first version of the fix, which waited for the threshold to settle, ran them to max_iter)."""
    p = datasets.rpca_problem(jax.random.key(1), 200, 200, 5, 0.1)
    by_residual = rpca.altproj(p.Y, 5, tol=1e-4, max_iter=200, X_star=p.X)
    by_change = rpca.altproj(p.Y, 5, tol=1e-4, max_iter=200, X_star=p.X, stop="change")
    n = int(by_change.n_iter)
    assert n < 200
    assert int(by_change.status) == Status.CONVERGED
    assert float(by_change.error) <= float(by_residual.error)
    found = np.asarray(by_change.S != 0)
    assert np.mean(found[np.asarray(p.S != 0)]) > 0.99  # the outliers are in S
    assert float(by_change.change) < 1e-4 and float(by_change.history["change"][n - 1]) == float(
        by_change.change
    )
    for rank in (1, 3):
        clean = datasets.rpca_problem(jax.random.key(1), 60, 50, rank, 0.0)
        out = rpca.altproj(clean.Y, rank, tol=1e-5, stop="change", X_star=clean.X)
        assert int(out.n_iter) <= rank + 2 and float(out.error) < 1e-6
        assert not bool(jnp.any(out.S != 0))


def test_a_shipped_model_checks_what_it_is_called_with():
    """The model's call took Y and rank unchecked: a 1-D Y raised IndexError, an empty one
    ZeroDivisionError, rank = 0 a math domain error, and rank = 2.5 ran at rank 2."""
    model = rpca.pretrained(0.1)
    Y = datasets.rpca_problem(jax.random.key(0), 60, 50, 3, 0.1).Y
    for call, match in [
        (lambda: model(np.ones(5)), "2-D"),
        (lambda: model(np.zeros((0, 5))), "non-empty"),
        (lambda: model(Y, rank=0), "rank must satisfy"),
        (lambda: model(Y, rank=2.5), "integer"),
        (lambda: model(Y, rank=True), "integer"),
        (lambda: rpca.pretrained("0.1"), "alpha"),
    ]:
        with pytest.raises(ValueError, match=match):
            call()
    # The oracle schedule of a diverging run (η = 100) overflowed to NaN thresholds without a word.
    # It raises, called directly and inside jit alike.
    X_star = datasets.rpca_problem(jax.random.key(0), 60, 50, 3, 0.1).X
    with pytest.raises(RuntimeError, match="oracle thresholds became non-finite"):
        rpca.oracle_thresholds(Y, 3, X_star, 20, 100.0)
    with pytest.raises(RuntimeError, match="oracle thresholds became non-finite"):
        jax.block_until_ready(jax.jit(lambda e: rpca.oracle_thresholds(Y, 3, X_star, 20, e))(100.0))


def test_scaledgd_warns_when_ties_put_most_of_y_into_s():
    """Binary data: T_α keeps every entry tied at its cut-off, so S took all of Y and X stayed 0
    with residual 0 and no word. It still runs as the operator is defined, and now says why it
    fails."""
    import warnings

    rng = np.random.default_rng(0)
    B = jnp.asarray(np.outer(rng.random(60) < 0.6, rng.random(50) < 0.6), jnp.float32)
    with pytest.warns(UserWarning, match="kept .* of Y's entries") as said:
        out = rpca.scaledgd(B, 1, 0.1, max_iter=5)
    assert said[0].filename == __file__  # the caller's line, through the solver's wrappers
    assert not np.any(np.asarray(out.X))  # the failure the warning explains
    p = datasets.rpca_problem(jax.random.key(0), 60, 50, 1, 0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rpca.scaledgd(p.Y, 1, 0.1, max_iter=5)  # continuous data: no ties, no warning


def test_inputs_users_pass_are_taken_or_named():
    """altproj(tol=None) runs its whole budget (it crashed); an int key is a seed; half precision
    runs in float32 (LAPACK has no float16 SVD); a scipy.sparse Y is refused by name; a float32 0.3
    picks the α = 0.3 model."""
    p = datasets.rpca_problem(jax.random.key(2), 60, 50, 2, 0.1)
    out = rpca.altproj(p.Y, 2, tol=None, max_iter=7)
    assert (
        int(out.n_iter) == 7
        and np.all(np.isfinite(out.history["residual"]))
        and int(out.status) == Status.MAX_ITER
    )
    z, e = rpca.oracle_thresholds(p.Y, 2, p.X, 4, 0.5), jnp.full(4, 0.5)
    np.testing.assert_array_equal(
        rpca.lrpca(p.Y, 2, z, e, key=3).X, rpca.lrpca(p.Y, 2, z, e, key=jax.random.key(3)).X
    )
    Y16 = p.Y.astype(jnp.float16)
    half = rpca.lrpca(Y16, 2, z, e)
    assert half.X.dtype == jnp.float32
    np.testing.assert_array_equal(half.X, rpca.lrpca(Y16.astype(jnp.float32), 2, z, e).X)
    import scipy.sparse

    with pytest.raises(TypeError, match=r"scipy.sparse matrix: pass Y.toarray\(\)"):
        rpca.scaledgd(scipy.sparse.csr_matrix(np.asarray(p.Y)), 2, 0.1, max_iter=3)
    assert rpca.pretrained(float(np.float32(0.3))).zeta.shape == rpca.pretrained(0.3).zeta.shape


def test_parameter_files_load_whether_or_not_64_bit_floats_are_on(tmp_path, x64):
    """The shipped float32 models load with jax_enable_x64 on (the template followed the flag and
    the load failed as 'corrupt'); a float64 file round-trips exactly with it on, as float32 off."""
    m = rpca.pretrained(0.1)
    assert m.log_zeta.dtype == jnp.float32
    m64 = jax.tree.map(lambda x: x.astype(jnp.float64) if eqx.is_array(x) else x, m)
    rpca.params.save_params(tmp_path / "m64.eqx", m64)
    back = rpca.params.load_params(tmp_path / "m64.eqx")
    assert back.log_zeta.dtype == jnp.float64
    np.testing.assert_array_equal(back.log_eta, m64.log_eta)
    with jax.enable_x64(False):
        assert rpca.params.load_params(tmp_path / "m64.eqx").log_zeta.dtype == jnp.float32


def test_oracle_starts_at_the_largest_magnitude_and_is_odd_symmetric():
    """ζ₀ = max|X⋆| (a generator instance whose most negative entry is the larger in size), and the
    schedule of (−Y, −X⋆) is that of (Y, X⋆): soft thresholding is odd and max|·| even. With max X⋆
    for max|X⋆|, ζ₀ was 0.137 instead of 0.173 here, and negative for X⋆ = −u vᵀ."""
    p = datasets.rpca_problem(jax.random.key(1), 60, 50, 3, 0.1)
    X = np.asarray(p.X)
    assert -X.min() > X.max()
    z = rpca.oracle_thresholds(p.Y, 3, p.X, 4, 0.5)
    assert float(z[0]) == pytest.approx(np.abs(X).max(), rel=1e-6)
    np.testing.assert_allclose(rpca.oracle_thresholds(-p.Y, 3, -p.X, 4, 0.5), z, rtol=1e-5)


def test_lrpca_without_layers_is_the_first_threshold_and_stops_strictly_below_tol():
    """max_iter = 0: S = S_{ζ₀}(Y), the initial sparse estimate (a ζ_K start gave S_{0.1}); and the
    residual stop is strict: tol equal to a fixed run's residual after layer 2 stops after
    layer 3."""
    Y = jnp.array([[3.0, 0.5], [0.2, -2.0]])
    out = rpca.lrpca(Y, 1, jnp.array([1.0, 0.1]), jnp.array([0.5]), max_iter=0, svd="exact")
    np.testing.assert_allclose(out.S, prox.soft_threshold(Y, 1.0), rtol=1e-6)
    Y = jnp.array([[3.0, 0.5, 1.0], [0.2, -2.0, 0.7], [1.0, 1.0, 1.0]])
    zeta, eta = jnp.array([1.0, 0.5, 0.25, 0.1]), jnp.full(3, 0.5)
    ref = rpca.lrpca(Y, 1, zeta, eta, svd="exact")
    res = ref.history["residual"]
    assert float(res[2]) < float(res[1])
    assert int(rpca.lrpca(Y, 1, zeta, eta, tol=res[1], svd="exact").n_iter) == 3


def test_frmnn_gradients_stay_finite_where_beta_power_overflows():
    """β = 1e30, φ = 1e-30: the continued layers' ζ underflows to 0 and β^p overflows. The values
    are guarded, and the gradient too: without the guard on β^p (frozen layers use p = 0) the
    gradient over η was NaN in the last layer."""
    p = datasets.rpca_problem(jax.random.key(0), 30, 20, 2, 0.1)
    z = rpca.oracle_thresholds(p.Y, 2, p.X, 3, 0.5)
    g = jax.grad(lambda e: rpca.lrpca(p.Y, 2, z, e, beta=1e30, phi=1e-30, max_iter=6).X.sum())(
        jnp.full(3, 0.5)
    )
    assert np.all(np.isfinite(np.asarray(g))) and np.any(np.asarray(g) != 0)


def test_the_shipped_model_warns_below_its_training_size(monkeypatch):
    """The n = 1000 models do not carry down to smaller problems (docs/rpca.md's table): below
    0.9 n they say so; at their size and above they stay quiet. (The solve itself is replaced by a
    recorder: only the call's size logic is under test, and the ζ it passes on.)"""
    import warnings

    calls = []
    monkeypatch.setattr(
        rpca.params, "lrpca", lambda Y, rank, zeta, eta, **kw: calls.append((zeta, kw))
    )
    m = rpca.pretrained(0.1)
    Y = jnp.full((300, 300), 2.0)
    with pytest.warns(UserWarning, match="trained at n = 1000; on a problem of size n = 300") as w:
        m(Y)
    assert w[0].filename == __file__  # the caller's line, through equinox's method wrapper
    np.testing.assert_allclose(calls[-1][0], m.zeta * 2.0 / m.scale, rtol=1e-5)  # s(Y) = 2
    assert calls[-1][1]["max_iter"] == m.num_layers + 5  # FRMNN's default: K + 5 layers
    with pytest.warns(UserWarning, match="n = 300"):
        m(Y, frmnn=False)  # the K layers, with ζ in Y's units too
    np.testing.assert_allclose(calls[-1][0], m.zeta * 2.0 / m.scale, rtol=1e-5)
    assert calls[-1][1]["max_iter"] is None and "beta" not in calls[-1][1]
    with pytest.warns(UserWarning, match="n = 300"):
        m(Y, normalize=False)  # the user took charge of ζ: the stored thresholds
    np.testing.assert_array_equal(calls[-1][0], m.zeta)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m(jnp.ones((1200, 1000)))  # √(n1 n2) ≈ 1095 ≥ 1000
        m(jnp.ones((950, 950)))  # within 0.9 n
    bare = rpca.LRPCAParams.from_schedule(m.zeta, m.eta, rank=5, n=300)  # no training scale
    with pytest.raises(ValueError, match="no training scale.*normalize=False"):
        bare(Y)
    bare(Y, normalize=False)
    np.testing.assert_array_equal(calls[-1][0], m.zeta)


def test_counts_given_as_0d_arrays_run_as_their_integers():
    """Ranks and counts read back from a file or a NumPy computation are 0-d arrays. oversample and
    power_iters passed the check and then reached jit as unhashable static arguments; a rank was
    refused. Each now runs as its Python integer, with the same result."""
    p = datasets.rpca_problem(jax.random.key(0), 30, 30, 2, 0.1)
    as_arrays = rpca.scaledgd(
        p.Y,
        np.array(2),
        0.1,
        max_iter=jnp.int32(3),
        oversample=np.array(4),
        power_iters=np.int64(1),
    )
    as_ints = rpca.scaledgd(p.Y, 2, 0.1, max_iter=3, oversample=4, power_iters=1)
    np.testing.assert_array_equal(np.asarray(as_arrays.X), np.asarray(as_ints.X))
    z = rpca.oracle_thresholds(p.Y, np.array(2), p.X, np.array(3), power_iters=jnp.int32(2))
    np.testing.assert_array_equal(
        np.asarray(z), np.asarray(rpca.oracle_thresholds(p.Y, 2, p.X, 3, power_iters=2))
    )
    eta = jnp.full(3, 0.5)
    np.testing.assert_array_equal(
        np.asarray(rpca.lrpca(p.Y, np.array(2), z, eta, oversample=np.array(5)).X),
        np.asarray(rpca.lrpca(p.Y, 2, z, eta, oversample=5).X),
    )
    assert rpca.altproj(p.Y, np.int64(2), max_iter=np.array(3), oversample=np.array(3)).X.shape == (
        30,
        30,
    )
    with pytest.raises(ValueError, match="rank must be an integer"):
        rpca.scaledgd(p.Y, np.array(2.0), 0.1, max_iter=3)


def test_power_iterations_are_power_iters_and_n_iter_is_refused():
    """The power iterations of the randomized SVD are the argument ``power_iters``; ``n_iter`` is
    only the result's count of iterations run, and as an argument it is an unknown keyword (no
    alias of the old name)."""
    from lowrank_jax import linalg

    p = datasets.rpca_problem(jax.random.key(0), 30, 30, 2, 0.1)
    with pytest.raises(TypeError, match="n_iter"):
        linalg.randomized_svd(p.Y, 2, 0, n_iter=2)
    zeta, eta = jnp.full(4, 0.1), jnp.full(3, 0.5)
    with pytest.raises(TypeError, match="n_iter"):
        rpca.lrpca(p.Y, 2, zeta, eta, n_iter=2)
    default = linalg.randomized_svd(p.Y, 2, 0)
    same = linalg.randomized_svd(p.Y, 2, 0, power_iters=4)  # 4 is the default
    np.testing.assert_array_equal(np.asarray(same.s), np.asarray(default.s))
    none = linalg.randomized_svd(p.Y, 2, 0, oversample=0, power_iters=0)
    assert not np.array_equal(np.asarray(none.s), np.asarray(default.s))  # the count is used
    out = rpca.lrpca(p.Y, 2, zeta, eta, power_iters=1)
    assert int(out.n_iter) == 3 and np.all(np.isfinite(np.asarray(out.X)))  # n_iter: layers run


def _altproj_numpy(Y, rank, scale, scale_init, iters, inner_iters):
    """AltProj (Netrapalli et al., Alg. 1) in NumPy with full SVDs: stage k keeps k singular
    triplets, threshold ζ = β(σ_{k+1} + ½ᵗσ_k) on the SVD of Y − S, and the stage advances once
    ½ᵗ⁺¹σ_k ≤ σ_{k+1} or after ``inner_iters`` iterations. Returns X, S and the residual after each
    iteration."""
    hard = lambda M, z: np.where(np.abs(M) > z, M, 0.0)  # noqa: E731
    S = hard(Y, scale_init * np.linalg.svd(Y, compute_uv=False)[0])
    stage, t, residuals = 1, 0, []
    for _ in range(iters):
        U, s, Vt = np.linalg.svd(Y - S, full_matrices=False)
        zeta = scale * (s[stage] + 0.5**t * s[stage - 1])
        X = (U[:, :stage] * s[:stage]) @ Vt[:stage]
        S = hard(Y - X, zeta)
        residuals.append(np.linalg.norm(Y - X - S) / np.linalg.norm(Y))
        settled = 0.5 ** (t + 1) * s[stage - 1] <= s[stage]
        stage, t = (
            (stage + 1, 0) if stage < rank and (settled or t + 1 >= inner_iters) else (stage, t + 1)
        )
    return X, S, np.array(residuals)


def test_altproj_iterates_equal_a_numpy_port_of_the_algorithm(x64):
    """Iterate by iterate against the NumPy port above, on a matrix whose sketch width (rank + 1 +
    oversample) covers all its columns, so the randomized SVDs are exact: pins the threshold's ½ᵗ
    schedule, the stage advance and the hard threshold, which recovery alone tolerates (a threshold
    ½ᵗ⁺¹σ_k still recovers, a few iterations later)."""
    scale = 1.0 / (2.0 * (14 * 10) ** 0.25)  # threshold_scale's default
    # seed 4: stages 1, 2 settle at once, stage 3 after a few iterations; seed 3: stage 1 does not
    # settle at its first iteration, so inner_iters = 1 is what moves it on.
    for seed, alpha, inner, iters in ((4, 0.15, 3, 4), (4, 0.15, 3, 9), (3, 0.1, 1, 6)):
        p = datasets.rpca_problem(jax.random.key(seed), 14, 10, 3, alpha, dtype=jnp.float64)
        out = rpca.altproj(p.Y, 3, tol=None, max_iter=iters, inner_iters=inner, oversample=8)
        X, S, residuals = _altproj_numpy(np.asarray(p.Y), 3, scale, 4 * scale, iters, inner)
        assert np.any(S != 0)
        np.testing.assert_array_equal(np.asarray(out.S) != 0, S != 0)
        np.testing.assert_allclose(out.S, S, atol=1e-10)
        np.testing.assert_allclose(out.X, X, atol=1e-10)
        np.testing.assert_allclose(out.history["residual"], residuals, rtol=1e-8, atol=1e-13)


def test_exact_svd_gradient_is_finite_where_the_kept_singular_values_tie(x64):
    """Y − S₀ with σ₁ = σ₂ (two equal blocks) and σ₂ > σ₃: the rank-2 projection is smooth there,
    but the kept-triplet derivative of the exact SVD divides by σ₁² − σ₂² and gave NaN in float32
    (for ζ₀ and for Y). svd="exact" now takes the projection's own rule, over all the triplets; it
    agrees with the randomized path (exact here: rank Y ≤ 2 + oversample) and with central
    differences in float64."""
    Y = jnp.zeros((40, 30)).at[:20, :15].set(0.05).at[20:, 15:].set(0.05)
    Y = Y.at[3, 4].add(0.5).at[23, 19].add(0.5)
    z, e = jnp.array([0.1, 0.05, 0.02]), jnp.full(2, 0.5)
    Y32, z32, e32 = Y.astype(jnp.float32), z.astype(jnp.float32), e.astype(jnp.float32)
    grads = {
        svd: jax.grad(lambda z: rpca.lrpca(Y32, 2, z, e32, svd=svd).X.sum())(z32)
        for svd in ("exact", "randomized")
    }
    np.testing.assert_allclose(grads["exact"], grads["randomized"], rtol=1e-4)
    gY = jax.grad(lambda Y: rpca.lrpca(Y, 2, z32, e32, svd="exact").X.sum())(Y32)
    assert bool(jnp.all(jnp.isfinite(gY)))
    f = lambda z0: float(rpca.lrpca(Y, 2, z.at[0].set(z0), e, svd="exact").X.sum())
    fd = (f(0.1 + 1e-6) - f(0.1 - 1e-6)) / 2e-6
    np.testing.assert_allclose(float(grads["exact"][0]), fd, rtol=1e-4)


def test_lrpca_flags_must_be_booleans():
    """bool("no") is True: differentiable="no" ran the masked scan, and a model called with
    frmnn="False" ran 15 layers instead of 10. Strings are refused by name."""
    Y = datasets.rpca_problem(jax.random.key(0), 30, 30, 2, 0.1).Y
    with pytest.raises(TypeError, match="differentiable must be True or False"):
        rpca.lrpca(Y, 2, jnp.ones(3), jnp.ones(2), differentiable="no")
    model = rpca.LRPCAParams.from_schedule(
        jnp.ones(3), jnp.ones(2), beta=1.0, phi=0.8, rank=2, n=30
    )
    for flag in ("frmnn", "normalize"):
        with pytest.raises(TypeError, match=f"{flag} must be True or False"):
            model(Y, **{flag: "False"})


def test_altproj_says_when_its_budget_ends_before_the_last_stage():
    """AltProj raises the rank one stage at a time; a max_iter that runs out first returned an X of
    lower rank than asked for, with nothing said (100 × 100, r = 5, max_iter = 3: rank 3, error
    0.49). A direct call now warns with the rank X has, for every budget (also one whose last
    iteration moved into stage r: X was still formed at r − 1); a budget that reaches the last
    stage does not, nor does a run that stopped by tol before it (a Y of lower rank than asked
    for)."""
    import re
    import warnings

    p = datasets.rpca_problem(jax.random.key(0), 60, 60, 4, 0.1)
    warned = []
    for max_iter in range(1, 9):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = rpca.altproj(p.Y, 4, max_iter=max_iter, inner_iters=2)
        s = np.linalg.svd(np.asarray(out.X), compute_uv=False)
        rank = int(np.sum(s > 1e-5 * s[0]))
        said = [re.search(r"X has rank (\d)", str(w.message)) for w in caught]
        assert len(said) == (rank < 4) and all(said), (
            max_iter,
            rank,
            [str(w.message) for w in caught],
        )
        if said:
            assert int(said[0].group(1)) == rank
            warned.append(max_iter)
    assert warned == list(range(1, warned[-1] + 1)) and 3 <= len(warned) < 8  # short budgets only
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traced = jax.jit(lambda Y: rpca.altproj(Y, 4, max_iter=2).X)(
            p.Y
        )  # a transformation says nothing
    with pytest.warns(UserWarning, match="ran out in stage 2 of 4"):
        np.testing.assert_allclose(traced, rpca.altproj(p.Y, 4, max_iter=2).X, rtol=1e-5, atol=1e-6)
    # A Y of rank 2 asked for rank 3 stops by tol as it enters the last stage, with X of rank 2: the
    # budget did not run out, and the warning that said so (and to raise max_iter) is gone.
    low = p.Y[:40, :2] @ p.Y[:2, :40]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = rpca.altproj(low, 3)
    assert (
        int(out.n_iter) < 500 and int(out.status) == Status.CONVERGED and float(out.residual) < 1e-6
    )


def test_scaledgd_with_tol_is_differentiable_on_request():
    """differentiable=True: the tolerance stop as a masked scan, so jax.grad passes it. Same iterate
    and count as the while_loop, and the gradient of the fixed-length run of that many steps."""
    p = datasets.rpca_problem(jax.random.key(0), 60, 60, 2, 0.1)
    plain = rpca.scaledgd(p.Y, 2, 0.1, eta=0.5, tol=1e-4, max_iter=50)
    masked = rpca.scaledgd(p.Y, 2, 0.1, eta=0.5, tol=1e-4, max_iter=50, differentiable=True)
    n = int(plain.n_iter)  # the count at η = 0.5, where the gradients are taken
    assert 0 < n < 50 and int(masked.n_iter) == n
    np.testing.assert_array_equal(masked.X, plain.X)

    def loss(eta, **kw):
        return jnp.sum((rpca.scaledgd(p.Y, 2, 0.1, eta=eta, **kw).X - p.X) ** 2)

    g = jax.grad(lambda e: loss(e, tol=1e-4, max_iter=50, differentiable=True))(0.5)
    np.testing.assert_allclose(g, jax.grad(lambda e: loss(e, tol=None, max_iter=n))(0.5), rtol=1e-5)
    assert float(g) != 0.0
    with pytest.raises(TypeError, match="differentiable must be True or False"):
        rpca.scaledgd(p.Y, 2, 0.1, tol=1e-4, differentiable="yes")


def test_iteration_budgets_follow_the_one_policy():
    """scaledgd and altproj stop at tol = 1e-6 within max_iter = 500 by default and tol=None runs
    exactly max_iter iterations; lrpca, a learned schedule, runs its K layers by default. AltProj's
    threshold constants are threshold_scale and threshold_scale_init, with no other name."""
    import inspect

    for solver in (rpca.scaledgd, rpca.altproj):
        params = inspect.signature(solver).parameters
        assert (params["tol"].default, params["max_iter"].default) == (1e-6, 500), solver
    p = datasets.rpca_problem(jax.random.key(0), 60, 60, 2, 0.1)
    out = rpca.scaledgd(p.Y, 2, 0.1)
    assert int(out.status) == Status.CONVERGED and float(out.residual) < 1e-6
    assert 0 < int(out.n_iter) < 500 and out.history["residual"].shape == (500,)
    fixed = rpca.scaledgd(p.Y, 2, 0.1, tol=None, max_iter=7)
    assert int(fixed.status) == Status.MAX_ITER and int(fixed.n_iter) == 7
    zeta, eta = rpca.oracle_thresholds(p.Y, 2, p.X, 3), jnp.full(3, 0.5)
    assert int(rpca.lrpca(p.Y, 2, zeta, eta).n_iter) == 3
    for old in ("beta", "beta_init"):
        with pytest.raises(TypeError, match=old):
            rpca.altproj(p.Y, 2, **{old: 0.1})
    scale = 1.0 / (2.0 * (60 * 60) ** 0.25)
    np.testing.assert_array_equal(
        rpca.altproj(p.Y, 2, threshold_scale=scale, threshold_scale_init=4 * scale).X,
        rpca.altproj(p.Y, 2).X,
    )


def test_a_shipped_model_gives_the_same_relative_answer_in_any_units():
    """The learned thresholds were absolute numbers: the n = 300 model on its own kind of instance
    scaled by 1e-3 took S = 0 (error 2e-2) and scaled by 1e3 a dense S (error 0.99). A call now
    rescales ζ by the data's scale, and LRPCA is homogeneous: the same relative error at every
    scale."""
    p = datasets.rpca_problem(jax.random.key(11), 300, 300, 5, 0.1)
    model = rpca.pretrained(0.1, n=300)
    errors = []
    for c in (1e-3, 1.0, 1e3):
        out = model(p.Y * c, max_iter=30, X_star=p.X * c)
        assert int(out.status) == Status.MAX_ITER
        errors.append(float(out.error))
    assert max(errors) <= 1e-4
    np.testing.assert_allclose(errors, errors[1], rtol=0.05)  # float32 rounding of tiny errors


def test_a_shipped_model_far_from_its_regime_says_so():
    """A user's matrix (300 × 300, rank 3, O(1) entries, 5 % outliers): with outliers the size of
    X's entries the shipped model (α = 0.05 served by the α = 0.1 one) recovers X; with outliers ten
    times larger its thresholds fall below the error, S comes out dense and X wrong. That run
    returned a 98 % error with a plausible residual; it is now UNRELIABLE, warns with what to do,
    and is not raised (the answer is returned)."""
    k1, k2, k3, k4 = jax.random.split(jax.random.key(1), 4)
    X = jax.random.normal(k1, (300, 3)) @ jax.random.normal(k2, (3, 300)) / 3
    mask = jax.random.uniform(k3, (300, 300)) < 0.05
    noise = jax.random.uniform(k4, (300, 300), minval=-1.0, maxval=1.0)
    model = rpca.pretrained(0.05, n=300)
    assert model.alpha == 0.1
    good = model(X + jnp.where(mask, noise, 0.0), rank=3, tol=1e-5, X_star=X)
    assert int(good.status) == Status.CONVERGED and float(good.error) < 1e-3
    assert abs(float(good.density) - float(jnp.mean(mask))) < 1e-2
    with pytest.warns(UserWarning, match=r"S is dense .* UNRELIABLE.*rpca\.scaledgd") as said:
        bad = model(X + jnp.where(mask, 10 * noise, 0.0), rank=3, tol=1e-5, X_star=X)
    assert said[0].filename == __file__
    assert int(bad.status) == Status.UNRELIABLE and float(bad.density) > 0.5
    assert float(bad.error) > 1e-2  # what the status warns of


def test_a_dense_sparse_part_is_unreliable_under_jit_and_vmap_too():
    """The status is computed in the program: a traced run reports UNRELIABLE without a warning,
    per point of a vmapped sweep, and throw=True does not raise for it."""
    p = datasets.rpca_problem(jax.random.key(3), 40, 40, 2, 0.1)

    def run(z):
        return rpca.lrpca(p.Y, 2, jnp.full(4, 1.0) * z, jnp.full(3, 0.5)).status

    statuses = jax.jit(jax.vmap(run))(jnp.array([1e-3, 0.1]))
    assert [Status.describe(s) for s in statuses] == ["UNRELIABLE", "MAX_ITER"]
