"""The Python examples of the README and of each documentation page read as one session per file,
top to bottom: every name a block uses is imported or assigned in it or in an earlier block of the
same file (running them all takes minutes — one trains an LRPCA model — so this checks the names,
which is where the examples went wrong), and every ``lowrank_jax`` attribute they call exists."""

import ast
import builtins
import importlib
import pathlib
import re

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


def test_the_readme_and_the_pages_have_examples():
    assert len(_blocks()) >= 6
    assert sum(len(_blocks(page)) for page in PAGES[1:]) >= 4  # sweeps.md and scaling.md at least


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_name_in_the_examples_is_defined_before_use(page):
    blocks = _blocks(page)
    defined = set(dir(builtins))
    for i, src in enumerate(blocks):
        tree = ast.parse(src)
        missing = []
        for stmt in tree.body:
            # names bound inside the statement for its own use: lambda arguments, comprehension
            # and for-loop targets
            local = {
                a.arg for n in ast.walk(stmt) if isinstance(n, ast.Lambda) for a in n.args.args
            }
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
