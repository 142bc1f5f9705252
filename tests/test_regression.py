"""Rescaled softmax regression (float64): closed forms vs autodiff (dense and sparse A), the
paper's Hessian erratum, the B split, Newton's convergence orders, the sketch's ε₀, trivial
minimisers, theorem helpers, the in-context shift, vmap, and bad input / overflow errors."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.experimental import sparse

from lowrank_jax import Status, transforms
from lowrank_jax import regression as rg
from lowrank_jax.regression import sketch


def make_problem(n=400, d=6, seed=0, w=3.0, density=None):
    k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
    A = jax.random.normal(k1, (n, d), jnp.float64) / jnp.sqrt(n)
    if density is not None:
        A = A * (jax.random.uniform(k3, (n, d)) < density)
    b = jax.random.dirichlet(k2, jnp.ones(n, jnp.float64))
    return A, b, jnp.full(n, w, jnp.float64)


@pytest.mark.parametrize("kind", rg.KINDS)
@pytest.mark.parametrize("layout", ["dense", "bcoo"])
def test_gradient_and_hessian_equal_autodiff(kind, layout, x64):
    A, b, w = make_problem(density=0.3 if layout == "bcoo" else None)
    A_in = sparse.BCOO.fromdense(A) if layout == "bcoo" else A
    A_rs = rg.as_design(A_in)
    f = lambda x: rg.loss(x, A, b, w, kind)  # noqa: E731  (autodiff through the dense loss)
    grad_f, hess_f = jax.jit(jax.grad(f)), jax.jit(jax.hessian(f))  # one program each, not op by op
    for seed in range(3):
        x = 0.5 * jax.random.normal(jax.random.key(10 + seed), (A.shape[1],), jnp.float64)
        g_ref, H_ref = grad_f(x), hess_f(x)
        for M in (A_in, A_rs):
            g, H = rg.gradient(x, M, b, w, kind), rg.hessian(x, M, b, w, kind)
            assert float(jnp.linalg.norm(g - g_ref) / jnp.linalg.norm(g_ref)) < 1e-10
            assert float(jnp.linalg.norm(H - H_ref) / jnp.linalg.norm(H_ref)) < 1e-10
        np.testing.assert_allclose(rg.loss(x, A_rs, b, w, kind), f(x), rtol=1e-12)


@pytest.mark.parametrize("kind", rg.KINDS)
def test_loss_gradient_and_hessian_against_an_independent_loss(kind, x64):
    """The loss written here from the note's definition, L = ½‖u − ⟨u, 1⟩ b‖² + ½‖diag(w) A x‖², and
    its autodiff derivatives, against the library's loss and closed forms, with a weight per row
    and a b off the simplex (both sides of the test above share the library's loss)."""
    rng = np.random.default_rng(5)
    n, d = 30, 4
    A = jnp.asarray(rng.standard_normal((n, d)) / np.sqrt(n))
    b, w = jnp.asarray(rng.standard_normal(n)), jnp.asarray(rng.uniform(0.0, 3.0, n))
    u_of = {"exp": jnp.exp, "cosh": jnp.cosh, "sinh": jnp.sinh}[kind]

    def loss(x):
        u = u_of(A @ x)
        return 0.5 * jnp.sum((u - jnp.sum(u) * b) ** 2) + 0.5 * jnp.sum((w * (A @ x)) ** 2)

    grad_loss, hess_loss = jax.jit(jax.grad(loss)), jax.jit(jax.hessian(loss))
    for seed in range(3):
        x = jnp.asarray(0.7 * np.random.default_rng(seed).standard_normal(d))
        np.testing.assert_allclose(rg.loss(x, A, b, w, kind), loss(x), rtol=1e-13)
        np.testing.assert_allclose(
            rg.gradient(x, A, b, w, kind), grad_loss(x), rtol=1e-11, atol=1e-13
        )
        np.testing.assert_allclose(
            rg.hessian(x, A, b, w, kind), hess_loss(x), rtol=1e-11, atol=1e-13
        )


@pytest.mark.parametrize("n, d, seed", [(50, 4, 1), (50, 2, 2), (200, 2, 1), (50, 3, 1)])
def test_exact_and_diagonal_newton_stay_put_along_the_null_space_of_a(x64, n, d, seed):
    """A without full column rank: H = Aᵀ(B + W²)A is singular, to rounding. Its Cholesky or LU
    solve moved x by O(1) along null(A) every step (the loss and gradient looked converged; ‖x‖
    reached 17 after 100 steps). The direction is minimum-norm in the units where A's columns have
    norm 1, y = diag(‖a_j‖) x, so it leaves y's component along that matrix's null space,
    diag(‖a_j‖) n, where x0 put it: in x, ⟨x, diag(‖a_j‖²) n⟩ stays put. With d = 2 or 3 the H that
    the solver forms from n-term sums has its zero eigenvalue at about ε·max|μ|, above the
    d·ε·max|μ| cut-off of a matrix known to working precision: counted as signal, it moved x along
    null(A) by 0.2 to 2.3 in 30 steps (on a GPU the same happened with d = 4). The cut-off is now
    d·√n·ε·max|μ|, the rounding of n-term sums."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d)) / np.sqrt(n)
    A[:, d - 1] = 3 * A[:, 0] if d == 2 else A[:, 0] + A[:, 1]
    null = np.array([3.0, -1.0]) if d == 2 else np.r_[1.0, 1.0, np.zeros(d - 3), -1.0]
    A, b, null = (
        jnp.asarray(A),
        jnp.asarray(rng.dirichlet(np.ones(n))),
        jnp.asarray(null / np.linalg.norm(null)),
    )
    x0 = jnp.asarray(0.1 * rng.standard_normal(d))
    m = jnp.sum(A * A, axis=0) * null  # the null direction in unit-column units, in x
    for method in ("exact", "diagonal"):
        short = rg.newton_solve(A, b, 1.0, x0, "exp", method, max_iter=10, tol=None)
        long = rg.newton_solve(A, b, 1.0, x0, "exp", method, max_iter=200, tol=None)
        for out in (short, long):
            np.testing.assert_allclose(out.x @ m, x0 @ m, atol=1e-12)
        assert float(long.grad_norm) < 1e-12
        if method == "exact":  # converged in 10 steps, and stays there
            np.testing.assert_allclose(long.x, short.x, atol=1e-10)


def test_paper_printed_hessian_is_wrong_for_cosh_and_sinh(x64):
    """Def. C.2 prints B_rank with u; the derivation (Def. B.5) has v. Same for exp (v = u) only.
    (w = 0, so that the regulariser's W² does not hide the error, and b of unit-size entries, so
    that the rank-one terms matter.)"""
    A, _, w = make_problem(w=0.0)
    b = jax.random.normal(jax.random.key(2), (A.shape[0],), jnp.float64)
    x = 0.5 * jax.random.normal(jax.random.key(1), (A.shape[1],), jnp.float64)
    for kind in rg.KINDS:
        p = rg.parts(x, A, b, kind)
        q = {"exp": 0.0, "cosh": -1.0, "sinh": 1.0}[kind]  # v∘v = u∘u + q
        ub = p.u * b
        B_printed = (
            -jnp.outer(p.u, ub)
            - jnp.outer(ub, p.u)
            + jnp.dot(b, b) * jnp.outer(p.u, p.u)
            + jnp.diag((p.u + p.c) * p.u + q - jnp.dot(p.c, b) * p.u)
        )
        H_printed = A.T @ (B_printed + jnp.diag(w**2)) @ A
        H = rg.hessian(x, A, b, w, kind)
        rel = float(jnp.linalg.norm(H_printed - H) / jnp.linalg.norm(H))
        if kind == "exp":
            assert rel < 1e-12
        else:  # wrong by 1e9 times the rounding level (the closed form here agrees to 1e-12)
            assert rel > 1e-3
        # The v-based split is exact: A^T (B_rank + diag(B_diag) + W^2) A = H.
        B_rank, B_diag = rg.curvature_split(x, A, b, kind)
        np.testing.assert_allclose(
            A.T @ (B_rank + jnp.diag(B_diag + w**2)) @ A, H, rtol=1e-10, atol=1e-12
        )
        np.testing.assert_allclose(
            B_diag + w**2, rg.diagonal_curvature(x, A, b, w, kind), rtol=1e-12
        )


@pytest.fixture(scope="module")
def exp_instance():
    with jax.enable_x64(True):
        A, b, w = make_problem(n=2000, d=10)
        x_star = rg.newton_solve(A, b, w, jnp.zeros(10), "exp", "exact", max_iter=30, tol=None).x
        x0 = x_star + 0.05 * jax.random.normal(jax.random.key(3), (10,), jnp.float64)
        yield A, b, w, x_star, x0


def test_exact_newton_is_quadratic_diagonal_and_sketch_linear(exp_instance, x64):
    A, b, w, x_star, x0 = exp_instance
    assert float(jnp.linalg.norm(rg.gradient(x_star, A, b, w))) < 1e-12
    assert float(jnp.linalg.norm(x_star)) > 0.05  # exp has a non-trivial minimiser
    # The theorem's convexity (Lemma C.4: ∇²L ≻ 0) holds at x* and at the start of this instance.
    assert (
        float(rg.psd_certificate(x_star, A, b, w)) > 0
        and float(rg.psd_certificate(x0, A, b, w)) > 0
    )
    run = functools.partial(rg.newton_solve, A, b, w, x0, "exp", tol=None, x_star=x_star)
    exact = np.asarray(run("exact", max_iter=6).history["error"])
    # r_{t+1} ≤ C r_t²: the exponent of the error doubles (until the float64 floor).
    assert exact[2] < 1e-10 and exact[2] <= 10 * exact[1] ** 2 and exact[1] <= 10 * exact[0] ** 2
    # … and the contraction factor itself collapses (r₂/r₁ = C r₁ ≪ r₁/r₀ = C r₀): a fast but linear
    # method has r₂/r₁ ≈ r₁/r₀ and fails this, however small its rate.
    assert exact[2] / exact[1] <= 1e-3 * (exact[1] / exact[0])
    diag = np.asarray(run("diagonal", max_iter=12).history["error"])
    sk = np.asarray(run("sketch", max_iter=25, key=jax.random.key(1)).history["error"])
    # Scores computed once (at x0) and reused: sampling stays unbiased, the contraction barely
    # changes.
    stale = np.asarray(
        rg.newton_solve(
            A,
            b,
            w,
            x0,
            "exp",
            "sketch",
            max_iter=25,
            tol=None,
            x_star=x_star,
            key=jax.random.key(1),
            rescore=100,
        ).history["error"]
    )
    for err in (diag, sk, stale):
        ratios = err[1:6] / err[:5]
        assert np.all(ratios < 0.5)  # linear contraction …
        assert np.min(err) <= 1e-10  # … down to 1e-10
    # the exact Hessian contracts fastest
    assert exact[1] / exact[0] < diag[1] / diag[0] < sk[1] / sk[0]


def test_pcg_refinement_reaches_the_diagonal_direction(exp_instance, x64):
    A, b, w, x_star, x0 = exp_instance
    diag = rg.newton_solve(A, b, w, x0, "exp", "diagonal", max_iter=1).x
    for m in (40, 400):  # a poor and a fair preconditioner: CG fixes both in d steps
        one = rg.newton_solve(A, b, w, x0, "exp", "sketch", max_iter=1, refine=10, sketch_size=m).x
        np.testing.assert_allclose(one, diag, rtol=1e-9, atol=1e-12)
    # k = 1 is Algorithm 1's direction H̃⁻¹g rescaled to minimise the quadratic model along it.
    alg1 = rg.newton_solve(A, b, w, x0, "exp", "sketch", max_iter=1, key=jax.random.key(2)).x
    k1 = rg.newton_solve(
        A, b, w, x0, "exp", "sketch", max_iter=1, refine=1, key=jax.random.key(2)
    ).x
    cos = jnp.dot(alg1 - x0, k1 - x0) / (jnp.linalg.norm(alg1 - x0) * jnp.linalg.norm(k1 - x0))
    np.testing.assert_allclose(cos, 1.0, rtol=1e-12)
    # Two steps from one draw per solve, sampled by τ(A)·D: the diagonal method's rate to 1e-10.
    tau = sketch.leverage_scores(A)
    err = np.asarray(
        rg.newton_solve(
            A,
            b,
            w,
            x0,
            "exp",
            "sketch",
            max_iter=8,
            tol=None,
            x_star=x_star,
            scores=tau,
            refine=2,
            resample=100,
            rescore=100,
        ).history["error"]
    )
    assert err[5] <= 1e-10 and np.all(err[1:4] / err[:3] < 0.05)


def test_carried_Ax_does_not_drift(exp_instance, x64):
    """The solver carries z = Ax and updates it by AΔ instead of recomputing: the loss it records at
    step t must be the loss of the iterate it returns after t steps."""
    A, b, w, _, x0 = exp_instance
    for kw in (
        dict(method="exact"),
        dict(method="sketch", refine=3),
        dict(method="sketch", line_search=True),
    ):
        run = rg.newton_solve(A, b, w, 3 * x0, "exp", max_iter=7, tol=None, **kw)
        for t in (2, 6):
            xt = rg.newton_solve(A, b, w, 3 * x0, "exp", max_iter=t, tol=None, **kw).x
            np.testing.assert_allclose(run.history["loss"][t], rg.loss(xt, A, b, w), rtol=1e-12)
            np.testing.assert_allclose(
                run.history["grad_norm"][t],
                jnp.linalg.norm(rg.gradient(xt, A, b, w)),
                rtol=1e-6,
                atol=1e-13,
            )


def test_sketched_hessian_meets_the_requested_accuracy_whp(exp_instance, x64):
    A, b, w, x_star, _ = exp_instance
    D = rg.diagonal_curvature(x_star, A, b, w)
    H = A.T @ (D[:, None] * A)
    eps, delta = 0.3, 0.1
    m = sketch.sketch_size(A.shape[1], eps, delta)
    for method in ("exact", "approx"):
        errs = [
            float(
                rg.approximation_error(
                    sketch.sampled_gram(jax.random.key(k), A, D, m, method=method), H
                )
            )
            for k in range(20)
        ]
        assert np.mean(np.array(errs) <= eps) >= 0.9, (method, errs)
    # Approximate leverage scores are within a constant factor of the exact ones.
    tau = sketch.leverage_scores(A, D)
    approx = sketch.approx_leverage_scores(jax.random.key(0), A, D)
    np.testing.assert_allclose(float(jnp.sum(tau)), A.shape[1], rtol=1e-10)
    ratio = np.asarray(approx / tau)
    assert 0.2 < np.quantile(ratio, 0.01) and np.quantile(ratio, 0.99) < 5


@functools.partial(jax.jit, static_argnames=("n", "d", "hot", "m"))
def _coherent_sampling_trial(keys, *, n, d, hot, m):
    """ε₀ of uniform, exact-leverage and approximate-leverage samples of m rows (one of each per
    key) on a coherent design: A Gaussian/√n with its first ``hot`` rows scaled 30x, b uniform on
    the simplex, w = 3, D = B_diag + W² at a random x. Returns them, the approximate scores, τ and
    D. One program: eager ops, closure-constant arrays and ``jax.random.dirichlet`` compile much
    slower."""
    k_a, k_b, k_x = jax.random.split(jax.random.key(0), 3)
    A = (jax.random.normal(k_a, (n, d), jnp.float64) / jnp.sqrt(n)).at[:hot].multiply(30.0)
    e = jax.random.exponential(k_b, (n,), jnp.float64)
    b, w = e / jnp.sum(e), jnp.full(n, 3.0, jnp.float64)
    D = rg.diagonal_curvature(0.3 * jax.random.normal(k_x, (d,), jnp.float64), A, b, w)
    H = A.T @ (D[:, None] * A)
    tau = sketch.leverage_scores(A, D)

    def one(key):
        idx = jax.random.randint(key, (m,), 0, n)  # p_i = 1/n: weights D_i/(m p_i) = D_i n/m
        uniform = rg.approximation_error((A[idx] * (D[idx] * n / m)[:, None]).T @ A[idx], H)
        approx = sketch.approx_leverage_scores(jax.random.fold_in(key, 1), A, D)
        exact_err, approx_err = (
            rg.approximation_error(sketch.sampled_gram(key, A, D, m, scores=sc), H)
            for sc in (tau, approx)
        )
        return uniform, exact_err, approx_err, approx

    return jax.vmap(one)(keys), tau, D


def test_leverage_sampling_beats_uniform_on_a_coherent_design(x64):
    """A coherent design (1 % of the rows scaled 30x hold ~90 % of the leverage) at m ≈ n/9 rows:
    leverage-score sampling (exact and approximate scores) meets the requested ε in ≥ 90 % of keys,
    uniform sampling with the same unbiased estimator D_i/(m p_i) misses it in most keys."""
    n, d, hot = 4000, 8, 40
    eps, delta = 0.5, 0.1
    m = sketch.sketch_size(d, eps, delta)
    assert m < n / 8
    (uniform, exact, approx, scores), tau, D = _coherent_sampling_trial(
        jax.random.split(jax.random.key(0), 20), n=n, d=d, hot=hot, m=m
    )
    assert float(jnp.min(D)) > 0  # SubSample's precondition
    np.testing.assert_allclose(float(jnp.sum(tau)), d, rtol=1e-10)
    assert float(jnp.sum(tau[:hot])) > 0.8 * d  # the design is coherent
    assert np.mean(np.asarray(uniform) > eps) >= 0.75, uniform
    for method, errs in (("exact", exact), ("approx", approx)):
        assert np.mean(np.asarray(errs) <= eps) >= 0.9, (method, errs)
    # Approximate scores find the high-leverage rows: they are the top `hot`, and p_i ≥ β τ_i / d
    # (sketch_size's condition) holds with β ≥ 0.1, against β = min d/(n τ_i) < 0.01 for uniform.
    for approx_k in scores[:5]:
        assert set(np.argsort(-np.asarray(approx_k))[:hot].tolist()) == set(range(hot))
        beta = float(jnp.min(approx_k / jnp.sum(approx_k) * d / tau))
        assert beta >= 0.1, beta
    assert float(jnp.min(d / (n * tau))) < 0.01


def _check_lemma_6_5(A, b, w, x_star, x0, m):
    """Ten sketched runs of 4 steps from x0 with m sampled rows: the measured ε₀ of the first three
    sketched Hessians is ≤ 0.05 in at least 90 % of them, and every step contracts by ≤ 0.4 and by
    at most 2.5 ε₀."""
    run = jax.jit(
        lambda key: rg.newton_solve(
            A,
            b,
            w,
            x0,
            "exp",
            "sketch",
            max_iter=4,
            tol=None,
            x_star=x_star,
            measure_eps=True,
            sketch_size=m,
            key=key,
        )
    )
    eps, ratios = [], []
    for k in range(10):
        r = run(jax.random.key(k))
        e = np.asarray(r.history["error"])
        eps.append(np.asarray(r.history["eps0"])[:3])
        ratios.append(e[1:4] / e[:3])
    eps, ratios = np.concatenate(eps), np.concatenate(ratios)
    assert np.mean(eps <= 0.05) >= 0.9, eps
    assert np.all(ratios <= 0.4) and np.all(ratios <= 2.5 * eps), (ratios, eps)


def test_lemma_6_5_contraction_at_a_small_eps0(exp_instance, x64):
    """Gotcha G5: Lemma 6.5's 0.4 contraction needs ε₀ ≲ 0.089, which Algorithm 1's ε₁ = Θ(1) does
    not give. With the sample size of the Chernoff bound at ε₀ = 0.05, δ = 0.1
    (sketch_size(d, 0.05, 0.1)), the measured ε₀ of every sketched Hessian (against the exact one,
    at the iterate) is ≤ 0.05 in at least 90 % of the steps, every step contracts by ≤ 0.4, and by
    at most 2.5 ε₀: near x* the lemma's bound 2(ε₀ + M r/(l − M r)) is dominated by 2ε₀."""
    A, b, w, x_star, x0 = exp_instance
    _check_lemma_6_5(A, b, w, x_star, x0, sketch.sketch_size(A.shape[1], 0.05, 0.1))


def test_lemma_6_5_contraction_when_the_sample_is_a_tenth_of_the_rows(x64):
    """The test above draws m = 56 516 rows from n = 2000, so its sampled Hessians are nearly exact.
    Here d = 4 (m = sketch_size(4, 0.05, 0.1) = 18 697) from n = 200 000 rows: m/n = 0.09, and the
    same claims must hold. (w = 4: at this n the largest n·b_i of the Dirichlet b is about 12, and
    w = 3 left one row with D = B_diag + W² < 0, which the sketched method refuses, Lemma 6.4.)"""
    n, d = 200_000, 4
    A, b, w = make_problem(n=n, d=d, w=4.0)
    x_star = rg.newton_solve(A, b, w, jnp.zeros(d), "exp", "exact", max_iter=30, tol=None).x
    x0 = x_star + 0.05 * jax.random.normal(jax.random.key(3), (d,), jnp.float64)
    m = sketch.sketch_size(d, 0.05, 0.1)
    assert m < n / 10
    _check_lemma_6_5(A, b, w, x_star, x0, m)


def test_measured_eps0_is_recorded(exp_instance, x64):
    A, b, w, x_star, x0 = exp_instance
    res = rg.newton_solve(A, b, w, x0, "exp", "diagonal", max_iter=3, measure_eps=True)
    x = x0
    H_exact = rg.hessian(x, A, b, w)
    H_diag = A.T @ (rg.diagonal_curvature(x, A, b, w)[:, None] * A)
    np.testing.assert_allclose(
        res.history["eps0"][0], rg.approximation_error(H_diag, H_exact), rtol=1e-8
    )


def test_sinh_minimiser_is_zero_and_cosh_is_even(x64):
    A, b, w = make_problem(n=300, d=5, w=1.0)
    x0 = 0.3 * jax.random.normal(jax.random.key(4), (5,), jnp.float64)
    sol = rg.newton_solve(A, b, w, x0, "sinh", "exact", max_iter=40, tol=1e-12, line_search=True)
    assert float(jnp.linalg.norm(sol.x)) < 1e-10
    assert float(rg.loss(jnp.zeros(5), A, b, w, "sinh")) == 0.0
    for seed in range(3):
        x = jax.random.normal(jax.random.key(seed), (5,), jnp.float64)
        np.testing.assert_allclose(
            rg.loss(x, A, b, w, "cosh"), rg.loss(-x, A, b, w, "cosh"), rtol=1e-13
        )
    assert float(jnp.linalg.norm(rg.gradient(jnp.zeros(5), A, b, w, "cosh"))) == 0.0


def test_theorem_weight_rule_certifies_convexity(x64):
    A, b, _ = make_problem(n=200, d=4)
    x = 0.2 * jax.random.normal(jax.random.key(5), (4,), jnp.float64)
    l = 0.5
    R0 = rg.radius_R0(x, A, b)
    sig = rg.sigma_min(A)
    for part in (1, 2):
        w = rg.weight_rule(R0, l, sig, part=part)
        assert float(rg.psd_certificate(x, A, b, jnp.full(200, w))) >= l
    # Part 2: W² approximates B + W² within 10 %.
    w = rg.weight_rule(R0, l, sig, part=2)
    B_rank, B_diag = rg.curvature_split(x, A, b)
    full = B_rank + jnp.diag(B_diag + w**2)
    lam = jnp.linalg.eigvalsh(jnp.linalg.solve(full, jnp.eye(200) * w**2))
    assert float(lam.min()) >= 0.9 and float(lam.max()) <= 1.1
    with pytest.raises(ValueError, match="n >= d"):
        rg.sigma_min(A[:3])


def test_weight_rule_matches_lemma_c4_and_its_inputs(x64):
    """w² = 10R₀⁴ + l/σ_min(A)² (part 1) or 200R₀⁴ + l/σ_min(A)² (part 2), Lemma C.4 (note §2.4),
    with R₀ = max{‖u‖, ‖v‖, ‖b‖, ‖c‖, 1} and σ_min recomputed here in NumPy."""
    A, b, _ = make_problem(n=200, d=4)
    An, bn = np.asarray(A), np.asarray(b)
    sig = float(rg.sigma_min(A))
    np.testing.assert_allclose(sig, np.linalg.svd(An, compute_uv=False).min(), rtol=1e-12)
    for kind, (u_fn, v_fn) in {"exp": (np.exp, np.exp), "cosh": (np.cosh, np.sinh)}.items():
        for scale in (0.2, 30.0):  # R₀ ≈ √n (u ≈ 1) and R₀ ≫ √n (large Ax)
            x = scale * np.asarray(jax.random.normal(jax.random.key(5), (4,), jnp.float64))
            u, v = u_fn(An @ x), v_fn(An @ x)
            c = u - u.sum() * bn
            R0_np = max(
                np.linalg.norm(u), np.linalg.norm(v), np.linalg.norm(bn), np.linalg.norm(c), 1.0
            )
            R0 = float(rg.radius_R0(jnp.asarray(x), A, b, kind))
            np.testing.assert_allclose(R0, R0_np, rtol=1e-12)
            for l in (0.5, 40.0):
                for part, const in ((1, 10.0), (2, 200.0)):
                    w = float(rg.weight_rule(R0, l, sig, part=part))
                    np.testing.assert_allclose(w**2, const * R0_np**4 + l / sig**2, rtol=1e-12)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda A, b, w, x: rg.sigma_min(A), "sigma_min: the theorem needs n >= d"),
        (lambda A, b, w, x: rg.radius_R0(x, A, b), "radius_R0: the theorem needs n >= d"),
        (
            lambda A, b, w, x: rg.psd_certificate(x, A, b, w),
            "psd_certificate: the theorem needs n >= d",
        ),
        (lambda A, b, w, x: rg.psd_certificate(x, sparse.BCOO.fromdense(A), b, w), "n >= d"),
        # σ_min = 0 when n < d
        (lambda A, b, w, x: rg.weight_rule(1.0, 0.5, 0.0), "sigma must be positive"),
        (lambda A, b, w, x: rg.weight_rule(1.0, -0.5, 0.3), "l must be positive"),
        (lambda A, b, w, x: rg.weight_rule(0.5, 0.5, 0.3), "R0 must be >= 1"),
        (lambda A, b, w, x: rg.weight_rule(1.0, 0.5, 0.3, part=3), "part must be 1 or 2"),
    ],
)
def test_theorem_helpers_refuse_wide_designs(call, match, x64):
    """n < d: σ_min(A) = 0, ∇²L is singular; the helpers refuse rather than certify by rounding."""
    A, b, w = make_problem(n=4, d=6)
    x = 0.1 * jnp.ones(6)
    # The loss itself is defined for n < d (it is only the theorem that needs full column rank).
    assert np.isfinite(float(rg.loss(x, A, b, w)))
    with pytest.raises(ValueError, match=match):
        call(A, b, w, x)


