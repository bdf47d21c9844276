"""Evidence that outlives the failing call it is part of (core.durable): committed first, on the
call's own connection, the call then run again deciding on it."""

import pytest
from django.db import connection, transaction

from core.durable import decided_once, durably, keeping_evidence
from core.models import SecurityEvent

pytestmark = pytest.mark.django_db(transaction=True)


def event(company, kind: str) -> SecurityEvent:
    return SecurityEvent.objects.create(company=company, conversation_key="conv-1", kind=kind)


def kinds(company) -> list[str]:
    return list(SecurityEvent.objects.filter(company=company).values_list("kind", flat=True))


def test_the_evidence_stays_when_the_work_fails_and_the_rest_goes(company):
    def work() -> None:
        event(company, "identification_failed")  # the work's own write
        durably(lambda: event(company, "identity_switch"))
        raise RuntimeError("the call fails")

    with pytest.raises(RuntimeError):
        keeping_evidence(work)

    assert kinds(company) == ["identity_switch"]


def test_the_work_runs_again_and_gets_what_the_evidence_returned_without_writing_it_twice(
    company,
):
    runs: list[int] = []

    def work() -> int:
        runs.append(SecurityEvent.objects.filter(company=company).count())
        return durably(lambda: event(company, "identity_switch").pk)

    first = keeping_evidence(work)

    assert runs == [0, 1]  # the second run sees the evidence committed
    assert kinds(company) == ["identity_switch"]
    assert first == SecurityEvent.objects.get(company=company).pk


def test_no_connection_is_held_while_the_evidence_commits(company):
    """The evidence runs once the work's transaction has ended: the call holds one
    connection at a time (with PgBouncer's transaction pooling, a second one while the first
    held its server connection exhausted the pool)."""
    seen = []

    def evidence() -> None:
        seen.append(connection.in_atomic_block)
        event(company, "identity_switch")

    def work() -> None:
        event(company, "identification_failed")
        durably(evidence)

    keeping_evidence(work)

    # Its own transaction, not the work's: the work's first write was rolled back before it.
    assert seen == [True]
    assert sorted(kinds(company)) == ["identification_failed", "identity_switch"]


def test_a_decision_taken_before_the_evidence_is_kept_for_the_runs_after_it(company):
    decisions = []

    def work() -> None:
        counted = decided_once(lambda: SecurityEvent.objects.filter(company=company).count())
        decisions.append(counted)
        durably(lambda: event(company, "identification_failed"))

    keeping_evidence(work)

    assert decisions == [0, 0]  # not 1: the evidence is not counted against itself


def test_an_evidence_that_fails_fails_the_work_at_the_same_point_on_every_run(company):
    reached = []

    def broken() -> None:
        raise ValueError("the broker is down")

    def work() -> str:
        reached.append("before")
        try:
            durably(broken)
        except ValueError:
            durably(lambda: event(company, "verification_voided"))  # the failure's own record
            return "refused"
        return "done"

    assert keeping_evidence(work) == "refused"
    assert reached == ["before"] * 3
    assert kinds(company) == ["verification_voided"]


def test_outside_a_unit_of_work_the_evidence_shares_the_callers_transaction(company):
    with pytest.raises(RuntimeError), transaction.atomic():
        durably(lambda: event(company, "identity_switch"))
        raise RuntimeError("a staff action fails")

    assert kinds(company) == []  # what the caller's transaction holds goes with it


def test_in_autocommit_the_evidence_commits_at_once(company):
    durably(lambda: event(company, "identity_switch"))

    assert kinds(company) == ["identity_switch"]


def test_a_nested_unit_of_work_leaves_the_evidence_to_the_outermost(company):
    def inner() -> None:
        durably(lambda: event(company, "identity_switch"))
        raise LookupError("the inner service refuses")

    def outer() -> None:
        keeping_evidence(inner)

    with pytest.raises(LookupError):
        keeping_evidence(outer)

    assert kinds(company) == ["identity_switch"]
