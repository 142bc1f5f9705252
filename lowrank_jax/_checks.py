"""Validation at the public boundary, before anything is traced or computed.

Every public solver calls these first. Value checks (finiteness, signs) are only possible on
concrete arrays; when an argument is a tracer (the caller wrapped us in ``jit``, ``vmap`` or
``grad``) only its shape and dtype are checked and the solver relies on in-graph ``jnp.where``
guards instead.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import numbers
import operator
import os
import sys
import types
import warnings

import equinox
import jax
import jax.numpy as jnp
import numpy as np

# Frames of these packages lie between a user's call and a warning raised inside the toolkit
# (decorators, equinox's method wrappers, JAX's tracing when the call is under jit or vmap).
_INTERNAL_DIRS = tuple(
    os.path.dirname(os.path.abspath(f)) + os.sep for f in (__file__, equinox.__file__, jax.__file__)
)


def warn_caller(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` attributed to the user's line: the first frame outside the toolkit,
    equinox and JAX. A fixed ``stacklevel`` breaks whenever a wrapper adds a frame (equinox
    methods, ``lowrank_jax.precision.full_precision``), and then the warning points into the
    library and the default filter shows it once per library line instead of once per call site."""
    frame: types.FrameType | None = sys._getframe(1)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL_DIRS):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def is_concrete(x) -> bool:
    """True when ``x`` holds actual values (not a tracer of an enclosing transformation)."""
    return not isinstance(x, jax.core.Tracer)


