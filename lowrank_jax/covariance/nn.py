"""Low-rank + sparse decomposition of a symmetric matrix by a neural-network parametrisation of the
low-rank factor (Baes, Herrera, Neufeld, Ruyssen 2021).

    Σ = L + S,   L = MMᵀ (PSD, rank ≤ k),   M = g(N_Θ(h(Σ))),   S := Σ − L,

    φ(Θ) = Σ_(i,j=1..n) μ([MMᵀ − Σ]_ij)          (eq. 9; all n² entries)

h is the half-vectorisation (upper triangle row by row, eq. 8; the authors' code uses the lower
triangle), g the row-major reshape of a vector of ℝⁿᵏ into an n × k matrix, N_Θ a fully connected
network evaluated at the one fixed input h(Σ). μ is |t| (the authors' code), the Huber-type μ(t) =
t²/(2ε) + ε/2 for |t| ≤ ε (else |t|) or Nesterov's log-cosh ε log(2 cosh(t/ε)). With ω = MMᵀ − Σ
symmetric, ∇_M φ = 2 μ'(ω) M (Lemma IV.2).

**The fixed input.** The first layer only ever acts through z₀ = A⁽⁰⁾x + b⁽⁰⁾ with x = h(Σ) fixed,
and its gradient is rank one: ∂φ/∂A⁽⁰⁾ = δ xᵀ, ∂φ/∂b⁽⁰⁾ = δ with δ = ∂φ/∂z₀. With ``first_layer=
"fixed-input"`` (default) the solver never stores A⁽⁰⁾ (ℓ₁ × n(n+1)/2: 20 M weights at n = 200, 320
M at n = 800) and updates z₀ directly, exactly as the dense layer would move it:

    gradient descent, step t:  z₀ ← z₀ − t (‖x‖² + 1) δ
    Adam (moments from zero):  m_A = m̃ xᵀ and v_A = ṽ (x∘x)ᵀ stay outer
                               products, so, with x̃ = [x; 1],
                               z₀ ← z₀ − lr m̂_i Σ_j x̃_j² / (√v̂_i |x̃_j| + ε_adam)

(m̃, ṽ are the bias's own moments). Memory O(ℓ₁ + n(n+1)/2) instead of O(ℓ₁ n²/2), and the Adam sum
over j has a closed form exact to rounding unless a unit's second moment is tiny, so a step costs
O(ℓ₁) for the first layer instead of O(ℓ₁ n²/2). ``"dense"`` keeps the plain layer (tests check both
paths agree).

Optimisers: ``"adam"`` (optax; the code's lr 1e-4), ``"gd"`` (constant step), ``"gd-sqrt"``
(h/√(j+1)), ``"armijo"`` (gradient descent with a Goldstein–Armijo step: α t‖∇φ‖² ≤ φⱼ − φⱼ₊₁ ≤ β
t‖∇φ‖², bracketing from twice the last accepted step; the run stops, with step 0 recorded, when no
step passes Armijo in 40 trials — the required decrease is then below the rounding of φ, which in
float32 happens far from a stationary point: use float64 for the theory's diagnostics). Stopping:
``max_iter``, the code's relative change |φⱼ − m| / m ≤ ``tol`` with m the mean of the w = 10
previous losses, or ‖∇φ‖ ≤ ``grad_tol``. ``decompose_iteration`` gives the same run as an initial
state and a step (``lowrank_jax.loop.Iteration``), to step by hand, warm-start or stop on a rule of
one's own.
"""

from __future__ import annotations

import functools
import math
import numbers

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from lowrank_jax import _checks, loop
from lowrank_jax import progress as progress_bar
from lowrank_jax.covariance._common import SIGMA, SYMMETRIC
from lowrank_jax.precision import full_precision
from lowrank_jax.result import Result, finish

ACTIVATIONS = ("relu", "tanh", "logistic", "arctan")
LOSSES = ("l1", "huber", "logcosh")
OPTIMIZERS = ("adam", "gd", "gd-sqrt", "armijo")
ORDERS = ("triu", "tril")
FIRST_LAYERS = ("fixed-input", "dense")
_CHUNK = 64  # rows of the first weight matrix generated at a time (its full size is never needed)

# The options are static Python values: they are checked at trace time under ``jit`` too.
_LOSS = _checks.Choice(*LOSSES)
_ACTIVATION = _checks.Choice(*ACTIVATIONS)


@_checks.validate(
    name=_checks.Convert(lambda v, _, args: _ACTIVATION.convert(v, "activation", args))
)
def activation(name: str):
    """The activation function of a name: relu, tanh, logistic or the scaled arctan.

    relu is the authors' code's; (2/π) tan⁻¹ the theory's.

    Args:
      name: one of ``ACTIVATIONS`` ("relu", "tanh", "logistic", "arctan"); any other name is a
        ``ValueError``.

    Returns:
      The elementwise function, array → array.
    """
    return {
        "relu": jax.nn.relu,
        "tanh": jnp.tanh,
        "logistic": jax.nn.sigmoid,
        "arctan": lambda t: (2 / math.pi) * jnp.arctan(t),
    }[name]


@_checks.validate(loss=_LOSS)
def smooth_abs(t, loss: str, eps):
    """μ(t), the entrywise loss: |t| or one of its smoothings.

        l1:       μ(t) = |t|              (derivative sign(t), 0 at 0)
        huber:    μ(t) = t²/(2ε) + ε/2 for |t| ≤ ε, else |t|       (≥ |t|, C¹)
        logcosh:  μ(t) = ε log(2 cosh(t/ε))
                  (computed as ε·logaddexp(t/ε, −t/ε))

    Args:
      t: array of residual entries.
      loss: one of ``LOSSES`` ("l1", "huber", "logcosh"); any other is a ``ValueError``.
      eps: ε > 0, the smoothing width (unused by "l1").

    Returns:
      μ(t), an array of t's shape.
    """
    if loss == "l1":
        # |t| with derivative sign(t), 0 at 0 like the authors' torch.abs: jnp.abs's own rule gives
        # +1 there, which pushed an exact fit ω_ij = 0 away and disagreed with grad_of_M.
        return t * jax.lax.stop_gradient(jnp.sign(t))
    if loss == "huber":
        return jnp.where(jnp.abs(t) <= eps, t * t / (2 * eps) + eps / 2, jnp.abs(t))
    return eps * jnp.logaddexp(t / eps, -t / eps)


