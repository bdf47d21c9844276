"""Idempotency of every write (seed 1 §1, seed 2), over the REST mirror and the execution path."""

import functools
import json
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.db import OperationalError, connection, connections
from django.utils import timezone
from prometheus_client import REGISTRY

from core.errors import Conflict, ValidationFailed
from core.idempotency import check_http_key, idempotent_execute
from core.idempotency.engine import effect_may_have_happened, idempotency_records_purge
from core.models import Company, IdempotencyRecord
from tests.servers import wait_for
from tests.testapp import services
from tests.testapp.models import Counter, Reservation
from tests.wording import told_in_its_own_words
from tooling.context import CallMeta
from tooling.execution import call_tool
from tooling.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

INCREMENT = "testapp_increment_counter"
CANCEL = "testapp_cancel_reservation"


def counter_value(company: Company, name: str = "visits") -> int:
    counter = Counter.objects.filter(company=company, name=name).first()
    return counter.value if counter else 0


# --- The key is looked up before any guard -----------------------------------------------


def test_a_retried_cancellation_returns_the_same_success_not_already_cancelled(
    tool_client, company
):
    """The seed's sequence: 1st attempt cancels; the 2nd must not hear «ya cancelada»."""
    reservation = services.reservation_create(company=company, owner=tool_client.conversation_id)

    first = tool_client.call(CANCEL, {"reference": reservation.reference}, key="cancel-1")
    second = tool_client.call(CANCEL, {"reference": reservation.reference}, key="cancel-1")

    assert first.status_code == 200
    assert first.json() == {"reference": reservation.reference, "state": "cancelled"}
    assert second.status_code == 200
    assert second.content == first.content
    assert second.headers["X-Idempotency-Replayed"] == "true"
    reservation.refresh_from_db()
    assert reservation.cancellations == 1


def test_a_new_key_on_a_cancelled_reservation_gets_the_state_guard_error(tool_client, company):
    reservation = services.reservation_create(company=company, owner=tool_client.conversation_id)
    tool_client.call(CANCEL, {"reference": reservation.reference}, key="cancel-1")

    again = tool_client.call(CANCEL, {"reference": reservation.reference}, key="cancel-2")

    assert again.status_code == 422
    assert again.json()["error_type"] == "VALIDATION"
    assert again.json()["state"] == "cancelled"
    assert "X-Idempotency-Replayed" not in again.headers


def test_the_same_key_from_another_conversation_is_a_conflict_never_the_first_answer(
    tool_client, company
):
    """The answer is the first conversation's customer's: a Gateway that reuses a key in
    another conversation gets CONFLICT, and the other key meets the ownership guard."""
    reservation = services.reservation_create(company=company, owner=tool_client.conversation_id)
    first = tool_client.call(CANCEL, {"reference": reservation.reference}, key="cancel-1")

    same_key = tool_client.call(
        CANCEL, {"reference": reservation.reference}, key="cancel-1", conversation_id="stranger"
    )
    other_key = tool_client.call(
        CANCEL, {"reference": reservation.reference}, key="cancel-9", conversation_id="stranger"
    )
    again = tool_client.call(CANCEL, {"reference": reservation.reference}, key="cancel-1")

    assert same_key.status_code == 409
    assert same_key.json()["error_type"] == "CONFLICT"
    assert same_key.json()["code"] == "idempotency_conflict"
    assert reservation.reference not in same_key.text
    assert other_key.status_code == 403
    assert other_key.json()["error_type"] == "PERMISSION"
    assert again.content == first.content  # its own conversation still replays it
    assert again.headers["X-Idempotency-Replayed"] == "true"


# --- Replay, conflict, fingerprint ----------------------------------------------------------


def test_a_replay_returns_the_original_status_and_text_and_says_it_is_a_replay(
    tool_client, company
):
    first = tool_client.call(INCREMENT, {"name": "visits"}, key="visit-1")
    second = tool_client.call(INCREMENT, {"name": "visits"}, key="visit-1")

    assert first.status_code == second.status_code == 200
    assert "X-Idempotency-Replayed" not in first.headers
    assert second.headers["X-Idempotency-Replayed"] == "true"
    # The same text byte for byte, key order included (seed 2: "mismo estado, mismo texto").
    assert first.content == second.content == b'{"counter":"visits","value":1,"by":1}'
    assert counter_value(company) == 1
    record = IdempotencyRecord.objects.get(company=company, key="visit-1")
    assert record.replay_count == 1
    assert record.operation == INCREMENT


