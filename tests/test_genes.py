"""Gene-expression loaders: the committed Golub fixture, training-only standardisation, the ALL
cache and clear errors (no data needed); the real files' sizes and class counts when `make data` has
run."""

import hashlib
import importlib.util
import re
import sys
import warnings

import numpy as np
import pytest

from lowrank_jax import datasets
from lowrank_jax.datasets import genes


def _affymetrix(ids):  # Affymetrix probe set ids end in _at or _st (e.g. 1000_at, U58516_s_at)
    return all(re.fullmatch(r"\S+_(at|st)", g) for g in ids)


def test_golub_fixture_is_the_documented_data_set():
    d = datasets.load_golub()
    assert d.name == "golub" and d.classes == ("ALL", "AML")
    assert d.X.shape == (38, 3051) and d.X.dtype == np.float64 and np.isfinite(d.X).all()
    assert d.y.dtype == np.int64 and np.bincount(d.y).tolist() == [27, 11]
    assert len(d.genes) == 3051 == len(set(d.genes)) and _affymetrix(d.genes)
    # multtest standardised each sample (array, a row) across genes: mean 0, sd 1.
    np.testing.assert_allclose(d.X.mean(axis=1), 0, atol=1e-5)
    np.testing.assert_allclose(d.X.std(axis=1, ddof=1), 1, atol=1e-5)
    # golub.gnames column 2, aligned with the probe ids: every Affymetrix control probe's
    # description names that probe ("AFFX-… (endogenous control)"), and the two AML markers of the
    # docs.
    assert len(d.descriptions) == 3051 and all(isinstance(t, str) and t for t in d.descriptions)
    controls = [(g, t) for g, t in zip(d.genes, d.descriptions) if g.startswith("AFFX-")]
    assert len(controls) >= 10 and all(t.startswith(g) for g, t in controls)
    named = dict(zip(d.genes, d.descriptions))
    assert named["M27891_at"].startswith("CST3 Cystatin C") and named["X95735_at"] == "Zyxin"


def test_description_encoding_round_trips():
    texts = ["CST3 Cystatin C", "", "Zyxin ", "GB DEF = α-actinin, 5' UTR", "x" * 600]
    blob = genes.encode_descriptions(texts)
    assert blob.dtype == np.uint8 and blob.ndim == 1
    assert genes.decode_descriptions(blob) == tuple(texts)
    with pytest.raises(ValueError, match="newline"):
        genes.encode_descriptions(["one", "two\nlines"])


