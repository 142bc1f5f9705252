"""1-path-norm family: the proximal optax wrapper, Prox-SGD steps, the Lipschitz bound, sparsity
metric, PGD attack, training and the vmapped λ sweep (on scikit-learn's real 8×8 digits)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from lowrank_jax import Status, pathnorm, prox, transforms
from lowrank_jax.result import Result


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    return jnp.asarray(d.data / 16.0, jnp.float32), jnp.asarray(d.target, jnp.int32)


def _tree_prox_l1(params, s):
    return jax.tree.map(lambda p: prox.soft_threshold(p, s), params)


def test_proximal_sgd_step_is_prox_of_gradient_step():
    rng = np.random.default_rng(0)
    params = {
        "a": jnp.asarray(rng.standard_normal(6), jnp.float32),
        "b": jnp.asarray(rng.standard_normal((2, 3)), jnp.float32),
    }
    grads = jax.tree.map(lambda p: jnp.ones_like(p) * 0.3, params)
    lr, lam = 0.5, 0.4
    opt = transforms.proximal(optax.sgd(lr), _tree_prox_l1, lr * lam)
    upd, _ = opt.update(grads, opt.init(params), params)
    new = optax.apply_updates(params, upd)
    for k in params:
        want = prox.soft_threshold(params[k] - lr * grads[k], lr * lam)
        np.testing.assert_allclose(new[k], want, atol=1e-6)
        # Exact zeros of the prox are exact after apply_updates.
        assert np.array_equal(np.asarray(new[k]) == 0, np.asarray(want) == 0)


def test_proximal_with_schedule_and_adam():
    params = jnp.array([1.0, -2.0, 0.05, 3.0])
    grads = jnp.array([0.1, -0.1, 0.2, 0.0])
    sched = optax.linear_schedule(1.0, 0.5, 4)
    lam = 0.2
    opt = transforms.proximal(optax.sgd(sched), _tree_prox_l1, lambda t: sched(t) * lam)
    state = opt.init(params)
    p = params
    for t in range(3):
        upd, state = opt.update(grads, state, p)
        want = prox.soft_threshold(p - sched(t) * grads, sched(t) * lam)
        p = optax.apply_updates(p, upd)
        np.testing.assert_allclose(p, want, atol=1e-6)
    # Another inner optimizer: Adam's step, then the prox.
    adam = optax.adam(0.1)
    opt = transforms.proximal(adam, _tree_prox_l1, 0.05)
    upd, _ = opt.update(grads, opt.init(params), params)
    a_upd, _ = adam.update(grads, adam.init(params), params)
    np.testing.assert_allclose(
        optax.apply_updates(params, upd), prox.soft_threshold(params + a_upd, 0.05), atol=1e-6
    )
    with pytest.raises(ValueError, match="params"):
        opt.update(grads, opt.init(params))


def test_proximal_forwards_extra_arguments_to_the_inner_optimizer():
    """optax.polyak_sgd needs update(..., value=f(z)); the wrapper took no extra arguments and
    raised TypeError, although any inner optimizer was documented to work. Each step must equal the
    Polyak step z + u_t followed by the exact path-norm prox, with
    u_t = −(f(z) − f*)/‖∇f(z)‖² ∇f(z)."""
    rng = np.random.default_rng(7)
    target = (
        jnp.asarray(rng.standard_normal((5, 8)), jnp.float32),
        jnp.asarray(rng.standard_normal((3, 5)), jnp.float32),
    )
    f = lambda z: 0.5 * sum(jnp.sum((a - b) ** 2) for a, b in zip(z, target))  # noqa: E731
    path = lambda z, s: pathnorm.path_norm_prox(z[0], z[1], s)  # noqa: E731
    lam = 0.05
    opt = transforms.proximal(optax.polyak_sgd(), path, lam)
    assert isinstance(opt, optax.GradientTransformationExtraArgs)
    ref = optax.polyak_sgd()
    z = (jnp.zeros((5, 8), jnp.float32), jnp.full((3, 5), 0.1, jnp.float32))
    state, ref_state = opt.init(z), ref.init(z)
    # Each side of a step as one program (op by op, each small op compiles on its own).
    value_and_grad, apply = jax.jit(jax.value_and_grad(f)), jax.jit(optax.apply_updates)
    ref_update = jax.jit(lambda g, s, z, value: ref.update(g, s, z, value=value))
    for _ in range(3):
        value, grads = value_and_grad(z)
        upd, state = jax.jit(opt.update)(grads, state, z, value=value)
        u, ref_state = ref_update(grads, ref_state, z, value)
        want = path(apply(z, u), lam)
        z = apply(z, upd)
        for got, w in zip(z, want):
            np.testing.assert_allclose(got, w, rtol=1e-6, atol=1e-7)
            assert np.array_equal(np.asarray(got) == 0, np.asarray(w) == 0)
    # An inner optimizer without extra arguments ignores them, also inside a chain that needs them.
    sgd = transforms.proximal(optax.sgd(0.1), path, lam)
    upd, _ = sgd.update(grads, sgd.init(z), z, value=value)
    for got, w in zip(
        optax.apply_updates(z, upd), path(jax.tree.map(lambda a, g: a - 0.1 * g, z, grads), lam)
    ):
        np.testing.assert_allclose(got, w, rtol=1e-6, atol=1e-7)
    chained = optax.chain(optax.clip_by_global_norm(1e3), opt)
    upd, _ = chained.update(grads, chained.init(z), z, value=value)
    assert all(np.all(np.isfinite(np.asarray(a))) for a in jax.tree.leaves(upd))


def test_prox_sgd_on_the_network_applies_the_path_norm_prox(digits):
    X, y = digits
    model = pathnorm.ShallowNet(64, 20, 10, key=jax.random.key(0))
    params = eqx.filter(model, eqx.is_array)
    lr, lam = 0.1, 0.5
    opt = pathnorm.optimizer("path", "prox", lr, lam)

    @eqx.filter_jit  # the optimizer's step as one program (op by op, each op compiles on its own)
    def step(model, X, y):
        g = eqx.filter_grad(pathnorm.cross_entropy)(model, X, y)
        upd, _ = opt.update(g, opt.init(params), params)
        return g, eqx.apply_updates(model, upd)

    g, new = step(model, X[:100], y[:100])
    # the gradient step by hand, in NumPy
    W_in = np.asarray(model.hidden.weight) - lr * np.asarray(g.hidden.weight)
    W_out = np.asarray(model.out.weight) - lr * np.asarray(g.out.weight)
    P_in, P_out = pathnorm.path_norm_prox(W_in, W_out, lr * lam)
    np.testing.assert_allclose(new.hidden.weight, P_in, atol=1e-6)
    np.testing.assert_allclose(new.out.weight, P_out, atol=1e-6)
    np.testing.assert_allclose(
        new.hidden.bias, np.asarray(model.hidden.bias) - lr * np.asarray(g.hidden.bias), atol=1e-6
    )


def test_path_norm_bounds_the_lipschitz_constant():
    """Theorem 1: ‖h(x) − h(x')‖₁ ≤ P · ‖x − x'‖_∞ ≤ product bound · ‖x − x'‖_∞."""
    model = pathnorm.ShallowNet(30, 15, 4, key=jax.random.key(1))
    b = pathnorm.lipschitz_bounds(model)
    # Both bounds by hand: the path norm sums |W_out[k, j]| |W_in[j, i]| over every input-output
    # path; the product bound is ‖vec W_out‖₁ times the largest row ℓ1 norm of W_in.
    W_in, W_out = (np.asarray(w, np.float64) for w in model.weights)
    by_paths = sum(
        abs(W_out[k, j]) * abs(W_in[j, i]) for k in range(4) for j in range(15) for i in range(30)
    )
    np.testing.assert_allclose(float(b["path"]), by_paths, rtol=1e-5)
    np.testing.assert_allclose(
        float(b["product"]), np.abs(W_out).sum() * np.abs(W_in).sum(axis=1).max(), rtol=1e-5
    )
    assert float(b["path"]) <= float(b["product"]) + 1e-6
    rng = np.random.default_rng(1)
    X = jnp.asarray(rng.uniform(size=(2000, 30)), jnp.float32)
    D = jnp.asarray(rng.uniform(-1, 1, size=(2000, 30)) * 0.01, jnp.float32)
    lhs = jnp.sum(jnp.abs(model(X + D) - model(X)), axis=1)
    ratio = lhs / jnp.max(jnp.abs(D), axis=1)
    assert float(jnp.max(ratio)) <= float(b["path"]) * (1 + 1e-4)
    # The gradient-aligned direction gets close: the bound is not vacuous.
    assert float(jnp.max(ratio)) > 0.05 * float(b["path"])


def test_nonzero_fraction_counts_dead_units_as_zero():
    model = pathnorm.ShallowNet(5, 4, 3, key=jax.random.key(2))
    W_in = jnp.ones((4, 5)).at[0].set(0.0).at[2, :3].set(0.0)
    W_out = jnp.ones((3, 4)).at[:, 1].set(0.0)
    m = eqx.tree_at(lambda m: (m.hidden.weight, m.out.weight), model, (W_in, W_out))
    # Units 0 (no inputs) and 1 (no outputs) are dead; unit 2 keeps 2 inputs + 3 outputs; unit 3 all
    # 5 + 3.
    assert float(pathnorm.nonzero_fraction(m)) == pytest.approx((2 + 3 + 5 + 3) / 32)


def test_a_network_with_a_non_finite_parameter_has_nan_metrics():
    """A diverged network (a sweep point with too large a step: under jit or vmap nothing raises)
    has NaN logits, whose argmax is class 0, and NaN weights, which count as non-zero: error_rate,
    robust_error and nonzero_fraction read 0.675, 0.675 and 1.0 for one (a plausible error and
    share). They are NaN now, eagerly and traced, whichever parameter (a bias too) is not finite; a
    finite network's metrics are unchanged."""
    rng = np.random.default_rng(0)
    X, y = jnp.asarray(rng.uniform(size=(40, 3)), jnp.float32), jnp.asarray(rng.integers(0, 3, 40))
    model = pathnorm.ShallowNet(3, 4, 3, key=jax.random.key(0), dtype=jnp.float32)

    def metrics(m):
        return jnp.stack(
            [
                pathnorm.error_rate(m, X, y),
                pathnorm.robust_error(m, X, y, 0.1, key=0, steps=2),
                pathnorm.nonzero_fraction(m),
            ]
        )

    finite = metrics(model)
    assert np.all(np.isfinite(finite)) and float(finite[2]) == 1.0
    np.testing.assert_array_equal(jax.jit(metrics)(model), finite)
    for where, value in ((lambda m: m.hidden.weight, jnp.nan), (lambda m: m.out.bias, jnp.inf)):
        broken = eqx.tree_at(where, model, replace_fn=lambda a: a.at[0].set(value))
        assert np.all(np.isnan(metrics(broken))) and np.all(np.isnan(jax.jit(metrics)(broken)))


def test_pgd_stays_in_the_ball_and_hurts(digits):
    X, y = digits
    res = pathnorm.train(
        X[:1000],
        y[:1000],
        reg="l1",
        method="sgd",
        lr=0.5,
        lam=0.0,
        epochs=5,
        hidden=32,
        key=jax.random.key(0),
    )
    model = res.model
    Xs, ys = X[1000:1400], y[1000:1400]
    eps = 0.1
    Z = pathnorm.pgd_attack(model, Xs, ys, eps, key=jax.random.key(1))
    Z_np, Xs_np = np.asarray(Z), np.asarray(Xs)
    assert float(np.max(np.abs(Z_np - Xs_np))) <= eps + 1e-6
    assert float(np.min(Z_np)) >= 0.0 and float(np.max(Z_np)) <= 1.0
    assert float(pathnorm.cross_entropy(model, Z, ys)) > float(
        pathnorm.cross_entropy(model, Xs, ys)
    )
    clean = float(pathnorm.error_rate(model, Xs, ys))
    assert clean < 0.15
    robust = float(pathnorm.robust_error(model, Xs, ys, eps, key=jax.random.key(1)))
    assert robust > clean
    # robust_error is the error rate on pgd_attack's examples (its defaults: 40 steps of ε/20)
    assert robust == float(pathnorm.error_rate(model, Z, ys))
    np.testing.assert_allclose(
        pathnorm.robust_error(model, Xs, ys, 0.0, key=jax.random.key(1)), clean
    )
    # lr is the ascent step: 0 leaves the random start where it is, whatever the step count
    start = pathnorm.pgd_attack(model, Xs, ys, eps, key=jax.random.key(2), steps=0)
    still = pathnorm.pgd_attack(model, Xs, ys, eps, key=jax.random.key(2), steps=3, lr=0.0)
    np.testing.assert_array_equal(still, start)
    one = pathnorm.pgd_attack(model, Xs, ys, eps, key=jax.random.key(2), steps=1, lr=2 * eps)
    # a step of 2ε lands every moved pixel on the ball or the box
    moved = np.abs(np.asarray(one) - Xs_np)
    on_edge = (
        np.isclose(moved, eps, atol=1e-6)
        | np.isclose(np.asarray(one), 0)
        | np.isclose(np.asarray(one), 1)
    )
    assert np.all(on_edge | np.isclose(np.asarray(one), np.asarray(start)))


def test_prox_sgd_gives_exact_zeros_sgd_does_not(digits):
    X, y = digits
    kw = dict(reg="path", lr=0.5, lam=3e-3, epochs=15, hidden=32)
    prox_run = pathnorm.train(X, y, method="prox", **kw, key=jax.random.key(3))
    sgd_run = pathnorm.train(X, y, method="sgd", **kw, key=jax.random.key(3))
    assert float(prox_run.nonzero) < 0.7
    assert float(sgd_run.nonzero) == 1.0
    # The regularised loss decreases, to no more than SGD's, and the sparse network still
    # classifies.
    prox_loss, sgd_loss = prox_run.history["loss"], sgd_run.history["loss"]
    assert float(prox_loss[-1].mean()) < 0.5 * float(prox_loss[0].mean())
    assert float(prox_loss[-1].mean()) <= 1.01 * float(sgd_loss[-1].mean())
    assert float(pathnorm.error_rate(prox_run.model, X, y)) < 0.1


def test_layerwise_projection_keeps_the_constraint(digits):
    X, y = digits
    lam = 0.3
    res = pathnorm.train(
        X,
        y,
        reg="layer",
        method="prox",
        lr=0.5,
        lam=lam,
        epochs=2,
        hidden=16,
        key=jax.random.key(4),
    )
    free = pathnorm.train(
        X,
        y,
        reg="layer",
        method="prox",
        lr=0.5,
        lam=0.0,
        epochs=2,
        hidden=16,
        key=jax.random.key(4),
    )
    row_norms = lambda W: float(jnp.max(jnp.sum(jnp.abs(W), axis=1)))  # noqa: E731
    # The ball binds: without it (λ = 0, an infinite ball) both layers end with a row outside it.
    assert all(row_norms(W) > 1 / lam for W in free.model.weights)
    for W in res.model.weights:
        assert row_norms(W) <= 1 / lam * (1 + 1e-5)
    # The progress bar (a callback from inside the compiled program) changes nothing.
    shown = pathnorm.train(
        X,
        y,
        reg="layer",
        method="prox",
        lr=0.5,
        lam=lam,
        epochs=2,
        hidden=16,
        progress=True,
        key=jax.random.key(4),
    )
    np.testing.assert_array_equal(shown.model.hidden.weight, res.model.hidden.weight)


def test_layerwise_prox_sgd_projects_on_radius_one_over_lambda():
    """The layer-wise constraint ball has radius 1/λ (the paper's problem), not the lr·λ of the
    authors' code: rows above it land exactly on it, rows inside stay."""
    model = pathnorm.ShallowNet(6, 4, 3, key=jax.random.key(0))
    W_in = jnp.asarray(np.random.default_rng(0).standard_normal((4, 6))) * jnp.array(
        [[30.0], [30.0], [0.1], [0.1]]
    )
    model = pathnorm.network._with_weights(model, W_in.astype(jnp.float32), model.out.weight)
    opt = pathnorm.optimizer("layer", "prox", 0.2, 0.1)
    zero = jax.tree.map(jnp.zeros_like, model)
    updates, _ = opt.update(zero, opt.init(model), model)
    W = optax.apply_updates(model, updates).hidden.weight
    rows = np.asarray(jnp.sum(jnp.abs(W), axis=1))
    np.testing.assert_allclose(rows[:2], 10.0, rtol=1e-5)
    np.testing.assert_allclose(W[2:], W_in[2:], rtol=1e-6)


def test_pgd_is_a_uniform_start_then_signed_steps_of_eps_over_20(digits):
    """One PGD step against the same computation by hand: Z₀ = clip(X + U[−ε, ε]) with the attack's
    key, Z₁ = clip(clip(Z₀ + (ε/20) sign ∇_Z CE, X ± ε), 0, 1); and the default is 40 such steps."""
    X, y = digits
    model = pathnorm.ShallowNet(X.shape[1], 8, 10, key=jax.random.key(1))
    Xs, ys, eps, key = X[:50], y[:50], 0.1, jax.random.key(2)
    Z0 = jnp.clip(Xs + jax.random.uniform(key, Xs.shape, Xs.dtype, -eps, eps), 0.0, 1.0)

    @jax.jit  # one step as one program (op by op, each small op compiles on its own)
    def step(Z):
        # full-precision products, as pgd_attack traces them: on a GPU the default TF32 flipped the
        # sign of a near-zero gradient entry
        with jax.default_matmul_precision("highest"):
            g = jax.grad(
                lambda Z: jnp.sum(optax.softmax_cross_entropy_with_integer_labels(model(Z), ys))
            )(Z)
            return jnp.clip(jnp.clip(Z + eps / 20 * jnp.sign(g), Xs - eps, Xs + eps), 0.0, 1.0)

    def by_hand(Z, steps):
        for _ in range(steps):
            Z = step(Z)
        return Z

    np.testing.assert_allclose(
        pathnorm.pgd_attack(model, Xs, ys, eps, key=key, steps=1), by_hand(Z0, 1), atol=1e-6
    )
    np.testing.assert_allclose(
        pathnorm.pgd_attack(model, Xs, ys, eps, key=key), by_hand(Z0, 40), atol=1e-5
    )


def test_sweep_equals_separate_runs(digits):
    X, y = digits
    lrs = jnp.array([0.1, 0.2, 0.2])
    lams = jnp.array([0.0, 0.01, 0.05])
    kw = dict(reg="path", method="prox", epochs=1, hidden=16, logs_per_epoch=2)
    out = pathnorm.sweep(X[:800], y[:800], lrs=lrs, lams=lams, seeds=2, **kw, key=jax.random.key(5))
    assert out.history["loss"].shape == out.history["nonzero"].shape == (2, 3, 1, 2)
    assert out.loss.shape == out.nonzero.shape == out.status.shape == out.n_iter.shape == (2, 3)
    keys = jax.random.split(jax.random.key(5), 2)
    for s in range(2):
        for c in range(3):
            one = pathnorm.train(X[:800], y[:800], lr=lrs[c], lam=lams[c], **kw, key=keys[s])
            np.testing.assert_allclose(
                out.model.hidden.weight[s, c], one.model.hidden.weight, atol=2e-5
            )
            np.testing.assert_allclose(
                out.history["nonzero"][s, c], one.history["nonzero"], atol=1e-6
            )
            assert int(out.status[s, c]) == int(one.status) == Status.MAX_ITER


def test_bad_choices_are_refused(digits):
    X, y = digits
    with pytest.raises(ValueError, match="reg"):
        pathnorm.train(X, y, reg="l2", method="sgd", lr=0.1, lam=0.1, key=jax.random.key(0))
    with pytest.raises(ValueError, match="method"):
        pathnorm.optimizer("path", "adam", 0.1, 0.1)
    with pytest.raises(ValueError, match="y has 10 labels but X has"):
        pathnorm.train(X, y[:10], reg="l1", method="sgd", lr=0.1, lam=0.1, key=jax.random.key(0))
    with pytest.raises(ValueError, match="minibatches"):
        pathnorm.sweep(
            X[:500], y[:500], reg="l1", method="sgd", lrs=[0.1], lams=[0.1], key=jax.random.key(0)
        )
    with pytest.raises(ValueError, match="lrs and lams"):
        pathnorm.sweep(
            X, y, reg="l1", method="sgd", lrs=[0.1, 0.2], lams=[0.1], key=jax.random.key(0)
        )


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(lam=-1.0), "lam must be non-negative"),
        (dict(lr=-0.1), "lr must be positive"),
        (dict(lr=0.0), "lr must be positive"),
        (dict(batch=0), "batch must be an integer >= 1"),
        (dict(y=lambda y: y - 1), "labels must be in 0, 1"),
        (dict(y=lambda y: y.astype(np.float32) + 0.5), "non-integer"),
        (dict(y=lambda y: np.array([str(v) for v in y])), "labels must be integers"),
        (dict(outputs=5), "labels must be in 0, …, 4"),
        (
            dict(model=lambda X: pathnorm.ShallowNet(X.shape[1], 8, 3, key=jax.random.key(0))),
            "labels must be in 0, …, 2",
        ),
        (
            dict(model=lambda X: pathnorm.ShallowNet(X.shape[1] + 1, 8, 10, key=jax.random.key(0))),
            "inputs",
        ),
        (dict(X=lambda X: X.at[3, 3].set(jnp.nan)), "X has non-finite"),
        (dict(epochs=-1), "epochs must be an integer >= 1"),
        (dict(hidden=0, reg="l1"), "hidden must be an integer >= 1"),
    ],
)
def test_bad_training_input_is_named(digits, change, match):
    """Each bad argument is refused by name before any training: before these checks a negative λ
    trained to a loss of −4e9, labels past the last output logged NaN losses, and NaN pixels were
    reported as a diverged learning rate."""
    X, y = digits
    kw = dict(
        reg="path", method="prox", lr=0.1, lam=1e-3, epochs=1, batch=50, hidden=8, logs_per_epoch=2
    )
    for name, value in change.items():
        if name in ("X", "y", "model"):
            value = value({"X": jnp.asarray(X), "y": np.asarray(y), "model": X}[name])
        kw[name] = value
    X_, y_ = kw.pop("X", X), kw.pop("y", y)
    with pytest.raises(ValueError, match=match):
        pathnorm.train(X_, y_, **kw, key=jax.random.key(0))


