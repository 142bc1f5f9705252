"""Synthetic robust-PCA instances: the generator of the LRPCA paper
(Cai, Liu, Yin 2021, App. C.1)."""

from __future__ import annotations

import functools
import math
import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import _checks
from lowrank_jax.prox import top_fraction_count


class RPCAProblem(NamedTuple):
    """A robust-PCA instance Y = X + S with X = L Rᵀ of rank r and S sparse.

    Attributes:
      Y: (n1, n2) observation.
      X: (n1, n2) low-rank ground truth X⋆ = L Rᵀ.
      S: (n1, n2) sparse outliers S⋆.
      L: (n1, r) left factor L⋆.
      R: (n2, r) right factor R⋆.
    """

    Y: jax.Array  # (n1, n2) observation
    X: jax.Array  # (n1, n2) low-rank ground truth X⋆
    S: jax.Array  # (n1, n2) sparse outliers S⋆
    L: jax.Array  # (n1, r)
    R: jax.Array  # (n2, r)


def _concrete_value(x) -> float | None:
    """``x`` as a Python float when it holds a concrete scalar (Python, NumPy or JAX; a boolean as
    0 or 1), else None (a tracer: checked by the caller's shape rules only)."""
    return float(x) if isinstance(x, (bool, np.bool_)) else _checks.as_real(x)


def _check_alpha(alpha) -> None:
    """α: one number in [0, 1] (a Python, NumPy or JAX scalar; traced under ``vmap``, then checked
    for shape only). An array of α's failed with "Cannot broadcast to shape with fewer dimensions",
    deep in JAX; it is refused by name, as are strings, NaN and values outside [0, 1]."""
    _checks.as_hyper(alpha, "alpha", ndim=0)  # a real scalar, not NaN, ≥ 0 (checks only)
    a = _concrete_value(alpha)
    if a is not None and not a <= 1:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")


def _outlier_count(alpha, size: int, dtype):
    """m = ⌊α · size⌋ as an int32 scalar, 0 ≤ m ≤ size.

    A concrete α is multiplied in float64 with a relative slack of 1e-9 (4 ulp of α's own dtype when
    that is coarser, e.g. a NumPy float32 α), so that decimal fractions whose binary value falls a
    hair short (0.29 · 100 = 28.999…) still count exactly. A traced α (``vmap`` over it) goes
    through ``lowrank_jax.prox.top_fraction_count`` (float32 or wider, relative slack 8 ulp); in
    float32 the count can then exceed ⌊α · size⌋ by one when α · size is above about 10⁵ and its
    fractional part is within 8 ulp · α · size of the next integer. α = 0 gives 0 either way."""
    a = _concrete_value(alpha)
    if a is not None:
        given = getattr(alpha, "dtype", None)
        slack = (
            4 * float(jnp.finfo(given).eps)
            if given is not None and jnp.issubdtype(given, jnp.floating)
            else 0.0
        )
        return jnp.asarray(min(math.floor(a * size * (1 + max(slack, 1e-9))), size), jnp.int32)
    return jnp.clip(top_fraction_count(jnp.asarray(alpha, dtype), size), 0, size)


def random_support(
    key: jax.Array | int, shape: tuple[int, int], alpha, *, exact: bool = True, dtype=jnp.float32
) -> jax.Array:
    """Boolean mask of outlier positions, a fraction ``alpha`` of all entries of a 2-D shape.

    ``exact=True``: exactly m = ⌊α n1 n2⌋ positions drawn uniformly without replacement (the
    authors' ``randperm(n1*n2)[:m]``), as the m smallest of i.i.d. uniform keys; the rare exact ties
    at the cut-off are broken by position. The m-th smallest key is found by bisection (about 30
    counting passes), without ``jax.random.permutation``, which is slow on a CPU for large shapes. m
    is exact for a concrete α; a traced α is counted by ``lowrank_jax.prox.top_fraction_count``,
    which in float32 can exceed ⌊α n1 n2⌋ by one when α n1 n2 is above about 10⁵ and its fractional
    part is within 8 ulp · α n1 n2 of the next integer. ``exact=False``: every entry independently
    with probability α (the count is Binomial(n1 n2, α)); cheapest inside training loops.

    Args:
      key: a ``jax.random`` key or an integer seed.
      shape: (n1, n2), two positive integers (anything else raises ``ValueError``).
      alpha: the fraction α ∈ [0, 1], a Python, NumPy or JAX scalar (traced under ``vmap``). A
        concrete value outside [0, 1], NaN or an array raises ``ValueError`` naming ``alpha``.
      exact: True (default) for exactly ⌊α n1 n2⌋ positions, False for independent draws.
      dtype: the floating dtype of the uniform keys (at least float32 is drawn) and of a traced α's
        count; default float32.

    Returns:
      A boolean (n1, n2) array.
    """
    if len(shape) != 2 or any(
        isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 1 for d in shape
    ):
        raise ValueError(f"shape must be two positive integers (n1, n2), got {shape!r}")
    key = _checks.as_key(key)
    _check_alpha(alpha)
    exact = _checks.check_flag(exact, "exact")
    level = _outlier_count(alpha, shape[0] * shape[1], dtype) if exact else alpha
    return _draw_support(key, level, shape=tuple(shape), exact=exact, dtype=jnp.dtype(dtype))


