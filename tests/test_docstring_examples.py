"""The ``Example:`` blocks of the public docstrings run as written, each in a fresh namespace (what
a user pasting one into a notebook gets), and print finite numbers: an example that drifts from the
API, or whose numbers turn NaN, fails here. The main entry point of every family must have one."""

import contextlib
import importlib
import inspect
import io
import pkgutil
import re
import textwrap

import pytest

import lowrank_jax

REQUIRED = [
    "rpca.lrpca",
    "rpca.scaledgd",
    "rpca.altproj",
    "rpca.pretrained",
    "regression.newton_solve",
    "regression.hessian",
    "sdl.fit",
    "sdl.cross_validate",
    "covariance.decompose",
    "covariance.ialm",
    "pathnorm.train",
    "pathnorm.path_norm_prox",
    "sweep.run",
    "linalg.randomized_svd",
]


def _public_objects():
    """(dotted name, object) of every public function and class in the package's modules, once
    each; a function wrapped by ``jax.jit`` (or any wrapper that sets ``__wrapped__``) counts."""
    seen, out = set(), []
    for info in pkgutil.walk_packages(lowrank_jax.__path__, "lowrank_jax."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            function = inspect.isfunction(inspect.unwrap(obj)) if callable(obj) else False
            if name.startswith("_") or not (function or inspect.isclass(obj)):
                continue
            if getattr(obj, "__module__", "") != info.name or id(obj) in seen:
                continue
            seen.add(id(obj))
            out.append((f"{info.name.removeprefix('lowrank_jax.')}.{name}", obj))
    return out


def _examples(obj):
    return [
        textwrap.dedent(b)
        for b in re.findall(r"```python\n(.*?)```", inspect.getdoc(obj) or "", re.S)
    ]


EXAMPLES = [
    (name, i, src) for name, obj in _public_objects() for i, src in enumerate(_examples(obj))
]


def test_every_family_entry_point_has_an_example():
    missing = []
    for dotted in REQUIRED:
        module, name = dotted.rsplit(".", 1)
        if not _examples(getattr(importlib.import_module(f"lowrank_jax.{module}"), name)):
            missing.append(dotted)
    assert not missing, f"no ```python example in the docstring of {missing}"
    assert len(EXAMPLES) >= len(REQUIRED)


@pytest.mark.parametrize("name, i, src", EXAMPLES, ids=[f"{n}-{i}" for n, i, _ in EXAMPLES])
def test_the_example_runs_and_prints_finite_numbers(name, i, src):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(src, f"<example {i} of {name}>", "exec"), {})
    printed = out.getvalue()
    assert printed.strip(), f"the example of {name} prints nothing"
    assert not re.search(r"\b(nan|inf)\b", printed, re.I), (
        f"the example of {name} printed:\n{printed}"
    )


# Words that tell a story about earlier versions or past measurements rather than what is true now.
HISTORY = re.compile(
    r"\b(first version|earlier version|used to|no longer|re-?run on|as before|previously|"
    r"was slower|replaces? an? (?:earlier|old))\b",
    re.I,
)


def _sections(doc: str) -> set[str]:
    return set(re.findall(r"^(Args|Returns|Attributes|Yields|Raises|Example):\s*$", doc, re.M))


@pytest.mark.parametrize("name, obj", _public_objects(), ids=[n for n, _ in _public_objects()])
def test_the_docstring_has_the_one_form(name, obj):
    """Summary line, then sections: ``Args:`` for a function with parameters and ``Returns:``,
    ``Attributes:`` or ``Args:`` for a class; no narration of history."""
    doc = inspect.getdoc(obj)
    assert doc and doc.strip().splitlines()[0].strip(), f"{name} has no docstring"
    sections = _sections(doc)
    if inspect.isclass(obj):
        assert sections & {"Attributes", "Args"}, f"{name}: no Attributes: or Args: section"
    else:
        params = [p for p in inspect.signature(obj).parameters if p not in ("self", "cls")]
        if params:
            assert "Args" in sections, f"{name}: no Args: section"
        assert sections & {"Returns", "Yields"}, f"{name}: no Returns: section"
    assert not HISTORY.search(doc), f"{name} narrates history: {HISTORY.search(doc).group(0)!r}"
