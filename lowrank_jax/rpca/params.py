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


class LRPCAParams(eqx.Module):
    """Parameters of a K-layer LRPCA network with FRMNN continuation.

    Fields: ``log_zeta`` (K+1,), ``log_eta`` (K,), ``beta`` and ``phi`` (scalars; β = φ = 1 until a
    grid search sets them), and the static ``rank`` and ``n`` (problem size) they were trained
    for. Call the module on an observation to run LRPCA with them.
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
    def from_schedule(
        cls, zeta, eta, *, rank: int, n: int | float, beta=1.0, phi=1.0
    ) -> LRPCAParams:
        """From thresholds ζ (K+1,) and steps η (K,), all finite and > 0, the FRMNN factors β, φ
        (finite scalars > 0), the ``rank`` (an integer ≥ 1) and the size ``n`` = √(n1 n2) (finite,
        > 0; fractional for a non-square problem) they are for. Anything else raises a
        ``ValueError`` naming the argument (``rank`` = 2.7 was truncated to 2, ``n`` = 0 failed
        later with "math domain error", a NaN β or an infinite ζ was stored). Traced ζ, η, β, φ are
        checked for shape only. Stored in the schedule's float dtype (float32 unless x64 is on and ζ
        or η is float64; the shipped parameters are float32)."""
        dtype = jnp.result_type(zeta, eta, float)
        zeta = _checks.as_hyper(zeta, "zeta", ndim=1, positive=True, dtype=dtype)
        eta = _checks.as_hyper(eta, "eta", ndim=1, positive=True, dtype=dtype)
        beta = _checks.as_hyper(beta, "beta", ndim=0, positive=True, dtype=dtype)
        phi = _checks.as_hyper(phi, "phi", ndim=0, positive=True, dtype=dtype)
        rank = _checks.check_positive_int(rank, "rank")
        return cls(jnp.log(zeta), jnp.log(eta), beta, phi, rank=rank, n=_problem_size(n))

    def for_problem(self, n: float, rank: int) -> LRPCAParams:
        """The paper's generalisation rule: η as is, ζ scaled by (self.n / n)(rank / self.rank).

        The result records the new ``n`` and ``rank``: calling it on a problem of that size runs it
        as it is (it kept the old ones, so the call rescaled ζ a second time, and a saved copy
        claimed the old size). The rule serves larger problems, not smaller: below 0.9 n_train a
        ``UserWarning`` says the error will stall early."""
        return self._rescaled(n, rank)

    def _rescaled(self, n, rank) -> LRPCAParams:
        n = _problem_size(n)
        rank = _checks.check_positive_int(rank, "rank")
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

    def __call__(
        self,
        Y,
        *,
        frmnn: bool = True,
        tol=None,
        max_iter=None,
        rank: int | None = None,
        rescale: bool = True,
        **kwargs,
    ):
        """Run :func:`lowrank_jax.rpca.lrpca` on Y (n1, n2) with these parameters.

        If Y's size √(n1 n2) or ``rank`` differ from the training setting, ζ is rescaled by the
        generalisation rule first (``rescale=False`` skips it: the rule assumes the paper's
        generator, whose entries scale like r/n; pixels of a video do not). The rule serves larger
        problems, not smaller: below 0.9 n_train a ``UserWarning`` says the error will stall early.
        ``frmnn=True`` continues past layer K with (β, φ) until ``tol`` or ``max_iter`` (default:
        K + 5 layers without ``tol``); ``frmnn=False`` runs the K layers.
        Other keyword arguments go to ``lrpca`` (``X_star``, ``support``, ``key``, ``throw``, ...);
        it returns ``lrpca``'s :class:`~lowrank_jax.rpca.RPCAResult`.
        """
        Y = _checks.as_matrix(Y, "Y")
        frmnn, rescale = _checks.check_flag(frmnn, "frmnn"), _checks.check_flag(rescale, "rescale")
        rank = _checks.check_rank(self.rank if rank is None else rank, Y.shape)
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


def _problem_size(n) -> int | float:
    """A problem size √(n1 n2): a finite number > 0 (Python, NumPy or a concrete 0-d array),
    returned as a Python int when integer-valued, else as a float (a non-square problem's size);
    else a ``ValueError`` naming ``n``."""
    value = _checks.as_real(n)
    if value is None or not 0 < value < math.inf:  # NaN fails too
        raise ValueError(f"n must be a finite positive size √(n1 n2), got {n!r}")
    return int(value) if value.is_integer() else value


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
    """Write ``params`` to ``path`` atomically (temporary file in the same folder, then rename).

    Format: a magic line, a JSON line (rank, n, num_layers, dtype and ``meta``), then the leaves as
    written by ``equinox.tree_serialise_leaves``, all in the header's one dtype (the widest of the
    leaves': under x64, float32 ζ with float64 β, φ were written as they were and read back as
    "corrupt").
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
    """Parse the bytes written by :func:`save_params`; returns (params, header)."""
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
    """Read a file written by :func:`save_params`; with ``rank``, check it was trained for it."""
    with open(path, "rb") as f:
        data = f.read()
    return read_params(data, source=os.fspath(path), rank=rank)[0]


