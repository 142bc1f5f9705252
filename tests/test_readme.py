"""The README's examples run as a reader would run them: each block on its own, in a fresh Python
process, printing what the README shows below it (numbers aside). The Python examples of each
documentation page read as one session per file, top to bottom: every name a block uses is imported
or assigned in it or in an earlier block of the same file (running them all takes minutes — one
trains an LRPCA model — so this checks the names), and every ``lowrank_jax`` attribute they call
exists."""

import ast
import builtins
import importlib
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README] + sorted((ROOT / "docs").glob("*.md"))


def _blocks(path=README):
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


def _bound(node) -> set[str]:
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            names.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in n.names}
        elif isinstance(n, (ast.FunctionDef, ast.Lambda)):
            names |= {a.arg for a in n.args.args + n.args.kwonlyargs}
    return names


def _shown(path=README):
    """(code, printed output) for each ```python block followed by a ```text block."""
    return re.findall(r"```python\n(.*?)```\s*```text\n(.*?)```", path.read_text(), re.S)


def _masked(text: str) -> list[str]:
    """Lines with every number replaced by '#': a CPU, a BLAS or XLA's flags may change digits."""
    number = r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?"
    return [re.sub(number, "#", line).rstrip() for line in text.strip().splitlines()]


@pytest.fixture(scope="module")
def readme_runs(tmp_path_factory):
    """Each README example started at once in a fresh process, from an empty folder."""
    cwd = tmp_path_factory.mktemp("readme")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for code, _ in _shown()
    ]
    return [p.communicate(timeout=600) + (p.returncode,) for p in procs]


def test_the_readme_has_an_example_per_family_with_its_output():
    shown = _shown()
    assert len(shown) == 5
    for family in ("rpca", "regression", "pathnorm", "sdl", "covariance"):
        assert sum(f"import {family}" in c or f", {family}" in c for c, _ in shown) == 1, family
    assert "../" not in README.read_text()  # nothing outside the repository


@pytest.mark.parametrize("index", range(5))
def test_a_readme_example_runs_on_its_own_and_prints_what_is_shown(index, readme_runs):
    code, expected = _shown()[index]
    out, err, returncode = readme_runs[index]
    assert returncode == 0, f"README example {index + 1} failed:\n{code}\n{err[-3000:]}"
    assert _masked(out) == _masked(expected), f"README example {index + 1} printed:\n{out}"


def test_the_readme_and_the_pages_have_examples():
    assert len(_blocks()) >= 5
    assert sum(len(_blocks(page)) for page in PAGES[1:]) >= 4  # sweeps.md and scaling.md at least


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_name_in_the_examples_is_defined_before_use(page):
    blocks = _blocks(page)
    defined = set(dir(builtins))
    for i, src in enumerate(blocks):
        tree = ast.parse(src)
        missing = []
        for stmt in tree.body:
            # names bound inside the statement for its own use: lambda and function arguments,
            # comprehension and for-loop targets, names assigned in a loop's or a function's body
            local = _bound(stmt)
            local |= {
                t.id
                for n in ast.walk(stmt)
                if isinstance(n, (ast.comprehension, ast.For))
                for t in ast.walk(n.target)
                if isinstance(t, ast.Name)
            }
            used = {
                n.id
                for n in ast.walk(stmt)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
            }
            missing += sorted(used - defined - local)
            defined |= _bound(stmt)
        assert not missing, f"{page.name} block {i} uses undefined names {missing}:\n{src}"


def test_the_lowrank_jax_functions_the_examples_call_exist():
    blocks = [src for page in PAGES for src in _blocks(page)]
    modules = {}
    for src in blocks:
        for n in ast.walk(ast.parse(src)):
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("lowrank_jax"):
                for a in n.names:
                    modules[a.asname or a.name] = f"{n.module}.{a.name}"
    calls = set()
    for src in blocks:
        for n in ast.walk(ast.parse(src)):
            if (
                isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name)
                and n.value.id in modules
            ):
                calls.add((n.value.id, n.attr))
    assert len(calls) > 20
    for name, attr in sorted(calls):
        parent, _, leaf = modules[name].rpartition(".")
        try:
            obj = importlib.import_module(modules[name])
        except ModuleNotFoundError:  # an imported name that is not a module (lowrank_jax.Status)
            obj = getattr(importlib.import_module(parent), leaf)
        assert hasattr(obj, attr), (
            f"an example calls {name}.{attr}, which {modules[name]} does not have"
        )
