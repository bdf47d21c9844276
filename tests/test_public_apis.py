"""The project touches only the public API of the libraries it runs on (Django, psycopg, Celery,
kombu and every other installed package): a private attribute breaks silently on a minor
upgrade. Checked on the source, every .py file of the project outside tests/ and .venv/; bench/
is read too, since `make bench` runs its code against the same libraries and an upgrade would
break it the same way (what it patches of the project's own internals is the project's).

Which object an attribute belongs to is decided statically, by these rules:

1. An import of an underscore name, or from an underscore module, of a package that is not the
   project's: `from psycopg.errors import _WaitTimeout`, `from django.utils._os import x`.
2. An underscore attribute anywhere in an expression rooted at a name imported from such a
   package: `psycopg.connection._WAIT_INTERVAL`, `connections["default"]._x`,
   `connection.ops._y()`.
3. An underscore attribute of any other object (`self._x`, `field._y`, `getattr(o, "_z")`)
   whose name the project defines nowhere (no function, class, assignment, attribute
   assignment, parameter, import alias or dataclass field of that name): a name the project
   did not make is a library's.
4. A method or class attribute with an underscore name defined in a class whose base is a
   library's class that has that name: an override of its internals.
5. Django's undocumented internals without an underscore (UNDOCUMENTED_DJANGO), imported,
   read, written or overridden on any object: its connection's health-check flags, its atomic
   and savepoint stacks, its on-commit list, the ORM's column and converter machinery. None of
   them is in Django's documentation (checked against the docs of the installed release);
   `transaction.get_autocommit()`, `on_commit()`, `reset_queries()` and the
   CONN_HEALTH_CHECKS setting are the public ways to the same facts.

Dunder names are not private. DOCUMENTED_UNDERSCORE lists the underscore names the libraries
document as public. Nothing is excused.
"""

import ast
import functools
import importlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# var/ holds what runs leave behind, `make mutate`'s copies of the tree among them.
SKIPPED_DIRS = {"tests", ".venv", "node_modules", "bench-results", "build", "dist", "var"}
PROJECT_PACKAGES = {
    path.parent.name if path.name == "__init__.py" else path.stem
    for path in ROOT.glob("*/__init__.py")
} | {path.stem for path in ROOT.glob("*.py")}

# Underscore names that their library documents as public API.
DOCUMENTED_UNDERSCORE = {
    # Django: the Model _meta API, the managers the ORM itself uses, an instance's state.
    "_meta",
    "_default_manager",
    "_base_manager",
    "_state",
    # collections.namedtuple's documented methods and attributes.
    "_asdict",
    "_replace",
    "_fields",
    "_field_defaults",
    "_make",
    # The standard library's documented underscore functions.
    "_exit",
    "_getframe",
}

# Django's internals without an underscore that its documentation never names: the connection
# and transaction bookkeeping Django itself sets and reads as atomic blocks open and close, and
# the ORM's compiler-side column and converter machinery.
UNDOCUMENTED_DJANGO = {
    "in_atomic_block",
    "needs_rollback",
    "savepoint_ids",
    "savepoint_state",
    "atomic_blocks",
    "commit_on_exit",
    "closed_in_transaction",
    "run_on_commit",
    "run_commit_hooks_on_set_autocommit_on",
    "health_check_enabled",
    "health_check_done",
    "close_if_health_check_failed",
    "errors_occurred",
    "execute_wrappers",
    "queries_log",
    "Col",
    "cached_col",
    "get_db_converters",
}


def project_files() -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if not SKIPPED_DIRS.intersection(relative.parts[:-1]):
            yield path


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def is_library(module: str | None) -> bool:
    """Whether a module is someone else's: not the project's, not a relative import."""
    if not module:
        return False
    top = module.split(".")[0]
    return top not in PROJECT_PACKAGES


def is_third_party(module: str) -> bool:
    return is_library(module) and module.split(".")[0] not in sys.stdlib_module_names


def names_defined(trees: dict[Path, ast.Module]) -> set[str]:
    """Every name the project binds anywhere, by any means."""
    defined: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                # `self._x = ...` makes a name; `obj._x = ...` does too, unless the name is one
                # the libraries use themselves: then it writes their internals
                # (`response._has_been_logged`, a queryset's `_result_cache`).
                if _name_of(node.value) in {"self", "cls"} or node.attr not in library_attributes():
                    defined.add(node.attr)
            elif isinstance(node, ast.arg) or (isinstance(node, ast.keyword) and node.arg):
                defined.add(node.arg)
            elif isinstance(node, ast.alias) and node.asname:
                defined.add(node.asname)
            elif isinstance(node, ast.ImportFrom) and not is_library(node.module):
                defined.update(alias.name for alias in node.names)
            elif (
                isinstance(node, ast.Call)
                and _name_of(node.func) == "setattr"
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
            ):
                defined.add(str(node.args[1].value))
    return defined


# The packages whose internals the project could be tempted to reach: their own attribute names.
INTERNALS_OF = ("django", "psycopg", "celery", "kombu")


@functools.cache
def library_attributes() -> frozenset[str]:
    """Every underscore attribute name the source of INTERNALS_OF reads or writes (`._name`)."""
    found: set[str] = set()
    for package in INTERNALS_OF:
        for folder in importlib.import_module(package).__path__:
            for path in Path(folder).rglob("*.py"):
                found.update(ATTRIBUTE.findall(path.read_text(encoding="utf-8", errors="ignore")))
    return frozenset(name for name in found if is_private(name))


