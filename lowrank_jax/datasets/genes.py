"""Gene-expression matrices, samples × genes (p ≫ n), with class labels (sparse multinomial models).

* Golub et al. (1999) leukaemia: 3 051 genes × 38 bone-marrow samples, ALL 27 (label 0) / AML 11
  (label 1), as ``golub.RData`` of Bioconductor's ``multtest`` (LGPL-3+; Debian
  ``r-bioc-multtest`` 2.54.0-1). The values are multtest's preprocessed ones (thresholded, filtered,
  log10, each sample standardised). ``golub.gnames`` is a 3 051 × 3 character matrix: an index,
  a free-text gene description and the Affymetrix HU6800 probe id. ``genes`` are the probe ids
  (e.g. ``M27891_at``: unique, GenBank accession + suffix) and ``descriptions`` the descriptions,
  verbatim (e.g. ``"CST3 Cystatin C (amyloid angiopathy and cerebral hemorrhage)"`` for
  ``M27891_at``, ``"Zyxin"`` for ``X95735_at``; 2 935 distinct, up to 519 characters). Gene
  symbols are not parsed out of them: only about a quarter start with a symbol ("CST3 …",
  "TYMS Thymidylate synthase"), the rest are protein names in capitals ("GLIA MATURATION FACTOR
  BETA"), GenBank definitions ("GB DEF = …") or control probes, and the 1999 symbols are partly
  outdated (ANX2 is ANXA2 today). ``load_golub`` reads the committed fixture
  ``fixtures/golub.npz`` (derived by ``scripts/make_golub_fixture.py``; expression stored exactly,
  as integers in units of 1e-5, the file's precision), so it needs no ``make data``.
* Bioconductor ``ALL`` (Chiaretti et al. 2004; Artistic-2.0; Debian ``r-bioc-all`` 1.40.0-1):
  12 625 probes × 128 adult ALL patients, RMA-normalised log2 expression of the HG-U95Av2 chip.
  Label 0 = B-cell (95), 1 = T-cell (33), from the first letter of the phenotype column ``BT``.
  The data carry only probe ids (e.g. ``1000_at``): the ExpressionSet's feature data has no columns
  and gene symbols would need the ``hgu95av2.db`` annotation package, which is not in the data.
  ``make data`` extracts ``ALL.rda`` into ``data/``; the first load converts it (PyPI ``rdata``, a
  few seconds) and caches ``data/ALL.npz`` beside it. The cache records the .rda's SHA-256 and the
  SHA-256 of its own arrays' bytes (``all_cache_digest``); a cache whose arrays do not match
  that digest, or that was made from another .rda, is rebuilt from the checked .rda.
* NCI60 of ISLR (Ross et al. 2000; 6 830 genes × 64 cancer cell lines, 14 labels) as the two files
  ``data/NCI60data.npy`` (64 × 6 830 float64, a plain NumPy array) and ``data/NCI60labs.csv`` (the
  64 labels) of PyPI ``ISLP`` 0.6.0 (BSD-2), which ``make data`` installs with ``--no-deps``. The
  files are found from the installed package's folder; ISLP itself is never imported (its
  dependencies are heavy). ISLR's matrix has no gene names: ``genes`` are ``data.1`` …
  ``data.6830``, the column names of R's ``NCI60$data``.

ALL and NCI60 carry no gene descriptions (``descriptions`` is None for them); none are invented.

Every file is checked against its pinned SHA-256 before it is read (``SHA256``, the committed
fixture included); a mismatch is a ``ValueError`` naming the file and what to do.

All loaders return float64 ``X`` of shape (samples, genes), one row per sample (the files store
genes × samples; the readers transpose once). Nothing is downloaded at run time; missing data raises
an error that says to run ``make data``.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import io
import os
import pathlib
import sys
import warnings
import zipfile
from typing import NamedTuple

import numpy as np

from lowrank_jax import _checks
from lowrank_jax.datasets._paths import check_sha256, data_dir, sha256_file

_MAKE_DATA = "run `make data`"
_REINSTALL = "reinstall the package (the fixture ships with it)"

# The pinned SHA-256 of every file this module reads, by file name.
SHA256 = {
    # committed fixture (scripts/make_golub_fixture.py writes it: re-pin after regenerating)
    "golub.npz": "566f664ede58c15bedf30900f506401b2b780b676c1aba5c7a300a46efff4bf7",
    # Debian r-bioc-multtest 2.54.0-1 and r-bioc-all 1.40.0-1 (the Makefile pins the same)
    "golub.RData": "c49407449272725e6e02ef5f609115ee1f6854e8b19d7f477625af012a8e3e47",
    "ALL.rda": "ed394602065429adb06d2701924c91ee565921bfb4b0e85f80192767fcad51ae",
    # PyPI ISLP 0.6.0, ISLP/data/
    "NCI60data.npy": "c31dc79edc9560ae047a156644ad5abcd0001bb121ad8149ca4b9bd372b38073",
    "NCI60labs.csv": "b1495c6b937d7f724de4e3065d4bd491e12c41da772a0665b596ae7b01ece16d",
}
NCI60_FILES = ("NCI60data.npy", "NCI60labs.csv")


class GeneData(NamedTuple):
    """A gene-expression data set with its labels.

    Attributes:
      X: (n, p) float64, samples × genes, one row per sample.
      y: (n,) int64 labels in {0, …, κ}, label 0 the reference class.
      classes: ``classes[k]`` the name of label k.
      genes: the p gene/probe ids, one per column of X.
      name: the data set's name.
      descriptions: the p free-text gene descriptions shipped with the data, aligned with
        ``genes`` (Golub), or None where the data carry none (ALL, NCI60).
    """

    X: np.ndarray
    y: np.ndarray
    classes: tuple[str, ...]
    genes: tuple[str, ...]
    name: str
    descriptions: tuple[str, ...] | None = None


def golub_fixture_path() -> pathlib.Path:
    """Where the Golub fixture ships inside the package, so the Golub data need no download.

    Returns:
      The path of ``fixtures/golub.npz`` (expression stored genes × samples, 3051 × 38).
    """
    return pathlib.Path(__file__).resolve().parent / "fixtures" / "golub.npz"


def golub_rdata_path() -> pathlib.Path:
    """Where ``make data`` extracts multtest's ``golub.RData`` (read by the fixture script and its
    test).

    Returns:
      The path in the data folder (the file may be absent).
    """
    return data_dir() / "golub.RData"


def all_rda_path() -> pathlib.Path:
    """Where ``make data`` extracts Bioconductor ALL's ``ALL.rda`` from Debian r-bioc-all.

    Returns:
      The path in the data folder (the file may be absent).
    """
    return data_dir() / "ALL.rda"


def nci60_dir() -> pathlib.Path | None:
    """The folder of the installed ``ISLP`` package that holds NCI60's two files
    (``NCI60_FILES``), found with ``importlib.util.find_spec``; ISLP is not imported.

    Returns:
      The path ``<ISLP>/data`` (whether or not the files exist), or None when ISLP is not
      installed.
    """
    spec = importlib.util.find_spec("ISLP")
    if spec is None or not spec.submodule_search_locations:
        return None
    return pathlib.Path(list(spec.submodule_search_locations)[0]) / "data"


def _gene_data(X, labels, classes, genes, name, descriptions=None) -> GeneData:
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    genes = tuple(str(g) for g in genes)
    if descriptions is not None:
        descriptions = tuple(str(d) for d in descriptions)
        if len(descriptions) != len(genes):
            raise ValueError(
                f"{name}: {len(descriptions)} gene descriptions for {len(genes)} genes"
            )
    if X.ndim != 2 or X.shape != (len(y), len(genes)):
        raise ValueError(
            f"{name}: matrix of shape {X.shape}, expected ({len(y)} samples, {len(genes)} genes)"
        )
    if not np.isfinite(X).all():
        raise ValueError(f"{name}: non-finite expression values")
    if y.size and (y.min() < 0 or y.max() >= len(classes)):
        raise ValueError(f"{name}: labels outside 0..{len(classes) - 1}")
    return GeneData(X, y, tuple(classes), genes, name, descriptions)


def _need(module: str):
    try:
        return __import__(module)
    except ImportError:
        raise ImportError(
            f"reading this data set needs the `{module}` package: {_MAKE_DATA} "
            "(it installs the `data` extra)"
        ) from None


# --- Golub ----------------------------------------------------------------------------------------


def read_golub_rdata(path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Read multtest's ``golub.RData`` (the probe ids and descriptions are columns 3 and 2 of its
    character matrix ``golub.gnames``), after checking its pinned SHA-256.

    Args:
      path: the ``.RData`` file (a file other than Debian's is a ``ValueError``).

    Returns:
      (X (38, 3051) float64 samples × genes, labels (38,) int64, probe ids (3051,),
      descriptions (3051,)).
    """
    path = check_sha256(path, SHA256["golub.RData"], "re-run `make data`")
    rdata = _need("rdata")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Unknown encoding. Assumed ASCII." (the file is ASCII)
        objects = rdata.read_rda(str(path))
    X = np.asarray(objects["golub"], dtype=np.float64)
    labels = np.asarray(objects["golub.cl"])
    names = np.asarray(objects["golub.gnames"])  # 3-column character matrix; rdata drops its dim
    if X.ndim != 2 or labels.shape != (X.shape[1],) or names.size != 3 * X.shape[0]:
        raise ValueError(
            f"{path}: unexpected shapes golub {X.shape}, golub.cl {labels.shape}, "
            f"golub.gnames {names.shape}"
        )
    names = names.reshape(X.shape[0], 3, order="F")
    return X.T, labels.astype(np.int64), names[:, 2], names[:, 1]