def test_standardize_uses_training_statistics_only():
    X_train = np.array(
        [
            [1.0, 2.0, 3.0, 6.0],
            [5.0, 5.0, 5.0, 5.0],  # constant gene: std taken as 1
            [-2.0, 0.0, 2.0, 4.0],
        ]
    ).T  # 4 samples × 3 genes
    X_test = np.array([[100.0, 3.0], [7.0, 5.0], [1.0, -1.0]]).T
    Xtr, Xte = datasets.standardize(X_train, X_test)
    np.testing.assert_allclose(Xtr[:, [0, 2]].mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(Xtr[:, [0, 2]].std(axis=0), 1)
    np.testing.assert_array_equal(Xtr[:, 1], 0)
    mean, std = X_train.mean(axis=0, keepdims=True), X_train.std(axis=0, keepdims=True)
    std[:, 1] = 1
    np.testing.assert_allclose(Xte, (X_test - mean) / std)
    assert Xte[:, 1].tolist() == [2.0, 0.0]  # constant gene: only shifted by its training mean
    # The test samples never influence the result; `scale` divides both parts.
    Xtr2, Xte2 = datasets.standardize(X_train, 10 * X_test, scale=4.0)
    np.testing.assert_allclose(Xtr2, Xtr / 4)
    np.testing.assert_allclose(Xte2, (10 * X_test - mean) / (4 * std))
    only = datasets.standardize(X_train)
    assert isinstance(only, np.ndarray) and only.dtype == np.float64
    np.testing.assert_array_equal(only, Xtr)


def test_standardize_a_constant_gene_whose_mean_rounds():
    """38 copies of log2(20) (an expression floor): their float mean misses the value, the std came
    out 8.9e-16, not 0, and the gene was blown up to ±1 in training and ~1e13 for a test value 0.01
    off."""
    floor = np.log2(20.0)
    X_train = np.column_stack([np.full(38, floor), np.arange(38.0)])  # 38 samples × 2 genes
    assert X_train[:, 0].std() > 0  # the case: numerically not constant
    Xtr, Xte = datasets.standardize(X_train, np.array([[floor + 0.01, 1.0]]))
    np.testing.assert_array_equal(Xtr[:, 0], 0)
    np.testing.assert_allclose(Xte[:, 0], 0.01, rtol=1e-12)


def test_standardize_rejects_bad_arguments():
    X = np.ones((4, 3))
    for bad_train in (np.ones(4), np.ones((0, 3))):
        with pytest.raises(ValueError, match="X_train"):
            datasets.standardize(bad_train)
    with pytest.raises(ValueError, match="X_test .*3 columns"):
        datasets.standardize(X, np.ones((4, 2)))
    for scale in (0.0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="scale"):
            datasets.standardize(X, scale=scale)


def test_standardize_refuses_non_finite_values():
    """A NaN (a missing measurement) passed through: its gene's training mean and std became NaN and
    the whole column, training and test, came back NaN without a word. NaN and inf are refused,
    naming X_train or X_test and the gene columns."""
    X = np.arange(12.0).reshape(4, 3)
    for bad in (np.nan, np.inf):
        broken = X.copy()
        broken[2, 1] = bad
        with pytest.raises(ValueError, match="X_train has 1 non-finite.*columns 1"):
            datasets.standardize(broken)
        with pytest.raises(ValueError, match="X_train"):
            datasets.standardize(broken, X)
        with pytest.raises(ValueError, match="X_test has 1 non-finite.*columns 1"):
            datasets.standardize(X, broken)
    assert np.isfinite(datasets.standardize(X, X)[1]).all()


def test_missing_data_names_make_data(tmp_path, monkeypatch):
    monkeypatch.setattr(genes, "all_rda_path", lambda: tmp_path / "ALL.rda")
    with pytest.raises(FileNotFoundError, match=r"ALL\.rda.*make data"):
        datasets.load_all_leukemia()
    monkeypatch.setattr(genes, "nci60_dir", lambda: None)
    with pytest.raises(ImportError, match=r"ISLP.*make data"):
        datasets.load_nci60()
    monkeypatch.setattr(genes, "nci60_dir", lambda: tmp_path)
    with pytest.raises(FileNotFoundError, match=r"NCI60data\.npy.*make data"):
        datasets.load_nci60()
    monkeypatch.setattr(genes, "golub_fixture_path", lambda: tmp_path / "golub.npz")
    with pytest.raises(FileNotFoundError, match=r"golub\.npz.*make data"):
        datasets.load_golub()
    # ALL.rda present but no cache and no `rdata` to convert it.
    (tmp_path / "ALL.rda").write_bytes(b"not converted yet")
    monkeypatch.setitem(genes.SHA256, "ALL.rda", hashlib.sha256(b"not converted yet").hexdigest())
    monkeypatch.setitem(sys.modules, "rdata", None)
    with pytest.raises(ImportError, match=r"rdata.*make data"):
        datasets.load_all_leukemia()


def _pin(monkeypatch, path, data: bytes):
    path.write_bytes(data)
    monkeypatch.setitem(genes.SHA256, path.name, hashlib.sha256(data).hexdigest())


def test_all_labels_and_cache_keyed_by_the_source_hash(tmp_path, monkeypatch):
    rda = tmp_path / "ALL.rda"
    _pin(monkeypatch, rda, b"version 1")
    monkeypatch.setattr(genes, "all_rda_path", lambda: rda)
    X = np.arange(12.0).reshape(4, 3)  # 4 patients × 3 probes
    calls = []

    def fake_read(path, bt=("B2", "T", "B", "T3")):
        calls.append(path)
        return X, np.array(bt), np.array(["1000_at", "1001_at", "1002_f_at"])

    monkeypatch.setattr(genes, "read_all_rda", fake_read)
    d = datasets.load_all_leukemia()
    assert d.y.tolist() == [0, 1, 0, 1] and d.classes == ("B", "T") and d.name == "ALL"
    assert d.genes == ("1000_at", "1001_at", "1002_f_at") and np.array_equal(d.X, X)
    assert d.descriptions is None  # the ALL data carry probe ids only
    with np.load(tmp_path / "ALL.npz") as f:
        assert str(f["source_sha256"]) == hashlib.sha256(b"version 1").hexdigest()
    again = datasets.load_all_leukemia()  # from the cache: no second conversion
    assert len(calls) == 1 and np.array_equal(again.X, X) and again.genes == d.genes
    rda.write_bytes(b"version 2")  # a source that is not the pinned one is refused, by name
    with pytest.raises(ValueError, match=r"ALL\.rda is not the expected file.*make data"):
        datasets.load_all_leukemia()
    _pin(monkeypatch, rda, b"version 2")  # a changed (pinned) source invalidates the cache
    datasets.load_all_leukemia()
    assert len(calls) == 2
    (tmp_path / "ALL.npz").write_bytes(b"truncated")  # so does a broken cache
    datasets.load_all_leukemia()
    assert len(calls) == 3
    with np.load(tmp_path / "ALL.npz") as f:  # ... and one that holds probes × patients
        stale = {k: f[k] for k in f.files}
    np.savez(tmp_path / "ALL.npz", **(stale | {"X": stale["X"].T}))
    assert datasets.load_all_leukemia().X.shape == (4, 3) and len(calls) == 4
    # A replaced cache (other values, the source's digest kept) fails its content digest: rebuilt.
    with np.load(tmp_path / "ALL.npz") as f:
        good = {k: f[k] for k in f.files}
    np.savez(tmp_path / "ALL.npz", **(good | {"X": good["X"] + 1}))
    assert np.array_equal(datasets.load_all_leukemia().X, X) and len(calls) == 5
    with np.load(tmp_path / "ALL.npz") as f:
        assert str(f["content_sha256"]) == genes.all_cache_digest(f["X"], f["y"], f["genes"])
    _pin(monkeypatch, rda, b"version 3")
    monkeypatch.setattr(genes, "read_all_rda", lambda p: fake_read(p, ("B1", "nan", "T", "T")))
    with pytest.raises(ValueError, match=r"\['nan'\] are neither B-cell nor T-cell"):
        datasets.load_all_leukemia()


# Run only where `make data` has run (the files are not in the repository; CI does not fetch them).
@pytest.mark.skipif(
    not genes.golub_rdata_path().is_file() or importlib.util.find_spec("rdata") is None,
    reason="needs data/golub.RData from Debian r-bioc-multtest and PyPI rdata: run `make data`",
)
def test_golub_fixture_equals_the_debian_file():
    X, y, probes, descriptions = genes.read_golub_rdata(genes.golub_rdata_path())
    d = datasets.load_golub()
    np.testing.assert_array_equal(d.X, X)  # exact: the fixture stores the values in units of 1e-5
    np.testing.assert_array_equal(d.y, y)
    assert d.genes == tuple(probes)
    assert d.descriptions == tuple(descriptions)  # verbatim, trailing blanks included
    # The character matrix is index, description, probe id (column-major in the file): the index
    # column is the probe's position in the HU6800 chip, increasing, and not a description.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gnames = np.asarray(
            pytest.importorskip("rdata").read_rda(str(genes.golub_rdata_path()))["golub.gnames"]
        )
    index = gnames.reshape(3051, 3, order="F")[:, 0].astype(int)
    assert np.all(np.diff(index) > 0) and not set(map(str, index)) & set(d.descriptions)


