"""LRPCA's learnable parameters as an ``equinox.Module``, the generalisation rule, and parameter
files.

A K-layer LRPCA network (Cai, Liu, Yin 2021, §3) has 2K + 1 scalars: ζ_0 (initial threshold),
(ζ_k, η_k) for layers k = 1..K, plus the two FRMNN factors (β, φ) of eq. (13) that continue the
schedule past layer K: η_k = β^(k−K) η_K, ζ_k = φ^(k−K) ζ_K. Thresholds are stored as log ζ
and steps as log η: both positive by construction (a negative or vanishing step is meaningless for
the FRMNN continuation), and one learning rate fits ζ's that span five decades.

Units. The thresholds are absolute numbers in the units of the training data, and LRPCA is
homogeneous: running it on c·Y with thresholds c·ζ gives c·X and c·S for any c > 0. A model
therefore records the scale s_b of the data it was trained on (``data_scale``, the median
|Y_ij|) and, called on a user's Y, runs with

    ζ = ζ_b · (s(Y) / s_b) · √(r / r_b),        η unchanged,

which gives the same relative answer on Y and c·Y. On the paper's generator (X⋆ = L⋆R⋆ᵀ with
N(0, 1/n) factors, whose entries scale like √r / n) this is close to the paper's generalisation
rule (Appendix C.4, from Lemma 10's ‖X⋆ − X_k‖∞ ≲ (μr/n) τᵏ σ_r), ζ scaled by (n_b/n)(r/r_b):
exactly so in n, within a few per cent in r (the median |X⋆_ij| of a small rank grows a little
faster than √r).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import pathlib
import tempfile
from importlib import resources

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from lowrank_jax import _checks
from lowrank_jax.rpca.learned import lrpca

# ζ's rescaling rule serves problems down to this fraction of the training size: below it a model
# warns that the error will stall (LRPCAParams.for_problem), and pretrained_size picks a smaller
# model.
SERVED_FRACTION = 0.9

_MAGIC = b"lowrank_jax.LRPCAParams v2\n"
_FORMAT_PREFIX = b"lowrank_jax.LRPCAParams "
_HEADER_KEYS = frozenset(
    (
        "rank",
        "n",
        "num_layers",
        "dtype",
        "scale",
        "alpha",
        "meta",
        "payload_bytes",
        "payload_sha256",
    )
)
_DTYPES = ("float16", "float32", "float64")
_MAX_LAYERS = 10_000  # far above any trained network; bounds what a header can make us allocate
_MAX_HEADER = 1 << 20


def _problem_size(n, name: str = "n", args=None) -> int | float:
    """A problem size √(n1 n2): a finite number > 0 (Python, NumPy or a concrete 0-d array),
    returned as a Python int when integer-valued, else as a float (a non-square problem's size);
    else a ``ValueError`` naming ``n``."""
    value = _checks.as_real(n)
    if value is None or not 0 < value < math.inf:  # NaN fails too
        raise ValueError(f"{name} must be a finite positive size √(n1 n2), got {n!r}")
    return int(value) if value.is_integer() else value


def _schedule_dtype(args) -> jax.ShapeDtypeStruct:
    """The float dtype of a schedule (ζ, η): float32 unless x64 is on and ζ or η is float64."""
    return jax.ShapeDtypeStruct((), jnp.result_type(args["zeta"], args["eta"], float))


def _training_scale(scale, name: str = "scale", args=None) -> float | None:
    """A model's training scale: None, or a finite number > 0 as a Python float."""
    if scale is None:
        return None
    value = _checks.as_real(scale)
    if value is None or not 0 < value < math.inf:
        raise ValueError(f"{name} must be None or a finite data scale > 0, got {scale!r}")
    return value


def _training_alpha(alpha, name: str = "alpha", args=None) -> float | None:
    """A model's training outlier fraction: None, or a number in [0, 1) as a Python float."""
    if alpha is None:
        return None
    value = _checks.as_real(alpha)
    if value is None or not 0 <= value < 1:
        raise ValueError(f"{name} must be None or an outlier fraction in [0, 1), got {alpha!r}")
    return value


def _model_rank(rank, name: str, args) -> int:
    """The rank a model is called for: its trained rank for None, else 1 ≤ rank ≤ min(Y.shape)."""
    return _checks.check_rank(args["self"].rank if rank is None else rank, args["Y"].shape, name)


# data_scale reads at most this many entries of Y (a fixed, evenly spread subset of a larger Y).
_SCALE_SAMPLE = 1 << 16


def _sample_index(size: int) -> np.ndarray | None:
    """Flat indices of data_scale's subset of a Y with ``size`` entries (None: all of them): the
    points frac(j φ) of the golden-ratio sequence, which spread over rows and columns alike
    (a constant stride can fall on one column)."""
    if size <= _SCALE_SAMPLE:
        return None
    golden = (math.sqrt(5.0) - 1.0) / 2.0
    points = np.mod(np.arange(_SCALE_SAMPLE, dtype=np.float64) * golden, 1.0)
    return np.minimum((points * size).astype(np.int64), size - 1)


@jax.jit
def _data_scale(Y):
    flat = jnp.ravel(Y)
    index = _sample_index(flat.shape[0])
    sample = jnp.abs(flat if index is None else flat[index])
    median = jnp.median(sample)
    mean = jnp.mean(jnp.abs(flat))
    return jnp.where(median > 0, median, jnp.where(mean > 0, mean, jnp.ones_like(mean)))


@_checks.validate(Y=_checks.Matrix())
def data_scale(Y) -> jax.Array:
    """The scale s(Y) in which learned LRPCA thresholds are expressed: the median of |Y_ij|.

    Robust to a fraction of outliers below one half, and homogeneous, s(c·Y) = c·s(Y) for c > 0.
    A Y of more than 2¹⁶ entries is read at a fixed subset of 2¹⁶ of them, spread evenly over rows
    and columns; where the median is 0 (a mostly zero Y) the mean of |Y_ij| is used instead, and 1
    for Y = 0.

    Args:
      Y: (n1, n2) matrix (may be traced).

    Returns:
      A 0-d array > 0 in Y's dtype.
    """
    return _data_scale(Y)


class LRPCAParams(eqx.Module):
    """Parameters of a K-layer LRPCA network with FRMNN continuation (an ``equinox.Module``).

    Layer k runs with ζ_k = exp(log_zeta[k]) and η_k = exp(log_eta[k − 1]); past layer K the FRMNN
    factors continue the schedule, ζ_k = φ^(k−K) ζ_K and η_k = β^(k−K) η_K (Cai, Liu, Yin 2021,
    eq. 13). Call the module on an observation to run ``lrpca`` with them,
    ζ expressed in the observation's units (the module docstring's rule, through ``scale``).

    Attributes:
      log_zeta: (K+1,) log thresholds, log ζ_0 … log ζ_K.
      log_eta: (K,) log step sizes, log η_1 … log η_K.
      beta: FRMNN's step factor β (scalar; 1 until ``frmnn_grid_search``
        sets it).
      phi: FRMNN's threshold factor φ (scalar; 1 until the grid search sets it).
      rank: the rank r they were trained for (static).
      n: the problem size √(n1 n2) they were trained for (static; fractional for a non-square
        problem).
      scale: the scale s_b = ``data_scale`` of the data they were trained on, which ζ is
        relative to (static; None: unknown, ζ are absolute thresholds and a call needs
        ``normalize=False``).
      alpha: the outlier fraction α they were trained for (static; None: unknown).
      zeta: (K+1,) the thresholds exp(log_zeta) (property).
      eta: (K,) the step sizes exp(log_eta) (property).
      num_layers: K (property).
    """

    # JAX arrays in use; NumPy arrays in the structure a file is read into (_template) and in the
    # copy save_params writes
    log_zeta: jax.Array | np.ndarray
    log_eta: jax.Array | np.ndarray
    beta: jax.Array | np.ndarray
    phi: jax.Array | np.ndarray
    rank: int = eqx.field(static=True)
    # √(n1 n2); fractional for a non-square training problem
    n: int | float = eqx.field(static=True)
    scale: float | None = eqx.field(static=True, default=None)
    alpha: float | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if (
            self.log_zeta.ndim != 1
            or self.log_eta.ndim != 1
            or self.log_zeta.shape[0] != self.log_eta.shape[0] + 1
        ):
            raise ValueError(
                f"log_zeta must have one more entry than log_eta: got {self.log_zeta.shape} "
                f"and {self.log_eta.shape}"
            )
        # static fields: checked however the object is built
        _checks.check_positive_int(self.rank, "rank")
        _problem_size(self.n)
        _training_scale(self.scale)
        _training_alpha(self.alpha)

    @property
    def zeta(self) -> jax.Array:
        return jnp.exp(self.log_zeta)

    @property
    def eta(self) -> jax.Array:
        return jnp.exp(self.log_eta)

    @property
    def num_layers(self) -> int:
        return self.log_eta.shape[0]

    @classmethod
    @_checks.validate(
        zeta=_checks.Hyper(ndim=1, low=0, low_open=True, dtype_of=_schedule_dtype),
        eta=_checks.Hyper(ndim=1, low=0, low_open=True, dtype_of=_schedule_dtype),
        beta=_checks.Hyper(ndim=0, low=0, low_open=True, dtype_of=_schedule_dtype),
        phi=_checks.Hyper(ndim=0, low=0, low_open=True, dtype_of=_schedule_dtype),
        rank=_checks.Count(),
        n=_checks.Convert(_problem_size),
        scale=_checks.Convert(_training_scale),
        alpha=_checks.Convert(_training_alpha),
    )
    def from_schedule(
        cls,
        zeta,
        eta,
        *,
        rank: int,
        n: int | float,
        beta=1.0,
        phi=1.0,
        scale=None,
        alpha=None,
    ) -> LRPCAParams:
        """Parameters from a threshold and step schedule, stored as log ζ and log η.

        Args:
          zeta: (K+1,) thresholds ζ_0 … ζ_K, finite and > 0.
          eta: (K,) step sizes η_1 … η_K, finite and > 0.
          rank: the rank r they are for (an integer ≥ 1).
          n: the problem size √(n1 n2) they are for (finite, > 0; fractional for a non-square
            problem).
          beta, phi: the FRMNN factors β, φ (finite scalars > 0; default 1).
          scale: the ``data_scale`` of the data ζ was tuned on (finite, > 0), so that a call
            rescales ζ to each observation's units; default None: ζ are absolute thresholds, and a
            call needs ``normalize=False``.
          alpha: the outlier fraction the schedule is for (in [0, 1); default None: unknown).

        Returns:
          ``LRPCAParams`` in the schedule's float dtype (float32 unless x64 is on and ζ or η
          is float64). A value outside its range raises ``ValueError`` naming the argument;
          traced ζ, η, β, φ are checked for shape only.
        """
        return cls(jnp.log(zeta), jnp.log(eta), beta, phi, rank=rank, n=n, scale=scale, alpha=alpha)

    def _warn_if_smaller(self, n: float) -> None:
        """Warn that a schedule trained at size n_b runs on a smaller problem (its error stalls)."""
        if n < SERVED_FRACTION * self.n:
            _checks.warn_caller(
                f"these LRPCA parameters were trained at n = {self.n}; on a problem of size "
                f"n = {n:.0f} the error stalls early (the n = 1000 model at α = 0.1: about 8e-5 at "
                "n = 500, 1e-3 at n = 300, against 7e-8 at n ≥ 1000). rpca.pretrained(alpha, "
                "n=...) picks the shipped model for a size (trained at "
                f"n = {', '.join(map(str, PRETRAINED_SIZES))}); for smaller problems train for the "
                "size with rpca.train_lrpca (Robust PCA guide)."
            )

    def thresholds(self, Y, rank=None) -> jax.Array:
        """The thresholds a call on Y runs with, in Y's units (the module docstring's rule):

            ζ = ζ_b · (s(Y) / s_b) · √(r / r_b),   s = ``data_scale``.

        Args:
          Y: (n1, n2) observation (may be traced).
          rank: the rank r to solve for (default: the trained rank r_b).

        Returns:
          (K+1,) thresholds ζ_0 … ζ_K. Parameters without a ``scale`` raise ``ValueError``.
        """
        if self.scale is None:
            raise ValueError(
                "these LRPCA parameters carry no training scale (built by from_schedule without "
                "scale=): pass normalize=False to use zeta as absolute thresholds, or give "
                "from_schedule the data_scale of the data they were tuned on"
            )
        r = self.rank if rank is None else rank
        factor = data_scale(Y) / self.scale * math.sqrt(r / self.rank)
        return self.zeta * factor.astype(self.zeta.dtype)

    @_checks.validate(
        Y=_checks.Matrix(),
        frmnn=_checks.Flag(),
        normalize=_checks.Flag(),
        rank=_checks.Convert(_model_rank),
    )
    def __call__(
        self,
        Y,
        *,
        frmnn: bool = True,
        tol=None,
        max_iter=None,
        rank=None,
        normalize: bool = True,
        **kwargs,
    ):
        """Run ``lowrank_jax.rpca.lrpca`` on Y with these parameters, in Y's units.

        ζ is first brought to Y's scale (``thresholds``), so that Y and c·Y give the same
        relative answer; η, β and φ are used as they are. A problem smaller than 0.9 times the
        training size warns that the error will stall.

        Args:
          Y: (n1, n2) observation.
          frmnn: continue past layer K with (β, φ) until ``tol`` or ``max_iter`` (True, default),
            or run the K layers (False).
          tol: as in ``lrpca`` (default None).
          max_iter: as in ``lrpca``; with ``frmnn`` and no ``tol`` the default is K + 5 layers.
          rank: the rank r to solve for (default: the trained one).
          normalize: rescale ζ to Y's units (True, default); False runs ζ as stored, absolute
            thresholds in the training data's units (parameters without a ``scale``).
          **kwargs: further arguments of ``lrpca`` (``X_star``, ``support``, ``key``, ``throw``, …).

        Returns:
          ``lrpca``'s ``RPCAResult``. A run whose S comes out dense (the
          data far from what the model was trained on) has status ``Status.UNRELIABLE`` and warns.
        """
        self._warn_if_smaller(math.sqrt(Y.shape[0] * Y.shape[1]))
        zeta = self.thresholds(Y, rank) if normalize else self.zeta
        if frmnn:
            if tol is None and max_iter is None:
                max_iter = self.num_layers + 5
            return lrpca(
                Y,
                rank,
                zeta,
                self.eta,
                beta=self.beta,
                phi=self.phi,
                tol=tol,
                max_iter=max_iter,
                **kwargs,
            )
        return lrpca(Y, rank, zeta, self.eta, tol=tol, max_iter=max_iter, **kwargs)


def _template(
    num_layers: int,
    rank: int,
    n: int | float,
    dtype: str = "float32",
    scale: float | None = None,
    alpha: float | None = None,
) -> LRPCAParams:
    """The structure to read a file into: NumPy leaves of the file's dtype, so that reading does not
    depend on whether 64-bit floats are enabled (jnp.zeros would follow the flag)."""
    np_dtype = np.dtype(dtype)
    return LRPCAParams(
        np.zeros(num_layers + 1, np_dtype),
        np.zeros(num_layers, np_dtype),
        np.ones((), np_dtype),
        np.ones((), np_dtype),
        rank=rank,
        n=n,
        scale=scale,
        alpha=alpha,
    )


def save_params(path, params: LRPCAParams, meta: dict | None = None) -> None:
    """Write LRPCA parameters to a file, atomically (a temporary file in the same folder, renamed).

    Format: a magic line (``lowrank_jax.LRPCAParams v2``), a JSON line (rank, n, num_layers,
    dtype, the training ``scale`` and ``alpha`` (or null), ``meta``, and the payload's length
    ``payload_bytes`` and SHA-256 ``payload_sha256``), then the payload: the leaves as written by
    ``equinox.tree_serialise_leaves``, all in the header's one dtype (the widest of the leaves').
    ``read_params`` checks all of it.

    Args:
      path: the file to write (its folder is created if missing).
      params: the ``LRPCAParams``.
      meta: a JSON-serialisable dict stored in the header (default None: empty).

    Returns:
      None.
    """
    dtype = np.result_type(*(np.asarray(leaf).dtype for leaf in jax.tree.leaves(params)))
    params = jax.tree.map(lambda leaf: np.asarray(leaf, dtype), params)
    payload = _serialise(params)
    header = {
        "rank": params.rank,
        "n": params.n,
        "num_layers": params.num_layers,
        "dtype": str(dtype),
        "scale": params.scale,
        "alpha": params.alpha,
        "meta": meta or {},
        "payload_bytes": len(payload),
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
    }
    line = json.dumps(header, allow_nan=False).encode()
    _atomic_write(path, _MAGIC + line + b"\n" + payload)


def _serialise(params: LRPCAParams) -> bytes:
    buf = io.BytesIO()
    eqx.tree_serialise_leaves(buf, params)
    return buf.getvalue()


def _atomic_write(path, data: bytes) -> None:
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _header(line: bytes, source: str) -> dict:
    """The JSON header line of a parameter file, every field checked (types and ranges)."""
    try:
        header = json.loads(line.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{source} is corrupt: its header is not JSON ({err})") from None
    if not isinstance(header, dict) or set(header) != _HEADER_KEYS:
        keys = sorted(header) if isinstance(header, dict) else type(header).__name__
        raise ValueError(
            f"{source} is corrupt: header fields {keys}, expected {sorted(_HEADER_KEYS)}"
        )
    problems = []
    if not (_is_int(header["rank"]) and 1 <= header["rank"] <= _checks.INT32_MAX):
        problems.append(f"rank {header['rank']!r} (an integer >= 1)")
    n = header["n"]
    if not (
        (_is_int(n) or isinstance(n, float)) and 0 < n < math.inf and n <= _checks.INT32_MAX**2
    ):
        problems.append(f"n {n!r} (a finite size > 0)")
    if not (_is_int(header["num_layers"]) and 1 <= header["num_layers"] <= _MAX_LAYERS):
        problems.append(f"num_layers {header['num_layers']!r} (an integer in 1..{_MAX_LAYERS})")
    for field, check in (("scale", _training_scale), ("alpha", _training_alpha)):
        value = header[field]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            problems.append(f"{field} {value!r} (a number or null)")
            continue
        try:
            check(value, field)
        except ValueError as err:
            problems.append(str(err))
    if header["dtype"] not in _DTYPES:
        problems.append(f"dtype {header['dtype']!r} (one of {', '.join(_DTYPES)})")
    if not isinstance(header["meta"], dict):
        problems.append(f"meta of type {type(header['meta']).__name__} (a JSON object)")
    if not (_is_int(header["payload_bytes"]) and header["payload_bytes"] >= 0):
        problems.append(f"payload_bytes {header['payload_bytes']!r} (an integer >= 0)")
    digest = header["payload_sha256"]
    if not (
        isinstance(digest, str) and len(digest) == 64 and set(digest) <= set("0123456789abcdef")
    ):
        problems.append(f"payload_sha256 {digest!r} (64 lower-case hex digits)")
    if problems:
        raise ValueError(f"{source} is corrupt: header field {'; '.join(problems)}")
    return header


def read_params(data: bytes, *, source: str = "parameter file", rank: int | None = None):
    """Parse and check the bytes of a parameter file written by ``save_params``.

    Every header field is checked (types and ranges), the payload's length and SHA-256 against the
    header's, and the payload against the shapes the header implies, before it is deserialised.

    Args:
      data: the file's bytes.
      source: the name used in error messages, e.g. the file's path (default
        ``"parameter file"``).
      rank: if given, the rank the parameters must have been trained for.

    Returns:
      ``(params, header)``: the ``LRPCAParams`` and the header dict (rank, n, num_layers,
      dtype, scale, alpha, meta, payload_bytes, payload_sha256). A file that is not a parameter
      file of this format, is truncated or corrupt, holds non-finite values or another rank raises
      ``ValueError`` naming ``source``.
    """
    if not data.startswith(_MAGIC):
        if data.startswith(_FORMAT_PREFIX):
            version = data[len(_FORMAT_PREFIX) :].partition(b"\n")[0][:20]
            raise ValueError(
                f"{source} is an LRPCA parameter file of format {version!r}, which carries no "
                "payload digest and is not read: delete it and train again (or save_params anew)"
            )
        raise ValueError(f"{source} is not an LRPCA parameter file (bad header)")
    line, sep, body = data[len(_MAGIC) :].partition(b"\n")
    if not sep or len(line) > _MAX_HEADER:
        raise ValueError(f"{source} is corrupt: truncated header")
    header = _header(line, source)
    if len(body) != header["payload_bytes"]:
        raise ValueError(
            f"{source} is corrupt: a payload of {len(body)} bytes, the header says "
            f"{header['payload_bytes']} (truncated or extended file)"
        )
    digest = hashlib.sha256(body).hexdigest()
    if digest != header["payload_sha256"]:
        raise ValueError(
            f"{source} is corrupt: the payload's sha256 {digest} is not the header's "
            f"{header['payload_sha256']} (the file was altered)"
        )
    n = header["n"]
    like = _template(
        header["num_layers"],
        header["rank"],
        int(n) if float(n).is_integer() else n,
        header["dtype"],
        _training_scale(header["scale"]),
        _training_alpha(header["alpha"]),
    )
    if len(_serialise(like)) != len(body):
        raise ValueError(
            f"{source} is corrupt: its payload does not hold {header['num_layers']} layers of "
            f"{header['dtype']} (the header's shapes)"
        )
    try:
        loaded = eqx.tree_deserialise_leaves(io.BytesIO(body), like)
    except Exception as err:  # a payload whose digest matches but does not parse
        raise ValueError(f"{source} is corrupt: {err}") from None
    for got, want in zip(jax.tree.leaves(loaded), jax.tree.leaves(like)):
        got = np.asarray(got)
        if got.shape != want.shape or got.dtype != want.dtype:
            raise ValueError(
                f"{source} is corrupt: a {got.dtype} leaf of shape {got.shape}, the header implies "
                f"{want.dtype} {want.shape}"
            )
    params = jax.tree.map(jnp.asarray, loaded)
    if not all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(params)):
        raise ValueError(f"{source} is corrupt: non-finite parameters")
    if rank is not None and params.rank != rank:
        raise ValueError(f"{source} holds parameters for rank {params.rank}, not rank {rank}")
    return params, header


def _check_shipped(data: bytes, name: str, source: str) -> None:
    """Refuse a shipped model file whose SHA-256 is not the pinned one."""
    digest = hashlib.sha256(data).hexdigest()
    if digest != PRETRAINED_SHA256[name]:
        raise ValueError(
            f"{source} is not the shipped model {name} (sha256 {digest}, pinned "
            f"{PRETRAINED_SHA256[name]}): reinstall the package"
        )


def load_params(path, *, rank: int | None = None) -> LRPCAParams:
    """Read LRPCA parameters from a file written by ``save_params``, checked by
    ``read_params``; a shipped model's file (in ``rpca/pretrained/``) is also checked against
    its pinned SHA-256 (``PRETRAINED_SHA256``).

    Args:
      path: the file.
      rank: if given, the rank the parameters must have been trained for (else ``ValueError``).

    Returns:
      ``LRPCAParams``. A tampered, truncated or foreign file raises ``ValueError`` naming
      ``path``.
    """
    with open(path, "rb") as f:
        data = f.read()
    source = os.fspath(path)
    resolved = pathlib.Path(path).resolve()
    if resolved.parent == _PRETRAINED_DIR and resolved.name in PRETRAINED_SHA256:
        _check_shipped(data, resolved.name, source)
    return read_params(data, source=source, rank=rank)[0]


_PRETRAINED_DIR = pathlib.Path(__file__).resolve().parent / "pretrained"
# The SHA-256 of each shipped model file (format v2); pretrained and load_params refuse others.
PRETRAINED_SHA256 = {
    "lrpca_n1000_r5_alpha0.1.eqx": (
        "00e30cfd9e33b12825f603ed5b859247a9d3434271098c0a5c4850b2134ef2f6"
    ),
    "lrpca_n1000_r5_alpha0.2.eqx": (
        "4186ee79ff0fcebc6cb3879baf808813dc5c33fda0a79405dba2435acd8ab1ea"
    ),
    "lrpca_n1000_r5_alpha0.3.eqx": (
        "7c5b9ee76e2bb1da96415e90a47d9bbf460eb8779bc944c4f2394b2636273aca"
    ),
    "lrpca_n100_r5_alpha0.1.eqx": (
        "6fbfd423016d2db4cd66b8eb0c90753f2ea0c85d206d6fd6b82090794c2cef35"
    ),
    "lrpca_n100_r5_alpha0.2.eqx": (
        "6358661c15a4a7d9ceb325c55c459177c67e32370ddfb353843b142530afac7d"
    ),
    "lrpca_n100_r5_alpha0.3.eqx": (
        "11b91ab6ab8bb0305da7cd6a2a3358a1cd881b050095f6c5bdd1323e72ff620a"
    ),
    "lrpca_n300_r5_alpha0.1.eqx": (
        "b19e4a4b091f3fdd330f065bbf9410b40f439946bf7d8ec551e36f80b1089d83"
    ),
    "lrpca_n300_r5_alpha0.2.eqx": (
        "fc9a7b75bf821a6c5d4817dfcbe718b54136888ad1990e00cab56385c1774321"
    ),
    "lrpca_n300_r5_alpha0.3.eqx": (
        "4c074f6503af33f0fefe9f967ce2bf7280ab6a6e7ec74ec7c63e02ccda0d67c6"
    ),
}
PRETRAINED_ALPHAS = (0.1, 0.2, 0.3)
PRETRAINED_SIZES = (100, 300, 1000)  # n of the shipped models (square n × n training problems)


def pretrained_name(alpha: float, n: int = 1000, rank: int = 5) -> str:
    """File name of a shipped model inside ``rpca/pretrained/``.

    Args:
      alpha: the outlier density it was trained at.
      n: its training size (default 1000).
      rank: its rank (default 5).

    Returns:
      The name, e.g. ``lrpca_n1000_r5_alpha0.1.eqx``.
    """
    return f"lrpca_n{n}_r{rank}_alpha{alpha:g}.eqx"


def _served_size(n, name: str = "n", args=None) -> float:
    """A problem size √(n1 n2) to pick a shipped model for: a finite number > 0, as a float."""
    value = _checks.as_real(n)
    if value is None or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive problem size (√(n1 n2)), got {n!r}")
    return value


def _shipped_alpha(alpha, name: str, args) -> float:
    """The shipped model's outlier density for data with outlier fraction ``alpha`` (also a 0-d
    NumPy or JAX number): the smallest shipped α ≥ alpha, as a Python float."""
    value = _checks.as_real(alpha)
    top = max(PRETRAINED_ALPHAS)
    if value is None or not 0 <= value <= top + 1e-6:  # float32 0.3 is 0.30000001; NaN fails
        raise ValueError(
            f"{name} must be an outlier fraction in [0, {top}] (shipped models: α = "
            f"{', '.join(map(str, PRETRAINED_ALPHAS))}), got {alpha!r}; for more outliers use "
            "rpca.scaledgd or rpca.altproj, or train a model (rpca.train_lrpca)"
        )
    return min(a for a in PRETRAINED_ALPHAS if a >= value - 1e-6)


@_checks.validate(n=_checks.Convert(_served_size))
def pretrained_size(n) -> int:
    """The training size of the shipped model for problems of size n.

    Args:
      n: the problem size √(n1 n2) (finite, > 0).

    Returns:
      The largest training size that ζ's rescaling serves (n ≥ 0.9 n_train, see
      ``LRPCAParams.for_problem``), or the smallest when n is below all of them (an int).
    """
    served = [s for s in PRETRAINED_SIZES if n >= SERVED_FRACTION * s]
    return max(served) if served else min(PRETRAINED_SIZES)


@_checks.validate(
    alpha=_checks.Convert(_shipped_alpha),
    n=_checks.Convert(_served_size, optional=True),
    rank=_checks.Count(optional=True),
)
def pretrained(alpha: float = 0.1, *, n=None, rank: int | None = None) -> LRPCAParams:
    """LRPCA parameters shipped with the package, trained on the paper's generator at rank 5.

    Trained by ``experiments/rpca_train.py`` (K = 10 layers, β and φ from the FRMNN grid search),
    one model per outlier density α ∈ {0.1, 0.2, 0.3} and training size n ∈ {100, 300, 1000}.
    For data with outlier fraction α the model of the smallest shipped α' ≥ α is returned (its
    ``alpha`` field says which; a model trained for more outliers serves fewer). Calling a model
    brings ζ to the observation's units, ζ · (s(Y)/s_b) · √(r/5)
    (``LRPCAParams.thresholds``): the same relative answer on Y and c·Y for any c > 0, and on
    the paper's generator the paper's rule for other sizes, which serves larger problems and not
    smaller ones. Relative error at α = 0.1 after 40 layers (FRMNN), mean of 3 float32 instances:

    | problem n | n = 1000 model   | n = 300 model   | n = 100 model |
    |-----------|------------------|-----------------|---------------|
    | 100       | —                | 4.0e-3 (stalls) | 1.4e-6        |
    | 200       | —                | 3.2e-4 (stalls) | 1.1e-6        |
    | 300       | 1.2e-3 (stalls)  | 2e-5            | 2.1e-6        |
    | 500       | 8.0e-5 (stalls)  | 1.8e-7          | 1.2e-6        |
    | 700       | 8.3e-6 (stalls)  | 1.5e-7          | 2.2e-6        |
    | ≥ 1000    | 7e-8             | —               | —             |

    (n = 100 and 200: 5 instances.) The small models are weaker at higher outlier density: at
    n = 100 the α = 0.3 model's 50-instance mean is 7e-4 after 40 layers. Below n = 90 no shipped
    model serves; train for the size (``lowrank_jax.rpca.train_lrpca``).

    When to use one: data close to low rank plus sparse outliers (at most 30 % of the entries),
    where speed matters. The learned schedule assumes outliers comparable to the low-rank part's
    entries and a well-conditioned X⋆ like the generator's; on other data check the result's
    ``status`` (a run whose S comes out dense is ``Status.UNRELIABLE`` and warns) or use
    ``scaledgd`` / ``altproj``, which need no
    training.

    Args:
      alpha: the outlier fraction of the data, in [0, 0.3] (default 0.1): the model trained for the
        smallest shipped α' ≥ alpha (0.1, 0.2 or 0.3) is returned.
      n: the size √(n1 n2) of the problems the model is for; it picks the training size with
        ``pretrained_size`` (the largest that is at most n / 0.9). Default None: the n = 1000
        model.
      rank: if given, check that the model was trained for this rank (5).

    Returns:
      ``LRPCAParams`` (float32).

    Example:
        ```python
        import jax
        from lowrank_jax import Status, datasets, rpca

        p = datasets.rpca_problem(jax.random.key(0), 300, 300, rank=5, alpha=0.1)
        model = rpca.pretrained(alpha=0.1, n=300)  # the shipped n = 300 model
        # its 10 learned layers, then FRMNN layers until tol
        out = model(p.Y, tol=1e-5, X_star=p.X)
        # CONVERGED 30 9.7e-05: error ≈ 1e-4
        print(Status.describe(out.status), out.n_iter, out.error)
        ```
    """
    name = pretrained_name(alpha, 1000 if n is None else pretrained_size(n))
    # alpha is the shipped α' chosen by _shipped_alpha
    ref = resources.files("lowrank_jax.rpca").joinpath("pretrained", name)
    if not ref.is_file():
        raise FileNotFoundError(
            f"pretrained file {name} is missing from the installed package; "
            "re-train it with experiments/rpca_train.py"
        )
    data = ref.read_bytes()
    _check_shipped(data, name, str(ref))
    return read_params(data, source=str(ref), rank=rank)[0]