def encode_descriptions(descriptions) -> np.ndarray:
    """The descriptions as one UTF-8 byte string joined by newlines, for the fixture (smaller than
    a fixed-width string array padded to the longest description).

    Args:
      descriptions: strings without newlines (one with a newline is a ``ValueError``).

    Returns:
      A uint8 array.
    """
    descriptions = [str(d) for d in descriptions]
    if any("\n" in d for d in descriptions):
        raise ValueError("a gene description contains a newline; it cannot be newline-joined")
    return np.frombuffer("\n".join(descriptions).encode("utf-8"), dtype=np.uint8)


def decode_descriptions(blob: np.ndarray) -> tuple[str, ...]:
    """The inverse of ``encode_descriptions``.

    Args:
      blob: the uint8 array.

    Returns:
      The descriptions, a tuple of strings.
    """
    return tuple(np.asarray(blob, dtype=np.uint8).tobytes().decode("utf-8").split("\n"))


def load_golub() -> GeneData:
    """Golub leukaemia: 38 samples × 3 051 genes, classes ("ALL", "AML") = labels (0, 1), 27 / 11.

    Read from the committed fixture (no ``make data`` needed); values, probe ids (``genes``) and
    gene ``descriptions`` equal the Debian file's.

    Returns:
      ``GeneData`` with X (38, 3051).

    Example:
        ```python
        from lowrank_jax import datasets

        g = datasets.load_golub()
        print(g.X.shape, g.classes, g.genes[0])   # (38, 3051): samples in rows
        ```
    """
    path = golub_fixture_path()
    if not path.is_file():
        raise FileNotFoundError(
            f"Golub fixture {path} is missing: reinstall the package, or {_MAKE_DATA} "
            "and regenerate it with scripts/make_golub_fixture.py"
        )
    check_sha256(path, SHA256["golub.npz"], _REINSTALL)
    with np.load(path) as f:
        return _gene_data(
            f["X_1e5"].T / 1e5,  # stored genes × samples
            f["y"],
            ("ALL", "AML"),
            f["genes"],
            "golub",
            decode_descriptions(f["descriptions_utf8"]),
        )


