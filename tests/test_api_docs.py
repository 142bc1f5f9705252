"""The API reference documents every field of every public record type: each field of a result,
data or state type (an ``equinox.Module``, a dataclass or a ``NamedTuple``) has its own entry in
the ``Attributes:`` section of the type's docstring, and no line of the package shows a Sphinx role
(``:func:`` and the like render as literal text on the documentation site).

Cheap: imports and docstrings only, nothing is compiled."""

import dataclasses
import importlib
import inspect
import pathlib
import pkgutil
import re

import pytest

import lowrank_jax
from lowrank_jax.rpca._common import RPCAResult


def _fields(cls):
    if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return list(cls._fields)
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls)]
    return None


def _record_types():
    """Every public class with fields defined in a public module, and ``RPCAResult`` (defined in
    a private module, exported by ``lowrank_jax.rpca``), once each."""
    found = {"lowrank_jax.rpca.RPCAResult": RPCAResult}
    for info in pkgutil.walk_packages(lowrank_jax.__path__, "lowrank_jax."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if name.startswith("_") or not inspect.isclass(obj) or obj.__module__ != info.name:
                continue
            if _fields(obj) is not None:
                found[f"{info.name}.{name}"] = obj
    return sorted(found.items())


def _attribute_entries(doc: str) -> list[str]:
    """The names of the entries of a Google-style ``Attributes:`` section."""
    lines = doc.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Attributes:")
    except StopIteration:
        return []
    body = []
    for line in lines[start + 1 :]:
        if line.strip() and not line.startswith(" "):
            break  # the next section
        body.append(line)
    indent = min(len(line) - len(line.lstrip()) for line in body if line.strip())
    names = []
    for line in body:
        if line.strip() and len(line) - len(line.lstrip()) == indent:
            match = re.match(r"\s*(\w+)\s*(\([^)]*\))?:", line)
            if match:
                names.append(match.group(1))
    return names


RECORDS = _record_types()


def test_the_record_types_are_found():
    names = {cls.__name__ for _, cls in RECORDS}
    expected = {"RPCAResult", "Result", "NewtonResult", "SDLModel", "SolveResult", "BCDResult"}
    expected |= {"TrainResult", "BaselineResult", "Decomposition", "LoopResult", "SVDResult"}
    assert expected <= names, sorted(expected - names)


@pytest.mark.parametrize("name, cls", RECORDS, ids=[name for name, _ in RECORDS])
def test_every_field_has_an_attribute_entry(name, cls):
    entries = _attribute_entries(inspect.getdoc(cls) or "")
    missing = [f for f in _fields(cls) if f not in entries]
    assert not missing, f"{name}: fields without an entry under Attributes: {missing}"


ROOT = pathlib.Path(lowrank_jax.__file__).parent
SOURCES = sorted(ROOT.rglob("*.py"))
ROLE = re.compile(r":(func|class|mod|meth|attr|data|obj|exc|ref):`")


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_no_docstring_shows_a_sphinx_role(path):
    lines = [i for i, line in enumerate(path.read_text().splitlines(), 1) if ROLE.search(line)]
    assert not lines, f"Sphinx roles (write Markdown backticks instead) on lines {lines}"