def host_function(public_name: str):
    """Decorator for a function that computes on the host (returns Python or NumPy values, reads
    files, drives its own loops). Called with a traced argument (inside ``jit``/``vmap``/``grad``)
    it raises a ``ValueError`` naming ``public_name`` instead of JAX's tracer error from deep
    inside; called inside a caller's trace with concrete (closed-over) arguments it runs as a direct
    call."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            if not all(is_concrete(x) for x in jax.tree.leaves((args, kwargs))):
                raise ValueError(
                    f"{public_name} computes on the host (it returns Python or NumPy values), so "
                    "its inputs must be concrete: call it outside jit/vmap/grad, "
                    "not on traced values"
                )
            with jax.ensure_compile_time_eval():
                return fn(*args, **kwargs)

        return wrapped

    return decorate


def as_key(key, default: int = 0) -> jax.Array:
    """A JAX PRNG key: ``None`` → ``jax.random.key(default)``, a Python/NumPy integer → the key of
    that seed, a single key (new-style, or raw: uint32 of shape (2,)) as it is. Anything else (a
    float, a string, a float array, an integer array that is not a raw key, a batch of keys) raises
    a ``TypeError`` naming ``key``."""
    if key is None:
        return jax.random.key(default)
    dtype = getattr(key, "dtype", None)
    if isinstance(key, (bool, np.bool_, float, complex, str, bytes)) or (
        dtype is not None
        and not jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
        and not jnp.issubdtype(dtype, jnp.integer)
    ):
        raise TypeError(f"key must be a jax.random key or an integer seed, got {key!r}")
    if isinstance(key, (numbers.Integral, np.integer)) and not isinstance(key, bool):
        return _seed_key(int(key))
    if hasattr(key, "dtype") and np.ndim(key) == 0 and jnp.issubdtype(key.dtype, jnp.integer):
        # A 0-d integer array is a seed too, also traced (a jitted function of the seed, a sweep
        # over seeds): jax.random.key takes a traced integer.
        return _seed_key(int(key)) if is_concrete(key) else jax.random.key(key)
    shape = tuple(np.shape(key))
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        if shape:
            raise TypeError(
                f"key must be a single jax.random key, got a batch of keys of shape {shape} "
                "(vmap over them, or pass one)"
            )
    elif len(shape) != 1 or np.dtype(dtype) != np.uint32:
        # A legacy raw key is a 1-D uint32 array ((2,) for the default implementation); JAX's own
        # message for anything else ("invalid PRNG key data") does not say which argument.
        raise TypeError(
            "key must be a jax.random key, a raw uint32 key of shape (2,) or an integer seed, "
            f"got an array of shape {shape} and dtype {np.dtype(dtype)}"
            + (" (a batch of raw keys: vmap over them, or pass one)" if len(shape) > 1 else "")
        )
    return key


def _seed_key(seed: int) -> jax.Array:
    """``jax.random.key(seed)``, also for seeds of 2³² and more with x64 off: JAX then keeps only
    the low 32 bits (2³² + 5 gave the key of 5, a silent collision in a sweep over large seeds). The
    default threefry key of such a seed is built from its two 32-bit halves, as JAX builds it with
    x64 on, so a seed gives the same key either way; seeds in [0, 2³²) are passed to JAX as
    before."""
    if 0 <= seed < 2**32:
        return jax.random.key(seed)
    # JAX's stubs: Config lacks its option attributes, and wrap_key_data takes any uint32 array
    prng_impl = jax.config.jax_default_prng_impl  # type: ignore[attr-defined]
    x64 = jax.config.jax_enable_x64  # type: ignore[attr-defined]
    if 2**32 <= seed < 2**64 and prng_impl == "threefry2x32":
        bits = np.array([seed >> 32, seed & 0xFFFFFFFF], np.uint32)
        return jax.random.wrap_key_data(bits)  # type: ignore[arg-type]
    if -(2**31) <= seed < 0 or (x64 and -(2**63) <= seed < 2**63):
        return jax.random.key(seed)
    raise ValueError(
        f"key: the integer seed {seed} is out of range (with x64 off: -2**31 <= seed < 2**64)"
    )


def _require_real_numbers(dtype, name: str) -> None:
    """Refuse complex and non-numeric (object, string) dtypes by name; bool and integers pass."""
    kind = np.dtype(dtype).kind if not jnp.issubdtype(dtype, jnp.floating) else "f"
    if kind == "c":
        raise ValueError(f"{name} must be real, got complex dtype {dtype}")
    if kind not in "biuf":
        raise TypeError(f"{name} must hold numbers, got dtype {dtype}")


def compute_dtype(dtype):
    """The dtype the toolkit computes in for data of ``dtype``: integers and bool in the default
    float, float16 and bfloat16 in float32 (no LAPACK routine takes half precision, and every family
    factorises), other floating and complex types as they are."""
    dtype = jnp.dtype(dtype)
    if not jnp.issubdtype(dtype, jnp.inexact):
        return jnp.dtype(jnp.result_type(float))
    if jnp.issubdtype(dtype, jnp.floating) and jnp.finfo(dtype).bits < 32:
        return jnp.dtype(jnp.float32)
    return dtype


def to_jax(x, dtype=None) -> jax.Array:
    """``x`` as a JAX array, in ``dtype`` when given (JAX's canonical form of it: float64 is float32
    unless 64-bit floats are on).

    A NumPy array is converted on the host and placed with ``jax.device_put``, which compiles
    nothing; ``jnp.asarray`` compiles a copy program for every new shape and dtype, so each first
    call on a user's new shape paid for one per argument. Anything else (JAX arrays, tracers, Python
    scalars and lists) goes through ``jnp.asarray``.

    The result is never weakly typed: ``jnp.full(k, 0.5)`` and ``np.full(k, 0.5, np.float32)`` give
    the same array type, so a jitted solver does not compile once more for one of them."""
    if isinstance(x, np.ndarray):
        target = x.dtype if dtype is None else np.dtype(dtype)
        return jax.device_put(np.asarray(x, jax.dtypes.canonicalize_dtype(target)))
    out = jnp.asarray(x)
    target = out.dtype if dtype is None else jax.dtypes.canonicalize_dtype(dtype)
    weak = getattr(getattr(out, "aval", out), "weak_type", False)
    return out if out.dtype == target and not weak else jnp.asarray(out, dtype=target)


def as_floating(x) -> jax.Array:
    """``x`` as a JAX array that thresholds and ranks apply to: integer and bool data in the default
    float (so that a real-valued threshold is not truncated to the integers), floating data, half
    precision included, as they are (elementwise work needs no LAPACK)."""
    if not isinstance(x, np.ndarray):
        x = jnp.asarray(x)
    return to_jax(x, None if jnp.issubdtype(x.dtype, jnp.inexact) else compute_dtype(x.dtype))


def eager_if_concrete(*xs):
    """``jax.ensure_compile_time_eval()`` when every leaf of ``xs`` (pytrees: a design, a model)
    holds values, else a no-op context.
    Inside a caller's trace even ``jnp.asarray`` of a closed-over NumPy value is staged (a tracer):
    converting such a value eagerly keeps it concrete, so the checks that follow still run."""
    if all(is_concrete(x) for x in jax.tree.leaves(xs)):
        return jax.ensure_compile_time_eval()
    return contextlib.nullcontext()


# The boundary checks' reductions, each one compiled program per input shape (op by op, every check
# compiled two: isfinite, then all), so a solver's first call compiles fewer programs. A matrix's
# finiteness and its scale come from the one program, ``_summary``.
@jax.jit
def _all_finite(leaves) -> jax.Array:
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


@jax.jit
def _summary(x) -> tuple[jax.Array, jax.Array]:
    """(all entries finite, max |x|) of an array."""
    return jnp.all(jnp.isfinite(x)), jnp.max(jnp.abs(x), initial=0)


def as_matrix(x, name: str, *, min_rows: int = 1) -> jax.Array:
    """Return ``x`` as a 2-D floating JAX array, or raise ``ValueError`` naming ``name``.

    Integers and bool become the default float; half precision (float16, bfloat16) becomes float32,
    since no LAPACK routine (SVD, QR, eigh, solves) takes it and every family factorises. At least
    ``min_rows`` rows (0 for a block that may be empty, e.g. q = 0 covariates) and one column."""
    if hasattr(x, "tocsr") and hasattr(x, "toarray"):
        raise TypeError(
            f"{name} is a scipy.sparse matrix: pass {name}.toarray() (or, where sparse input is "
            "supported, a jax.experimental.sparse.BCOO)"
        )
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        try:
            x = np.asarray(x)
        except Exception as err:  # pragma: no cover - exotic input
            raise TypeError(f"{name} must be an array, got {type(x).__name__}") from err
    _require_real_numbers(x.dtype, name)
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got shape {tuple(x.shape)}")
    if x.shape[0] < min_rows or x.shape[1] < 1:
        raise ValueError(f"{name} must be non-empty, got shape {tuple(x.shape)}")
    if compute_dtype(x.dtype) != x.dtype:
        with eager_if_concrete(x):
            x = to_jax(x, compute_dtype(x.dtype))
    if is_concrete(x):
        # On the device for JAX arrays: no host copy, and a sharded (even multi-host) Y is reduced
        # where it lives. Eagerly even when called while tracing (a closed-over concrete Y).
        if isinstance(x, jax.Array):
            with jax.ensure_compile_time_eval():
                finite = bool(_summary(x)[0])
        else:
            finite = bool(np.all(np.isfinite(x)))
        if not finite:
            raise ValueError(f"{name} has non-finite entries (NaN or inf)")
    with (
        warnings.catch_warnings(),
        eager_if_concrete(x),
    ):  # an overflowing cast is refused by name below
        warnings.simplefilter("ignore", RuntimeWarning)
        out = to_jax(x)
    if (
        is_concrete(x)
        and not isinstance(x, jax.Array)
        and out.dtype != x.dtype
        and not bool(np.all(np.isfinite(np.asarray(out))))
    ):
        # float64 NumPy input narrowed to float32 (x64 off): 1e39 became inf after the check above
        raise ValueError(
            f"{name} overflows {out.dtype} (largest magnitude {float(np.max(np.abs(x))):.3g}): "
            "rescale it, or enable float64 (jax.config.update('jax_enable_x64', True))"
        )
    return out


def check_scale(x, name: str) -> None:
    """Refuse a concrete matrix whose scale the solvers' sums of squares cannot hold in its dtype.

    Residual norms, relative errors and stopping rules are √(Σ x²) over all n1·n2 entries. With
    m = max|x| they overflow when m² · 4 n1 n2 passes the dtype's maximum, and relative residuals
    down to eps underflow to 0 when (eps · m)² is below its smallest normal: a run with ``tol`` then
    "converges" at once with a wrong result. Float32 holds about 1e-12 ≤ m ≤ 1e15 at a million
    entries; float64 about 1e-138 ≤ m ≤ 1e150. All-zero matrices pass; tracers are not checked.
    """
    if not is_concrete(x):
        return
    if isinstance(x, jax.Array):
        with jax.ensure_compile_time_eval():
            m = float(_summary(x)[1])
    else:
        m = float(np.max(np.abs(x)))
    if m == 0.0:
        return
    info = jnp.finfo(x.dtype)
    low = float(np.sqrt(float(info.tiny))) / float(info.eps)
    high = float(np.sqrt(float(info.max) / (4.0 * x.size)))
    if not low <= m <= high:
        raise ValueError(
            f"{name}'s largest entry is {m:.3g}, outside [{low:.1g}, {high:.1g}], "
            f"the range in which {x.dtype} sums of squares over its {x.size} entries neither "
            f"overflow nor underflow: rescale {name} (the solutions scale with it)"
            + (" or compute in float64 (jax.enable_x64)" if info.bits < 64 else "")
        )


def check_rank(rank, shape, name: str = "rank") -> int:
    """``rank`` must be an integer (Python, NumPy or a concrete 0-d array) with
    1 <= rank <= min(shape); returns it as a Python int."""
    as_integer = as_int(rank)
    if as_integer is None:
        if not is_concrete(rank):
            raise ValueError(
                f"{name} must be a static Python integer (it sets array shapes), "
                "got a traced value: pass it by closure or as a static argument, not through "
                "jit/vmap arguments or sweep.run's points or shared"
            )
        raise ValueError(f"{name} must be an integer, got {rank!r}")
    rank = as_integer
    if not 1 <= rank <= min(shape):
        bound = f"{min(shape)} for shape {tuple(shape)}" if len(shape) > 1 else f"{shape[0]}"
        raise ValueError(f"{name} must satisfy 1 <= {name} <= {bound}, got {rank}")
    return rank


def as_int(value) -> int | None:
    """``value`` as a Python int when it is an integer — a Python or NumPy integer, or a concrete
    0-d integer array (``np.array(8)``, ``jnp.int32(8)``) — else None (booleans, floats,
    tracers)."""
    if isinstance(value, (bool, np.bool_)) or getattr(value, "dtype", None) == np.bool_:
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def as_real(value) -> float | None:
    """``value`` as a Python float when it is a real number — a Python or NumPy integer or float, or
    a concrete 0-d integer or float array (``np.array(0.9)``, ``jnp.float32(0.2)``) — else None
    (booleans, complex numbers, strings, arrays with entries, tracers). Converted by NumPy, so a
    float64 value keeps every bit."""
    if isinstance(value, (bool, np.bool_, str, bytes)) or not is_concrete(value):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    dtype = getattr(value, "dtype", None)
    # jnp.issubdtype, not NumPy's kind: bfloat16 and the other ml_dtypes floats have kind 'V'
    if (
        dtype is None
        or np.ndim(value) != 0
        or not (jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer))
    ):
        return None
    return float(np.asarray(value, np.float64))


def check_flag(value, name: str) -> bool:
    """``value`` as a Python bool when it is one (Python or NumPy); else ``TypeError`` naming
    ``name`` (a string such as ``"no"`` or ``None`` would otherwise pass as truthy or falsy)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


