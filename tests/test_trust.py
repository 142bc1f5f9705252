"""The package trusts no file it reads: data files, fixtures, shipped models and checkpoints are
checked (pinned SHA-256s, payload digests, header fields) and a tampered or truncated file is
refused with its path named. None of these tests needs `make data`."""

import contextlib
import hashlib
import inspect
import json
import pathlib
import shutil

import numpy as np
import pytest

import lowrank_jax
from lowrank_jax import datasets, rpca
from lowrank_jax.datasets import _paths, covariance, genes
from lowrank_jax.rpca import params as params_mod

PACKAGE = pathlib.Path(lowrank_jax.__file__).resolve().parent
SHIPPED = PACKAGE / "rpca" / "pretrained" / "lrpca_n100_r5_alpha0.1.eqx"


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


def test_no_pickle_anywhere_in_the_package():
    word = "pick" + "le"
    hits = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if word in p.read_text(encoding="utf-8").lower()
    ]
    assert hits == []
    # np.load refuses object arrays unless told otherwise; the package never tells it.
    assert inspect.signature(np.load).parameters["allow_" + word].default is False
    assert "read_" + word not in inspect.getsource(genes.load_nci60)


def test_the_digest_helper_hashes_once_and_again_after_a_rewrite(tmp_path, monkeypatch):
    path = tmp_path / "f.bin"
    path.write_bytes(b"one")
    assert _paths.sha256_file(path) == hashlib.sha256(b"one").hexdigest()
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda *a, **k: opened.append(a) or real_open(*a, **k))
    _paths.check_sha256(path, hashlib.sha256(b"one").hexdigest())
    assert opened == []  # memoised
    monkeypatch.undo()
    path.write_bytes(b"other bytes")
    with pytest.raises(ValueError, match=rf"{path} is not the expected file.*make data"):
        _paths.check_sha256(path, hashlib.sha256(b"one").hexdigest())


