"""Survivors are tested again with the tests mutmut cannot run (tests/mutation/recheck.py)."""

import json
import os
import subprocess
import sys

from tests.mutation import recheck, run

OWNERSHIP = "core/identity/ownership.py"


def meta(tmp_path, codes: dict) -> None:
    path = tmp_path / "mutants" / "core" / "identity" / "ownership.py.meta"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"exit_code_by_key": codes}))


def rechecked(tmp_path, codes: dict, *, source: str) -> None:
    recheck.rechecked_path(tmp_path).write_text(
        json.dumps({"source_sha256": source, "exit_codes": codes})
    )


def test_a_survivor_a_server_test_killed_counts_as_killed(tmp_path):
    meta(tmp_path, {"a": 1, "b": 0, "c": 33, "d": 0})
    rechecked(tmp_path, {"b": 1, "c": 1, "d": 0}, source=recheck.source_digest(run.ROOT, OWNERSHIP))

    score = run.score_of(tmp_path, OWNERSHIP)

    assert (score.killed, score.total, score.survived, score.no_tests) == (3, 4, ["d"], [])
    alive = run.score_of(tmp_path, OWNERSHIP, credit_recheck=False)
    assert (alive.killed, alive.survived, alive.no_tests) == (1, ["b", "d"], ["c"])


def test_a_recheck_of_another_source_credits_nothing(tmp_path):
    meta(tmp_path, {"a": 1, "b": 0})
    rechecked(tmp_path, {"b": 1}, source="the module before its last change")

    assert run.score_of(tmp_path, OWNERSHIP).survived == ["b"]


def test_no_server_test_selected_leaves_the_mutant_alive(tmp_path):
    meta(tmp_path, {"b": 0})
    rechecked(tmp_path, {"b": 5}, source=recheck.source_digest(run.ROOT, OWNERSHIP))

    assert run.score_of(tmp_path, OWNERSHIP).survived == ["b"]


def test_the_recheck_keeps_only_the_tests_mutmut_skips():
    pytest = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist"]
    files = ["tests/reliability/test_concurrency.py", "tests/tooling/test_output_cap.py"]
    listed = subprocess.run(
        [*pytest, "-p", "no:cacheprovider", *files],
        cwd=run.ROOT,
        env={**os.environ, recheck.ONLY_OTHER_PROCESS: "1"},
        capture_output=True,
        text=True,
        check=False,
    )

    collected = [line for line in listed.stdout.splitlines() if "::" in line]
    assert collected, listed.stdout + listed.stderr
    assert all(line.startswith("tests/reliability/test_concurrency.py::") for line in collected)


def test_the_copy_holds_the_working_tree_and_the_modules_results(tmp_path):
    workdir = tmp_path / "core.identity.ownership"
    (workdir / "mutants").mkdir(parents=True)
    (workdir / "pyproject.toml").write_text("[tool.mutmut]\n")

    tree = recheck.tree_copy(run.ROOT, workdir)

    assert (tree / OWNERSHIP).read_bytes() == (run.ROOT / OWNERSHIP).read_bytes()
    assert not (tree / OWNERSHIP).is_symlink()  # a mutant written there stays there
    assert (tree / "tests" / "conftest.py").is_file()
    assert (tree / "mutants").resolve() == (workdir / "mutants").resolve()
    assert (tree / "pyproject.toml").read_text() == "[tool.mutmut]\n"
    assert not (tree / ".venv").exists() and not (tree / "var").exists()


def test_a_selection_with_no_server_test_spends_no_copy_on_its_survivors(tmp_path):
    codes = recheck.recheck(
        run.ROOT, tmp_path, OWNERSHIP, ["m_1", "m_2"], ["tests/tooling/test_output_cap.py"]
    )

    assert codes == {"m_1": 5, "m_2": 5}
    assert not (tmp_path / "recheck").exists()
    assert recheck.killed_by_recheck(run.ROOT, tmp_path, OWNERSHIP) == set()
