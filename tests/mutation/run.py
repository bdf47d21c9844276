"""`make mutate`: mutmut over the guarantee modules, one module at a time (docs/testing.md).

Each module runs in a directory of its own, var/mutate/<module>/, whose pyproject.toml is the
repository's with `source_paths` set to that module and the test selection to its tests
(`[tool.garante.mutate]`). mutmut keeps its results there (mutants/), so a second run tests
again only the functions that changed, and, when a test changed, the survivors. The project's
files are linked into that directory, never copied by hand: mutmut copies them into mutants/.

    python -m tests.mutation.run [--jobs N] [module.py ...]

prints one line per module and ends with `mutation score: K killed of N (P %)`; the scores and
the surviving mutants' names are left in var/mutate/scores.json for the ratchet
(tests/mutation/ratchet.py). Before they count, survivors are tested again with the tests
mutmut cannot run, those whose code runs in a server, a worker or a browser
(tests/mutation/recheck.py; `--no-recheck` skips it).
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.mutation import recheck

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "var" / "mutate"

# mutmut's exit codes (mutmut.stats.status_by_exit_code): a test failed or errored (1, 3), or
# the mutant made the tests run past their CPU or wall-clock limit (24, 36, 152, 255, -9). A
# mutant that makes the tests hang is one the tests notice.
KILLED = frozenset({1, 3, 24, -24, 36, 152, 255, -9, -11})
SURVIVED = frozenset({0})
NO_TESTS = frozenset({5, 33})


@dataclass
class ModuleScore:
    """One module's result: every mutant counts in `total`; only `killed` counts as caught."""

    module: str
    killed: int = 0
    total: int = 0
    survived: list[str] = field(default_factory=list)
    no_tests: list[str] = field(default_factory=list)
    not_checked: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def percent(self) -> float:
        return 100.0 * self.killed / self.total if self.total else 100.0

    def line(self) -> str:
        return (
            f"{self.module}: {self.killed} killed of {self.total} ({self.percent:.1f} %), "
            f"{len(self.survived)} survived, {len(self.no_tests)} reached by no test, "
            f"{len(self.not_checked)} not checked, {self.seconds:.0f} s"
        )


def project_config() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))


def guarantee_modules(config: Mapping[str, Any]) -> dict[str, list[str]]:
    """Each guarantee module with the tests it is measured with, in the configured order."""
    tests = config["tool"]["garante"]["mutate"]
    modules = config["tool"]["mutmut"]["source_paths"]
    missing = [m for m in modules if m not in tests]
    if missing:
        raise SystemExit(f"[tool.garante.mutate] names no tests for: {', '.join(missing)}")
    return {m: list(tests[m]) for m in modules}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML")


def module_pyproject(config: Mapping[str, Any], module: str, tests: list[str]) -> str:
    """The pyproject.toml of one module's run: pytest's settings and mutmut's, narrowed."""
    mutmut = dict(config["tool"]["mutmut"])
    mutmut["source_paths"] = [module]
    mutmut["pytest_add_cli_args_test_selection"] = tests
    sections = {"tool.pytest.ini_options": config["tool"]["pytest"]["ini_options"]}
    sections["tool.mutmut"] = mutmut
    lines = []
    for name, table in sections.items():
        lines.append(f"[{name}]")
        lines.extend(f"{key} = {_toml_value(value)}" for key, value in table.items())
        lines.append("")
    return "\n".join(lines)


def _slug(module: str) -> str:
    return module.removesuffix(".py").replace("/", ".")


def prepare(config: Mapping[str, Any], module: str, tests: list[str]) -> Path:
    """The module's run directory: its pyproject.toml and links to what mutmut copies."""
    workdir = WORK / _slug(module)
    workdir.mkdir(parents=True, exist_ok=True)
    linked = {Path(p).parts[0] for p in config["tool"]["mutmut"]["also_copy"]}
    linked |= {"tests", Path(module).parts[0]}
    for name in sorted(linked):
        link = workdir / name
        if not link.is_symlink():
            link.symlink_to(ROOT / name)
    text = module_pyproject(config, module, tests)
    target = workdir / "pyproject.toml"
    if not target.exists() or target.read_text("utf-8") != text:
        target.write_text(text, "utf-8")
    return workdir


