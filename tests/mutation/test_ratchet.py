"""The mutation ratchet (tests/mutation/ratchet.py) fails a change that lowers a score."""

import json
import tomllib

import pytest

from tests.mutation import ratchet, run

OWNERSHIP = "core/identity/ownership.py"
LIMITS = "core/identity/limits.py"


def score(killed: int, total: int) -> dict:
    return {
        "module": OWNERSHIP,
        "killed": killed,
        "total": total,
        "percent": round(100 * killed / total, 1),
        "survived": [f"core.identity.ownership.x_check_owner__mutmut_{n}" for n in range(3)],
    }


@pytest.fixture
def recorded(tmp_path):
    path = tmp_path / "scores.json"
    path.write_text(json.dumps({OWNERSHIP: {"killed": 80, "total": 90, "percent": 88.9}}))
    return path


def main(recorded, changed, measured):
    runs = []

    def measure(modules, jobs):
        runs.append(modules)
        return {m: measured for m in modules}

    code = ratchet.main([], measure=measure, changed=lambda base: changed, record_path=recorded)
    return code, runs


def test_a_change_that_lowers_a_modules_score_fails(recorded, capsys):
    code, runs = main(recorded, [OWNERSHIP, "README.md"], score(70, 90))

    assert code == 1
    assert runs == [[OWNERSHIP]]
    out = capsys.readouterr().out
    assert "FAILED: core/identity/ownership.py: 77.8 % is below its record of 88.9 %" in out
    assert "x_check_owner__mutmut_0" in out


@pytest.mark.parametrize("killed", [80, 85])
def test_the_same_or_a_higher_score_passes(recorded, killed):
    assert main(recorded, [OWNERSHIP], score(killed, 90))[0] == 0


def test_a_change_that_touches_no_guarantee_module_runs_nothing(recorded, capsys):
    code, runs = main(recorded, ["docs/testing.md", "core/identity/binding.py"], score(1, 90))

    assert (code, runs) == (0, [])
    assert "touches no guarantee module" in capsys.readouterr().out


def test_a_module_without_a_record_passes_and_says_so(tmp_path, capsys):
    code, _ = main(tmp_path / "none.json", [LIMITS], score(10, 90))

    assert code == 0
    assert "no record yet" in capsys.readouterr().out


def test_record_raises_the_record_but_never_lowers_it(recorded):
    def record(measured):
        return ratchet.main(
            ["--record"],
            measure=lambda modules, jobs: {m: measured for m in modules},
            changed=lambda base: [OWNERSHIP],
            record_path=recorded,
        )

    assert record(score(60, 90)) == 1
    assert json.loads(recorded.read_text())[OWNERSHIP]["percent"] == 88.9
    assert record(score(89, 90)) == 0
    assert json.loads(recorded.read_text())[OWNERSHIP] == {
        "killed": 89,
        "total": 90,
        "percent": 98.9,
        "source_sha256": ratchet.source_digest(OWNERSHIP),
    }


def since_record(recorded, measured, *, source):
    """CI's ratchet on a clone: the record says which source its score was measured on."""
    runs = []

    def measure(modules, jobs):
        runs.append(modules)
        return {m: measured for m in modules}

    code = ratchet.main(
        ["--since-record"],
        measure=measure,
        changed=lambda base: pytest.fail("CI's ratchet has no base to compare with"),
        record_path=recorded,
        digest=lambda module: source if module == OWNERSHIP else "unrecorded",
    )
    return code, runs


@pytest.fixture
def recorded_source(recorded):
    known = json.loads(recorded.read_text())
    known[OWNERSHIP]["source_sha256"] = "measured-source"
    recorded.write_text(json.dumps(known))
    return recorded


def test_ci_runs_a_module_changed_since_its_record_and_fails_a_lower_score(recorded_source, capsys):
    code, runs = since_record(recorded_source, score(70, 90), source="changed-source")

    assert (code, runs) == (1, [[OWNERSHIP]])
    assert "77.8 % is below its record of 88.9 %" in capsys.readouterr().out