def test_evaluation_input_is_named_and_an_integer_key_is_a_seed(digits):
    """error_rate / robust_error / pgd_attack validated nothing: a (N, 1) y broadcast to an (N, N)
    comparison (error 0.6 of nothing), a short y or labels past the outputs gave an error rate, a
    negative or NaN ε returned a number and an empty X gave NaN. An int key raised a PRNG TypeError
    in pathnorm alone."""
    X, y = digits
    X, y = jnp.asarray(X[:200]), np.asarray(y[:200])
    model = pathnorm.ShallowNet(X.shape[1], 8, 10, key=jax.random.key(0))
    key = jax.random.key(3)
    np.testing.assert_array_equal(
        pathnorm.robust_error(model, X, y, 0.1, key=3, steps=2),
        pathnorm.robust_error(model, X, y, 0.1, key=key, steps=2),
    )
    np.testing.assert_array_equal(
        pathnorm.pgd_attack(model, X, y, 0.1, key=3, steps=2),
        pathnorm.pgd_attack(model, X, y, 0.1, key=key, steps=2),
    )
    # the default key is key(0), for the attack and for a new network
    np.testing.assert_array_equal(
        pathnorm.pgd_attack(model, X, y, 0.1, steps=2),
        pathnorm.pgd_attack(model, X, y, 0.1, key=jax.random.key(0), steps=2),
    )
    np.testing.assert_array_equal(
        pathnorm.robust_error(model, X, y, 0.1, steps=2),
        pathnorm.robust_error(model, X, y, 0.1, key=0, steps=2),
    )
    np.testing.assert_array_equal(
        pathnorm.ShallowNet(X.shape[1], 8, 10).hidden.weight, model.hidden.weight
    )
    np.testing.assert_array_equal(
        pathnorm.ShallowNet(X.shape[1], 8, 10, key=0).out.weight, model.out.weight
    )
    kw = dict(
        reg="l1", method="prox", lr=0.1, lam=1e-3, epochs=1, batch=50, hidden=4, logs_per_epoch=2
    )
    np.testing.assert_array_equal(
        pathnorm.train(X, y, **kw, key=3).history["loss"],
        pathnorm.train(X, y, **kw, key=key).history["loss"],
    )
    for call, match in [
        (lambda: pathnorm.error_rate(model, X, y[:, None]), "1-D"),
        (lambda: pathnorm.error_rate(model, X, y[:10]), "y has 10 labels"),
        (
            lambda: pathnorm.error_rate(pathnorm.ShallowNet(X.shape[1], 8, 3, key=key), X, y),
            "0, …, 2",
        ),
        (lambda: pathnorm.error_rate(model, X[:0], y[:0]), "non-empty"),
        (lambda: pathnorm.robust_error(model, X[:, :5], y, 0.1, key=key), "takes 64 inputs"),
        (lambda: pathnorm.robust_error(model, X, y, -0.1, key=key), "eps must be non-negative"),
        (lambda: pathnorm.robust_error(model, X, y, float("nan"), key=key), "eps has non-finite"),
        (lambda: pathnorm.pgd_attack(model, X, y, 0.1, key=key, steps=-1), "steps"),
        (lambda: pathnorm.error_rate((model,), X, y), "ShallowNet"),
    ]:
        with pytest.raises(ValueError, match=match):
            call()
    # Under jit the labels are traced: only their shape and dtype are checked, the value is the
    # same.
    jitted = jax.jit(lambda m, yy: pathnorm.error_rate(m, X, yy))(model, jnp.asarray(y, jnp.int32))
    np.testing.assert_array_equal(jitted, pathnorm.error_rate(model, X, y))