# The largest count, size or iteration budget: JAX indexes and counts iterations in int32.
INT32_MAX = 2**31 - 1


def check_positive_int(value, name: str, *, allow_none: bool = False, minimum: int = 1):
    if value is None and allow_none:
        return None
    as_integer = as_int(value)
    if as_integer is None or as_integer < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if as_integer > INT32_MAX:
        raise ValueError(
            f"{name} = {as_integer} is past {INT32_MAX} (2**31 - 1), the largest count JAX's int32 "
            "indices and iteration counters hold"
        )
    return as_integer


def as_hyper(
    x,
    name: str,
    *,
    ndim: int | None = None,
    length: int | None = None,
    nonnegative: bool = True,
    positive: bool = False,
    dtype=None,
    allow_inf: bool = False,
) -> jax.Array:
    """A hyperparameter array (scalar or vector) with optional shape and sign checks; NaN is always
    refused, ±inf unless ``allow_inf`` (e.g. an ℓ1 ball of infinite radius).

    A concrete value that breaks a rule raises ``ValueError`` naming it. A traced one (under
    ``jit``/``vmap``, e.g. a sweep point) cannot raise: its entries that break the same rules come
    back as NaN, so that a result computed from the returned array shows the fault instead of a
    plausible wrong answer (a negative threshold, say, that silently shifts every entry)."""
    if x is None:
        raise ValueError(f"{name} is required")
    if not hasattr(x, "dtype"):
        x = np.asarray(x)
    _require_real_numbers(x.dtype, name)
    if not isinstance(x, jax.Array) and np.issubdtype(x.dtype, np.integer):
        x = np.asarray(x, np.float64)  # not jnp's int32 first (x64 off): 2**32 wrapped around to 0
    given = x
    # eagerly for a concrete x, also inside a caller's trace (a closed-over α): else the checks
    # below saw a tracer and skipped, and α = 1.5 closed over in a jit ran instead of being refused
    with (
        warnings.catch_warnings(),
        eager_if_concrete(x),
    ):  # a value beyond the dtype's range is refused below
        warnings.simplefilter("ignore", RuntimeWarning)
        if dtype is None and not jnp.issubdtype(x.dtype, jnp.floating):
            dtype = jnp.result_type(float)
        arr = to_jax(x, dtype)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {tuple(arr.shape)}")
    if length is not None and (arr.ndim == 0 or arr.shape[0] != length):
        raise ValueError(f"{name} must have length {length}, got shape {tuple(arr.shape)}")
    if is_concrete(arr):
        # NumPy, not jnp: inside an enclosing trace even jnp ops on concrete arrays are staged.
        val = np.asarray(arr)
        if not np.all(~np.isnan(val) if allow_inf else np.isfinite(val)):
            if is_concrete(given) and np.all(np.isfinite(np.asarray(given, dtype=np.float64))):
                raise ValueError(f"{name} = {np.asarray(given)} overflows {arr.dtype}")
            raise ValueError(f"{name} has non-finite entries")
        if positive and not np.all(val > 0):
            if is_concrete(given) and np.all(np.asarray(given, dtype=np.float64) > 0):
                raise ValueError(f"{name} = {np.asarray(given)} underflows to 0 in {arr.dtype}")
            raise ValueError(f"{name} must be positive, got {val}")
        if nonnegative and not np.all(val >= 0):
            raise ValueError(f"{name} must be non-negative, got {val}")
    elif jnp.issubdtype(arr.dtype, jnp.floating):
        ok = ~jnp.isnan(arr) if allow_inf else jnp.isfinite(arr)
        if positive:
            ok &= arr > 0
        if nonnegative:
            ok &= arr >= 0
        arr = jnp.where(ok, arr, jnp.nan)
    return arr


