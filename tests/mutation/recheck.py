"""Survivors tested again with the tests mutmut cannot run, before they count as survivors.

mutmut credits a kill to the tests that reached the mutated function in its own process, so
`make mutate` skips the tests whose code runs in another process (a gunicorn server, a Celery
worker, a browser: `OTHER_PROCESS_FIXTURES` in tests/conftest.py). A storm or a server test
may kill what survived there. For each survivor of a module's last run (and each mutant no
test reached), this writes the mutant into a copy of the tree (`mutmut apply` in
var/mutate/<module>/recheck/, never in the repository), runs there the module's tests that
were skipped, plus the server tests `[tool.garante.mutate-recheck]` names for it, and keeps
each verdict in var/mutate/<module>/rechecked.json with the digest of the module's source it
was measured on. tests/mutation/run.py (`make mutate`) runs it after each module's mutmut run,
and counts a survivor killed here as killed while the module's source is unchanged.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

# Under this variable tests/conftest.py keeps only the tests `make mutate` skips.
ONLY_OTHER_PROCESS = "GARANTE_MUTATION_RECHECK"
# pytest's exit codes that leave a mutant alive: every test passed, or none was selected (the
# module has no server test).
NOTHING_RAN = 5
SURVIVED = frozenset({0, NOTHING_RAN})
PYTEST = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist")
# Folders the tests need that git does not hold (installed by `make test`).
INSTALLED = ("tests/accessibility/node_modules", "tests/conformance/node_modules")


def source_digest(root: Path, module: str) -> str:
    return hashlib.sha256((root / module).read_bytes()).hexdigest()


def tree_copy(root: Path, workdir: Path) -> Path:
    """A copy of the working tree (tracked and new files, as they are now) in the module's
    run directory, with mutmut's results linked in so that `mutmut apply` finds the mutants."""
    tree = workdir / "recheck"
    if tree.exists():
        shutil.rmtree(tree)
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    )
    for name in filter(None, listed.stdout.decode().split("\0")):
        source = root / name
        if source.is_file():
            target = tree / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    for name in INSTALLED:
        if (root / name).is_dir():
            (tree / name).symlink_to(root / name)
    shutil.copy2(workdir / "pyproject.toml", tree / "pyproject.toml")
    (tree / "mutants").symlink_to(workdir / "mutants")
    return tree


def verdict(tree: Path, module: str, mutant: str, tests: list[str], *, fresh_db: bool) -> int:
    """pytest's exit code for `tests` with `mutant` written into the copy's module (restored
    afterwards): 0 survived, 5 nothing ran, anything else killed."""
    original = (tree / module).read_bytes()
    applied = subprocess.run(
        [sys.executable, "-m", "mutmut", "apply", mutant],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        if applied.returncode != 0 or (tree / module).read_bytes() == original:
            raise SystemExit(f"mutmut could not apply {mutant}: {applied.stderr[-2000:]}")
        database = "--create-db" if fresh_db else "--reuse-db"
        completed = subprocess.run(
            [*PYTEST, "-x", database, *tests],
            cwd=tree,
            env={**os.environ, ONLY_OTHER_PROCESS: "1", "PYTHONDONTWRITEBYTECODE": "1"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        return completed.returncode
    finally:
        (tree / module).write_bytes(original)


def selects_any(root: Path, tests: list[str]) -> bool:
    """Whether `tests` hold any test that runs code in another process (collected, not run)."""
    collected = subprocess.run(
        [*PYTEST, "--collect-only", *tests],
        cwd=root,
        env={**os.environ, ONLY_OTHER_PROCESS: "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return collected.returncode != NOTHING_RAN


def rechecked_path(workdir: Path) -> Path:
    return workdir / "rechecked.json"


def killed_by_recheck(root: Path, workdir: Path, module: str) -> set[str]:
    """The mutants the recheck killed, if the module's source is still the one it ran on."""
    path = rechecked_path(workdir)
    if not path.exists():
        return set()
    kept = json.loads(path.read_text("utf-8"))
    if kept.get("source_sha256") != source_digest(root, module):
        return set()
    return {name for name, code in kept["exit_codes"].items() if code not in SURVIVED}


def recheck(
    root: Path, workdir: Path, module: str, candidates: Iterable[str], tests: list[str]
) -> dict[str, int]:
    """Each candidate's verdict under `tests`, those of an earlier recheck of the same source
    kept: {mutant: pytest's exit code}."""
    path = rechecked_path(workdir)
    digest = source_digest(root, module)
    kept = json.loads(path.read_text("utf-8")) if path.exists() else {}
    codes = kept.get("exit_codes", {}) if kept.get("source_sha256") == digest else {}
    candidates = list(candidates)
    todo = [m for m in candidates if m not in codes]
    if todo and not selects_any(root, tests):
        # No test of the selection runs elsewhere: no mutant is worth a copy and a session.
        codes.update(dict.fromkeys(todo, NOTHING_RAN))
        todo = []
    if todo:
        tree = tree_copy(root, workdir)
        try:
            for n, mutant in enumerate(todo):
                codes[mutant] = verdict(tree, module, mutant, tests, fresh_db=n == 0)
                path.write_text(
                    json.dumps({"source_sha256": digest, "exit_codes": codes}, indent=2), "utf-8"
                )
        finally:
            shutil.rmtree(tree)
    return {m: codes[m] for m in candidates}