def test_theorem_helpers_do_not_certify_a_tall_rank_deficient_design(x64):
    """n ≥ d but a column is the sum of two others: σ_min(A) and λ_min(∇²L) are rounding (1.5e-16
    and +5.3e-16 were returned, a "certificate" of strong convexity), now 0; weight_rule refuses
    the 0. A full-rank design keeps its exact values."""
    A, b, w = make_problem(n=50, d=4)
    x = 0.1 * jnp.ones(4)
    assert float(rg.sigma_min(A)) == pytest.approx(
        float(np.linalg.svd(np.asarray(A))[1][-1]), rel=1e-12
    )
    lam = np.linalg.eigvalsh(np.asarray(rg.hessian(x, A, b, w)))[0]
    assert float(rg.psd_certificate(x, A, b, w)) == pytest.approx(lam, rel=1e-10) and lam > 0
    A_def = A.at[:, 3].set(A[:, 0] + A[:, 1])
    assert float(rg.sigma_min(A_def)) == 0.0
    w0 = jnp.zeros_like(w)  # no W² term: the Hessian is singular along null(A)
    assert float(rg.psd_certificate(x, A_def, b, w0)) == 0.0
    with pytest.raises(ValueError, match="sigma must be positive"):
        rg.weight_rule(1.0, 0.5, rg.sigma_min(A_def))