def class_labels(
    y,
    n: int | None = None,
    num_classes: int | None = None,
    *,
    what: str = "the data have {n} samples",
) -> np.ndarray:
    """Class labels as an int64 NumPy array in {0, …, num_classes − 1}: 1-D, ``n`` of them, integer
    valued (integer-valued floats and bools pass), none negative or ≥ ``num_classes``. Raises
    ``ValueError`` saying which rule failed; ``what`` describes the data for the length message.
    Needs concrete labels (they decide the number of classes)."""
    if isinstance(y, jax.core.Tracer):
        raise ValueError(
            "labels must be concrete (they fix the number of classes): not through jit/vmap "
            "arguments or sweep.run's shared, but closed over, e.g. sweep.run(lambda xi, X: "
            "sdl.fit(X, y, 2, xi=xi), points, shared={'X': X})"
        )
    if num_classes is not None:
        count = as_int(num_classes)
        if count is None or count < 1:
            raise ValueError(f"num_classes must be a positive integer, got {num_classes!r}")
        num_classes = count
    y_np = np.asarray(y)
    if y_np.ndim != 1:
        raise ValueError(f"y must be a 1-D array of labels, got shape {y_np.shape}")
    if n is not None and y_np.shape[0] != n:
        raise ValueError(f"y has {y_np.shape[0]} labels but {what.format(n=n)}")
    if y_np.dtype.kind not in "biuf":
        raise ValueError(
            f"labels must be integers 0, 1, …; got dtype {y_np.dtype} (map class names to "
            "integers first, e.g. np.unique(y, return_inverse=True)[1])"
        )
    if y_np.size and not np.all(np.isfinite(y_np) & np.equal(np.mod(y_np, 1), 0)):
        raise ValueError("labels must be integers 0, 1, …; got non-integer values")
    # the range on the values as given: int64 of 1e20 wraps around (and printed as
    # -9223372036854775808)
    if y_np.size and y_np.min() < 0:
        raise ValueError(f"labels must be in 0, 1, …; got {y_np.min().item():g}")
    if num_classes is not None and y_np.size and y_np.max() >= num_classes:
        raise ValueError(
            f"labels must be in 0, …, {num_classes - 1} ({num_classes} classes); got "
            f"{y_np.max().item():g}"
        )
    if y_np.size and y_np.max() > np.iinfo(np.int64).max:
        raise ValueError(f"labels must be in 0, 1, …; got {y_np.max().item():g}, beyond int64")
    return y_np.astype(np.int64)


