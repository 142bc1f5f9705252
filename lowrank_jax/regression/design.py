"""Design matrices A (n × d): dense arrays or row-sparse storage, behind one set of products.

Every product the solvers need goes through the functions here, so the same code handles both:

    matvec(A, x) = A x,   rmatvec(A, y) = Aᵀ y,   matmat(A, X) = A X,
    gram(A, s) = Aᵀ diag(s) A,   take_rows(A, idx),   count_sketch(A, ...).

Sparse matrices are stored as :class:`RowSparse` — per row, the column indices and values of its
non-zeros, padded to the longest row (q) with zeros — so that Aᵀ diag(s) A is one scatter of the
n q² row outer products, O(nnz · q) work, and a subset of rows is a gather (the sampled Hessian).
Convert a ``jax.experimental.sparse.BCOO`` (or a dense array) with :func:`as_design` outside
``jit``.
"""

from __future__ import annotations

import types

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import _checks


class RowSparse(eqx.Module):
    """A sparse (n, num_cols) design stored by rows, each padded to the longest row's q entries.

    Row i has the values ``vals[i]`` at the columns ``cols[i]``; a row with fewer than q non-zeros
    is padded with value 0 at column 0. Aᵀ diag(s) A is then one scatter of the n q² row outer
    products, O(nnz · q), and a subset of rows is a gather. Build one with :func:`as_design`.

    Attributes:
      cols: (n, q) int32 column indices, in [0, num_cols).
      vals: (n, q) values (0 in the padding).
      num_cols: the number of columns (static).
      shape: (n, num_cols), as for a dense array.
      dtype: the dtype of ``vals``.
    """

    cols: jax.Array  # (n, q) int32
    vals: jax.Array  # (n, q)
    num_cols: int = eqx.field(static=True)

    @property
    def shape(self):
        return (self.cols.shape[0], self.num_cols)

    @property
    def dtype(self):
        return self.vals.dtype

    def todense(self):
        """The (n, num_cols) dense array of the same matrix."""
        n = self.cols.shape[0]
        return (
            jnp.zeros(self.shape, self.vals.dtype)
            .at[jnp.arange(n)[:, None], self.cols]
            .add(self.vals)
        )


def as_design(A, name: str = "A"):
    """A design in the form the solvers take: a checked dense array or a :class:`RowSparse`.

    A ``BCOO``, a ``scipy.sparse`` matrix or a ``RowSparse`` becomes a :class:`RowSparse`, anything
    else a dense 2-D float array. Checked: real, finite, column indices in range; half precision and
    integers become float32 / the default float, for sparse input as for dense. Convert a ``BCOO``
    outside ``jit``: its row layout needs concrete indices.

    Args:
      A: (n, d) dense array, ``jax.experimental.sparse.BCOO`` (2-D, without batch or dense
        dimensions), ``scipy.sparse`` matrix or :class:`RowSparse`.
      name: the argument's name in error messages (default "A").

    Returns:
      The (n, d) dense array or :class:`RowSparse`.
    """
    if isinstance(A, RowSparse):
        if A.cols.shape != A.vals.shape or A.cols.ndim != 2:
            raise ValueError(
                f"{name}: RowSparse cols and vals must be (n, q) arrays of one shape, got "
                f"{A.cols.shape} and {A.vals.shape}"
            )
        _checks._require_real_numbers(A.vals.dtype, name)
        if _checks.is_concrete(A.vals) and _checks.is_concrete(A.cols):
            cols, vals = np.asarray(A.cols), np.asarray(A.vals)
            if not np.all(np.isfinite(vals)):
                raise ValueError(f"{name} has non-finite entries (NaN or inf)")
            if cols.size and (cols.min() < 0 or cols.max() >= A.num_cols):
                raise ValueError(
                    f"{name}: RowSparse column indices must lie in [0, {A.num_cols}), got "
                    f"{cols.min()}..{cols.max()}"
                )
        dtype = _checks.compute_dtype(A.vals.dtype)  # float16 reached LAPACK and failed there
        return A if dtype == A.vals.dtype else RowSparse(A.cols, A.vals.astype(dtype), A.num_cols)
    sparse: types.ModuleType | None
    try:
        from jax.experimental import sparse
    except ImportError:  # pragma: no cover
        sparse = None
    if (
        sparse is not None and hasattr(A, "tocoo") and hasattr(A, "toarray")
    ):  # scipy.sparse: its BCOO
        A = sparse.BCOO.from_scipy_sparse(A)
    if sparse is not None and isinstance(A, sparse.BCOO):
        if A.ndim != 2 or A.n_batch or A.n_dense:
            raise ValueError(f"{name} must be a 2-D BCOO matrix without batch or dense dimensions")
        if not _checks.is_concrete(A.data):
            raise ValueError(
                f"convert {name} with regression.as_design(A) outside jit: the row layout "
                "needs concrete indices"
            )
        idx, val = np.asarray(A.indices), np.asarray(A.data)
        _checks._require_real_numbers(val.dtype, name)  # a complex matrix lost its imaginary part
        if not np.all(np.isfinite(val)):
            raise ValueError(f"{name} has non-finite entries (NaN or inf)")
        n, d = A.shape
        keep = (idx[:, 0] < n) & (idx[:, 1] < d)  # BCOO pads with out-of-range indices
        idx, val = idx[keep], val[keep]
        order = np.lexsort((idx[:, 1], idx[:, 0]))
        idx, val = idx[order], val[order]
        counts = np.bincount(idx[:, 0], minlength=n)
        q = max(int(counts.max(initial=0)), 1)
        slot = np.arange(len(idx)) - np.repeat(np.cumsum(counts) - counts, counts)
        cols = np.zeros((n, q), np.int32)
        vals = np.zeros((n, q), _checks.compute_dtype(val.dtype))
        cols[idx[:, 0], slot] = idx[:, 1]
        vals[idx[:, 0], slot] = val
        return RowSparse(jnp.asarray(cols), jnp.asarray(vals), d)
    return _checks.as_matrix(A, name)


