import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from lowrank_jax import transforms


def factors(rng, n1=30, n2=20, r=3):
    return (
        jnp.asarray(rng.standard_normal((n1, r))),
        jnp.asarray(rng.standard_normal((n2, r))),
        jnp.asarray(rng.standard_normal((n1, r))),
        jnp.asarray(rng.standard_normal((n2, r))),
    )


def test_scaled_gradient_matches_closed_form(x64):
    L, R, GL, GR = factors(np.random.default_rng(0))
    opt = transforms.scaled_gradient(0.3)
    updates, _ = opt.update((GL, GR), opt.init((L, R)), (L, R))
    np.testing.assert_allclose(updates[0], -0.3 * GL @ np.linalg.inv(R.T @ R), rtol=1e-10)
    np.testing.assert_allclose(updates[1], -0.3 * GR @ np.linalg.inv(L.T @ L), rtol=1e-10)


def test_scaled_gradient_is_gauge_invariant(x64):
    """(L, R) → (LQ, RQ⁻ᵀ) leaves LRᵀ and the updated LRᵀ unchanged when gradients come from
    f(LRᵀ)."""
    rng = np.random.default_rng(1)
    L, R, _, _ = factors(rng)
    E = jnp.asarray(rng.standard_normal((30, 20)))  # ∇_X f at X = LRᵀ
    Q = jnp.asarray(rng.standard_normal((3, 3))) + 3 * jnp.eye(3)
    L2, R2 = L @ Q, R @ jnp.linalg.inv(Q).T
    a = transforms.scaled_gradient_step((L, R), (E @ R, E.T @ L), 0.5)
    b = transforms.scaled_gradient_step((L2, R2), (E @ R2, E.T @ L2), 0.5)
    np.testing.assert_allclose(a[0] @ a[1].T, b[0] @ b[1].T, rtol=1e-9, atol=1e-10)


def test_chains_with_optax_schedules(x64):
    L, R, GL, GR = factors(np.random.default_rng(2))
    opt = optax.chain(
        optax.clip(1e6), transforms.scaled_gradient(optax.exponential_decay(1.0, 1, 0.5))
    )
    state = opt.init((L, R))
    first, state = opt.update((GL, GR), state, (L, R))
    second, state = opt.update((GL, GR), state, (L, R))
    np.testing.assert_allclose(second[0], 0.5 * first[0], rtol=1e-12)


def _spd(rng, d):
    Q = np.linalg.qr(rng.standard_normal((d, d)))[0]
    return Q @ np.diag(np.linspace(0.5, 6.0, d)) @ Q.T


def test_newton_custom_solve_keeps_its_aux_and_the_curvature_in_the_state(x64):
    """A custom ``solve`` returning (Δ, aux): the update is −Δ (unravelled to the params' pytree),
    the state holds the curvature and aux, and ``init`` builds a state of the same structure."""
    rng = np.random.default_rng(3)
    H, M = jnp.asarray(_spd(rng, 5)), jnp.asarray(rng.standard_normal((7, 5)))
    params = {"a": jnp.zeros(2), "b": jnp.zeros(3)}
    g_flat = rng.standard_normal(5)
    g = {"a": jnp.asarray(g_flat[:2]), "b": jnp.asarray(g_flat[2:])}
    lam = 0.3

    def solve(curv, g, damping):
        delta = transforms.newton_direction(curv["H"], g, damping)
        return delta, M @ delta  # aux: an image of Δ, (7,)

    opt = transforms.newton(
        lambda p, *, scale: {"H": scale * H},
        lam,
        solve=solve,
        init_curvature=lambda p: {"H": jnp.zeros((5, 5))},
        init_aux=lambda p: jnp.zeros(7),
    )
    assert isinstance(opt, optax.GradientTransformationExtraArgs)
    state0 = opt.init(params)
    upd, state = opt.update(g, state0, params, scale=2.0)
    delta = np.linalg.solve(2.0 * np.asarray(H) + lam * np.eye(5), g_flat)
    np.testing.assert_allclose(np.concatenate([upd["a"], upd["b"]]), -delta, rtol=1e-12)
    np.testing.assert_allclose(state.aux, np.asarray(M) @ delta, rtol=1e-12)
    np.testing.assert_allclose(state.curvature["H"], 2.0 * H, rtol=0)
    assert isinstance(state, transforms.NewtonState)
    assert jax.tree.structure(state) == jax.tree.structure(state0)
    assert [(x.shape, x.dtype) for x in jax.tree.leaves(state)] == [
        (x.shape, x.dtype) for x in jax.tree.leaves(state0)
    ]
    # The default state: the (d, d) Hessian, no aux; the stateless call of the old API still works.
    plain = transforms.newton(lambda p: H)
    upd, state = plain.update(g, plain.init(params), params)
    np.testing.assert_allclose(
        np.concatenate([upd["a"], upd["b"]]), -np.linalg.solve(H, g_flat), rtol=1e-12
    )
    assert state.aux is None and state.curvature.shape == (5, 5)
    assert jax.tree.structure(plain.init(params)) == jax.tree.structure(state)