def test_ci_passes_a_changed_module_that_keeps_its_score(recorded_source):
    assert since_record(recorded_source, score(80, 90), source="changed-source") == (
        0,
        [[OWNERSHIP]],
    )


def test_ci_runs_nothing_for_a_module_measured_on_its_current_source(recorded_source, capsys):
    code, runs = since_record(recorded_source, score(1, 90), source="measured-source")

    assert (code, runs) == (0, [])
    assert "the source it was measured on" in capsys.readouterr().out


def test_a_record_without_its_source_digest_counts_as_changed(recorded):
    assert since_record(recorded, score(70, 90), source="measured-source") == (1, [[OWNERSHIP]])


def test_the_measured_scores_of_an_earlier_run_can_be_read(recorded, tmp_path):
    measured = tmp_path / "measured.json"
    measured.write_text(json.dumps({OWNERSHIP: score(70, 90)}))

    code = ratchet.main(
        ["--measured", str(measured)], changed=lambda base: [OWNERSHIP], record_path=recorded
    )

    assert code == 1


def test_every_recorded_module_is_a_guarantee_module():
    modules = run.guarantee_modules(run.project_config())
    assert set(ratchet.load(ratchet.RECORD)) <= set(modules)


def test_a_run_tallies_mutmuts_exit_codes(tmp_path):
    meta = tmp_path / "mutants" / "core" / "identity" / "ownership.py.meta"
    meta.parent.mkdir(parents=True)
    codes = {"a": 1, "b": 0, "c": 33, "d": -9, "e": None, "f": 3}
    meta.write_text(json.dumps({"exit_code_by_key": codes}))

    tally = run.score_of(tmp_path, OWNERSHIP)

    assert (tally.killed, tally.total) == (3, 6)
    assert (tally.survived, tally.no_tests, tally.not_checked) == (["b"], ["c"], ["e"])
    assert tally.line().startswith(f"{OWNERSHIP}: 3 killed of 6 (50.0 %)")
    assert run.summary([tally]) == "mutation score: 3 killed of 6 (50.0 %)"


def test_each_modules_run_has_its_own_configuration():
    config = run.project_config()
    text = run.module_pyproject(config, OWNERSHIP, ["tests/core/test_identity.py"])

    parsed = tomllib.loads(text)
    assert parsed["tool"]["mutmut"]["source_paths"] == [OWNERSHIP]
    assert parsed["tool"]["mutmut"]["pytest_add_cli_args_test_selection"] == [
        "tests/core/test_identity.py"
    ]
    assert parsed["tool"]["pytest"]["ini_options"] == config["tool"]["pytest"]["ini_options"]
    assert parsed["tool"]["mutmut"]["also_copy"] == config["tool"]["mutmut"]["also_copy"]


def test_survivors_are_tested_again_only_when_a_test_changed(tmp_path, monkeypatch):
    meta = tmp_path / "mutants" / "core" / "identity" / "ownership.py.meta"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"exit_code_by_key": {"a": 1, "b": 0, "c": 33}, "other": 1}))
    digest = iter(["first", "first", "second"])
    monkeypatch.setattr(run, "tests_digest", lambda: next(digest))

    assert run.retest_survivors_when_tests_changed(tmp_path, OWNERSHIP) == 2  # no stamp yet
    assert run.retest_survivors_when_tests_changed(tmp_path, OWNERSHIP) == 0  # unchanged
    json_meta = json.loads(meta.read_text())
    assert json_meta == {"exit_code_by_key": {"a": 1, "b": None, "c": None}, "other": 1}
    json_meta["exit_code_by_key"] |= {"b": 0, "c": 1}
    meta.write_text(json.dumps(json_meta))
    assert run.retest_survivors_when_tests_changed(tmp_path, OWNERSHIP) == 1  # a test changed


def test_modules_named_are_checked_whatever_the_change_touches(recorded):
    code = ratchet.main(
        [OWNERSHIP],
        measure=lambda modules, jobs: {m: score(70, 90) for m in modules},
        changed=lambda base: [],
        record_path=recorded,
    )

    assert code == 1