def test_the_same_key_with_other_arguments_is_a_conflict_and_executes_nothing(tool_client, company):
    tool_client.call(INCREMENT, {"name": "visits"}, key="visit-1")

    other_value = tool_client.call(INCREMENT, {"name": "visits", "by": 2}, key="visit-1")
    other_tool = tool_client.call(CANCEL, {"reference": "RS-222222"}, key="visit-1")

    for response in (other_value, other_tool):
        assert response.status_code == 409
        assert response.json()["error_type"] == "CONFLICT"
        assert response.json()["code"] == "idempotency_conflict"
        assert "X-Idempotency-Replayed" not in response.headers
    assert counter_value(company) == 1


def test_key_order_and_whitespace_do_not_make_another_request(tool_client, company):
    tool_client.call(INCREMENT, {"name": "visits", "tags": ["a", "b"], "by": 3}, key="k-1")

    reordered = tool_client.http.post(
        f"/api/tools/{INCREMENT}",
        content=b'{ "by" : 3,\n  "tags": [ "a","b" ] ,"name":"visits" }',
        headers={
            "X-Conversation-Id": tool_client.conversation_id,
            "Idempotency-Key": "k-1",
            "Content-Type": "application/json",
        },
    )

    assert reordered.status_code == 200
    assert reordered.headers["X-Idempotency-Replayed"] == "true"
    assert counter_value(company) == 3


@pytest.mark.parametrize(
    "changed",
    [
        {"name": "visits", "tags": ["b", "a"]},  # array order
        {"name": "visits", "tags": ["a", "b"], "note": None},  # null is not omitted
        {"name": "visits", "tags": ["a", "b"], "by": 2},  # a value
        {"name": "visits", "tags": ["a", "b", "c"]},  # an element more
    ],
)
def test_array_order_values_and_null_versus_omitted_make_another_request(
    tool_client, company, changed
):
    tool_client.call(INCREMENT, {"name": "visits", "tags": ["a", "b"]}, key="k-1")

    response = tool_client.call(INCREMENT, changed, key="k-1")

    assert response.status_code == 409
    assert response.json()["code"] == "idempotency_conflict"
    assert counter_value(company) == 1


def test_an_explicit_null_replays_an_explicit_null(tool_client, company):
    first = tool_client.call(INCREMENT, {"name": "visits", "note": None}, key="k-1")
    second = tool_client.call(INCREMENT, {"note": None, "name": "visits"}, key="k-1")

    assert second.status_code == 200
    assert second.content == first.content
    assert counter_value(company) == 1


def test_keys_are_scoped_per_company(live_server, company, other_company, token, other_token):
    answers = []
    for bearer in (token, other_token):
        answers.append(
            httpx.post(
                f"{live_server.url}/api/tools/{INCREMENT}",
                json={"name": "visits", "by": 5 if bearer == token else 7},
                headers={
                    "Authorization": f"Bearer {bearer}",
                    "X-Conversation-Id": "conv-1",
                    "Idempotency-Key": "shared-key",
                },
            )
        )

    # Other arguments under the same key: a conflict if keys were global; two operations here.
    assert [a.status_code for a in answers] == [200, 200]
    assert "X-Idempotency-Replayed" not in answers[1].headers
    assert answers[0].json()["value"] == 5
    assert answers[1].json()["value"] == 7
    assert counter_value(company) == 5
    assert counter_value(other_company) == 7
    assert IdempotencyRecord.objects.filter(key="shared-key").count() == 2


# --- Keys required and well-formed ------------------------------------------------------------


def test_a_write_without_a_key_is_refused_and_never_executed(tool_client, company):
    response = tool_client.call(INCREMENT, {"name": "visits"})

    assert response.status_code == 422
    assert response.json()["error_type"] == "VALIDATION"
    assert response.json()["code"] == "missing_idempotency_key"
    assert counter_value(company) == 0
    assert not IdempotencyRecord.objects.exists()