def test_newton_with_extra_args_runs_inside_scan_and_reuses_the_kept_curvature(x64):
    """Extra args (the step k and the previous curvature) are forwarded to ``hessian_fn``; a Hessian
    refreshed every other step runs as the carry of ``lax.scan`` and equals a Python loop doing the
    same by hand, and it converges to the minimiser of a non-quadratic convex function."""
    c = jnp.asarray([0.5, -1.0, 2.0])

    def f(p):
        return (
            jnp.sum(jnp.exp(p["u"]) - p["u"])
            + 0.5 * jnp.sum((p["v"] - c) ** 2)
            + 0.25 * jnp.sum(p["v"] ** 4)
        )

    from jax.flatten_util import ravel_pytree

    params0 = {"u": jnp.asarray([1.0, -0.5]), "v": jnp.asarray([0.2, -0.4, 1.5])}
    _, unravel = ravel_pytree(params0)
    hess_flat = jax.hessian(lambda x: f(unravel(x)))

    def hessian_fn(p, *, k, previous):
        return jax.lax.cond(k % 2 == 0, lambda: hess_flat(ravel_pytree(p)[0]), lambda: previous)

    opt = transforms.newton(hessian_fn)

    def body(carry, k):
        p, state = carry
        upd, state = opt.update(jax.grad(f)(p), state, p, k=k, previous=state.curvature)
        return (optax.apply_updates(p, upd), state), ravel_pytree(p)[0]

    (p_scan, state), path = jax.jit(lambda p: jax.lax.scan(body, (p, opt.init(p)), jnp.arange(12)))(
        params0
    )
    # By hand: the Hessian of the last even step's iterate, Newton steps with it.
    p, H = params0, None
    for k in range(12):
        x, unr = ravel_pytree(p)
        if k % 2 == 0:
            H = np.asarray(hess_flat(x))
        np.testing.assert_allclose(path[k], x, rtol=1e-12, atol=1e-14)
        p = unr(x - np.linalg.solve(H, ravel_pytree(jax.grad(f)(p))[0]))
        if k == 10:
            H_last = H
    np.testing.assert_allclose(state.curvature, H_last, rtol=1e-12)
    np.testing.assert_allclose(ravel_pytree(p_scan)[0], ravel_pytree(p)[0], rtol=1e-12, atol=1e-14)
    g_end = ravel_pytree(jax.grad(f)(p_scan))[0]
    assert float(jnp.linalg.norm(g_end)) < 1e-12