def test_pgd_keeps_float32_data_under_x64_and_clips_to_the_stated_bounds(digits):
    """With x64 on, a float32 X crashed the attack's loop (ε became float64 and promoted the carry).
    Standardised inputs were clipped to [0, 1] unasked, so ε = 0 moved them by up to 3.9 and the
    "clean" error at ε = 0 was not the clean error: X outside the bounds is now refused, and
    bounds=None (or the inputs' own range) attacks them as they are."""
    X, y = digits
    X, y = np.asarray(X[:200], np.float32), np.asarray(y[:200])
    model = pathnorm.ShallowNet(X.shape[1], 8, 10, key=jax.random.key(0))
    with jax.enable_x64(True):
        Z = pathnorm.pgd_attack(model, X, y, 0.1, key=1, steps=3)
        assert Z.dtype == jnp.float32 and float(jnp.max(jnp.abs(Z - X))) <= 0.1 + 1e-6
    Xs = (X - X.mean(0)) / (X.std(0) + 1e-3)  # standardised: outside [0, 1]
    with pytest.raises(ValueError, match="outside bounds"):
        pathnorm.robust_error(model, Xs, y, 0.0, key=1)
    for bounds in (None, (float(Xs.min()), float(Xs.max())), np.array([Xs.min(), Xs.max()])):
        np.testing.assert_array_equal(
            pathnorm.pgd_attack(model, Xs, y, 0.0, key=1, bounds=bounds), Xs
        )
        np.testing.assert_allclose(
            pathnorm.robust_error(model, Xs, y, 0.0, key=1, bounds=bounds),
            pathnorm.error_rate(model, Xs, y),
        )
    Z = pathnorm.pgd_attack(model, Xs, y, 0.5, key=1, steps=5, bounds=None)
    assert float(jnp.max(jnp.abs(Z - Xs))) <= 0.5 + 1e-5 and float(jnp.max(jnp.abs(Z - Xs))) > 0.4
    for bad in [(1.0, 0.0), "01", (0.0,)]:
        with pytest.raises(ValueError, match="bounds"):
            pathnorm.pgd_attack(model, X, y, 0.1, key=1, bounds=bad)