def test_a_read_needs_no_key(tool_client, company):
    tool_client.call(INCREMENT, {"name": "visits", "by": 4}, key="k-1")

    response = tool_client.call("testapp_read_counter", {"name": "visits"})

    assert response.status_code == 200
    assert response.json() == {"counter": "visits", "value": 4}


@pytest.mark.parametrize(
    "key", ["", "-starts-with-dash", ".dot", "has space", "slash/inside", "a@b", "a" * 129]
)
def test_a_key_outside_the_pattern_is_422_invalid_idempotency_key(tool_client, company, key):
    response = tool_client.call(INCREMENT, {"name": "visits"}, key=key)

    assert response.status_code == 422
    assert response.json()["error_type"] == "VALIDATION"
    assert response.json()["code"] == "invalid_idempotency_key"
    assert counter_value(company) == 0


@pytest.mark.parametrize(
    "key", ["a", "A" * 128, "3f7c1a52-9c1e-4b8d-8a41-2d5b6e7f9a01", "op:2026.12_01-x"]
)
def test_a_key_inside_the_pattern_is_accepted(tool_client, company, key):
    response = tool_client.call(INCREMENT, {"name": "visits"}, key=key)

    assert response.status_code == 200
    assert IdempotencyRecord.objects.get(company=company).key == key


def test_the_gateway_key_is_required_on_writes_and_checked_for_shape(company):
    tool = registry.get(INCREMENT)

    def call(key):
        meta = CallMeta(conversation_id="conv-1", idempotency_key=key)
        return call_tool(tool, company=company, arguments={"name": "v"}, meta=meta, surface="mcp")

    assert call(None).body["code"] == "missing_idempotency_key"
    assert call(None).error_type == "VALIDATION"
    for bad in ("", "   ", 42, "k" * 256):
        assert call(bad).body["code"] == "invalid_idempotency_key"
    assert counter_value(company, "v") == 0
    # The Gateway's keys are used as given: any non-empty string, not only seed 2's pattern.
    assert call("gw/ñ key 1").is_error is False
    assert call("gw/ñ key 1").replayed is True
    assert counter_value(company, "v") == 1


# --- Only successes are stored; effect and record commit together -----------------------


def test_a_business_error_stores_nothing_and_the_retry_executes(tool_client, company):
    missing = tool_client.call(CANCEL, {"reference": "RS-777777"}, key="cancel-1")
    services.reservation_create(
        company=company, owner=tool_client.conversation_id, reference="RS-777777"
    )
    retry = tool_client.call(CANCEL, {"reference": "RS-777777"}, key="cancel-1")

    assert missing.status_code == 404
    assert missing.json()["error_type"] == "NOT_FOUND"
    assert retry.status_code == 200
    assert "X-Idempotency-Replayed" not in retry.headers
    assert Reservation.objects.get(reference="RS-777777").state == "cancelled"


@pytest.mark.parametrize(
    ("failure", "status", "error_type"),
    [("business", 422, "VALIDATION"), ("database", 503, "SYSTEM"), ("unexpected", 503, "SYSTEM")],
)
def test_a_write_that_fails_after_writing_leaves_neither_its_row_nor_a_record(
    tool_client, company, failure, status, error_type
):
    response = tool_client.call(
        "testapp_fail_after_write", {"name": "visits", "failure": failure}, key="k-1"
    )

    assert response.status_code == status
    assert response.json()["error_type"] == error_type
    assert not Counter.objects.filter(company=company).exists()
    assert not IdempotencyRecord.objects.exists()


def test_a_database_error_in_the_handler_stores_nothing_and_the_retry_executes(
    tool_client, company, monkeypatch
):
    real_increment = services.counter_increment
    attempts = []

    def flaky_increment(**kwargs):
        attempts.append(kwargs)
        counter = real_increment(**kwargs)
        if len(attempts) == 1:  # the first attempt writes, then the database fails
            with connection.cursor() as cursor:
                cursor.execute("SELECT * FROM testapp_table_that_does_not_exist")
        return counter

    monkeypatch.setattr(services, "counter_increment", flaky_increment)

    failed = tool_client.call(INCREMENT, {"name": "visits"}, key="k-1")
    retried = tool_client.call(INCREMENT, {"name": "visits"}, key="k-1")

    assert failed.status_code == 503
    assert failed.json()["error_type"] == "SYSTEM"
    assert failed.json()["code"] == "database_unavailable"
    assert retried.status_code == 200
    assert "X-Idempotency-Replayed" not in retried.headers
    assert retried.json()["value"] == 1  # the failed attempt's write was rolled back
    assert len(attempts) == 2