def check_same_shape(a, b, name_a: str, name_b: str) -> None:
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(
            f"{name_b} must have the shape of {name_a} {tuple(a.shape)}, got {tuple(b.shape)}"
        )


# ---------------------------------------------------------------------------------------------
# Declared validation: a public function states what each argument accepts, and one decorator
# converts and checks them before the body runs. A rule on a value is checked where the value is
# known: a concrete value that breaks it raises a ValueError naming the argument and the valid
# range; a traced one (under jit, vmap or a sweep) cannot raise, so its offending entries become
# NaN and the solver reports Status.INVALID (see ``any_nan``). Family code declares; it does
# not branch on "concrete or traced" itself.


def _resolve(ref, args: dict):
    """A spec's reference to another argument: ``"Y"`` → that argument's value, ``("A", 1)`` → the
    length of its axis 1, a callable → its value on the arguments, anything else as it is."""
    if isinstance(ref, str):
        return args[ref]
    if isinstance(ref, tuple):
        return args[ref[0]].shape[ref[1]]
    if callable(ref):
        return ref(args)
    return ref


def _dtype_of(ref, args: dict):
    return None if ref is None else jnp.dtype(_resolve(ref, args).dtype)


class Arg:
    """What one argument accepts. Subclasses implement ``convert(value, name, args)``, returning
    the value the body receives; ``args`` holds the arguments converted so far (in declaration
    order) and the rest as given. ``optional=True`` lets ``None`` through unchanged."""

    optional: bool = False

    def check(self, value, name: str, args: dict):
        if value is None and self.optional:
            return None
        return self.convert(value, name, args)

    def convert(self, value, name: str, args: dict):  # pragma: no cover - abstract
        raise NotImplementedError


class Matrix(Arg):
    """A real 2-D array (``as_matrix``): integer and half-precision data are computed in float.

    ``scale``: also refuse entries whose sums of squares over/underflow (``check_scale``).
    ``like``: must have the shape of that argument, and takes its dtype. ``min_rows``: 0 allows an
    empty block."""

    def __init__(self, *, scale=False, like=None, min_rows=1, optional=False):
        self.scale, self.like, self.min_rows, self.optional = scale, like, min_rows, optional

    def convert(self, value, name, args):
        out = as_matrix(value, name, min_rows=self.min_rows)
        if self.like is not None:
            ref = args[self.like]
            check_same_shape(ref, out, self.like, name)
            if out.dtype != ref.dtype:
                with eager_if_concrete(out):
                    out = out.astype(ref.dtype)
        if self.scale:
            check_scale(out, name)
        return out