def test_integer_pixels_train_like_their_float_values(digits):
    """An integer X (0/1 features, uint8 pixels) is converted to float: the run equals the float
    run. (It used to keep X's integer dtype and round lr and λ down to 0: the weights never
    moved.)"""
    X, y = digits
    Xb = (np.asarray(X) > 0.5).astype(np.uint8)
    kw = dict(
        reg="path", method="prox", lr=0.1, lam=1e-3, epochs=1, batch=50, hidden=8, logs_per_epoch=2
    )
    ints = pathnorm.train(Xb, y, **kw, key=jax.random.key(0))
    floats = pathnorm.train(Xb.astype(np.float32), y, **kw, key=jax.random.key(0))
    np.testing.assert_allclose(
        ints.model.hidden.weight, floats.model.hidden.weight, rtol=1e-6, atol=1e-7
    )
    start = pathnorm.ShallowNet(X.shape[1], 8, 10, key=jax.random.split(jax.random.key(0))[0])
    assert float(jnp.max(jnp.abs(ints.model.hidden.weight - start.hidden.weight))) > 1e-3
    assert (
        0.0
        <= float(pathnorm.robust_error(ints.model, Xb, y, 0.1, key=jax.random.key(1), steps=2))
        <= 1.0
    )


def test_layer_projection_at_zero_strength_is_the_identity():
    """λ = 0 for the layer-wise rule is an infinite ℓ1 ball (docs list λ = 0 for it); it used to be
    a ZeroDivisionError outside jit."""
    m = pathnorm.ShallowNet(5, 4, 3, key=jax.random.key(0))
    out = pathnorm.prox_step(m, 0.0, "layer")
    for a, b in zip(out.weights, m.weights):
        np.testing.assert_array_equal(a, b)


