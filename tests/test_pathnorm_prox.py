"""The exact 1-path-norm prox (``pathnorm.path_norm_prox``): brute force over all supports, the 1-D
global reference, random perturbations, special cases (λ = 0, λ ≥ 1, zero units, ties, one output),
the paper's boundary walk as a second implementation (the oracle ``path_norm_prox_mfb``), the
layer-wise baseline's ℓ1-ball projection, and the prox step of every regulariser."""

import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracles import path_norm_prox_mfb

from lowrank_jax import pathnorm


def _h(v, w, x, y, lam):
    """Per-unit objective ½‖v − x‖² + ½‖w − y‖² + λ‖v‖₁‖w‖₁ (NumPy, float64)."""
    return (
        0.5 * np.sum((v - x) ** 2)
        + 0.5 * np.sum((w - y) ** 2)
        + lam * np.abs(v).sum() * np.abs(w).sum()
    )


def _subsets(k):
    return np.array(list(itertools.product([0, 1], repeat=k)), bool).reshape(-1, k)


def brute_force(x, y, lam):
    """Global minimum value of one unit by enumerating every pair of supports (Sv, Sw) — any
    subsets, not only prefixes of the sorted magnitudes — and its stationary point: on the support
    v = |x| − λΣw, w = |y| − λΣv (first-order condition of the non-negative problem), kept when
    non-negative. The optimum is the stationary point of its own support, so the minimum over all
    of them is the global one (an independent check of the paper's prefix/boundary lemmas)."""
    a, b = np.abs(x), np.abs(y)
    Mv, Mw = _subsets(len(a))[:, None, :], _subsets(len(b))[None, :, :]  # (2^p,1,p), (1,2^m,m)
    s, t = Mv.sum(-1), Mw.sum(-1)
    A, B = (Mv * a).sum(-1), (Mw * b).sum(-1)
    d = 1 - lam * lam * s * t
    ok = np.abs(d) > 1e-12
    sum_v = (A - lam * s * B) / np.where(ok, d, 1.0)
    sum_w = B - lam * t * sum_v
    v = np.where(Mv, a - lam * sum_w[..., None], 0.0)  # (2^p, 2^m, p)
    w = np.where(Mw, b - lam * sum_v[..., None], 0.0)
    ok &= np.all(v >= -1e-13, -1) & np.all(w >= -1e-13, -1)
    v, w = np.maximum(v, 0), np.maximum(w, 0)
    h = 0.5 * ((v - a) ** 2).sum(-1) + 0.5 * ((w - b) ** 2).sum(-1) + lam * v.sum(-1) * w.sum(-1)
    return float(np.min(np.where(ok, h, np.inf)))


def one_d_reference(x, y, lam, grid=20001):
    """Global minimum by the 1-D reduction: fix t = Σv; then
    w = max(|y| − λt, 0) and v is the projection of |x| onto {v ≥ 0, Σv = t}; minimise over
    t ∈ [0, Σ|x|] on a grid, then refine around the best grid points by golden section."""
    a, b = np.abs(x), np.abs(y)
    u = np.sort(a)[::-1]
    css, j = np.cumsum(u), np.arange(1, len(u) + 1)

    def value(t):
        t = np.atleast_1d(t)[:, None]
        rho = np.maximum(np.sum(u * j > css - t, axis=1), 1)  # active prefix length
        theta = (css[rho - 1] - t[:, 0]) / rho
        v = np.maximum(a - theta[:, None], 0) * (t > 0)
        w = np.maximum(b - lam * t, 0)
        return 0.5 * ((v - a) ** 2).sum(1) + 0.5 * ((w - b) ** 2).sum(1) + lam * t[:, 0] * w.sum(1)

    ts = np.linspace(0, a.sum(), grid)
    vals = value(ts)
    best = vals.min()
    g = (np.sqrt(5) - 1) / 2
    for i in np.argsort(vals)[:5]:
        lo, hi = ts[max(i - 1, 0)], ts[min(i + 1, grid - 1)]
        for _ in range(60):
            c, d = hi - g * (hi - lo), lo + g * (hi - lo)
            vc, vd = value(np.array([c, d]))
            lo, hi = (lo, d) if vc < vd else (c, hi)
        best = min(best, float(value(0.5 * (lo + hi))[0]))
    return best


def _random_units(rng, count):
    """(x, y, λ) units of varied shapes and strengths, with zero blocks, ties and λ ≥ 1 mixed in."""
    units = []
    for i in range(count):
        p, m = int(rng.integers(1, 4)), int(rng.integers(1, 7))
        scale = 10 ** rng.uniform(-1, 1)
        x, y = rng.standard_normal(p) * scale, rng.standard_normal(m) * scale
        kind = i % 10
        if kind == 1:
            y = np.round(y, 0)  # ties (and zeros) among the input weights
        elif kind == 2:
            x = np.zeros(p)  # dead output block
        elif kind == 3:
            x[:] = x[0]  # ties among the outputs
        lam = 10 ** rng.uniform(-2.5, 0.5) if kind != 4 else 1.0 + rng.uniform(0, 2)
        units.append((x, y, lam))
    return units


