"""Every notebook under docs/notebooks runs top to bottom without error (nbclient, the test's own
Python as kernel) and draws at least one figure."""

import pathlib
import time

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[1] / "docs" / "notebooks").glob("*.ipynb"))


def test_one_notebook_per_family():
    assert {p.stem for p in NOTEBOOKS} >= {"rpca", "regression", "pathnorm", "sdl", "covariance"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path):
    book = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    nbclient.NotebookClient(book, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - t0
    outputs = [o for c in book.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "the notebook shows no figure"
    print(f"{path.name}: {seconds:.0f} s")
