"""Every notebook under docs/notebooks runs top to bottom without error (nbclient, the test's own
Python as kernel) and draws at least one figure."""

import pathlib
import time

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted(
    (pathlib.Path(__file__).resolve().parents[1] / "docs" / "notebooks").glob("*.ipynb")
)


# Smaller sizes for the test run, in papermill's convention: a cell setting these names is run right
# after the notebook's cell tagged "parameters" (the notebook itself keeps the paper's sizes, which
# cost most of its time here and test no more code).
PARAMETERS = {"rpca": "n = 300"}


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
def test_install_cell_names_a_source_that_pip_accepts(path, monkeypatch, tmp_path):
    """The first code cell installs the package where it is missing (Colab). The package is not on
    PyPI, so the cell must install from SOURCE — a folder, a wheel or a git URL — as a valid pip
    requirement with the experiments extra, and refuse a SOURCE that is not there by name."""
    import importlib.util
    import subprocess

    from packaging.requirements import Requirement

    book = nbformat.read(path, as_version=4)
    cell = next(c.source for c in book.cells if c.cell_type == "code")
    assert 'SOURCE = "' in cell
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    calls = []
    monkeypatch.setattr(subprocess, "check_call", lambda args: calls.append(args))
    for source in ("git+https://example.invalid/lowrank_jax.git", str(tmp_path)):
        exec(cell.replace('SOURCE = "/content/lowrank_jax"', f"SOURCE = {source!r}"), {})
        spec = calls[-1][-1]
        if source.startswith("git+"):
            req = Requirement(spec)
            assert req.name == "lowrank_jax" and req.extras == {"experiments"} and req.url == source
        else:
            assert spec == f"{source}[experiments]"
    with pytest.raises(RuntimeError, match="SOURCE"):
        exec(
            cell.replace(
                'SOURCE = "/content/lowrank_jax"', f"SOURCE = {str(tmp_path / 'absent')!r}"
            ),
            {},
        )
    assert len(calls) == 2