def test_certificate_cut_off_is_the_rounding_of_n_term_sums(x64):
    """n = 1000, d = 2, A's columns proportional: H is singular, and the λ_min that eigvalsh returns
    is up to 2.8·ε·max|λ| (either sign), above the d·ε cut-off of a matrix known to working
    precision; these points were "certified" at ±1e-14. With the cut-off d·√n·ε·max|λ| they read 0,
    while a full-rank design's λ_min, far above it, is kept."""
    n, d = 1000, 2
    for seed, kind in ((9, "cosh"), (15, "sinh"), (24, "exp")):
        rng = np.random.default_rng(seed)
        A = rng.standard_normal((n, d)) / np.sqrt(n)
        A[:, 1] = 3 * A[:, 0]
        b, x = jnp.asarray(rng.dirichlet(np.ones(n))), jnp.asarray(rng.standard_normal(d))
        assert float(rg.psd_certificate(x, jnp.asarray(A), b, 1.0, kind)) == 0.0
        A[:, 1] = rng.standard_normal(n) / np.sqrt(n)
        lam = np.linalg.eigvalsh(np.asarray(rg.hessian(x, jnp.asarray(A), b, 1.0, kind)))[0]
        assert float(rg.psd_certificate(x, jnp.asarray(A), b, 1.0, kind)) == pytest.approx(
            lam, rel=1e-10
        )


def test_sketch_size_grows_with_the_bernstein_factor_beyond_eps_one():
    """m = ⌈2(1 + ε/3)(d/β) log(2d/δ)/ε²⌉ with the factor at least 8/3: the ε ≤ 1 sizes are the
    usual ones, and above 1 the factor 8/3 would undercount (at ε = 3 it is 4)."""
    for eps, factor in ((0.1, 8 / 3), (1.0, 8 / 3), (3.0, 4.0), (6.0, 6.0)):
        expected = int(np.ceil(factor * 10 / 0.5 * np.log(2 * 10 / 0.05) / eps**2))
        assert sketch.sketch_size(10, eps, 0.05, 0.5) == expected


def test_icl_shift_reproduces_the_step(exp_instance, x64):
    A, b, w, x_star, x0 = exp_instance
    x1 = x0 + 1e-3 * jax.random.normal(jax.random.key(6), x0.shape, jnp.float64)
    delta_b = rg.icl_shift(x0, x1, A, b)
    p0, p1 = rg.parts(x0, A, b, "exp"), rg.parts(x1, A, b, "exp")
    np.testing.assert_allclose(p1.u - p1.alpha * b, p0.u - p0.alpha * (b - delta_b), atol=1e-12)
    assert float(jnp.linalg.norm(delta_b)) <= float(rg.icl_bound(x0, x1, A, b))
    with pytest.raises(ValueError, match="α"):
        rg.icl_shift(jnp.zeros(10), x1, A, b, "sinh")
    # Rows in ± pairs (up to 1e-15): α = Σ sinh(Ax) cancels to rounding noise although u does not
    # vanish. Refused too, rather than a shift of size 1/eps whose sign is rounding.
    A_pm = jnp.concatenate([A[:50], -A[:50] * (1 + 1e-15)])
    b_pm = jnp.full(100, 0.01)
    alpha = rg.parts(x1, A_pm, b_pm, "sinh").alpha
    assert alpha != 0.0
    with pytest.raises(ValueError, match="zero to working precision"):
        rg.icl_shift(x1, x0, A_pm, b_pm, "sinh")


def test_icl_shift_and_bound_for_a_step_in_A(exp_instance, x64):
    """Lemma E.5 / Corollary F.2 part 2 (x fixed, A_t → A_{t+1}): the shift reproduces the step, is
    bounded by the constant with ‖x‖ ‖ΔA‖₂, and a step in both x and A is the sum of the two
    moves."""
    A, b, w, x_star, x0 = exp_instance
    dA = 1e-4 * jax.random.normal(jax.random.key(7), A.shape, jnp.float64)
    delta_b = rg.icl_shift(x0, x0, A, b, A_next=A + dA)
    p0, p1 = rg.parts(x0, A, b, "exp"), rg.parts(x0, A + dA, b, "exp")
    np.testing.assert_allclose(p1.u - p1.alpha * b, p0.u - p0.alpha * (b - delta_b), atol=1e-12)
    assert float(jnp.max(jnp.abs(dA @ x0))) < 0.01  # the corollary's condition
    bound = rg.icl_bound(x0, x0, A, b, A_next=A + dA)
    R = max(
        float(jnp.linalg.norm(A, 2)), float(jnp.linalg.norm(x0)), float(jnp.linalg.norm(b)), 4.0
    )
    n = A.shape[0]
    by_hand = (
        np.exp(2 * R**2)
        * (1 + np.sqrt(n) * float(jnp.linalg.norm(b)))
        * 2
        * np.sqrt(n)
        * float(jnp.linalg.norm(x0))
        * float(jnp.linalg.norm(dA, 2))
    )
    np.testing.assert_allclose(bound, by_hand, rtol=1e-10)
    assert 0 < float(jnp.linalg.norm(delta_b)) <= float(bound)
    x1 = x0 + 1e-3 * jax.random.normal(jax.random.key(6), x0.shape, jnp.float64)
    both = rg.icl_shift(x0, x1, A, b, A_next=A + dA)
    p2 = rg.parts(x1, A + dA, b, "exp")
    np.testing.assert_allclose(p2.u - p2.alpha * b, p0.u - p0.alpha * (b - both), atol=1e-12)
    with pytest.raises(ValueError, match="A_next must have the shape"):
        rg.icl_shift(x0, x1, A, b, A_next=A[:-1])
    with pytest.raises(ValueError, match="R must be"):
        rg.icl_bound(x0, x1, A, b, R=-5.0)


def test_vmap_over_b_and_w_equals_separate_solves(x64):
    A, b, w = make_problem(n=300, d=5)
    bs = jnp.stack([b, jnp.roll(b, 7), jnp.flip(b)])
    ws = jnp.stack([w, 2 * w, 4 * w])
    solve = lambda b, w: rg.newton_solve(A, b, w, jnp.zeros(5), "exp", "exact", max_iter=8).x  # noqa: E731
    batched = jax.vmap(solve)(bs, ws)
    for i in range(3):
        np.testing.assert_allclose(batched[i], solve(bs[i], ws[i]), rtol=1e-10, atol=1e-14)


def test_vmap_over_design_matrices_equals_separate_solves(x64):
    """A stack of dense instances A (3, n, d), each with its own b, through one vmapped solve."""
    problems = [make_problem(n=300, d=5, seed=s) for s in range(3)]
    As, bs = jnp.stack([p[0] for p in problems]), jnp.stack([p[1] for p in problems])
    w = problems[0][2]
    for method in ("exact", "sketch"):
        solve = lambda A, b: (
            rg.newton_solve(
                A,
                b,
                w,
                jnp.zeros(5),
                "exp",
                method,
                max_iter=6,  # noqa: E731
                key=jax.random.key(4),
            ).x
        )
        batched = jax.vmap(solve)(As, bs)
        for i in range(3):
            np.testing.assert_allclose(batched[i], solve(As[i], bs[i]), rtol=1e-10, atol=1e-13)
        # distinct instances, distinct solutions (the batch is not one problem broadcast)
        assert float(jnp.linalg.norm(batched[0] - batched[1])) > 1e-3


def test_newton_transformation_on_a_generic_loss(x64):
    """transforms.newton minimises a strictly convex non-quadratic function in a few steps."""
    f = lambda p: jnp.sum(jnp.exp(p["a"])) - jnp.sum(p["a"]) + 0.5 * jnp.sum((p["b"] - 2.0) ** 2)  # noqa: E731
    opt = transforms.newton(lambda p: jax.hessian(lambda v: f(unravel(v)))(ravel(p)))
    from jax.flatten_util import ravel_pytree

    params = {"a": jnp.array([1.0, -0.5]), "b": jnp.array([0.0])}
    flat, unravel = ravel_pytree(params)
    ravel = lambda p: ravel_pytree(p)[0]  # noqa: E731
    state = opt.init(params)

    @jax.jit  # one program for the step (op by op, each small op compiles on its own)
    def step(params, state):
        upd, state = opt.update(jax.grad(f)(params), state, params)
        return optax.apply_updates(params, upd), state

    for _ in range(8):
        params, state = step(params, state)
    np.testing.assert_allclose(params["a"], 0.0, atol=1e-12)
    np.testing.assert_allclose(params["b"], 2.0, atol=1e-12)


