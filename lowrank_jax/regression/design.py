"""Design matrices A (n × d): dense arrays or row-sparse storage, behind one set of products.

Every product the solvers need goes through the functions here, so the same code handles both:

    matvec(A, x) = A x,   rmatvec(A, y) = Aᵀ y,   matmat(A, X) = A X,
    gram(A, s) = Aᵀ diag(s) A,   take_rows(A, idx),   count_sketch(A, ...).

Sparse matrices are stored as ``RowSparse`` — per row, the column indices and values of its
non-zeros, padded to the longest row (q) with zeros — so that Aᵀ diag(s) A is one scatter of the
n q² row outer products, O(nnz · q) work, and a subset of rows is a gather (the sampled Hessian).
Convert a ``jax.experimental.sparse.BCOO`` (or a dense array) with ``as_design`` outside
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
    products, O(nnz · q), and a subset of rows is a gather. Build one with ``as_design``.

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


def _row_sparse(A: RowSparse, name: str) -> RowSparse:
    """A ``RowSparse`` checked and in its compute dtype: cols and vals of one (n, q) shape,
    real finite values (``lowrank_jax._checks.as_matrix``: half precision and integers become
    float32 / the default float), column indices in [0, num_cols) (``_COLUMNS``)."""
    if A.cols.shape != A.vals.shape or A.cols.ndim != 2:
        raise ValueError(
            f"{name}: RowSparse cols and vals must be (n, q) arrays of one shape, got "
            f"{A.cols.shape} and {A.vals.shape}"
        )
    vals = _checks.as_matrix(A.vals, name, min_rows=0)
    if vals.size:
        _checks.check_scale(vals, name)  # the Gram AᵀDA sums squares of these
    _COLUMNS.apply({"cols": A.cols, "num_cols": A.num_cols, "name": name})
    return A if vals is A.vals else RowSparse(A.cols, vals, A.num_cols)


def _columns_message(a) -> str:
    """The column indices of a RowSparse lie outside [0, num_cols)."""
    cols = np.asarray(a["cols"])
    return (
        f"{a['name']}: RowSparse column indices must lie in [0, {a['num_cols']}), got "
        f"{cols.min()}..{cols.max()}"
    )


# matvec's gather clamps a column index past the end onto the last column while rmatvec's scatter
# drops it: the two products of one matrix would disagree. Checked where the indices are concrete.
_COLUMNS = _checks.Rule(
    lambda a: (
        (jnp.min(a["cols"], initial=0) >= 0) & (jnp.max(a["cols"], initial=0) < a["num_cols"])
    ),
    _checks.Message(_columns_message),
    uses=("cols",),
)


def _row_layout(A, name: str) -> RowSparse:
    """The ``RowSparse`` of a concrete 2-D ``BCOO``: its non-zeros sorted by row, each row
    padded to the longest."""
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


def convert(A, name: str = "A", args=None):
    """A design in the form the solvers take (the conversion of ``as_design``, usable as
    ``_checks.Convert(convert)``): a ``RowSparse`` checked, a ``BCOO`` or ``scipy.sparse``
    matrix as a ``RowSparse``, anything else a checked dense 2-D float array. ``args`` (the
    arguments of a declared function) is not used.

    Args:
      A: the design.
      name: the argument's name, for the messages (default ``"A"``).
      args: the arguments of a declared function (not used).

    Returns:
      A ``RowSparse`` or a dense 2-D float array.
    """
    del args
    if isinstance(A, RowSparse):
        return _row_sparse(A, name)
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
        layout = _checks.when_concrete(lambda B: _row_layout(B, name), A)
        if layout is None:
            raise ValueError(
                f"convert {name} with regression.as_design(A) outside jit: the row layout "
                "needs concrete indices"
            )
        return layout
    A = _checks.as_matrix(A, name)
    _checks.check_scale(A, name)  # the Gram AᵀDA and the Hessian sum squares of its entries
    return A


# The design argument ``A`` of every public function of the family.
DESIGN = _checks.Convert(convert)


@_checks.validate(A=_checks.Convert(lambda v, _, args: convert(v, args["name"])))
def as_design(A, name: str = "A"):
    """A design in the form the solvers take: a checked dense array or a ``RowSparse``.

    A ``BCOO``, a ``scipy.sparse`` matrix or a ``RowSparse`` becomes a ``RowSparse``, anything
    else a dense 2-D float array. Checked: real, finite, of a scale whose sums of squares its dtype
    holds (``lowrank_jax._checks.check_scale``), column indices in range; half precision and
    integers become float32 / the default float, for sparse input as for dense. Convert a ``BCOO``
    outside ``jit``: its row layout needs concrete indices.

    Args:
      A: (n, d) dense array, ``jax.experimental.sparse.BCOO`` (2-D, without batch or dense
        dimensions), ``scipy.sparse`` matrix or ``RowSparse``.
      name: the argument's name in error messages (default "A").

    Returns:
      The (n, d) dense array or ``RowSparse``.
    """
    return A


def shape(A):
    """The shape (n, d) of a design.

    Args:
      A: dense, ``BCOO`` or ``RowSparse`` design.

    Returns:
      (n, d), a tuple of ints.
    """
    return A.shape


def nnz(A) -> int:
    """The number of stored non-zeros of a design.

    Args:
      A: dense, ``BCOO`` or ``RowSparse`` design (concrete).

    Returns:
      The count of a ``RowSparse``'s non-zeros (explicit zeros in its buffer not counted); n·d
      for any other design, dense or ``BCOO``.
    """
    return (
        int(np.count_nonzero(np.asarray(A.vals)))
        if isinstance(A, RowSparse)
        else int(np.prod(A.shape))
    )


def _inner(what: str, arg: str) -> _checks.Rule:
    """The rule that ``arg`` has one row per column of ``A`` (its first axis; shapes only)."""
    return _checks.Rule(
        lambda a: jnp.ndim(a[arg]) >= 1 and jnp.shape(a[arg])[0] == a["A"].shape[1],
        _checks.Message(
            lambda a: (
                f"{what}: A has {a['A'].shape[1]} columns but the vector/matrix has shape "
                f"{tuple(jnp.shape(a[arg]))}"
            )
        ),
        uses=(),
    )


def _outer(what: str, arg: str) -> _checks.Rule:
    """The rule that ``arg`` is a vector with one entry per row of ``A`` (a length-1 vector would
    broadcast silently; shapes only)."""
    return _checks.Rule(
        lambda a: jnp.shape(a[arg]) == (a["A"].shape[0],),
        _checks.Message(
            lambda a: (
                f"{what}: A has {a['A'].shape[0]} rows but {arg} has shape "
                f"{tuple(jnp.shape(a[arg]))} (a vector of length {a['A'].shape[0]} is needed)"
            )
        ),
        uses=(),
    )


@_checks.validate(_inner("matvec", "x"))
def matvec(A, x):
    """The product A x.

    Args:
      A: (n, d) dense or ``RowSparse`` design.
      x: (d,) vector.

    Returns:
      (n,) array A x.
    """
    if isinstance(A, RowSparse):
        return jnp.sum(A.vals * x[A.cols], axis=1)
    return A @ x


@_checks.validate(_inner("matmat", "X"))
def matmat(A, X):
    """The product A X.

    Args:
      A: (n, d) dense or ``RowSparse`` design.
      X: (d, t) matrix.

    Returns:
      (n, t) array A X.
    """
    if isinstance(A, RowSparse):
        return jnp.einsum("nq,nqt->nt", A.vals, X[A.cols])
    return A @ X


@_checks.validate(_outer("rmatvec", "y"))
def rmatvec(A, y):
    """The product Aᵀ y.

    Args:
      A: (n, d) dense or ``RowSparse`` design.
      y: (n,) vector.

    Returns:
      (d,) array Aᵀ y.
    """
    if isinstance(A, RowSparse):
        terms = A.vals * y[:, None]  # the buffer in the promoted dtype, as the dense product's
        return jnp.zeros(A.num_cols, terms.dtype).at[A.cols].add(terms)
    # Not A.T @ y: XLA:CPU's transposed matrix-vector product is ~10x slower than this fused
    # multiply-and-reduce over rows (43 ms vs 3.5 ms at 50 000 × 100, float64).
    return jnp.sum(A * y[:, None], axis=0)


@_checks.validate(_outer("gram", "s"))
def gram(A, s):
    """The weighted Gram matrix Aᵀ diag(s) A = Σ_i s_i a_i a_iᵀ over the rows a_i of A.

    Args:
      A: (n, d) dense or ``RowSparse`` design.
      s: (n,) row weights.

    Returns:
      (d, d) array Aᵀ diag(s) A.
    """
    if isinstance(A, RowSparse):
        outer = (s[:, None, None] * A.vals[:, :, None]) * A.vals[:, None, :]
        d = A.num_cols
        return jnp.zeros((d, d), outer.dtype).at[A.cols[:, :, None], A.cols[:, None, :]].add(outer)
    return (A * s[:, None]).T @ A


def column_norms(A):
    """The Euclidean norm ‖a_j‖ of each column j of A, in one pass over A.

    Args:
      A: (n, d) dense or ``RowSparse`` design.

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
      A: (n, d) dense or ``RowSparse`` design.
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
      A: (n, d) dense or ``RowSparse`` design.
      idx: (m,) integer row indices (repeats allowed).

    Returns:
      (m, d) design of the same format as A.
    """
    if isinstance(A, RowSparse):
        return RowSparse(A.cols[idx], A.vals[idx], A.num_cols)
    return A[idx]


@_checks.validate(key=_checks.Key(), k=_checks.Count())
def count_sketch(key, A, row_scale, k: int):
    """A CountSketch S diag(row_scale) A of the rows of A, in O(nnz(A)).

    S (k × n) sends every row to one uniformly random bucket of k with a random sign (Clarkson,
    Woodruff 2013), so the product is one scatter-add.

    Args:
      key: ``jax.random`` key of the buckets and signs.
      A: (n, d) dense or ``RowSparse`` design.
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