def test_newton_direction_on_singular_and_indefinite_hessians(x64):
    """A positive semi-definite singular H (½(p₁ + p₂)²) passed Cholesky with a zero pivot and its
    solve returned NaN, even at the optimum. Now: the minimum-norm solution there, the exact solve
    for positive definite and for indefinite non-singular H."""
    H = jnp.array([[1.0, 1.0], [1.0, 1.0]])
    g = jnp.array([1.0, 1.0])
    np.testing.assert_allclose(
        transforms.newton_direction(H, g), np.linalg.pinv(np.asarray(H)) @ np.asarray(g)
    )
    np.testing.assert_array_equal(
        transforms.newton_direction(jnp.zeros((2, 2)), jnp.zeros(2)), [0.0, 0.0]
    )
    f = lambda p: 0.5 * (p[0] + p[1]) ** 2
    opt = transforms.newton(jax.hessian(f))
    p = jnp.array([1.0, 0.0])
    upd, _ = opt.update(jax.grad(f)(p), opt.init(p), p)
    np.testing.assert_allclose(f(p + upd), 0.0, atol=1e-15)  # one Newton step reaches the minimum
    rng = np.random.default_rng(0)
    for A in (rng.standard_normal((4, 4)),):
        S = A + A.T
        for M in (S @ S.T + np.eye(4), S):  # definite, indefinite
            b = rng.standard_normal(4)
            np.testing.assert_allclose(
                transforms.newton_direction(jnp.asarray(M), jnp.asarray(b)),
                np.linalg.solve(M, b),
                rtol=1e-10,
            )


def test_newton_direction_counts_eigenvalues_up_to_size_eps_max_as_rounding(x64):
    """μ = 6ε·max|μ| is signal for the default cut-off (size = d = 3: 3ε·max) and rounding for
    size = 10: the exact solve divides by it (a component of 1/(12ε)), the pseudo-inverse drops
    it."""
    eps = np.finfo(np.float64).eps
    H, g = jnp.diag(jnp.array([2.0, 1.0, 12 * eps])), jnp.array([1.0, 1.0, 1.0])
    np.testing.assert_allclose(
        transforms.newton_direction(H, g), [0.5, 1.0, 1 / (12 * eps)], rtol=1e-12
    )
    np.testing.assert_array_equal(transforms.newton_direction(H, g, size=10), [0.5, 1.0, 0.0])
    np.testing.assert_allclose(
        transforms.newton_direction(H, g, size=5.9), [0.5, 1.0, 1 / (12 * eps)], rtol=1e-12
    )


def test_newton_direction_adds_the_damping_on_every_branch(x64):
    """(H + λI)⁻¹g with λ = 0.25 on each branch, against the diagonal closed form: positive definite
    (Cholesky), indefinite (LU; undamped it would divide by −1 instead of −0.75), and singular only
    once damped (diag(2, −0.25, 0) + λI has a zero: the pseudo-inverse of H + λI, not of H)."""
    g, lam = jnp.array([1.0, -2.0, 0.5]), 0.25
    for diag in ([3.0, 1.0, 0.5], [2.0, -1.0, 0.5]):
        np.testing.assert_allclose(
            transforms.newton_direction(jnp.diag(jnp.array(diag)), g, lam),
            g / (jnp.array(diag) + lam),
            rtol=1e-12,
        )
    np.testing.assert_allclose(
        transforms.newton_direction(jnp.diag(jnp.array([2.0, -0.25, 0.0])), g, lam),
        [1.0 / 2.25, 0.0, 0.5 / 0.25],
        rtol=1e-12,
    )


def test_newton_direction_refuses_other_shapes_and_solves_integers_in_the_default_float(x64):
    """A 1-D H broadcast against the identity into a non-symmetric matrix and gave NaN; a g of
    another length failed in JAX's vectorisation, naming neither. Integer H and g were solved in
    float32 under x64 ([0.12500004, 0.6249999] for [0.125, 0.625]); now in the default float, as the
    toolkit takes integer data everywhere."""
    for H, g, name in (
        (jnp.array([2.0, 4.0]), jnp.ones(2), "H must be a square"),
        (jnp.ones((2, 3)), jnp.ones(2), "H"),
        (jnp.eye(3), jnp.ones(2), "g must be a vector of length d = 3"),
    ):
        with pytest.raises(ValueError, match=name):
            transforms.newton_direction(H, g)
    x = transforms.newton_direction(np.array([[3, 1], [1, 3]]), np.array([1, 2]))
    assert x.dtype == jnp.float64
    np.testing.assert_allclose(x, [0.125, 0.625], rtol=1e-15)
    assert (
        transforms.newton_direction(jnp.eye(2, dtype=jnp.bfloat16), jnp.ones(2, jnp.bfloat16)).dtype
        == jnp.float32
    )