def shape(A):
    """The shape (n, d) of a design.

    Args:
      A: dense, ``BCOO`` or :class:`RowSparse` design.

    Returns:
      (n, d), a tuple of ints.
    """
    return A.shape


def nnz(A) -> int:
    """The number of stored non-zeros of a design.

    Args:
      A: dense, ``BCOO`` or :class:`RowSparse` design (concrete).

    Returns:
      int: the non-zeros of a :class:`RowSparse` (explicit zeros in its buffer not counted); n·d for
      any other design, dense or ``BCOO``.
    """
    return (
        int(np.count_nonzero(np.asarray(A.vals)))
        if isinstance(A, RowSparse)
        else int(np.prod(A.shape))
    )


def _check_inner(A, x, what: str) -> None:
    if x.ndim < 1 or x.shape[0] != A.shape[1]:
        raise ValueError(
            f"{what}: A has {A.shape[1]} columns but the vector/matrix has shape {tuple(x.shape)}"
        )


def _check_outer(A, v, what: str, name: str) -> None:
    """``v`` must be a vector with one entry per row of A (a length-1 vector broadcast silently)."""
    shape = tuple(jnp.shape(v))
    if len(shape) != 1 or shape[0] != A.shape[0]:
        raise ValueError(
            f"{what}: A has {A.shape[0]} rows but {name} has shape {shape} (a vector of length "
            f"{A.shape[0]} is needed)"
        )


def matvec(A, x):
    """The product A x.

    Args:
      A: (n, d) dense or :class:`RowSparse` design.
      x: (d,) vector.

    Returns:
      (n,) array A x.
    """
    _check_inner(A, x, "matvec")
    if isinstance(A, RowSparse):
        return jnp.sum(A.vals * x[A.cols], axis=1)
    return A @ x


def matmat(A, X):
    """The product A X.

    Args:
      A: (n, d) dense or :class:`RowSparse` design.
      X: (d, t) matrix.

    Returns:
      (n, t) array A X.
    """
    _check_inner(A, X, "matmat")
    if isinstance(A, RowSparse):
        return jnp.einsum("nq,nqt->nt", A.vals, X[A.cols])
    return A @ X


