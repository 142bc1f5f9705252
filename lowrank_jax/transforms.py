"""Optax-style gradient transformations shared by the families.

``scale_by_factored_preconditioner`` is the ScaledGD preconditioner (Tong, Ma, Chi 2021) for a
factored parameter pair (L, R) with X = L Rᵀ: given the gradients (G_L, G_R) it returns

    (G_L (RᵀR)⁻¹,  G_R (LᵀL)⁻¹)

computed from the *current* (old) factors for both halves, so that the L- and R-updates are
simultaneous (Jacobi), as in LRPCA's eq. (9). Chained with a learning rate it gives the scaled
gradient step  L ← L − η ∇_L f (RᵀR)⁻¹,  R ← R − η ∇_R f (LᵀL)⁻¹.

``newton`` is Newton's step −(H + λI)⁻¹ g for any pytree of parameters, with a pluggable curvature
and solve and a state that keeps both; ``regression.newton_solve`` is built on it.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from lowrank_jax import _checks
from lowrank_jax.linalg import above_rounding, after, spd_solve


def scale_by_factored_preconditioner(axis_name: str | None = None) -> optax.GradientTransformation:
    """Precondition the gradients of a factor pair ``params = (L, R)`` by the other factor's Gram.

        (G_L, G_R) ↦ (G_L (RᵀR)⁻¹,  G_R (LᵀL)⁻¹),

    both from the current factors (simultaneous updates; Tong, Ma, Chi 2021). The update is
    invariant to the gauge (L, R) → (LQ, RQ⁻ᵀ): it moves X = L Rᵀ the same way whatever balanced or
    unbalanced factorisation represents it. The solves are ``lowrank_jax.linalg.spd_solve``'s.

    Args:
      axis_name: inside ``shard_map`` with L (and G_L) split by rows over that mesh axis and R, G_R
        replicated, the r × r Gram LᵀL is summed across devices (``psum``) — the only communication
        the step needs. Default None: no sharding.

    Returns:
      A stateless ``optax.GradientTransformation``. Its ``update(updates, state, params)`` takes
      ``updates`` = (G_L (n1, r), G_R (n2, r)) and needs ``params`` = (L (n1, r), R (n2, r))
      (without them it raises ``ValueError``).
    """

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None):
        if params is None:
            raise ValueError("scale_by_factored_preconditioner needs params=(L, R) in update()")
        (g_l, g_r), (L, R) = updates, params
        gram_l = L.T @ L
        if axis_name is not None:
            gram_l = jax.lax.psum(gram_l, axis_name)
        return (spd_solve(R.T @ R, g_l, right=True), spd_solve(gram_l, g_r, right=True)), state

    return optax.GradientTransformation(init_fn, update_fn)


def scaled_gradient(
    lr: optax.ScalarOrSchedule, axis_name: str | None = None
) -> optax.GradientTransformation:
    """ScaledGD (Tong, Ma, Chi 2021) as an optax optimizer on ``params = (L, R)``.

    The update is

        −η · (G_L (RᵀR)⁻¹,  G_R (LᵀL)⁻¹),

    ``scale_by_factored_preconditioner`` chained with ``optax.scale_by_learning_rate``.

    Args:
      lr: the step size η: a number, a (traced) array or an optax schedule.
      axis_name: see ``scale_by_factored_preconditioner`` (row-sharded L under ``shard_map``).

    Returns:
      An ``optax.GradientTransformation``; ``update`` needs ``params``.

    Example:
        ```python
        import jax, jax.numpy as jnp, optax
        from lowrank_jax import transforms

        k1, k2, k3, k4 = jax.random.split(jax.random.key(0), 4)
        X = jax.random.normal(k1, (50, 3)) @ jax.random.normal(k2, (3, 40))  # rank 3
        f = lambda p: 0.5 * jnp.sum((p[0] @ p[1].T - X) ** 2)  # p = (L, R)
        params = (jax.random.normal(k3, (50, 3)), jax.random.normal(k4, (40, 3)))
        opt = transforms.scaled_gradient(0.5)
        state = opt.init(params)

        @jax.jit
        def step(params, state):
            updates, state = opt.update(jax.grad(f)(params), state, params)
            return optax.apply_updates(params, updates), state

        for _ in range(50):
            params, state = step(params, state)
        # the relative error of L Rᵀ
        print(jnp.linalg.norm(params[0] @ params[1].T - X) / jnp.linalg.norm(X))
        ```
    """
    return optax.chain(
        scale_by_factored_preconditioner(axis_name), optax.scale_by_learning_rate(lr)
    )


def scaled_gradient_step(params, grads, lr, axis_name: str | None = None):
    """One stateless ScaledGD step on (L, R): the building block of the unrolled solvers.

        (L, R) ↦ (L − η G_L (RᵀR)⁻¹,  R − η G_R (LᵀL)⁻¹).

    Equivalent to ``scaled_gradient(lr)`` with a fresh state; convenient inside
    ``lax.scan`` where the step size changes from iteration to iteration.

    Args:
      params: the factors (L (n1, r), R (n2, r)).
      grads: their gradients (G_L, G_R), of the same shapes.
      lr: the step size η, a number or a (traced) array.
      axis_name: as in ``scale_by_factored_preconditioner``.

    Returns:
      The new factors (L, R).
    """
    opt = scaled_gradient(lr, axis_name)
    updates, _ = opt.update(grads, opt.init(params), params)
    return optax.apply_updates(params, updates)


# -- proximal steps --------------------------------------------------------------------------------


class ProximalState(NamedTuple):
    """State of ``proximal``.

    Attributes:
      inner: the inner optimizer's state.
      count: int32 scalar, the number of steps taken (the argument of a scheduled strength).
    """

    inner: optax.OptState
    count: jax.Array  # type: ignore[assignment]  # shadows tuple.count, as in optax's states


def proximal(
    optimizer: optax.GradientTransformation, prox_fn, strength
) -> optax.GradientTransformationExtraArgs:
    """Proximal wrapper: the inner optimizer's step, then a prox on the new parameters.

        z⁺ = prox_h(z + u_t),  h = s_t · g,  returned as the update z⁺ − z,

    with u_t the inner optimizer's update and s_t = ``strength``. For the prox-gradient method
    (Prox-SGD) of F = f + λ g the strength is learning rate × λ (``pathnorm`` is
    ``lowrank_jax.pathnorm``):

        path_prox = lambda model, s: pathnorm.prox_step(model, s, "path")
        opt = proximal(optax.sgd(lr), path_prox, lr * lam)
        opt = proximal(optax.sgd(schedule), path_prox, lambda t: schedule(t) * lam)

    Any inner optimizer works (momentum, Adam — then the prox is a heuristic, the paper's theory
    covers plain SGD). Exact zeros of the prox stay exact: z + (0 − z) = 0 in floating point. Other
    values are the prox's up to one rounding (optax's updates are additive: z + (p − z) may differ
    from p in the last bit), so apply the prox or projection once more where a constraint must hold
    to the bit.

    Keyword arguments of ``update`` beyond ``params`` go to the inner optimizer, so one that needs
    them works too, such as ``optax.polyak_sgd()``, whose step size (f(z) − f⋆)/‖∇f(z)‖² needs
    ``value=f(z)``:

        opt = proximal(optax.polyak_sgd(), path_prox, lam)
        updates, state = opt.update(grads, state, params, value=loss)

    (The prox-gradient strength is step size × λ; ``strength`` does not see a step size that the
    inner optimizer chooses anew at every step, as Polyak's, so a fixed strength is then a
    heuristic.) An inner optimizer without extra arguments ignores them
    (``optax.with_extra_args_support``), so ``proximal`` can sit in an ``optax.chain`` next to one
    that takes them.

    Args:
      optimizer: the inner ``optax.GradientTransformation``.
      prox_fn: ``prox_fn(params, strength) -> params``, acting on the whole parameter pytree (so it
        can couple leaves, as the path-norm prox couples two layers).
      strength: s_t: a number, a traced array (so a ``vmap`` over it sweeps regularisation weights)
        or an optax schedule of the step count.

    Returns:
      An ``optax.GradientTransformationExtraArgs`` with state ``ProximalState``; ``update``
      needs ``params`` (without them it raises ``ValueError``).
    """
    inner = optax.with_extra_args_support(optimizer)

    def init_fn(params):
        return ProximalState(inner.init(params), jnp.zeros([], jnp.int32))

    def update_fn(updates, state, params=None, **extra_args):
        if params is None:
            raise ValueError("proximal() needs params in update()")
        inner_updates, inner_state = inner.update(updates, state.inner, params, **extra_args)
        stepped = optax.apply_updates(params, inner_updates)
        s = strength(state.count) if callable(strength) else strength
        new = prox_fn(stepped, s)
        out = jax.tree.map(
            lambda n, p: None if p is None else n - p, new, params, is_leaf=lambda x: x is None
        )
        return out, ProximalState(inner_state, optax.safe_int32_increment(state.count))

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def projected(optimizer: optax.GradientTransformation, project_fn) -> optax.GradientTransformation:
    """Projected steps z⁺ = Π(z + u_t), u_t the inner optimizer's update.

    The ``proximal`` wrapper with a strength-free prox, since a projection is the prox of an
    indicator. The new iterate is Π(z + u_t) up to one rounding (see ``proximal``): a box
    constraint may be exceeded in the last bit.

    Args:
      optimizer: the inner ``optax.GradientTransformation``.
      project_fn: ``project_fn(params) -> params``, a projection (onto a convex set, or a rank
        constraint as in lifted PGD).

    Returns:
      An ``optax.GradientTransformationExtraArgs`` as ``proximal``'s; ``update`` needs
      ``params``.
    """
    return proximal(optimizer, lambda params, _: project_fn(params), 0.0)


# -- Line search -----------------------------------------------------------------------------------


def backtracking(phi, phi0, slope, *, c=1e-4, shrink=0.5, t_min=1e-10, slack=0.0):
    """Armijo backtracking along a descent direction: the first t = shrinkᵏ (k = 0, 1, …) with

        φ(t) ≤ φ(0) − c · t · slope + slack,

    where φ(t) is the objective at the trial point x − tΔ and slope = ⟨∇f(x), Δ⟩ ≥ 0 (Nocedal &
    Wright, Alg. 3.1, from t = 1). The test is written as "not sufficient decrease" so that a trial
    whose φ is NaN (an overflowed trial point) is rejected, never taken. The search stops at the
    first t ≤ ``t_min`` whatever φ says; ``slack`` (≥ 0, e.g. a few ulp of |φ(0)|) accepts a step
    whose change of φ is below its rounding, where the strict test fails for every t near a
    minimiser. One ``while_loop``: it runs under ``jit`` and ``vmap``; it has no reverse mode.

    The families' Newton solvers use it with a φ of their own making (regression evaluates trial
    losses from z − tAΔ without a pass over A), which is why it takes φ as a function of t rather
    than of the parameters (optax's ``scale_by_backtracking_linesearch`` takes the latter).

    Args:
      phi: ``t -> φ(t)``, a scalar function of the step length.
      phi0: φ(0), a scalar.
      slope: ⟨∇f(x), Δ⟩ for the step x − tΔ (non-negative for a descent direction).
      c: the sufficient-decrease constant in (0, 1) (default 1e-4).
      shrink: the factor in (0, 1) between trials (default 0.5).
      t_min: the smallest step tried (default 1e-10).
      slack: the tolerated increase of φ (default 0).

    Returns:
      The step length t, a scalar in ``phi0``'s dtype.

    Example:
        ```python
        import jax.numpy as jnp
        from lowrank_jax import transforms

        f = lambda x: (x - 1.0) ** 2                  # from x = 3 along Δ = f'(3) = 4
        t = transforms.backtracking(lambda t: f(3.0 - 4.0 * t), f(3.0), 16.0)
        print(t)                                      # 0.5: x − tΔ = 1, the minimiser
        ```
    """
    phi0 = jnp.asarray(phi0)
    dtype = jnp.result_type(phi0, float)

    def reject(t):
        return ~(phi(t) <= phi0 - c * t * slope + slack) & (t > t_min)

    return jax.lax.while_loop(reject, lambda t: shrink * t, jnp.ones((), dtype))


# -- Newton steps ----------------------------------------------------------------------------------


def newton_direction(H, g, damping=0.0, *, size=None):
    """(H + damping·I)⁻¹ g for a symmetric H, with a pseudo-inverse where H is numerically singular.

    Cholesky when H + damping·I is positive definite, LU when it is indefinite and non-singular,
    else the pseudo-inverse from the eigendecomposition H + damping·I = V diag(μ) Vᵀ: the sum of
    v_i v_iᵀ g / μ_i over the eigenvalues with |μ_i| > τ, τ = size·ε·max|μ| (the minimum-norm
    least-squares direction of a numerically singular H).

    ``size`` sets how much rounding H may carry. d·ε is the cut-off of ``numpy.linalg.matrix_rank``
    for a matrix known to working precision. An H formed by sums of n terms, such as AᵀDA for an A
    of n rows, carries more: about √n·ε·‖H‖ per entry (the typical error of an n-term sum), so up to
    d·√n·ε·‖H‖ in its eigenvalues, and a caller that formed it should pass
    ``size = linalg.gram_rounding_size(d, n)`` = d·√n.

    A positive semi-definite but numerically singular H — the Hessian of ½(p₁ + p₂)², or AᵀDA for an
    A without full column rank — may pass Cholesky with a pivot of rounding size or fail it by a
    rounding-size negative eigenvalue. Solved exactly (by Cholesky or LU), it moves the iterate by
    O(1) along the null space, where the gradient is only rounding, and an iteration drifts there
    without end while its loss and gradient look converged. So a Cholesky factor counts only when
    every pivot satisfies L_ii² > size·ε·max_i (H + damping·I)_ii, and the eigendecomposition drops
    the rounding-size eigenvalues, leaving no null-space part. LU rather than that
    eigendecomposition for a non-singular indefinite H: same H⁻¹g, fewer flops. For an indefinite H
    the caller's line search or damping must handle a non-descent direction.

    Derivatives (forward and reverse mode, also under ``vmap``) come from a rule of their own, with
    the branch fixed by the values. x = F(H)g is a spectral function of H, F = V diag(f(μ)) Vᵀ with
    f(μ) = 1/μ on the kept eigenvalues and 0 on the dropped ones, so (Daleckii–Krein), with
    Ė = (Ḣ + Ḣᵀ)/2 (H is symmetric, so only its symmetric part moves it):

        ẋ = F(ġ − Ė x) + V (Γ ∘ VᵀĖV) Vᵀg,
        Γ_ij = 1/(μ_i(μ_i − μ_j))  for i kept and j dropped (or the reverse),
        Γ_ij = 0                   otherwise.

    On the Cholesky and LU branches nothing is dropped and ẋ = H⁻¹(ġ − Ė x). The rule is finite at
    repeated eigenvalues (where eigh's own derivative is not) and on a null space. It takes one
    eigendecomposition of H, after the primal's factorisations, and otherwise only matrix products:
    the derivative programs (reverse mode included) hold no LAPACK call that could run beside
    another, which keeps a ``vmap``ped derivative on a CPU from hanging (see ``linalg.after``).

    A NaN or infinite entry of H, g or λ gives a direction of NaN (never a finite step that hides
    it), so an iteration built on it sees the failure in its iterate.

    Args:
      H: (d, d) symmetric matrix; another shape raises ``ValueError`` naming ``H``.
      g: (d,) vector; another shape raises ``ValueError`` naming ``g``.
      damping: λ ≥ 0, a number or traced scalar (default 0); a concrete negative or NaN λ raises
        ``ValueError`` naming ``damping``, a traced one gives a NaN direction.
      size: the rounding allowance above, a Python number or array, not differentiated; default d.

    Returns:
      The direction, a (d,) array in the result dtype of H and g (integers in the default float,
      half precision in float32).

    Example:
        ```python
        import jax.numpy as jnp
        from lowrank_jax import transforms

        H, g = jnp.array([[2.0, 0.0], [0.0, -1.0]]), jnp.array([1.0, 1.0])
        print(transforms.newton_direction(H, g))  # [0.5, -1.0]: LU, H is indefinite
        print(transforms.newton_direction(H, g, 0.5))  # [0.4, -2.0]: (H + 0.5 I)⁻¹ g
        bad = H.at[0, 1].set(jnp.nan)
        print(jnp.isnan(transforms.newton_direction(bad, g)).all())  # True: NaN shows
        ```
    """
    H, g = jnp.asarray(H), jnp.asarray(g)
    if H.ndim != 2 or H.shape[0] != H.shape[1]:
        raise ValueError(f"H must be a square (d, d) matrix, got shape {tuple(H.shape)}")
    if g.shape != H.shape[:1]:
        raise ValueError(
            f"g must be a vector of length d = {H.shape[0]} (H is {tuple(H.shape)}), got shape "
            f"{tuple(g.shape)}"
        )
    # Integers in the default float (float64 with x64 on), as everywhere in the toolkit: not
    # float32, which lost digits under x64; half precision in float32 (no LAPACK routine takes it).
    dtype = _checks.compute_dtype(jnp.result_type(H, g))
    damping = _checks.as_hyper(damping, "damping", ndim=0, dtype=dtype)
    return _damped_direction(H, g, damping, H.shape[0] if size is None else size, dtype)


@functools.partial(jax.jit, static_argnames="dtype")
def _damped_direction(H, g, damping, size, dtype):
    """``newton_direction`` of checked arguments, as one program."""
    Hd = H.astype(dtype) + damping * jnp.eye(H.shape[0], dtype=dtype)
    return _direction(Hd, g.astype(dtype), jnp.asarray(size, dtype))


def _solve_branches(Hd, g, size):
    """(x, branch): x = F(Hd) g by the branch newton_direction picks, branch 0 (Cholesky), 1 (LU)
    or 2 (pseudo-inverse).

    Each factorisation reads the previous one's result through ``after``, so that under vmap on a
    CPU no two batched LAPACK kernels run at once (they can hang jaxlib's thread pool, see
    linalg.after). Hence the Cholesky solve and, in the fallback, the LU solve are formed before
    their conds: the next factorisation waits for them. Under vmap every branch runs for every
    member; where a branch is not chosen it factors a stand-in (I, or diag(1..d) for the
    eigensolvers, 4x cheaper there than a full matrix) instead of H."""
    d = Hd.shape[0]
    eye = jnp.eye(d, dtype=Hd.dtype)
    spread = jnp.diag(jnp.arange(1, d + 1, dtype=Hd.dtype))
    L = jnp.linalg.cholesky(Hd)
    pivots = jnp.diagonal(L)
    ok = (
        jnp.all(jnp.isfinite(L))
        & jnp.all(pivots > 0)
        & jnp.all(
            pivots * pivots > size * jnp.finfo(Hd.dtype).eps * jnp.max(jnp.abs(jnp.diagonal(Hd)))
        )
    )
    chol = jax.scipy.linalg.cho_solve((jnp.where(ok, L, eye), True), g)

    def fallback():
        regular = jnp.all(
            above_rounding(jnp.linalg.eigvalsh(after(jnp.where(ok, spread, Hd), chol)), size)
        )
        lu = jnp.linalg.solve(jnp.where(regular & ~ok, Hd, eye), g)

        def pseudo_inverse():
            mu, V = jnp.linalg.eigh(after(jnp.where(regular, spread, Hd), lu))
            keep = above_rounding(mu, size)
            return V @ jnp.where(keep, (V.T @ g) / jnp.where(keep, mu, 1), 0), 2

        return jax.lax.cond(regular, lambda: (lu, 1), pseudo_inverse)

    # cond, not where: the fallback runs only when needed (under vmap both branches run).
    x, branch = jax.lax.cond(ok, lambda: (chol, 0), fallback)
    # A NaN/inf entry failed Cholesky and every eigenvalue test, and the pseudo-inverse dropped them
    # all: a zero step, as at a minimum. Return NaN instead, so the caller sees the failure.
    finite = jnp.all(jnp.isfinite(Hd)) & jnp.all(jnp.isfinite(g))
    return jnp.where(finite, x, jnp.nan), branch


@jax.custom_jvp
def _direction(Hd, g, size):
    return _solve_branches(Hd, g, size)[0]


@_direction.defjvp
def _direction_jvp(primals, tangents):
    """ẋ = V (f(μ) ∘ Vᵀġ + (Γ ∘ VᵀĖV) Vᵀg) from one eigendecomposition Hd = V diag(μ) Vᵀ, taken
    after x (so after the primal's factorisations). Γ_ij = (f_i − f_j)/(μ_i − μ_j), i.e. −f_i f_j
    where both are kept (f'(μ_i) = −1/μ_i² on the diagonal), f_i/(μ_i − μ_j) for i kept and j
    dropped, 0 where both are dropped. The Cholesky and LU branches keep every eigenvalue."""
    Hd, g, size = primals
    dH, dg, _ = tangents
    x, branch = _solve_branches(Hd, g, size)
    mu, V = jnp.linalg.eigh(after(Hd, x))
    keep = (branch < 2) | above_rounding(mu, size)
    f = jnp.where(keep, 1 / jnp.where(keep, mu, 1), 0)
    both, cross = keep[:, None] & keep[None, :], keep[:, None] != keep[None, :]
    gap = jnp.where(cross, mu[:, None] - mu[None, :], 1)
    gamma = jnp.where(
        both, -f[:, None] * f[None, :], jnp.where(cross, (f[:, None] - f[None, :]) / gap, 0)
    )
    E = (dH + dH.T) / 2
    return x, V @ (f * (V.T @ dg) + (gamma * (V.T @ E @ V)) @ (V.T @ g))


class NewtonState(NamedTuple):
    """State of ``newton``.

    Before the first update both fields are the placeholders that ``init`` builds (same structure,
    shapes and dtypes as later).

    Attributes:
      curvature: the curvature returned by the last ``hessian_fn`` call.
      aux: the auxiliary output of the last ``solve`` (None when the solve returns Δ alone).
    """

    curvature: Any
    aux: Any


def newton(
    hessian_fn, damping=0.0, *, solve=None, init_curvature=None, init_aux=None
) -> optax.GradientTransformationExtraArgs:
    """Newton's method as an optax transformation: the update is −Δ, where (H + damping·I) Δ = g.

        (H + damping·I) Δ = g,   H = hessian_fn(params, **extra_args),
                                 g = the incoming updates,

    i.e. −(∇²f(x) + λI)⁻¹ ∇f(x) when g = ∇f(x) and H = ∇²f(x). ``update`` writes the state and does
    not read it (to reuse the curvature, pass ``state.curvature`` back as an extra argument). Chain
    with ``optax.scale`` (or a line search) for damped steps. To refresh the Hessian only every
    other step, pass the step count and the previous curvature to ``hessian_fn``:

        hessian_fn = lambda p, *, k, previous: jax.lax.cond(
            k % 2 == 0, lambda: hessian_at(p), lambda: previous
        )
        updates, state = opt.update(g, state, params, k=k, previous=state.curvature)

    Args:
      hessian_fn: ``hessian_fn(params, **extra_args) -> curvature``. By default the curvature is the
        (d, d) Hessian of the parameters flattened with ``jax.flatten_util.ravel_pytree`` (any
        pytree of d numbers), e.g. ``jax.hessian`` of the flattened loss or a closed form. With a
        custom ``solve`` it is any pytree that ``solve`` understands (a factorisation, a sketch, the
        pieces of a structured Hessian). The keyword arguments given to ``update`` (optax's
        extra-args convention) are all forwarded to it — the iteration count, a random key, the
        previous curvature ``state.curvature`` to keep it for a few steps, quantities the caller
        already has — so it must accept every one that the caller (or an ``optax.chain``) passes.
      damping: λ ≥ 0, a number or traced array (Levenberg–Marquardt style regularisation for starts
        far from a minimum); handed to ``solve``. A concrete negative or NaN number raises
        ``ValueError`` naming ``damping`` here.
      solve: ``solve(curvature, g, damping)`` with g the flattened updates, (d,), returning Δ (d,)
        or a pair ``(Δ, aux)``; ``aux`` (any pytree, e.g. a product with Δ that the caller would
        otherwise recompute) is kept in the state. Default ``newton_direction`` (Cholesky; LU
        for an indefinite H; the eigendecomposition's pseudo-inverse for a numerically singular
        one), no aux.
      init_curvature: ``params -> pytree``: the curvature placeholder that ``init`` puts in the
        state, with the structure, shapes and dtypes of what ``hessian_fn`` returns, so that the
        state can be the carry of ``lax.scan`` / ``while_loop``. Default: zeros (d, d) in the
        parameters' dtype.
      init_aux: ``params -> pytree``: the same for ``solve``'s aux. Default: None.

    Returns:
      An ``optax.GradientTransformationExtraArgs`` with state ``NewtonState``; ``update`` needs
      ``params`` (without them it raises ``ValueError``).

    Example:
        ```python
        import jax, jax.numpy as jnp, optax
        from jax.flatten_util import ravel_pytree
        from lowrank_jax import transforms

        A = jax.random.normal(jax.random.key(0), (30, 4))
        ridge = lambda p: 0.5 * (p["w"] @ p["w"] + p["b"] ** 2)
        f = lambda p: jax.nn.logsumexp(A @ p["w"] + p["b"]) + ridge(p)
        params = {"w": jnp.zeros(4), "b": jnp.zeros(())}
        _, unravel = ravel_pytree(params)
        # (5, 5) on the flat params
        hess = lambda p: jax.hessian(lambda v: f(unravel(v)))(ravel_pytree(p)[0])
        opt = transforms.newton(hess)
        state = opt.init(params)

        @jax.jit
        def step(params, state):
            updates, state = opt.update(jax.grad(f)(params), state, params)
            params = optax.apply_updates(params, updates)
            return params, state, jnp.linalg.norm(ravel_pytree(jax.grad(f)(params))[0])

        for _ in range(5):
            params, state, grad_norm = step(params, state)
            print(grad_norm)  # quadratic convergence
        ```
    """
    from jax.flatten_util import ravel_pytree

    solve_fn = newton_direction if solve is None else solve
    lam = _checks.as_real(damping)
    if lam is not None and not lam >= 0:
        raise ValueError(f"damping must be a non-negative number, got {damping!r}")

    def init_fn(params):
        if init_curvature is None:
            flat, _ = ravel_pytree(params)
            curvature = jnp.zeros((flat.size, flat.size), flat.dtype)
        else:
            curvature = init_curvature(params)
        return NewtonState(curvature, None if init_aux is None else init_aux(params))

    def update_fn(updates, state, params=None, **extra_args):
        if params is None:
            raise ValueError("newton() needs params in update()")
        g, unravel = ravel_pytree(updates)
        curvature = hessian_fn(params, **extra_args)
        out = solve_fn(curvature, g, damping)
        delta, aux = out if isinstance(out, tuple) else (out, None)
        return unravel(-delta), NewtonState(curvature, aux)

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


__all__ = [
    "NewtonState",
    "ProximalState",
    "backtracking",
    "newton",
    "newton_direction",
    "projected",
    "proximal",
    "scale_by_factored_preconditioner",
    "scaled_gradient",
    "scaled_gradient_step",
]