@pytest.mark.parametrize(
    "fixture, load, module",
    [
        ("golub.npz", datasets.load_golub, genes),
        ("sp500_20_corr.npz", datasets.sp500_demo_matrix, covariance),
    ],
)
def test_a_tampered_fixture_is_refused_by_path(tmp_path, monkeypatch, fixture, load, module):
    original = PACKAGE / "datasets" / "fixtures" / fixture
    assert _paths.sha256_file(original) == module.SHA256[fixture]  # the pin is the shipped file's
    fake = tmp_path / "datasets" / "fixtures" / fixture
    fake.parent.mkdir(parents=True)
    data = original.read_bytes()
    fake.write_bytes(_flip(data, len(data) // 2))
    monkeypatch.setattr(module, "__file__", str(tmp_path / "datasets" / "module.py"))
    monkeypatch.setattr(genes, "golub_fixture_path", lambda: fake)
    with pytest.raises(ValueError, match=rf"{fake} is not the expected file.*reinstall"):
        load()


def test_tampered_and_truncated_nci60_files_are_refused_by_path(tmp_path, monkeypatch):
    X = np.arange(12.0).reshape(3, 4)
    np.save(tmp_path / "NCI60data.npy", X)
    (tmp_path / "NCI60labs.csv").write_text('label\n"CNS"\n"RENAL"\n"CNS"\n')
    monkeypatch.setattr(genes, "nci60_dir", lambda: tmp_path)
    with pytest.raises(ValueError, match=r"NCI60data\.npy is not the expected file.*make data"):
        datasets.load_nci60()
    for name in genes.NCI60_FILES:
        monkeypatch.setitem(genes.SHA256, name, _paths.sha256_file(tmp_path / name))
    d = datasets.load_nci60()
    assert d.classes == ("CNS", "RENAL") and d.y.tolist() == [0, 1, 0]
    assert np.array_equal(d.X, X) and d.genes == ("data.1", "data.2", "data.3", "data.4")
    data = (tmp_path / "NCI60data.npy").read_bytes()
    (tmp_path / "NCI60data.npy").write_bytes(_flip(data, len(data) - 3))
    with pytest.raises(ValueError, match=rf"{tmp_path / 'NCI60data.npy'} is not the expected"):
        datasets.load_nci60()
    (tmp_path / "NCI60data.npy").write_bytes(data[:-8])
    with pytest.raises(ValueError, match=rf"{tmp_path / 'NCI60data.npy'} is not the expected"):
        datasets.load_nci60()


def test_registry_data_files_match_their_pins_where_installed():
    for folder, names in ((genes.nci60_dir(), genes.NCI60_FILES),):
        if folder is None or not (folder / names[0]).is_file():
            pytest.skip("needs ISLP==0.6.0: run `make data`")
        for name in names:
            assert _paths.sha256_file(folder / name) == genes.SHA256[name]


def test_shipped_models_match_their_pins():
    folder = PACKAGE / "rpca" / "pretrained"
    assert {p.name for p in folder.glob("*.eqx")} == set(params_mod.PRETRAINED_SHA256)
    for p in folder.glob("*.eqx"):
        assert hashlib.sha256(p.read_bytes()).hexdigest() == params_mod.PRETRAINED_SHA256[p.name]


def test_a_tampered_shipped_model_is_refused_by_path(tmp_path, monkeypatch):
    data = SHIPPED.read_bytes()
    assert params_mod.load_params(SHIPPED).rank == 5
    folder = tmp_path / "pretrained"
    folder.mkdir()
    fake = folder / SHIPPED.name
    fake.write_bytes(_flip(data, len(data) - 5))
    monkeypatch.setattr(params_mod, "_PRETRAINED_DIR", folder.resolve())
    with pytest.raises(ValueError, match=rf"{fake} is not the shipped model.*reinstall"):
        params_mod.load_params(fake)
    # pretrained() reads the package's resources: point them at the tampered copy.
    monkeypatch.setattr(params_mod.resources, "files", lambda pkg: tmp_path)
    with pytest.raises(ValueError, match=rf"{fake} is not the shipped model"):
        rpca.pretrained(0.1, n=100)


def _checkpoint(tmp_path) -> pathlib.Path:
    path = tmp_path / "ckpt.eqx"
    shutil.copy(SHIPPED, path)  # a v2 file outside the shipped folder: a plain parameter file
    return path


@contextlib.contextmanager
def _case(what: str):
    try:
        yield
    except AssertionError as err:
        raise AssertionError(f"case {what}: {err}") from None


def test_tampered_or_truncated_checkpoints_are_refused_by_path(tmp_path):
    path = _checkpoint(tmp_path)
    data = path.read_bytes()
    assert params_mod.load_params(path).num_layers == 10
    magic_and_header = data.index(b"\n", data.index(b"\n") + 1) + 1
    cases = {
        "payload byte": (_flip(data, len(data) - 2), "payload's sha256"),
        "truncated": (data[:-9], "payload of"),
        "extended": (data + b"\0", "payload of"),
        "header cut": (data[: magic_and_header - 5], "truncated header"),
        "magic": (_flip(data, 3), "not an LRPCA parameter file"),
    }
    for what, (bad, message) in cases.items():
        path.write_bytes(bad)
        with pytest.raises(ValueError, match=rf"{path}.*{message}"), _case(what):
            params_mod.load_params(path)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("rank", 0, "rank 0"),
        ("rank", True, "rank True"),
        ("rank", 2.5, "rank 2.5"),
        ("n", -1, "n -1"),
        ("n", "100", "n '100'"),
        ("num_layers", 10**9, "num_layers"),
        ("num_layers", 9, "does not hold 9 layers"),
        ("dtype", "object", "dtype 'object'"),
        ("meta", [], "meta of type list"),
        ("payload_bytes", -1, "payload_bytes -1"),
        ("payload_sha256", "0" * 63, "payload_sha256"),
        ("extra", 1, "header fields"),
        ("scale", -1.0, "scale must be None or a finite data scale > 0"),
        ("scale", "1", "scale '1'"),
        ("alpha", 1.5, r"alpha must be None or an outlier fraction in \[0, 1\)"),
    ],
)
def test_every_header_field_is_validated(tmp_path, field, value, message):
    path = _checkpoint(tmp_path)
    data = path.read_bytes()
    magic, _, rest = data.partition(b"\n")
    line, _, body = rest.partition(b"\n")
    header = json.loads(line)
    header[field] = value
    path.write_bytes(magic + b"\n" + json.dumps(header).encode() + b"\n" + body)
    with pytest.raises(ValueError, match=rf"{path} is corrupt.*{message}"):
        params_mod.load_params(path)


def test_a_file_of_the_previous_format_is_refused_by_path(tmp_path):
    path = tmp_path / "old.eqx"
    path.write_bytes(b'lowrank_jax.LRPCAParams v1\n{"rank": 5}\n')
    with pytest.raises(ValueError, match=rf"{path} is an LRPCA parameter file of format"):
        params_mod.load_params(path)


@pytest.mark.parametrize(
    "meta, message",
    [
        (dict(stage=99), "stage 99 is not an integer in 0..2"),
        (dict(stage=-5), "stage -5 is not an integer in 0..2"),
        (dict(stage="1"), "stage '1'"),
        (dict(key=[0, 1]), "another key"),
        (dict(config={"n": 20}), "another configuration"),
        (dict(extra=1), "meta fields"),
    ],
)
def test_a_checkpoint_with_a_bad_meta_is_refused_by_path(tmp_path, meta, message):
    """A header edited to "stage": 99 returned stage-1 parameters as finished, "stage": -5 gave an
    OverflowError; every field of a checkpoint's meta is now checked against the run resuming."""
    import dataclasses

    import jax

    from lowrank_jax.rpca import training

    cfg = rpca.TrainConfig(n=20, rank=2, num_layers=2)
    tag = training._key_tag(jax.random.key(0))
    params = rpca.LRPCAParams.from_schedule(np.ones(3), np.ones(2), rank=2, n=20, scale=1.0)
    good = {"stage": 1, "config": dataclasses.asdict(cfg), "key": tag}
    path = tmp_path / "ckpt.eqx"
    params_mod.save_params(path, params, good)
    assert training._load_checkpoint(path, cfg, tag)[1]["stage"] == 1
    params_mod.save_params(path, params, good | meta)
    with pytest.raises(ValueError, match=rf"checkpoint {path}.*{message}"):
        training._load_checkpoint(path, cfg, tag)