def test_a_write_failing_before_its_commit_says_to_retry_with_the_same_key_and_nothing_happened(
    tool_client, company
):
    failed = tool_client.call(
        "testapp_fail_after_write", {"name": "visits", "failure": "database"}, key="k-1"
    )

    assert failed.status_code == 503
    body = failed.json()
    assert (body["error_type"], body["code"]) == ("SYSTEM", "database_unavailable")
    assert body["retry_with_same_key"] is True
    assert body["effect_may_have_happened"] is False
    assert not Counter.objects.filter(company=company).exists()


def test_a_write_failing_as_it_commits_says_the_effect_may_have_happened(tool_client, company):
    failed = tool_client.call(
        "testapp_fail_after_write", {"name": "visits", "failure": "commit"}, key="k-1"
    )

    assert failed.status_code == 503
    body = failed.json()
    assert (body["error_type"], body["code"]) == ("SYSTEM", "database_unavailable")
    assert body["retry_with_same_key"] is True
    assert body["effect_may_have_happened"] is True
    assert not IdempotencyRecord.objects.exists()  # here the database refused it: retry runs


def test_a_read_failing_on_the_database_says_the_same_call_is_safe_and_nothing_happened(
    make_company,
):
    company = make_company(environment=Company.Environment.SANDBOX)  # only a sandbox honours it
    tool = registry.get("testapp_read_counter")
    meta = CallMeta(conversation_id="conv-1", fault="database")

    down = call_tool(tool, company=company, arguments={"name": "v"}, meta=meta, surface="mcp")

    assert down.error_type == "SYSTEM"
    assert (down.body["retry_with_same_key"], down.body["effect_may_have_happened"]) == (
        True,
        False,
    )


def test_a_simulated_database_outage_stores_nothing_and_the_retry_executes(make_company):
    company = make_company(environment=Company.Environment.SANDBOX)  # only a sandbox honours it
    tool = registry.get(INCREMENT)

    def call(fault):
        meta = CallMeta(conversation_id="conv-1", idempotency_key="k-1", fault=fault)
        return call_tool(tool, company=company, arguments={"name": "v"}, meta=meta, surface="mcp")

    down = call("database")
    up = call(None)

    assert down.error_type == "SYSTEM"
    assert up.is_error is False
    assert up.replayed is False
    assert counter_value(company, "v") == 1


def test_an_unexpected_failure_is_system_and_logged_with_its_trace(tool_client, company, caplog):
    response = tool_client.call(
        "testapp_fail_after_write", {"name": "visits", "failure": "unexpected"}, key="k-1"
    )

    assert response.status_code == 503
    assert "RuntimeError" not in response.text  # no trace on the wire
    logged = [r for r in caplog.records if r.name == "garante.tools" and r.exc_info]
    assert logged and logged[0].exc_info[0] is RuntimeError


def test_the_record_is_inserted_in_the_effects_transaction_and_invisible_until_commit(company):
    seen = {}

    def effect():
        seen["in_transaction"] = connection.in_atomic_block
        seen["here"] = IdempotencyRecord.objects.filter(company=company, key="k-1").exists()
        other = connections.create_connection("default")
        try:
            with other.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM core_idempotencyrecord WHERE key = %s", ["k-1"]
                )
                seen["elsewhere"] = cursor.fetchone()[0]
        finally:
            other.close()
        return {"done": True}, 200

    result = idempotent_execute(
        company=company, key="k-1", operation="op", request={}, effect=effect
    )

    assert seen == {"in_transaction": True, "here": True, "elsewhere": 0}
    assert result.replayed is False
    assert IdempotencyRecord.objects.get(key="k-1").response == '{"done":true}'