def test_counts_given_as_0d_arrays_train_like_ints(digits):
    """batch and logs_per_epoch read from a config arrive as np.int64 or 0-d arrays. They were
    checked, then the original objects went on to the compiled training, which traced them and
    failed to slice ("Slice entries must be static integers"); epochs, hidden and outputs already
    worked. Every count is now used as the int it names, in train and in sweep."""
    X, y = digits[0][:200], digits[1][:200]
    kw = dict(reg="path", method="prox", lr=0.1, lam=1e-3, hidden=8)
    want = pathnorm.train(
        X, y, epochs=1, batch=20, logs_per_epoch=2, outputs=10, **kw, key=jax.random.key(0)
    )
    for as_count in (np.int64, np.array, jnp.asarray):
        got = pathnorm.train(
            X,
            y,
            epochs=as_count(1),
            batch=as_count(20),
            logs_per_epoch=as_count(2),
            outputs=as_count(10),
            **kw,
            key=jax.random.key(0),
        )
        np.testing.assert_array_equal(got.model.hidden.weight, want.model.hidden.weight)
        assert got.history["loss"].shape == want.history["loss"].shape == (1, 2)
    swept = pathnorm.sweep(
        X,
        y,
        reg="path",
        method="prox",
        lrs=jnp.array([0.1]),
        lams=jnp.array([1e-3]),
        epochs=1,
        batch=np.array(20),
        logs_per_epoch=np.int64(2),
        hidden=8,
        seeds=np.array(1),
        key=jax.random.key(0),
    )
    assert swept.history["loss"].shape == (1, 1, 1, 2)


@pytest.mark.parametrize("reg", ["l1", "path"])
@pytest.mark.parametrize("method", ["prox", "sgd"])
def test_logged_loss_carries_lambda_times_the_penalty(reg, method):
    """train logs the regularised minibatch loss CE + λ g for both methods (Prox-SGD keeps g out of
    its gradient, not out of the log). With a learning rate too small to move the weights, two runs
    on the same minibatches differ by Δλ · g(model₀) at every log point."""
    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.random((60, 6)), jnp.float32)
    y = jnp.asarray(rng.integers(0, 3, 60))
    model = pathnorm.ShallowNet(6, 5, 3, key=jax.random.key(1))
    kw = dict(reg=reg, method=method, lr=1e-9, epochs=2, batch=10, logs_per_epoch=2, model=model)
    low = pathnorm.train(X, y, lam=0.0, **kw, key=jax.random.key(0)).history["loss"]
    high = pathnorm.train(X, y, lam=2.0, **kw, key=jax.random.key(0)).history["loss"]
    np.testing.assert_allclose(high - low, 2.0 * float(pathnorm.penalty(model, reg)), rtol=1e-4)


def test_network_is_elu_of_the_affine_hidden_layer_then_affine():
    """h(x) = W_out · elu(W_in x + b_in) + b_out, checked in NumPy with the module's own (non-zero)
    biases, for a batch and for a single example."""
    model = pathnorm.ShallowNet(6, 4, 3, key=jax.random.key(7))
    W_in, W_out = (np.asarray(w, np.float64) for w in model.weights)
    b_in, b_out = np.asarray(model.hidden.bias, np.float64), np.asarray(model.out.bias, np.float64)
    assert np.all(b_in != 0) and np.all(b_out != 0)
    X = np.random.default_rng(0).uniform(-2, 2, (9, 6))
    Z = X @ W_in.T + b_in
    want = np.where(Z > 0, Z, np.expm1(Z)) @ W_out.T + b_out
    np.testing.assert_allclose(model(jnp.asarray(X, jnp.float32)), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model(jnp.asarray(X[0], jnp.float32)), want[0], rtol=1e-5, atol=1e-6)