class Mask(Arg):
    """A boolean array with the shape of the argument ``like`` (nonzero entries are True)."""

    def __init__(self, *, like, optional=True):
        self.like, self.optional = like, optional

    def convert(self, value, name, args):
        with eager_if_concrete(value):
            out = to_jax(value if hasattr(value, "shape") else np.asarray(value), bool)
        check_same_shape(args[self.like], out, self.like, name)
        return out


class Rank(Arg):
    """A static Python integer 1 ≤ r ≤ min(shape of the argument ``of``) (``check_rank``)."""

    def __init__(self, *, of):
        self.of = of

    def convert(self, value, name, args):
        return check_rank(value, args[self.of].shape, name)


class Count(Arg):
    """A static Python integer ≥ ``minimum`` (iteration budgets, sizes, power iterations)."""

    def __init__(self, *, minimum=1, optional=False):
        self.minimum, self.optional = minimum, optional

    def convert(self, value, name, args):
        return check_positive_int(value, name, minimum=self.minimum)


class Flag(Arg):
    """``True`` or ``False`` only (``check_flag``)."""

    def convert(self, value, name, args):
        return check_flag(value, name)


class Function(Arg):
    """A callable (``what`` describes its signature in the message), or None with ``optional``."""

    def __init__(self, what: str = "a function", *, optional=False):
        self.what, self.optional = what, optional

    def convert(self, value, name, args):
        if not callable(value):
            raise TypeError(f"{name} must be {self.what}, got {type(value).__name__} {value!r}")
        return value


class FilePath(Arg):
    """A file path, ``str`` or ``os.PathLike`` (returned as given), or None with ``optional``."""

    def __init__(self, *, optional=False):
        self.optional = optional

    def convert(self, value, name, args):
        if not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"{name} must be a file path (str or os.PathLike), got {value!r}")
        return value


class Instance(Arg):
    """An instance of ``cls``; ``hint`` says how to build one (e.g. from a dict)."""

    def __init__(self, cls, hint: str = "", *, optional=False):
        self.cls, self.hint, self.optional = cls, hint, optional

    def convert(self, value, name, args):
        if not isinstance(value, self.cls):
            raise TypeError(
                f"{name} must be a {self.cls.__name__}, got {type(value).__name__}"
                + (f" ({self.hint})" if self.hint else "")
            )
        return value


class Choice(Arg):
    """One of a fixed set of strings (static)."""

    def __init__(self, *options, optional=False):
        self.options, self.optional = options, optional

    def convert(self, value, name, args):
        if not isinstance(value, str) or value not in self.options:
            allowed = ", ".join(repr(o) for o in self.options)
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        return value


class Key(Arg):
    """A ``jax.random`` key or an integer seed; ``None`` is key(0) (``as_key``)."""

    def check(self, value, name, args):
        return as_key(value)


class Hyper(Arg):
    """A real hyperparameter array that may be traced (swept, vmapped): NaN is refused, ±inf unless
    ``allow_inf``, and its entries must lie in [``low``, ``high``] (open ends with ``low_open``,
    ``high_open``); ``low=0`` by default. ``ndim``/``length`` fix its shape (``length`` may name
    another argument's axis, ``("A", 1)``). ``dtype_of`` names the argument whose dtype it takes.
    ``default``: a callable of the converted arguments giving the value for ``None``, then checked
    under ``label`` (the name used in messages) when one is given.

    A concrete value out of range raises ``ValueError`` naming the argument and the range; a traced
    one has its offending entries replaced by NaN (``any_nan`` then flags the run INVALID)."""

    def __init__(
        self,
        *,
        ndim=None,
        length=None,
        low=0.0,
        high=None,
        low_open=False,
        high_open=False,
        allow_inf=False,
        dtype_of=None,
        default=None,
        label=None,
        optional=False,
    ):
        self.ndim, self.length = ndim, length
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open
        self.allow_inf, self.dtype_of = allow_inf, dtype_of
        self.default, self.label, self.optional = default, label, optional

    def check(self, value, name, args):
        if value is None and self.default is not None:
            with eager_if_concrete(*[v for v in args.values() if hasattr(v, "dtype")]):
                value = self.default(args)
            name = self.label or name
        return super().check(value, name, args)

    def convert(self, value, name, args):
        dtype = _dtype_of(self.dtype_of, args)
        length = None if self.length is None else int(_resolve(self.length, args))
        positive = self.low == 0 and self.low_open
        arr = as_hyper(
            value,
            name,
            ndim=self.ndim,
            length=length,
            nonnegative=self.low == 0,
            positive=positive,
            dtype=dtype,
            allow_inf=self.allow_inf,
        )
        lower = None if self.low in (None, 0) else self.low
        if lower is None and self.high is None:
            return arr

        def ok(v):
            """True where v lies in the range (NaN and the sign at 0 were checked by as_hyper)."""
            good = True
            if lower is not None:
                good = (v > lower) if self.low_open else (v >= lower)
            if self.high is not None:
                good = good & ((v < self.high) if self.high_open else (v <= self.high))
            return good

        if is_concrete(arr):
            val = np.asarray(arr)
            if not np.all(ok(val)):
                raise ValueError(f"{name} must {self._range()} (in {arr.dtype}), got {val}")
            return arr
        return jnp.where(ok(arr), arr, jnp.nan)

    def _range(self) -> str:
        lo = "-inf" if self.low is None else f"{self.low:g}"
        hi = "inf" if self.high is None else f"{self.high:g}"
        if self.high is None:
            return f"be {'>' if self.low_open else '>='} {lo}"
        if self.low is None:
            return f"be {'<' if self.high_open else '<='} {hi}"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"lie in {left}{lo}, {hi}{right}"