def test_newton_direction_of_a_non_finite_hessian_is_nan_not_a_zero_step(x64):
    """A NaN entry failed Cholesky and every eigenvalue test, the pseudo-inverse dropped every
    eigenvalue and the direction was 0: a Newton iteration then stood still and looked converged.
    A NaN or inf in H, g or a traced damping gives NaN now, on its own, under jit and under vmap
    beside a finite member (which is unchanged)."""
    H, g = jnp.array([[2.0, 0.5], [0.5, 1.0]]), jnp.array([1.0, -1.0])
    want = np.linalg.solve(np.asarray(H), np.asarray(g))
    for bad_H, bad_g in (
        (H.at[0, 1].set(jnp.nan), g),
        (H.at[1, 1].set(jnp.inf), g),
        (H, g.at[0].set(jnp.nan)),
        (jnp.full((2, 2), jnp.nan), g),
    ):
        assert np.all(np.isnan(transforms.newton_direction(bad_H, bad_g)))
        assert np.all(np.isnan(jax.jit(transforms.newton_direction)(bad_H, bad_g)))
        both = jax.vmap(transforms.newton_direction)(jnp.stack([H, bad_H]), jnp.stack([g, bad_g]))
        np.testing.assert_allclose(both[0], want, rtol=1e-12)
        assert np.all(np.isnan(both[1]))
    assert np.all(np.isnan(jax.jit(transforms.newton_direction)(H, g, jnp.nan)))
    # a traced negative damping breaks its rule: NaN, not the zeros of the pseudo-inverse of H − I
    assert np.all(np.isnan(jax.jit(transforms.newton_direction)(jnp.eye(2), g, -1.0)))
    # through transforms.newton, the update is NaN too
    opt = transforms.newton(lambda p: H.at[0, 0].set(jnp.nan))
    upd, _ = opt.update(g, opt.init(g), g)
    assert np.all(np.isnan(upd))


def test_newton_direction_and_newton_refuse_a_negative_damping_by_name(x64):
    """damping = −1 with H = I made H + λI = 0, whose pseudo-inverse gave a zero step; a negative
    (or NaN) damping is refused by name, in newton_direction and when building transforms.newton."""
    for lam in (-1.0, -1e-12, np.float32(-0.5), jnp.asarray(-2.0), np.nan):
        with pytest.raises(ValueError, match="damping"):
            transforms.newton_direction(jnp.eye(2), jnp.ones(2), lam)
        with pytest.raises(ValueError, match="damping"):
            transforms.newton(lambda p: jnp.eye(2), lam)
    with pytest.raises(ValueError, match="damping must have 0 dimension"):
        transforms.newton_direction(jnp.eye(2), jnp.ones(2), jnp.ones(2))
    np.testing.assert_allclose(transforms.newton_direction(jnp.eye(2), jnp.ones(2), 0), [1.0, 1.0])


def test_proximal_strength_schedule_reads_the_step_count_from_zero(x64):
    """A callable strength gets t = 0, 1, 2, …: with a frozen inner step (SGD at rate 0) and the
    soft-threshold prox, z = 1 goes to 1 − 0.1, then − 0.2, then − 0.3."""
    opt = transforms.proximal(
        optax.sgd(0.0),
        lambda z, s: jnp.sign(z) * jnp.maximum(jnp.abs(z) - s, 0.0),
        lambda t: 0.1 * (t + 1),
    )
    z, seen = jnp.array(1.0), []
    state = opt.init(z)
    for _ in range(3):
        u, state = opt.update(jnp.array(0.0), state, z)
        z = optax.apply_updates(z, u)
        seen.append(float(z))
    np.testing.assert_allclose(seen, [0.9, 0.7, 0.4], rtol=1e-12)
    assert int(state.count) == 3