@_checks.validate(loss=_LOSS)
def smooth_abs_grad(t, loss: str, eps):
    """μ'(t), the derivative of ``smooth_abs``.

        l1:       sign(t)   (0 at 0, as the authors' torch.abs)
        huber:    clip(t/ε, ±1)
        logcosh:  tanh(t/ε)

    Args:
      t: array of residual entries.
      loss: one of ``LOSSES``; any other is a ``ValueError``.
      eps: ε > 0, the smoothing width (unused by "l1").

    Returns:
      μ'(t), an array of t's shape.
    """
    if loss == "l1":
        return jnp.sign(t)
    if loss == "huber":
        return jnp.clip(t / eps, -1.0, 1.0)
    return jnp.tanh(t / eps)


@_checks.validate(order=_checks.Choice(*ORDERS))
@_checks.compiled
def half_vec(Sigma, order: str = "triu"):
    """h(Σ), the half-vectorisation of Σ: the network's fixed input (eq. 8).

    Args:
      Sigma: (n, n) matrix.
      order: "triu" (default, the paper's: the upper triangle row by row) or "tril" (the authors'
        code's lower triangle); any other is a ``ValueError``.

    Returns:
      (n(n+1)/2,) the triangle's entries.
    """
    n = Sigma.shape[0]
    i, j = jnp.triu_indices(n) if order == "triu" else jnp.tril_indices(n)
    return Sigma[i, j]


# M is (n, k) and Σ an (n, n) symmetric matrix. A 1-D M made MMᵀ the scalar ‖m‖², broadcast
# against Σ into a plausible φ; a non-symmetric Σ gave a ``grad_of_M`` that is not the gradient of
# ``loss_of_M`` (its formula uses Σ's symmetry).
_FACTOR = (
    SYMMETRIC,
    _checks.Rule(  # shapes only: checked on traced arguments too
        lambda a: a["M"].shape[0] == a["Sigma"].shape[0],
        "M (n, k) must have as many rows as Sigma (n, n), got M {M.shape} and Sigma {Sigma.shape}",
        uses=(),
    ),
)


@_checks.validate(*_FACTOR, M=_checks.Matrix(), **SIGMA, loss=_LOSS)
def loss_of_M(M, Sigma, loss: str = "l1", eps=1e-2):
    """φ as a function of the factor: φ(M) = Σ_ij μ([MMᵀ − Σ]_ij) over all n² entries (eq. 9).

    Args:
      M: (n, k) the factor.
      Sigma: (n, n) symmetric (to 1e-6 · max|Σ|), as ``decompose`` checks it.
      loss: one of ``LOSSES``, default "l1" (μ, ``smooth_abs``).
      eps: ε > 0 of the smoothing, default 1e-2.

    Returns:
      φ(M), a scalar. Other shapes, a non-symmetric Σ or an unknown ``loss`` are a ``ValueError``.
    """
    return _loss_of_M(M, Sigma, loss, eps)


def _loss_of_M(M, Sigma, loss, eps):
    return jnp.sum(smooth_abs(M @ M.T - Sigma, loss, eps))


@_checks.validate(*_FACTOR, M=_checks.Matrix(), **SIGMA, loss=_LOSS)
def grad_of_M(M, Sigma, loss: str = "l1", eps=1e-2):
    """The gradient of ``loss_of_M`` in M, in closed form: ∇_M φ = 2 μ'(MMᵀ − Σ) M.

    Lemma IV.2, with the symmetry of ω = MMᵀ − Σ (which needs a symmetric Σ).

    Args:
      M: (n, k) the factor.
      Sigma: (n, n) symmetric (to 1e-6 · max|Σ|).
      loss: one of ``LOSSES``, default "l1" (μ', ``smooth_abs_grad``).
      eps: ε > 0 of the smoothing, default 1e-2.

    Returns:
      (n, k) ∇_M φ. ``ValueError`` as ``loss_of_M``.
    """
    return 2 * smooth_abs_grad(M @ M.T - Sigma, loss, eps) @ M


class CovNet(eqx.Module):
    """The MLP N_Θ at its fixed input, stored without its first layer's weight; calling it gives M.

    M = g(N_Θ(h(Σ))): the first layer only acts through z₀ = A⁽⁰⁾h(Σ) + b⁽⁰⁾, which stands for it
    (the input never changes); g is the row-major reshape to (n, k).

    Attributes:
      z0: (ℓ₁,) the first layer's pre-activation A⁽⁰⁾h(Σ) + b⁽⁰⁾.
      layers: the later layers, a tuple of ``eqx.nn.Linear`` (the last has n·k outputs).
      act: the activation's name (``ACTIVATIONS``), static.
      n: rows of M (Σ's size), static.
      k: columns of M (the rank), static.
    """

    z0: jax.Array
    layers: tuple
    act: str = eqx.field(static=True)
    n: int = eqx.field(static=True)
    k: int = eqx.field(static=True)

    def __call__(self):
        h = self.z0
        for layer in self.layers:
            h = layer(activation(self.act)(h))
        return h.reshape(self.n, self.k)  # g: row-major


def _xavier_linear(key, fan_in, fan_out, dtype, bias=0.01):
    a = math.sqrt(6.0 / (fan_in + fan_out))
    lin = eqx.nn.Linear(fan_in, fan_out, key=key, dtype=dtype)
    W = jax.random.uniform(key, (fan_out, fan_in), dtype, -a, a)
    return eqx.tree_at(lambda m: (m.weight, m.bias), lin, (W, jnp.full((fan_out,), bias, dtype)))