class Tol(Arg):
    """A stopping tolerance: a positive scalar (maybe traced) in the dtype of ``dtype_of``, or
    ``None`` (run the whole budget), passed through as ``None``."""

    def __init__(self, *, dtype_of=None):
        self.dtype_of = dtype_of

    def check(self, value, name, args):
        if value is None:
            return None
        return as_hyper(value, name, ndim=0, positive=True, dtype=_dtype_of(self.dtype_of, args))


class Labels(Arg):
    """Concrete class labels in {0, …, num_classes − 1}, ``n`` of them where ``n`` names an
    argument's axis (``class_labels``)."""

    def __init__(self, *, n=None, what="the data have {n} samples"):
        self.n, self.what = n, what

    def convert(self, value, name, args):
        n = None if self.n is None else int(_resolve(self.n, args))
        return class_labels(value, n, what=self.what)


class Convert(Arg):
    """A family's own conversion ``fn(value, name, args) -> value`` for a structured argument (a
    design object, a model), declared here like the others."""

    def __init__(self, fn, *, optional=False):
        self.fn, self.optional = fn, optional

    def convert(self, value, name, args):
        return self.fn(value, name, args)


class Rule:
    """A condition on several arguments, ``pred(args) -> bool array``, written with ``jnp`` so that
    it evaluates on concrete and traced values alike. When every argument in ``uses`` is concrete a
    failure raises ``ValueError(message.format(**args))``; otherwise the argument ``poison`` (a
    floating array) becomes NaN where the rule fails, so the run reports INVALID. A rule whose
    ``poison`` is None holds for concrete arguments only: where one is traced nothing is checked,
    and the function's docstring says what such a value does.

    ``compiled=True`` evaluates a concrete check as one compiled program (arrays and Python numbers
    traced, strings, flags and None static) instead of operation by operation, each of which XLA
    compiles on its own for every new shape: for rules that compute on the data (a loss, a norm).
    A predicate that needs one of its numbers as a Python value runs operation by operation."""

    def __init__(
        self,
        pred,
        message: str,
        *,
        uses: tuple[str, ...],
        poison: str | None = None,
        compiled: bool = False,
    ):
        self.pred, self.message, self.uses, self.poison = pred, message, uses, poison
        self._program = jax.jit(self._holds_at, static_argnums=1) if compiled else None

    def _holds_at(self, dynamic: dict, static: tuple) -> jax.Array:
        return jnp.all(jnp.asarray(self.pred({**dict(static), **dynamic})))

    def _holds(self, args: dict) -> bool:
        with jax.ensure_compile_time_eval():
            if self._program is not None:
                dynamic = {k: v for k, v in args.items() if _traceable(v)}
                static = tuple(sorted((k, v) for k, v in args.items() if k not in dynamic))
                try:
                    return bool(self._program(dynamic, static))
                except TypeError:  # an unhashable option, or a number used as a shape (JAX's
                    pass  # ConcretizationTypeError): checked operation by operation below
            return bool(np.all(np.asarray(self.pred(args))))

    def apply(self, args: dict) -> None:
        leaves = jax.tree.leaves([args[u] for u in self.uses])
        if all(is_concrete(x) for x in leaves):
            if not self._holds(args):
                raise ValueError(self.message.format(**args))
        elif self.poison is not None:
            args[self.poison] = jnp.where(self.pred(args), args[self.poison], jnp.nan)


