"""The package's layout: no import cycles, and shared modules import no family."""

import ast
import pathlib

import lowrank_jax

ROOT = pathlib.Path(lowrank_jax.__file__).parent
FAMILIES = ("rpca", "regression", "pathnorm", "sdl", "covariance")


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: pathlib.Path, modules: set[str]) -> set[str]:
    """The package modules ``path`` imports, at any depth of its code (late imports count)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("lowrank_jax")
        ):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
    return found


def _graph():
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    modules = set(paths)
    # a package's __init__ re-exports its modules: edges out of it are not dependencies of its
    # modules
    return {
        m: {d for d in _imports(p, modules) if d != m and not m.startswith(d + ".")}
        for m, p in paths.items()
    }


def test_the_import_graph_has_no_cycle():
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                cycle = stack[stack.index(d) :] + [d]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_shared_modules_import_no_family():
    graph = _graph()
    for m, deps in graph.items():
        if m == "lowrank_jax" or m.startswith(("lowrank_jax.demo",)):
            continue
        family = m.split(".")[1] if m.count(".") >= 1 else None
        if family in FAMILIES or family == "datasets":
            continue
        bad = sorted(d for d in deps if d.split(".")[1] in FAMILIES)
        assert not bad, f"shared module {m} imports family code {bad}"


def test_family_code_declares_validation_and_never_branches_on_tracers():
    """Whether a value is concrete or traced is decided in one module (lowrank_jax._checks: its
    specs, rules and when_concrete); family code declares what it accepts and does not ask."""
    asks = ("is_concrete", "core.Tracer", "ensure_compile_time_eval", "eager_if_concrete")
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for family in FAMILIES
        for path in sorted((ROOT / family).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if any(a in line for a in asks)
    ]
    assert not found, "\n".join(found)
    # and the check is not vacuous: the mechanism does live in _checks
    assert "ensure_compile_time_eval" in (ROOT / "_checks.py").read_text()