@pytest.mark.skipif(
    not genes.all_rda_path().is_file(),
    reason="needs data/ALL.rda from Debian r-bioc-all: run `make data`",
)
def test_real_all_leukemia():
    d = datasets.load_all_leukemia()  # from data/ALL.npz once `make data` has converted it
    assert d.X.shape == (128, 12625) and np.isfinite(d.X).all()
    assert d.classes == ("B", "T") and np.bincount(d.y).tolist() == [95, 33]
    assert len(set(d.genes)) == 12625 and _affymetrix(d.genes)
    assert 0 < d.X.min() and d.X.max() < 16  # RMA log2 intensities
    X, bt, probes = genes.read_all_rda(genes.all_rda_path())  # the cache equals a fresh conversion
    np.testing.assert_array_equal(d.X, X)
    assert d.genes == tuple(probes)
    assert sorted(set(bt)) == ["B", "B1", "B2", "B3", "B4", "T", "T1", "T2", "T3", "T4"]
    np.testing.assert_array_equal(d.y, [b.startswith("T") for b in bt])


@pytest.mark.skipif(
    genes.nci60_dir() is None or not (genes.nci60_dir() / "NCI60data.npy").is_file(),
    reason="needs ISLP==0.6.0 (data/NCI60data.npy, NCI60labs.csv): run `make data`",
)
def test_real_nci60():
    d = datasets.load_nci60()
    assert d.X.shape == (64, 6830) and np.isfinite(d.X).all() and len(set(d.genes)) == 6830
    assert d.descriptions is None  # ISLR's matrix has no gene names
    assert len(d.classes) == 14 and list(d.classes) == sorted(d.classes)
    counts = dict(zip(d.classes, np.bincount(d.y, minlength=14).tolist()))
    assert {
        k: counts[k]
        for k in (
            "RENAL",
            "NSCLC",
            "MELANOMA",
            "BREAST",
            "COLON",
            "OVARIAN",
            "LEUKEMIA",
            "CNS",
            "PROSTATE",
        )
    } == {
        "RENAL": 9,
        "NSCLC": 9,
        "MELANOMA": 8,
        "BREAST": 7,
        "COLON": 7,
        "OVARIAN": 6,
        "LEUKEMIA": 6,
        "CNS": 5,
        "PROSTATE": 2,
    }
    assert sorted(counts.values()).count(1) == 5 and sum(counts.values()) == 64
