"""Rescaled softmax regression: loss, closed-form gradient and Hessian, the theorem's helpers.

Rescaled softmax regression (Def. 1.2, with its exp, cosh and sinh variants) of Gao, Song, Yin,
"An Iterative Algorithm for Rescaled Hyperbolic Functions Regression". For
A ∈ ℝⁿˣᵈ, b, w ∈ ℝⁿ and u ∈ {exp, cosh, sinh} of z = Ax entrywise, with v = u′ (exp → exp,
cosh → sinh, sinh → cosh; u″ = u):

    α = ⟨u, 1⟩,   c = u − α b,   L(x) = ½‖c‖² + ½‖diag(w) A x‖²,
    ∇L = Aᵀ(c∘v − ⟨b, c⟩ v + w²∘z),
    ∇²L = Aᵀ(B + W²)A,
    B = diag(v∘v) − (v∘b)vᵀ − v(v∘b)ᵀ + ‖b‖² vvᵀ + diag(c∘u) − ⟨c, b⟩ diag(u).

The Hessian is assembled without any n × n matrix, in O(n d²) (dense A) or O(nnz · q) (row-sparse):

    H = Aᵀ diag(s) A − r pᵀ − p rᵀ + ‖b‖² p pᵀ,
    s = v∘v + c∘u − ⟨c,b⟩u + w²,   p = Aᵀv,   r = Aᵀ(v∘b).

Erratum pinned by the tests: the paper's Def. C.2 prints the rank-one terms of B with u instead of
v; that is exact for exp only (v = u) and off by O(1) for cosh and sinh. B = B_rank + B_diag with
B_rank = −v(v∘b)ᵀ − (v∘b)vᵀ + ‖b‖² vvᵀ and B_diag = diag(v∘v + c∘u − ⟨c,b⟩u)
(``curvature_split``).

Trivial minimisers: for sinh, x = 0 gives u = 0, α = 0, c = 0 and L = 0 ≤ L(x), so
x* = 0 always (unique when every w_i > 0 and A has full column rank: with some w_i = 0 a row
whose u-term vanishes can leave other minimisers); cosh's loss is even, L(x) = L(−x), and
x = 0 is always stationary (v(0) = sinh 0 = 0). Only exp has a non-trivial x* in general.

Overflow: exp/cosh/sinh of |Ax| beyond ~88 (float32) or ~709 (float64) overflow, and the loss
squares them (α² ~ n² e^(2‖Ax‖∞)). These are plain functions, not iterative solvers: an overflow
comes back as inf/NaN, the same called directly and under
``jit``/``vmap``/``lowrank_jax.sweep.run`` (a ``vmap`` over x values that overflows at some of
them keeps the others). Nothing maps a non-finite
value to a finite one: ``psd_certificate`` of an overflowed Hessian is NaN, not 0, and
``icl_shift`` returns the non-finite shift instead of judging an overflowed α. Compare ‖Ax‖∞
with ``overflow_limit`` to stay in range; ``lowrank_jax.regression.newton_solve`` refuses a
concrete start whose loss overflows (``ValueError`` naming the rows of Ax and the limit).
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import _checks, linalg
from lowrank_jax.regression import design

KINDS = ("exp", "cosh", "sinh")


def _uv(kind: str, z):
    if kind == "exp":
        e = jnp.exp(z)
        return e, e
    if kind == "cosh":
        return jnp.cosh(z), jnp.sinh(z)
    if kind == "sinh":
        return jnp.sinh(z), jnp.cosh(z)
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")


# The arguments of a problem (A, b, w, x), declared once for every public function that takes one
# (``lowrank_jax._checks.validate``): ``kind`` one of ``KINDS``, A a design
# (``lowrank_jax.regression.design.as_design``), b and x real vectors in A's dtype whose lengths
# are the rules of ``length``, w non-negative (``weights``).
KIND = _checks.Choice(*KINDS)
VECTOR = _checks.Hyper(ndim=1, low=None, dtype_of="A")


def weights(value, name: str, args: dict) -> jax.Array:
    """The regulariser's weights w ≥ 0 in A's dtype: a scalar for every row, or one per row of A
    (``args["A"]``). A scalar stays a scalar: every formula takes w through w∘z and w², which
    broadcast, and a concrete w stays concrete for the rules that follow.

    Args:
      value: the weights, a scalar or (n,).
      name: the argument's name, for the messages.
      args: the arguments of the declared function (``args["A"]`` the design).

    Returns:
      w in A's dtype, a scalar or (n,).
    """
    n = args["A"].shape[0]
    w = _checks.as_hyper(value, name, dtype=args["A"].dtype)
    if w.shape not in ((), (n,)):
        raise ValueError(
            f"{name} must be a scalar or have length n = {n}, got shape {tuple(w.shape)}"
        )
    return w


WEIGHTS = _checks.Convert(weights)


def length(arg: str, axis: int, label: str | None = None) -> _checks.Rule:
    """The rule that the vector ``arg`` (when given) has one entry per row (``axis`` 0) or column
    (``axis`` 1) of A, named in its message as ``arg`` or as the argument ``label`` holds. Shapes
    only: checked on traced arguments too.

    Args:
      arg: the name of the vector argument.
      axis: 0 (one entry per row of A) or 1 (one per column).
      label: the name of the argument holding the name to report, or None (``arg``).

    Returns:
      The ``lowrank_jax._checks.Rule``.
    """
    size, of = ("n", "rows") if axis == 0 else ("d", "columns")

    def message(a) -> str:
        name = a[label] if label else arg
        return (
            f"{name} must have length {size} = {a['A'].shape[axis]} ({of} of A), got "
            f"{a[arg].shape[0]}"
        )

    return _checks.Rule(
        lambda a: a[arg] is None or a[arg].shape[0] == a["A"].shape[axis],
        _checks.Message(message),
        uses=(),
    )


def problem(x: str | None = "x", *, with_w: bool = True):
    """The declaration of a problem's arguments: (rules, specs) for ``kind``, ``A``, ``b``, ``w``
    (unless ``with_w`` is False) and the point named ``x`` (None: no point).

    Args:
      x: the name of the point argument, or None (default ``"x"``).
      with_w: whether the weights ``w`` are declared (default True).

    Returns:
      ``(rules, specs)``: a tuple of rules and a dict of specs, for ``_checks.validate``.
    """
    specs: dict[str, _checks.Arg] = {"kind": KIND, "A": design.DESIGN, "b": VECTOR}
    if with_w:
        specs["w"] = WEIGHTS
    rules = [length("b", 0)]
    if x is not None:
        specs[x] = VECTOR
        rules.append(length(x, 1))
    return tuple(rules), specs


_PROBLEM_RULES, _PROBLEM = problem()
_CURVE_RULES, _CURVE = problem(with_w=False)


@_checks.validate(
    length("b", 0),
    length("x", 1, label="x_name"),
    kind=KIND,
    A=design.DESIGN,
    b=VECTOR,
    w=WEIGHTS,
    x=_checks.Convert(lambda v, _, a: VECTOR.check(v, a["x_name"], a), optional=True),
)
def check_problem(A, b, w, x=None, *, kind: str = "exp", x_name: str = "x"):
    """Validate a problem (A, b, w[, x]) at the public boundary and bring it to one form.

    Checks the shapes (b and w of length n, x of length d), finiteness, w ≥ 0 and ``kind``, and
    raises ``ValueError`` naming the argument otherwise.

    Args:
      A: (n, d) design: dense, ``BCOO``, ``scipy.sparse`` or
        ``lowrank_jax.regression.design.RowSparse``.
      b: (n,) target.
      w: (n,) non-negative weights, or a scalar for every row.
      x: (d,) point (default None: not checked).
      kind: "exp" (default), "cosh" or "sinh".
      x_name: the caller's name for x in the messages (default "x").

    Returns:
      (A, b, w, x): A from ``lowrank_jax.regression.design.as_design``, b (n,), w broadcast to
      (n,), and x (d,) or None, all in A's float dtype.
    """
    return A, b, jnp.broadcast_to(w, (A.shape[0],)), x


@_checks.validate(n=_checks.Count())
def overflow_limit(dtype, n: int) -> float:
    """The largest ‖Ax‖∞ at which the loss, gradient and Hessian stay finite (with margin).

        limit = ½ log(max float) − log(n + 1),

    since the loss squares α = Σu ≤ n e^(‖Ax‖∞).

    Args:
      dtype: the float dtype of the computation.
      n: rows of A.

    Returns:
      float, the limit.
    """
    return 0.5 * math.log(float(jnp.finfo(dtype).max)) - math.log(n + 1.0)


def _numpy_matvec(A, x) -> np.ndarray:
    """A x in NumPy, for the messages of rules (formatted outside any trace, from concrete
    arguments)."""
    x = np.asarray(x)
    if isinstance(A, design.RowSparse):
        return np.sum(np.asarray(A.vals) * x[np.asarray(A.cols)], axis=1)
    return np.asarray(A) @ x


def _overflow_message(z, what: str) -> str:
    """Why ``what`` is not finite: the rows of z = Ax beyond ``overflow_limit`` or, where Ax is
    in range, the scale of A, b or w."""
    zz = np.abs(np.asarray(z))
    limit = overflow_limit(zz.dtype, zz.shape[-1])
    rows = np.nonzero(zz > limit)[-1]
    if not rows.size:  # Ax is within range: the size of A (in AᵀDA), b or w overflowed
        return (
            f"{what} overflows in {zz.dtype} although |Ax| ≤ {zz.max():.1f} is within the safe "
            f"{limit:.1f}: the entries of A, b or w are too large for the dtype (rescale them"
            + (")" if zz.dtype == np.float64 else ", or use float64)")
        )
    return (
        f"{what} overflows in {zz.dtype}: |Ax| reaches {zz.max():.1f}, beyond the safe "
        f"{limit:.1f} at rows {rows[:10].tolist()}{' …' if rows.size > 10 else ''} "
        f"({rows.size} rows). "
        + (
            "Rescale A or x."
            if zz.dtype == np.float64
            else "Pass A, b and x as float64 (x64 is on) or rescale A or x."
            if jax.config.jax_enable_x64  # type: ignore[attr-defined]
            else "Use float64 (jax.config.update('jax_enable_x64', True)) or rescale A or x."
        )
    )


def finite_loss(x: str) -> _checks.Rule:
    """The rule that the loss at the point ``x`` (with the arguments ``A``, ``b``, ``w``, ``kind``)
    is finite: a solver's start. Concrete, a start whose loss overflows raises ``ValueError`` naming
    the rows of Ax beyond the safe limit (or the scale of A, b or w); traced, the start becomes NaN
    and the run reports DIVERGED at its first step. The plain functions of this module return the
    inf/NaN instead (module docstring).

    Args:
      x: the name of the point argument.

    Returns:
      The ``lowrank_jax._checks.Rule``.
    """
    return _checks.Rule(
        lambda a: jnp.isfinite(_loss(a[x], a["A"], a["b"], a["w"], a["kind"])[0]),
        _checks.Message(
            lambda a: _overflow_message(_numpy_matvec(a["A"], a[x]), f"the loss at {x}")
        ),
        uses=("A", "b", "w", x),
        poison=x,
        compiled=True,
    )


class Parts(eqx.Module):
    """The pieces of the loss at one x, shared by the loss, gradient and Hessian.

    Attributes:
      z: (n,) z = Ax.
      u: (n,) u(z), entrywise.
      v: (n,) v(z) = u′(z), entrywise.
      alpha: scalar α = ⟨u, 1⟩.
      c: (n,) c = u − α b.
    """

    z: jax.Array
    u: jax.Array
    v: jax.Array
    alpha: jax.Array
    c: jax.Array


@_checks.validate(*_CURVE_RULES, **_CURVE)
def parts(x, A, b, kind: str = "exp") -> Parts:
    """The pieces of the loss at x: z = Ax, u(z), v(z) = u′(z), α = ⟨u, 1⟩ and c = u − α b.

    Args:
      x: (d,) point.
      A: (n, d) design, dense or ``lowrank_jax.regression.design.RowSparse``.
      b: (n,) target.
      kind: "exp" (default), "cosh" or "sinh".

    Returns:
      ``Parts`` at x.
    """
    return _parts(x, A, b, kind)


def _parts(x, A, b, kind: str) -> Parts:
    return parts_from_z(design.matvec(A, x), b, kind)


def parts_from_z(z, b, kind: str = "exp") -> Parts:
    """The pieces of the loss from z = Ax, entrywise (no pass over A).

    Args:
      z: (n,) z = Ax.
      b: (n,) target.
      kind: "exp" (default), "cosh" or "sinh".

    Returns:
      ``Parts`` with u = u(z), v = u′(z), α = ⟨u, 1⟩ and c = u − α b.
    """
    u, v = _uv(kind, z)
    alpha = jnp.sum(u)
    return Parts(z, u, v, alpha, u - alpha * b)


def _b_diag(p: Parts, b):
    """B_diag = v∘v + c∘u − ⟨c, b⟩u (the diagonal of B; Def. C.2 with q folded in)."""
    return p.v * p.v + _b_diag_beyond_gauss_newton(p, b)


def _b_diag_beyond_gauss_newton(p: Parts, b):
    """B_diag − v∘v = c∘u − ⟨c, b⟩u, formed directly (B_diag − v∘v keeps only a few digits of it
    where c is small against v: near a fit)."""
    return p.c * p.u - jnp.dot(p.c, b) * p.u


def _loss_at(p: Parts, w):
    """L from the pieces at x: ½‖c‖² + ½‖w∘z‖² (no pass over A)."""
    return 0.5 * jnp.sum(p.c * p.c) + 0.5 * jnp.sum((w * p.z) ** 2)


def _gradient_at(p: Parts, A, b, w):
    """∇L = Aᵀ(c∘v − ⟨b, c⟩v + w²∘z) from the pieces at x (one pass over A)."""
    return design.rmatvec(A, p.c * p.v - jnp.dot(b, p.c) * p.v + w * w * p.z)


def _loss(x, A, b, w, kind) -> tuple[jax.Array, jax.Array]:
    p = _parts(x, A, b, kind)
    return _loss_at(p, w), p.z


def _gradient(x, A, b, w, kind):
    p = _parts(x, A, b, kind)
    return _gradient_at(p, A, b, w), p.z


def _hessian(x, A, b, w, kind):
    p = _parts(x, A, b, kind)
    return _hessian_at(p, A, b, w), p.z


def _hessian_at(p: Parts, A, b, w):
    """The Hessian from the pieces at x (no new pass over A for z).

    H = Aᵀ diag(s) A − r pᵀ − p rᵀ + ‖b‖² p pᵀ with s = B_diag + w², p = Aᵀv, r = Aᵀ(v∘b). Its
    rank-one part is a Gauss–Newton term: with J = diag(v)A − b pᵀ (row i: v_i a_i − b_i p),

        H = JᵀJ + Aᵀ diag(s − v∘v) A.

    The expanded form adds and subtracts terms far larger than JᵀJ when the rows v_i a_i are close
    to b_i p (an intercept column, b near uniform, small x): in float32 it lost 4 digits there and
    H₀₀ came out −0.0039 where it is +0.0029 (n = 5000). So a dense A below float64 forms J (an
    n × d array) and takes both Gram products, twice the flops; float64, where the same loss leaves
    12 digits, and a sparse A (whose J would be dense) keep the expanded form."""
    pv = design.rmatvec(A, p.v)
    if not isinstance(A, design.RowSparse) and jnp.finfo(A.dtype).bits < 64:
        J = p.v[:, None] * A - b[:, None] * pv[None, :]
        return J.T @ J + design.gram(A, _b_diag_beyond_gauss_newton(p, b) + w * w)
    s = _b_diag(p, b) + w * w
    rv = design.rmatvec(A, p.v * b)
    return (
        design.gram(A, s)
        - jnp.outer(rv, pv)
        - jnp.outer(pv, rv)
        + jnp.dot(b, b) * jnp.outer(pv, pv)
    )


@_checks.validate(*_PROBLEM_RULES, **_PROBLEM)
@_checks.compiled
def loss(x, A, b, w, kind: str = "exp"):
    """The rescaled softmax regression loss at x.

        L(x) = ½‖u(Ax) − ⟨u(Ax), 1⟩ b‖² + ½‖diag(w) A x‖²,

    the regularised problem of Gao, Song, Yin, Eq. (2): L_u (Def. 3.3) + L_reg (Def. 3.6).

    Args:
      x: (d,) point (the other functions of this module take the same arguments).
      A: (n, d) design: dense, ``BCOO``, ``scipy.sparse`` or
        ``lowrank_jax.regression.design.RowSparse``.
      b: (n,) target (the paper's b lies on the simplex).
      w: (n,) non-negative weights of the regulariser, or a scalar for every row.
      kind: the function u applied entrywise to z = Ax: "exp" (default), "cosh" or "sinh".

    Returns:
      Scalar L(x) (inf/NaN where u(Ax) overflows; see ``overflow_limit``).
    """
    return _loss(x, A, b, w, kind)[0]


@_checks.validate(*_PROBLEM_RULES, **_PROBLEM)
@_checks.compiled
def gradient(x, A, b, w, kind: str = "exp"):
    """The closed-form gradient of the loss at x.

        ∇L(x) = Aᵀ(c∘v − ⟨b, c⟩ v + w²∘Ax),   u = u(Ax), v = u′(Ax), c = u − ⟨u, 1⟩ b

    (module docstring), one pass over A.

    Args:
      x: (d,) point.
      A: (n, d) design, as in ``loss``.
      b: (n,) target.
      w: (n,) non-negative weights, or a scalar.
      kind: "exp" (default), "cosh" or "sinh".

    Returns:
      (d,) array ∇L(x).
    """
    return _gradient(x, A, b, w, kind)[0]


@_checks.validate(*_PROBLEM_RULES, **_PROBLEM)
@_checks.compiled
def hessian(x, A, b, w, kind: str = "exp"):
    """The closed-form Hessian of the loss at x, assembled in O(n d²) without n × n matrices.

        ∇²L(x) = Aᵀ(B + W²)A = Aᵀ diag(s) A − r pᵀ − p rᵀ + ‖b‖² p pᵀ,
        s = v∘v + c∘u − ⟨c, b⟩u + w²,   p = Aᵀv,   r = Aᵀ(v∘b)

    (module docstring; B with v in its rank-one terms, the erratum to Def. C.2).

    Args:
      x: (d,) point.
      A: (n, d) design, as in ``loss``.
      b: (n,) target.
      w: (n,) non-negative weights, or a scalar.
      kind: "exp" (default), "cosh" or "sinh".

    Returns:
      (d, d) array ∇²L(x).

    Example:
        ```python
        import jax, jax.numpy as jnp
        from lowrank_jax import regression

        A = jax.random.normal(jax.random.key(0), (50, 4)) / 7
        b = jax.random.dirichlet(jax.random.key(1), jnp.ones(50))
        x, w = jnp.full(4, 0.1), jnp.full(50, 2.0)
        H = regression.hessian(x, A, b, w, "cosh")               # closed form, O(n d²)
        H_ad = jax.hessian(regression.loss)(x, A, b, w, "cosh")  # autodiff of L
        err = jnp.max(jnp.abs(H - H_ad)) / jnp.max(jnp.abs(H))
        print(err)  # ≈ 1e-7: float32 rounding
        ```
    """
    return _hessian(x, A, b, w, kind)[0]


@_checks.validate(*_PROBLEM_RULES, **_PROBLEM)
@_checks.compiled
def diagonal_curvature(x, A, b, w, kind: str = "exp"):
    """The diagonal curvature D = B_diag + W² of Algorithm 1, line 5, at x.

        D = v∘v + c∘u − ⟨c, b⟩u + w²,

    so that Aᵀ diag(D) A is the Hessian with the rank-one terms of B dropped.

    Args:
      x: (d,) point.
      A: (n, d) design, as in ``loss``.
      b: (n,) target.
      w: (n,) non-negative weights, or a scalar.
      kind: "exp" (default), "cosh" or "sinh".

    Returns:
      (n,) array D.
    """
    p = _parts(x, A, b, kind)
    return _b_diag(p, b) + w * w


@_checks.validate(*_CURVE_RULES, **_CURVE)
def curvature_split(x, A, b, kind: str = "exp"):
    """The split B = B_rank + diag(B_diag) of the loss's curvature at x (Def. C.2, v-based).

        B_rank = −v(v∘b)ᵀ − (v∘b)vᵀ + ‖b‖² vvᵀ,   B_diag = v∘v + c∘u − ⟨c, b⟩u,

    with v in the rank-one terms (the erratum to Def. C.2). Forms n × n matrices: for checks on
    small problems.

    Args:
      x: (d,) point.
      A: (n, d) design, as in ``loss``.
      b: (n,) target.
      kind: "exp" (default), "cosh" or "sinh".

    Returns:
      (B_rank, B_diag): an (n, n) and an (n,) array.
    """
    p = _parts(x, A, b, kind)
    vb = p.v * b
    B_rank = -jnp.outer(p.v, vb) - jnp.outer(vb, p.v) + jnp.dot(b, b) * jnp.outer(p.v, p.v)
    return B_rank, _b_diag(p, b)


# -- the theorem's quantities ---------------------------------------------------------------------


def full_column_rank(what: str) -> _checks.Rule:
    """The theorem (Lemma C.4) needs σ_min(A) > 0, hence n ≥ d: the rule that refuses a wide A by
    name (shapes only).

    Args:
      what: the function's name, for the message.

    Returns:
      The ``lowrank_jax._checks.Rule``.
    """
    return _checks.Rule(
        lambda a: a["A"].shape[0] >= a["A"].shape[1],
        what + ": the theorem needs n >= d (A of full column rank, σ_min(A) > 0), got A of "
        "shape {A.shape}",
        uses=(),
    )


@_checks.validate(*_CURVE_RULES, full_column_rank("radius_R0"), **_CURVE)
def radius_R0(x, A, b, kind: str = "exp"):
    """The radius R₀ of Lemma C.3 at x, which enters the weight rule of Lemma C.4.

        R₀ = max{‖u‖, ‖v‖, ‖b‖, ‖c‖, 1}.

    The norms exist for any shape, but R₀ only enters the theorem's w (``weight_rule``), which
    also needs σ_min(A) > 0: like ``sigma_min`` and ``psd_certificate``, it refuses n < d
    (``ValueError``).

    Args:
      x: (d,) point.
      A: (n, d) design with n ≥ d, as in ``loss``.
      b: (n,) target.
      kind: "exp" (default), "cosh" or "sinh".

    Returns:
      Scalar R₀ ≥ 1.
    """
    p = _parts(x, A, b, kind)
    return jnp.max(
        jnp.stack(
            [
                jnp.linalg.norm(p.u),
                jnp.linalg.norm(p.v),
                jnp.linalg.norm(b),
                jnp.linalg.norm(p.c),
                jnp.ones((), p.u.dtype),
            ]
        )
    )


@_checks.validate(full_column_rank("sigma_min"), A=design.DESIGN)
def sigma_min(A):
    """The smallest singular value σ_min(A), 0 where A is rank-deficient to working precision.

    A value within rounding of 0, σ_min ≤ max(n, d)·ε·σ_max (the rank rule of
    ``numpy.linalg.matrix_rank``), is returned as 0, and ``weight_rule`` then refuses it rather
    than build w² ≈ l/σ² from rounding. The theorem requires full column rank: n < d is refused
    (``ValueError``).

    Args:
      A: (n, d) design with n ≥ d, as in ``loss`` (densified).

    Returns:
      Scalar σ_min(A) ≥ 0.
    """
    dense = A.todense() if isinstance(A, design.RowSparse) else A
    s = jnp.linalg.svd(dense, compute_uv=False)
    return jnp.where(linalg.above_rounding(s, max(dense.shape))[-1], s[-1], 0.0)


@_checks.validate(
    _checks.Rule(lambda a: a["part"] in (1, 2), "part must be 1 or 2, got {part}", uses=()),
    R0=_checks.Hyper(low=1),
    l=_checks.Hyper(low=0, low_open=True),
    sigma=_checks.Hyper(low=0, low_open=True),
)
def weight_rule(R0, l, sigma, *, part: int = 1):
    """The regularisation weight w of Lemma C.4, which makes the loss l-strongly convex.

        part 1:  w² = 10 R₀⁴ + l/σ_min²    (∇²L ⪰ l I),
        part 2:  w² = 200 R₀⁴ + l/σ_min²   (0.9(B + W²) ⪯ W² ⪯ 1.1(B + W²)).

    The paper's other printed versions of the condition (w_i instead of w_i², or 100 + l/σ²) are
    not used. The rule takes no A, so it cannot see n < d itself; there σ_min(A) = 0, ``sigma = 0``
    is refused here and ``sigma_min`` refuses the wide A. R0, l and sigma may be scalars or
    arrays that broadcast; traced (under ``vmap``), an entry out of range makes its w NaN.

    Args:
      R0: R₀ ≥ 1 (``radius_R0``).
      l: the curvature to certify, > 0.
      sigma: σ_min(A) > 0 (``sigma_min``).
      part: 1 (default) or 2, the part of Lemma C.4.

    Returns:
      The weight w (scalar, or the broadcast shape), the same for every row.
    """
    c = {1: 10.0, 2: 200.0}[part]
    return jnp.sqrt(c * R0**4 + l / sigma**2)


@_checks.validate(*_PROBLEM_RULES, full_column_rank("psd_certificate"), **_PROBLEM)
@_checks.compiled
def psd_certificate(x, A, b, w, kind: str = "exp"):
    """The smallest eigenvalue λ_min(∇²L(x)) of the Hessian, 0 where it is within rounding of 0.

    A positive value certifies strong convexity at x (compare with the l of ``weight_rule``).
    n < d is refused (``ValueError``): then ∇²L = Aᵀ(B + W²)A has rank ≤ n < d, its λ_min is 0 and
    only rounding decides the sign, so the value could never certify anything. The same holds for a
    tall A without full column rank, which the shape cannot show. H is formed from sums over A's n
    rows, so its rounding reaches about d·√n·ε·max|λ| (``linalg.gram_rounding_size``), not the
    d·ε·max|λ| of a matrix known to working precision: a λ_min below that cut-off is returned as 0,
    so that a singular H is not certified. An overflowed Hessian (inf/NaN entries) gives NaN.

    Args:
      x: (d,) point.
      A: (n, d) design with n ≥ d, as in ``loss``.
      b: (n,) target.
      w: (n,) non-negative weights, or a scalar.
      kind: "exp" (default), "cosh" or "sinh".

    Returns:
      Scalar λ_min(∇²L(x)) (0 within rounding of 0, NaN for an overflowed Hessian).
    """
    H, _ = _hessian(x, A, b, w, kind)
    lam = jnp.linalg.eigvalsh(H)
    n, d = A.shape
    certified = jnp.where(
        linalg.above_rounding(lam, linalg.gram_rounding_size(d, n))[0], lam[0], 0.0
    )
    # an overflowed H (inf/NaN entries) has no λ_min: NaN, not the 0 that the comparison gives
    return jnp.where(jnp.all(jnp.isfinite(H)), certified, jnp.nan)


# H̃ and H of the relative spectrum: real square matrices of one shape, H positive definite (a
# concrete H that is not is refused by name; a traced one becomes NaN, and so does the spectrum).
_SPECTRUM_RULES = (
    _checks.Rule(
        lambda a: a["H"].shape[0] == a["H"].shape[1] and a["H_approx"].shape == a["H"].shape,
        "H and H_approx must be square matrices of one shape, got {H.shape} and {H_approx.shape}",
        uses=(),
    ),
    _checks.Rule(
        lambda a: jnp.all(jnp.isfinite(jnp.linalg.cholesky(a["H"]))),
        "H must be symmetric positive definite (its Cholesky factorisation failed)",
        uses=("H",),
        poison="H",
    ),
)
_SPECTRUM = {"H_approx": _checks.Matrix(), "H": _checks.Matrix()}


@_checks.validate(*_SPECTRUM_RULES, **_SPECTRUM)
def relative_spectrum(H_approx, H):
    """The eigenvalues of H^(−1/2) H̃ H^(−1/2): the spectrum of H̃ measured in H's metric.

    H̃ is an ε₀-approximation of H ≻ 0, (1 − ε₀) H ⪯ H̃ ⪯ (1 + ε₀) H (Def. 6.2), iff they lie in
    [1 − ε₀, 1 + ε₀]. Computed as the eigenvalues of L⁻¹ H̃ L⁻ᵀ with H = L Lᵀ. An H that is not
    positive definite (its Cholesky factor NaN) is refused by name when concrete, and gives NaN
    when traced.

    Args:
      H_approx: (d, d) symmetric approximation H̃.
      H: (d, d) symmetric positive definite matrix.

    Returns:
      (d,) array of the eigenvalues, ascending.
    """
    return _relative_spectrum(H_approx, H)


def _relative_spectrum(H_approx, H):
    L = jnp.linalg.cholesky(H)
    Li = jax.scipy.linalg.solve_triangular(L, jnp.eye(H.shape[0], dtype=H.dtype), lower=True)
    return jnp.linalg.eigvalsh(Li @ H_approx @ Li.T)


@_checks.validate(*_SPECTRUM_RULES, **_SPECTRUM)
@_checks.compiled
def approximation_error(H_approx, H):
    """The ε₀ of Def. 6.2: the least ε₀ with (1 − ε₀) H ⪯ H̃ ⪯ (1 + ε₀) H.

        ε₀ = max_i |λ_i − 1|,

    with λ the eigenvalues of H^(−1/2) H̃ H^(−1/2) (``relative_spectrum``).

    Args:
      H_approx: (d, d) symmetric approximation H̃.
      H: (d, d) symmetric positive definite matrix.

    Returns:
      Scalar ε₀ ≥ 0.
    """
    return _approximation_error(H_approx, H)


def _approximation_error(H_approx, H):
    """ε₀ without argument checks (NaN for an H that is not positive definite)."""
    return jnp.max(jnp.abs(_relative_spectrum(H_approx, H) - 1.0))


# -- the in-context-learning corollary (Appendix E, Corollary F.2) --------------------------------


# A step (x_t, A) → (x_next, A_next): x_next of x_t's shape, A_next (default None: A) of A's.
_STEP_RULES = (
    length("b", 0),
    length("x_t", 1),
    _checks.Rule(
        lambda a: a["x_next"].shape == a["x_t"].shape,
        "x_next must have the shape of x_t {x_t.shape}, got {x_next.shape}",
        uses=(),
    ),
    _checks.Rule(
        lambda a: a["A_next"] is None or a["A_next"].shape == a["A"].shape,
        "A_next must have the shape of A {A.shape}, got {A_next.shape}",
        uses=(),
    ),
)
_STEP = {
    "A": design.DESIGN,
    "b": VECTOR,
    "x_t": VECTOR,
    "x_next": VECTOR,
    "A_next": _checks.Convert(design.convert, optional=True),
}


def _alpha_is_defined(a) -> jax.Array:
    """False where α(x_t) = Σ u_i is zero to working precision, |α| ≤ n · eps · Σ|u_i|, for a finite
    u (an overflowed u is no cancellation: its shift comes back non-finite)."""
    u = _parts(a["x_t"], a["A"], a["b"], a["kind"]).u
    noise = u.size * jnp.finfo(u.dtype).eps * jnp.sum(jnp.abs(u))
    return ~(jnp.all(jnp.isfinite(u)) & (jnp.abs(jnp.sum(u)) <= noise))


def _alpha_message(a) -> str:
    """α(x_t) is zero to working precision."""
    u = {"exp": np.exp, "cosh": np.cosh, "sinh": np.sinh}[a["kind"]](
        _numpy_matvec(a["A"], a["x_t"])
    )
    noise = u.size * np.finfo(u.dtype).eps * float(np.sum(np.abs(u)))
    return (
        f"α(x_t) = ⟨u(Ax_t), 1⟩ = {float(np.sum(u)):.3g} is zero to working precision "
        f"(|α| ≤ n·eps·Σ|u| = {noise:.3g}): the shift δ_b is undefined (sinh at or near x = 0)"
    )


@_checks.validate(
    *_STEP_RULES,
    _checks.Rule(
        _alpha_is_defined,
        _checks.Message(_alpha_message),
        uses=("x_t", "A", "b"),
        poison="x_t",
    ),
    kind=KIND,
    **_STEP,
)
def icl_shift(x_t, x_next, A, b, kind: str = "exp", *, A_next=None):
    """The shift δ_b of the target b that reproduces a step in x or in A (in-context learning).

        u(Aₜ₊₁xₜ₊₁) − α(Aₜ₊₁xₜ₊₁) b = u(Aₜ xₜ) − α(Aₜ xₜ)(b − δ_b),
        δ_b = αₜ⁻¹ (cₜ₊₁ − cₜ),   c = u − α b:

    a step in x (Lemma E.2), in A (Lemma E.5, read as "x fixed, Aₜ → Aₜ₊₁"; pass ``A_next``),
    or both, equals a step in b.

    Raises when α(Aₜ xₜ) = Σ u_i is zero to working precision, |α| ≤ n · eps · Σ|u_i| (sinh at or
    near x = 0, where the sum cancels and its sign is rounding): δ_b is then undefined or rounding
    noise. The bound is the worst case of the summation's rounding, so an α that cancels exactly to
    a tiny accurate value (rows in exact ± pairs plus a tiny one) is refused too. Traced (under
    jit/vmap), such a shift comes back NaN. Where u(Aₜ xₜ) overflows, α is not judged and the
    shift comes back non-finite (module docstring).

    Args:
      x_t: (d,) point before the step.
      x_next: (d,) point after the step (``x_t`` again for a step in A alone).
      A: (n, d) design Aₜ before the step, as in ``loss``.
      b: (n,) target.
      kind: "exp" (default), "cosh" or "sinh".
      A_next: (n, d) design Aₜ₊₁ after the step (default None: A).

    Returns:
      (n,) array δ_b.
    """
    p0 = _parts(x_t, A, b, kind)
    p1 = _parts(x_next, A if A_next is None else A_next, b, kind)
    return (p1.c - p0.c) / p0.alpha


@_checks.validate(
    *_STEP_RULES,
    **_STEP,
    R=_checks.Hyper(ndim=0, low=0, low_open=True, dtype_of="A", optional=True),
)
def icl_bound(x_t, x_next, A, b, R=None, *, A_next=None):
    """The explicit bound of Corollary F.2 (exp) on the shift ‖δ_b‖ of ``icl_shift``.

        ‖δ_b‖ ≤ e^(R²) (1 + √n ‖b‖) 2√n e^(R²) ‖Δz‖,
        ‖Δz‖ = ‖Aₜ₊₁xₜ₊₁ − Aₜ xₜ‖ ≤ R ‖xₜ₊₁ − xₜ‖ + ‖Aₜ₊₁ − Aₜ‖₂ ‖xₜ₊₁‖,

    so part 1 (x case) reads e^(R²) (1 + √n ‖b‖) 2√n R e^(R²) ‖xₜ₊₁ − xₜ‖ and part 2 (A case,
    x fixed, ``A_next``) the same with ‖x‖ ‖Aₜ₊₁ − Aₜ‖₂ in place of R ‖xₜ₊₁ − xₜ‖. Valid when
    ‖Aₜ(xₜ₊₁ − xₜ)‖∞ < 0.01 and ‖(Aₜ₊₁ − Aₜ)x‖∞ < 0.01. The constant grows as e^(2R²): beyond
    R ≈ 6.6 (float32) or 18.8 (float64) it is not representable and the bound is inf (no useful
    bound).

    Args:
      x_t: (d,) point before the step.
      x_next: (d,) point after the step (``x_t`` again for a step in A alone).
      A: (n, d) design Aₜ before the step, as in ``loss``.
      b: (n,) target.
      R: the radius, > 0 (default None: max(‖Aₜ‖₂, ‖xₜ‖, ‖b‖, 4)).
      A_next: (n, d) design Aₜ₊₁ after the step (default None: A).

    Returns:
      Scalar bound on ‖δ_b‖ (inf where the constant overflows).
    """
    dense = A.todense() if isinstance(A, design.RowSparse) else A
    n = dense.shape[0]
    if R is None:
        R = jnp.max(
            jnp.stack(
                [
                    jnp.linalg.norm(dense, 2),
                    jnp.linalg.norm(x_t),
                    jnp.linalg.norm(b),
                    jnp.asarray(4.0, dense.dtype),
                ]
            )
        )
    step = R * jnp.linalg.norm(x_next - x_t)
    if A_next is not None:
        dense_next = A_next.todense() if isinstance(A_next, design.RowSparse) else A_next
        step = step + jnp.linalg.norm(dense_next - dense, 2) * jnp.linalg.norm(x_next)
    return (
        jnp.exp(R**2)
        * (1 + jnp.sqrt(n) * jnp.linalg.norm(b))
        * 2
        * jnp.sqrt(n)
        * jnp.exp(R**2)
        * step
    )


__all__ = [
    "KINDS",
    "Parts",
    "approximation_error",
    "check_problem",
    "curvature_split",
    "diagonal_curvature",
    "gradient",
    "hessian",
    "icl_bound",
    "icl_shift",
    "loss",
    "overflow_limit",
    "parts",
    "psd_certificate",
    "radius_R0",
    "relative_spectrum",
    "sigma_min",
    "weight_rule",
]