def test_line_search_converges_from_far_away(x64):
    A, b, w = make_problem(n=500, d=6, w=1.0)
    ref = rg.newton_solve(
        A, b, w, jnp.zeros(6), "exp", "exact", max_iter=40, tol=1e-11, line_search=True
    )
    starts = [3.0 * jnp.ones(6)] + [
        s * jax.random.normal(jax.random.key(k), (6,), jnp.float64)
        for k in range(4)
        for s in (1.0, 3.0)
    ]
    for x0 in starts:
        far = rg.newton_solve(A, b, w, x0, "exp", "exact", max_iter=60, tol=1e-11, line_search=True)
        n_iter = int(far.n_iter)
        # Quadratic convergence to the tolerance: the search must not stall once the decrease of a
        # step falls below the rounding of L (it did, at ‖∇L‖ ≈ 1e-7 – 1e-10, before the slack).
        assert n_iter <= 10 and float(far.grad_norm) <= 1e-11, (
            x0,
            n_iter,
            far.history["grad_norm"],
        )
        np.testing.assert_allclose(far.x, ref.x, atol=1e-8)


def test_line_search_rejects_a_trial_whose_loss_is_nan(x64):
    """sinh's loss is inf − inf = NaN once a trial step overflows. The backtracking test read
    "f(trial) > bound", which is False for NaN, so the full step was taken and the run ended
    non-finite (from this start: losses 761, 277, 101, then NaN), while halving the step 9 times
    gives a decrease. A NaN trial now counts as no decrease."""
    rng = np.random.default_rng(1)
    A, b = jnp.asarray(rng.normal(size=(12, 4))), jnp.asarray(rng.uniform(0, 1, size=12))
    x0 = jnp.array(
        [-3.2095667790469884, -1.5866569539917512, -1.210999156189313, -1.6952981726975476]
    )
    sol = rg.newton_solve(A, b, 0.01, x0, "sinh", "exact", max_iter=60, tol=1e-9, line_search=True)
    n = int(sol.n_iter)
    losses = np.asarray(sol.history["loss"][:n])
    assert np.all(np.isfinite(losses)) and np.all(np.isfinite(sol.x))
    assert np.all(np.diff(losses) <= 1e-12 * np.abs(losses[:-1]))  # Armijo: never uphill
    assert float(sol.grad_norm) <= 1e-9
    assert np.any(np.asarray(sol.history["step"][:n]) < 1)  # it did backtrack


def _indefinite_start():
    """A small exp instance (n = 12, d = 4, w = 0.1) and a start where ∇²L is indefinite."""
    rng = np.random.default_rng(102)
    A = jnp.asarray(0.5 * rng.standard_normal((12, 4)))
    b = jnp.asarray(rng.dirichlet(np.ones(12)))
    return A, b, jnp.full(12, 0.1), jnp.asarray(rng.standard_normal(4))


def test_damping_is_lambda_identity_in_the_newton_system(x64):
    """transforms.newton(…, damping=λ) and newton_solve(…, damping=λ) solve (H̃ + λI)Δ = g: compared
    with a hand solve, for an SPD and an indefinite H, and for each method's H̃."""
    rng = np.random.default_rng(0)
    Q = np.linalg.qr(rng.standard_normal((5, 5)))[0]
    g_flat = rng.standard_normal(5)
    params = {"a": jnp.zeros(2), "b": jnp.zeros(3)}
    for eigs in ([0.5, 1.0, 2.0, 4.0, 8.0], [-0.7, 0.2, 1.0, 3.0, 5.0]):
        H = Q @ np.diag(eigs) @ Q.T
        g = {"a": jnp.asarray(g_flat[:2]), "b": jnp.asarray(g_flat[2:])}
        for lam in (0.0, 0.3, 2.5):
            want = -np.linalg.solve(H + lam * np.eye(5), g_flat)
            opt = transforms.newton(lambda p: jnp.asarray(H), damping=jnp.asarray(lam))
            upd, _ = opt.update(g, opt.init(params), params)
            np.testing.assert_allclose(
                np.concatenate([upd["a"], upd["b"]]), want, rtol=1e-10, atol=1e-12
            )
    # The solver's step: x1 = x0 − (H̃(x0) + λI)⁻¹ ∇L(x0) with H̃ = ∇²L ("exact"), AᵀDA
    # ("diagonal"), and, through d + 2 preconditioned CG steps on the damped diagonal system,
    # "sketch".
    A, b, w = make_problem(n=200, d=5)
    x0 = 0.5 * jax.random.normal(jax.random.key(8), (5,), jnp.float64)
    lam = 0.7
    g = np.asarray(rg.gradient(x0, A, b, w))
    D = rg.diagonal_curvature(x0, A, b, w)
    assert float(jnp.min(D)) > 0  # the sketch needs D > 0
    H_exact, H_diag = np.asarray(rg.hessian(x0, A, b, w)), np.asarray(A.T @ (D[:, None] * A))
    for method, H, kw in (
        ("exact", H_exact, {}),
        ("diagonal", H_diag, {}),
        ("sketch", H_diag, dict(refine=7)),
    ):
        x1 = rg.newton_solve(A, b, w, x0, "exp", method, max_iter=1, damping=lam, **kw).x
        np.testing.assert_allclose(
            x1, x0 - np.linalg.solve(H + lam * np.eye(5), g), rtol=1e-9, atol=1e-12
        )


def test_newton_solve_steps_are_transforms_newton_updates(x64):
    """Each method's step in newton_solve is one ``transforms.newton`` update built from the public
    pieces: x1 = x0 + update with the curvature ∇²L ("exact", ``regression.hessian``), AᵀDA
    ("diagonal", D from ``regression.diagonal_curvature``) or the leverage-sampled AᵀD̃A ("sketch",
    the draw of iteration k from ``fold_in(key, k)``, sampled by τ(A)∘D), damped or not; and with
    ``resample`` = 2 the second sketched step reuses the first draw, kept in the state."""
    A, b, w = make_problem(n=200, d=5)
    x0 = 0.5 * jax.random.normal(jax.random.key(8), (5,), jnp.float64)
    key, tau, m = jax.random.key(6), sketch.leverage_scores(A), 60
    grad = lambda x: rg.gradient(x, A, b, w)  # noqa: E731
    D0 = rg.diagonal_curvature(x0, A, b, w)
    H_sketch = sketch.sampled_gram(jax.random.fold_in(key, 0), A, D0, m, scores=tau * D0)
    pieces = {
        "exact": (lambda x: rg.hessian(x, A, b, w), {}),
        "diagonal": (lambda x: A.T @ (rg.diagonal_curvature(x, A, b, w)[:, None] * A), {}),
        "sketch": (lambda x: H_sketch, dict(key=key, scores=tau, sketch_size=m)),
    }
    for lam in (0.0, 0.6):
        for method, (hess, kw) in pieces.items():
            opt = transforms.newton(hess, damping=lam)
            upd, state = opt.update(grad(x0), opt.init(x0), x0)
            want = optax.apply_updates(x0, upd)
            x1 = rg.newton_solve(A, b, w, x0, "exp", method, max_iter=1, damping=lam, **kw).x
            np.testing.assert_allclose(x1, want, rtol=1e-12, atol=1e-12)
            if method == "sketch":  # the kept draw: the same H̃ at the new gradient
                upd, _ = opt.update(grad(want), state, want)
                x2 = rg.newton_solve(
                    A,
                    b,
                    w,
                    x0,
                    "exp",
                    method,
                    max_iter=2,
                    tol=None,
                    damping=lam,
                    resample=2,
                    rescore=2,
                    **kw,
                ).x
                np.testing.assert_allclose(
                    x2, optax.apply_updates(want, upd), rtol=1e-12, atol=1e-12
                )
                assert float(jnp.linalg.norm(x2 - x1)) > 1e-3  # a real second step


def test_damping_and_line_search_rescue_an_indefinite_start(x64):
    """From a start with an indefinite Hessian the plain Newton step fails; damping alone (no line
    search) reaches a minimiser, contracting by λ/(λ + λ_min(∇²L(x*))) per step as the damped
    iteration's linearisation says, and the line search alone does too (reversing the uphill
    step)."""
    A, b, w, x0 = _indefinite_start()
    assert float(rg.psd_certificate(x0, A, b, w)) < 0
    plain = rg.newton_solve(
        A, b, w, x0, "exp", "exact", max_iter=60, tol=1e-10, x_star=x0, throw=False
    )
    # it overflows (DIVERGED, with a NaN iterate) or ends anywhere but at a minimiser (here:
    # MAX_ITER with L ≈ 7e34, crawling back from the 1e18 of its first step)
    reached = (
        int(plain.status) != Status.DIVERGED
        and float(jnp.linalg.norm(rg.gradient(plain.x, A, b, w))) <= 1e-8
        and float(rg.psd_certificate(plain.x, A, b, w)) > 0
    )
    assert not reached
    # the default throw=True raises on it, naming the way out
    if int(plain.status) == Status.DIVERGED:
        with pytest.raises(RuntimeError, match="damping, line_search=True"):
            rg.newton_solve(A, b, w, x0, "exp", "exact", max_iter=60, tol=1e-10)
    ls = rg.newton_solve(
        A, b, w, x0, "exp", "exact", max_iter=60, tol=1e-12, line_search=True, x_star=x0
    )
    x_star = ls.x
    assert int(ls.status) == Status.CONVERGED
    assert float(ls.grad_norm) <= 1e-12 and int(ls.n_iter) <= 15
    assert np.nanmin(np.asarray(ls.history["step"])) < 0  # an uphill direction was reversed
    l_min = float(rg.psd_certificate(x_star, A, b, w))
    assert l_min > 0  # a minimiser, not a saddle
    lam = 1.0
    damped = rg.newton_solve(
        A, b, w, x0, "exp", "exact", max_iter=60, tol=1e-10, damping=lam, x_star=x_star
    )
    assert float(damped.grad_norm) <= 1e-10
    np.testing.assert_allclose(damped.x, x_star, atol=1e-9)
    err = np.asarray(damped.history["error"])[: int(damped.n_iter)]
    window = (err[:-1] < 1e-4) & (err[1:] > 1e-9)  # linear phase, above the float floor
    rates, rate = err[1:][window] / err[:-1][window], lam / (lam + l_min)
    assert window.sum() >= 4 and np.all(rates <= 1.01 * rate) and rates[-1] >= 0.95 * rate, (
        rates,
        rate,
    )


@pytest.mark.parametrize(
    "call, err, match",
    [
        (lambda A, b, w: rg.loss(jnp.zeros(3), A, b, w), ValueError, "length d"),
        (lambda A, b, w: rg.loss(jnp.zeros(6), A, b[:5], w), ValueError, "b must have length"),
        (lambda A, b, w: rg.loss(jnp.zeros(6), A, b, -w), ValueError, "w must be non-negative"),
        (
            lambda A, b, w: rg.loss(jnp.zeros(6), A.at[0, 0].set(jnp.nan), b, w),
            ValueError,
            "A has non-finite",
        ),
        (
            lambda A, b, w: rg.loss(jnp.zeros(6), A, b.at[1].set(jnp.inf), w),
            ValueError,
            "b has non-finite",
        ),
        (lambda A, b, w: rg.loss(jnp.zeros(6), A, b, w, kind="tanh"), ValueError, "kind"),
        (
            lambda A, b, w: rg.loss(jnp.zeros(6), A, b, w[:5]),
            ValueError,
            "w must be a scalar or have length n",
        ),
        (
            lambda A, b, w: rg.gradient(jnp.zeros(6), A, b, w[:, None]),
            ValueError,
            "w must be a scalar or have length",
        ),
        (
            lambda A, b, w: rg.newton_solve(A, b, jnp.ones(7), jnp.zeros(6)),
            ValueError,
            "w must be a scalar or have",
        ),
        (
            lambda A, b, w: rg.loss(
                jnp.zeros(6), sparse.BCOO.fromdense(A.at[3, 2].set(jnp.inf)), b, w
            ),
            ValueError,
            "A has non-finite",
        ),
        (
            lambda A, b, w: rg.newton_solve(
                sparse.BCOO.fromdense(A.at[0, 1].set(jnp.nan)), b, w, jnp.zeros(6)
            ),
            ValueError,
            "A has non-finite",
        ),
        (
            lambda A, b, w: rg.newton_solve(A, b, w, jnp.zeros(6), method="bfgs"),
            ValueError,
            "method",
        ),
        (
            lambda A, b, w: rg.newton_solve(A * 40.0, b, w, jnp.full(6, 400.0)),
            ValueError,
            "the loss at x0 overflows",
        ),
        (
            lambda A, b, w: rg.newton_solve(
                A, b, w, jnp.zeros(6), method="sketch", scores=jnp.ones(5)
            ),
            ValueError,
            "scores must have length",
        ),
        (
            lambda A, b, w: rg.newton_solve(
                A, b, w, jnp.zeros(6), method="sketch", resample=3, rescore=4
            ),
            ValueError,
            "multiple of resample",
        ),
        (
            lambda A, b, w: rg.newton_solve(A, b, w, jnp.zeros(6), method="sketch", sketch_size=0),
            ValueError,
            "sketch_size must be an integer >= 1",
        ),
        (
            lambda A, b, w: rg.newton_solve(A, b, w, jnp.zeros(6), method="sketch", sketch_size=5),
            ValueError,
            "cannot span d = 6 columns",
        ),
        (
            lambda A, b, w: rg.newton_solve(
                A, b, w, jnp.zeros(6), method="sketch", scores=jnp.zeros(100)
            ),
            ValueError,
            "positive sum",
        ),
        (
            lambda A, b, w: rg.newton_solve(A, b, w, jnp.zeros(6), x_star=jnp.zeros(7)),
            ValueError,
            "x_star must have length d",
        ),
        (
            lambda A, b, w: rg.icl_bound(jnp.zeros(6), jnp.zeros(5), A, b),
            ValueError,
            "x_next must have the shape",
        ),
        (
            lambda A, b, w: rg.icl_shift(jnp.zeros(6), jnp.zeros(5), A, b),
            ValueError,
            "x_next must have the shape",
        ),
        # the overflow comes from b, not from Ax: the message must not send the user to rescale A or
        # x
        (
            lambda A, b, w: rg.newton_solve(A, jnp.full(100, 1e300), w, jnp.zeros(6)),
            ValueError,
            r"A, b or w are too large for the dtype \(rescale them\)",
        ),
    ],
)
def test_bad_input_and_overflow_are_reported(call, err, match, x64):
    A, b, w = make_problem(n=100, d=6)
    with pytest.raises(err, match=match):
        call(A, b, w)