def score_of(workdir: Path, module: str, *, credit_recheck: bool = True) -> ModuleScore:
    """Tally mutmut's results for `module` from its .meta file; a survivor (or a mutant no test
    reached) that the recheck's server tests killed counts as killed (tests/mutation/recheck.py)."""
    meta = json.loads((workdir / "mutants" / f"{module}.meta").read_text("utf-8"))
    rechecked = recheck.killed_by_recheck(ROOT, workdir, module) if credit_recheck else set()
    score = ModuleScore(module=module)
    for name, code in sorted(meta["exit_code_by_key"].items()):
        score.total += 1
        if code in KILLED or (name in rechecked and code in SURVIVED | NO_TESTS):
            score.killed += 1
        elif code in SURVIVED:
            score.survived.append(name)
        elif code in NO_TESTS:
            score.no_tests.append(name)
        else:
            score.not_checked.append(name)
    return score


def tests_digest() -> str:
    """One digest of every test file and fixture (tests/**/*.py)."""
    digest = hashlib.sha256()
    for path in sorted((ROOT / "tests").rglob("*.py")):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def retest_survivors_when_tests_changed(workdir: Path, module: str) -> int:
    """mutmut keeps a mutant's verdict until its function changes, and a survivor stays one
    even after a test that kills it is added: when any test file changed since the module's
    last run, its survivors and the mutants no test reached are tested again."""
    stamp = workdir / "tests.sha256"
    meta_path = workdir / "mutants" / f"{module}.meta"
    now = tests_digest()
    if not meta_path.exists() or (stamp.exists() and stamp.read_text() == now):
        stamp.write_text(now)
        return 0
    meta = json.loads(meta_path.read_text("utf-8"))
    codes = meta["exit_code_by_key"]
    again = [name for name, code in codes.items() if code in SURVIVED | NO_TESTS]
    for name in again:
        codes[name] = None
    meta_path.write_text(json.dumps(meta, indent=4), "utf-8")
    stamp.write_text(now)
    return len(again)


def run_module(
    config: Mapping[str, Any],
    module: str,
    tests: list[str],
    jobs: int,
    *,
    with_recheck: bool = True,
) -> ModuleScore:
    workdir = prepare(config, module, tests)
    retest_survivors_when_tests_changed(workdir, module)
    log = workdir / "mutmut.log"
    started = time.monotonic()
    with log.open("w") as out:
        completed = subprocess.run(
            [sys.executable, "-m", "mutmut", "run", "--max-children", str(jobs)],
            cwd=workdir,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            check=False,
        )
    if completed.returncode != 0:
        tail = log.read_text("utf-8", errors="replace").splitlines()[-30:]
        raise SystemExit(
            f"mutmut failed on {module} (exit {completed.returncode}); the end of {log}:\n"
            + "\n".join(tail)
        )
    if with_recheck:
        alive = score_of(workdir, module, credit_recheck=False)
        recheck.recheck(
            ROOT,
            workdir,
            module,
            alive.survived + alive.no_tests,
            recheck_tests(config, module, tests),
        )
    score = score_of(workdir, module)
    score.seconds = time.monotonic() - started
    return score


def recheck_tests(config: Mapping[str, Any], module: str, tests: list[str]) -> list[str]:
    """What survivors are tested again with: the module's selection (its tests that run code in
    another process, which mutmut skipped) and the server tests `[tool.garante.mutate-recheck]`
    adds for it."""
    extra = config["tool"]["garante"].get("mutate-recheck", {}).get(module, [])
    return [*tests, *extra]


def summary(scores: Iterable[ModuleScore]) -> str:
    scores = list(scores)
    killed = sum(s.killed for s in scores)
    total = sum(s.total for s in scores)
    percent = 100.0 * killed / total if total else 100.0
    return f"mutation score: {killed} killed of {total} ({percent:.1f} %)"


def save_scores(scores: Iterable[ModuleScore]) -> Path:
    """Merge these modules' results into var/mutate/scores.json (other modules' are kept)."""
    path = WORK / "scores.json"
    known = json.loads(path.read_text("utf-8")) if path.exists() else {}
    for s in scores:
        known[s.module] = {**asdict(s), "percent": round(s.percent, 1)}
    path.write_text(json.dumps(known, indent=2, sort_keys=True) + "\n", "utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="guarantee modules (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once")
    parser.add_argument(
        "--no-recheck",
        action="store_true",
        help="count survivors without testing them again with the server tests",
    )
    args = parser.parse_args(argv)
    config = project_config()
    known = guarantee_modules(config)
    chosen = args.modules or list(known)
    unknown = [m for m in chosen if m not in known]
    if unknown:
        parser.error(
            f"not a guarantee module: {', '.join(unknown)} (the list is [tool.mutmut] "
            "source_paths in pyproject.toml)"
        )
    scores = []
    for module in chosen:
        score = run_module(
            config, module, known[module], args.jobs, with_recheck=not args.no_recheck
        )
        print(score.line(), flush=True)
        scores.append(score)
    save_scores(scores)
    print(summary(scores))
    return 0


if __name__ == "__main__":
    sys.exit(main())