def test_newton_direction_derivatives_are_finite_on_every_branch(x64):
    """Reverse mode through an indefinite H gave NaN: the Cholesky factor (NaN there) was formed
    outside the branch and its derivative, times a zero cotangent, still made NaN; and the eigh
    fallback's derivative was NaN at an indefinite H with a repeated eigenvalue (diag(2, 2, −1)),
    where H⁻¹g is smooth. Both modes now match central differences of the exact solve, on every
    branch, one by one and under vmap (where all branches run)."""
    g = jnp.array([1.0, -2.0, 0.5])
    Hs = [
        jnp.diag(jnp.array([2.0, -1.0, 0.5])),  # indefinite: LU
        jnp.diag(jnp.array([2.0, 2.0, -1.0])),  # indefinite, repeated eigenvalue
        # positive definite: Cholesky
        jnp.array([[3.0, 1.0, 0.0], [1.0, 2.0, 0.5], [0.0, 0.5, 1.0]]),
        jnp.diag(jnp.array([2.0, 2.0, 1.0])),  # definite, repeated eigenvalue
    ]
    f = jax.jit(lambda H: jnp.dot(jnp.array([0.3, 1.0, -0.7]), transforms.newton_direction(H, g)))
    grad, jvp = jax.jit(jax.grad(f)), jax.jit(lambda H, E: jax.jvp(f, (H,), (E,))[1])
    E = jnp.asarray(np.random.default_rng(3).standard_normal((3, 3)))
    E = E + E.T  # a symmetric direction
    for H in Hs:
        fd = (f(H + 1e-6 * E) - f(H - 1e-6 * E)) / 2e-6
        np.testing.assert_allclose(jnp.sum(grad(H) * E), fd, rtol=1e-6)
        np.testing.assert_allclose(jvp(H, E), fd, rtol=1e-6)
    S = jnp.diag(jnp.array([2.0, -1.0, 0.0]))  # numerically singular: the eigh branch
    grads = jax.jit(jax.vmap(jax.grad(f)))(jnp.stack(Hs + [S]))
    for H, gH in zip(Hs, grads):
        np.testing.assert_allclose(gH, grad(H), rtol=1e-10, atol=1e-12)
    # the singular branch keeps its minimum-norm value, with a finite derivative off the null space
    np.testing.assert_allclose(transforms.newton_direction(S, g), [0.5, 2.0, 0.0])
    assert bool(jnp.all(jnp.isfinite(grads[-1])))


def test_newton_direction_derivative_on_a_null_space_with_repeated_eigenvalues(x64):
    """H = Q diag(2, 2, −1, 0, 0) Qᵀ: the pseudo-inverse branch, with a repeated kept and a repeated
    dropped eigenvalue, where eigh's own derivative is NaN. The derivative rule (Daleckii–Krein for
    the truncated spectral function, kept set fixed) matches central differences of that function,
    computed in NumPy with the two smallest |μ| dropped; forward and reverse mode agree, and the
    gradient in H is symmetric (only H's symmetric part moves a symmetric solve)."""
    rng = np.random.default_rng(7)
    Q, _ = np.linalg.qr(rng.standard_normal((5, 5)))
    u, g = rng.standard_normal(5), rng.standard_normal(5)

    def truncated(H, g):
        mu, V = np.linalg.eigh(H)
        keep = np.argsort(np.abs(mu))[2:]
        return u @ (V[:, keep] @ ((V[:, keep].T @ g) / mu[keep]))

    for mus in ([2.0, 2.0, -1.0, 0.0, 0.0], [3.0, 1.0, -2.0, 0.5, 2.0]):
        H = Q @ np.diag(mus) @ Q.T
        E, e = rng.standard_normal((5, 5)), rng.standard_normal(5)
        E = E + E.T
        f = lambda H, g: jnp.dot(jnp.asarray(u), transforms.newton_direction(H, g))
        if mus[-1] == 0.0:
            fd = (
                truncated(H + 1e-6 * E, g + 1e-6 * e) - truncated(H - 1e-6 * E, g - 1e-6 * e)
            ) / 2e-6
        else:
            fd = (
                f(jnp.asarray(H + 1e-6 * E), g + 1e-6 * e)
                - f(jnp.asarray(H - 1e-6 * E), g - 1e-6 * e)
            ) / 2e-6
        np.testing.assert_allclose(
            float(f(jnp.asarray(H), g)),
            truncated(H, g) if mus[-1] == 0.0 else u @ np.linalg.solve(H, g),
            rtol=1e-12,
        )
        jvp = jax.jvp(f, (jnp.asarray(H), jnp.asarray(g)), (jnp.asarray(E), jnp.asarray(e)))[1]
        gH, gg = jax.grad(f, (0, 1))(jnp.asarray(H), jnp.asarray(g))
        np.testing.assert_allclose(float(jvp), fd, rtol=1e-7)
        np.testing.assert_allclose(float(jnp.sum(gH * E) + gg @ e), fd, rtol=1e-7)
        np.testing.assert_allclose(gH, gH.T, atol=1e-14)


