"""Neural-network low-rank + sparse decomposition: closed-form gradients, the fixed-input first
layer against the dense one, PSD L, recovery, vmap, stopping rules, the Goldstein–Armijo step, bad
input."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lowrank_jax import Status
from lowrank_jax import covariance as cv


def planted(n=30, k=3, pairs=20, seed=0):
    """Σ = MMᵀ + S₀ with S₀ a sum of random 2 × 2 PSD blocks (the paper's generator, small)."""
    rng = np.random.default_rng(seed)
    M0 = rng.normal(size=(n, k))
    S0 = np.zeros((n, n))
    for _ in range(pairs):
        i, j = rng.choice(n, 2, replace=False)
        b = rng.uniform(-1, 1)
        a = rng.uniform(abs(b), 1)
        S0[[i, j, i, j], [j, i, i, j]] += [b, b, a, a]
    return M0 @ M0.T + S0, M0 @ M0.T, S0


@pytest.mark.parametrize("loss", ["huber", "logcosh", "l1"])
def test_gradient_identity(loss, x64):
    Sigma, _, _ = planted(12, 2)
    M = jax.random.normal(jax.random.key(1), (12, 2), jnp.float64)
    # Each side as one compiled program (op by op, every small op compiles on its own).
    auto, closed = jax.jit(
        lambda M, S: (jax.grad(cv.loss_of_M)(M, S, loss, 0.3), cv.grad_of_M(M, S, loss, 0.3))
    )(M, jnp.asarray(Sigma))
    np.testing.assert_allclose(closed, auto, rtol=1e-10, atol=1e-12)
    # μ ≥ |t| for the Huber type, μ ≤ |t| + ε log 2 for log-cosh, both → |t| as ε → 0.
    t = np.linspace(-2, 2, 101)
    huber, logcosh = jax.jit(
        lambda t: (cv.smooth_abs(t, "huber", 0.3), cv.smooth_abs(t, "logcosh", 1e-4))
    )(jnp.asarray(t))
    assert np.all(np.asarray(huber) >= np.abs(t))
    np.testing.assert_allclose(logcosh, np.abs(t), atol=1e-4)


def test_the_objective_of_M_refuses_shapes_and_a_non_symmetric_sigma_by_name(x64):
    """A 1-D M made MMᵀ the scalar ‖m‖², broadcast against Σ into a plausible φ (113.8 on one
    input); a non-symmetric Σ gave a grad_of_M 4.3 off autodiff (its formula uses Σ's symmetry),
    where decompose refuses such a Σ; rank_above of a vector failed inside a transpose. Each is
    refused by name now, also with M traced (jax.grad), and a valid call is unchanged."""
    rng = np.random.default_rng(0)
    M, A = rng.normal(size=(6, 2)), rng.normal(size=(6, 6))
    for fn in (cv.loss_of_M, cv.grad_of_M, jax.grad(cv.loss_of_M)):
        with pytest.raises(ValueError, match="M must be a 2-D matrix"):
            fn(M[:, 0], A + A.T)
        with pytest.raises(ValueError, match="symmetric"):
            fn(M, A)
        with pytest.raises(ValueError, match=r"M \(n, k\) must have as many rows as Sigma"):
            fn(M[:5], A + A.T)
    np.testing.assert_allclose(
        cv.grad_of_M(M, A + A.T), jax.grad(cv.loss_of_M)(M, A + A.T), rtol=1e-12
    )
    with pytest.raises(ValueError, match="L must be a 2-D matrix"):
        cv.rank_above(np.eye(8)[0])
    with pytest.raises(ValueError, match="L must be square"):
        cv.rank_above(np.ones((3, 4)))


def test_l1_subgradient_is_zero_at_an_exact_fit(x64):
    """Σ = MMᵀ exactly (integer M): ω = 0 everywhere. jnp.abs differentiates to +1 at 0, so autodiff
    (which decompose uses) gave 2·1·M ≠ 0 where grad_of_M and the authors' torch.abs give 0."""
    M = jnp.asarray(np.arange(6.0).reshape(3, 2) - 2)
    Sigma = M @ M.T
    np.testing.assert_array_equal(jax.grad(cv.loss_of_M)(M, Sigma, "l1"), np.zeros((3, 2)))
    np.testing.assert_array_equal(cv.grad_of_M(M, Sigma, "l1"), np.zeros((3, 2)))
    t = jnp.array([-2.0, -0.0, 0.0, 3.0])
    np.testing.assert_array_equal(cv.smooth_abs(t, "l1", 0.1), [2.0, 0.0, 0.0, 3.0])


def test_first_layer_gradient_is_rank_one(x64):
    """Lemma IV.1: ∂φ/∂A⁽⁰⁾_{ιη} = h(Σ)_η ∂φ/∂b⁽⁰⁾_ι for a dense first layer."""
    Sigma = jnp.asarray(planted(8, 2)[0])
    x = cv.half_vec(Sigma)
    net, _, _ = cv.init_network(jax.random.key(0), x, 8, 2, (16, 6), "tanh", jnp.float64)
    A = jax.random.normal(jax.random.key(2), (16, x.size), jnp.float64) * 0.05
    b = jnp.full(16, 0.01)

    def phi(A, b):
        return cv.loss_of_M(cv.CovNet(A @ x + b, net.layers, "tanh", 8, 2)(), Sigma, "logcosh", 0.1)

    gA, gb = jax.jit(jax.grad(phi, argnums=(0, 1)))(A, b)  # one program, not op by op
    np.testing.assert_allclose(gA, np.outer(gb, x), rtol=1e-12, atol=1e-14)
    # Lemma IV.2 at the output: the last layer's bias d enters M = g(·) unchanged, so ∂φ/∂d is ∇_M φ
    # read in g's order, row by row (M_ij is output i·k + j), not column by column.
    net1 = cv.CovNet(A @ x + b, net.layers, "tanh", 8, 2)
    g_d, g_M = jax.jit(
        lambda m: (
            jax.grad(lambda m: cv.loss_of_M(m(), Sigma, "logcosh", 0.1))(m).layers[-1].bias,
            cv.grad_of_M(m(), Sigma, "logcosh", 0.1),
        )
    )(net1)
    g_d, g_M = np.asarray(g_d), np.asarray(g_M)
    np.testing.assert_allclose(g_d, g_M.reshape(-1), rtol=1e-12, atol=1e-14)
    assert not np.allclose(g_d, g_M.T.reshape(-1))


def test_half_vectorisation_orders():
    S = jnp.arange(9.0).reshape(3, 3)
    S = S + S.T
    np.testing.assert_array_equal(
        cv.half_vec(S), [S[0, 0], S[0, 1], S[0, 2], S[1, 1], S[1, 2], S[2, 2]]
    )
    np.testing.assert_array_equal(
        cv.half_vec(S, "tril"), [S[0, 0], S[1, 0], S[1, 1], S[2, 0], S[2, 1], S[2, 2]]
    )


_T = np.array([-1.0, 0.0, 0.005])
_M, _EYE = np.ones((3, 1)), np.eye(3)
_OPTION_CALLS = {  # (option, allowed values, call, unknown values)
    "smooth_abs": (
        "loss",
        cv.LOSSES,
        lambda v: cv.smooth_abs(_T, v, 0.01),
        ("L1", "abs", "l2", None),
    ),
    "smooth_abs_grad": (
        "loss",
        cv.LOSSES,
        lambda v: cv.smooth_abs_grad(_T, v, 0.01),
        ("L1", "abs", "l2", None),
    ),
    "loss_of_M": (
        "loss",
        cv.LOSSES,
        lambda v: cv.loss_of_M(_M, _EYE, v),
        ("L1", "abs", "l2", None),
    ),
    "grad_of_M": (
        "loss",
        cv.LOSSES,
        lambda v: cv.grad_of_M(_M, _EYE, v),
        ("L1", "abs", "l2", None),
    ),
    "jit loss_of_M": (
        "loss",
        cv.LOSSES,
        lambda v: jax.jit(cv.loss_of_M, static_argnames="loss")(_M, _EYE, loss=v),
        ("L1", None),
    ),
    "half_vec": (
        "order",
        ("triu", "tril"),
        lambda v: cv.half_vec(_EYE, v),
        ("upper", "TRIU", None),
    ),
    "activation": ("activation", cv.ACTIVATIONS, cv.activation, ("elu", "ReLU", None)),
}


@pytest.mark.parametrize("call", _OPTION_CALLS)
def test_exported_helpers_refuse_unknown_options(call):
    """smooth_abs, smooth_abs_grad, loss_of_M and grad_of_M read an unknown loss ("L1", "abs") as
    log-cosh, half_vec(Σ, "upper") returned the lower triangle and activation("elu") raised a bare
    KeyError. Each now raises decompose's ValueError listing the allowed values (at trace time under
    jit: the options are static)."""
    option, allowed, fn, unknown = _OPTION_CALLS[call]
    listed = ", ".join(repr(a) for a in allowed)
    for bad in unknown:
        with pytest.raises(
            ValueError, match=re.escape(f"{option} must be one of {listed}, got {bad!r}")
        ):
            fn(bad)


def test_exported_helpers_keep_their_values_for_known_options(x64):
    """With the option checks added, the known losses, orders and activations give the values they
    gave (by hand)."""
    t, M, Sigma = jnp.asarray(_T), jnp.asarray(_M), jnp.asarray(_EYE)
    # The valid options, in one compiled program (eager, each small op compiles on its own):
    # μ and μ' at t = (−1, 0, ε/2) with ε = 0.01; MMᵀ − I has zeros on the diagonal and ones off it,
    # so φ = 6 and ∇_M φ = 2 sign(ω) M = 4 for l1.
    A = jnp.arange(9.0).reshape(3, 3)
    got = jax.jit(
        lambda t, M, Sigma, A: (
            [cv.smooth_abs(t, loss, 0.01) for loss in cv.LOSSES],
            [cv.smooth_abs_grad(t, loss, 0.01) for loss in cv.LOSSES],
            cv.loss_of_M(M, Sigma, "l1"),
            cv.grad_of_M(M, Sigma, "l1"),
            [cv.half_vec(A, o) for o in ("triu", "tril")],
            [cv.activation(a)(t) for a in ("relu", "arctan")],
        )
    )(t, M, Sigma, A)
    mu, dmu, phi, grad, halves, acts = got
    tt = _T
    np.testing.assert_allclose(
        mu,
        [[1.0, 0.0, 0.005], [1.0, 0.005, 0.00625], 0.01 * np.log(2 * np.cosh(tt / 0.01))],
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        dmu, [[-1.0, 0.0, 1.0], [-1.0, 0.0, 0.5], np.tanh(tt / 0.01)], rtol=1e-12
    )
    assert float(phi) == 6.0
    np.testing.assert_allclose(grad, np.full((3, 1), 4.0))
    np.testing.assert_array_equal(
        halves, [[0.0, 1.0, 2.0, 4.0, 5.0, 8.0], [0.0, 3.0, 4.0, 6.0, 7.0, 8.0]]
    )
    np.testing.assert_allclose(acts, [[0.0, 0.0, 0.005], (2 / np.pi) * np.arctan(tt)], rtol=1e-12)


@pytest.mark.parametrize(
    "optimizer, lr", [("gd", 1e-4), ("gd-sqrt", 1e-4), ("armijo", 1e-3), ("adam", 1e-3)]
)
def test_fixed_input_layer_moves_exactly_like_the_dense_one(optimizer, lr, x64):
    Sigma = jnp.asarray(planted(10, 2)[0])
    kw = dict(
        hidden=(24, 12),
        activation="tanh",
        loss="logcosh",
        eps=0.1,
        optimizer=optimizer,
        lr=lr,
        max_iter=15,
        tol=None,
        key=jax.random.key(3),
    )
    fixed = cv.decompose(Sigma, 2, first_layer="fixed-input", **kw)
    dense = cv.decompose(Sigma, 2, first_layer="dense", **kw)
    np.testing.assert_allclose(fixed.history["loss"], dense.history["loss"], rtol=1e-10)
    np.testing.assert_allclose(fixed.M, dense.M, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(fixed.history["grad_norm"], dense.history["grad_norm"], rtol=1e-8)
    # ‖Θ‖ is tracked without storing A⁽⁰⁾ (Adam's A⁽⁰⁾ is not low-rank: NaN)
    if optimizer != "adam":
        np.testing.assert_allclose(
            fixed.history["param_norm_max"], dense.history["param_norm_max"], rtol=1e-9
        )
    else:
        assert bool(jnp.all(jnp.isnan(fixed.history["param_norm_max"])))
        assert int(fixed.status) == Status.MAX_ITER  # that NaN is no divergence


def test_recovery_psd_and_outputs(x64):
    from lowrank_jax.datasets.covariance import lrs_problem

    Sigma, L0, S0 = lrs_problem(0, 30, 3, 0.95, variant="paper")
    res = cv.decompose(
        Sigma, 3, hidden=(200, 100), optimizer="adam", lr=1e-3, max_iter=4000, tol=None
    )
    assert float(jnp.linalg.norm(res.L - L0) / np.linalg.norm(L0)) <= 0.05
    # L = MMᵀ is PSD
    assert float(jnp.min(jnp.linalg.eigvalsh(res.L))) >= -1e-10 * float(jnp.max(jnp.abs(res.L)))
    np.testing.assert_allclose(res.L + res.S, Sigma, atol=1e-12)  # S := Σ − L
    assert res.M.shape == (30, 3) and int(jnp.linalg.matrix_rank(res.L)) <= 3


def test_vmap_over_seeds_and_matrices(x64):
    Sigma = jnp.asarray(planted(10, 2)[0])
    kw = dict(hidden=(16,), activation="tanh", loss="huber", max_iter=30, tol=None, lr=1e-3)
    keys = jax.random.split(jax.random.key(0), 3)
    batch = jax.vmap(lambda k: cv.decompose(Sigma, 2, key=k, **kw).history["loss"])(keys)
    for i in range(3):
        np.testing.assert_allclose(
            batch[i], cv.decompose(Sigma, 2, key=keys[i], **kw).history["loss"], rtol=1e-10
        )
    Sigmas = jnp.stack([Sigma, 2.0 * Sigma])
    two = jax.vmap(lambda S: cv.decompose(S, 2, **kw).M)(Sigmas)
    np.testing.assert_allclose(two[1], cv.decompose(Sigmas[1], 2, **kw).M, rtol=1e-9, atol=1e-11)


def test_stopping_rules_and_goldstein_armijo_steps(x64):
    Sigma = jnp.asarray(planted(10, 2)[0])
    kw = dict(hidden=(24, 12), activation="tanh", loss="logcosh", eps=0.1, max_iter=500)
    res = cv.decompose(Sigma, 2, optimizer="armijo", lr=1e-3, tol=1e-3, **kw)
    n = int(res.n_iter)
    assert 10 < n < 500 and int(res.status) == Status.CONVERGED
    hist = {k: np.asarray(v) for k, v in res.history.items()}
    f = hist["loss"][:n]
    assert abs(f[-1] - f[-11:-1].mean()) <= 1e-3 * f[-11:-1].mean()  # the rule that stopped it
    assert all(
        abs(f[j] - f[j - 10 : j].mean()) > 1e-3 * f[j - 10 : j].mean() for j in range(10, n - 1)
    )
    g, t = hist["grad_norm"][:n], hist["step"][:n]
    dec = f[:-1] - f[1:]
    assert np.all(dec >= 0.1 * t[:-1] * g[:-1] ** 2 * (1 - 1e-9))  # Armijo (α = 0.1) ...
    assert np.all(dec <= 0.9 * t[:-1] * g[:-1] ** 2 * (1 + 1e-9))  # ... and Goldstein (β = 0.9)
    assert np.all(np.diff(hist["grad_norm_min"][:n]) <= 0)
    for name, h in hist.items():  # NaN after n_iter
        assert np.all(np.isnan(h[n:])) and np.all(np.isfinite(h[:n])), name
        assert float(getattr(res, name)) == h[n - 1], name  # the final values are the last row
    assert float(res.grad_norm_min) == g.min()
    res = cv.decompose(Sigma, 2, optimizer="armijo", tol=None, grad_tol=5.0, **kw)
    assert float(res.grad_norm) <= 5.0 < float(res.history["grad_norm"][0])
    assert int(res.status) == Status.CONVERGED


@pytest.mark.parametrize(
    "Sigma, rank, match",
    [
        (np.ones((3, 4)), 1, "square"),
        (np.array([[1.0, 0.5], [0.4, 1.0]]), 1, "symmetric.*1e-06"),
        (np.array([[1.0, np.nan], [np.nan, 1.0]]), 1, "non-finite"),
        (np.eye(3), 0, "rank"),
        (np.eye(3), 4, "rank"),
    ],
)
def test_bad_input(Sigma, rank, match):
    with pytest.raises(ValueError, match=match):
        cv.decompose(Sigma, rank, hidden=(4,), max_iter=2)


def test_bad_options():
    for kw, match in (
        (dict(activation="gelu"), "activation"),
        (dict(loss="l2"), "loss"),
        (dict(optimizer="lbfgs"), "optimizer"),
        (dict(armijo=(0.9, 0.1)), "armijo"),
    ):
        with pytest.raises(ValueError, match=match):
            cv.decompose(np.eye(3), 1, hidden=(4,), max_iter=2, **kw)
    for hidden in (8.0, "8", (4, 0)):  # 8.0 failed with "'float' object is not iterable"
        with pytest.raises(ValueError, match="hidden"):
            cv.decompose(np.eye(3), 1, hidden=hidden, max_iter=2)
    for hidden in (np.array(3.0), jnp.array(True)):  # 0-d arrays that are no width
        with pytest.raises(ValueError, match="hidden"):
            cv.decompose(np.eye(3), 1, hidden=hidden, max_iter=2)
    # any sequence of widths, or one
    for hidden in (np.array([4, 2]), range(3, 5), np.array(4), jnp.int32(4)):
        assert cv.decompose(np.eye(3), 1, hidden=hidden, max_iter=2).M.shape == (3, 1)


@pytest.mark.parametrize(
    "armijo",
    [
        (0.1, 0.5, 0.9),
        0.5,
        np.array(0.5),
        (0.1,),
        "ab",
        (0.1, np.nan),
        (0.1, "0.9"),
        np.array([[0.1, 0.9]]),
    ],
)
def test_armijo_must_be_a_pair(armijo):
    """armijo = (0.1, 0.5, 0.9) failed with "too many values to unpack" and armijo = 0.5 with
    "'float' object is not iterable", neither naming the argument; now every value that is not a
    pair of finite numbers is refused by name, before any training."""
    with pytest.raises((ValueError, TypeError), match="armijo"):
        cv.decompose(np.eye(3), 1, hidden=(4,), max_iter=2, optimizer="armijo", armijo=armijo)


def test_armijo_pair_as_an_array_is_the_tuple():
    """Any length-2 sequence of numbers is the pair (α, β): a NumPy array trains exactly as the
    tuple."""
    Sigma, _, _ = planted(n=8, k=2, pairs=4)
    kw = dict(hidden=(6,), max_iter=5, optimizer="armijo", lr=1e-2)
    a = cv.decompose(Sigma, 2, armijo=(0.2, 0.8), **kw)
    b = cv.decompose(Sigma, 2, armijo=np.array([0.2, 0.8]), **kw)
    np.testing.assert_array_equal(a.M, b.M)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_first_layer_adam_sum_closed_form(dtype):
    """F_i = Σ_j u_j²/(a_i u_j + ε): the O(ℓ₁) closed form agrees with the direct sum to rounding,
    the direct sum takes over for tiny second moments, and a_i = 0 gives 0."""
    from lowrank_jax.covariance import nn

    with jax.enable_x64(dtype == "float64"):
        rng = np.random.default_rng(0)
        x = jnp.asarray(np.concatenate([rng.normal(size=500), [0.0, 0.0, 1.0]]), dtype)

        @jax.jit  # one program per shape of a (op by op, every small op compiled on its own)
        def sums(a, x):
            direct = jnp.sum(x * x / (a[:, None] * jnp.abs(x)[None, :] + nn._ADAM_EPS), axis=1)
            return nn._adam_row_sums(a, nn._input_stats(x)), direct

        # more tiny units than the patch takes
        for a in (
            np.asarray(rng.uniform(0.01, 5, 40), dtype),
            np.asarray([0.0, 1e-9, 1e-3, 2.0], dtype),
            np.asarray(np.r_[np.full(40, 1e-9), 1.0], dtype),
        ):
            got, direct = (np.asarray(v) for v in sums(jnp.asarray(a), x))
            assert got.dtype == dtype
            np.testing.assert_allclose(
                np.where(a > 0, got, 0),
                np.where(a > 0, direct, 0),
                rtol=20 * float(jnp.finfo(dtype).eps),
            )
            assert float(got[a == 0].sum()) == 0.0


def test_armijo_stops_when_the_decrease_drops_below_rounding():
    """float32: once no step decreases φ by more than its rounding the line search returns 0 and the
    run stops there (instead of spending its trials on every remaining iteration)."""
    Sigma = jnp.asarray(planted(10, 2)[0], jnp.float32)
    res = cv.decompose(
        Sigma,
        2,
        hidden=(24, 12),
        activation="tanh",
        loss="logcosh",
        eps=0.1,
        optimizer="armijo",
        lr=1e-3,
        max_iter=3000,
        tol=None,
    )
    n = int(res.n_iter)
    assert n < 3000 and float(res.step) == 0.0 and bool(jnp.all(res.history["step"][: n - 1] > 0))
    assert int(res.status) == Status.CONVERGED  # stationary to φ's rounding: a stop, no failure
    np.testing.assert_allclose(res.M @ res.M.T, res.L, rtol=1e-5, atol=1e-5)


def test_armijo_from_a_far_too_long_first_step_still_trains():
    """lr = 1e12: 40 halvings could not reach a step passing Armijo, so the search returned 0 and
    the run stopped after one iteration on its untrained start. It now halves until one passes."""
    Sigma = jnp.asarray(planted(10, 2)[0], jnp.float32)
    kw = dict(hidden=(16, 8), optimizer="armijo", max_iter=30, tol=None)
    far = cv.decompose(Sigma, 2, lr=1e12, **kw)
    assert int(far.n_iter) == 30 and bool(jnp.all(far.history["step"][:29] > 0))
    assert float(far.loss) < 0.9 * float(far.history["loss"][0])
    # an int hidden is one layer of that width (it raised TypeError: 'int' object is not iterable)
    np.testing.assert_array_equal(
        cv.decompose(Sigma, 2, hidden=16, max_iter=5).L,
        cv.decompose(Sigma, 2, hidden=(16,), max_iter=5).L,
    )


@pytest.mark.parametrize("act", cv.ACTIVATIONS)
def test_every_activation_runs(act):
    """relu (the code's), tanh, logistic and the scaled arctan (the theory's) all train: finite
    outputs, a loss that moved, and S = Σ − MMᵀ."""
    Sigma = jnp.asarray(planted(8, 2)[0], jnp.float32)
    res = cv.decompose(
        Sigma,
        2,
        hidden=(16, 8),
        activation=act,
        optimizer="adam",
        lr=1e-2,
        max_iter=3,
        tol=None,
    )
    assert int(res.n_iter) == 3 and res.M.shape == (8, 2)
    for v in (res.M, res.L, res.S, res.history["loss"], res.history["grad_norm"]):
        assert bool(jnp.all(jnp.isfinite(v)))
    assert float(res.loss) != float(res.history["loss"][0])
    np.testing.assert_allclose(res.S, Sigma - res.M @ res.M.T, rtol=1e-5, atol=1e-5)


def test_logistic_and_scaled_arctan_closed_forms(x64):
    """logistic 1/(1 + e^{−t}) and the scaled arctan (2/π) tan⁻¹ t (notes Table I: values in
    (−1, 1), slope 2/π at 0), at a few points and at their exact values."""
    t = jnp.array([-30.0, -2.0, -0.5, 0.0, 0.3, 1.0, 4.0, 30.0])
    tn = np.asarray(t)
    np.testing.assert_allclose(cv.activation("logistic")(t), 1 / (1 + np.exp(-tn)), rtol=1e-14)
    np.testing.assert_allclose(cv.activation("arctan")(t), 2 / np.pi * np.arctan(tn), rtol=1e-14)
    arctan = cv.activation("arctan")
    np.testing.assert_allclose(
        arctan(jnp.array([1.0, np.sqrt(3.0), -1 / np.sqrt(3.0)])), [0.5, 2 / 3, -1 / 3], rtol=1e-14
    )
    assert float(cv.activation("logistic")(jnp.array(0.0))) == 0.5
    assert 0.999 < float(arctan(jnp.array(1e3))) < 1.0
    np.testing.assert_allclose(jax.grad(arctan)(0.0), 2 / np.pi, rtol=1e-14)


@pytest.mark.parametrize("optimizer", ["gd", "gd-sqrt"])
def test_recorded_step_sizes(optimizer, x64):
    """``step`` records h for "gd" and h/√(j+1) for "gd-sqrt", at every step taken."""
    Sigma = jnp.asarray(planted(8, 2)[0])
    lr, n = 3e-4, 6
    res = cv.decompose(
        Sigma,
        2,
        hidden=(12,),
        activation="tanh",
        loss="huber",
        optimizer=optimizer,
        lr=lr,
        max_iter=n,
        tol=None,
    )
    assert int(res.n_iter) == n
    j = np.arange(n)
    expected = np.full(n, lr) if optimizer == "gd" else lr / np.sqrt(j + 1)
    np.testing.assert_allclose(res.history["step"], expected, rtol=1e-14)


@pytest.mark.parametrize("optimizer", ["gd", "adam"])
def test_lr_end_decays_geometrically_from_lr_to_lr_end(optimizer, x64):
    """lr_end: the step runs geometrically from lr (step 0) to lr_end (the last of max_iter steps),
    one constant ratio (lr_end/lr)^(1/(max_iter − 1)) between neighbours."""
    Sigma = jnp.asarray(planted(8, 2)[0])
    lr, lr_end, n = 1e-3, 1e-5, 6
    res = cv.decompose(
        Sigma,
        2,
        hidden=(12,),
        activation="tanh",
        loss="huber",
        optimizer=optimizer,
        lr=lr,
        lr_end=lr_end,
        max_iter=n,
        tol=None,
    )
    steps = np.asarray(res.history["step"])
    # to rounding in float64 (the exponent j/(n − 1) was computed in float32: off by 8e-8)
    np.testing.assert_allclose([steps[0], steps[-1]], [lr, lr_end], rtol=1e-13)
    np.testing.assert_allclose(steps[1:] / steps[:-1], (lr_end / lr) ** (1 / (n - 1)), rtol=1e-13)


def test_armijo_tries_lr_first_and_keeps_it_when_it_passes(x64):
    """The first trial step of the Goldstein–Armijo search is ``lr`` (docstring): at an lr whose
    plain gradient step satisfies α t‖∇φ‖² ≤ φ₀ − φ₁ ≤ β t‖∇φ‖² (checked on a "gd" run), the search
    takes exactly that step."""
    Sigma = jnp.asarray(planted(10, 2)[0])
    kw = dict(
        hidden=(24, 12),
        activation="tanh",
        loss="logcosh",
        eps=0.1,
        tol=None,
        key=jax.random.key(3),
    )
    passing = []
    for lr in np.geomspace(1e-5, 1e-1, 13):
        gd = cv.decompose(Sigma, 2, optimizer="gd", lr=lr, max_iter=2, **kw)
        f = gd.history["loss"]
        dec, g_sq = float(f[0] - f[1]), float(gd.history["grad_norm"][0]) ** 2
        if 0.1 * lr * g_sq <= dec <= 0.9 * lr * g_sq:
            passing.append(lr)
    assert passing, "no lr on the grid passes Goldstein–Armijo at the start"
    for lr in passing[:2]:
        ls = cv.decompose(Sigma, 2, optimizer="armijo", lr=lr, max_iter=1, **kw)
        assert float(ls.step) == lr


@pytest.mark.parametrize("loss", cv.LOSSES)
def test_loss_counts_the_diagonal_and_every_off_diagonal_entry(loss, x64):
    """φ sums μ over all n² entries of MMᵀ − Σ, the diagonal included (eq. 9): with Σ = MMᵀ + D
    (D diagonal) only the diagonal misfits, φ = Σ_i μ(−d_i) + (n² − n) μ(0) and
    ∇_M φ = 2 diag(μ'(−d)) M; with Σ = MMᵀ + B (B zero on the diagonal) each off-diagonal entry
    counts once per side."""
    rng = np.random.default_rng(0)
    n, eps = 5, 0.3
    M = rng.integers(-2, 3, size=(n, 2)).astype(float)  # integer M: MMᵀ exact, ω exactly D or B
    d = np.array([1.5, -2.0, 0.1, 0.0, 3.0])
    mu = lambda t: np.asarray(cv.smooth_abs(jnp.asarray(t), loss, eps))  # noqa: E731
    dmu = lambda t: np.asarray(cv.smooth_abs_grad(jnp.asarray(t), loss, eps))  # noqa: E731
    Sigma = M @ M.T + np.diag(d)
    np.testing.assert_allclose(
        cv.loss_of_M(jnp.asarray(M), jnp.asarray(Sigma), loss, eps),
        mu(-d).sum() + (n * n - n) * mu(0.0),
        rtol=1e-12,
    )
    np.testing.assert_allclose(
        cv.grad_of_M(jnp.asarray(M), jnp.asarray(Sigma), loss, eps),
        2 * dmu(-d)[:, None] * M,
        rtol=1e-12,
        atol=1e-14,
    )
    B = np.zeros((n, n))
    B[0, 3] = B[3, 0] = 2.5
    Sigma = M @ M.T + B
    np.testing.assert_allclose(
        cv.loss_of_M(jnp.asarray(M), jnp.asarray(Sigma), loss, eps),
        2 * mu(-2.5) + (n * n - 2) * mu(0.0),
        rtol=1e-12,
    )


@pytest.mark.parametrize("act", cv.ACTIVATIONS)
def test_covnet_forward_pass_by_hand(act, x64):
    """M = g(N_Θ(h(Σ))): the activation acts on z₀ = A⁽⁰⁾x + b⁽⁰⁾ and after every later layer but
    the last (a linear output), and g reshapes row by row. NumPy forward pass with the layers'
    weights."""
    Sigma = jnp.asarray(planted(6, 2)[0])
    x = cv.half_vec(Sigma)
    net, _, _ = cv.init_network(jax.random.key(4), x, 6, 2, (7, 5), act, jnp.float64)
    net = cv.CovNet(jnp.linspace(-2.0, 2.0, 7), net.layers, act, 6, 2)  # z₀ of both signs
    f = {
        "relu": lambda t: np.maximum(t, 0),
        "tanh": np.tanh,
        "logistic": lambda t: 1 / (1 + np.exp(-t)),
        "arctan": lambda t: 2 / np.pi * np.arctan(t),
    }[act]
    h = np.asarray(net.z0)
    for layer in net.layers:
        h = np.asarray(layer.weight) @ f(h) + np.asarray(layer.bias)
    np.testing.assert_allclose(net(), h.reshape(6, 2), rtol=1e-12, atol=1e-14)


def test_relative_change_rule_fires_as_soon_as_a_full_window_exists(x64):
    """The rule compares φ_j with the mean of the ``window`` previous losses: it can first be tested
    at j = window. With tol far above any relative change it stops there, after window + 1
    losses."""
    Sigma = jnp.asarray(planted(6, 2, pairs=3)[0])
    res = cv.decompose(
        Sigma, 2, hidden=(8,), optimizer="gd", lr=1e-4, max_iter=20, tol=10.0, window=3
    )
    assert int(res.n_iter) == 4


def test_param_norm_max_is_the_running_maximum_from_the_initial_norm(x64):
    """param_norm_max[0] = ‖Θ₀‖ (Xavier weights and 0.01 biases, from init_network's ‖A⁽⁰⁾‖²), and
    the history is the running maximum of ‖Θ_j‖: non-decreasing, and moving with a gradient step
    that makes the weights grow."""
    Sigma = jnp.asarray(planted(6, 2, pairs=3)[0])
    hidden, key = (8, 5), jax.random.key(2)
    net0, A0_sq, _ = cv.init_network(key, cv.half_vec(Sigma), 6, 2, hidden, "tanh", jnp.float64)
    norm0 = np.sqrt(
        float(A0_sq)
        + hidden[0] * 1e-4
        + sum(float(jnp.sum(lin.weight**2) + jnp.sum(lin.bias**2)) for lin in net0.layers)
    )
    res = cv.decompose(
        Sigma,
        2,
        hidden=hidden,
        activation="tanh",
        loss="huber",
        optimizer="gd",
        lr=3e-3,
        max_iter=12,
        tol=None,
        key=key,
    )
    p = np.asarray(res.history["param_norm_max"])
    np.testing.assert_allclose(p[0], norm0, rtol=1e-12)
    assert np.all(np.diff(p) >= 0) and p[-1] > p[0]


def test_armijo_search_starts_from_twice_the_last_accepted_step(x64):
    """After step t₀ the next search first tries 2t₀ (module docstring): wherever 2t₀ passes
    α t‖∇φ‖² ≤ φ(Θ₁) − φ(Θ₁ − t∇φ) ≤ β t‖∇φ‖² at Θ₁ (recomputed from the returned network: the
    gradient step moves z₀ by −t(‖x‖² + 1)δ and the later layers by −t∇), it is the step taken. The
    lr are chosen where t₀ passes at Θ₁ too, so a search that started from t₀ again would stop
    there."""
    import equinox as eqx

    Sigma = jnp.asarray(planted(6, 2, pairs=3)[0])
    x = cv.half_vec(Sigma)
    xx = float(x @ x) + 1.0
    kw = dict(
        hidden=(8,),
        activation="tanh",
        loss="logcosh",
        eps=0.1,
        optimizer="armijo",
        tol=None,
        max_iter=2,
        key=jax.random.key(1),
    )

    @eqx.filter_jit
    def trial(net, t):  # φ(Θ₁), ‖∇φ(Θ₁)‖² and φ(Θ₁ − t∇φ(Θ₁)) in the network's parameters
        phi = lambda m: cv.loss_of_M(m(), Sigma, "logcosh", 0.1)  # noqa: E731
        f1, g = eqx.filter_value_and_grad(phi)(net)
        g_sq = xx * jnp.sum(g.z0**2) + sum(jnp.sum(v**2) for v in jax.tree.leaves(g.layers))
        moved = eqx.tree_at(
            lambda m: (m.z0, m.layers),
            net,
            (net.z0 - t * xx * g.z0, jax.tree.map(lambda a, b: a - t * b, net.layers, g.layers)),
        )
        return f1, g_sq, phi(moved)

    def passes(net, t):
        f1, g_sq, f_moved = (float(v) for v in trial(net, t))
        return f1, 0.1 * t * g_sq <= f1 - f_moved <= 0.9 * t * g_sq

    checked = 0
    for lr in (5e-3, 6e-3):
        one = cv.decompose(Sigma, 2, lr=lr, grad_tol=1e30, **kw)  # stops after one step: net = Θ₁
        two = cv.decompose(Sigma, 2, lr=lr, grad_tol=0.0, **kw)  # the same program, two steps
        assert int(one.n_iter) == 1 and int(two.n_iter) == 2
        t0 = float(one.step)
        assert t0 > 0 and float(two.history["step"][0]) == t0
        f1, twice_passes = passes(one.net, 2 * t0)
        np.testing.assert_allclose(two.loss, f1, rtol=1e-12)
        if twice_passes:
            assert float(two.step) == 2 * t0
            checked += passes(one.net, t0)[1]
    assert checked, "no lr of the grid where both t₀ and 2t₀ pass Goldstein–Armijo at Θ₁"


def test_goldstein_armijo_on_closed_form_line_functions(x64):
    """φ(t) = f₀ − t‖g‖² + (c/2) t²‖g‖²: the accepted t has 1 − ct/2 ∈ [α, β], i.e. t ∈ [2(1 − β)/c,
    2(1 − α)/c], from a first trial far below or far above. On a linear φ (Goldstein never holds,
    every trial passes Armijo) the search runs out of trials and returns the last step that passed
    Armijo, t₀·2^(max_trials − 1), not 0 (which would stop the solver)."""
    from lowrank_jax.covariance import nn

    f0, g_sq = jnp.asarray(5.0), jnp.asarray(2.0)
    for c in (0.5, 3.0, 40.0):
        for t0 in (1e-6, 1.0, 1e4):
            t = float(
                nn._goldstein_armijo(
                    lambda t: f0 - t * g_sq + 0.5 * c * t * t * g_sq,
                    f0,
                    g_sq,
                    jnp.asarray(t0),
                    0.1,
                    0.9,
                )
            )
            assert 2 * (1 - 0.9) / c * (1 - 1e-12) <= t <= 2 * (1 - 0.1) / c * (1 + 1e-12), (
                c,
                t0,
                t,
            )
    t = nn._goldstein_armijo(
        lambda t: f0 - t * g_sq, f0, g_sq, jnp.asarray(0.5), 0.1, 0.9, max_trials=12
    )
    assert float(t) == 0.5 * 2.0**11


def test_progress_bar_follows_the_steps_and_ends_at_n_iter(recorded_bars):
    """progress=True: the bar, moved from inside the compiled run, ends at the steps taken, also
    when tol stops the run early (its total becomes n_iter); the result is the same as without
    it."""
    Sigma = jnp.asarray(planted(10, 2)[0], jnp.float32)
    kw = dict(hidden=(16,), optimizer="adam", lr=1e-2, key=jax.random.key(0))
    for budget, tol in ((300, None), (3000, 1e-3)):
        shown = cv.decompose(Sigma, 2, max_iter=budget, tol=tol, progress=True, **kw)
        bar = recorded_bars[-1]
        n = int(shown.n_iter)
        assert (n == budget) == (tol is None)
        assert bar.n == bar.total == n and bar.closed and 1 <= len(bar.updates) <= 101
        plain = cv.decompose(Sigma, 2, max_iter=budget, tol=tol, **kw)
        np.testing.assert_array_equal(np.asarray(plain.M), np.asarray(shown.M))
    with pytest.warns(UserWarning, match="progress=True has no effect on a traced call"):
        jax.jit(
            lambda lr: cv.decompose(Sigma, 2, hidden=(16,), lr=lr, max_iter=5, progress=True).M
        )(1e-2)


def test_a_diverging_run_raises_or_reports_and_a_traced_invalid_lr_is_invalid():
    """Gradient descent with lr = 1e4 overflows within a few steps: RuntimeError naming lr, called
    directly and under jit; with throw=False the run stops there (n_iter < max_iter) with status
    DIVERGED. Adam with lr = 1e6 stays finite (its steps are bounded by lr) but its loss grows
    beyond 10⁸ times the start's: DIVERGED too. A traced lr ≤ 0 (a sweep point, which cannot raise
    at the boundary) is INVALID with NaN M, and the valid point beside it in the vmap equals its own
    run."""
    Sigma = jnp.asarray(planted(8, 2)[0], jnp.float32)
    kw = dict(hidden=(8,), optimizer="gd", max_iter=40, tol=None, key=0)
    with pytest.raises(RuntimeError, match="diverged.*lower lr"):
        cv.decompose(Sigma, 2, lr=1e4, **kw)
    with pytest.raises(RuntimeError, match="diverged.*lower lr"):
        jax.block_until_ready(jax.jit(lambda lr: cv.decompose(Sigma, 2, lr=lr, **kw).M)(1e4))
    quiet = cv.decompose(Sigma, 2, lr=1e4, throw=False, **kw)
    assert int(quiet.status) == Status.DIVERGED and int(quiet.n_iter) < 40
    assert np.all(np.isnan(np.asarray(quiet.history["loss"][int(quiet.n_iter) :])))
    adam = cv.decompose(Sigma, 2, hidden=(8,), lr=1e6, max_iter=40, tol=None, key=0, throw=False)
    assert int(adam.status) == Status.DIVERGED and np.isfinite(float(adam.loss))
    batch = jax.vmap(lambda lr: cv.decompose(Sigma, 2, lr=lr, throw=False, **kw))(
        jnp.array([1e-3, -1.0])
    )
    assert np.asarray(batch.status).tolist() == [Status.MAX_ITER, Status.INVALID]
    assert np.all(np.isnan(np.asarray(batch.M[1])))
    np.testing.assert_allclose(
        batch.M[0], cv.decompose(Sigma, 2, lr=1e-3, **kw).M, rtol=1e-5, atol=1e-6
    )
    with pytest.raises(RuntimeError, match="traced lr"):
        jax.block_until_ready(jax.jit(lambda lr: cv.decompose(Sigma, 2, lr=lr, **kw).M)(-1.0))


def test_decompose_iteration_warm_start_continues_the_lr_schedule():
    """With ``lr_end`` the step size decays over ``max_iter`` steps by the step index: a run cut in
    two (the second part warm-started with ``start=k``) takes the steps of the whole run, which is
    decompose's; an invalid argument is refused as decompose refuses it."""
    from lowrank_jax import loop

    Sigma, _, _ = planted(12, 2)
    Sigma = jnp.asarray(Sigma, jnp.float32)
    kw = dict(hidden=(8,), lr=1e-2, lr_end=1e-4, max_iter=40, tol=None, key=0)
    it = cv.decompose_iteration(Sigma, 2, **kw)
    # Each run as one compiled program (run eagerly, the loop and the ops around it compiled op by
    # op: about a hundred small programs); jit changes nothing in the steps taken.
    run = jax.jit(
        lambda state, max_iter, start: loop.run(
            it._replace(state=state), max_iter=max_iter, start=start
        ),
        static_argnums=(1, 2),
    )
    whole = run(it.state, 40, 0)
    first = run(it.state, 15, 0)
    rest = run(first.state, 25, 15)
    np.testing.assert_allclose(rest.history["step"], whole.history["step"][15:], rtol=1e-6)
    out, ref = it.result(rest), cv.decompose(Sigma, 2, **kw)
    np.testing.assert_allclose(out.M, ref.M, rtol=1e-4, atol=1e-4 * float(jnp.abs(ref.M).max()))
    assert int(it.result(whole).n_iter) == int(ref.n_iter) == 40
    with pytest.raises(ValueError, match="lr_end applies to optimizer"):
        cv.decompose_iteration(Sigma, 2, optimizer="armijo", lr_end=1e-4)
