"""LRPCA's learnable parameters as an ``equinox.Module``, the generalisation rule, and parameter
files.

A K-layer LRPCA network (Cai, Liu, Yin 2021, §3) has 2K + 1 scalars: ζ_0 (initial threshold),
(ζ_k, η_k) for layers k = 1..K, plus the two FRMNN factors (β, φ) of eq. (13) that continue the
schedule past layer K: η_k = β^{k−K} η_K, ζ_k = φ^{k−K} ζ_K. Thresholds are stored as log ζ
and steps as log η: both positive by construction (a negative or vanishing step is meaningless for
the FRMNN continuation), and one learning rate fits ζ's that span five decades.

Generalisation (paper Appendix C.4, motivated by Lemma 10's ‖X⋆ − X_k‖_∞ ≲ (μr/n)τ^kσ_r): a model
trained at size n_b and rank r_b is used at (n, r) with η unchanged and ζ scaled by (n_b/n)(r/r_b).
"""

from __future__ import annotations

import io
import json
import math
import os
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

_MAGIC = b"lowrank_jax.LRPCAParams v1\n"


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


def _model_rank(rank, name: str, args) -> int:
    """The rank a model is called for: its trained rank for None, else 1 ≤ rank ≤ min(Y.shape)."""
    return _checks.check_rank(args["self"].rank if rank is None else rank, args["Y"].shape, name)