@pytest.fixture(scope="module")
def units():
    return _random_units(np.random.default_rng(0), 520)


def _prox_unit(fn, x, y, lam):
    W_in, W_out = fn(jnp.asarray(y[None, :]), jnp.asarray(x[:, None]), lam)
    return np.asarray(W_out[:, 0]), np.asarray(W_in[0])


P_MAX, M_MAX = 3, 6


def _prox_padded(fn, units, p_max=P_MAX, m_max=M_MAX):
    """All units in one compiled call: each padded with zero weights to (p_max, m_max) (zero weights
    change neither the objective nor the other coordinates' prox) and vmapped with its own λ."""
    X = np.zeros((len(units), p_max, 1))
    Y = np.zeros((len(units), 1, m_max))
    for k, (x, y, _) in enumerate(units):
        X[k, : len(x), 0], Y[k, 0, : len(y)] = x, y
    lam = np.array([u[2] for u in units])
    W_in, W_out = jax.jit(jax.vmap(fn))(Y, X, lam)
    W_in, W_out = np.asarray(W_in)[:, 0], np.asarray(W_out)[:, :, 0]
    # The padding stays zero.
    assert not np.any(
        [W_out[k, len(x) :].any() or W_in[k, len(y) :].any() for k, (x, y, _) in enumerate(units)]
    )
    return [(W_out[k, : len(x)], W_in[k, : len(y)]) for k, (x, y, _) in enumerate(units)]


@pytest.mark.parametrize(
    "fn", [pathnorm.path_norm_prox, path_norm_prox_mfb], ids=["sorted", "mfb-walk"]
)
@pytest.mark.parametrize("swap", [False, True], ids=["outputs<=inputs", "outputs>inputs"])
def test_prox_equals_brute_force_on_random_units(units, fn, swap, x64):
    if swap:  # more outputs than inputs: the sorted implementation swaps the roles of the blocks
        units = [(y, x, lam) for x, y, lam in units[::3]]  # every 3rd: all ten kinds, ties included
        results = _prox_padded(fn, units, M_MAX, P_MAX)
    else:
        results = _prox_padded(fn, units)
    for (x, y, lam), (v, w) in zip(units, results):
        h, h_star = _h(v, w, x, y, lam), brute_force(x, y, lam)
        tol = 1e-10 * max(1.0, abs(h_star))
        assert abs(h - h_star) <= tol, (x, y, lam, h, h_star)


def test_one_d_reference_agrees_on_the_optimal_value(units, x64):
    for (x, y, lam), (v, w) in list(zip(units, _prox_padded(pathnorm.path_norm_prox, units)))[:60]:
        np.testing.assert_allclose(
            _h(v, w, x, y, lam), one_d_reference(x, y, lam), rtol=1e-7, atol=1e-12
        )


def test_no_random_perturbation_lowers_the_objective(x64):
    rng = np.random.default_rng(1)
    W_in, W_out = rng.standard_normal((40, 30)), rng.standard_normal((7, 40))
    for lam in (0.01, 0.1, 0.5):
        P_in, P_out = pathnorm.path_norm_prox(W_in, W_out, lam)
        f0 = float(pathnorm.path_norm_objective(P_in, P_out, W_in, W_out, lam))
        for scale in (1e-6, 1e-3, 1e-1):
            for _ in range(30):
                D_in = rng.standard_normal(W_in.shape) * scale
                D_out = rng.standard_normal(W_out.shape) * scale
                f = float(
                    pathnorm.path_norm_objective(P_in + D_in, P_out + D_out, W_in, W_out, lam)
                )
                assert f >= f0 - 1e-12


def test_whole_layers_are_solved_unit_by_unit_and_both_implementations_agree(x64):
    rng = np.random.default_rng(2)
    for hidden, inputs, outputs in [(30, 50, 10), (20, 8, 12), (15, 40, 1)]:
        W_in, W_out = rng.standard_normal((hidden, inputs)), rng.standard_normal((outputs, hidden))
        W_in[3] = 0.0
        W_out[:, 5] = 0.0
        for lam in (0.003, 0.05, 0.3, 1.0, 4.0):
            P_in, P_out = pathnorm.path_norm_prox(W_in, W_out, lam)
            M_in, M_out = path_norm_prox_mfb(W_in, W_out, lam)
            f_sorted = float(pathnorm.path_norm_objective(P_in, P_out, W_in, W_out, lam))
            f_walk = float(pathnorm.path_norm_objective(M_in, M_out, W_in, W_out, lam))
            np.testing.assert_allclose(f_sorted, f_walk, rtol=1e-12)
            for i in (0, 3, 5, hidden - 1):  # a unit alone gives the same rows
                v, w = _prox_unit(pathnorm.path_norm_prox, W_out[:, i], W_in[i], lam)
                np.testing.assert_allclose(P_in[i], w, atol=1e-14)
                np.testing.assert_allclose(P_out[:, i], v, atol=1e-14)
            # Lemma 8: a unit keeping both blocks has s_v · s_w < λ⁻² non-zeros.
            sv = np.count_nonzero(np.asarray(P_out), axis=0)
            sw = np.count_nonzero(np.asarray(P_in), axis=1)
            both = (sv > 0) & (sw > 0)
            assert np.all(sv[both] * sw[both] * lam**2 < 1)
            # Signs are kept, magnitudes only shrink.
            for P, W in ((P_in, W_in), (P_out, W_out)):
                assert np.all(np.asarray(P) * W >= 0) and np.all(np.abs(P) <= np.abs(W) + 1e-15)


