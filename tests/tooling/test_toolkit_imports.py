"""Tool modules import the toolkit and their own app, never the tooling internals behind it,
so the platform can change how it runs a call without touching a tool."""

import ast
from pathlib import Path

import pytest

from tooling.registry import registry

ROOT = Path(__file__).resolve().parents[2]
TOOLKIT = "tooling.toolkit"


def tool_modules() -> list[Path]:
    """Every tools.py of the project (the apps', the test app's), outside the virtualenv, and
    the platform's own identity tools."""
    return sorted(
        [
            *(
                path
                for path in ROOT.rglob("tools.py")
                if not {".venv", "node_modules", ".git"} & set(path.relative_to(ROOT).parts)
            ),
            ROOT / "tooling" / "identity_tools.py",
        ]
    )


def imported_modules(source: str, module: str) -> set[str]:
    """The modules `source` (the text of `module`, dotted) imports, relative imports resolved;
    `from package import name` counts as package.name when the package is tooling, whose
    names are its modules."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = module.split(".")[: -node.level] if node.level else []
            base = ".".join([*parts, *([node.module] if node.module else [])])
            if base == "tooling":
                found.update(f"tooling.{alias.name}" for alias in node.names)
            else:
                found.add(base)
    return found


def tooling_internals(source: str, module: str) -> set[str]:
    """The tooling modules `source` imports besides the toolkit (the bare package too: it
    reaches every internal already loaded)."""
    return {
        name
        for name in imported_modules(source, module)
        if (name == "tooling" or name.startswith("tooling.")) and name != TOOLKIT
    }


def dotted(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def test_every_tool_module_imports_only_the_toolkit_from_tooling():
    """agenda, sales, support, the identity tools and the test app's tools alike."""
    offenders = {
        dotted(path): sorted(tooling_internals(path.read_text(encoding="utf-8"), dotted(path)))
        for path in tool_modules()
    }

    assert {module: names for module, names in offenders.items() if names} == {}


def test_the_modules_checked_are_the_ones_the_registry_serves_tools_from():
    """A tool declared in a module this walk would miss would escape the rule above."""
    checked = {dotted(path) for path in tool_modules()}
    serving = {tool.handler.__module__ for tool in registry.all()}

    assert serving <= checked
    assert {"agenda.tools", "sales.tools", "support.tools", "tooling.identity_tools"} <= serving


@pytest.mark.parametrize(
    ("source", "internal"),
    [
        ("from tooling.ledger import ledger_show", "tooling.ledger"),
        ("import tooling.context", "tooling.context"),
        ("from tooling import registry", "tooling.registry"),
        ("from .output import page", "tooling.output"),
        ("from . import ledger", "tooling.ledger"),
        ("import tooling", "tooling"),
    ],
)
def test_the_check_sees_each_way_of_importing_an_internal(source, internal):
    """Absolute, from the package and relative imports, as if written in tooling/identity_tools.py;
    the toolkit itself passes however it is imported."""
    module = "tooling.identity_tools"

    assert tooling_internals(source, module) == {internal}
    assert tooling_internals("from tooling.toolkit import tool, ToolInput", module) == set()
    assert tooling_internals("from tooling import toolkit", module) == set()
    assert tooling_internals("from .toolkit import tool", module) == set()
