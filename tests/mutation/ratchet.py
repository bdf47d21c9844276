"""The mutation ratchet: a change that touches a guarantee module must not lower its score.

    python -m tests.mutation.ratchet [--base REF | --since-record] [--jobs N] [--measured FILE]
                                     [--record] [module.py ...]

The guarantee modules the change touches are run with `make mutate`'s runner
(tests/mutation/run.py), or read from FILE (a var/mutate/scores.json of an earlier run), and
each score is compared with the one recorded in
tests/mutation/scores.json. Lower than the record: exit 1, naming the module, both scores and
the surviving mutants. Modules named on the command line are checked instead of the touched
ones. A module with no record yet passes with a note; `--record` writes the
measured scores into the record unless one is lower (raise it after killing survivors, and
commit it).

What "touched" means: with `--base REF`, the files of `git diff --name-only REF` (committed or
not), for a branch compared with the one it will merge into. With `--since-record`, which is
what CI runs on a clone that has no base to compare with, the modules whose source is not the
one their record was measured on: each record keeps the SHA-256 of its module's source, so a
module changed and not measured again is run, and one measured and recorded since is not.
"""

import argparse
import json
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from tests.mutation import recheck, run

RECORD = Path(__file__).with_name("scores.json")


def touched_modules(changed: Iterable[str], modules: Iterable[str]) -> list[str]:
    """The guarantee modules among the changed files, in the configured order."""
    changed = set(changed)
    return [m for m in modules if m in changed]


def source_digest(module: str) -> str:
    """The SHA-256 of a guarantee module's source, as its record keeps it."""
    return recheck.source_digest(run.ROOT, module)


def changed_since_record(
    recorded: Mapping[str, Mapping[str, Any]],
    modules: Iterable[str],
    digest: Callable[[str], str] = source_digest,
) -> list[str]:
    """The recorded modules whose source differs from the one their score was measured on."""
    return [m for m in modules if m in recorded and recorded[m].get("source_sha256") != digest(m)]


def changed_files(base: str) -> list[str]:
    """Files changed since `base`, committed or not (paths relative to the repository)."""
    listed = subprocess.run(
        ["git", "diff", "--name-only", base],
        cwd=run.ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return [line for line in listed.stdout.splitlines() if line]


def verdicts(
    recorded: Mapping[str, Mapping[str, Any]], measured: Mapping[str, Mapping[str, Any]]
) -> tuple[list[str], list[str]]:
    """(failures, notes): a module whose measured percentage is below its record fails."""
    failures, notes = [], []
    for module, now in measured.items():
        before = recorded.get(module)
        if before is None:
            notes.append(f"{module}: {now['percent']} % (no record yet: --record sets one)")
            continue
        if now["percent"] < before["percent"]:
            survived = ", ".join(now.get("survived", [])[:20]) or "-"
            failures.append(
                f"{module}: {now['percent']} % is below its record of {before['percent']} % "
                f"({now['killed']} killed of {now['total']}; survivors: {survived})"
            )
        else:
            notes.append(f"{module}: {now['percent']} % (record {before['percent']} %)")
    return failures, notes


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text("utf-8")) if path.exists() else {}


def record(
    measured: Mapping[str, Mapping[str, Any]],
    path: Path = RECORD,
    digest: Callable[[str], str] = source_digest,
) -> None:
    """Write the measured scores into the record, each with its module's source digest
    (survivor names are not kept there): measure and record the same source."""
    known = load(path)
    for module, now in measured.items():
        known[module] = {k: now[k] for k in ("killed", "total", "percent")}
        known[module]["source_sha256"] = digest(module)
    path.write_text(json.dumps(known, indent=2, sort_keys=True) + "\n", "utf-8")


def measure(modules: list[str], jobs: int) -> dict[str, Any]:
    run.main(["--jobs", str(jobs), *modules])
    scores = load(run.WORK / "scores.json")
    return {m: scores[m] for m in modules}


def main(
    argv: list[str] | None = None,
    *,
    measure: Callable[[list[str], int], dict[str, Any]] = measure,
    changed: Callable[[str], list[str]] = changed_files,
    record_path: Path = RECORD,
    digest: Callable[[str], str] = source_digest,
) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    touched = parser.add_mutually_exclusive_group()
    touched.add_argument("--base", default="main", help="what the change is compared with")
    touched.add_argument(
        "--since-record",
        action="store_true",
        help="the modules whose source changed since their score was recorded (CI)",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--measured", type=Path, help="scores of an earlier run, not a new one")
    parser.add_argument("--record", action="store_true", help="write the scores as the record")
    parser.add_argument("modules", nargs="*", help="these modules, not those the change touches")
    args = parser.parse_args(argv)
    known = run.guarantee_modules(run.project_config())
    unknown = [m for m in args.modules if m not in known]
    if unknown:
        parser.error(f"not a guarantee module: {', '.join(unknown)}")
    if args.modules:
        modules = args.modules
    elif args.since_record:
        recorded = load(record_path)
        for module in (m for m in known if m not in recorded):
            print(f"mutation ratchet: {module} has no record yet, so nothing to hold it to")
        modules = changed_since_record(recorded, known, digest)
        if not modules:
            print(
                "mutation ratchet: every recorded guarantee module is the source it was measured on"
            )
            return 0
    else:
        modules = touched_modules(changed(args.base), known)
    if not modules:
        print("mutation ratchet: the change touches no guarantee module")
        return 0
    if args.measured is not None:
        scores = load(args.measured)
        missing = [m for m in modules if m not in scores]
        if missing:
            parser.error(f"{args.measured} has no score for: {', '.join(missing)}")
        measured = {m: scores[m] for m in modules}
    else:
        measured = measure(modules, args.jobs)
    failures, notes = verdicts(load(record_path), measured)
    for line in notes:
        print(f"mutation ratchet: {line}")
    for line in failures:
        print(f"mutation ratchet FAILED: {line}")
    if args.record and not failures:  # a record only rises: a lower score is never written
        record(measured, record_path, digest)
        print(f"mutation ratchet: recorded in {record_path}")
        return 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