def test_special_cases(x64):
    rng = np.random.default_rng(3)
    W_in, W_out = rng.standard_normal((12, 9)), rng.standard_normal((4, 12))
    # λ = 0: the identity.
    P_in, P_out = pathnorm.path_norm_prox(W_in, W_out, 0.0)
    np.testing.assert_array_equal(P_in, W_in)
    np.testing.assert_array_equal(P_out, W_out)
    # λ ≥ 1: no unit keeps both blocks; it keeps the one with the larger ℓ2 norm, untouched.
    # Also where λ² overflows (1e200 in float64, 2e19 in float32): it zeroed every unit before.
    for fn, lam in (
        (pathnorm.path_norm_prox, 1.5),
        (pathnorm.path_norm_prox, 1e200),
        (path_norm_prox_mfb, 1e200),
    ):
        P_in, P_out = fn(W_in, W_out, lam)
        for i in range(12):
            keep_in = np.linalg.norm(W_in[i]) > np.linalg.norm(W_out[:, i])
            np.testing.assert_array_equal(P_in[i], W_in[i] if keep_in else 0.0)
            np.testing.assert_array_equal(P_out[:, i], 0.0 if keep_in else W_out[:, i])
    with jax.enable_x64(False):
        P_in, P_out = pathnorm.path_norm_prox(
            np.array([[3.0]], np.float32), np.array([[1.0]], np.float32), 2e19
        )
        np.testing.assert_array_equal(P_in, [[3.0]])
        np.testing.assert_array_equal(P_out, [[0.0]])
    # All-zero weights stay zero; a zero output block leaves the input block untouched.
    Z_in, Z_out = pathnorm.path_norm_prox(np.zeros((3, 5)), np.zeros((2, 3)), 0.2)
    assert not np.any(Z_in) and not np.any(Z_out)
    W_out[:, 0] = 0.0
    P_in, _ = pathnorm.path_norm_prox(W_in, W_out, 0.2)
    np.testing.assert_array_equal(P_in[0], W_in[0])


def test_ties_give_tied_values(x64):
    """Equal magnitudes are treated alike (the KKT conditions give equal shrinkage)."""
    W_in = np.array([[1.0, -1.0, 1.0, 0.5, 0.0]])
    W_out = np.array([[0.8], [-0.8]])
    for lam in np.linspace(0.05, 0.9, 18):
        P_in, P_out = pathnorm.path_norm_prox(W_in, W_out, lam)
        P_in, P_out = np.asarray(P_in), np.asarray(P_out)
        assert abs(P_in[0, 0]) == abs(P_in[0, 1]) == abs(P_in[0, 2])
        assert abs(P_out[0, 0]) == abs(P_out[1, 0])
        np.testing.assert_allclose(
            _h(P_out[:, 0], P_in[0], W_out[:, 0], W_in[0], lam),
            brute_force(W_out[:, 0], W_in[0], lam),
            rtol=1e-10,
        )


