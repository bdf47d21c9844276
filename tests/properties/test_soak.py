"""`make soak`: the in-process machine for as long as asked (GARANTE_SOAK_MINUTES), one
seeded run after another, then a report: how long, examples and steps run, how often each
rule ran, time per tool, and the counterexample if one was found (Hypothesis shrinks it
first). Skipped unless GARANTE_SOAK_MINUTES is set, so `make test` never runs it."""

import json
import os
import random
import time
import traceback
from pathlib import Path

import pytest

from tests.properties.machine import RULES_HIT, STEPS
from tests.properties.runs import InProcessMachine, run_seeded
from tests.properties.transports import OUTCOMES, TOOL_CALLS, TOOL_SECONDS

MINUTES = os.environ.get("GARANTE_SOAK_MINUTES")
REPORT = Path(os.environ.get("GARANTE_SOAK_REPORT", "var/soak-report.json"))

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not MINUTES, reason="the soak runs only under `make soak`"),
]


def test_soak(machine_environment):
    deadline = time.monotonic() + float(MINUTES) * 60
    started = time.monotonic()
    runs, counterexample = [], None
    while time.monotonic() < deadline and counterexample is None:
        at = random.randrange(2**32)
        try:
            run_seeded(InProcessMachine, 10, 50, at)
        except Exception as failure:
            notes = "\n".join(getattr(failure, "__notes__", []))
            counterexample = {
                "seed": at,
                "error": "".join(traceback.format_exception_only(failure)).strip(),
                "steps": notes,
            }
        runs.append(at)
        write_report(started, runs, counterexample)
    summary = write_report(started, runs, counterexample)
    print(json.dumps(summary, indent=2, ensure_ascii=False))
    assert counterexample is None, counterexample["error"] + "\n" + counterexample["steps"]


def write_report(started: float, runs: list[int], counterexample: dict | None) -> dict:
    summary = {
        "minutes": round((time.monotonic() - started) / 60, 1),
        "runs": len(runs),
        "examples": len(runs) * 10,
        "steps": STEPS["steps"],
        "rules": dict(sorted(RULES_HIT.items())),
        "tool_calls": dict(sorted(TOOL_CALLS.items())),
        "tool_seconds": {t: round(s, 1) for t, s in sorted(TOOL_SECONDS.items())},
        "outcomes": {f"{t} {o}": n for (t, o), n in sorted(OUTCOMES.items())},
        "counterexample": counterexample,
        "seeds": runs,
    }
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    return summary