def test_an_oversized_write_result_is_capped_before_it_is_stored(tool_client, company):
    arguments = {"name": "visits", "note": "x" * 5000}  # echoed back: too long an answer

    first = tool_client.call(INCREMENT, arguments, key="k-1")
    second = tool_client.call(INCREMENT, arguments, key="k-1")

    assert first.status_code == 200
    assert len(first.text) <= settings.GARANTE_OUTPUT_MAX_CHARS
    assert first.json()["truncated"] is True
    assert second.content == first.content
    assert IdempotencyRecord.objects.get(key="k-1").response == first.text
    assert counter_value(company) == 1


# --- Replay window, tombstones, purge ---------------------------------------------------------


def test_the_replay_window_is_at_least_seven_days(tool_client, company):
    assert timedelta(days=7) <= settings.GARANTE_IDEMPOTENCY_REPLAY_WINDOW
    first = tool_client.call(INCREMENT, {"name": "visits"}, key="k-1")
    record = IdempotencyRecord.objects.get(key="k-1")
    assert record.replay_until - record.created_at == settings.GARANTE_IDEMPOTENCY_REPLAY_WINDOW
    # Six days and 23 hours later, the retry still replays.
    IdempotencyRecord.objects.filter(pk=record.pk).update(
        created_at=record.created_at - timedelta(days=6, hours=23),
        replay_until=timezone.now() + timedelta(hours=1),
    )

    retry = tool_client.call(INCREMENT, {"name": "visits"}, key="k-1")

    assert retry.status_code == 200
    assert retry.content == first.content
    assert counter_value(company) == 1


def past_its_replay_window(key: str) -> None:
    IdempotencyRecord.objects.filter(key=key).update(
        replay_until=timezone.now() - timedelta(seconds=1)
    )


def test_a_key_past_its_replay_window_answers_410_idempotency_expired(tool_client, company):
    tool_client.call(INCREMENT, {"name": "visits"}, key="k-1")
    past_its_replay_window("k-1")

    before_purge = tool_client.call(INCREMENT, {"name": "visits"}, key="k-1")
    tombstoned, deleted = idempotency_records_purge()
    after_purge = tool_client.call(INCREMENT, {"name": "visits"}, key="k-1")

    for response in (before_purge, after_purge):
        assert response.status_code == 410
        assert response.json()["error_type"] == "CONFLICT"
        assert response.json()["code"] == "idempotency_expired"
    assert (tombstoned, deleted) == (1, 0)
    assert IdempotencyRecord.objects.get(key="k-1").response is None
    assert counter_value(company) == 1


def test_an_expired_key_with_other_arguments_is_still_a_conflict(tool_client, company):
    tool_client.call(INCREMENT, {"name": "visits"}, key="k-1")
    past_its_replay_window("k-1")

    response = tool_client.call(INCREMENT, {"name": "visits", "by": 9}, key="k-1")

    assert response.json()["code"] == "idempotency_conflict"


def test_past_the_tombstone_period_the_key_starts_a_new_operation(tool_client, company):
    tool_client.call(INCREMENT, {"name": "visits"}, key="k-1")
    IdempotencyRecord.objects.filter(key="k-1").update(
        replay_until=timezone.now() - timedelta(days=40),
        expires_at=timezone.now() - timedelta(seconds=1),
    )

    # Not purged yet: the engine forgets it all the same.
    again = tool_client.call(INCREMENT, {"name": "visits"}, key="k-1")
    replay = tool_client.call(INCREMENT, {"name": "visits"}, key="k-1")

    assert again.status_code == 200
    assert "X-Idempotency-Replayed" not in again.headers
    assert again.json()["value"] == 2
    assert replay.headers["X-Idempotency-Replayed"] == "true"
    assert counter_value(company) == 2
    assert IdempotencyRecord.objects.filter(key="k-1").count() == 1


def test_the_purge_tombstones_then_forgets_and_keeps_what_is_live(company, other_company):
    now = timezone.now()

    def record(key, replay_until, expires_at, company=company):
        return IdempotencyRecord.objects.create(
            company=company,
            key=key,
            operation="op",
            fingerprint="f" * 64,
            response="{}",
            created_at=now - timedelta(days=1),
            replay_until=replay_until,
            expires_at=expires_at,
        )

    live = record("live", now + timedelta(days=6), now + timedelta(days=36))
    stale = record("stale", now - timedelta(days=1), now + timedelta(days=29), other_company)
    gone = record("gone", now - timedelta(days=31), now - timedelta(days=1))

    assert idempotency_records_purge(now=now) == (2, 1)  # "gone" is tombstoned, then deleted

    assert IdempotencyRecord.objects.get(pk=live.pk).response == "{}"
    assert IdempotencyRecord.objects.get(pk=stale.pk).response is None
    assert not IdempotencyRecord.objects.filter(pk=gone.pk).exists()