@pytest.mark.parametrize(
    "fn", [pathnorm.path_norm_prox, path_norm_prox_mfb], ids=["sorted", "mfb-walk"]
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_singular_pair_at_integer_inverse_square_lambda(fn, dtype, x64):
    """λ = 1/√(k p) with tied data x = 1_p, y = λp·1_k: the pair (p, k) has d = 1 − λ²pk = 0, which
    rounds to ±eps, so its coefficients were 0/0 noise. That "candidate" passed the feasibility test
    and was returned: not even stationary, with an objective up to 2x the optimum."""
    for k, p in [(5, 1), (7, 2), (7, 1), (5, 3), (4, 4), (9, 1)]:
        lam = dtype(1 / np.sqrt(k * p))
        x, y = np.ones(p, dtype), np.full(k, lam * p, dtype)
        v, w = _prox_unit(fn, x, y, lam)
        h, h_star = (
            _h(v.astype(float), w.astype(float), x, y, float(lam)),
            brute_force(x, y, float(lam)),
        )
        assert abs(h - h_star) <= (1e-12 if dtype == np.float64 else 1e-5) * max(1.0, h_star), (
            k,
            p,
            h,
            h_star,
        )


@pytest.mark.parametrize(
    "fn", [pathnorm.path_norm_prox, path_norm_prox_mfb], ids=["sorted", "mfb-walk"]
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tied_units_just_below_the_singular_strength_keep_their_optimum(fn, dtype, x64):
    """Tied units (all magnitudes equal) at λ just below 1/√(p m), where the pair of whole blocks
    has a small d = 1 − λ² p m (10⁻⁴ and below, well above rounding). The entries' rounding bound
    used to grow with the uncancelled sums there and exceed the entries themselves (0.5 for a 1 × 1
    unit of ones at λ = 0.9999): the chosen candidate was zeroed whole, with twice the optimum's
    objective, worse than keeping one block. Now the value is the global minimum, and square units,
    whose optimum keeps both blocks, keep every entry."""
    gaps = [1e-2, 1e-4, 1e-5] if dtype == np.float32 else [1e-4, 1e-6, 1e-8]
    for (p, m, scale), gap in itertools.product(
        [(1, 1, 1.0), (2, 1, 1.0), (2, 2, 1.0), (3, 1, 2.0)], gaps
    ):
        x, y, lam = np.full(p, scale), np.full(m, scale), dtype((1 - gap) / np.sqrt(p * m))
        v, w = _prox_unit(fn, x.astype(dtype), y.astype(dtype), lam)
        if p == m:
            assert np.all(v != 0) and np.all(w != 0), (x, y, lam, v, w)
        h, h_star = (
            _h(v.astype(float), w.astype(float), x, y, float(lam)),
            brute_force(x, y, float(lam)),
        )
        assert abs(h - h_star) <= (1e-12 if dtype == np.float64 else 1e-6) * max(1.0, h_star), (
            x,
            y,
            lam,
            h,
            h_star,
        )


def test_float32_matches_float64():
    rng = np.random.default_rng(4)
    W_in, W_out = (
        rng.standard_normal((50, 100)).astype(np.float32),
        rng.standard_normal((10, 50)).astype(np.float32),
    )
    with jax.enable_x64(True):
        P64 = pathnorm.path_norm_prox(W_in.astype(np.float64), W_out.astype(np.float64), 0.02)
        f64 = float(
            pathnorm.path_norm_objective(
                *P64, W_in.astype(np.float64), W_out.astype(np.float64), 0.02
            )
        )
    P32 = pathnorm.path_norm_prox(W_in, W_out, np.float32(0.02))
    assert P32[0].dtype == jnp.float32
    with jax.enable_x64(True):
        f32 = float(
            pathnorm.path_norm_objective(
                *(np.asarray(a, np.float64) for a in P32),
                W_in.astype(np.float64),
                W_out.astype(np.float64),
                0.02,
            )
        )
    np.testing.assert_allclose(f32, f64, rtol=1e-5)


def _badly_scaled_layer(rng, hidden=64, inputs=784, outputs=10, small=8):
    """PyTorch-like initial weights (±1/√fan_in), with the output weights of ``small`` units 1e3
    times smaller: there ‖a‖² is below float32 resolution of ‖b‖² (the unit's squared norms)."""
    W_in = rng.uniform(-1 / 28, 1 / 28, (hidden, inputs)).astype(np.float32)
    W_out = rng.uniform(-1 / 8, 1 / 8, (outputs, hidden)).astype(np.float32)
    W_out[:, :small] *= np.float32(1e-3)
    return W_in, W_out


@pytest.mark.parametrize(
    "fn", [pathnorm.path_norm_prox, path_norm_prox_mfb], ids=["sorted", "mfb-walk"]
)
def test_float32_prox_at_zero_strength_is_the_identity_on_badly_scaled_units(fn):
    """λ = 0: the prox is the identity, bit for bit. The candidates' objectives were computed
    relative to ½‖a‖² + ½‖b‖² (minus the kept heads), all near −½‖b‖²: output weights of 1e-4
    against input weights of 1/28 were lost to rounding there, the candidates tied and the first
    (smallest s_v) won: 4 of the 10 output weights of one unit came back 0, 40 of 640 on a layer."""
    k1, k2 = jax.random.split(jax.random.key(0))
    cases = [
        (
            jax.random.uniform(k1, (1, 784), minval=-1 / 28, maxval=1 / 28),
            jax.random.uniform(k2, (10, 1), minval=-1e-4, maxval=1e-4),
        ),
        _badly_scaled_layer(np.random.default_rng(0)),
        # Squares below float32's smallest normal (entries under 1e-19 of the unit's largest) are
        # 0: their candidates tie exactly, and the largest support must win.
        (
            np.array([[1.0, -0.5, 3e-25]], np.float32),
            np.array([[0.25], [1e-22], [-3e-21]], np.float32),
        ),
        # More than 2¹²⁶ below the unit's largest, an entry is flushed at unit scale: (1e20, 1e-20)
        # came back as (1e20, 0). λ = 0 returns the input itself now.
        (np.array([[1e20, 1e-20]], np.float32), np.array([[1.0]], np.float32)),
    ]
    for W_in, W_out in cases:
        for A_in, A_out in ((W_in, W_out), (np.asarray(W_out).T, np.asarray(W_in).T)):  # both roles
            P_in, P_out = fn(A_in, A_out, 0.0)
            assert P_in.dtype == jnp.float32
            np.testing.assert_array_equal(P_in, A_in)
            np.testing.assert_array_equal(P_out, A_out)


def test_float32_matches_float64_on_badly_scaled_layers():
    """On the layer above, float32 dropped output weights that the exact prox keeps (at λ = 1e-6,
    588 non-zeros instead of 627; objective 8e-5 too high, relative). Now float32 returns the
    float64 prox to float32 accuracy: every weight within 1e-6 of the largest (the dropped ones were
    up to 1.25e-4), the objective to 1e-5."""
    W_in, W_out = _badly_scaled_layer(np.random.default_rng(0))
    top = float(max(np.abs(W_in).max(), np.abs(W_out).max()))
    for lam in (1e-6, 1e-5, 1e-4, 1e-3, 3e-3):
        P32 = [
            np.asarray(P, np.float64) for P in pathnorm.path_norm_prox(W_in, W_out, np.float32(lam))
        ]
        with jax.enable_x64(True):
            W64 = (W_in.astype(np.float64), W_out.astype(np.float64))
            lam64 = float(np.float32(lam))
            P64 = [np.asarray(P) for P in pathnorm.path_norm_prox(*W64, lam64)]
            f32, f64 = (float(pathnorm.path_norm_objective(*P, *W64, lam64)) for P in (P32, P64))
        for a, b in zip(P32, P64):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6 * top, err_msg=f"λ = {lam}")
        np.testing.assert_allclose(f32, f64, rtol=1e-5, err_msg=f"λ = {lam}")


def test_vmap_over_strength_equals_separate_calls():
    rng = np.random.default_rng(5)
    W_in, W_out = (
        jnp.asarray(rng.standard_normal((20, 30)), jnp.float32),
        jnp.asarray(rng.standard_normal((3, 20)), jnp.float32),
    )
    lams = jnp.array([0.0, 0.01, 0.1, 0.5, 2.0], jnp.float32)
    P_in, P_out = jax.jit(jax.vmap(pathnorm.path_norm_prox, in_axes=(None, None, 0)))(
        W_in, W_out, lams
    )
    for k, lam in enumerate(lams):
        q_in, q_out = pathnorm.path_norm_prox(W_in, W_out, lam)
        np.testing.assert_allclose(P_in[k], q_in, atol=1e-6)
        np.testing.assert_allclose(P_out[k], q_out, atol=1e-6)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: pathnorm.path_norm_prox(np.ones((4, 3)), np.ones((2, 5)), 0.1), "hidden"),
        (lambda: pathnorm.path_norm_prox(np.ones((4, 3)), np.ones((2, 4)), -0.1), "strength"),
        (lambda: pathnorm.path_norm_prox(np.full((4, 3), np.nan), np.ones((2, 4)), 0.1), "W_in"),
        (lambda: pathnorm.path_norm_prox(np.ones((4, 3)), np.full((2, 4), np.inf), 0.1), "W_out"),
        (lambda: pathnorm.path_norm_prox(np.ones(4), np.ones((2, 4)), 0.1), "W_in"),
        (lambda: pathnorm.project_l1_ball_rows(np.ones((2, 3)), -1.0), "radius"),
    ],
)
def test_bad_input_is_refused(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_sort_magnitudes_matches_numpy():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((7, 33)).astype(np.float32)
    x[0, :5] = 0.0
    x[1, :4] = -0.0
    np.testing.assert_array_equal(pathnorm.sort_magnitudes(x), -np.sort(-np.abs(x), axis=1))


def _central_differences(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


def test_gradients_flow_through_the_sorted_magnitudes(x64):
    """The sort by bit patterns cut the tangents: the prox's gradient in W_out came back all zero
    (and wrong in W_in), the ℓ1-ball projection's as if θ were constant. Checked against central
    differences at a generic point (no ties, no entry at a threshold)."""
    rng = np.random.default_rng(11)
    W_in, W_out = rng.standard_normal((3, 6)), rng.standard_normal((2, 3))
    lam = 0.08
    loss = lambda a, b: float(
        jnp.sum(jnp.sin(pathnorm.path_norm_prox(a, b, lam)[0]))
        + jnp.sum(pathnorm.path_norm_prox(a, b, lam)[1] ** 2)
    )
    g_in, g_out = jax.grad(
        lambda a, b: (
            jnp.sum(jnp.sin(pathnorm.path_norm_prox(a, b, lam)[0]))
            + jnp.sum(pathnorm.path_norm_prox(a, b, lam)[1] ** 2)
        ),
        argnums=(0, 1),
    )(W_in, W_out)
    assert np.any(np.asarray(g_out))
    np.testing.assert_allclose(
        g_in, _central_differences(lambda a: loss(a, W_out), W_in), atol=1e-7
    )
    np.testing.assert_allclose(
        g_out, _central_differences(lambda b: loss(W_in, b), W_out), atol=1e-7
    )

    W = rng.standard_normal((3, 5)) * 2
    weights = rng.standard_normal((3, 5))
    f = lambda W: float(jnp.sum(weights * pathnorm.project_l1_ball_rows(W, 1.5)))
    g = jax.grad(lambda W: jnp.sum(weights * pathnorm.project_l1_ball_rows(W, 1.5)))(W)
    np.testing.assert_allclose(g, _central_differences(f, W), atol=1e-7)
    # The sort itself: the derivative of a permutation, forward and reverse mode.
    x, dx = rng.standard_normal((2, 7)), rng.standard_normal((2, 7))
    perm = np.argsort(-np.abs(x), axis=1)
    _, tangent = jax.jvp(pathnorm.sort_magnitudes, (x,), (dx,))
    np.testing.assert_allclose(tangent, np.take_along_axis(np.sign(x) * dx, perm, axis=1))


def test_l1_ball_projection(x64):
    rng = np.random.default_rng(7)
    W = rng.standard_normal((40, 25)) * rng.uniform(0.01, 3, (40, 1))
    for radius in (0.1, 1.0, 5.0, 100.0):
        P = np.asarray(pathnorm.project_l1_ball_rows(W, radius))
        norms = np.abs(P).sum(axis=1)
        outside = np.abs(W).sum(axis=1) > radius
        np.testing.assert_allclose(norms[outside], radius, rtol=1e-12)
        np.testing.assert_array_equal(P[~outside], W[~outside])
        # Optimality against the definition: no feasible random point is closer.
        for i in np.nonzero(outside)[0][:5]:
            for _ in range(50):
                z = P[i] + rng.standard_normal(25) * 0.05
                z *= min(1.0, radius / np.abs(z).sum())
                assert np.sum((z - W[i]) ** 2) >= np.sum((P[i] - W[i]) ** 2) - 1e-12


def test_l1_ball_projection_float32_keeps_a_small_radius(x64):
    # The direct |W| − θ cancels to eps·max|W|: at a radius 1e-4 of rows up to ~100 float32 returned
    # rows whose ℓ1 norm was off by 0.8 % of the radius. The gap form stays at float32 rounding.
    rng = np.random.default_rng(0)
    W = rng.standard_normal((100, 64)) * rng.uniform(0.01, 30, (100, 1))
    for radius in (1e-4, 1e-2, 1.0):
        P64 = np.asarray(pathnorm.project_l1_ball_rows(W, radius))
        P32 = np.asarray(
            pathnorm.project_l1_ball_rows(W.astype(np.float32), np.float32(radius)), np.float64
        )
        np.testing.assert_allclose(P32, P64, rtol=0, atol=2e-5 * radius)
        np.testing.assert_allclose(np.abs(P32).sum(axis=1), radius, rtol=1e-5)


def _net(W_in, W_out):
    """A ShallowNet carrying the weights W_in (hidden, inputs) and W_out (outputs, hidden)."""
    W_in, W_out = jnp.asarray(W_in), jnp.asarray(W_out)
    net = pathnorm.ShallowNet(
        W_in.shape[1], W_in.shape[0], W_out.shape[0], key=jax.random.key(0), dtype=W_in.dtype
    )
    return eqx.tree_at(lambda m: (m.hidden.weight, m.out.weight), net, (W_in, W_out))


def _l1_step(W_in, W_out, lam):
    """The "l1" regulariser's prox step (soft thresholding of both weight matrices at λ)."""
    return pathnorm.prox_step(_net(W_in, W_out), lam, "l1").weights


def test_prox_step_refuses_a_negative_or_nan_strength():
    """x − clip(x, −λ, λ) at λ < 0 is x + |λ| (every entry shifted, no error) and NaN made every
    weight NaN; path_norm_prox and the ℓ1-ball projection already refused both by name."""
    W = jnp.asarray(np.random.default_rng(0).normal(size=(3, 4)), jnp.float32)
    net = pathnorm.ShallowNet(4, 3, 2, key=jax.random.key(0))
    for bad, match in (
        (-0.1, "strength must be non-negative"),
        (np.nan, "strength has non-finite"),
    ):
        for reg in ("l1", "path", "layer"):
            with pytest.raises(ValueError, match=match):
                pathnorm.prox_step(net, bad, reg)
    # valid strengths keep working, traced ones too, and the weights keep their dtypes
    W_out = W[:2]
    got = _l1_step(W, W_out, 0.5)
    np.testing.assert_array_equal(got[0], jnp.sign(W) * jnp.maximum(jnp.abs(W) - 0.5, 0))
    np.testing.assert_array_equal(jax.jit(_l1_step)(W, W_out, 0.5)[0], got[0])
    half = _l1_step(W.astype(jnp.float16), W_out.astype(jnp.float16), 0.5)
    assert half[0].dtype == half[1].dtype == jnp.float16
    for P in _l1_step(W, W_out, jnp.inf):  # λ = inf: the limit 0
        np.testing.assert_array_equal(P, jnp.zeros_like(P))


@pytest.mark.parametrize(
    "fn", [pathnorm.path_norm_prox, path_norm_prox_mfb], ids=["sorted", "mfb-walk"]
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_exact_ties_give_exact_zeros_and_the_sparsity_bound(fn, dtype, x64):
    """Where an entry of the optimum is 0 in exact arithmetic (|y_j| = λΣv on the nose, tied data)
    the computed one was ±ε-noise: x = (−1, 2, 1), y = (0, 2, −1, −1), λ = 1/3 gave w = (0, 1,
    1e-16, 1e-16), so s_v·s_w = 9 = λ⁻², against the documented bound s_v·s_w < λ⁻² (Lemma 8).
    Entries that are 0 up to rounding are 0 now, and on tied layers every non-zero is a real one
    (the exact non-zeros of these data are ≥ 1e-3), the bound holds, and the value is still the
    global minimum."""
    W_in, W_out = np.array([[0.0, 2.0, -1.0, -1.0]], dtype), np.array([[-1.0], [2.0], [1.0]], dtype)
    P_in, P_out = fn(W_in, W_out, dtype(1 / 3))
    assert np.count_nonzero(P_out) * np.count_nonzero(P_in) < 9
    rng = np.random.default_rng(6)
    strengths = [1 / np.sqrt(k) for k in range(1, 13)] + [1 / 3, 0.3, 0.2, 0.15]
    for t in range(36):
        p, m = [(1, 11), (3, 7), (4, 5)][t % 3]  # three shapes: three compilations
        W_in = rng.choice([0.0, 1.0, -1.0, 2.0, 0.5], size=(16, m)).astype(dtype)
        W_out = rng.choice([0.0, 1.0, -1.0, 2.0, 0.5, 3.0], size=(p, 16)).astype(dtype)
        lam = dtype(rng.choice(strengths))
        P_in, P_out = (np.asarray(P) for P in fn(W_in, W_out, lam))
        for P in (P_in, P_out):
            assert np.all((P == 0) | (np.abs(P) > 1e-5)), (lam, W_in, W_out, P)
        sv, sw = np.count_nonzero(P_out, axis=0), np.count_nonzero(P_in, axis=1)
        both = (sv > 0) & (sw > 0)
        assert np.all(sv[both] * sw[both] * float(lam) ** 2 < 1 - 1e-6), (lam, sv, sw)
        if dtype == np.float64:
            for i in range(16):
                h = _h(P_out[:, i], P_in[i], W_out[:, i], W_in[i], lam)
                h_star = brute_force(W_out[:, i], W_in[i], lam)
                assert abs(h - h_star) <= 1e-12 * max(1.0, h_star), (
                    lam,
                    W_out[:, i],
                    W_in[i],
                    h,
                    h_star,
                )


def test_path_norm_refuses_other_layouts():
    """path_norm had no shape check: W_out in the (hidden, outputs) layout, (4, 1) against 4 hidden
    units, broadcast to 4 × 4 "units" and gave 48 instead of 12; a 1-D W_out was taken too."""
    rng = np.random.default_rng(8)
    W_in, W_out = rng.standard_normal((4, 3)), rng.standard_normal((2, 4))
    triple = sum(
        abs(W_in[i, j] * W_out[k, i]) for i in range(4) for j in range(3) for k in range(2)
    )
    np.testing.assert_allclose(pathnorm.path_norm(W_in, W_out), triple, rtol=1e-6)
    np.testing.assert_allclose(jax.jit(pathnorm.path_norm)(W_in, W_out), triple, rtol=1e-6)
    for bad_in, bad_out in (
        (np.ones((4, 3)), np.ones((4, 1))),
        (W_in, W_out.T),
        (W_in, np.ones(4)),
        (np.ones(4), W_out),
        (W_in, np.ones((2, 4, 1))),
    ):
        with pytest.raises(ValueError, match="W_out"):
            pathnorm.path_norm(bad_in, bad_out)
        with pytest.raises(ValueError, match="W_out"):
            jax.jit(pathnorm.path_norm)(bad_in, bad_out)


def test_malformed_arguments_of_the_path_norm_helpers_are_named():
    """sort_magnitudes of an integer array raised KeyError: dtype('int32'); path_norm_objective with
    mismatched weights raised a bare broadcasting error."""
    with pytest.raises(TypeError, match="sort_magnitudes needs a real floating-point array"):
        pathnorm.sort_magnitudes(jnp.arange(3))
    Wi, Wo = jnp.ones((3, 4)), jnp.ones((2, 3))
    with pytest.raises(ValueError, match="W_in_bar"):
        pathnorm.path_norm_objective(Wi, Wo, jnp.ones((3, 5)), Wo, 0.1)
    with pytest.raises(ValueError, match="W_out"):
        pathnorm.path_norm_objective(Wi, jnp.ones((2, 4)), Wi, jnp.ones((2, 4)), 0.1)
    # the objective itself: ½‖W − W̄‖² + λ P, with P = Σ_i ‖W_out[:, i]‖₁ ‖W_in[i, :]‖₁ = 3 · 2 · 4
    np.testing.assert_allclose(
        pathnorm.path_norm_objective(Wi, Wo, 0 * Wi, 0 * Wo, 0.1), 0.5 * 18 + 0.1 * 24, rtol=1e-6
    )
    # λ as for the prox: a negative or vector λ gave a negative or vector "objective"
    for bad in (-0.1, jnp.array([0.1, 0.2])):
        with pytest.raises(ValueError, match="strength"):
            pathnorm.path_norm_objective(Wi, Wo, 0 * Wi, 0 * Wo, bad)


def test_prox_is_positively_homogeneous_down_to_float32s_extremes():
    """prox_λ(c·W) = c·prox_λ(W): the unit is solved at unit scale, so weights near float32's
    underflow and overflow of their squares (1e-20, 1e19) get the scaled answer. They got W_out = 0
    before, even at λ = 0, where the prox is the identity. Up to float32's largest numbers too: from
    2¹²⁶ (8.5e37) the scale's reciprocal was subnormal and flushed (the prox returned zeros), and
    from 2¹²⁷ the scale itself overflowed (NaN)."""
    W_in, W_out = np.array([[1.0, -2.0, 0.5]], np.float32), np.array([[3.0], [-1.0]], np.float32)
    for lam in (0.0, 0.1, 0.3, 2.0):
        ref_in, ref_out = pathnorm.path_norm_prox(W_in, W_out, lam)
        for c in (1e-20, 1e-12, 2.0**40, 1e19, 1e30, 4e37, 1.1e38):
            c = np.float32(c)
            P_in, P_out = pathnorm.path_norm_prox(W_in * c, W_out * c, lam)
            np.testing.assert_allclose(np.asarray(P_in) / c, ref_in, rtol=2e-6, atol=1e-7)
            np.testing.assert_allclose(np.asarray(P_out) / c, ref_out, rtol=2e-6, atol=1e-7)
    # Scaling by a power of two is exact: at λ = 0 the identity holds bit for bit at any scale.
    P_in, P_out = pathnorm.path_norm_prox(W_in * np.float32(1e-20), W_out * np.float32(1e-20), 0.0)
    np.testing.assert_array_equal(P_in, W_in * np.float32(1e-20))
    np.testing.assert_array_equal(P_out, W_out * np.float32(1e-20))


@pytest.mark.parametrize(
    "fn", [pathnorm.path_norm_prox, path_norm_prox_mfb, _l1_step], ids=["sorted", "mfb-walk", "l1"]
)
def test_a_traced_negative_or_nan_strength_gives_nan_not_a_plausible_answer(fn):
    """A traced λ cannot be refused; λ < 0 made the weights grow and a NaN λ zeroed them."""
    W_in, W_out = np.array([[1.0, -2.0, 0.5]], np.float32), np.array([[3.0]], np.float32)
    out = jax.jit(jax.vmap(fn, in_axes=(None, None, 0)))(
        W_in, W_out, jnp.array([-0.3, np.nan, 0.1])
    )
    for P in out:
        assert np.all(np.isnan(P[:2])) and np.all(np.isfinite(P[2]))
    with pytest.raises(ValueError, match="strength"):
        fn(W_in, W_out, -0.3)


@pytest.mark.parametrize(
    "fn", [pathnorm.path_norm_prox, path_norm_prox_mfb], ids=["sorted", "mfb-walk"]
)
def test_a_traced_non_finite_weight_makes_its_whole_unit_nan_and_leaves_the_others(fn):
    """Called directly a NaN weight is refused; under jit (a diverging Prox-SGD run) it cannot be.
    The candidates' argmin then zeroed the rest of that unit, so a diverged network looked partly
    trained. The whole unit is NaN now (both layers' weights of it); the prox is separable over
    units, so every other unit equals the prox of the same weights with that unit's zeroed."""
    rng = np.random.default_rng(3)
    W_in, W_out = rng.standard_normal((5, 7)), rng.standard_normal((3, 5))
    lam = 0.2
    for bad_in, bad_out, value in ((True, False, np.nan), (False, True, np.inf)):
        A, B = W_in.copy(), W_out.copy()
        if bad_in:
            A[1, 4] = value
        if bad_out:
            B[2, 1] = value
        got_in, got_out = jax.jit(fn)(A, B, lam)
        assert np.all(np.isnan(got_in[1])) and np.all(np.isnan(got_out[:, 1]))
        A[1], B[:, 1] = 0.0, 0.0
        ref_in, ref_out = fn(A, B, lam)
        keep = np.arange(5) != 1
        np.testing.assert_allclose(got_in[keep], ref_in[keep], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(got_out[:, keep], ref_out[:, keep], rtol=1e-6, atol=1e-7)