ATTRIBUTE = re.compile(r"\.(_[A-Za-z]\w*)")


def _name_of(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def library_imports(tree: ast.Module) -> dict[str, str]:
    """The names of a module bound to a library's module or object: name -> dotted origin."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if is_library(alias.name):
                    local = alias.asname or alias.name.split(".")[0]
                    bound[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and is_library(node.module):
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def root_of(node: ast.AST) -> ast.AST:
    """The innermost object of `a.b[c].d(e).f`: `a`."""
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def resolve(origin: str) -> object | None:
    """The library object a dotted origin names, imported; None if it cannot be."""
    parts = origin.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for part in parts[split:]:
                found = getattr(found, part)
        except AttributeError:
            return None
        return found
    return None


def library_bases(node: ast.ClassDef, imports: dict[str, str]) -> list[type]:
    bases = []
    for base in node.bases:
        parts = []
        while isinstance(base, ast.Attribute):
            parts.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name) and base.id in imports:
            found = resolve(".".join([imports[base.id], *reversed(parts)]))
            if isinstance(found, type):
                bases.append(found)
    return bases


def uses_in(path: Path, tree: ast.Module, defined: set[str]) -> Iterator[tuple[int, str, str]]:
    """(line, name, why) for each private or undocumented library attribute the file uses."""
    imports = library_imports(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and is_library(node.module):
            module = node.module or ""
            private_module = [part for part in module.split(".") if is_private(part)]
            for alias in node.names:
                undocumented = module.startswith("django") and alias.name in UNDOCUMENTED_DJANGO
                if is_private(alias.name) or private_module or undocumented:
                    yield node.lineno, alias.name, f"imported from {module}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if is_library(alias.name) and any(map(is_private, alias.name.split("."))):
                    yield node.lineno, alias.name, "a private module imported"
        elif isinstance(node, ast.ClassDef):
            bases = library_bases(node, imports)
            for item in node.body:
                names = []
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names = [item.name]
                elif isinstance(item, ast.Assign):
                    names = [t.id for t in item.targets if isinstance(t, ast.Name)]
                for name in names:
                    base = next((b for b in bases if hasattr(b, name)), None)
                    if base is None:
                        continue
                    if name in UNDOCUMENTED_DJANGO or (
                        is_private(name) and name not in DOCUMENTED_UNDERSCORE
                    ):
                        yield item.lineno, name, f"overrides {base.__module__}.{base.__name__}"
        else:
            attribute = _attribute_used(node)
            if attribute is None:
                continue
            name, owner = attribute
            if name in UNDOCUMENTED_DJANGO:
                yield node.lineno, name, "undocumented in Django"
                continue
            if not is_private(name) or name in DOCUMENTED_UNDERSCORE:
                continue
            root = root_of(owner)
            if isinstance(root, ast.Name) and root.id in imports:
                yield node.lineno, name, f"of {imports[root.id]}"
            elif name not in defined:
                yield node.lineno, name, "defined by no code of the project"


def _attribute_used(node: ast.AST) -> tuple[str, ast.AST] | None:
    """(name, object) for `object.name` and getattr/setattr/hasattr(object, "name")."""
    if isinstance(node, ast.Attribute):
        return node.attr, node.value
    if (
        isinstance(node, ast.Call)
        and _name_of(node.func) in {"getattr", "setattr", "hasattr", "delattr"}
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    ):
        return node.args[1].value, node.args[0]
    return None


def library_internals_used() -> list[tuple[str, int, str, str]]:
    trees = {path: ast.parse(path.read_text(), filename=str(path)) for path in project_files()}
    defined = names_defined(trees)
    found = []
    for path, tree in trees.items():
        relative = path.relative_to(ROOT).as_posix()
        for line, name, why in uses_in(path, tree, defined):
            found.append((relative, line, name, why))
    return sorted(set(found))


@pytest.fixture(scope="module")
def used() -> list[tuple[str, int, str, str]]:
    return library_internals_used()


def test_the_project_uses_no_private_or_undocumented_attribute_of_a_library(used):
    assert not used, "\n".join(f"{path}:{line}: {name} ({why})" for path, line, name, why in used)


def test_the_check_finds_what_it_is_for(tmp_path):
    """Each rule on a sample: a check that finds nothing proves nothing."""
    sample = (
        "import psycopg\n"
        "from django.db import connection, connections\n"
        "from django.db.backends.postgresql import base\n"
        "from psycopg.errors import _WaitTimeout\n"
        "class Wrapper(base.DatabaseWrapper):\n"
        "    def _commit(self):\n"
        "        return self.health_check_done\n"
        "x = psycopg.connection._WAIT_INTERVAL\n"
        "y = connections['default']._named_cursor_idx\n"
        "z = connection.in_atomic_block\n"
        "w = object()._mystery\n"
        "v = getattr(connection, '_hidden')\n"
        "from django.db.models.expressions import Col\n"
        "ok = connection.vendor, Wrapper._meta if False else None\n"
    )
    tree = ast.parse(sample)
    found = {(line, name) for line, name, _ in uses_in(tmp_path, tree, names_defined({}))}

    assert found == {
        (4, "_WaitTimeout"),
        (6, "_commit"),
        (7, "health_check_done"),
        (8, "_WAIT_INTERVAL"),
        (9, "_named_cursor_idx"),
        (10, "in_atomic_block"),
        (11, "_mystery"),
        (12, "_hidden"),
        (13, "Col"),
    }