def test_penalties_by_hand():
    """g for each regulariser on non-square layers (so that an axis or layer mix-up shows): the
    path norm sums over input-output paths, "l1" both layers' entries, "layer" both layers' ℓ∞
    operator norms (largest row ℓ1 norm); the SGD loss adds λ g to the cross-entropy."""
    model = pathnorm.ShallowNet(7, 5, 3, key=jax.random.key(8))
    W_in, W_out = (np.asarray(w, np.float64) for w in model.weights)
    by_paths = sum(
        abs(W_out[k, j]) * abs(W_in[j, i]) for k in range(3) for j in range(5) for i in range(7)
    )
    np.testing.assert_allclose(pathnorm.penalty(model, "path"), by_paths, rtol=1e-5)
    np.testing.assert_allclose(
        pathnorm.penalty(model, "l1"), np.abs(W_in).sum() + np.abs(W_out).sum(), rtol=1e-5
    )
    np.testing.assert_allclose(
        pathnorm.penalty(model, "layer"),
        np.linalg.norm(W_in, np.inf) + np.linalg.norm(W_out, np.inf),
        rtol=1e-5,
    )
    X = jnp.asarray(np.random.default_rng(1).random((8, 7)), jnp.float32)
    y = jnp.arange(8) % 3
    for reg in pathnorm.REGULARIZERS:
        ce = float(pathnorm.cross_entropy(model, X, y))
        np.testing.assert_allclose(
            pathnorm.loss_fn(model, X, y, reg, "sgd", 0.3),
            ce + 0.3 * float(pathnorm.penalty(model, reg)),
            rtol=1e-5,
        )
        np.testing.assert_allclose(pathnorm.loss_fn(model, X, y, reg, "prox", 0.3), ce, rtol=1e-6)


def test_prox_step_acts_on_both_weight_matrices_and_not_on_biases():
    """ "l1" soft-thresholds W_in and W_out at the strength; "layer" puts every row of both onto the
    ℓ1 ball of radius 1/strength (rows outside land on it, rows inside stay); "path" is the
    path-norm prox. Biases never change."""
    model = pathnorm.ShallowNet(7, 5, 3, key=jax.random.key(9))
    W_in = np.asarray(model.hidden.weight) * np.array(
        [[4.0], [0.3], [4.0], [0.3], [4.0]], np.float32
    )
    # rows out of and in the ball
    W_out = np.asarray(model.out.weight) * np.array([[4.0], [0.3], [4.0]], np.float32)
    model = pathnorm.network._with_weights(model, jnp.asarray(W_in), jnp.asarray(W_out))
    s = 0.3
    out = pathnorm.prox_step(model, s, "l1")
    np.testing.assert_allclose(
        out.hidden.weight, np.sign(W_in) * np.maximum(np.abs(W_in) - s, 0), atol=1e-6
    )
    np.testing.assert_allclose(
        out.out.weight, np.sign(W_out) * np.maximum(np.abs(W_out) - s, 0), atol=1e-6
    )
    out = pathnorm.prox_step(model, s, "layer")
    for P, W in zip(out.weights, (W_in, W_out)):
        P, norms = np.asarray(P), np.abs(W).sum(axis=1)
        assert np.any(norms > 1 / s) and np.any(norms <= 1 / s)
        np.testing.assert_allclose(np.abs(P).sum(axis=1)[norms > 1 / s], 1 / s, rtol=1e-5)
        np.testing.assert_array_equal(P[norms <= 1 / s], W[norms <= 1 / s])
        assert np.all(P * W >= 0) and np.all(np.abs(P) <= np.abs(W))
    out = pathnorm.prox_step(model, s, "path")
    for got, want in zip(out.weights, pathnorm.path_norm_prox(W_in, W_out, s)):
        np.testing.assert_array_equal(got, want)
    for reg in pathnorm.REGULARIZERS:
        out = pathnorm.prox_step(model, s, reg)
        np.testing.assert_array_equal(out.hidden.bias, model.hidden.bias)
        np.testing.assert_array_equal(out.out.bias, model.out.bias)


def test_logs_are_the_last_minibatch_of_each_log_point_and_epochs_reshuffle():
    """With a learning rate too small to move the weights, every logged loss is CE + λ g of the
    initial network on one minibatch. One log per minibatch: an epoch's logs average to the
    full-data loss (every example once per epoch), and the second epoch's minibatches differ from
    the first's (reshuffled). Half as many logs report every second of those: the minibatch just
    before the log."""
    rng = np.random.default_rng(2)
    X = jnp.asarray(rng.random((40, 5)), jnp.float32)
    y = jnp.asarray(rng.integers(0, 3, 40))
    model = pathnorm.ShallowNet(5, 4, 3, key=jax.random.key(1))
    kw = dict(reg="path", method="prox", lr=1e-9, lam=0.5, epochs=2, batch=5, model=model)
    every = pathnorm.train(X, y, logs_per_epoch=8, **kw, key=jax.random.key(0)).history["loss"]
    # (train's products are full float32; so must the reference's be: on a GPU the building blocks'
    # default TF32 moved it by 1.1e-5)
    with jax.default_matmul_precision("highest"):
        full = float(pathnorm.cross_entropy(model, X, y)) + 0.5 * float(
            pathnorm.penalty(model, "path")
        )
    np.testing.assert_allclose(np.asarray(every).mean(axis=1), [full, full], rtol=1e-5)
    assert np.ptp(np.asarray(every[0])) > 1e-3  # the minibatches differ
    assert not np.allclose(every[0], every[1], rtol=1e-4)
    half = pathnorm.train(X, y, logs_per_epoch=4, **kw, key=jax.random.key(0))
    np.testing.assert_allclose(half.history["loss"], every[:, 1::2], rtol=1e-5)
    assert float(half.loss) == float(half.history["loss"][-1, -1])  # the final value: the last log


def test_progress_bar_reaches_the_number_of_epochs(recorded_bars):
    """progress=True: the callbacks from inside the compiled training move the bar to ``epochs``."""
    rng = np.random.default_rng(3)
    X, y = jnp.asarray(rng.random((30, 3)), jnp.float32), jnp.asarray(rng.integers(0, 2, 30))
    pathnorm.train(
        X,
        y,
        reg="l1",
        method="prox",
        lr=0.1,
        lam=0.01,
        epochs=3,
        batch=10,
        hidden=3,
        logs_per_epoch=1,
        progress=True,
        key=jax.random.key(0),
    )
    (rec,) = recorded_bars
    assert rec.total == 3 and rec.n == 3


