"""Every notebook under docs/notebooks runs top to bottom without error (nbclient, the test's own
Python as kernel) and draws at least one figure, and its first cell installs the package where it is
missing: the clone it runs in, or else the release by its distribution name."""

import pathlib
import sys
import time

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted(
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "notebooks").glob("*.ipynb")
)


# Smaller sizes for the test run, in papermill's convention: a cell setting these names is run right
# after the notebook's cell tagged "parameters" (the notebook itself keeps its larger sizes, which
# cost most of its time here and test no more code).
PARAMETERS = {
    "rpca": "n = 300",
    "sdl": "splits, ranks = 5, (1, 2)",
    "pathnorm": "epochs = 5",
    "covariance": "steps = 500",
}


def with_parameters(book, name):
    """``book`` with ``PARAMETERS[name]`` run after its parameters cell (there must be one)."""
    if name not in PARAMETERS:
        return book
    tagged = [i for i, c in enumerate(book.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{name}.ipynb needs one cell tagged 'parameters'"
    book.cells.insert(tagged[0] + 1, nbformat.v4.new_code_cell(PARAMETERS[name]))
    return book


def test_one_notebook_per_family():
    assert {p.stem for p in NOTEBOOKS} >= {"rpca", "regression", "pathnorm", "sdl", "covariance"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path):
    book = with_parameters(nbformat.read(path, as_version=4), path.stem)
    t0 = time.perf_counter()
    nbclient.NotebookClient(
        book, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    seconds = time.perf_counter() - t0
    outputs = [o for c in book.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the notebook shows no figure"
    print(f"{path.name}: {seconds:.0f} s")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_install_cell_installs_the_clone_or_the_release(path, monkeypatch, tmp_path):
    """The first code cell installs the package where it is missing (Colab) and nothing else is
    needed: inside a clone of the repository it installs that folder with the experiments extra,
    anywhere else the release by its distribution name, lowrank-jax[experiments]."""
    import importlib.util
    import subprocess

    from packaging.requirements import Requirement

    cell = next(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    calls = []
    monkeypatch.setattr(subprocess, "check_call", lambda args: calls.append(args))

    def requirement_from(cwd):
        monkeypatch.chdir(cwd)
        exec(cell, {})
        assert calls[-1][:4] == [sys.executable, "-m", "pip", "install"]
        return calls[-1][-1]

    # inside this clone, from the notebook's own folder
    root = pathlib.Path(__file__).resolve().parents[1]
    assert requirement_from(path.parent) == f"{root}[experiments]"
    # inside another clone whose pyproject spells the name lowrank-jax, from a folder deep in it
    clone = tmp_path / "clone"
    (clone / "lowrank_jax").mkdir(parents=True)
    (clone / "docs" / "notebooks").mkdir(parents=True)
    (clone / "pyproject.toml").write_text('[project]\nname = "lowrank-jax"\n')
    assert requirement_from(clone / "docs" / "notebooks") == f"{clone.resolve()}[experiments]"
    # outside any clone: no pyproject at all, or one of another project, or one with no package
    other = tmp_path / "other"
    (other / "lowrank_jax").mkdir(parents=True)
    (other / "pyproject.toml").write_text('[project]\nname = "something-else"\n')
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "pyproject.toml").write_text('[project]\nname = "lowrank-jax"\n')
    outside = tmp_path / "outside"
    outside.mkdir()
    for cwd in (outside, other, bare):
        req = Requirement(requirement_from(cwd))
        assert req.name == "lowrank-jax" and req.extras == {"experiments"}
        assert req.url is None and not req.specifier
    assert len(calls) == 5