def rmatvec(A, y):
    """The product Aᵀ y.

    Args:
      A: (n, d) dense or :class:`RowSparse` design.
      y: (n,) vector.

    Returns:
      (d,) array Aᵀ y.
    """
    _check_outer(A, y, "rmatvec", "y")
    if isinstance(A, RowSparse):
        terms = A.vals * y[:, None]  # the buffer in the promoted dtype, as the dense product's
        return jnp.zeros(A.num_cols, terms.dtype).at[A.cols].add(terms)
    # Not A.T @ y: XLA:CPU's transposed matrix-vector product is ~10x slower than this fused
    # multiply-and-reduce over rows (43 ms vs 3.5 ms at 50 000 × 100, float64).
    return jnp.sum(A * y[:, None], axis=0)


def gram(A, s):
    """The weighted Gram matrix Aᵀ diag(s) A = Σ_i s_i a_i a_iᵀ over the rows a_i of A.

    Args:
      A: (n, d) dense or :class:`RowSparse` design.
      s: (n,) row weights.

    Returns:
      (d, d) array Aᵀ diag(s) A.
    """
    _check_outer(A, s, "gram", "s")
    if isinstance(A, RowSparse):
        outer = (s[:, None, None] * A.vals[:, :, None]) * A.vals[:, None, :]
        d = A.num_cols
        return jnp.zeros((d, d), outer.dtype).at[A.cols[:, :, None], A.cols[:, None, :]].add(outer)
    return (A * s[:, None]).T @ A


def column_norms(A):
    """The Euclidean norm ‖a_j‖ of each column j of A, in one pass over A.

    Args:
      A: (n, d) dense or :class:`RowSparse` design.

    Returns:
      (d,) array of the column norms.
    """
    if isinstance(A, RowSparse):
        return jnp.sqrt(jnp.zeros(A.num_cols, A.vals.dtype).at[A.cols].add(A.vals * A.vals))
    return jnp.sqrt(jnp.sum(A * A, axis=0))


def equilibrator(A, floor: float = 0.0):
    """Column scales s that give A diag(s) unit columns, scaling tiny columns up only to a floor.

        s_j = 1 / max(‖a_j‖, floor · max_k ‖a_k‖)     (s = 1 for an all-zero A),

    so a column below ``floor`` relative to the largest is scaled up only as far as that floor.

    Args:
      A: (n, d) dense or :class:`RowSparse` design.
      floor: relative floor, ≥ 0 (default 0: every non-zero column to norm 1).

    Returns:
      (d,) array s.
    """
    norms = column_norms(A)
    least = jnp.maximum(floor * jnp.max(norms), jnp.finfo(norms.dtype).tiny)
    return 1 / jnp.maximum(norms, jnp.where(jnp.max(norms) > 0, least, 1))


def take_rows(A, idx):
    """The rows ``idx`` of A, in A's own format.

    Args:
      A: (n, d) dense or :class:`RowSparse` design.
      idx: (m,) integer row indices (repeats allowed).

    Returns:
      (m, d) design of the same format as A.
    """
    if isinstance(A, RowSparse):
        return RowSparse(A.cols[idx], A.vals[idx], A.num_cols)
    return A[idx]


def count_sketch(key, A, row_scale, k: int):
    """A CountSketch S diag(row_scale) A of the rows of A, in O(nnz(A)).

    S (k × n) sends every row to one uniformly random bucket of k with a random sign (Clarkson,
    Woodruff 2013), so the product is one scatter-add.

    Args:
      key: ``jax.random`` key of the buckets and signs.
      A: (n, d) dense or :class:`RowSparse` design.
      row_scale: (n,) factor applied to each row.
      k: number of buckets, the rows of the sketch (static, ≥ 1).

    Returns:
      (k, d) array S diag(row_scale) A.
    """
    # One scatter-add: on XLA:CPU a random permutation plus a reshape-sum is slower (a sort).
    n = A.shape[0]
    k_bucket, k_sign = jax.random.split(key)
    buckets = jax.random.randint(k_bucket, (n,), 0, k)
    scale = jax.random.rademacher(k_sign, (n,), A.dtype) * row_scale
    if isinstance(A, RowSparse):
        terms = scale[:, None] * A.vals
        return jnp.zeros((k, A.num_cols), terms.dtype).at[buckets[:, None], A.cols].add(terms)
    return jax.ops.segment_sum(scale[:, None] * A, buckets, num_segments=k)


__all__ = [
    "RowSparse",
    "as_design",
    "count_sketch",
    "gram",
    "matmat",
    "matvec",
    "nnz",
    "rmatvec",
    "shape",
    "take_rows",
]
