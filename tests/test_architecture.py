"""The layers of docs/architecture.md, checked on the source: no module imports another that
imports it back (directly or round a longer circle), and the kernel (core) imports none of the
apps built on it. Every import counts, also one inside a function: a late import hides a
circle, it does not remove it."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("config", "core", "tooling", "integration", "agenda", "sales", "support")
APPS_ABOVE_CORE = ("tooling", "integration", "agenda", "sales", "support", "config")


def project_modules() -> dict[str, Path]:
    """Every module of the project's packages by dotted name (a package by its own name)."""
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports: for `from a import b`, the module a.b if there is
    one, else a itself."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # `import a.b.c` of a name inside a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_the_checker_finds_a_circle_and_reads_relative_and_late_imports(tmp_path):
    """The checks below can fail: a circle closed by a late, relative import is found."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def later():\n    from . import a\n")
    modules = {"pkg": package / "__init__.py", "pkg.a": package / "a.py", "pkg.b": package / "b.py"}
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}

    assert graph == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}}
    assert import_circles(graph) == [["pkg.a", "pkg.b"]]


def test_no_module_of_the_project_is_part_of_an_import_circle():
    """A circle means neither module can be understood, tested or moved without the other."""
    assert import_circles(import_graph()) == []


def test_the_kernel_imports_no_app_built_on_it():
    """core is the kernel: the apps and the project's wiring import it, never the reverse (an
    app contributes to core's registries from its own modules, found by autodiscovery)."""
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        if module.split(".")[0] == "core"
        for target in targets
        if target.split(".")[0] in APPS_ABOVE_CORE
    )
    assert upward == []


# Which top-level packages each may import (docs/architecture.md); its own is always allowed.
LAYERS = {
    "config": {"core", "tooling", "integration", "agenda", "sales", "support"},
    "integration": {"core", "agenda", "sales", "support"},
    "tooling": {"core"},
    "agenda": {"core"},
    "sales": {"core"},
    "support": {"core"},
    "core": set(),
}
DOMAIN_APPS = ("agenda", "sales", "support")


def test_each_layer_imports_only_the_layers_below_it():
    """config wires everything; the integration API uses the domain apps and the kernel; the
    domain apps use core and not one another; the tool API knows no domain app (their tools
    register themselves). A domain app's `tools` module is its face in the tool API, so it
    alone may import tooling."""
    crossings = sorted(
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        for target in targets
        if (layer := module.split(".")[0]) != (below := target.split(".")[0])
        and below not in LAYERS[layer]
        and not (layer in DOMAIN_APPS and module == f"{layer}.tools" and below == "tooling")
    )
    assert crossings == []


def test_the_two_apis_stand_side_by_side_on_the_kernel():
    """The tool API and the integration API share the idempotency engine and the error mapping
    through core (core.idempotency, core.outcome), so neither imports the other at all."""
    crossing = sorted(
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        for target in targets
        if {module.split(".")[0], target.split(".")[0]} == {"tooling", "integration"}
    )
    assert crossing == []


def test_the_apis_reach_the_idempotency_engine_through_its_front_door():
    """Above the kernel, the engine is `core.idempotency` (idempotent_execute and the key
    checks), never one of its modules: what lies behind may change without touching an API.
    (core itself names the modules it registers: the admin in core.apps, the purge in
    core.tasks.)"""
    behind = sorted(
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        if module.split(".")[0] != "core"
        for target in targets
        if target.startswith("core.idempotency.")
    )
    assert behind == []


def suite_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module under tests/ by dotted name (a package by its own name)."""
    found = {}
    for path in (root / "tests").rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def importing_other_test_modules(modules: dict[str, Path]) -> list[str]:
    """`a imports b` for each test module (test_*.py) that imports another: what both share
    belongs in tests/factories.py, tests/statements.py or a support module not named test_*."""
    return sorted(
        f"{name} imports {target}"
        for name, path in modules.items()
        if path.name.startswith("test_")
        for target in imports_of(name, path, modules)
        if modules[target].name.startswith("test_")
    )


def test_the_check_of_test_modules_finds_one_importing_another(tmp_path):
    """The check below can fail: a test module importing a helper of another is found, one
    importing a support module is not."""
    suite = tmp_path / "tests"
    suite.mkdir()
    (suite / "__init__.py").write_text("")
    (suite / "support.py").write_text("def helper(): ...\n")
    (suite / "test_a.py").write_text("def helper(): ...\n")
    (suite / "test_b.py").write_text("from tests.test_a import helper\n")
    (suite / "test_c.py").write_text("from tests import support\nfrom . import test_a\n")

    assert importing_other_test_modules(suite_modules(tmp_path)) == [
        "tests.test_b imports tests.test_a",
        "tests.test_c imports tests.test_a",
    ]


def test_no_test_module_imports_another():
    """A test module is read, run and moved alone; importing one runs its module code (its
    fixtures, its pytestmark are not brought along) and ties two files' tests together."""
    assert importing_other_test_modules(suite_modules()) == []