# --- ALL (Bioconductor ExpressionSet) -------------------------------------------------------------


def _walk(rdata):
    T = rdata.parser.RObjectType

    def deref(o):
        while o is not None and o.info.type == T.REF:
            o = o.referenced_object
        return o

    def pairlist(o) -> dict:  # R pairlist (slots, attributes, environment frame) -> {tag: object}
        out, o = {}, deref(o)
        while o is not None and o.info.type == T.LIST:
            out[deref(o.tag).value.value.decode()] = deref(o.value[0])
            o = deref(o.value[1])
        return out

    return T, deref, pairlist


def read_all_rda(path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read the ``ALL`` ExpressionSet, after checking its pinned SHA-256. The S4 object is walked by
    slot name: ``assayData`` (an environment holding ``exprs``) and ``phenoData@data`` (the
    patients' data frame); only those two pieces are converted.

    Args:
      path: ``ALL.rda`` (a file other than Debian's is a ``ValueError``).

    Returns:
      (X (128, 12625) float64 patients × probes, the BT subtype per patient, the probe ids).
    """
    path = check_sha256(path, SHA256["ALL.rda"], "re-run `make data`")
    rdata = _need("rdata")
    T, deref, pairlist = _walk(rdata)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 100_000))  # the parser recurses along long pairlists
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            eset = pairlist(rdata.parser.parse_file(str(path)).object).get("ALL")
            if eset is None or eset.info.type != T.S4:
                raise ValueError(f"{path}: no S4 object `ALL` (not Bioconductor's ALL.rda)")
            slots = pairlist(eset.attributes)
            env = slots["assayData"].value
            assay = pairlist(env.frame)
            table = deref(env.hash_table)
            for bucket in table.value if table is not None and table.info.type == T.VEC else ():
                assay.update(pairlist(bucket))
            convert = rdata.conversion.SimpleConverter().convert
            exprs = convert(assay["exprs"])
            pheno = convert(pairlist(slots["phenoData"].attributes)["data"])
    finally:
        sys.setrecursionlimit(limit)
    X = np.asarray(exprs, dtype=np.float64)
    probes, patients = (np.asarray(exprs.coords[d]) for d in exprs.dims)
    if list(patients) != [str(i) for i in pheno.index]:
        raise ValueError(f"{path}: expression columns and phenotype rows name different patients")
    return X.T, np.asarray(pheno["BT"].astype(str)), probes


def all_cache_digest(X, y, genes) -> str:
    """The SHA-256 that ``data/ALL.npz`` stores of its own arrays and is checked against on load.

    It hashes, in order, each array's dtype, shape and C-order bytes.

    Args:
      X: the (patients, probes) float64 matrix.
      y: the (patients,) int64 labels.
      genes: the (probes,) probe ids, a NumPy string array.

    Returns:
      64 lower-case hex digits.
    """
    h = hashlib.sha256()
    for a in (X, y, genes):
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str} {a.shape}\n".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _read_all_cache(cache: pathlib.Path, source: str) -> GeneData | None:
    """The cached ALL data, or None when the cache is absent, unreadable, made from another .rda,
    or its arrays do not match the digest it stores (it is then rebuilt)."""
    try:
        with np.load(cache) as f:
            if str(f["source_sha256"]) != source:
                return None
            X, y, genes = f["X"], f["y"], f["genes"]
            if X.dtype != np.float64 or y.dtype != np.int64 or genes.dtype.kind != "U":
                return None
            if str(f["content_sha256"]) != all_cache_digest(X, y, genes):
                return None
            return _gene_data(X, y, ("B", "T"), genes, "ALL")
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None  # no cache, or an unreadable or inconsistent one: convert


def load_all_leukemia() -> GeneData:
    """Bioconductor ALL: 128 patients × 12 625 probes, classes ("B", "T") = B-/T-cell ALL, 95 / 33.

    ``data/ALL.rda`` is checked against its pinned SHA-256 (``SHA256["ALL.rda"]``). The first load
    converts it and caches ``data/ALL.npz`` beside it with the .rda's SHA-256 and the SHA-256 of the
    cached arrays (``all_cache_digest``); a cache that fails either is rebuilt.

    Returns:
      ``GeneData`` with X (128, 12625).

    Raises:
      FileNotFoundError: ``data/ALL.rda`` is absent (run ``make data``).
      ValueError: ``data/ALL.rda`` is not Debian's file (re-run ``make data``).
      ImportError: no valid conversion cache and ``rdata`` is not installed (run ``make data``).
    """
    path = all_rda_path()
    if not path.is_file():
        raise FileNotFoundError(
            f"ALL leukaemia data {path} not found: {_MAKE_DATA} (it extracts ALL.rda "
            "from Debian's r-bioc-all package into data/)"
        )
    check_sha256(path, SHA256["ALL.rda"], "re-run `make data`")
    digest = sha256_file(path)
    cache = path.with_suffix(".npz")
    cached = _read_all_cache(cache, digest)
    if cached is not None:
        return cached
    X, bt, probes = read_all_rda(path)
    first = np.array([s[:1] for s in bt])
    if not np.isin(first, ["B", "T"]).all():
        bad = sorted(set(map(str, bt[~np.isin(first, ["B", "T"])])))
        raise ValueError(f"{path}: BT values {bad} are neither B-cell nor T-cell")
    data = _gene_data(X, (first == "T").astype(np.int64), ("B", "T"), probes, "ALL")
    genes = np.array(data.genes)
    try:  # write-then-rename, so an interrupted write never leaves a half cache
        tmp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp.npz")
        np.savez(
            tmp,
            X=data.X,
            y=data.y,
            genes=genes,
            source_sha256=digest,
            content_sha256=all_cache_digest(data.X, data.y, genes),
        )
        os.replace(tmp, cache)
    except OSError:
        pass  # read-only data directory: convert again next time
    return data


# --- NCI60 ----------------------------------------------------------------------------------------


def _read_nci60_labels(path: pathlib.Path) -> np.ndarray:
    """The labels of ``NCI60labs.csv``: a header ``label``, then one label a row."""
    try:
        rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise ValueError(f"{path}: not a readable CSV ({err})") from None
    if not rows or rows[0] != ["label"] or any(len(r) != 1 or not r[0] for r in rows[1:]):
        raise ValueError(f"{path}: expected a header `label` and one non-empty label a row")
    return np.array([r[0] for r in rows[1:]])


def load_nci60() -> GeneData:
    """ISLR's NCI60: 64 cell lines × 6 830 genes, 14 classes sorted alphabetically,
    label = index in ``classes`` (so label 0 = "BREAST").

    Reads ISLP's ``NCI60data.npy`` (``np.load``, whose default refuses object arrays) and
    ``NCI60labs.csv``, each checked against its pinned SHA-256 first.

    Returns:
      ``GeneData`` with X (64, 6830).

    Raises:
      ImportError: ``ISLP`` is not installed (run ``make data``).
      FileNotFoundError: the installed ``ISLP`` lacks a file.
      ValueError: a file is not ISLP 0.6.0's (re-run ``make data``), or the two disagree.
    """
    folder = nci60_dir()
    if folder is None:
        raise ImportError(
            f"NCI60 comes from the `ISLP` package (data only, never imported), which is not "
            f"installed: {_MAKE_DATA} (it runs `pip install --no-deps ISLP==0.6.0`)"
        )
    data_file, labels_file = (folder / name for name in NCI60_FILES)
    for path in (data_file, labels_file):
        if not path.is_file():
            raise FileNotFoundError(
                f"NCI60 file {path} not found: {_MAKE_DATA} (it installs ISLP==0.6.0)"
            )
        check_sha256(path, SHA256[path.name], "re-run `make data` (it installs ISLP==0.6.0)")
    try:
        X = np.load(data_file)
    except (OSError, ValueError, EOFError) as err:
        raise ValueError(f"{data_file}: not a NumPy array file ({err})") from None
    labs = _read_nci60_labels(labels_file)
    if X.dtype != np.float64 or X.ndim != 2 or X.shape[0] != len(labs):
        raise ValueError(
            f"{data_file}: a {X.dtype} array of shape {X.shape}, expected float64 "
            f"({len(labs)} cell lines of {labels_file.name}, genes)"
        )
    classes = tuple(sorted(set(map(str, labs))))
    return _gene_data(
        X,
        np.searchsorted(classes, labs),
        classes,
        [f"data.{j}" for j in range(1, X.shape[1] + 1)],
        "NCI60",
    )


# --- preprocessing --------------------------------------------------------------------------------


@_checks.host_function("datasets.standardize")
def standardize(X_train, X_test=None, scale: float = 1.0):
    """Per-gene z-scores with the training samples' statistics, divided by ``scale``:
    z = (x − mean) / (std · scale), column by column.

    Args:
      X_train: (n_train, p) samples × genes, finite. Each column (gene) gets its mean subtracted
        and is divided by its standard deviation (``ddof=0``; a gene with zero spread keeps std 1)
        times ``scale``.
      X_test: optional (n_test, p), mapped with the same training mean and std.
      scale: a positive finite divisor (default 1).

    Returns:
      ``(Xtr, Xte)`` when ``X_test`` is given, else ``Xtr``; float64 arrays.

    Example:
        ```python
        import numpy as np
        from lowrank_jax import datasets

        X = np.random.default_rng(0).normal(size=(10, 4))
        Xtr, Xte = datasets.standardize(X[:8], X[8:])
        print(Xtr.mean(axis=0).round(12), Xte.shape)   # every gene centred; (2, 4)
        ```
    """
    Xtr = np.asarray(X_train, dtype=np.float64)
    if Xtr.ndim != 2 or Xtr.shape[0] == 0:
        raise ValueError(
            f"X_train must be a (samples, genes) matrix with >= 1 row, got shape {Xtr.shape}"
        )
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    _require_finite(Xtr, "X_train")
    # A constant gene is told by its range, not by std > 0: the mean of n equal values can miss the
    # value by an ulp, which left a std of ~1e-16 that blew the gene up to ±1 (training) and ~1e13
    # (a test value 0.01 off). Its mean is the value itself, so its training z-scores are exactly 0.
    constant = np.ptp(Xtr, axis=0, keepdims=True) == 0
    mean = np.where(constant, Xtr[:1], Xtr.mean(axis=0, keepdims=True))
    std = np.where(constant, 1.0, Xtr.std(axis=0, keepdims=True)) * scale
    if X_test is None:
        return (Xtr - mean) / std
    Xte = np.asarray(X_test, dtype=np.float64)
    if Xte.ndim != 2 or Xte.shape[1] != Xtr.shape[1]:
        raise ValueError(
            f"X_test must be a matrix with {Xtr.shape[1]} columns (genes), got shape {Xte.shape}"
        )
    _require_finite(Xte, "X_test")
    return (Xtr - mean) / std, (Xte - mean) / std


def _require_finite(X: np.ndarray, name: str) -> None:
    """Refuse NaN and ±inf by name: one missing value would turn its gene's mean and std, and so the
    gene's whole column in both parts, into NaN."""
    bad = ~np.isfinite(X)
    if bad.any():
        cols = np.unique(np.nonzero(bad)[1])
        shown = ", ".join(map(str, cols[:5])) + (", …" if cols.size > 5 else "")
        raise ValueError(
            f"{name} has {int(bad.sum())} non-finite entries (NaN or inf), in gene columns "
            f"{shown}: impute or drop them first"
        )