def test_progress_bar_of_a_traced_training_warns_and_a_sweep_bar_still_counts_its_points(
    recorded_bars,
):
    """Under the user's jit, train(progress=True) opened its bar while the program was traced and
    closed it before it ran (a 0/epochs bar): it now warns and shows none. Inside a sweep with a
    progress bar, training's own bar (even unshown) closed the sweep's slot, and the sweep's bar
    stayed at 0 until its final top-up; the bars now keep to their channels."""
    from lowrank_jax import progress, sweep

    rng = np.random.default_rng(3)
    X, y = jnp.asarray(rng.random((30, 3)), jnp.float32), jnp.asarray(rng.integers(0, 2, 30))
    kw = dict(reg="l1", method="prox", lam=0.01, epochs=2, batch=10, hidden=3, logs_per_epoch=1)
    with pytest.warns(UserWarning, match="progress=True has no effect on a traced call"):
        traced = jax.jit(
            lambda lr: pathnorm.train(
                X, y, lr=lr, progress=True, **kw, key=jax.random.key(0)
            ).history["loss"]
        )(0.1)
    np.testing.assert_allclose(
        traced, pathnorm.train(X, y, lr=0.1, **kw, key=jax.random.key(0)).history["loss"], rtol=1e-6
    )
    assert not [b for b in recorded_bars if not isinstance(b, progress.NoBar)]
    seen = []
    finish = progress.CompiledBar.finish
    # the count just before the final top-up: what the callbacks alone moved the bar to
    progress.CompiledBar.finish = lambda self: (seen.append(self.bar.n), finish(self))
    try:
        sweep.run(
            lambda lr: pathnorm.train(X, y, lr=lr, **kw, key=jax.random.key(0)).loss,
            {"lr": jnp.array([0.05, 0.1, 0.2, 0.4])},
            devices=jax.devices()[:1],
            progress=True,
            chunk=1,
        )
    finally:
        progress.CompiledBar.finish = finish
    assert seen == [4]


def test_exactly_logs_per_epoch_minibatches_are_enough_and_inputs_below_the_bounds_are_refused():
    """An epoch needs ⌊N/batch⌋ ≥ logs_per_epoch: N = batch · logs_per_epoch trains, one example
    fewer is refused. The attack refuses X outside ``bounds`` on either side (below lo as well as
    above hi)."""
    rng = np.random.default_rng(4)
    X, y = jnp.asarray(rng.random((20, 3)), jnp.float32), jnp.asarray(rng.integers(0, 2, 20))
    kw = dict(
        reg="l1", method="prox", lr=0.1, lam=0.01, epochs=1, batch=10, hidden=3, logs_per_epoch=2
    )
    assert pathnorm.train(X, y, **kw, key=jax.random.key(0)).history["loss"].shape == (1, 2)
    with pytest.raises(ValueError, match="minibatches"):
        pathnorm.train(X[:19], y[:19], **kw, key=jax.random.key(0))
    model = pathnorm.ShallowNet(3, 4, 2, key=jax.random.key(0))
    for shifted in (X - 1.0, X + 1.0):
        with pytest.raises(ValueError, match="outside bounds"):
            pathnorm.pgd_attack(model, shifted, y, 0.1, key=1)
    # the bounds given are the range it checks: the shifted data inside them are accepted
    assert (
        pathnorm.pgd_attack(model, X - 1.0, y, 0.1, key=1, steps=1, bounds=(-1.0, 0.0)).shape
        == X.shape
    )


def test_the_initial_network_comes_from_the_first_half_of_the_key():
    """train(key=key) builds its network from jax.random.split(key)[0] and shuffles with the other
    half: passing that network explicitly gives the same run (the initialisation key is not reused
    for the minibatch order)."""
    rng = np.random.default_rng(5)
    X, y = jnp.asarray(rng.random((30, 4)), jnp.float32), jnp.asarray(rng.integers(0, 3, 30))
    kw = dict(
        reg="path", method="prox", lr=0.1, lam=0.01, epochs=2, batch=10, logs_per_epoch=1, outputs=3
    )
    key = jax.random.key(6)
    built = pathnorm.train(X, y, hidden=5, **kw, key=key)
    given = pathnorm.train(
        X, y, model=pathnorm.ShallowNet(4, 5, 3, key=jax.random.split(key)[0]), **kw, key=key
    )
    np.testing.assert_array_equal(built.history["loss"], given.history["loss"])
    np.testing.assert_array_equal(built.model.hidden.weight, given.model.hidden.weight)


def _two_class_problem(n=40, inputs=6):
    rng = np.random.default_rng(0)
    X = rng.random((n, inputs)).astype(np.float32)
    return X, (X[:, :3].sum(1) > X[:, 3:].sum(1)).astype(np.int32)


def test_train_returns_a_result_with_its_epochs_final_logs_and_history():
    """train runs a fixed number of epochs (no tolerance): status MAX_ITER, n_iter = epochs, the
    final loss and share of non-zeros are the last log point of the history, which is per epoch."""
    X, y = _two_class_problem()
    res = pathnorm.train(
        X,
        y,
        reg="path",
        method="prox",
        lr=0.1,
        lam=1e-2,
        epochs=3,
        batch=10,
        hidden=4,
        logs_per_epoch=2,
        key=jax.random.key(0),
    )
    assert isinstance(res, pathnorm.TrainResult) and isinstance(res, Result)
    assert int(res.status) == Status.MAX_ITER and int(res.n_iter) == 3
    assert set(res.history) == {"loss", "nonzero"}
    assert res.history["loss"].shape == res.history["nonzero"].shape == (3, 2)
    assert res.loss.shape == res.nonzero.shape == ()
    assert float(res.loss) == float(res.history["loss"][-1, -1])
    assert (
        float(res.nonzero)
        == float(res.history["nonzero"][-1, -1])
        == float(pathnorm.nonzero_fraction(res.model))
    )
    text = repr(res)
    assert (
        text.startswith("TrainResult(status=MAX_ITER, n_iter=3, loss=")
        and "model=ShallowNet(...)" in text
    )
    assert len(text) < 300, text