@functools.partial(jax.jit, static_argnames=("shape", "exact", "dtype"))
def _draw_support(key, level, *, shape, exact, dtype):
    """random_support's draw as one program; ``level`` is the count m (exact) or α (Bernoulli).

    The keys are drawn in at least float32 whatever ``dtype``: bfloat16 keys take 128 values in
    [0, 1), so ties at the cut-off would be the rule, and breaking them by position would crowd the
    support into the first rows."""
    u = jax.random.uniform(key, shape, jnp.promote_types(dtype, jnp.float32))
    if not exact:
        return u < level
    return _smallest(u.reshape(-1), level).reshape(shape)


def _smallest(u, m):
    """Mask of the m smallest entries of the non-negative floats ``u`` (1-D), ties at the cut-off
    broken by position: exactly m entries for 0 <= m <= u.size.

    The cut-off is found by bisection over the floats' bit patterns, which order non-negative floats
    as their values: ``c`` = the least pattern with #{bits(u) <= c} >= m, the bracket lo < c <= hi
    halving per counting pass (about 30 passes for uniform float32 keys in [0, 1)). The general
    ``kth_largest`` needs fewer passes but a much larger program, whose compilation a generator
    called once per size pays every time.
    """
    itype = {2: jnp.int16, 4: jnp.int32, 8: jnp.int64}[u.dtype.itemsize]
    bits = jax.lax.bitcast_convert_type(u, itype)

    def halve(bracket):
        lo, hi = bracket
        mid = lo + (hi - lo) // 2
        enough = jnp.sum(bits <= mid, dtype=jnp.int32) >= m
        return jnp.where(enough, lo, mid), jnp.where(enough, mid, hi)

    # invariant for m >= 1: #{bits <= lo} < m <= #{bits <= hi}
    _, cut = jax.lax.while_loop(
        lambda b: b[1] - b[0] > 1, halve, (jnp.asarray(-1, itype), jnp.max(bits))
    )
    below, tied = bits < cut, bits == cut
    extra = m - jnp.sum(below, dtype=jnp.int32)
    return (below | (tied & (jnp.cumsum(tied, dtype=jnp.int32) <= extra))) & (m > 0)