def test_stored_answers_are_json_text_exactly_as_sent(tool_client, company):
    response = tool_client.call(INCREMENT, {"name": "visits", "by": 2}, key="k-1")

    stored = IdempotencyRecord.objects.get(key="k-1").response
    assert stored == response.text
    assert json.loads(stored) == {"counter": "visits", "value": 2, "by": 2}


def test_a_core_error_raised_by_an_input_validator_keeps_its_type_on_rest(tool_client, company):
    response = tool_client.call(CANCEL, {"reference": "AP-123456"}, key="k-1")

    assert response.status_code == 422
    assert response.json()["code"] == "not_a_reservation_reference"
    assert not IdempotencyRecord.objects.exists()


def test_a_core_error_raised_by_an_input_validator_keeps_its_type_in_call_tool(company):
    meta = CallMeta(conversation_id="conv-1", idempotency_key="k-1")

    outcome = call_tool(
        registry.get(CANCEL),
        company=company,
        arguments={"reference": "AP-123456"},
        meta=meta,
        surface="mcp",
    )

    assert outcome.error_type == "VALIDATION"
    assert outcome.body["code"] == "not_a_reservation_reference"


def test_a_key_with_a_final_newline_is_malformed_too():
    """HTTP clients refuse to send one, but the check is the key's, not theirs: a pattern that
    ends in `$` matches before a final newline."""
    with pytest.raises(ValidationFailed) as caught:
        check_http_key("k-1\n")

    assert caught.value.code == "invalid_idempotency_key"
    assert check_http_key("k-1") == "k-1"


# --- Concurrent twins, in this process ------------------------------------------------------
# The gunicorn races (test_idempotency_concurrency.py) run the engine in other processes, which
# mutmut cannot credit (docs/testing.md): here the twin is a thread, with a connection of its
# own, and the engine's waits are PostgreSQL's own lock waits.

WAIT_SECONDS = 15  # an upper bound for a twin's thread, not a measurement
OUTCOMES = ("executed", "replayed", "joined", "conflict", "expired", "in_progress")


def outcomes() -> dict[str, float]:
    """The engine's outcome counters (core.metrics), as /metrics shows them."""
    return {
        outcome: REGISTRY.get_sample_value(
            "garante_idempotency_outcomes_total", {"outcome": outcome}
        )
        or 0.0
        for outcome in OUTCOMES
    }


def moved(before: dict[str, float]) -> dict[str, float]:
    after = outcomes()
    return {k: after[k] - before[k] for k in OUTCOMES if after[k] != before[k]}


def as_a_twin(work: Callable[[], Any]) -> Future:
    """`work` on a thread of its own, hence on a database connection of its own: a twin call
    on another worker."""

    def run() -> Any:
        try:
            return work()
        finally:
            connection.close()

    pool = ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(run)
    finally:
        pool.shutdown(wait=False)


def another_session_waits_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


def twin_call(company: Company, key: str = "twin-1") -> Callable[..., Any]:
    return functools.partial(
        idempotent_execute, company=company, key=key, operation="op", request={"n": 1}
    )


def never() -> tuple[dict[str, Any], int]:
    raise AssertionError("a twin's effect ran")