PRETRAINED_ALPHAS = (0.1, 0.2, 0.3)
PRETRAINED_SIZES = (100, 300, 1000)  # n of the shipped models (square n × n training problems)


def pretrained_name(alpha: float, n: int = 1000, rank: int = 5) -> str:
    """File name of a shipped model inside ``rpca/pretrained/``, e.g.
    ``lrpca_n1000_r5_alpha0.1.eqx``."""
    return f"lrpca_n{n}_r{rank}_alpha{alpha:g}.eqx"


def pretrained_size(n) -> int:
    """The training size of the shipped model for problems of size n (√(n1 n2)): the largest one
    that ζ's rescaling serves (n ≥ 0.9 n_train, see :meth:`LRPCAParams.for_problem`), or the
    smallest when n is below all of them."""
    value = _checks.as_real(n)
    if value is None or not math.isfinite(value) or value <= 0:
        raise ValueError(f"n must be a positive problem size (√(n1 n2)), got {n!r}")
    served = [s for s in PRETRAINED_SIZES if value >= SERVED_FRACTION * s]
    return max(served) if served else min(PRETRAINED_SIZES)


def pretrained(alpha: float = 0.1, *, n=None, rank: int | None = None) -> LRPCAParams:
    """Parameters shipped with the package, trained by ``experiments/rpca_train.py`` on the
    paper's generator at r = 5 (K = 10 layers, β and φ from the FRMNN grid search), one model per
    outlier density ``alpha`` ∈ {0.1, 0.2, 0.3} and training size n ∈ {100, 300, 1000}.

    ``n``: the size √(n1 n2) of the problems the model is for; it picks the training size with
    :func:`pretrained_size` (the largest that is at most n / 0.9). Without it, the n = 1000 model.
    Calling a model on another size rescales ζ (:meth:`LRPCAParams.for_problem`). That serves larger
    problems and not smaller ones. At α = 0.1, after 40 layers (FRMNN), mean of 3 float32 instances:

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
    value = _checks.as_real(alpha)  # also a 0-d NumPy or JAX number (jnp.float32(0.2))
    if value is None:
        raise ValueError(f"alpha must be a number in {PRETRAINED_ALPHAS}, got {alpha!r}")
    alpha = value
    if not any(abs(alpha - a) < 1e-6 for a in PRETRAINED_ALPHAS):  # float32 0.3 is 0.30000001
        raise ValueError(
            f"pretrained parameters exist for alpha in {PRETRAINED_ALPHAS}, got {alpha}"
        )
    name = pretrained_name(alpha, 1000 if n is None else pretrained_size(n))
    ref = resources.files("lowrank_jax.rpca").joinpath("pretrained", name)
    if not ref.is_file():
        raise FileNotFoundError(
            f"pretrained file {name} is missing from the installed package; "
            "re-train it with experiments/rpca_train.py"
        )
    return read_params(ref.read_bytes(), source=name, rank=rank)[0]