def rpca_problem(
    key: jax.Array | int,
    n1: int,
    n2: int,
    rank: int,
    alpha,
    *,
    outlier_scale=1.0,
    exact_support: bool = True,
    dtype=jnp.float32,
) -> RPCAProblem:
    """The LRPCA paper's synthetic instance (Cai, Liu, Yin 2021, App. C.1), outliers as in its code.

    X⋆ = L⋆R⋆ᵀ with L⋆ (n1 × r) and R⋆ (n2 × r) of i.i.d. N(0, 1/n1) and N(0, 1/n2) entries (the
    paper's N(0, 1/n) for square problems); the support of S⋆ is a uniformly drawn fraction
    ``alpha`` of all entries (see ``random_support``); its values are i.i.d. U[−c, c] with c =
    ``outlier_scale`` · mean|X⋆_ij|. The printed paper says U[−E[X⋆_ij], E[X⋆_ij]], which is
    zero-width for centred factors; the authors' code uses mean|X⋆|, which makes the outliers small
    (≈ ‖X⋆‖∞/10). Raise ``outlier_scale`` for larger outliers.

    Args:
      key: a ``jax.random`` key or an integer seed.
      n1: the number of rows, an integer ≥ 1 (static).
      n2: the number of columns, an integer ≥ 1 (static).
      rank: r, an integer with 1 ≤ r ≤ min(n1, n2) (static).
      alpha: the outlier fraction α ∈ [0, 1], a scalar; may be traced (``vmap`` over it).
      outlier_scale: the multiple of mean|X⋆_ij| that bounds the outliers, finite and ≥ 0 (default
        1.0); may be traced.
      exact_support: True (default) for exactly ⌊α n1 n2⌋ outliers (the code's ``randperm``), False
        for each entry independently with probability α (``random_support``'s ``exact``).
      dtype: the floating dtype of the arrays (default float32).

    Returns:
      An ``RPCAProblem`` (Y, X, S, L, R).
    """
    # Sizes as Python ints: a concrete 0-d integer array (jnp.int32(5)) is an integer too.
    n1, n2, rank = (
        _checks.check_positive_int(v, name) for name, v in (("n1", n1), ("n2", n2), ("rank", rank))
    )
    if rank > min(n1, n2):
        raise ValueError(f"rank must be <= min(n1, n2) = {min(n1, n2)}, got {rank}")
    if n1 * n2 > _checks.INT32_MAX:
        raise ValueError(
            f"n1 * n2 = {n1 * n2} entries is past {_checks.INT32_MAX} (2**31 - 1), the most the "
            "outlier support's int32 indices hold (the matrix alone would take "
            f"{4 * n1 * n2 / 2**30:.0f} GiB in float32)"
        )
    _check_alpha(alpha)
    try:
        dtype = jnp.dtype(dtype)
    except TypeError:
        raise TypeError(
            f"dtype must be a floating dtype such as jnp.float32, got {dtype!r}"
        ) from None
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"dtype must be a floating dtype such as jnp.float32, got {dtype}")
    if outlier_scale is None or np.ndim(outlier_scale) != 0:
        raise ValueError(f"outlier_scale must be a scalar, got {outlier_scale!r}")
    scale = _concrete_value(outlier_scale)
    if scale is not None and not 0 <= scale < math.inf:  # NaN and inf fail too
        raise ValueError(f"outlier_scale must be a finite non-negative number, got {outlier_scale}")
    key = _checks.as_key(key)
    exact_support = _checks.check_flag(exact_support, "exact_support")
    level = _outlier_count(alpha, n1 * n2, dtype) if exact_support else alpha
    return _draw_problem(
        key,
        level,
        outlier_scale,
        n1=n1,
        n2=n2,
        rank=rank,
        exact=exact_support,
        dtype=dtype,
    )


@functools.partial(jax.jit, static_argnames=("n1", "n2", "rank", "exact", "dtype"))
def _draw_problem(key, level, outlier_scale, *, n1, n2, rank, exact, dtype):
    """rpca_problem's draws as one program (op by op, each new size compiled some twenty small
    programs); ``level`` as in ``_draw_support``."""
    k_l, k_r, k_s, k_v = jax.random.split(key, 4)
    L = jax.random.normal(k_l, (n1, rank), dtype) / jnp.sqrt(jnp.asarray(n1, dtype))
    R = jax.random.normal(k_r, (n2, rank), dtype) / jnp.sqrt(jnp.asarray(n2, dtype))
    X = L @ R.T
    c = jnp.asarray(outlier_scale, dtype) * jnp.mean(jnp.abs(X))
    # Drawn in at least float32 and then rounded: bfloat16's own uniform draw is exactly 0 about
    # once in 256, an outlier position whose entry of S⋆ is 0 (79 non-zeros for a support of 80).
    wide = jnp.promote_types(dtype, jnp.float32)
    values = jax.random.uniform(k_v, (n1, n2), wide, minval=-1.0, maxval=1.0).astype(dtype) * c
    support = _draw_support(k_s, level, shape=(n1, n2), exact=exact, dtype=dtype)
    S = jnp.where(support, values, jnp.zeros_like(values))
    return RPCAProblem(X + S, X, S, L, R)