class LRPCAParams(eqx.Module):
    """Parameters of a K-layer LRPCA network with FRMNN continuation (an ``equinox.Module``).

    Layer k runs with ζ_k = exp(log_zeta[k]) and η_k = exp(log_eta[k − 1]); past layer K the FRMNN
    factors continue the schedule, ζ_k = φ^{k−K} ζ_K and η_k = β^{k−K} η_K (Cai, Liu, Yin 2021,
    eq. 13). Call the module on an observation to run :func:`~lowrank_jax.rpca.lrpca` with them.

    Attributes:
      log_zeta: (K+1,) log thresholds, log ζ_0 … log ζ_K.
      log_eta: (K,) log step sizes, log η_1 … log η_K.
      beta: FRMNN's step factor β (scalar; 1 until :func:`~lowrank_jax.rpca.frmnn_grid_search`
        sets it).
      phi: FRMNN's threshold factor φ (scalar; 1 until the grid search sets it).
      rank: the rank r they were trained for (static).
      n: the problem size √(n1 n2) they were trained for (static; fractional for a non-square
        problem).
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
    # √(n1 n2); fractional after for_problem on a non-square Y
    n: int | float = eqx.field(static=True)

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
    )
    def from_schedule(
        cls, zeta, eta, *, rank: int, n: int | float, beta=1.0, phi=1.0
    ) -> LRPCAParams:
        """Parameters from a threshold and step schedule, stored as log ζ and log η.

        Args:
          zeta: (K+1,) thresholds ζ_0 … ζ_K, finite and > 0.
          eta: (K,) step sizes η_1 … η_K, finite and > 0.
          rank: the rank r they are for (an integer ≥ 1).
          n: the problem size √(n1 n2) they are for (finite, > 0; fractional for a non-square
            problem).
          beta, phi: the FRMNN factors β, φ (finite scalars > 0; default 1).

        Returns:
          :class:`LRPCAParams` in the schedule's float dtype (float32 unless x64 is on and ζ or η
          is float64). A value outside its range raises ``ValueError`` naming the argument;
          traced ζ, η, β, φ are checked for shape only.
        """
        return cls(jnp.log(zeta), jnp.log(eta), beta, phi, rank=rank, n=n)

    @_checks.validate(n=_checks.Convert(_problem_size), rank=_checks.Count())
    def for_problem(self, n: float, rank: int) -> LRPCAParams:
        """The parameters moved to another size and rank by the paper's generalisation rule.

        η stays; ζ is scaled by (n_train / n)(r / r_train) (Cai, Liu, Yin 2021, Appendix C.4).
        The rule serves larger problems, not smaller: below 0.9 n_train a ``UserWarning`` says the
        error will stall early.

        Args:
          n: the new problem size √(n1 n2) (finite, > 0).
          rank: the new rank r (≥ 1).

        Returns:
          :class:`LRPCAParams` that record the new ``n`` and ``rank``: called on a problem of that
          size, they run as they are.
        """
        return self._rescaled(n, rank)

    def _rescaled(self, n: int | float, rank: int) -> LRPCAParams:
        """:meth:`for_problem` of a checked size and rank."""
        if n < SERVED_FRACTION * self.n:
            _checks.warn_caller(
                f"these LRPCA parameters were trained at n = {self.n}; rescaled to n = {n:.0f} the "
                "error stalls early (the n = 1000 model at α = 0.1: about 8e-5 at n = 500, 1e-3 at "
                "n = 300, against 7e-8 at n ≥ 1000). rpca.pretrained(alpha, n=...) picks the "
                "shipped model for a size (trained at "
                f"n = {', '.join(map(str, PRETRAINED_SIZES))}); for smaller problems train for the "
                "size with rpca.train_lrpca (Robust PCA guide)."
            )
        scale = (self.n / n) * (rank / self.rank)
        return LRPCAParams(
            self.log_zeta + math.log(scale), self.log_eta, self.beta, self.phi, rank=rank, n=n
        )

    @_checks.validate(
        Y=_checks.Matrix(),
        frmnn=_checks.Flag(),
        rescale=_checks.Flag(),
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
        rescale: bool = True,
        **kwargs,
    ):
        """Run :func:`lowrank_jax.rpca.lrpca` on Y with these parameters.

        If Y's size √(n1 n2) or ``rank`` differ from the training setting, ζ is first rescaled by
        the generalisation rule (:meth:`for_problem`).

        Args:
          Y: (n1, n2) observation.
          frmnn: continue past layer K with (β, φ) until ``tol`` or ``max_iter`` (True, default),
            or run the K layers (False).
          tol: as in ``lrpca`` (default None).
          max_iter: as in ``lrpca``; with ``frmnn`` and no ``tol`` the default is K + 5 layers.
          rank: the rank r to solve for (default: the trained one).
          rescale: apply the generalisation rule (True, default); False skips it (the rule assumes
            the paper's generator, whose entries scale like r/n; pixels of a video do not).
          **kwargs: further arguments of ``lrpca`` (``X_star``, ``support``, ``key``, ``throw``, …).

        Returns:
          ``lrpca``'s :class:`~lowrank_jax.rpca.RPCAResult`.
        """
        n = math.sqrt(Y.shape[0] * Y.shape[1])
        p = (
            self
            if (not rescale or (n == self.n and rank == self.rank))
            else self._rescaled(n, rank)
        )
        if frmnn:
            if tol is None and max_iter is None:
                max_iter = p.num_layers + 5
            return lrpca(
                Y, rank, p.zeta, p.eta, beta=p.beta, phi=p.phi, tol=tol, max_iter=max_iter, **kwargs
            )
        return lrpca(Y, rank, p.zeta, p.eta, tol=tol, max_iter=max_iter, **kwargs)


def _template(num_layers: int, rank: int, n: int | float, dtype: str = "float32") -> LRPCAParams:
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
    )


def save_params(path, params: LRPCAParams, meta: dict | None = None) -> None:
    """Write LRPCA parameters to a file, atomically (a temporary file in the same folder, renamed).

    Format: a magic line, a JSON line (rank, n, num_layers, dtype and ``meta``), then the leaves as
    written by ``equinox.tree_serialise_leaves``, all in the header's one dtype (the widest of the
    leaves').

    Args:
      path: the file to write (its folder is created if missing).
      params: the :class:`LRPCAParams`.
      meta: a JSON-serialisable dict stored in the header (default None: empty).

    Returns:
      None.
    """
    dtype = np.result_type(*(np.asarray(leaf).dtype for leaf in jax.tree.leaves(params)))
    params = jax.tree.map(lambda leaf: np.asarray(leaf, dtype), params)
    header = {
        "rank": params.rank,
        "n": params.n,
        "num_layers": params.num_layers,
        "dtype": str(dtype),
        "meta": meta or {},
    }
    buf = io.BytesIO()
    buf.write(_MAGIC)
    buf.write(json.dumps(header).encode() + b"\n")
    eqx.tree_serialise_leaves(buf, params)
    _atomic_write(path, buf.getvalue())


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


def read_params(data: bytes, *, source: str = "parameter file", rank: int | None = None):
    """Parse the bytes of a parameter file written by :func:`save_params`.

    Args:
      data: the file's bytes.
      source: the name used in error messages (default ``"parameter file"``).
      rank: if given, the rank the parameters must have been trained for.

    Returns:
      ``(params, header)``: the :class:`LRPCAParams` and the header dict (rank, n, num_layers,
      dtype, meta). A file that is not a parameter file, is corrupt, holds non-finite values or
      another rank raises ``ValueError``.
    """
    if not data.startswith(_MAGIC):
        raise ValueError(f"{source} is not an LRPCA parameter file (bad header)")
    rest = data[len(_MAGIC) :]
    line, sep, body = rest.partition(b"\n")
    try:
        header = json.loads(line)
        n = float(header["n"])  # a rescaled size √(n1 n2) may be fractional
        like = _template(
            int(header["num_layers"]),
            int(header["rank"]),
            int(n) if n.is_integer() else n,
            header.get("dtype", "float32"),  # files before the dtype field: float32
        )
        params = jax.tree.map(jnp.asarray, eqx.tree_deserialise_leaves(io.BytesIO(body), like))
    except Exception as err:  # truncated or edited files
        raise ValueError(f"{source} is corrupt: {err}") from None
    if not all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(params)):
        raise ValueError(f"{source} is corrupt: non-finite parameters")
    if rank is not None and params.rank != rank:
        raise ValueError(f"{source} holds parameters for rank {params.rank}, not rank {rank}")
    return params, header


def load_params(path, *, rank: int | None = None) -> LRPCAParams:
    """Read LRPCA parameters from a file written by :func:`save_params`.

    Args:
      path: the file.
      rank: if given, the rank the parameters must have been trained for (else ``ValueError``).

    Returns:
      :class:`LRPCAParams`.
    """
    with open(path, "rb") as f:
        data = f.read()
    return read_params(data, source=os.fspath(path), rank=rank)[0]


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
    """An outlier density of a shipped model (also a 0-d NumPy or JAX number, jnp.float32(0.2)),
    as a Python float."""
    value = _checks.as_real(alpha)
    if value is None:
        raise ValueError(f"{name} must be a number in {PRETRAINED_ALPHAS}, got {alpha!r}")
    if not any(abs(value - a) < 1e-6 for a in PRETRAINED_ALPHAS):  # float32 0.3 is 0.30000001
        raise ValueError(
            f"pretrained parameters exist for {name} in {PRETRAINED_ALPHAS}, got {value}"
        )
    return value


@_checks.validate(n=_checks.Convert(_served_size))
def pretrained_size(n) -> int:
    """The training size of the shipped model for problems of size n.

    Args:
      n: the problem size √(n1 n2) (finite, > 0).

    Returns:
      The largest training size that ζ's rescaling serves (n ≥ 0.9 n_train, see
      :meth:`LRPCAParams.for_problem`), or the smallest when n is below all of them (an int).
    """
    served = [s for s in PRETRAINED_SIZES if n >= SERVED_FRACTION * s]
    return max(served) if served else min(PRETRAINED_SIZES)


@_checks.validate(
    alpha=_checks.Convert(_shipped_alpha),
    n=_checks.Convert(_served_size, optional=True),
    rank=_checks.Count(optional=True),
)
def pretrained(alpha: float = 0.1, *, n=None, rank: int | None = None) -> LRPCAParams:
    """LRPCA parameters shipped with the package, for the paper's generator at rank 5.

    Trained by ``experiments/rpca_train.py`` (K = 10 layers, β and φ from the FRMNN grid search),
    one model per outlier density α ∈ {0.1, 0.2, 0.3} and training size n ∈ {100, 300, 1000}.
    Calling a model on another size rescales ζ by (n_train / n)(r / 5)
    (:meth:`LRPCAParams.for_problem`), which serves larger problems and not smaller ones. Relative
    error at α = 0.1 after 40 layers (FRMNN), mean of 3 float32 instances:

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
    model serves; train for the size (:func:`lowrank_jax.rpca.train_lrpca`).

    Args:
      alpha: the outlier density, one of 0.1, 0.2, 0.3 (default 0.1).
      n: the size √(n1 n2) of the problems the model is for; it picks the training size with
        :func:`pretrained_size` (the largest that is at most n / 0.9). Default None: the n = 1000
        model.
      rank: if given, check that the model was trained for this rank (5).

    Returns:
      :class:`LRPCAParams` (float32).

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
    ref = resources.files("lowrank_jax.rpca").joinpath("pretrained", name)
    if not ref.is_file():
        raise FileNotFoundError(
            f"pretrained file {name} is missing from the installed package; "
            "re-train it with experiments/rpca_train.py"
        )
    return read_params(ref.read_bytes(), source=name, rank=rank)[0]