def _traceable(value) -> bool:
    """Whether a compiled rule takes ``value`` as a traced argument: arrays, pytrees of arrays (a
    design, a data bundle) and Python numbers; not bools, strings or None (options)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return True
    leaves = jax.tree.leaves(value)
    return bool(leaves) and all(isinstance(x, (jax.Array, np.ndarray)) for x in leaves)


# Arguments whose declaration makes them static in a compiled call: they set shapes or choose code.
_STATIC_SPECS = (Rank, Count, Choice, Flag)


def _static_and_dynamic(values: dict, specs: dict):
    """Split checked arguments for a compiled call: arrays, pytrees of arrays and Python floats
    traced (so new values never recompile); Python integers (sizes, counts), the declared static
    kinds and everything else (strings, flags, None, functions) static. None when a static value
    cannot be hashed (an array inside a container of other things): the call then runs operation
    by operation."""
    dynamic, static = {}, []
    for name, value in values.items():
        if (
            not isinstance(specs.get(name), _STATIC_SPECS)
            and not isinstance(value, int)
            and _traceable(value)
        ):
            dynamic[name] = value
        else:
            static.append((name, value))
    try:
        hash(tuple(static))
    except TypeError:
        return None
    return dynamic, tuple(static)


def compiled(fn):
    """Mark a function whose ``validate`` boundary runs its body as one ``jax.jit`` program
    (inside a caller's trace it is traced like any other function), placed below ``validate``:

        @_checks.validate(model=MODEL)
        @_checks.compiled
        def gradients(theta, aux_coef, data, xi, lam, model): ...

    Arrays, pytrees of arrays and Python floats are traced; Python integers, the static kinds of
    spec (``Rank``, ``Count``, ``Choice``, ``Flag``) and every other value
    (strings, None, functions) are static. Called outside ``jit``, the body then costs one
    compilation per new shape or option instead of one per operation (XLA compiles every
    operation run eagerly as a program of its own). For bodies that compute only: no Python branch
    on an array's or a number's value, no warning, no raise."""
    fn.__compiled_body__ = True
    return fn


def validate(*rules: Rule, **specs: Arg):
    """Decorator: convert and check the named arguments of a public function by their declared
    ``specs`` (in order, so a spec may refer to an argument declared before it), then check the
    ``rules``, then call the function with the converted values. Undeclared arguments pass as
    given. The declaration is kept as ``fn.__signature_specs__`` for documentation and tests.
    A function marked ``compiled`` runs its body as one ``jax.jit`` program."""

    def decorate(fn):
        sig = inspect.signature(fn)
        unknown = [n for n in specs if n not in sig.parameters]
        if unknown:
            raise TypeError(f"{fn.__qualname__}: unknown arguments declared: {unknown}")
        program = None
        if getattr(fn, "__compiled_body__", False):
            kinds = {p.kind for p in sig.parameters.values()}
            if kinds - {inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY}:
                raise TypeError(f"{fn.__qualname__}: a compiled body takes named arguments only")
            program = jax.jit(
                lambda dynamic, static: fn(**dynamic, **dict(static)), static_argnums=1
            )

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError:
                # Python's own message: it names the function and an unknown keyword first, where
                # inspect's binding reports a surplus positional argument. Binding fails before the
                # body runs.
                fn(*args, **kwargs)
                raise
            bound.apply_defaults()
            values = bound.arguments
            for name, spec in specs.items():
                values[name] = spec.check(values[name], name, values)
            for rule in rules:
                rule.apply(values)
            split = None if program is None else _static_and_dynamic(values, specs)
            if split is not None:
                return program(*split)
            return fn(*bound.args, **bound.kwargs)

        wrapped.__signature_specs__ = specs  # type: ignore[attr-defined]
        return wrapped

    return decorate


def any_nan(*hypers) -> jax.Array:
    """True when a (traced) hyperparameter broke its declared rule: ``Hyper`` and ``Rule``
    turn such entries into NaN. The solvers pass this as the loop's ``invalid`` flag."""
    leaves = [jnp.any(jnp.isnan(h)) for h in jax.tree.leaves(hypers) if h is not None]
    return jnp.any(jnp.stack(leaves)) if leaves else jnp.zeros((), bool)


def when_concrete(fn, *xs):
    """``fn(*xs)`` evaluated eagerly when every leaf of ``xs`` holds values, else ``None``: for a
    check that can only be made on a result (a warning about what a run returned, say), which a
    traced result cannot support. The one place, with ``Rule`` and ``Hyper``, where
    "concrete or traced" is decided; family code calls this instead of branching itself."""
    if not all(is_concrete(x) for x in jax.tree.leaves(xs)):
        return None
    with jax.ensure_compile_time_eval():
        return fn(*xs)


class Message(str):
    """A ``Rule`` message computed from the arguments, ``fn(args) -> str``, for a message that
    reports a measured quantity (the asymmetry of a matrix, say). A rule formats its message by
    ``message.format(**args)`` once it has failed on concrete values; this one calls ``fn`` there
    instead. As a string it reads as ``fn``'s docstring."""

    def __new__(cls, fn):
        message = super().__new__(cls, fn.__doc__ or "")
        message.fn = fn
        return message

    def format(self, *args, **kwargs):
        return self.fn(kwargs)
