"""Row-panel products of the RPCA solvers' residual map: E R and Eᵀ L without forming E whole.

With D = Y − L Rᵀ and E a pointwise function of D (LRPCA's −clip(D, ζ), ScaledGD's T_α(D) − D),
the scaled-gradient step needs only E R (n1, r) and Eᵀ L (n2, r). ``residual_map_products``
computes them on row panels sized to stay in cache, with a reverse-mode rule that recomputes the
panels instead of storing them.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import _checks
from lowrank_jax.precision import full_precision


def _panel_rows(n1: int, n2: int, itemsize: int) -> int:
    """Rows per panel on CPU: about 6 MiB of rows and at least two panels, so the panel's
    temporaries (D, E) stay in the last-level cache instead of round-tripping to memory, while the
    panel products stay large enough for efficient dots. The whole matrix on accelerators, where
    one large fused kernel is best."""
    if jax.default_backend() != "cpu":
        return n1
    target = min(n1, max(8, min(n1 // 2 if n1 >= 16 else n1, (6 << 20) // max(1, n2 * itemsize))))
    # Prefer a divisor of n1 (no ragged last panel, whose slicing would copy Y).
    for rows in range(target, max(1, target // 2) - 1, -1):
        if n1 % rows == 0:
            return rows
    return target


def _factor_shapes(a) -> bool:
    """Y (n1, n2), L (n1, r) and R (n2, r)."""
    Y, L, R = a["Y"], a["L"], a["R"]
    return (
        Y.ndim == L.ndim == R.ndim == 2
        and L.shape[0] == Y.shape[0]
        and R.shape[0] == Y.shape[1]
        and L.shape[1] == R.shape[1]
    )


def _row_lengths(a) -> str:
    """The message of the rule that every row argument has a leading axis of n1."""
    n1 = a["Y"].shape[0]
    bad = next(x for x in a["row_args"] if jnp.ndim(x) < 1 or jnp.shape(x)[0] != n1)
    return (
        f"residual_map_products: every row argument needs a leading axis of n1 = {n1}, "
        f"got shape {jnp.shape(bad)}"
    )


def _as_array(x, name: str, args) -> jax.Array:
    """``jnp.asarray(x)`` (NumPy bfloat16 products came back float32)."""
    return jnp.asarray(x)


@_checks.validate(
    _checks.Rule(
        _factor_shapes,
        "residual_map_products needs Y (n1, n2), L (n1, r) and R (n2, r); got Y {Y.shape}, "
        "L {L.shape}, R {R.shape}",
        uses=(),
    ),
    _checks.Rule(
        lambda a: all(
            jnp.ndim(x) >= 1 and jnp.shape(x)[0] == a["Y"].shape[0] for x in a["row_args"]
        ),
        _checks.Message(_row_lengths),
        uses=(),
    ),
    Y=_checks.Convert(_as_array),
    L=_checks.Convert(_as_array),
    R=_checks.Convert(_as_array),
    row_args=_checks.Convert(lambda x, name, args: tuple(x)),
)
def residual_map_products(Y: jax.Array, L: jax.Array, R: jax.Array, fn, row_args=()):
    """Contract a pointwise map of the low-rank residual with the factors, panel by panel.

        D = Y − L Rᵀ,   (E, stats) = fn(D, *row_args),   return (E R, Eᵀ L, Σ_panels stats)

    This is the inner kernel of ScaledGD-type steps (E = L Rᵀ + S − Y with S a function of D).
    On CPU the rows are processed in panels of a few MiB, so D and E never leave the cache: the
    step reads Y once and writes nothing of size n1 × n2 (except for a Y of another dtype than
    the promoted one of Y, L, R — integer frames, a float32 Y beside float64 factors — which is
    converted once; the solvers convert at their boundary anyway). ``fn`` must act row-wise (entry
    (i, j) of E depends on row i of D and row_args only, plus whatever it closes over for column j).

    Reverse mode has a custom rule that recomputes each panel and pulls the cotangents back
    through it (``jax.vjp`` of the panel), again panel by panel: nothing of size n1 × n2 is
    stored between the forward and backward passes, and the backward costs about two forward
    passes, where plain autodiff of the panel scan stores every panel's D and E.

    Args:
      Y: (n1, n2) observation.
      L: (n1, r) and R: (n2, r), the factors.
      fn: ``fn(D_panel, *row_args_panel) -> (E_panel, stats)``, acting row-wise; it may close over
        traced values (thresholds, column cut-offs), and gradients flow to them.
      row_args: arrays whose leading axis has length n1, split with the rows (per-row thresholds,
        masks); default none.

    Returns:
      ``(E R, Eᵀ L, stats)``: shapes (n1, r), (n2, r), and ``stats`` (a pytree of scalars such as
      ‖E‖² or counts) summed over the panels.
    """
    n1, n2 = Y.shape
    # D = Y − L Rᵀ is computed in the promoted float dtype (integer frames, a float32 Y beside
    # float64 factors); the panels and accumulators must be typed like D, not like Y.
    dtype = jnp.result_type(Y, L, R)
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(float)
    Y, L, R = Y.astype(dtype), L.astype(dtype), R.astype(dtype)
    rows = _panel_rows(n1, n2, Y.dtype.itemsize)

    # The closed-over tracers of ``fn`` become explicit arguments (for the custom reverse rule);
    # the converted function has fixed shapes, so a ragged last panel gets its own conversion.
    def convert(m):
        example = (
            jax.ShapeDtypeStruct((m, n2), Y.dtype),
            *(jax.ShapeDtypeStruct((m,) + a.shape[1:], a.dtype) for a in row_args),
        )
        return jax.closure_convert(fn, *example)

    fn_head, consts = convert(rows)
    fn_tail = None
    if n1 % rows:
        fn_tail, consts_tail = convert(n1 % rows)
        if len(consts_tail) != len(consts) or any(a is not b for a, b in zip(consts, consts_tail)):
            raise RuntimeError("residual_map_products: fn closes over different values per call")
    return _panel_products((fn_head, fn_tail), rows, Y, L, R, row_args, tuple(consts))


def _panel_apply(fn, y, l, R, args, consts):
    """One panel: (E R, lᵀ E, stats) with (E, stats) = fn(y − l Rᵀ, *args, *consts). E is taken in
    Y's dtype: an ``fn`` that closes over a float64 value (x64 on, float32 Y) promoted E, and the
    scan that sums the panels refused a carry whose type changed."""
    E, stats = fn(y - l @ R.T, *args, *consts)
    E = E.astype(y.dtype)
    return E @ R, l.T @ E, stats


def _split_rows(a, rows):
    """(n1, ...) -> ((n1 // rows, rows, ...), the ragged remainder (n1 % rows, ...) or None)."""
    full, rest = divmod(a.shape[0], rows)
    head = a[: full * rows].reshape((full, rows) + a.shape[1:])
    return head, (a[full * rows :] if rest else None)


def _join_rows(head, tail):
    head = head.reshape((-1,) + head.shape[2:])
    return head if tail is None else jnp.concatenate([head, tail])


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _panel_products(fns, rows, Y, L, R, row_args, consts):
    return _panel_forward(fns, rows, Y, L, R, row_args, consts)


def _panel_forward(fns, rows, Y, L, R, row_args, consts):
    fn, fn_tail = fns
    (y_h, y_t), (l_h, l_t) = _split_rows(Y, rows), _split_rows(L, rows)
    a_split = [_split_rows(a, rows) for a in row_args]
    stats_shape = jax.eval_shape(
        lambda: _panel_apply(fn, y_h[0], l_h[0], R, tuple(h[0] for h, _ in a_split), consts)[2]
    )

    def body(acc, xs):
        y, l, args = xs
        g_l, g_rt, stats = _panel_apply(fn, y, l, R, args, consts)
        acc_rt, acc_stats = acc
        return (acc_rt + g_rt, jax.tree.map(jnp.add, acc_stats, stats)), g_l

    zero_stats = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), stats_shape)
    (g_rt, stats), g_l = jax.lax.scan(
        body,
        (jnp.zeros((L.shape[1], Y.shape[1]), Y.dtype), zero_stats),
        (y_h, l_h, tuple(h for h, _ in a_split)),
    )
    t_l = None
    if y_t is not None:
        t_l, t_rt, t_stats = _panel_apply(
            fn_tail, y_t, l_t, R, tuple(t for _, t in a_split), consts
        )
        g_rt = g_rt + t_rt
        stats = jax.tree.map(jnp.add, stats, t_stats)
    return _join_rows(g_l, t_l), g_rt.T, stats