def test_a_learning_rate_far_too_large_diverges_also_with_finite_weights():
    """lr = 1e6 with the path prox keeps every weight finite while some grow past 1e20 (the
    logits explode): the growth rule, not only non-finiteness, makes the run DIVERGED. It raises by
    default, eagerly and under jit, naming the fix; with throw=False the status says so. Plain SGD
    at that step goes to NaN, also DIVERGED."""
    X, y = _two_class_problem()
    kw = dict(lam=1e-2, epochs=3, batch=10, hidden=4, logs_per_epoch=2)
    out = pathnorm.train(
        X, y, reg="path", method="prox", lr=1e6, throw=False, **kw, key=jax.random.key(0)
    )
    assert int(out.status) == Status.DIVERGED
    assert all(bool(jnp.all(jnp.isfinite(w))) for w in jax.tree.leaves(out.model))
    assert max(float(jnp.max(jnp.abs(w))) for w in jax.tree.leaves(out.model)) > 1e20
    nan = pathnorm.train(
        X, y, reg="path", method="sgd", lr=1e6, throw=False, **kw, key=jax.random.key(0)
    )
    assert int(nan.status) == Status.DIVERGED and not np.all(np.isfinite(nan.model.out.weight))
    with pytest.raises(RuntimeError, match="diverged.*lower lr"):
        pathnorm.train(X, y, reg="path", method="prox", lr=1e6, **kw, key=jax.random.key(0))
    run = jax.jit(
        lambda lr: (
            pathnorm.train(
                X, y, reg="path", method="prox", lr=lr, outputs=2, **kw, key=jax.random.key(0)
            ).model.out.weight
        )
    )
    with pytest.raises(RuntimeError, match="lower lr"):
        jax.block_until_ready(run(1e6))
    assert np.all(np.isfinite(run(0.1)))


def test_a_traced_invalid_learning_rate_or_lambda_is_invalid_not_diverged():
    """Concrete lr ≤ 0 or λ < 0 are refused by name; traced (a sweep point) they cannot raise at the
    boundary: the run reports INVALID with NaN weights, and raises with throw=True."""
    X, y = _two_class_problem()
    kw = dict(reg="l1", method="prox", epochs=1, batch=10, hidden=4, logs_per_epoch=2, outputs=2)

    def status(lr, lam):
        out = pathnorm.train(X, y, lr=lr, lam=lam, throw=False, **kw, key=jax.random.key(0))
        return out.status, out.model.hidden.weight

    codes, W = jax.vmap(status)(jnp.array([0.1, -0.1, 0.1]), jnp.array([1e-3, 1e-3, -1.0]))
    assert np.asarray(codes).tolist() == [Status.MAX_ITER, Status.INVALID, Status.INVALID]
    assert np.all(np.isfinite(W[0])) and np.all(np.isnan(W[1:]))
    with pytest.raises(RuntimeError, match="lr must be > 0 and lam >= 0"):
        jax.block_until_ready(
            jax.jit(
                lambda lr: pathnorm.train(X, y, lr=lr, lam=1e-3, **kw, key=jax.random.key(0)).loss
            )(-0.1)
        )


def test_sweep_reports_a_diverging_configuration_and_keeps_the_others():
    """sweep raises nothing for a diverging learning rate: its status is DIVERGED, and the other
    configurations equal their single runs."""
    X, y = _two_class_problem()
    kw = dict(reg="path", method="prox", epochs=3, batch=10, hidden=4, logs_per_epoch=2)
    out = pathnorm.sweep(
        X, y, lrs=jnp.array([0.1, 1e6, 0.2]), lams=jnp.full(3, 1e-2), **kw, key=jax.random.key(1)
    )
    assert np.asarray(out.status).tolist() == [[Status.MAX_ITER, Status.DIVERGED, Status.MAX_ITER]]
    key = jax.random.split(jax.random.key(1), 1)[0]
    for c, lr in ((0, 0.1), (2, 0.2)):
        one = pathnorm.train(X, y, lr=lr, lam=1e-2, **kw, key=key)
        np.testing.assert_allclose(
            out.model.out.weight[0, c], one.model.out.weight, rtol=1e-5, atol=1e-6
        )
        np.testing.assert_allclose(out.loss[0, c], one.loss, rtol=1e-5)


def test_labels_of_a_single_class_need_the_number_of_classes():
    """Labels that are all 0 built a one-output network, whose softmax cross-entropy is 0 whatever
    its weights: train and sweep "trained" it with a loss of 0. Fewer than two outputs are refused
    (inferred, given, or a model's), and labels of one class train with outputs given."""
    X, y = _two_class_problem()
    zeros = np.zeros_like(y)
    kw = dict(
        reg="path", method="prox", lr=0.1, lam=1e-2, epochs=1, batch=10, hidden=4, logs_per_epoch=2
    )
    for labels, extra in (
        (zeros, {}),
        (y * 0, {"outputs": 1}),
        (zeros, {"model": pathnorm.ShallowNet(6, 4, 1, key=jax.random.key(0))}),
    ):
        with pytest.raises(ValueError, match="at least two classes"):
            pathnorm.train(X, labels, **kw, **extra, key=jax.random.key(0))
    with pytest.raises(ValueError, match="at least two classes"):
        pathnorm.sweep(
            X,
            zeros,
            reg="path",
            method="prox",
            lrs=[0.1],
            lams=[1e-2],
            epochs=1,
            batch=10,
            hidden=4,
            logs_per_epoch=2,
            key=jax.random.key(0),
        )
    one_class = pathnorm.train(X, zeros, outputs=2, **kw, key=jax.random.key(0))
    assert one_class.model.out.weight.shape == (2, 4) and int(one_class.status) == Status.MAX_ITER
    assert float(one_class.loss) > 0


def test_an_empty_grid_is_refused_by_name():
    """sweep(lrs=[], lams=[]) returned an empty result; an empty grid is refused, naming the
    argument."""
    X, y = _two_class_problem()
    kw = dict(reg="path", method="prox", epochs=1, batch=10, hidden=4, logs_per_epoch=2)
    with pytest.raises(ValueError, match="lrs is empty"):
        pathnorm.sweep(X, y, lrs=[], lams=[], **kw, key=jax.random.key(0))
    with pytest.raises(ValueError, match="lams is empty"):
        pathnorm.sweep(X, y, lrs=[0.1], lams=jnp.zeros(0), **kw, key=jax.random.key(0))
    with pytest.raises(ValueError, match="lrs is empty"):
        pathnorm.sweep(X, y, lrs=np.zeros(0), lams=[1e-3], **kw, key=jax.random.key(0))


def test_the_package_keeps_every_public_name():
    """pathnorm is a package of three modules; every public name is reachable from it."""
    import lowrank_jax
    from lowrank_jax.pathnorm import network, robustness, training

    assert lowrank_jax.pathnorm is pathnorm
    for name in pathnorm.__all__:
        assert hasattr(pathnorm, name), name
    assert pathnorm.train is training.train and pathnorm.ShallowNet is network.ShallowNet
    assert pathnorm.pgd_attack is robustness.pgd_attack
