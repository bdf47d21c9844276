"""Deferred bookkeeping writes (core.deferred): trace rows and replay counters are queued by
the request and written in batches by a background thread; a graceful stop writes them first,
a failure to write never reaches a call."""

import logging
import os
import time
import uuid

import httpx
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core import deferred
from core.deferred import DeferredQueue, deferred_flush, deferred_writer_stop
from core.models import IdempotencyRecord
from core.services import contact_create
from tests.factories import ANA_DOCUMENT
from tooling import trace
from tooling.context import CallMeta
from tooling.execution import call_tool
from tooling.models import ToolCall
from tooling.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

WAIT_SECONDS = 15  # an upper bound for a background thread, not a measurement


@pytest.fixture
def deferral(settings):
    """Deferral on, with an interval so long that only a full queue or a flush writes."""
    deferred_writer_stop()  # a fresh thread, started by the first item with these settings
    settings.GARANTE_DEFERRED_WRITE_SECONDS = 3600
    yield settings
    deferred_writer_stop()


def call(company, name, arguments, **meta):
    meta.setdefault("conversation_id", "conv-deferred")
    return call_tool(
        registry.get(name),
        company=company,
        arguments=arguments,
        meta=CallMeta(**meta),
        surface="mcp",
    )


def eventually(predicate) -> bool:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_calls_are_queued_then_written_in_one_batch(deferral, company):
    for _ in range(3):
        assert not call(company, "list_services", {"limit": 5}).is_error
    assert ToolCall.objects.filter(company=company).count() == 0
    assert trace._trace_rows.pending() == 3

    with CaptureQueriesContext(connection) as captured:
        assert deferred_flush() == 3
    writes = [q["sql"] for q in captured if "tooling_toolcall" in q["sql"]]
    batch = 'COPY "tooling_toolcall"' if connection.vendor == "postgresql" else "INSERT INTO"
    assert len(writes) == 1 and writes[0].startswith(batch)
    rows = ToolCall.objects.filter(company=company, conversation_key="conv-deferred")
    assert [r.tool for r in rows] == ["list_services"] * 3
    assert all(r.result_count == 0 and r.latency_ms > 0 for r in rows)


def test_a_batch_keeps_every_column_as_the_call_left_it(deferral, company):
    outcome = call(
        company,
        "open_case",
        {"identifier": ANA_DOCUMENT, "subject": "Grifo", "description": "Gotea."},
        idempotency_key="key-batch-1",
    )
    assert outcome.is_error
    deferred_flush()

    row = ToolCall.objects.get(company=company, tool="open_case")
    assert (row.surface, row.outcome, row.replayed, row.result_count) == (
        "mcp",
        "error",
        False,
        None,
    )
    assert (row.error_type, row.code) == (outcome.error_type, outcome.body["code"])
    assert row.idempotency_key == "key-batch-1"
    assert row.arguments == {
        "identifier": "[document •••8Z]",
        "subject": "[text, 5 chars]",
        "description": "[text, 6 chars]",
    }
    assert row.created_at <= timezone.now()


def test_the_background_thread_writes_at_its_interval(deferral, company):
    deferral.GARANTE_DEFERRED_WRITE_SECONDS = 0.05
    call(company, "list_services", {"limit": 5})
    assert eventually(lambda: ToolCall.objects.filter(company=company).exists())
    assert trace._trace_rows.pending() == 0


def test_a_full_queue_is_written_without_waiting_for_the_interval(deferral, company):
    for _ in range(deferred.BATCH_SIZE):
        call(company, "list_services", {"limit": 5})
    assert eventually(
        lambda: ToolCall.objects.filter(company=company).count() == deferred.BATCH_SIZE
    )


def test_replays_are_counted_once_written_and_answered_without_a_statement(deferral, company):
    contact_create(company=company, first_name="Ana", document_number=ANA_DOCUMENT)
    first = call(company, "identify_contact", {"document": ANA_DOCUMENT}, idempotency_key="k-1")
    with CaptureQueriesContext(connection) as captured:
        replays = [
            call(company, "identify_contact", {"document": ANA_DOCUMENT}, idempotency_key="k-1")
            for _ in range(3)
        ]
    assert all(r.replayed and r.body == first.body for r in replays)
    # Each replay reads its record and writes nothing: counters and trace rows are queued.
    assert [q["sql"].split()[0] for q in captured] == ["SELECT"] * 3
    deferred_flush()
    record = IdempotencyRecord.objects.get(company=company, key="k-1")
    assert record.replay_count == 3 and record.last_replayed_at is not None
    assert ToolCall.objects.filter(company=company, replayed=True).count() == 3


