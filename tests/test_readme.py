"""The README's Python examples read as one session, top to bottom: every name a block uses is
imported or assigned in it or in an earlier block (running them all takes minutes — one trains an
LRPCA model — so this checks the names, which is where the examples went wrong), and every
``lowrank_jax`` attribute they call exists."""

import ast
import builtins
import importlib
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


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


def test_every_name_in_the_readme_examples_is_defined_before_use():
    blocks = _blocks()
    assert len(blocks) >= 6
    defined = set(dir(builtins))
    for i, src in enumerate(blocks):
        tree = ast.parse(src)
        missing = []
        for stmt in tree.body:
            # names bound inside the statement for its own use: lambda arguments, comprehension targets
            local = {a.arg for n in ast.walk(stmt) if isinstance(n, ast.Lambda) for a in n.args.args}
            local |= {t.id for n in ast.walk(stmt) if isinstance(n, ast.comprehension)
                      for t in ast.walk(n.target) if isinstance(t, ast.Name)}
            used = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
            missing += sorted(used - defined - local)
            defined |= _bound(stmt)
        assert not missing, f"README block {i} uses undefined names {missing}:\n{src}"


def test_the_lowrank_jax_functions_the_readme_calls_exist():
    modules = {}
    for src in _blocks():
        for n in ast.walk(ast.parse(src)):
            if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("lowrank_jax"):
                for a in n.names:
                    modules[a.asname or a.name] = f"{n.module}.{a.name}"
    calls = set()
    for src in _blocks():
        for n in ast.walk(ast.parse(src)):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in modules:
                calls.add((n.value.id, n.attr))
    assert len(calls) > 20
    for name, attr in sorted(calls):
        obj = importlib.import_module(modules[name])
        assert hasattr(obj, attr), f"README calls {name}.{attr}, which {modules[name]} does not have"