def first_weight_rows(key, r: int, width: int, dtype):
    """The first layer's Xavier-uniform weight A⁽⁰⁾, generated in row chunks of 64.

    Entries U[−a, a] with a = √(6/(r + width)); chunk c comes from ``fold_in(key, c)``, so both
    layer modes ("fixed-input", "dense") see the same matrix without the first storing it.

    Args:
      key: ``jax.random`` key.
      r: the input width n(n+1)/2.
      width: ℓ₁, the rows of A⁽⁰⁾.
      dtype: of the weights.

    Returns:
      (rows, chunks): ``rows(c)`` gives chunk c, (64, r), and ``chunks`` = ⌈width/64⌉; the rows past
      ``width`` in the last chunk are not part of A⁽⁰⁾.
    """
    a = math.sqrt(6.0 / (r + width))
    chunks = -(-width // _CHUNK)

    def rows(c):
        return jax.random.uniform(jax.random.fold_in(key, c), (_CHUNK, r), dtype, -a, a)

    return rows, chunks


def init_network(key, x, n: int, k: int, hidden, act: str, dtype):
    """The starting network for Σ of size n and rank k, with the first layer folded into z₀.

    Xavier-uniform weights and biases 0.01 (the authors' initialisation). The first layer's dense
    weight A⁽⁰⁾ (ℓ₁, n(n+1)/2) is drawn row block by row block (``first_weight_rows``) and never
    kept: only z₀ = A⁽⁰⁾x + b⁽⁰⁾, ‖A⁽⁰⁾‖²_F and A⁽⁰⁾x are.

    Args:
      key: ``jax.random`` key.
      x: the fixed input h(Σ), shape (n(n+1)/2,).
      n: Σ's size.
      k: the rank (the last layer has n·k outputs).
      hidden: the widths ℓ₁, …, ℓ_m of the hidden layers.
      act: the activation's name (``ACTIVATIONS``).
      dtype: of the weights.

    Returns:
      (net, ‖A⁽⁰⁾‖²_F, A⁽⁰⁾x): the ``CovNet`` with z₀ = A⁽⁰⁾x + b⁽⁰⁾, a scalar, and (ℓ₁,).
    """
    widths = (x.shape[0],) + tuple(hidden) + (n * k,)
    k_first, k_layers = jax.random.split(key)
    k_rest = jax.random.split(k_layers, len(widths) - 2)
    rows, chunks = first_weight_rows(k_first, x.shape[0], widths[1], dtype)

    def chunk_stats(c):
        W = rows(c)
        return W @ x, jnp.sum(W * W, axis=1)

    Ax, sq = jax.lax.map(chunk_stats, jnp.arange(chunks))
    Ax, sq = Ax.reshape(-1)[: widths[1]], sq.reshape(-1)[: widths[1]]
    layers = tuple(
        _xavier_linear(kk, widths[i + 1], widths[i + 2], dtype) for i, kk in enumerate(k_rest)
    )
    return CovNet(Ax + 0.01, layers, act, n, k), jnp.sum(sq), Ax


def dense_first_weight(key, r: int, width: int, dtype):
    """The first layer's weight A⁽⁰⁾ that ``init_network`` draws with the same key, stored.

    Used by ``first_layer="dense"``.

    Args:
      key: the ``jax.random`` key given to ``init_network``.
      r: the input width n(n+1)/2.
      width: ℓ₁.
      dtype: of the weights.

    Returns:
      (width, r) A⁽⁰⁾.
    """
    k_first = jax.random.split(key, 2)[0]
    rows, chunks = first_weight_rows(k_first, r, width, dtype)
    return jax.lax.map(rows, jnp.arange(chunks)).reshape(-1, r)[:width]


class Decomposition(Result):
    """The split Σ ≈ MMᵀ + S found by ``decompose``, with its run's diagnostics.

    The diagnostics are taken before each step, M, L, S and ``net`` after the last one: ‖S‖₁ is not
    ``loss`` but the loss one step later (the authors' code returns the L and S of its last forward
    pass instead, before its last optimiser step).

    Attributes:
      status: a ``Status`` code (int32).
      n_iter: int32, the steps run.
      history: the five diagnostics below per step (``history["loss"]`` etc.), length ``max_iter``,
        NaN after ``n_iter``; ``grad_norm_min`` and ``param_norm_max`` there are the running minimum
        and maximum.
      loss: float scalar, the final loss φ(Θ) at the weights before the last step.
      grad_norm: float scalar, the final ‖∇φ(Θ)‖ at those weights.
      grad_norm_min: float scalar, the smallest ‖∇φ(Θⱼ)‖ over the steps j of the run.
      param_norm_max: float scalar, the largest ‖Θⱼ‖ over the steps j of the run (NaN for Adam
        with the fixed-input layer, whose A⁽⁰⁾ is not stored).
      step: float scalar, the last step length (the learning rate for Adam; 0 where the
        Goldstein–Armijo search found no decrease above φ's rounding).
      M: (n, k) the factor.
      L: (n, n) MMᵀ, PSD of rank ≤ k.
      S: (n, n) Σ − L.
      net: the trained ``CovNet`` (M = ``net()``).
    """

    loss: jax.Array
    grad_norm: jax.Array
    grad_norm_min: jax.Array
    param_norm_max: jax.Array
    step: jax.Array
    M: jax.Array
    L: jax.Array
    S: jax.Array
    net: CovNet


# Divergence: the parameters are non-finite, or φ has grown beyond this many times
# max(φ(Θ₀), Σ_ij |Σ_ij|): a fit never raises its loss that far above both the start and the loss of
# M = 0; a step size far too large multiplies the weights every step until they overflow.
GROWTH_LIMIT = 1e8


def _hidden_widths(hidden, name: str, args=None) -> tuple[int, ...]:
    """``hidden`` as a tuple of positive Python integers: one width (an int or a 0-d array) is one
    layer; anything else must be a non-empty sequence of widths. ``ValueError`` naming it."""
    if isinstance(hidden, numbers.Number) or getattr(hidden, "ndim", None) == 0:
        hidden = (hidden,)  # one hidden layer of that width (checked below, 0-d arrays too)
    if isinstance(hidden, (str, bytes)) or not hasattr(hidden, "__iter__"):
        raise ValueError(
            f"{name} must be a width or a sequence of widths (positive integers), got {hidden!r}"
        )
    widths = tuple(_checks.check_positive_int(h, f"{name} width") for h in hidden)
    if not widths:
        raise ValueError(f"{name} needs at least one layer (the first layer is the one fed h(Σ))")
    return widths


# A step size or smoothing width > 0, and a tolerance ≥ 0 or None, in Σ's dtype (may be traced).
_POSITIVE = _checks.Hyper(ndim=0, low=0, low_open=True, dtype_of="Sigma")
_TOLERANCE = _checks.Hyper(ndim=0, dtype_of="Sigma", optional=True)


# What decompose and decompose_iteration accept (max_iter among them: the lr_end schedule spans it).
_RULES = (
    SYMMETRIC,
    _checks.Rule(
        lambda a: a["lr_end"] is None or a["optimizer"] in ("adam", "gd"),
        "lr_end applies to optimizer 'adam' or 'gd', not {optimizer!r}",
        uses=("optimizer",),  # and whether lr_end is None: static
    ),
)
_ARGS = dict(
    **SIGMA,
    rank=_checks.Rank(of="Sigma"),
    activation=_ACTIVATION,
    loss=_LOSS,
    optimizer=_checks.Choice(*OPTIMIZERS),
    order=_checks.Choice(*ORDERS),
    first_layer=_checks.Choice(*FIRST_LAYERS),
    hidden=_checks.Convert(_hidden_widths),
    max_iter=_checks.Count(),
    window=_checks.Count(),
    lr=_POSITIVE,
    lr_end=_checks.Hyper(ndim=0, low=0, low_open=True, dtype_of="Sigma", optional=True),
    eps=_POSITIVE,
    tol=_TOLERANCE,
    grad_tol=_TOLERANCE,
    armijo=_checks.Convert(lambda v, name, args: _armijo_pair(v)),
    key=_checks.Key(),
)
_DIVERGED = (
    "covariance.decompose diverged (the network's parameters or loss became non-finite or grew "
    "without bound): lower lr (or use optimizer='armijo')"
)
_INVALID = (
    "covariance.decompose: a traced lr, lr_end or eps is not positive, or tol or grad_tol is "
    "negative (the result is NaN)"
)


@full_precision
@_checks.validate(*_RULES, **_ARGS, throw=_checks.Flag(), progress=_checks.Flag())
def decompose(
    Sigma,
    rank: int,
    *,
    hidden=(1000, 200, 200, 200),
    activation: str = "relu",
    loss: str = "l1",
    eps=1e-2,
    optimizer: str = "adam",
    lr=1e-4,
    lr_end=None,
    max_iter: int = 4000,
    tol=1e-6,
    grad_tol=None,
    window: int = 10,
    armijo=(0.1, 0.9),
    order: str = "triu",
    first_layer: str = "fixed-input",
    key=None,
    progress: bool = False,
    throw: bool = True,
) -> Decomposition:
    """Σ ≈ MMᵀ + S with the factor M produced by an MLP at the fixed input h(Σ).

    Baes, Herrera, Neufeld, Ruyssen 2021: minimises over the network's weights Θ

        φ(Θ) = Σ_ij μ([MMᵀ − Σ]_ij),   M = g(N_Θ(h(Σ))) ∈ ℝⁿˣᵏ,

    μ = |·| (``loss="l1"``) or its smoothing (``smooth_abs``), and returns L = MMᵀ (PSD, rank
    ≤ k) and S = Σ − L. The run stops after ``max_iter`` steps, when the loss's relative change
    against the mean m of the previous ``window`` losses is small, |φⱼ − m| ≤ ``tol`` · |m| (the
    authors' code's rule), or when ‖∇φ‖ ≤ ``grad_tol``.

    Scale: the defaults (Xavier initialisation, ``lr``, ``eps``) suit the paper's data —
    correlation matrices and its synthetic Σ, entries up to about 30 — and the network must grow
    its output to Σ's scale in steps of about ``lr``. Far from that scale the fit of L degrades
    without an error (n = 12, rank 2, one hidden layer of 32, lr 1e-3 → 1e-5, 2000 steps: relative
    error 4e-5 at max|Σ| ≈ 3.6, 0.46 at 360): pass Σ/c (c = max_i Σ_ii, say) and multiply the
    returned L and S by c.

    Args:
      Sigma: (n, n) symmetric (to 1e-6 · max|Σ|), finite; traced (``vmap`` over matrices of one
        size works).
      rank: k, 1 ≤ k ≤ n (static).
      hidden: the hidden widths ℓ₁, …, ℓ_m, positive integers (an int is one layer); default the
        authors' (1000, 200, 200, 200).
      activation: "relu" (default, the authors'), "tanh", "logistic" or "arctan" (the theory's).
      loss: "l1" (default), "huber" or "logcosh".
      eps: ε > 0, the smoothing width of "huber" and "logcosh" (array, traced), default 1e-2.
      optimizer: "adam" (default; the authors' lr 1e-4), "gd" (constant step ``lr``), "gd-sqrt"
        (lr/√(j+1)) or "armijo" (Goldstein–Armijo with constants ``armijo``, first trial ``lr``).
      lr: the step size > 0 (array, traced), default 1e-4.
      lr_end: with "adam" or "gd", decay the step geometrically from ``lr`` to ``lr_end`` > 0 over
        ``max_iter`` steps (beyond the paper: the ℓ1 loss has no vanishing gradient, so a constant
        step hovers at a distance ∝ lr from the minimiser); default None, a constant step.
      max_iter: step budget, a positive integer (static), default 4000.
      tol: the relative-change tolerance ≥ 0 above, default 1e-6; None disables the rule (with
        ``grad_tol=None`` the run takes exactly ``max_iter`` steps).
      grad_tol: stop once ‖∇φ‖ ≤ grad_tol (≥ 0); default None, disabled.
      window: w, the number of previous losses averaged by the ``tol`` rule, default 10.
      armijo: (α, β) with 0 < α < β < 1 of the Goldstein–Armijo test α t‖∇φ‖² ≤ φⱼ − φⱼ₊₁ ≤
        β t‖∇φ‖², default (0.1, 0.9).
      order: "triu" (default, the paper's h) or "tril" (the authors' code's).
      first_layer: "fixed-input" (default: A⁽⁰⁾ never stored, z₀ updated directly) or "dense".
      key: ``jax.random`` key or int seed of the initialisation (traced), default key(0).
      progress: show a tqdm bar of the steps, moved from inside the compiled run (about a hundred
        updates; a run stopped by ``tol``/``grad_tol`` ends the bar at its ``n_iter``). Under
        ``jit``/``vmap`` it is switched off with a warning. Default False.
      throw: with a run that diverges (non-finite parameters or loss, or φ beyond 10⁸ times
        max(φ(Θ₀), Σ_ij |Σ_ij|): too large an ``lr``), raise ``RuntimeError`` (True, default; also
        inside ``jit``/``vmap``/``lowrank_jax.sweep.run``), or only report ``status ==
        Status.DIVERGED`` (False: an ``lr`` sweep keeps its other points). A traced ``lr``,
        ``lr_end`` or ``eps`` that is not positive, or a negative ``tol``/``grad_tol``, gives
        ``Status.INVALID`` and NaN M, L, S (raised the same way with ``throw=True``).

    Returns:
      ``Decomposition``: ``status`` (CONVERGED when ``tol`` or ``grad_tol`` stopped the run or
      the Goldstein–Armijo search found no decrease above φ's rounding; MAX_ITER when the budget ran
      out), ``n_iter``, the final ``loss``, ``grad_norm``, ``grad_norm_min``, ``param_norm_max``,
      ``step`` and their ``history``, then M (n, k), L = MMᵀ and S = Σ − L (n, n) and the trained
      ``net``.

    Example:
        ```python
        import numpy as np
        from lowrank_jax import Status, covariance

        rng = np.random.default_rng(0)
        M0 = rng.normal(size=(20, 3))
        # rank 3 plus a sparse (diagonal) part
        L0, S0 = M0 @ M0.T, np.diag(rng.uniform(0.5, 1.0, 20))
        res = covariance.decompose(
            L0 + S0, 3, hidden=(100, 50), lr=1e-3, lr_end=1e-5, max_iter=3000, tol=None
        )
        r = covariance.report(L0 + S0, res.L, res.S, L0, S0)
        # MAX_ITER (no tolerance), 3000, ≈ 15
        print(Status.describe(res.status), res.n_iter, res.loss)
        print(r["r_L"], r["rel_error_L"], r["rel_error_S"])  # 3, ≈ 1e-4, ≈ 1e-3
        ```
    """
    alpha, beta = armijo
    progress = progress_bar.wanted(progress, Sigma, lr, lr_end, eps, tol, grad_tol, key)
    with progress_bar.CompiledBar(
        max_iter, f"covariance NN ({loss}, {optimizer})", "step", progress, channel=_CHANNEL
    ) as bar:
        out = _decompose(
            Sigma,
            lr,
            lr_end,
            eps,
            tol,
            grad_tol,
            key,
            rank=rank,
            hidden=hidden,
            act=activation,
            loss=loss,
            optimizer=optimizer,
            max_iter=max_iter,
            window=window,
            alpha=alpha,
            beta=beta,
            order=order,
            first_layer=first_layer,
            progress=_CHANNEL if progress else None,
        )
        if progress:
            bar.finish(int(out.n_iter))
    return finish(out, throw, diverged=_DIVERGED, invalid=_INVALID)


@full_precision
@_checks.validate(*_RULES, **_ARGS)
def decompose_iteration(
    Sigma,
    rank: int,
    *,
    hidden=(1000, 200, 200, 200),
    activation: str = "relu",
    loss: str = "l1",
    eps=1e-2,
    optimizer: str = "adam",
    lr=1e-4,
    lr_end=None,
    max_iter: int = 4000,
    tol=1e-6,
    grad_tol=None,
    window: int = 10,
    armijo=(0.1, 0.9),
    order: str = "triu",
    first_layer: str = "fixed-input",
    key=None,
) -> loop.Iteration:
    """The network fit of ``decompose`` as an initial state and a step, to run, warm-start or
    stop as one wishes.

    The iteration that ``decompose`` runs (same arguments and equations): its state is
    ``(params, adam_state, m̃, ṽ, c, t, losses)``, the network's parameters (``(z₀, layers)`` with
    the fixed-input first layer, ``(A⁽⁰⁾, b⁽⁰⁾, layers)`` with the dense one), optax's Adam state,
    the first layer's own Adam moments, its accumulated gradient steps (for ‖Θ‖), the last step
    length and the last ``window`` losses; its diagnostics ``loss``, ``grad_norm``, ``step``,
    ``mean_prev`` (the mean the ``tol`` rule compares with), ``j`` (the step index) and, except
    for Adam with the fixed-input layer, ``param_norm``, all taken before the step. So

        it = decompose_iteration(Σ, k, ..., max_iter=m)
        it.result(loop.run(it, max_iter=m))
            == decompose(Σ, k, ..., max_iter=m, throw=False)

    ``max_iter`` stays an argument: the ``lr_end`` schedule decays over it (give
    ``lowrank_jax.loop.run`` the same budget); without ``lr_end`` it is unused.

    Args:
      Sigma: (n, n) symmetric (to 1e-6 · max|Σ|), finite.
      rank: k, 1 ≤ k ≤ n (static).
      hidden: the hidden widths ℓ₁, …, ℓ_m, positive integers (an int is one layer); default the
        authors' (1000, 200, 200, 200).
      activation: "relu" (default), "tanh", "logistic" or "arctan".
      loss: "l1" (default), "huber" or "logcosh".
      eps: ε > 0, the smoothing width of "huber" and "logcosh" (array, traced), default 1e-2.
      optimizer: "adam" (default), "gd", "gd-sqrt" or "armijo".
      lr: the step size > 0 (array, traced), default 1e-4.
      lr_end: with "adam" or "gd", decay the step geometrically from ``lr`` to ``lr_end`` > 0 over
        ``max_iter`` steps; default None, a constant step.
      max_iter: the steps the ``lr_end`` schedule spans, a positive integer (static), default 4000.
      tol: ``it.stop`` holds when |φⱼ − m| ≤ tol · |m| with m the mean of the previous ``window``
        losses (tol ≥ 0), default 1e-6; None disables that part of the rule.
      grad_tol: ``it.stop`` also holds once ‖∇φ‖ ≤ grad_tol (≥ 0); default None, disabled. The
        rule holds too where the Goldstein–Armijo search found no step (a step of 0).
      window: w, the number of previous losses averaged by the ``tol`` rule, default 10.
      armijo: (α, β) with 0 < α < β < 1 of the Goldstein–Armijo test, default (0.1, 0.9).
      order: "triu" (default, the paper's h) or "tril" (the authors' code's).
      first_layer: "fixed-input" (default) or "dense".
      key: ``jax.random`` key or int seed of the initialisation (traced), default key(0).

    Returns:
      A ``lowrank_jax.loop.Iteration`` whose ``result`` gives a ``Decomposition`` (no
      exception on failure: read its ``status``, or pass it to
      ``lowrank_jax.result.finish``).

    Example:
        ```python
        import numpy as np
        from lowrank_jax import covariance, loop

        rng = np.random.default_rng(0)
        M0 = rng.normal(size=(20, 3))
        Sigma = M0 @ M0.T + np.diag(rng.uniform(0.5, 1.0, 20))
        it = covariance.decompose_iteration(Sigma, 3, hidden=(32,), lr=1e-2, tol=None)
        first = loop.run(it, max_iter=200)  # 200 steps, then 200 more
        rest = loop.run(it._replace(state=first.state), max_iter=200, start=200)
        print(first.final["loss"], rest.final["loss"])  # the loss falls
        ```
    """
    alpha, beta = armijo
    return _decompose_iteration(
        Sigma,
        lr,
        lr_end,
        eps,
        tol,
        grad_tol,
        key,
        rank=rank,
        hidden=hidden,
        act=activation,
        loss=loss,
        optimizer=optimizer,
        max_iter=max_iter,
        window=window,
        alpha=alpha,
        beta=beta,
        order=order,
        first_layer=first_layer,
    )


def _armijo_pair(armijo) -> tuple[float, float]:
    """``armijo`` as two Python floats (α, β) with 0 < α < β < 1, or ``ValueError``/``TypeError``
    naming it: a scalar or a triple failed inside the unpacking ("'float' object is not iterable",
    "too many values to unpack")."""
    if (
        isinstance(armijo, (str, bytes))
        or not hasattr(armijo, "__iter__")
        or getattr(armijo, "ndim", 1) != 1
        or len(pair := tuple(armijo)) != 2
    ):
        raise ValueError(f"armijo must be a pair (α, β) with 0 < α < β < 1, got {armijo!r}")
    for (
        v
    ) in pair:  # real finite scalars (signs: the caller's order check); Python values kept below
        _checks.as_hyper(v, "armijo", ndim=0, nonnegative=False)
    alpha, beta = float(pair[0]), float(pair[1])
    if not 0 < alpha < beta < 1:
        raise ValueError(f"armijo = (α, β) needs 0 < α < β < 1, got {armijo}")
    return alpha, beta


def _tree_sq(t):
    return sum(jnp.sum(v * v) for v in jax.tree.leaves(eqx.filter(t, eqx.is_inexact_array)))


_CHANNEL = "covariance"  # progress channel of decompose's bar


def _decompose_iteration(
    Sigma,
    lr,
    lr_end,
    eps,
    tol,
    grad_tol,
    key,
    *,
    rank,
    hidden,
    act,
    loss,
    optimizer,
    max_iter,
    window,
    alpha,
    beta,
    order,
    first_layer,
) -> loop.Iteration:
    n, dtype = Sigma.shape[0], Sigma.dtype
    x = half_vec(Sigma, order)
    net0, A0_sq, A0x = init_network(key, x, n, rank, hidden, act, dtype)
    xx = jnp.dot(x, x) + 1.0  # ‖x̃‖², x̃ = [x; 1]
    xt = jnp.concatenate([x, jnp.ones(1, dtype)])
    u_stats = _input_stats(xt)
    dense = first_layer == "dense"
    track_pnorm = dense or optimizer != "adam"

    # Parameters: dense (A0, b0, layers) or fixed-input (z0, layers); φ and its gradient for each.
    params0: tuple
    if dense:
        params0 = (
            dense_first_weight(key, x.shape[0], hidden[0], dtype),
            jnp.full(hidden[0], 0.01, dtype),
            net0.layers,
        )

        def net_of(p):
            return CovNet(p[0] @ x + p[1], p[2], act, n, rank)
    else:
        params0 = (net0.z0, net0.layers)

        def net_of(p):
            return CovNet(p[0], p[1], act, n, rank)

    def phi(p):
        return _loss_of_M(net_of(p)(), Sigma, loss, eps)

    value_and_grad = eqx.filter_value_and_grad(phi)

    def grad_sq(g):  # ‖∇φ(Θ)‖² in the network's own parameters
        if dense:
            return _tree_sq(g)
        return xx * jnp.sum(g[0] * g[0]) + _tree_sq(g[1])

    def gd_move(p, t, g):  # Θ − t∇φ, expressed on z0 in fixed-input mode
        if dense:
            return jax.tree.map(lambda a, b: a - t * b, p, g, is_leaf=lambda v: v is None)
        return (p[0] - t * xx * g[0], jax.tree.map(lambda a, b: a - t * b, p[1], g[1]))

    adam = optax.scale_by_adam(b1=0.9, b2=0.999, eps=_ADAM_EPS)
    opt_params = (lambda p: p) if dense else (lambda p: p[1])
    opt_state0 = adam.init(eqx.filter(opt_params(params0), eqx.is_inexact_array))
    first_m = jnp.zeros(hidden[0], dtype)  # m̃, ṽ of the first layer (fixed-input Adam)

    def step(j, state):
        p, ost, mt, vt, c, t_prev, prev = state
        f, g = value_and_grad(p)
        gn = jnp.sqrt(grad_sq(g))
        # j is an int32 counter, and int32 / int is float32 in JAX: the exponent in Σ's dtype keeps
        # a float64 schedule exact (float32 would put it off by ~1e-7).
        lr_j = (
            lr if lr_end is None else lr * (lr_end / lr) ** (j.astype(dtype) / max(max_iter - 1, 1))
        )
        if optimizer == "adam":
            upd, ost = adam.update(eqx.filter(opt_params(g), eqx.is_inexact_array), ost)
            upd = jax.tree.map(lambda u: -lr_j * u, upd)
            if dense:
                p_new = eqx.apply_updates(p, upd)
            else:
                count = (j + 1).astype(dtype)
                mt = 0.9 * mt + 0.1 * g[0]
                vt = 0.999 * vt + 0.001 * g[0] * g[0]
                mhat, vhat = mt / (1 - 0.9**count), vt / (1 - 0.999**count)
                dz = -lr_j * mhat * _adam_row_sums(jnp.sqrt(vhat), u_stats)
                p_new = (p[0] + dz, eqx.apply_updates(p[1], upd))
            t = lr_j
        elif optimizer in ("gd", "gd-sqrt"):
            t = lr_j if optimizer == "gd" else lr / jnp.sqrt(j + 1.0)
            p_new = gd_move(p, t, g)
        else:
            t = _goldstein_armijo(
                lambda t: phi(gd_move(p, t, g)), f, gn * gn, 2 * t_prev, alpha, beta
            )
            p_new = gd_move(p, t, g)  # t = 0 when no step passes Armijo: the run stops below
            t_prev = jnp.where(t > 0, t, t_prev)
        if not dense and optimizer != "adam":
            c = c + t * g[0]  # A0 = A0₀ − c xᵀ, b0 = 0.01 − c
        if dense:
            pnorm = jnp.sqrt(_tree_sq(p))
        elif optimizer == "adam":
            pnorm = jnp.full((), jnp.nan, dtype)
        else:
            c_prev = c - t * g[0]
            a_sq = A0_sq - 2 * jnp.dot(c_prev, A0x) + jnp.dot(c_prev, c_prev) * (xx - 1.0)
            pnorm = jnp.sqrt(a_sq + jnp.sum((0.01 - c_prev) ** 2) + _tree_sq(p[1]))
        # the mean of the previous `window` losses (0 until `window` losses exist: the rule waits
        # for j ≥ window, and a NaN here would read as a diverged run)
        mean_prev = jnp.where(j >= window, jnp.mean(prev), 0.0)
        prev = jnp.roll(prev, -1).at[-1].set(f)
        keep = t if optimizer != "armijo" else t_prev
        diag = {"loss": f, "grad_norm": gn, "step": t, "mean_prev": mean_prev, "j": j}
        if track_pnorm:  # not for Adam with the fixed-input layer: NaN, which reads as divergence
            diag["param_norm"] = pnorm
        return (p_new, ost, mt, vt, c, keep, prev), diag

    def stop(state, diag):
        f, mean_prev = diag["loss"], diag["mean_prev"]
        done = diag["step"] <= 0  # the line search found no decrease above φ's rounding
        if tol is not None:
            done |= (diag["j"] >= window) & (jnp.abs(f - mean_prev) <= tol * jnp.abs(mean_prev))
        if grad_tol is not None:
            done |= diag["grad_norm"] <= grad_tol
        return done

    # Divergence, judged on the parameters after the step and on the loss before it (GROWTH_LIMIT).
    bound = GROWTH_LIMIT * jnp.maximum(phi(params0), jnp.sum(jnp.abs(Sigma)))

    def diverged(state, diag):
        return loop.non_finite(state[0]) | ~(jnp.abs(diag["loss"]) <= bound)

    state0 = (
        params0,
        opt_state0,
        first_m,
        first_m,
        jnp.zeros(hidden[0], dtype),
        lr / 2,
        jnp.zeros(window, dtype),
    )

    def result(res):
        net = net_of(res.state[0])
        M = net()
        L = M @ M.T
        budget = res.history["loss"].shape[0]  # the run's max_iter
        valid = jnp.arange(budget) < res.n_iter
        gn = res.history["grad_norm"]
        grad_min = jnp.where(valid, jax.lax.cummin(jnp.where(jnp.isnan(gn), jnp.inf, gn)), jnp.nan)
        if track_pnorm:
            pn = res.history["param_norm"]
            param_max = jax.lax.cummax(jnp.where(jnp.isnan(pn), -jnp.inf, pn))
            param_max = jnp.where(valid & jnp.isfinite(param_max), param_max, jnp.nan)
        else:
            param_max = jnp.full(budget, jnp.nan, dtype)
        history = {
            "loss": res.history["loss"],
            "grad_norm": gn,
            "grad_norm_min": grad_min,
            "param_norm_max": param_max,
            "step": res.history["step"],
        }
        last = jnp.maximum(res.n_iter - 1, 0)
        return Decomposition(
            n_iter=res.n_iter,
            status=res.status,
            history=history,
            loss=res.final["loss"],
            grad_norm=res.final["grad_norm"],
            grad_norm_min=grad_min[last],
            param_norm_max=param_max[last],
            step=res.final["step"],
            M=M,
            L=L,
            S=Sigma - L,
            net=net,
        )

    # Traced hyperparameters that broke their rule arrive as NaN (declared in decompose).
    invalid = _checks.any_nan(lr, lr_end, eps, tol, grad_tol)
    return loop.iteration(
        state0, step, stop=stop, diverged=diverged, invalid=invalid, result=result
    )


@functools.partial(
    jax.jit,
    static_argnames=(
        "rank",
        "hidden",
        "act",
        "loss",
        "optimizer",
        "max_iter",
        "window",
        "alpha",
        "beta",
        "order",
        "first_layer",
        "progress",
    ),
)
def _decompose(Sigma, *args, max_iter, progress=None, **static):
    it = _decompose_iteration(Sigma, *args, max_iter=max_iter, **static)
    return it.result(loop.run(it, max_iter=max_iter, progress=progress))


_ADAM_EPS = 1e-8
_FEW = 32


def _input_stats(xt):
    """Sums of the fixed input needed by the first layer's Adam step: |x̃|, Σ|x̃_j|, Σ_{x̃_j≠0}
    1/|x̃_j|, and the number of nonzero entries."""
    u = jnp.abs(xt)
    nz = u > 0
    return (
        u,
        jnp.sum(u),
        jnp.sum(jnp.where(nz, 1.0 / jnp.where(nz, u, 1.0), 0.0)),
        jnp.sum(nz).astype(xt.dtype),
    )


def _adam_row_sums(a, stats):
    """F_i = Σ_j u_j² / (a_i u_j + ε) for u = |x̃| (the first layer's Adam step on z₀, times m̂_i).

    Exact identity u²/(au + ε) = u/a − ε/a² + ε²/(a²(au + ε)) (also for u = 0) gives
    F_i = S₁/a_i − N ε/a_i² + R_i with N the nonzero count and 0 ≤ R_i ≤ ε² Σ_{u≠0} u_j⁻¹ / a_i³.
    When every R_i is below the rounding of F_i the O(ℓ₁) closed form is exact to working precision;
    the units where it is not (tiny second moments) get the direct O(n²/2) sum, 32 units per round.
    Units with a_i = 0 (never a gradient) get 0 — their m̂_i is 0 too.
    """
    u, s1, inv_sum, nnz = stats
    eps = _ADAM_EPS
    live = a > 0
    a_safe = jnp.where(live, a, 1.0)
    closed = s1 / a_safe - nnz * eps / a_safe**2
    remainder = eps * eps * inv_sum / a_safe**3
    excess = jnp.where(
        live, remainder / (jnp.finfo(a.dtype).eps * jnp.abs(closed) + jnp.finfo(a.dtype).tiny), 0.0
    )
    need = excess > 1.0

    def direct(rows):
        return jnp.sum(u * u / (a_safe[rows, None] * u[None, :] + eps), axis=1)

    # Units with a tiny second moment (ReLU units that rarely fire) get direct sums, 32 at a time,
    # worst first (a while loop, not a cond: under vmap a cond would evaluate the O(ℓ₁ n²) branch).
    few = min(_FEW, a.shape[0])

    def patch(state):
        F, need = state
        _, worst = jax.lax.top_k(jnp.where(need, excess, -1.0), few)
        F = F.at[worst].set(jnp.where(need[worst], direct(worst), F[worst]))
        return F, need.at[worst].set(False)

    F, _ = jax.lax.while_loop(lambda st: jnp.any(st[1]), patch, (closed, need))
    return jnp.where(live, F, 0.0)


def _goldstein_armijo(phi_at, f0, g_sq, t0, alpha, beta, max_trials: int = 40):
    """A step t with α t‖g‖² ≤ φ(0) − φ(t) ≤ β t‖g‖² (Goldstein–Armijo), by bracketing from t0:
    too long (Armijo fails) halves towards the lower end, too short (Goldstein fails) doubles or
    bisects. Until some step passes Armijo (lo = 0) the halving goes on past ``max_trials`` as long
    as the last trial changed φ by more than its rounding (or made it non-finite), so a first lr far
    too large (1e12) does not end the search at 0 and stop the solver on its untrained start.
    Where every trial's change is rounding, 0 is returned and the solver stops."""
    rounding = 32 * jnp.finfo(f0.dtype).eps * jnp.abs(f0)

    def cond(s):
        t, lo, hi, k, ok, dec = s
        far = (lo == 0) & (t > 0) & jnp.logical_not(jnp.abs(dec) <= rounding)  # NaN counts as far
        return jnp.logical_not(ok) & ((k < max_trials) | far)

    def body(s):
        t, lo, hi, k, _, _ = s
        dec = f0 - phi_at(t)
        too_long = jnp.logical_not(dec >= alpha * t * g_sq)
        too_short = dec > beta * t * g_sq
        hi = jnp.where(too_long, t, hi)
        lo = jnp.where(too_short & jnp.logical_not(too_long), t, lo)
        t_new = jnp.where(jnp.isfinite(hi), 0.5 * (lo + hi), 2 * t)
        ok = jnp.logical_not(too_long | too_short)
        return jnp.where(ok, t, t_new), lo, hi, k + 1, ok, dec

    s0 = (
        t0,
        jnp.zeros_like(t0),
        jnp.full_like(t0, jnp.inf),
        0,
        jnp.zeros((), bool),
        jnp.zeros_like(f0),
    )
    t, lo, hi, _, ok, _ = jax.lax.while_loop(cond, body, s0)
    # Out of trials: the last step known to pass Armijo (lo), else 0 — no step decreases φ by more
    # than its rounding, and the solver stops instead of spending 40 trials per remaining iteration.
    return jnp.where(ok, t, lo)


__all__ = [
    "ACTIVATIONS",
    "CovNet",
    "Decomposition",
    "LOSSES",
    "OPTIMIZERS",
    "activation",
    "decompose",
    "decompose_iteration",
    "grad_of_M",
    "half_vec",
    "init_network",
    "loss_of_M",
    "smooth_abs",
    "smooth_abs_grad",
]