# traced when a caller's jit is differentiated, after the solver's context has closed
@full_precision
def _panel_products_fwd(fns, rows, Y, L, R, row_args, consts):
    return _panel_forward(fns, rows, Y, L, R, row_args, consts), (Y, L, R, row_args, consts)


def _is_float(a):
    return jnp.issubdtype(jnp.result_type(a), jnp.inexact)


def _float0_zeros(a):
    return np.zeros(jnp.shape(a), dtype=jax.dtypes.float0)


@full_precision  # traced when the gradient is taken, after the solver's context has closed
def _panel_products_bwd(fns, rows, res, cts):
    Y, L, R, row_args, consts = res
    ct_gl, ct_gr, ct_stats = cts
    ct_grt = ct_gr.T
    (y_h, y_t), (l_h, l_t), (c_h, c_t) = (_split_rows(a, rows) for a in (Y, L, ct_gl))
    # Only floating inputs get cotangents; masks and counts get float0 zeros at the end.
    fa = [i for i, a in enumerate(row_args) if _is_float(a)]
    fc = [i for i, c in enumerate(consts) if _is_float(c)]
    a_split = [_split_rows(row_args[i], rows) for i in range(len(row_args))]

    def pull(y, l, args, ct_l, fn):  # cotangents of one panel's floating inputs
        def f(y, l, R, fargs, fconsts):
            full_args = list(args)
            for i, v in zip(fa, fargs):
                full_args[i] = v
            full_consts = list(consts)
            for i, v in zip(fc, fconsts):
                full_consts[i] = v
            return _panel_apply(fn, y, l, R, tuple(full_args), tuple(full_consts))

        _, vjp = jax.vjp(f, y, l, R, tuple(args[i] for i in fa), tuple(consts[i] for i in fc))
        return vjp((ct_l, ct_grt, ct_stats))

    def body(acc, xs):
        y, l, args, ct_l = xs
        dy, dl, dR, dargs, dconsts = pull(y, l, args, ct_l, fns[0])
        acc = jax.tree.map(jnp.add, acc, (dR, dconsts))
        return acc, (dy, dl, dargs)

    zeros = jax.tree.map(jnp.zeros_like, (R, tuple(consts[i] for i in fc)))
    (dR, dconsts), (dy, dl, dargs) = jax.lax.scan(
        body, zeros, (y_h, l_h, tuple(h for h, _ in a_split), c_h)
    )
    if y_t is not None:
        ty, tl, tR, targs, tconsts = pull(y_t, l_t, tuple(t for _, t in a_split), c_t, fns[1])
        dR, dconsts = jax.tree.map(jnp.add, (dR, dconsts), (tR, tconsts))
    else:
        ty = tl = None
        targs = tuple(None for _ in fa)
    d_args = [_float0_zeros(a) for a in row_args]
    for j, i in enumerate(fa):
        d_args[i] = _join_rows(dargs[j], targs[j])
    d_consts = [_float0_zeros(c) for c in consts]
    for j, i in enumerate(fc):
        d_consts[i] = dconsts[j]
    return _join_rows(dy, ty), _join_rows(dl, tl), dR, tuple(d_args), tuple(d_consts)


_panel_products.defvjp(_panel_products_fwd, _panel_products_bwd)