def test_a_failing_batch_is_logged_and_dropped_never_raised(deferral, caplog):
    def broken(items):
        raise RuntimeError("the database said no")

    queue = DeferredQueue("test broken", broken)
    try:
        queue.add("one")
        queue.add("two")
        with caplog.at_level(logging.ERROR, logger="garante.deferred"):
            assert queue.flush() == 2
        assert "test broken: could not write 2 items; dropped" in caplog.text
        assert queue.pending() == 0
    finally:
        deferred._queues.remove(queue)


# Values no PostgreSQL text column can hold, or no UTF-8 can encode, as if redaction had
# missed them: the database refuses the first, the driver the second.
@pytest.mark.parametrize("bad", ["bad\x00row", "bad\ud800row"])
def test_a_batch_with_one_row_the_database_refuses_writes_all_the_others(
    deferral, company, caplog, bad
):
    for n in range(4):
        call(company, "list_services", {"limit": 5}, conversation_id=f"conv-batch-{n}")
    trace._trace_rows.add(dict(trace._trace_rows._items[0], conversation_key=bad))
    for n in range(4, 6):
        call(company, "list_services", {"limit": 5}, conversation_id=f"conv-batch-{n}")

    with caplog.at_level(logging.WARNING, logger="garante.deferred"):
        assert deferred_flush() == 7

    written = sorted(
        ToolCall.objects.filter(company=company).values_list("conversation_key", flat=True)
    )
    assert [key for key in written if key != bad] == [f"conv-batch-{n}" for n in range(6)]
    if connection.vendor == "postgresql":  # SQLite stores the NUL character
        assert bad not in written
        assert "a batch of 7 items was refused; one by one" in caplog.text
        assert "could not write 1 items; dropped" in caplog.text


def test_a_queue_past_its_bound_drops_new_items_and_says_how_many(deferral, monkeypatch, caplog):
    written: list[list[str]] = []
    queue = DeferredQueue("test bounded", written.append)
    monkeypatch.setattr(deferred, "MAX_PENDING", 3)
    try:
        for item in "abcde":
            queue.add(item)
        assert queue.pending() == 3
        with caplog.at_level(logging.WARNING, logger="garante.deferred"):
            queue.flush()
        assert written == [["a", "b", "c"]]
        assert "test bounded: dropped 2 items while the queue was full" in caplog.text
    finally:
        deferred._queues.remove(queue)


def test_with_deferral_off_each_row_is_written_in_the_call(settings, company):
    settings.GARANTE_DEFERRED_WRITE_SECONDS = 0
    call(company, "list_services", {"limit": 5})
    assert ToolCall.objects.filter(company=company).count() == 1
    assert trace._trace_rows.pending() == 0


def test_a_gracefully_stopped_server_writes_what_it_had_queued(gunicorn_server, company, token):
    # Production's deferral, with an interval no test waits for: only the stop can write.
    server = gunicorn_server(workers=2, threads=2, env={"GARANTE_DEFERRED_WRITE_SECONDS": "3600"})
    conversation = f"conv-{uuid.uuid4().hex[:8]}"
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as http:
        for _ in range(6):
            answer = http.post(
                "/api/tools/list_services",
                json={"limit": 5},
                headers={"X-Conversation-Id": conversation},
            )
            assert answer.status_code == 200
    assert ToolCall.objects.filter(company=company).count() == 0
    server.stop()  # SIGTERM: gunicorn's workers exit gracefully
    assert ToolCall.objects.filter(company=company, conversation_key=conversation).count() == 6


def test_a_forked_child_writes_its_own_items_and_not_its_parents(deferral, tmp_path):
    written: list[list[str]] = []
    queue = DeferredQueue("test fork", written.append)
    try:
        queue.add("parent's")
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # the child: its first item must survive the reset of what it inherited
            try:
                queue.add("child's")
                os.write(write, repr((queue.pending(), queue.flush(), written)).encode())
            finally:
                os._exit(0)
        os.close(write)
        os.waitpid(child, 0)
        with os.fdopen(read) as answer:
            assert answer.read() == repr((1, 1, [["child's"]]))
        assert queue.pending() == 1  # the parent's item is still the parent's to write
    finally:
        deferred._queues.remove(queue)