def test_approximate_scores_ignore_a_zero_column(x64):
    """A zero column made R's diagonal 0 and every approximate score NaN, so method="sketch" failed
    even with damping. The scores now equal those of A without that column, up to the sketch's
    constant factor (checked against the exact scores), and the damped solve runs."""
    A, b, w = make_problem(n=200, d=6)
    Az = A.at[:, 2].set(0.0)
    exact = sketch.leverage_scores(jnp.delete(Az, 2, axis=1))
    approx = sketch.approx_leverage_scores(jax.random.key(0), Az, jl_cols=400)
    ratio = np.asarray(approx / exact)
    assert np.all(np.isfinite(ratio)) and 0.5 < ratio.min() and ratio.max() < 2.0
    out = rg.newton_solve(Az, b, w, jnp.zeros(6), method="sketch", damping=1e-2, max_iter=20)
    assert float(out.x[2]) == 0.0 and np.all(np.isfinite(np.asarray(out.x)))


def test_approximate_scores_follow_no_choice_of_lapack(x64):
    """τ_i ≈ ‖e_iᵀ X ((SX)ᵀ SX)^{+1/2} G‖²: a function of (SX)ᵀ SX, the data and the key alone. The
    code took V Σ⁻¹ G, which depends on the signs of the SVD's vectors (and, through R, of QR's
    rows); batched and single factorisations choose those differently: on a GPU, vmapped scores
    differed from single ones by 116 %. Checked against NumPy with R replaced by a random rotation
    of itself (the same RᵀR), with and without a zero column, and under vmap against single
    calls."""
    from lowrank_jax.regression import design

    rng = np.random.default_rng(3)
    key, k, t = jax.random.key(5), 56, 16
    k_sketch, kg = jax.random.split(key)
    for zero_column in (False, True):
        A = rng.standard_normal((300, 7))
        if zero_column:
            A[:, 3] = 0.0
        A = jnp.asarray(A)
        w = jnp.asarray(rng.uniform(0.5, 2.0, 300))
        SX = np.asarray(design.count_sketch(k_sketch, A, jnp.sqrt(w), k))
        G = np.asarray(jax.random.normal(kg, (7, t), jnp.float64)) / np.sqrt(t)
        rotation = np.linalg.qr(rng.standard_normal((7, 7)))[0]
        _, s, Vt = np.linalg.svd(rotation @ np.linalg.qr(SX, mode="r"))  # another factor, same RᵀR
        inv_s = np.where(s > s[0] * k * np.finfo(float).eps, 1.0 / s, 0.0)
        Z = (np.sqrt(np.asarray(w))[:, None] * np.asarray(A)) @ ((Vt.T * inv_s) @ (Vt @ G))
        want = np.sum(Z * Z, axis=1)
        got = sketch.approx_leverage_scores(key, A, w, sketch_rows=k, jl_cols=t)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-9, atol=1e-14 * want.max())
        ws = jnp.stack([w, w[::-1], jnp.ones(300)])
        batched = jax.vmap(
            lambda v: sketch.approx_leverage_scores(key, A, v, sketch_rows=k, jl_cols=t)
        )(ws)
        for b, v in zip(batched, ws):
            single = sketch.approx_leverage_scores(key, A, v, sketch_rows=k, jl_cols=t)
            np.testing.assert_allclose(np.asarray(b), np.asarray(single), rtol=1e-10)


def test_leverage_scores_of_a_rank_deficient_design(x64):
    """A column that is the sum of two others: the scores are those of A's column space (rank 5),
    from NumPy's SVD, and sum to the rank. A plain QR added spurious scores (up to 0.6 here, sum 6),
    and the approximate scores' near-zero pivot inflated them up to 4x; now they stay within the
    sketch's constant factor, in float64 and in float32."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((300, 6))
    A[:, 5] = A[:, 0] + A[:, 1]
    U, _, _ = np.linalg.svd(A, full_matrices=False)
    tau = np.sum(U[:, :5] ** 2, axis=1)
    exact = sketch.leverage_scores(jnp.asarray(A))
    np.testing.assert_allclose(exact, tau, atol=1e-12)
    np.testing.assert_allclose(float(jnp.sum(exact)), 5.0, rtol=1e-12)
    for dtype in (np.float64, np.float32):
        approx = sketch.approx_leverage_scores(
            jax.random.key(0), jnp.asarray(A.astype(dtype)), jl_cols=400
        )
        ratio = np.asarray(approx) / tau
        assert 0.5 < ratio.min() and ratio.max() < 3.0, (dtype, ratio.min(), ratio.max())


def test_overflow_reads_non_finite_alone_called_directly_and_under_jit_and_vmap(x64):
    """The plain functions return an overflow as inf/NaN, the same called directly and under
    jit/vmap, and only at the overflowing points, so a vmap over x keeps the finite ones (one error
    compiled into the program would abort the whole batch). None maps it to a finite number:
    psd_certificate's cut-off compared NaN eigenvalues and would have certified 0."""
    A, b, w = make_problem(n=100, d=6)
    xs = jnp.stack([jnp.zeros(6), jnp.full(6, 400.0 * 40.0), jnp.full(6, 0.01)])
    fns = {
        "loss": lambda x: rg.loss(x, A, b, w),
        "gradient": lambda x: rg.gradient(x, A, b, w),
        "hessian": lambda x: rg.hessian(x, A, b, w),
        "diagonal_curvature": lambda x: rg.diagonal_curvature(x, A, b, w),
        "curvature_split": lambda x: rg.curvature_split(x, A, b)[1],
        "radius_R0": lambda x: rg.radius_R0(x, A, b),
        "psd_certificate": lambda x: rg.psd_certificate(x, A, b, w),
    }
    for name, f in fns.items():
        assert not np.all(np.isfinite(f(xs[1]))), name
        batched = jax.jit(jax.vmap(f))(xs)
        assert not np.all(np.isfinite(batched[1])), name
        for i in (0, 2):
            np.testing.assert_allclose(batched[i], f(xs[i]), rtol=1e-10, atol=1e-12, err_msg=name)
    assert np.isnan(float(rg.psd_certificate(xs[1], A, b, w)))
    # float32 overflows much earlier: the Hessian is non-finite there, and newton_solve refuses such
    # a start by name, pointing to float64.
    A32, b32, w32 = (a.astype(jnp.float32) for a in (A, b, w))
    x32 = jnp.full(6, 30.0, jnp.float32)
    assert not np.all(np.isfinite(rg.hessian(x32, A32 * 10, b32, w32, "cosh")))
    with pytest.raises(ValueError, match="float64"):
        rg.newton_solve(A32 * 10, b32, w32, x32, "cosh")


def test_grad_through_a_tol_stopped_newton_solve(x64):
    """differentiable=True: a tol-stopped solve is a scan that skips converged steps, so
    reverse-mode grad of its result in w matches central differences (the while_loop default has no
    reverse mode)."""
    A, b, _ = make_problem(n=200, d=5)
    f = lambda w, d: rg.newton_solve(
        A, b, w, jnp.zeros(5), max_iter=20, tol=1e-10, differentiable=d
    ).x.sum()
    g = jax.grad(lambda w: f(w, True))(1.0)
    fd = (f(1.0 + 1e-5, False) - f(1.0 - 1e-5, False)) / 2e-5
    np.testing.assert_allclose(g, fd, rtol=1e-6)
    assert float(f(1.0, True)) == pytest.approx(float(f(1.0, False)), rel=1e-12)