VMAPPED_NEWTON_DIRECTION = """
import jax, jax.numpy as jnp, numpy as np
from lowrank_jax import transforms
rng = np.random.default_rng(0)
M = rng.standard_normal((64, 40, 40)).astype(np.float32)
H = jnp.asarray(M @ M.transpose(0, 2, 1) + np.eye(40, dtype=np.float32))
f = jax.jit(jax.vmap(transforms.newton_direction))
for i in range(50):
    jax.block_until_ready(f(H + i * 1e-3, jnp.ones((64, 40))))
print("NEWTON OK")
"""


def test_a_vmapped_newton_direction_on_one_cpu_device_does_not_hang():
    """64 directions at d = 40 on JAX's default single CPU device: before linalg.after ordered its
    factorisations, the batched LU and eigh (both run under vmap) started side by side, each blocked
    a thread of the 2-core machine's intra-op pool waiting for its share, and the program hung
    within 5 calls (5 of 5 runs; 300 calls take ~4 s now). In a subprocess, so a hang is a
    timeout."""
    import os
    import subprocess
    import sys

    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        XLA_FLAGS=" ".join(
            f for f in os.environ.get("XLA_FLAGS", "").split() if "device_count" not in f
        ),
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", VMAPPED_NEWTON_DIRECTION],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError("a vmapped newton_direction hung on one CPU device") from None
    assert proc.returncode == 0 and "NEWTON OK" in proc.stdout, (
        proc.stdout[-3000:] + proc.stderr[-3000:]
    )


def test_backtracking_returns_the_first_halving_with_sufficient_decrease():
    """Against a Python loop over t = 1, 1/2, 1/4, … on random quadratics and steps."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, x0, d = rng.uniform(0.1, 10), rng.normal(), rng.normal() * rng.uniform(0.1, 50)
        f = lambda x, a=a: a * x**2  # noqa: E731
        g = 2 * a * x0
        slope = g * d
        if slope <= 0:
            d, slope = -d, -slope
        t_ref = 1.0
        while not f(x0 - t_ref * d) <= f(x0) - 1e-4 * t_ref * slope and t_ref > 1e-10:
            t_ref *= 0.5
        with jax.enable_x64(True):
            t = transforms.backtracking(lambda t: f(x0 - t * d), f(x0), slope)
        assert float(t) == t_ref


def test_backtracking_rejects_a_nan_trial_and_accepts_within_the_slack():
    # φ is NaN for t > 0.3: the first halving below it, 0.25, is taken, never a NaN step
    phi = lambda t: jnp.where(t > 0.3, jnp.nan, -t)  # noqa: E731
    assert float(transforms.backtracking(phi, 0.0, 1.0)) == 0.25
    # a flat φ fails the strict test at every t down to t_min; a slack above c·slope accepts t = 1
    flat = lambda t: jnp.zeros(())  # noqa: E731
    assert float(transforms.backtracking(flat, 0.0, 1.0, t_min=1e-3)) < 1e-3
    assert float(transforms.backtracking(flat, 0.0, 1.0, slack=1e-3)) == 1.0