@pytest.mark.postgres
def test_a_twin_still_running_past_the_bound_is_told_to_retry_and_its_retry_replays(
    company, settings
):
    settings.GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS = 200
    settings.GARANTE_IDEMPOTENCY_RETRY_AFTER_SECONDS = 3
    inside, release = threading.Event(), threading.Event()
    call = twin_call(company)

    def slow_effect() -> tuple[dict[str, Any], int]:
        inside.set()
        release.wait(WAIT_SECONDS)
        return {"done": True, "note": "cañón"}, 201

    first = as_a_twin(lambda: call(effect=slow_effect))
    try:
        assert inside.wait(WAIT_SECONDS)
        before = outcomes()
        with pytest.raises(Conflict) as busy:
            call(effect=never)
        counted = moved(before)
    finally:
        release.set()
    original = first.result(WAIT_SECONDS)
    retry = call(effect=never)

    assert (busy.value.error_type, busy.value.code) == ("CONFLICT", "request_in_progress")
    assert busy.value.extras == {"retry_after_seconds": 3}
    told_in_its_own_words(busy.value)
    assert counted == {"in_progress": 1}
    assert (original.replayed, retry.replayed) == (False, True)
    assert (retry.status, retry.text) == (201, original.text)


@pytest.mark.postgres
def test_a_twin_waiting_on_the_first_replays_its_answer_once_it_commits(company, settings):
    settings.GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS = WAIT_SECONDS * 1000
    inside = threading.Event()
    runs = []
    call = twin_call(company)

    def effect_until_the_twin_waits() -> tuple[dict[str, Any], int]:
        runs.append(1)
        inside.set()
        # The twin waits on this uncommitted record's key (the unique index): commit then.
        waited = wait_for(another_session_waits_on_a_lock, timeout=WAIT_SECONDS, interval=0.01)
        return {"twin_waited": waited}, 201

    first = as_a_twin(lambda: call(effect=effect_until_the_twin_waits))
    assert inside.wait(WAIT_SECONDS)
    before = outcomes()
    joined = call(effect=never)
    original = first.result(WAIT_SECONDS)
    counted = moved(before)

    assert original.body == {"twin_waited": True}
    assert (original.replayed, joined.replayed) == (False, True)
    assert (joined.status, joined.text, joined.body) == (201, original.text, original.body)
    assert counted == {"executed": 1, "joined": 1}  # the first's and its twin's
    assert runs == [1]
    assert IdempotencyRecord.objects.get(key="twin-1").replay_count == 1


@pytest.mark.postgres
def test_a_twin_reusing_a_forgotten_key_is_told_to_retry_while_the_first_reuses_it(
    company, settings
):
    call = twin_call(company, key="reused")
    call(effect=lambda: ({"life": 1}, 200))
    IdempotencyRecord.objects.filter(key="reused").update(
        replay_until=timezone.now() - timedelta(days=40),
        expires_at=timezone.now() - timedelta(seconds=1),
    )
    settings.GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS = 200
    inside, release = threading.Event(), threading.Event()

    def second_life() -> tuple[dict[str, Any], int]:
        inside.set()
        release.wait(WAIT_SECONDS)
        return {"life": 2}, 200

    # The first reuse deletes the forgotten record and holds its row until it commits.
    first = as_a_twin(lambda: call(effect=second_life))
    try:
        assert inside.wait(WAIT_SECONDS)
        with pytest.raises(Conflict) as busy:
            call(effect=never)
    finally:
        release.set()
    original = first.result(WAIT_SECONDS)
    retry = call(effect=never)

    assert busy.value.code == "request_in_progress"
    assert (original.replayed, original.body) == (False, {"life": 2})
    assert (retry.replayed, retry.text) == (True, original.text)
    assert IdempotencyRecord.objects.filter(key="reused").count() == 1


@pytest.mark.postgres
def test_a_lock_the_effect_cannot_take_is_its_own_failure_not_a_twins(company):
    """Past the claim, a lock wait is the effect's (SYSTEM, retryable), not request_in_progress."""
    holder = connections.create_connection("default")
    holder.set_autocommit(False)
    with holder.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {Company._meta.db_table} WHERE id = %s FOR UPDATE", [company.pk]
        )

    def effect_locking_the_company() -> tuple[dict[str, Any], int]:
        Company.objects.select_for_update(nowait=True).get(pk=company.pk)
        return {"locked": True}, 200

    try:
        with pytest.raises(OperationalError) as failed:
            twin_call(company)(effect=effect_locking_the_company)
    finally:
        holder.rollback()
        holder.close()
    retried = twin_call(company)(effect=effect_locking_the_company)

    assert effect_may_have_happened(failed.value) is False
    assert (retried.replayed, retried.body) == (False, {"locked": True})
