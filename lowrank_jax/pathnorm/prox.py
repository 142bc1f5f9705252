"""The exact proximal map of the 1-path-norm of a shallow network, the norm, and the ℓ1-ball
projection of the layer-wise baseline.

Latorre, Rolland, Hallak, Cevher, "Efficient Proximal Mapping of the 1-path-norm of Shallow
Networks", ICML 2020. For a network h(x) = W_out σ(W_in x)
with the layouts of ``equinox.nn.Linear`` weights, W_in (hidden, inputs) and W_out
(outputs, hidden),

    P(W_in, W_out) = Σ_i ‖W_out[:, i]‖₁ ‖W_in[i, :]‖₁

(the 1-path-norm, an upper bound on the ℓ∞ → ℓ1 Lipschitz constant, Thm 1)

and ``path_norm_prox`` returns a *global* minimiser of

    ½‖W_in − W̄_in‖²_F + ½‖W_out − W̄_out‖²_F + λ P(W_in, W_out).

The problem is non-convex but separable over hidden units; unit i couples x = W̄_out[:, i] ∈ Rᵖ and
y = W̄_in[i, :] ∈ Rᵐ. With a, b the magnitudes |x|, |y| sorted in decreasing order, every optimum is
the stationary point of some pair of support sizes (s_v, s_w) (Lemmas 15–16):

    d = 1 − λ² s_v s_w > 0,   A = Σ_{k≤s_v} a_k,   B = Σ_{j≤s_w} b_j,
    c_v = (λ² s_w A − λ B)/d = −λ Σ w,   c_w = (λ² s_v B − λ A)/d = −λ Σ v,
    v_k = a_k + c_v (k ≤ s_v),   w_j = b_j + c_w (j ≤ s_w),   zero elsewhere,

feasible when the last kept entries a[s_v] + c_v and b[s_w] + c_w are ≥ 0, with objective
(eq. 27)

    h = (−λ² s_w A² − λ² s_v B² + 2λAB)/(2d) + ½Σ_{k>s_v} a_k² + ½Σ_{j>s_w} b_j².

Feasibility is downward closed (Lemma 10) and h decreases along feasible increments (Lemma 9), so
for each s_v only the largest feasible s_w can be optimal: ``path_norm_prox`` binary-searches it for
every s_v ∈ {0..p} (p ≤ m; the roles swap otherwise), evaluates the p + 1 candidates by (27) itself,
A and B from prefix sums and the tails from suffix sums of a² and b², and keeps the best (of tied
ones, the largest s_v). Cost per unit: the sort, plus O(p log m). All units at once, no Python loop.
Signs come back from W̄, and the order needs no un-sorting: at an optimum the KKT conditions give
v = max(|x| + c_v, 0) on the kept magnitudes, which is what the threshold mask |x| ≥ a[s_v]
selects. Entries within their rounding error of 0 are returned as exact zeros.

Rounding. With the tails in (27) each candidate's h has its own size (the optimum's is exactly 0 at
λ = 0), so a block whose squared norm is below float32 resolution of the other's still decides.
Relative to ½‖a‖² + ½‖b‖² (minus the kept heads) every candidate's value would sit near −½‖b‖²,
where such a block is lost.

The paper's own procedure (Algorithm 5, the walk along the maximal feasibility boundary, then
Algorithm 3) is implemented in the tests (``tests/oracles.py``; argsort, explicit vectors, a
``while_loop`` per unit) as a cross-check. The printed single-output Algorithm 2 is not used (it
can loop forever and never compares with the trivial solution v = 0, w = |y|): the single-output
prox is the p = 1 case of the multi-output one here.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from lowrank_jax import _checks, linalg

_INT_OF = {
    jnp.dtype(jnp.float32): jnp.int32,
    jnp.dtype(jnp.float64): jnp.int64,
    jnp.dtype(jnp.float16): jnp.int16,
    jnp.dtype(jnp.bfloat16): jnp.int16,
}


@jax.custom_jvp
def sort_magnitudes(x: jax.Array) -> jax.Array:
    """|x| sorted in decreasing order along the last axis.

        sorted_k = |x_π(k)|,   |x_π(1)| ≥ |x_π(2)| ≥ …,
        d(sorted)_k = sign(x_π(k)) dx_π(k)

    Sorts the integer bit patterns: for non-negative IEEE floats they order exactly as the values,
    and an integer sort needs no comparator for NaN and −0. Differentiable: the derivative is that
    of the permutation π (a custom JVP; the bit casts alone would cut it to 0).

    Args:
      x: a real floating-point array (float16, bfloat16, float32 or float64) without NaN (the
        public functions that call it reject NaN).

    Returns:
      The array of |x| sorted decreasingly along the last axis, x's shape and dtype.
    """
    mag = jnp.abs(x)
    if jnp.dtype(mag.dtype) not in _INT_OF:
        raise TypeError(f"sort_magnitudes needs a real floating-point array, got {mag.dtype}")
    bits = lax.bitcast_convert_type(mag, _INT_OF[jnp.dtype(mag.dtype)])
    return lax.bitcast_convert_type(lax.sort(bits, dimension=mag.ndim - 1), mag.dtype)[..., ::-1]


@sort_magnitudes.defjvp
def _sort_magnitudes_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    mag = jnp.abs(x)
    bits = lax.bitcast_convert_type(mag, _INT_OF[jnp.dtype(mag.dtype)])
    order = lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)
    _, perm = lax.sort((bits, order), dimension=x.ndim - 1, num_keys=1)
    perm = perm[..., ::-1]
    return _take(mag, perm), _take(jnp.sign(x) * dx, perm)


def _prefix(a):
    """[0, a_1, a_1 + a_2, …] along the last axis: (…, k) → (…, k + 1)."""
    return jnp.concatenate([jnp.zeros_like(a[..., :1]), jnp.cumsum(a, axis=-1)], axis=-1)


def _suffix(a):
    """[Σ_{j≥1} a_j, Σ_{j≥2} a_j, …, a_k, 0] along the last axis: (…, k) → (…, k + 1). Summed from
    the end: for a sorted decreasingly, the small terms first, and each tail is its own sum (not a
    total minus a prefix, whose rounding is that of the total)."""
    return jnp.flip(_prefix(jnp.flip(a, axis=-1)), axis=-1)


def _take(arr, idx):
    return jnp.take_along_axis(arr, idx, axis=-1)


def _pair_coefficients(lam, sv, sw, A, B):
    """(d, c_v, c_w) of the stationary point with support sizes (s_v, s_w); d ≤ 0 is invalid.

    A d within rounding of 0 counts as 0: where λ² s_v s_w = 1 exactly (λ⁻² an integer), the
    computed d is ±eps and c_v, c_w are rounding noise over eps, a "stationary point" that can pass
    the feasibility test and beat the true optimum (tied data). The singular pair is not needed: a
    pair with a smaller support attains the optimum there."""
    lam2 = lam * lam
    d = 1.0 - lam2 * sv * sw
    d = jnp.where(d > 8 * jnp.finfo(d.dtype).eps, d, 0.0)
    safe = jnp.where(d > 0, d, 1.0)
    cv = (lam2 * sw * A - lam * B) / safe
    cw = (lam2 * sv * B - lam * A) / safe
    return d, cv, cw


def _rounding_of_entries(lam, sv, sw, A, B, d):
    """(e_v, e_w): the parts of the rounding errors of the computed entries v_k = a_k + c_v and
    w_j = b_j + c_w of the pair (s_v, s_w) that come from c_v and c_w; the entries' own error bound
    is ε·a_k + e_v and ε·b_j + e_w (ε the dtype's machine epsilon).

    c_v = N_v/d with N_v = λ² s_w A − λB, a difference whose terms sum to M_v = λ² s_w A + λB
    (c_w: N_w = λ² s_v B − λA, M_w = λ² s_v B + λA). Two sources of error:

    * N_v carries the rounding of the prefix sums A and B (about log₂(s_v + s_w)·ε relative, the
      bound of a pairwise sum; XLA's prefix sums of 784 float32 terms measured ≤ 2.2ε on CPU) and a
      few roundings of the products and the difference: ε log₂(2 + s_v + s_w) M_v absolute, over d.
    * d = 1 − λ² s_v s_w carries a few ε absolute, so ε/d relative, which c_v = N_v/d inherits:
      4ε |N_v|/d² (with |N_v| bounded by its computed value plus the first error).

        e_v = ε (ℓ M_v + 4 (|N_v| + ε ℓ M_v)/d)/d,    ℓ = log₂(2 + s_v + s_w)    (e_w alike).

    The second term grows as 1/d² near the singular pair (d → 0) but only with |N_v|, which is
    small there when the data are tied: 1 × 1 and 2 × 2 units of ones at λ = (1 − 10⁻⁴)/√(s_v s_w)
    have N_v ≈ 10⁻⁴ against M_v ≈ 2. (Bounding |N_v| by M_v instead would make e_v exceed the
    entries, 0.5 there, and return the unit all zero, at twice the trivial candidate's objective.)

    An entry within its bound of 0 is 0 up to rounding: where it is 0 in exact arithmetic (b_j = λΣv
    on the nose, tied data) the computed one is ±ε-noise, a non-zero that the exact prox does not
    have, and the candidate it belongs to is the one with a support smaller by that entry (Lemma 9
    holds with equality). Invalid pairs (d ≤ 0) get e = 0; they are never selected."""
    eps = jnp.finfo(jnp.result_type(A)).eps
    safe = jnp.where(d > 0, d, 1.0)
    ell = jnp.log2(2 + sv + sw)
    lam2 = lam * lam

    def bound(big, small):  # big: λ² s A term, small: λ B term
        M, N = big + small, jnp.abs(big - small)
        return eps * (ell * M + 4 * (N + eps * ell * M) / safe) / safe

    return bound(lam2 * sw * A, lam * B), bound(lam2 * sv * B, lam * A)


def _prox_unit(x, y, lam):
    """One hidden unit: x ∈ Rᵖ (its output weights), y ∈ Rᵐ (its input weights), p ≤ m.

    The prox is positively homogeneous, prox_λ(c·(x, y)) = c·prox_λ(x, y) for c > 0 (substitute
    (v, w) = c·(v', w'): the objective is c² times the unscaled one). The unit is solved at unit
    scale, c the power of two at or just above max|(x, y)| (so that dividing by it is exact), and
    the squared prefix sums below neither underflow (weights near 1e-20 in float32) nor overflow
    (near 1e19). By the same homogeneity (Euler's identity) the derivative through c is zero: c is
    held constant for autodiff."""
    c = linalg.power_of_two_scale(jnp.concatenate([x, y]))
    v, w = _prox_unit_scaled(x / c, y / c, lam)
    return c * v, c * w


def _prox_unit_scaled(x, y, lam):
    """``_prox_unit`` on a unit whose largest magnitude is 1 (or that is all zero or not finite)."""
    p, m = x.shape[0], y.shape[0]
    dtype = x.dtype
    a, b = sort_magnitudes(x), sort_magnitudes(y)
    A, B = _prefix(a), _prefix(b)  # (p+1,), (m+1,)
    TA, TB = _suffix(a * a), _suffix(b * b)  # tails Σ_{k>s} a_k², Σ_{j>s} b_j²
    sv = jnp.arange(p + 1, dtype=dtype)  # every s_v at once
    inf = jnp.full((1,), jnp.inf, dtype)
    a_last, b_last = jnp.concatenate([inf, a]), jnp.concatenate([inf, b])  # a_{s}, +inf at s = 0

    def feasible(sw):
        d, cv, cw = _pair_coefficients(lam, sv, sw.astype(dtype), A, B[sw])
        return (d > 0) & (a_last + cv >= 0) & (b_last[sw] + cw >= 0)

    def bisect(_, bounds):  # s_w = 0 is always feasible: lo stays so
        lo, hi = bounds
        mid = (lo + hi) // 2
        ok = feasible(mid)
        return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid)

    steps = int(np.ceil(np.log2(m + 1))) + 1
    # A rolled loop: unrolled, its vmapped copies took 1.0 of path_norm_prox's 1.6 s compile
    # (200 × 784) for no run-time gain on a CPU.
    sw, _ = lax.fori_loop(
        0, steps, bisect, (jnp.zeros(p + 1, jnp.int32), jnp.full(p + 1, m + 1, jnp.int32))
    )
    swf, B_sw = sw.astype(dtype), B[sw]
    d, cv, cw = _pair_coefficients(lam, sv, swf, A, B_sw)
    lam2 = lam * lam
    # h itself, eq. (27), with the dropped entries' tails (see the module docstring, Rounding): not
    # h − ½‖a‖² − ½‖b‖², whose values all sit near −½‖b‖², where a block with ‖a‖² below float32
    # resolution of ‖b‖² is lost, the candidates tie and the argmin dropped kept weights.
    h = (
        (-lam2 * swf * A**2 - lam2 * sv * B_sw**2 + 2 * lam * A * B_sw)
        / (2 * jnp.where(d > 0, d, 1.0))
        + 0.5 * TA
        + 0.5 * TB[sw]
    )
    # The best candidate; of tied ones the last (largest s_v): where a tail's squares underflow
    # (magnitudes below 1e-19 of the unit's largest in float32) h ties exactly, and at λ = 0 only
    # (s_v, s_w) = (p, m) returns the input.
    k = p - jnp.argmin(h[::-1])
    ax, ay = jnp.abs(x), jnp.abs(y)
    ev, ew = _rounding_of_entries(lam, sv[k], swf[k], A[k], B_sw[k], d[k])
    eps = jnp.finfo(dtype).eps
    # Kept: the top s_v magnitudes (and their ties), unless 0 up to rounding (then exactly 0).
    v = jnp.where((ax >= a_last[k]) & (ax + cv[k] > eps * ax + ev), ax + cv[k], 0) * jnp.sign(x)
    w = jnp.where((ay >= b_last[sw[k]]) & (ay + cw[k] > eps * ay + ew), ay + cw[k], 0) * jnp.sign(y)
    return v, w


_prox_units = jax.jit(jax.vmap(_prox_unit, in_axes=(0, 0, None)))


def _check_layouts(W_in, W_out):
    """Refuse weights that are not W_in (hidden, inputs) and W_out (outputs, hidden) by name: P's
    column sums of W_out and row sums of W_in broadcast silently otherwise (a W_out of layout
    (hidden, outputs) = (4, 1) against a W_in of 4 hidden units would give 4 × 4 "units", 4x the
    norm; a 1-D W_out a sum over all of it times every row)."""
    if W_in.ndim != 2 or W_out.ndim != 2:
        raise ValueError(
            f"need 2-D W_in (hidden, inputs) and W_out (outputs, hidden), got W_in "
            f"{tuple(W_in.shape)} and W_out {tuple(W_out.shape)}"
        )
    if W_in.shape[0] != W_out.shape[1]:
        raise ValueError(
            f"hidden sizes differ: W_in is (hidden, inputs) = {tuple(W_in.shape)} and W_out "
            f"is (outputs, hidden) = {tuple(W_out.shape)}"
        )


def _array(W, name: str, args=None) -> jax.Array:
    """W as a JAX array, its layout checked by ``_layouts`` (no value check: the norm of a
    diverged network's NaN weights is NaN)."""
    return jnp.asarray(W)


def _layouts(W_out, name: str, args) -> jax.Array:
    """W_out as a JAX array whose layout fits the argument ``W_in`` (``_check_layouts``)."""
    W_out = jnp.asarray(W_out)
    _check_layouts(args["W_in"], W_out)
    return W_out


def _weights_out(W_out, name: str, args) -> jax.Array:
    """W_out as a finite matrix (``lowrank_jax._checks.as_matrix``) whose layout fits the
    argument ``W_in``."""
    W_out = _checks.as_matrix(W_out, name)
    _check_layouts(args["W_in"], W_out)
    return W_out


def _pair_strength(strength, name: str, args) -> jax.Array:
    """λ ≥ 0, a scalar in the wider dtype of ``W_in`` and ``W_out`` (maybe traced: NaN where it
    breaks the rule)."""
    dtype = jnp.result_type(args["W_in"].dtype, args["W_out"].dtype)
    return _checks.as_hyper(strength, name, ndim=0, dtype=dtype)


def _like(ref: str):
    """The spec of a JAX array with the shape of the argument ``ref``."""

    def convert(W, name: str, args) -> jax.Array:
        W = jnp.asarray(W)
        _checks.check_same_shape(args[ref], W, ref, name)
        return W

    return _checks.Convert(convert)


def _check_pair(W_in, W_out, strength):
    W_in = _checks.as_matrix(W_in, "W_in")
    W_out = _checks.as_matrix(W_out, "W_out")
    _check_layouts(W_in, W_out)
    dtype = jnp.result_type(W_in.dtype, W_out.dtype)
    strength = _checks.as_hyper(strength, "strength", ndim=0, dtype=dtype)
    # For λ ≥ 1 only pairs with s_v · s_w = 0 have d = 1 − λ² s_v s_w > 0, and their candidates do
    # not depend on λ: λ = 1 gives the same prox, and a huge λ no longer overflows λ² (inf · 0 = NaN
    # made the argmin pick the empty unit).
    return W_in.astype(dtype), W_out.astype(dtype), jnp.minimum(strength, 1)


@_checks.validate(
    W_in=_checks.Matrix(),
    W_out=_checks.Convert(_weights_out),
    strength=_checks.Convert(_pair_strength),
)
@_checks.compiled
def path_norm_prox(W_in, W_out, strength):
    """The exact global proximal map of λ times the 1-path-norm of a shallow network.

        (W_in⁺, W_out⁺) = argmin_{(V_in, V_out)} ½‖V_in − W_in‖²_F + ½‖V_out − W_out‖²_F
                                                  + λ P(V_in, V_out),
        P(V_in, V_out) = Σ_{k,j,i} |V_out[k, j]| |V_in[j, i]|

    (Latorre, Rolland, Hallak, Cevher, ICML 2020: the multi-output prox of their §5, made exact
    per hidden unit as in the module docstring). Any number of outputs, one included. Units with
    all-zero weights, ties, and λ ≥ 1 (each unit then keeps the block with the larger ℓ2 norm and
    zeroes the other) are handled. Sparsity (Lemma 8): a unit that keeps both blocks has
    s_v · s_w < λ⁻² non-zeros; an entry that is 0 in exact arithmetic (tied data, |y_j| = λΣv on
    the nose) comes back exactly 0, not as rounding noise. Where the prox is set-valued (exact ties
    of the objective) one minimiser is returned. λ = 0 returns the input bit for bit, in float32
    too.

    Args:
      W_in: (hidden, inputs) input weights (``equinox.nn.Linear`` layout), finite.
      W_out: (outputs, hidden) output weights, finite.
      strength: λ ≥ 0, a scalar; it may be traced, so ``vmap``/``jit`` over it never recompile
        (a traced negative or NaN λ gives NaN weights). For Prox-SGD, λ = lr × (the regularisation
        weight).

    Returns:
      (W_in⁺, W_out⁺) of the input shapes, in the wider of the two dtypes (float16/bfloat16 are
      computed and returned in float32; cast back if needed).

    Example:
        ```python
        import jax, jax.numpy as jnp
        from lowrank_jax import pathnorm

        W_in = jax.random.normal(jax.random.key(0), (32, 64)) / 8  # (hidden, inputs)
        W_out = jax.random.normal(jax.random.key(1), (10, 32)) / 4  # (outputs, hidden)
        V_in, V_out = pathnorm.path_norm_prox(W_in, W_out, strength=0.05)
        path = lambda A, B: jnp.sum(jnp.abs(B) @ jnp.abs(A))  # the 1-path-norm
        # 421 → 52, and 20 % of V_in is zero
        print(path(W_in, W_out), path(V_in, V_out), jnp.mean(V_in == 0))
        ```
    """
    dtype = strength.dtype
    W_in, W_out = W_in.astype(dtype), W_out.astype(dtype)
    # For λ ≥ 1 only pairs with s_v · s_w = 0 have d = 1 − λ² s_v s_w > 0, and their candidates do
    # not depend on λ: λ = 1 gives the same prox, and a huge λ no longer overflows λ².
    lam = jnp.minimum(strength, 1)
    x, y = W_out.T, W_in  # per unit: x ∈ R^p, y ∈ R^m
    if x.shape[1] <= y.shape[1]:
        v, w = _prox_units(x, y, lam)
    else:  # the problem is symmetric in (x, y)
        w, v = _prox_units(y, x, lam)
    return _finish_prox(lam, W_in, W_out, w, v.T)


@jax.jit
def _finish_prox(lam, W_in, W_out, W_in_new, W_out_new):
    """(W_in⁺, W_out⁺): the input itself at λ = 0, NaN everywhere if λ is NaN and NaN across a unit
    whose weights are not all finite.

    At λ = 0 the prox is the identity, and the per-unit solve at unit scale flushes entries more
    than 2¹²⁶ below their unit's largest in float32 (a unit (1e20, 1e-20) came back as (1e20, 0)). A
    traced λ < 0 or NaN (which cannot raise) arrives as NaN (``_checks.as_hyper``), and a traced NaN
    weight (a diverging run under jit) cannot be refused either: the argmin over candidates would
    turn the first into zeros, and the second into a unit whose other entries are zero or finite, so
    a diverged network looked partly trained."""
    W_in_new, W_out_new = jnp.where(lam == 0, W_in, W_in_new), jnp.where(lam == 0, W_out, W_out_new)
    bad_unit = ~(
        jnp.all(jnp.isfinite(W_in), axis=1) & jnp.all(jnp.isfinite(W_out), axis=0)
    ) | jnp.isnan(lam)
    return (
        jnp.where(bad_unit[:, None], jnp.nan, W_in_new),
        jnp.where(bad_unit[None, :], jnp.nan, W_out_new),
    )


@_checks.validate(W_in=_checks.Convert(_array), W_out=_checks.Convert(_layouts))
@_checks.compiled
def path_norm(W_in, W_out) -> jax.Array:
    """The 1-path-norm of a shallow network, in O(hidden · (inputs + outputs)).

        P(W_in, W_out) = Σ_(k,j,i) |W_out[k, j]| |W_in[j, i]|
                       = Σ_j ‖W_out[:, j]‖₁ ‖W_in[j, :]‖₁

    (Latorre, Rolland, Hallak, Cevher 2020; an upper bound on the ℓ∞ → ℓ1 Lipschitz constant,
    Theorem 1).

    Args:
      W_in: (hidden, inputs) input weights; other shapes raise ``ValueError``.
      W_out: (outputs, hidden) output weights.

    Returns:
      The scalar P.
    """
    return jnp.sum(jnp.sum(jnp.abs(W_out), axis=0) * jnp.sum(jnp.abs(W_in), axis=1))


@_checks.validate(
    W_in=_checks.Convert(_array),
    W_out=_checks.Convert(_layouts),
    W_in_bar=_like("W_in"),
    W_out_bar=_like("W_out"),
    strength=_checks.Convert(_pair_strength),
)
@_checks.compiled
def path_norm_objective(W_in, W_out, W_in_bar, W_out_bar, strength) -> jax.Array:
    """The objective that ``path_norm_prox`` minimises, at (W_in, W_out).

        ½‖W_in − W̄_in‖²_F + ½‖W_out − W̄_out‖²_F + λ P(W_in, W_out)

    Args:
      W_in: (hidden, inputs) input weights where it is evaluated.
      W_out: (outputs, hidden) output weights where it is evaluated.
      W_in_bar: W̄_in, the prox's input point, W_in's shape.
      W_out_bar: W̄_out, W_out's shape.
      strength: λ ≥ 0, a scalar (as for the prox).

    Returns:
      The scalar objective.
    """
    return (
        0.5 * jnp.sum((W_in - W_in_bar) ** 2)
        + 0.5 * jnp.sum((W_out - W_out_bar) ** 2)
        + strength * path_norm(W_in, W_out)
    )


# -- the layer-wise baseline's projection ----------------------------------------------------------


@_checks.validate(
    W=_checks.Matrix(),
    radius=_checks.Hyper(ndim=0, dtype_of="W", allow_inf=True),  # inf: W itself
)
@_checks.compiled
def project_l1_ball_rows(W, radius):
    """The Euclidean projection of every row of W onto the ℓ1 ball {u : ‖u‖₁ ≤ radius}.

    Sort-based (Duchi, Shalev-Shwartz, Singer, Chandra 2008): with a = |W_i| sorted decreasingly,

        ρ = max{j : a_j > (Σ_{l≤j} a_l − radius)/j},   θ = (Σ_{l≤ρ} a_l − radius)/ρ,
        W_i⁺ = sign(W_i) · max(|W_i| − θ, 0)   (rows outside the ball;
                                                rows inside stay as they are).

    Keeping ‖W‖∞ (the max row ℓ1 norm, the ℓ∞ operator norm) ≤ 1/λ by projecting after every step is
    the paper's layer-wise baseline. It is evaluated in gaps to the ρ-th magnitude, |W_ij| − θ =
    (|W_ij| − a_ρ) + (radius − s)/ρ with s the sum of (a_l − a_ρ) over l ≤ ρ, s ≥ 0: the direct
    |W_ij| − θ cancels to an error of eps·a_1, which in float32 swamps a radius far below the row's
    largest entry; the gap form's error is of order eps·(|W_ij| + radius), and the kept entries sum
    to the radius.

    Args:
      W: (rows, columns) matrix, finite.
      radius: the ball's radius ≥ 0, a scalar (may be traced); ``inf`` (λ = 0) returns W.

    Returns:
      The projected matrix, W's shape and dtype.
    """
    a = sort_magnitudes(W)
    css = jnp.cumsum(a, axis=1)
    j = jnp.arange(1, W.shape[1] + 1, dtype=W.dtype)
    active = a * j > css - radius
    rho = jnp.maximum(jnp.sum(active, axis=1, keepdims=True), 1)  # active is a prefix
    a_rho = _take(a, rho - 1)
    s = jnp.sum(jnp.where(j <= rho, a - a_rho, 0), axis=1, keepdims=True)
    inside = jnp.sum(jnp.abs(W), axis=1, keepdims=True) <= radius
    shrunk = jnp.sign(W) * jnp.maximum(jnp.abs(W) - a_rho + (radius - s) / rho.astype(W.dtype), 0)
    return jnp.where(inside, W, shrunk)


__all__ = [
    "path_norm",
    "path_norm_objective",
    "path_norm_prox",
    "project_l1_ball_rows",
    "sort_magnitudes",
]