def test_scipy_sparse_design_equals_its_bcoo_and_int_key_is_a_seed(x64):
    import scipy.sparse

    A, b, w = make_problem(n=300, d=5, density=0.4)
    A_sp = scipy.sparse.csr_matrix(np.asarray(A))
    kw = dict(method="sketch", max_iter=4, sketch_size=60)
    ref = rg.newton_solve(sparse.BCOO.fromdense(A), b, w, jnp.zeros(5), key=jax.random.key(4), **kw)
    out = rg.newton_solve(A_sp, b, w, jnp.zeros(5), key=4, **kw)
    np.testing.assert_allclose(out.x, ref.x, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(
        rg.gradient(jnp.full(5, 0.1), A_sp, b, w),
        rg.gradient(jnp.full(5, 0.1), A, b, w),
        rtol=1e-12,
    )


def test_the_design_layer_refuses_what_it_would_misread():
    """A complex scipy.sparse A lost its imaginary part with only NumPy's ComplexWarning; a short x
    was clamped by the gather of a RowSparse product instead of refused; a RowSparse built by hand
    went unchecked (columns out of range were clamped by matvec but dropped by rmatvec); float16
    BCOO values stayed float16 and failed inside LAPACK."""
    import scipy.sparse as sp
    from jax.experimental import sparse as jsp

    from lowrank_jax.regression import design

    A = np.random.default_rng(0).normal(size=(6, 3))
    R = design.as_design(sp.csr_matrix(A))
    np.testing.assert_allclose(design.matvec(R, jnp.ones(3)), A @ np.ones(3), rtol=1e-6)
    for call, match in [
        (lambda: design.as_design(sp.csr_matrix(A + 1j * A)), "real"),
        (lambda: design.matvec(R, jnp.ones(2)), "3 columns"),
        (lambda: design.matmat(R, jnp.ones((4, 2))), "3 columns"),
        (lambda: design.matvec(jnp.asarray(A), jnp.ones(4)), "3 columns"),
        (lambda: design.as_design(design.RowSparse(R.cols + 5, R.vals, 3)), "column indices"),
        (
            lambda: design.as_design(design.RowSparse(R.cols, R.vals.at[0, 0].set(jnp.nan), 3)),
            "non-finite",
        ),
    ]:
        with pytest.raises(ValueError, match=match):
            call()
    half = jsp.BCOO.fromdense(jnp.asarray(A, jnp.float16))
    assert design.as_design(half).vals.dtype == jnp.float32
    # A RowSparse built by hand in float16 or int32 is converted the same way (it was returned as
    # is).
    assert (
        design.as_design(design.RowSparse(R.cols, R.vals.astype(jnp.float16), 3)).vals.dtype
        == jnp.float32
    )
    assert jnp.issubdtype(
        design.as_design(design.RowSparse(R.cols, R.vals.astype(jnp.int32), 3)).vals.dtype,
        jnp.floating,
    )
    out = rg.newton_solve(half, jnp.full(6, 0.5), 1.0, jnp.zeros(3), "exp", "exact", max_iter=3)
    assert out.x.dtype == jnp.float32 and np.all(np.isfinite(np.asarray(out.x)))


def test_design_products_refuse_vectors_of_the_wrong_length():
    """rmatvec(A, y) and gram(A, s) broadcast a length-1 y or s over the n rows
    (rmatvec(A (3×2), [2.]) returned [12, 18] where A.T @ y raises) and a RowSparse A read past a
    short one. Both now check, as matvec does, for dense and RowSparse A; right-sized vectors give
    Aᵀ y and Aᵀ diag(s) A, also under jit."""
    import scipy.sparse as sp

    from lowrank_jax.regression import design

    A = np.random.default_rng(1).normal(size=(5, 3))
    y = np.arange(1.0, 6.0)
    for M in (jnp.asarray(A), design.as_design(sp.csr_matrix(A))):
        for call, match in [
            (lambda: design.rmatvec(M, jnp.ones(1)), "rmatvec: A has 5 rows but y has shape"),
            (lambda: design.rmatvec(M, jnp.ones(3)), "y has shape"),
            (lambda: design.rmatvec(M, jnp.ones((5, 1))), "y has shape"),
            (lambda: design.gram(M, jnp.ones(1)), "gram: A has 5 rows but s has shape"),
            (lambda: design.gram(M, jnp.ones(6)), "s has shape"),
        ]:
            with pytest.raises(ValueError, match=match):
                call()
        np.testing.assert_allclose(design.rmatvec(M, jnp.asarray(y)), A.T @ y, rtol=1e-5)
        np.testing.assert_allclose(jax.jit(design.rmatvec)(M, jnp.asarray(y)), A.T @ y, rtol=1e-5)
        np.testing.assert_allclose(design.gram(M, jnp.asarray(y)), (A.T * y) @ A, rtol=1e-5)
        np.testing.assert_allclose(
            jax.jit(design.gram)(M, jnp.asarray(y)), (A.T * y) @ A, rtol=1e-5
        )


def test_all_zero_scores_sample_uniformly():
    """sample_rows divided by a zero score total: NaN weights, and sampled_gram of a zero matrix (or
    with D = 0) came back NaN instead of the zero matrix."""
    key = jax.random.key(0)
    idx, weight, p = sketch.sample_rows(key, jnp.zeros(5), 3)
    np.testing.assert_allclose(p, 0.2)
    np.testing.assert_allclose(weight, 1.0 / (3 * 0.2))
    A = jnp.asarray(np.random.default_rng(0).normal(size=(50, 4)))
    for M, D in ((jnp.zeros((50, 4)), jnp.ones(50)), (A, jnp.zeros(50))):
        for method in ("exact", "approx"):
            G = sketch.sampled_gram(key, M, D, 10, method=method)
            np.testing.assert_array_equal(G, np.zeros((4, 4)))


def test_sampled_gram_takes_the_sparse_formats_its_siblings_take(x64):
    """leverage_scores took a BCOO A, but sampled_gram passed it on unconverted and failed inside
    a transpose; a D of the wrong length was not named. Same draw, same Gram as the dense A."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((200, 4)) * (rng.random((200, 4)) < 0.5)
    D = rng.uniform(0.5, 2, 200)
    key = jax.random.key(0)
    for method in ("exact", "approx"):
        dense = sketch.sampled_gram(key, A, D, 400, method=method)
        np.testing.assert_allclose(
            sketch.sampled_gram(key, sparse.BCOO.fromdense(A), D, 400, method=method),
            dense,
            rtol=1e-10,
        )
    with pytest.raises(ValueError, match="D"):
        sketch.sampled_gram(key, A, D[:-1], 400)


def test_given_scores_closed_over_inside_jit(x64):
    """The scores check summed them with jnp, which inside the caller's jit is staged even for a
    concrete array, and float() of it failed (make bench's Newton benchmark crashed there)."""
    A, b, w = make_problem(n=200, d=6)
    tau = sketch.leverage_scores(A)
    x0 = jnp.full(6, 0.01)
    run = lambda x: rg.newton_solve(A, b, w, x, "exp", "sketch", max_iter=2, scores=tau).x  # noqa: E731
    np.testing.assert_allclose(jax.jit(run)(x0), run(x0), rtol=1e-12)


def test_a_start_that_overflows_is_named(x64):
    """newton_solve from an x0 whose loss overflows said only that the iterate became non-finite; it
    refuses the start, naming the overflow there (|Ax| against the safe limit). Traced, the start
    cannot be refused: the run reports DIVERGED at its first step (and raises by default)."""
    A, b, w = make_problem(n=100, d=6)
    x0 = jnp.full(6, 1e3)
    for throw in (True, False):
        with pytest.raises(ValueError, match="the loss at x0 overflows.*beyond the safe"):
            rg.newton_solve(A, b, w, x0, "exp", "exact", max_iter=3, throw=throw)
    run = jax.jit(lambda x: rg.newton_solve(A, b, w, x, "exp", "exact", max_iter=3, throw=False))
    out = run(x0)
    assert int(out.status) == Status.DIVERGED and not np.all(np.isfinite(out.history["loss"]))


def test_sample_size_arguments_are_checked():
    """active > m used only m draws but weighted them by 1/(active p): a biased Gram matrix. Refused
    when concrete, read as m when traced (then the weights are those of m draws, unbiased)."""
    key, scores = jax.random.key(1), jnp.arange(1.0, 6.0)
    with pytest.raises(ValueError, match="active must satisfy"):
        sketch.sample_rows(key, scores, 3, active=5)
    traced = jax.jit(lambda a: sketch.sample_rows(key, scores, 3, active=a)[1])(5)
    np.testing.assert_allclose(traced, sketch.sample_rows(key, scores, 3)[1], rtol=1e-6)
    for d in (0, 2.5):
        with pytest.raises(ValueError, match="d must be"):
            sketch.sketch_size(d, 0.5)
    with pytest.raises(ValueError, match="eps < inf"):
        sketch.sketch_size(3, float("inf"))
    # it failed comparing 0 < '0.5'
    with pytest.raises(ValueError, match="eps must be a real number"):
        sketch.sketch_size(3, "0.5")
    for bad, match in (
        (jnp.array([1.0, jnp.nan, 3.0]), "finite"),
        (jnp.array([1.0, -1.0, 3.0]), "non-negative"),
    ):
        with pytest.raises(ValueError, match=match):
            sketch.sample_rows(key, bad, 3)
    with pytest.raises(ValueError, match="active must be an integer"):
        sketch.sample_rows(key, scores, 3, active=2.5)
    for m in (0, -1, 2.5):
        with pytest.raises(ValueError, match="m must be"):
            sketch.sample_rows(key, scores, m)
    huge = jnp.full(3, 1e38, jnp.float32)  # the sum overflowed: p = 0, weights inf
    _, weight, p = sketch.sample_rows(key, huge, 3)
    np.testing.assert_allclose(p, 1 / 3, rtol=1e-6)
    np.testing.assert_allclose(weight, 1.0, rtol=1e-6)


def test_leverage_scores_sum_to_numpys_rank_of_a_nearly_deficient_design(x64):
    """σ₂/σ₁ = 1e-14, between d·ε (4e-16) and n·ε (2e-13) for n = 1000, d = 2: NumPy's
    matrix_rank (cut-off max(n, d)·ε·σ₁) says rank 1, and the scores are those of the first left
    singular vector, summing to 1. A d·ε cut-off kept the rounding-size σ₂ and summed to 2."""
    U = np.linalg.qr(np.random.default_rng(0).normal(size=(1000, 2)))[0]
    A = U * np.array([1.0, 1e-14])
    assert np.linalg.matrix_rank(A) == 1
    tau = sketch.leverage_scores(jnp.asarray(A))
    np.testing.assert_allclose(float(jnp.sum(tau)), 1.0, rtol=1e-10)
    np.testing.assert_allclose(tau, U[:, 0] ** 2, atol=1e-12)


def test_leverage_score_arguments_are_checked():
    """approx_leverage_scores took an integer A to jax.random with an integer dtype, returned NaN
    for a NaN A, and neither routine checked row_weights (negative: NaN scores; wrong length: a
    broadcasting error); fewer sketch rows than columns lose the constant factor."""
    A = jnp.arange(24.0).reshape(8, 3) % 5 + jnp.eye(8, 3)
    key = jax.random.key(0)
    np.testing.assert_allclose(
        sketch.approx_leverage_scores(key, A.astype(jnp.int32)),
        sketch.approx_leverage_scores(key, A),
        rtol=1e-5,
    )
    with pytest.raises(ValueError, match="non-finite"):
        sketch.approx_leverage_scores(key, A.at[0, 0].set(jnp.nan))
    for f in (
        lambda w: sketch.leverage_scores(A, w),
        lambda w: sketch.approx_leverage_scores(key, A, w),
    ):
        with pytest.raises(ValueError, match="row_weights must be non-negative"):
            f(jnp.full(8, -1.0))
        with pytest.raises(ValueError, match="row_weights must have length 8"):
            f(jnp.ones(7))
    with pytest.raises(ValueError, match="sketch_rows = 2 < d = 3"):
        sketch.approx_leverage_scores(key, A, sketch_rows=2)


@pytest.mark.parametrize("kind", ["cosh", "sinh"])
def test_sketched_newton_with_refinement_stays_at_a_zero_gradient(kind, x64):
    """cosh and sinh have their minimiser at x = 0. From x0 = 0 (gradient exactly 0), the PCG
    refinement formed 0/0 and the run raised a FloatingPointError blaming overflow or an
    indefinite H̃; exact, diagonal and refine = 0 stayed at 0, as refine ≥ 1 now does."""
    A, b, w = make_problem(n=200, d=5)
    for refine in (0, 1, 2):
        out = rg.newton_solve(
            A, b, w, jnp.zeros(5), kind, "sketch", max_iter=3, tol=None, refine=refine
        )
        np.testing.assert_array_equal(out.x, np.zeros(5))


def test_approximation_error_needs_a_positive_definite_h_and_matching_shapes():
    """An indefinite H gave ε₀ = NaN with no error (its Cholesky factor is NaN), and mismatched
    shapes a bare dot_general TypeError. A valid pair keeps its closed form: H̃ = c H gives
    |c − 1|."""
    with pytest.raises(ValueError, match="H must be symmetric positive definite"):
        rg.approximation_error(jnp.eye(2), jnp.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="square matrices of one shape"):
        rg.approximation_error(jnp.eye(2), jnp.eye(3))
    H = jnp.array([[2.0, 0.5], [0.5, 1.0]])
    np.testing.assert_allclose(rg.approximation_error(1.25 * H, H), 0.25, rtol=1e-5)
    np.testing.assert_allclose(jax.jit(rg.approximation_error)(0.5 * H, H), 0.5, rtol=1e-5)


def test_sampling_from_no_rows_is_refused_by_name():
    """sample_rows with an empty score vector failed in a max reduction ("zero-size array")."""
    with pytest.raises(ValueError, match="scores must have at least one entry"):
        sketch.sample_rows(jax.random.key(0), np.ones(0), 5)


def test_line_search_halves_a_full_step_that_rises_by_less_than_the_armijo_margin(x64):
    """The sufficient-decrease test is L(x − tΔ) ≤ L(x) − 1e-4·t·⟨∇L, Δ⟩. A start where the full
    Newton step raises L only a little (by less than 1e-4·⟨∇L, Δ⟩) separates it from a sign slip in
    the bound (L(x) + 1e-4·t·⟨∇L, Δ⟩ accepts that step): found in 1-D by bisecting the full step's
    change of L, h(x₀) = L(x₀ − H⁻¹g) − L(x₀), between a start where it falls and one where it
    rises."""
    rng = np.random.default_rng(25)  # an instance whose full steps rise from some starts in [-3, 3]
    A = jnp.asarray(rng.standard_normal((8, 1)))
    b = jnp.asarray(rng.dirichlet(np.ones(8)))
    w, kind = 0.05, "exp"
    loss = jax.jit(lambda x: rg.loss(x, A, b, w, kind))

    def rise(x0):  # (h, ⟨∇L, Δ⟩) of the full step from the scalar start x0
        x0 = jnp.array([x0])
        x1 = rg.newton_solve(A, b, w, x0, kind, "exact", max_iter=1).x
        g = rg.gradient(x0, A, b, w, kind)
        return float(loss(x1) - loss(x0)), float(g @ (x0 - x1))

    xs = np.linspace(-3.0, 3.0, 61)
    hs = np.array([rise(x)[0] for x in xs])
    crossings = np.flatnonzero(
        np.isfinite(hs[:-1]) & np.isfinite(hs[1:]) & (hs[:-1] < 0) & (hs[1:] > 0)
    )
    crossings = np.concatenate([crossings, np.flatnonzero((hs[:-1] > 0) & (hs[1:] < 0))])
    assert crossings.size, "no start on the grid whose full step rises"
    i = int(crossings[0])
    fall, up = (xs[i], xs[i + 1]) if hs[i] < 0 else (xs[i + 1], xs[i])
    for _ in range(80):  # keep `up` on the rising side, closing in on h = 0
        mid = 0.5 * (fall + up)
        h, slope = rise(mid)
        if 0 < h < 0.5e-4 * slope:
            break
        fall, up = (mid, up) if h < 0 else (fall, mid)
    h, slope = rise(mid)
    assert (
        slope > 0 and 1e3 * np.finfo(float).eps * float(loss(jnp.array([mid]))) < h < 1e-4 * slope
    )
    ls = rg.newton_solve(A, b, w, jnp.array([mid]), kind, "exact", max_iter=1, line_search=True)
    t = float(ls.history["step"][0])
    assert 0 < t < 1  # the full step was refused
    f0, f1 = float(loss(jnp.array([mid]))), float(loss(ls.x))
    assert f1 <= f0 - 1e-4 * t * slope  # and the one taken passes


def test_rescored_sketch_draws_its_first_sample_by_leverage_scores(x64):
    """With rescore = r the scores are recomputed at the iterations that are multiples of r, 0 among
    them: the first step samples by the same scores as rescore = 1 (a schedule off by one drew it
    with the placeholder uniform scores), and the iterates part only after the first rescoring that
    rescore = 1 does and rescore = r skips."""
    A, b, w = make_problem(n=400, d=6, w=3.0)
    x0 = 0.1 * jax.random.normal(jax.random.key(5), (6,), jnp.float64)
    kw = dict(max_iter=2, tol=None, key=jax.random.key(3), sketch_size=40)
    every = rg.newton_solve(A, b, w, x0, "exp", "sketch", rescore=1, **kw)
    for r in (2, 3):
        kept = rg.newton_solve(A, b, w, x0, "exp", "sketch", rescore=r, resample=1, **kw)
        # L(x₀), L(x₁): the same first step (to rounding: on a GPU the two programs' float64 sums
        # differ in the last bit; the placeholder's first step moved L(x₁) by far more)
        np.testing.assert_allclose(kept.history["loss"][:2], every.history["loss"][:2], rtol=1e-13)
        assert float(jnp.max(jnp.abs(kept.x - every.x))) > 0  # x₂ used the kept scores


def test_sample_rows_weights_exactly_the_active_draws(x64):
    """With ``active`` = a of m draws, the first a get weight 1/(a p_i) and the rest 0: a draws,
    each an unbiased 1/a share (Σ over draws of w·p = 1)."""
    scores = jnp.array([1.0, 2.0, 3.0, 4.0])
    for active in (1, 3, 5):
        idx, w, p = sketch.sample_rows(jax.random.key(0), scores, 5, active=jnp.int32(active))
        np.testing.assert_array_equal(np.asarray(w) > 0, np.arange(5) < active)
        np.testing.assert_allclose(w[:active], 1.0 / (active * p[idx[:active]]), rtol=1e-14)
        np.testing.assert_allclose(jnp.sum(w * p[idx]), 1.0, rtol=1e-14)


def test_icl_bound_for_an_x_step_with_the_default_radius(x64):
    """Corollary F.2, part 1 (x moves, A fixed): e^{2R²}(1 + √n‖b‖)·2√n·R‖x_{t+1} − x_t‖ with the
    default R = max(‖A‖₂, ‖x_t‖, ‖b‖, 4), on an A whose spectral norm is above 4 and well below its
    Frobenius norm, so that R is ‖A‖₂ (the other tests' R is the floor 4, where neither the factor R
    nor the norm's choice shows)."""
    rng = np.random.default_rng(0)
    A = jnp.asarray(rng.standard_normal((20, 3)) * 1.2)
    b = jnp.asarray(rng.dirichlet(np.ones(20)))
    x0 = jnp.asarray(0.1 * rng.standard_normal(3))
    x1 = x0 + 1e-4 * jnp.asarray(rng.standard_normal(3))
    spectral = float(np.linalg.norm(np.asarray(A), 2))
    assert spectral > 4 and np.linalg.norm(np.asarray(A)) > 1.1 * spectral
    n = A.shape[0]
    by_hand = (
        np.exp(2 * spectral**2)
        * (1 + np.sqrt(n) * float(jnp.linalg.norm(b)))
        * 2
        * np.sqrt(n)
        * spectral
        * float(jnp.linalg.norm(x1 - x0))
    )
    np.testing.assert_allclose(rg.icl_bound(x0, x1, A, b), by_hand, rtol=1e-10)


def test_sketch_rows_is_the_number_of_draws_the_first_step_uses(x64):
    """sketch_rows = r of the sketch_size draws: the first step is x₀ − H̃⁻¹∇L with H̃ the sampled
    Gram of the first r draws of iteration 0's key (fold_in(key, 0)), by the exact leverage scores
    of diag(√D₀)A. (Ignoring r leaves every sweep consistent with its loop; only this pins it.)"""
    k1, k2 = jax.random.split(jax.random.key(4))
    A = jax.random.normal(k1, (400, 6), jnp.float64) / 20
    b = jax.random.dirichlet(k2, jnp.ones(400, jnp.float64))
    x0, key = jnp.zeros(6), jax.random.key(1)
    D = rg.diagonal_curvature(x0, A, b, 4.0)
    g = rg.gradient(x0, A, b, 4.0)
    for rows in (40, 200):
        got = rg.newton_solve(
            A,
            b,
            4.0,
            x0,
            "exp",
            "sketch",
            max_iter=1,
            sketch_size=200,
            sketch_rows=rows,
            key=key,
            leverage="exact",
        ).x
        H = sketch.sampled_gram(
            jax.random.fold_in(key, 0), A, D, 200, scores=sketch.leverage_scores(A, D), active=rows
        )
        np.testing.assert_allclose(got, x0 - jnp.linalg.solve(H, g), atol=1e-14)


def test_sample_rows_draws_with_replacement_and_is_unbiased_for_every_row(x64):
    """p_i = score_i / Σ scores, the m draws i.i.d. (with replacement) by p, and weights 1/(m p_i)
    (1/(a p_i) on the first a = ``active`` draws): the weight a row receives has expectation 1 for
    every row, and each row is drawn m p_i (a p_i) times on average. Monte Carlo over 20 000 keys,
    within 5 standard errors. Drawing without replacement caps the heavy rows at one draw (weight
    mean below 1/(4 · 6/21) = 0.875 for the heaviest, m = 4); a weight 1/((m ± 1) p) or p normalised
    by the largest score instead of the sum moves every mean."""
    scores = jnp.arange(1.0, 7.0)
    n, m, keys = 6, 4, jax.random.split(jax.random.key(7), 20_000)
    for active in (None, 2):

        def one(key):
            idx, w, p = sketch.sample_rows(key, scores, m, active)
            used = jnp.arange(m) < (m if active is None else active)
            return (
                jnp.zeros(n).at[idx].add(w),
                jnp.zeros(n).at[idx].add(used.astype(jnp.float64)),
                p,
            )

        got, counts, p = jax.jit(jax.vmap(one))(keys)
        np.testing.assert_allclose(
            p, np.broadcast_to(np.arange(1.0, 7.0) / 21.0, (len(keys), n)), rtol=1e-14
        )
        a = m if active is None else active
        for sample, mean in (
            (np.asarray(got), np.ones(n)),
            (np.asarray(counts), a * np.arange(1.0, 7.0) / 21.0),
        ):
            se = sample.std(axis=0) / np.sqrt(len(keys))
            assert np.all(np.abs(sample.mean(axis=0) - mean) < 5 * se), (
                active,
                sample.mean(axis=0),
                mean,
                se,
            )
    # no draws: a zero Gram
    with pytest.raises(ValueError, match="active must satisfy 1 <= active"):
        sketch.sample_rows(keys[0], scores, m, active=0)


def test_sampled_gram_samples_by_the_scores_of_sqrt_d_times_a(x64):
    """The rows that matter are those of X = diag(√D) A, not of A. On an incoherent Gaussian A
    (τ_i(A) ≈ d/n) with D = 1 except 1e5 on d rows, those rows hold nearly all of AᵀDA and nearly
    all of X's leverage; both methods ("exact" and "approx") sample them and meet ε = 0.5 with the
    Chernoff size in ≥ 9 of 10 keys. Scores of A alone pick each of them with probability ≈ m/n and
    miss H by far more."""
    n, d = 2000, 4
    A = jax.random.normal(jax.random.key(0), (n, d), jnp.float64)
    D = jnp.ones(n, jnp.float64).at[:d].set(1e5)
    H = A.T @ (D[:, None] * A)
    m = sketch.sketch_size(d, 0.5, 0.1)
    assert m < n / 8
    tau = sketch.leverage_scores(A, D)
    assert float(jnp.sum(tau[:d])) > 0.9 * d  # the heavy rows carry X's leverage
    for method in ("exact", "approx"):
        errs = [
            float(
                rg.approximation_error(
                    sketch.sampled_gram(jax.random.key(k), A, D, m, method=method), H
                )
            )
            for k in range(10)
        ]
        assert np.mean(np.array(errs) <= 0.5) >= 0.9, (method, errs)


def test_weighted_leverage_scores_are_those_of_sqrt_w_times_a(x64):
    """leverage_scores(A, w) are the scores of X = diag(√w) A (NumPy: the squared row norms of X's
    left singular vectors), not of diag(w) A; and the approximate scores of the same X stay within
    the sketch's constant factor of them, also with the fewest sketch rows allowed (k = d)."""
    rng = np.random.default_rng(2)
    A = rng.standard_normal((300, 5))
    w = rng.uniform(0.05, 20.0, 300)
    U = np.linalg.svd(np.sqrt(w)[:, None] * A, full_matrices=False)[0]
    tau = np.sum(U * U, axis=1)
    np.testing.assert_allclose(
        sketch.leverage_scores(jnp.asarray(A), jnp.asarray(w)), tau, rtol=1e-10, atol=1e-14
    )
    approx = np.asarray(
        sketch.approx_leverage_scores(
            jax.random.key(0), jnp.asarray(A), jnp.asarray(w), jl_cols=400
        )
    )
    ratio = approx / tau
    assert 0.5 < ratio.min() and ratio.max() < 3.0, (ratio.min(), ratio.max())
    fewest = sketch.approx_leverage_scores(
        jax.random.key(0), jnp.asarray(A), jnp.asarray(w), sketch_rows=5
    )
    assert (
        fewest.shape == (300,)
        and np.all(np.isfinite(np.asarray(fewest)))
        and float(jnp.min(fewest)) > 0
    )


def test_row_sparse_column_indices_must_lie_below_num_cols():
    """A RowSparse built by hand with a column index equal to num_cols (one past the last column) is
    refused like any larger one: matvec's gather would clamp it onto the last column while rmatvec's
    scatter dropped it, so the two products would disagree. The last valid column (num_cols − 1)
    passes."""
    from lowrank_jax.regression import design

    cols = jnp.array([[0, 2], [1, 2]], jnp.int32)
    vals = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    R = design.as_design(design.RowSparse(cols, vals, 3))
    np.testing.assert_allclose(R.todense(), [[1.0, 0.0, 2.0], [0.0, 3.0, 4.0]])
    for bad in (cols.at[1, 1].set(3), cols.at[0, 0].set(-1)):
        with pytest.raises(ValueError, match=r"column indices must lie in \[0, 3\)"):
            design.as_design(design.RowSparse(bad, vals, 3))


def test_exact_and_diagonal_newton_do_not_depend_on_the_units_of_a_column():
    """float32, n = 2000, d = 5, one column in other units (‖a_j‖ = 3e-3 of the others): judged on
    H, whose entry H_jj = ‖a_j‖²·(…) sits below the rounding allowance d·√n·ε·‖H‖, the column was
    dropped from every step and the run stopped at the iteration cap with x_j = 0. Newton's step
    is invariant to column scaling, so the scaled problem's solution is the unscaled one's divided
    by the scale. A column far below rounding (1e-9 of the others: what is left of a centred
    constant column) is still dropped, and x stays finite."""
    rng = np.random.default_rng(0)
    n, d = 2000, 5
    A = (rng.standard_normal((n, d)) / np.sqrt(n)).astype(np.float32)
    b = jnp.asarray(rng.dirichlet(np.ones(n)), jnp.float32)
    for method in ("exact", "diagonal"):
        ref = rg.newton_solve(A, b, 3.0, jnp.zeros(d), "exp", method, max_iter=30, tol=1e-5)
        scale = np.array([1, 3e-3, 1, 1, 1], np.float32)
        out = rg.newton_solve(A * scale, b, 3.0, jnp.zeros(d), "exp", method, max_iter=30, tol=1e-5)
        np.testing.assert_allclose(out.x * scale, ref.x, rtol=1e-3, atol=1e-5)
        assert int(out.n_iter) < 30
        noise = rg.newton_solve(
            A * np.array([1, 1e-9, 1, 1, 1], np.float32),
            b,
            3.0,
            jnp.zeros(d),
            "exp",
            method,
            max_iter=30,
            tol=1e-5,
        )
        # counted as data, its x_j would be O(1/1e-9) (the step in unit-column units, divided by
        # 1e-9)
        assert bool(jnp.all(jnp.isfinite(noise.x))) and abs(float(noise.x[1])) < 1e-3


def test_sampled_gram_refuses_scores_of_the_wrong_length_and_an_unknown_method():
    """250 scores for 200 rows: JAX's gather clamped the indices past the end to row 199, and the
    'Gram' came back as 50·a₁₉₉a₁₉₉ᵀ without a word; method='qr' was ignored when scores were
    given."""
    A = jnp.asarray(np.random.default_rng(0).standard_normal((200, 3)))
    scores = jnp.concatenate([jnp.zeros(200), jnp.ones(50)])
    with pytest.raises(ValueError, match="scores must have length 200"):
        sketch.sampled_gram(0, A, jnp.ones(200), 100, scores=scores)
    with pytest.raises(ValueError, match="method must be one of 'approx', 'exact'"):
        sketch.sampled_gram(0, A, jnp.ones(200), 100, method="qr", scores=jnp.ones(200))


def test_icl_shift_of_an_overflowing_a_x_t_is_non_finite(x64):
    """|A x_t| ≈ 1000 overflows exp: α and its rounding bound were both inf, and the message said α
    was zero (sinh near x = 0). An overflow is no cancellation: the shift comes back non-finite, as
    under jit."""
    A = jnp.asarray(np.random.default_rng(0).standard_normal((100, 3)) / 10)
    args = (jnp.full(3, 2000.0), jnp.zeros(3), A, jnp.full(100, 0.01))
    assert not np.any(np.isfinite(rg.icl_shift(*args, "exp")))
    assert not np.any(np.isfinite(jax.jit(lambda *a: rg.icl_shift(*a, "exp"))(*args)))


def test_float32_hessian_keeps_its_digits_near_a_uniform_b(x64):
    """An intercept column, b uniform, small x: the rows v_i a_i are close to b_i p, and the
    expanded Hessian Aᵀdiag(s)A − r pᵀ − p rᵀ + ‖b‖²p pᵀ cancelled in float32 (H₀₀ = −0.0039 where
    it is +0.0029, max error 9e-4 of ‖H‖, and psd_certificate's sign flipped). Below float64 a dense
    A now takes JᵀJ + Aᵀdiag(c∘u − ⟨c, b⟩u + w²)A with J = diag(v)A − b pᵀ, and agrees with the
    float64 Hessian of the same (float32) inputs as closely as autodiff does. The building block
    follows the caller's matmul precision, so this runs at full float32 precision: under a GPU's
    TF32 default H₀₀ came out 1.6 % off on an H200, which is TF32's rounding, not the
    cancellation."""
    n = 5000
    rng = np.random.default_rng(1)
    A = jnp.asarray(np.c_[np.ones(n), rng.standard_normal((n, 2)) / np.sqrt(n)], jnp.float32)
    b, x = jnp.full(n, 1 / n, jnp.float32), jnp.array([1.0, 0.01, 0.01], jnp.float32)
    wide = lambda a: a.astype(jnp.float64)
    for w in (0.0, 0.001):
        ref = rg.hessian(wide(x), wide(A), wide(b), w, "exp")
        with jax.default_matmul_precision("highest"):
            H, cert = rg.hessian(x, A, b, w, "exp"), float(rg.psd_certificate(x, A, b, w))
        assert float(jnp.max(jnp.abs(H - ref)) / jnp.max(jnp.abs(ref))) < 1e-5
        np.testing.assert_allclose(float(H[0, 0]), float(ref[0, 0]), rtol=1e-3)
        cert64 = float(rg.psd_certificate(wide(x), wide(A), wide(b), w))
        np.testing.assert_allclose(cert, cert64, rtol=1e-2)


def test_a_float32_overflow_with_x64_on_asks_for_float64_inputs(x64):
    """With x64 already on, the float32 overflow message still said to enable x64, which the user
    had done; it now says to pass the inputs as float64, and that does remove the overflow."""
    A = jnp.asarray(np.random.default_rng(0).standard_normal((50, 3)), jnp.float32)
    # |Ax| ~ 100: exp overflows
    b, x = jnp.full(50, 0.02, jnp.float32), jnp.full(3, 40.0, jnp.float32)
    assert not np.isfinite(float(rg.loss(x, A, b, 1.0, "exp")))
    with pytest.raises(ValueError, match="Pass A, b and x as float64"):
        rg.newton_solve(A, b, 1.0, x, "exp")
    assert np.isfinite(
        float(rg.loss(x.astype(jnp.float64), A.astype(jnp.float64), b.astype(jnp.float64), 1.0))
    )


def test_the_result_carries_the_last_steps_diagnostics_and_their_history(x64):
    """The final fields are the history's row n_iter − 1 (the last step run, measured before it);
    ``error`` and ``eps0`` are None, and absent from the history, unless asked for; rows past
    n_iter are NaN padding."""
    A, b, w = make_problem(n=200, d=5)
    out = rg.newton_solve(A, b, w, jnp.zeros(5), "exp", "exact", max_iter=20, tol=1e-10)
    n = int(out.n_iter)
    assert int(out.status) == Status.CONVERGED and bool(out.converged) and 1 < n < 20
    assert (
        out.error is None and out.eps0 is None and set(out.history) == {"loss", "grad_norm", "step"}
    )
    for name in ("loss", "grad_norm", "step"):
        np.testing.assert_array_equal(getattr(out, name), out.history[name][n - 1])
        assert np.all(np.isfinite(out.history[name][:n])) and np.all(
            np.isnan(out.history[name][n:])
        )
    assert float(out.grad_norm) <= 1e-10 < float(out.history["grad_norm"][n - 2])
    full = rg.newton_solve(
        A,
        b,
        w,
        jnp.zeros(5),
        "exp",
        "diagonal",
        max_iter=4,
        tol=None,
        x_star=out.x,
        measure_eps=True,
    )
    assert int(full.status) == Status.MAX_ITER and int(full.n_iter) == 4
    assert set(full.history) == {"loss", "grad_norm", "step", "error", "eps0"}
    np.testing.assert_array_equal(full.error, full.history["error"][3])
    np.testing.assert_array_equal(full.eps0, full.history["eps0"][3])
    text = repr(full)
    assert text.startswith("NewtonResult(status=MAX_ITER, n_iter=4") and len(text) < 400, text


def test_the_default_tol_stops_at_a_gradient_of_1e_6_and_none_runs_max_iter(x64):
    """The toolkit's budget rule: ``max_iter`` (20) caps the steps, ``tol`` defaults to 1e-6 on
    ‖∇L(x_t)‖, and ``tol=None`` runs exactly ``max_iter`` steps."""
    A, b, w = make_problem(n=200, d=5)
    out = rg.newton_solve(A, b, w, jnp.zeros(5), "exp", "exact")
    n = int(out.n_iter)
    assert int(out.status) == Status.CONVERGED and 1 < n < 20
    assert float(out.grad_norm) <= 1e-6 < float(out.history["grad_norm"][n - 2])
    full = rg.newton_solve(A, b, w, jnp.zeros(5), "exp", "exact", max_iter=6, tol=None)
    assert int(full.status) == Status.MAX_ITER and int(full.n_iter) == 6


def test_a_traced_negative_damping_or_tol_is_invalid(x64):
    """A traced damping < 0 (or tol ≤ 0) cannot raise at the boundary: the point's status is INVALID
    and its iterate NaN, the other points of the vmap unchanged; with throw=True (the default) the
    run raises naming the rule, also under jit. Concrete, both are refused by name."""
    A, b, w = make_problem(n=100, d=4)
    solve = lambda lam, tol, throw=False: rg.newton_solve(
        A,
        b,
        w,
        jnp.zeros(4),
        "exp",
        "exact",  # noqa: E731
        max_iter=10,
        tol=tol,
        damping=lam,
        throw=throw,
    )
    out = jax.vmap(solve)(jnp.array([0.5, -1.0, 0.5]), jnp.array([1e-8, 1e-8, -1.0]))
    assert np.asarray(out.status).tolist() == [Status.CONVERGED, Status.INVALID, Status.INVALID]
    np.testing.assert_allclose(out.x[0], solve(0.5, 1e-8).x, rtol=1e-12)
    assert np.all(np.isnan(out.x[1:]))
    with pytest.raises(RuntimeError, match="damping must be >= 0"):
        jax.block_until_ready(jax.jit(lambda lam: solve(lam, 1e-8, True).x)(-1.0))
    for lam, tol, name in ((-1.0, 1e-8, "damping"), (0.5, -1.0, "tol")):
        with pytest.raises(ValueError, match=name):
            solve(lam, tol)
    fixed = jax.jit(
        lambda lam: rg.newton_solve(
            A, b, w, jnp.zeros(4), max_iter=3, tol=None, damping=lam, throw=False
        )
    )(-1.0)
    assert int(fixed.status) == Status.INVALID and np.all(np.isnan(fixed.x))  # without tol too


def test_an_iterate_beyond_the_overflow_of_u_is_diverged_even_at_the_last_step():
    """float32, the diagonal method from 2·v (n = 12, d = 4, w = 0.1): the first step lands at
    |Ax| ≈ 143, beyond log(max float32) ≈ 88.7, where exp overflows and the loss is infinite.
    The iterate itself is finite, so a one-step run reported MAX_ITER before the rule on |Ax|;
    it is DIVERGED, raises by default, and a longer run stops there."""
    rng = np.random.default_rng(102)
    A = jnp.asarray(0.5 * rng.standard_normal((12, 4)), jnp.float32)
    b = jnp.asarray(rng.dirichlet(np.ones(12)), jnp.float32)
    x0 = 2 * jnp.asarray(rng.standard_normal(4), jnp.float32)
    one = rg.newton_solve(A, b, 0.1, x0, "exp", "diagonal", max_iter=1, throw=False)
    assert np.all(np.isfinite(one.x))
    assert float(jnp.max(jnp.abs(A @ one.x))) > np.log(np.finfo(np.float32).max)
    assert int(one.status) == Status.DIVERGED
    assert not np.isfinite(float(rg.loss(one.x, A, b, 0.1)))
    with pytest.raises(RuntimeError, match="newton_solve diverged"):
        rg.newton_solve(A, b, 0.1, x0, "exp", "diagonal", max_iter=1)
    run = rg.newton_solve(A, b, 0.1, x0, "exp", "diagonal", max_iter=30, tol=1e-4, throw=False)
    assert int(run.status) == Status.DIVERGED and int(run.n_iter) == 1


def test_measured_eps0_of_an_indefinite_exact_hessian_is_inf_not_a_divergence(x64):
    """ε₀ is defined against a positive definite exact Hessian only; at a start where it is
    indefinite the step records inf (a NaN diagnostic would mark the run DIVERGED), and the line
    search still converges."""
    A, b, w, x0 = _indefinite_start()
    out = rg.newton_solve(
        A, b, w, x0, "exp", "diagonal", max_iter=60, tol=1e-10, line_search=True, measure_eps=True
    )
    assert int(out.status) == Status.CONVERGED, out
    eps = np.asarray(out.history["eps0"][: int(out.n_iter)])
    assert np.isinf(eps[0]) and not np.any(np.isnan(eps)) and np.isfinite(float(out.eps0))
