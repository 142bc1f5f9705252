"""Synthetic robust-PCA instances: the generator of the LRPCA paper (Cai, Liu, Yin 2021, App. C.1)."""

from __future__ import annotations

import numbers
from typing import NamedTuple

import jax
import jax.numpy as jnp

from lowrank_jax.selection import kth_largest


class RPCAProblem(NamedTuple):
    """Y = X + S with X = L Rᵀ of rank r and S sparse."""

    Y: jax.Array  # (n1, n2) observation
    X: jax.Array  # (n1, n2) low-rank ground truth X⋆
    S: jax.Array  # (n1, n2) sparse outliers S⋆
    L: jax.Array  # (n1, r)
    R: jax.Array  # (n2, r)


def random_support(key: jax.Array, shape: tuple[int, int], alpha, *, exact: bool = True,
                   dtype=jnp.float32) -> jax.Array:
    """Boolean mask of outlier positions, a fraction ``alpha`` of all entries.

    ``exact=True``: exactly ⌊α n1 n2⌋ positions drawn uniformly without replacement (the authors'
    ``randperm(n1*n2)[:m]``), as the m smallest of i.i.d. uniform keys; the rare exact ties at the
    cut-off are broken by position. This avoids ``jax.random.permutation``, which costs ~0.8 s for
    10⁶ entries on CPU. ``exact=False``: every entry independently with probability α (the count is
    Binomial(n1 n2, α)); cheapest inside training loops.
    """
    u = jax.random.uniform(key, shape, dtype)
    if not exact:
        return u < alpha
    size = shape[0] * shape[1]
    m = jnp.floor(jnp.asarray(alpha, dtype) * size + 8 * jnp.finfo(dtype).eps * size).astype(jnp.int32)
    flat = u.reshape(-1)
    cut = -kth_largest(-flat, m)  # the m-th smallest key; -inf when m == 0 (keeps nothing)
    below = flat < cut
    tied = flat == cut
    extra = m - jnp.sum(below)
    keep = below | (tied & (jnp.cumsum(tied) <= extra))
    return keep.reshape(shape)


def rpca_problem(key: jax.Array, n1: int, n2: int, rank: int, alpha, *, outlier_scale=1.0,
                 exact_support: bool = True, dtype=jnp.float32) -> RPCAProblem:
    """The LRPCA paper's synthetic instance (Appendix C.1), with the outlier scale of its code.

    X⋆ = L⋆R⋆ᵀ with L⋆ ∈ R^{n1×r}, R⋆ ∈ R^{n2×r} i.i.d. N(0, 1/n1) and N(0, 1/n2) (the paper's
    N(0, 1/n) for square problems); the support of S⋆ is a uniformly drawn fraction ``alpha`` of all
    entries (see :func:`random_support`); its values are i.i.d. U[−c, c] with
    c = ``outlier_scale`` · mean|X⋆_ij|. The printed paper says U[−E[X⋆_ij], E[X⋆_ij]], which is
    zero-width for centred factors; the authors' code uses mean|X⋆| (the project's LRPCA note §11.2),
    which makes the outliers small (≈ ‖X⋆‖_∞/10). Raise ``outlier_scale`` for larger outliers.

    ``alpha`` and ``outlier_scale`` may be traced (``vmap`` over them); sizes are static.

    Returns an :class:`RPCAProblem` (Y, X, S, L, R).
    """
    for name, v in (("n1", n1), ("n2", n2), ("rank", rank)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if rank > min(n1, n2):
        raise ValueError(f"rank must be <= min(n1, n2) = {min(n1, n2)}, got {rank}")
    if isinstance(alpha, numbers.Real) and not 0 <= alpha <= 1:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    if isinstance(outlier_scale, numbers.Real) and outlier_scale < 0:
        raise ValueError(f"outlier_scale must be non-negative, got {outlier_scale}")
    k_l, k_r, k_s, k_v = jax.random.split(key, 4)
    L = jax.random.normal(k_l, (n1, rank), dtype) / jnp.sqrt(jnp.asarray(n1, dtype))
    R = jax.random.normal(k_r, (n2, rank), dtype) / jnp.sqrt(jnp.asarray(n2, dtype))
    X = L @ R.T
    c = jnp.asarray(outlier_scale, dtype) * jnp.mean(jnp.abs(X))
    values = jax.random.uniform(k_v, (n1, n2), dtype, minval=-1.0, maxval=1.0) * c
    support = random_support(k_s, (n1, n2), alpha, exact=exact_support, dtype=dtype)
    S = jnp.where(support, values, jnp.zeros_like(values))
    return RPCAProblem(X + S, X, S, L, R)
