"""The conversation trace: every tool call recorded, personal data masked, never breaking a call."""

import json
import os
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import DEFAULT_DB_ALIAS, OperationalError, connection, connections
from django.utils import timezone

from core.models import Company
from core.services import contact_create
from tests.factories import ANA_DOCUMENT, ANA_EMAIL, ANA_PHONE_NATIONAL
from tests.staff.trace_calls import call
from tests.testapp.models import Counter
from tooling import trace
from tooling.models import ToolCall
from tooling.tasks import TRIM_TASK_NAME, tool_calls_trim_task
from tooling.trace import redact_arguments

ROOT = Path(__file__).resolve().parents[2]


def trace_of(company, conversation_id: str) -> list[ToolCall]:
    return list(
        ToolCall.objects.filter(company=company, conversation_key=conversation_id).order_by(
            "created_at", "id"
        )
    )


@pytest.mark.parametrize(
    ("arguments", "kept"),
    [
        ({"identifier": ANA_EMAIL}, {"identifier": "[email •••na]"}),
        ({"identifier": "+34 600 111 222"}, {"identifier": "[phone •••22]"}),
        ({"document": ANA_DOCUMENT}, {"document": "[document •••8Z]"}),
        (
            {"identifier": ANA_DOCUMENT, "code": "482913"},
            {"identifier": "[document •••8Z]", "code": "[hidden]"},
        ),
        ({"message": f"Mi DNI es {ANA_DOCUMENT}"}, {"message": "[text, 19 chars]"}),
        ({"description": "Llamadme"}, {"description": "[text, 8 chars]"}),
        ({"a_new_field": "hola"}, {"a_new_field": "[text, 4 chars]"}),
        (
            {"query": "champú, ana@example.com o 600 111 222"},
            {"query": "champú, [email] o [number]"},
        ),
        ({"slot": "2026-12-01 10:00", "appointment": "AP-7K2F9Q"}, None),
        ({"items": [{"sku": "CAF-001", "quantity": 3}], "expected_total": "12.50"}, None),
        ({"limit": 5, "status": "sent", "from": "2026-12-01"}, None),
        ({"phone": None, "email": ""}, None),
    ],
)
def test_arguments_are_kept_with_personal_data_masked(arguments, kept):
    assert redact_arguments(arguments) == (kept if kept is not None else arguments)


def test_arguments_that_are_not_an_object_are_masked_and_huge_ones_truncated():
    assert redact_arguments("mi teléfono es 600111222") == "[text, 24 chars]"
    assert redact_arguments({"items": [{"sku": "X" * 100}] * 200}) == {"_truncated": True}


@pytest.mark.django_db(transaction=True)
def test_every_call_over_http_is_traced_in_order_with_outcome_latency_and_replay(
    tool_client, company
):
    contact_create(company=company, first_name="Ana", document_number=ANA_DOCUMENT)
    tool_client.call("list_services", {"limit": 5})
    first = tool_client.call("identify_contact", {"document": ANA_DOCUMENT}, key="key-1")
    again = tool_client.call("identify_contact", {"document": ANA_DOCUMENT}, key="key-1")
    refused = tool_client.call("get_case", {"identifier": ANA_DOCUMENT, "case": "CS-NEVER1"})
    tool_client.http.close()

    calls = trace_of(company, tool_client.conversation_id)

    assert [c.tool for c in calls] == [
        "list_services",
        "identify_contact",
        "identify_contact",
        "get_case",
    ]
    assert first.status_code == again.status_code == 200
    assert [c.replayed for c in calls] == [False, False, True, False]
    assert [c.outcome for c in calls] == ["ok", "ok", "ok", "error"]
    assert calls[0].result_count == 0  # the company has no services: an empty list, a success
    assert calls[3].error_type == refused.json()["error_type"]
    assert calls[3].code == refused.json()["code"]
    assert all(c.surface == "rest" and c.latency_ms > 0 for c in calls)
    assert calls[1].idempotency_key == "key-1"
    assert calls[1].arguments == {"document": "[document •••8Z]"}
    stored = json.dumps([c.arguments for c in calls])
    assert "12345678" not in stored
    assert "Ana" not in stored  # and never an answer


@pytest.mark.django_db(transaction=True)
def test_a_call_with_invalid_arguments_is_traced_and_still_refused(company):
    outcome = call(company, "list_services", {"limit": "many", "phone": ANA_PHONE_NATIONAL})

    assert (outcome.is_error, outcome.body["code"]) == (True, "invalid_arguments")

    (traced,) = trace_of(company, "conv-trace")
    assert (traced.outcome, traced.error_type, traced.code) == (
        "error",
        "VALIDATION",
        "invalid_arguments",
    )
    assert traced.arguments == {"limit": "many", "phone": "[phone •••22]"}


def test_values_postgresql_cannot_store_are_kept_in_a_storable_form():
    assert redact_arguments(
        {"limit": float("nan"), "quantity": float("-inf"), "status": "en\x00vío", "x\x00": 1}
    ) == {"limit": "nan", "quantity": "-inf", "status": "en\ufffdvío", "x\ufffd": 1}


@pytest.mark.django_db(transaction=True)
def test_a_refused_call_carrying_nul_characters_is_traced_all_the_same(company):
    outcome = call(
        company,
        "open_case",
        {"identifier": ANA_DOCUMENT, "subject": "Grifo", "description": "Gotea."},
        conversation_id="conv\x00nul",
        idempotency_key="key\x00nul",
    )
    assert outcome.error_type == "VALIDATION"
    refused = call(company, "list_services", {"status\x00": "x"}, conversation_id="conv-nul")
    assert refused.body["code"] == "invalid_arguments"

    (first,) = trace_of(company, "conv\ufffdnul")
    assert first.code == "invalid_conversation_id" and first.idempotency_key == "key\ufffdnul"
    (second,) = trace_of(company, "conv-nul")
    assert second.code == "invalid_arguments"
    assert second.arguments == {"status\ufffd": "[text, 1 chars]"}


@pytest.mark.django_db(transaction=True)
def test_the_trace_is_written_after_the_writes_transaction(company, monkeypatch):
    committed_when_traced = []
    write = trace._trace_rows._write

    def spy(rows):
        # What another connection sees at that moment: the write already committed.
        other = connections.create_connection(DEFAULT_DB_ALIAS)
        try:
            with other.cursor() as cursor:
                cursor.execute(
                    "SELECT value FROM testapp_counter WHERE company_id = %s", [company.pk]
                )
                committed_when_traced.append(cursor.fetchall())
        finally:
            other.close()
        write(rows)

    monkeypatch.setattr(trace._trace_rows, "_write", spy)
    outcome = call(company, "testapp_increment_counter", {"name": "visits"}, idempotency_key="k-1")

    assert not outcome.is_error
    assert committed_when_traced == [[(1,)]]
    assert ToolCall.objects.filter(company=company).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_failing_trace_write_is_logged_and_swallowed_and_the_write_stands(
    company, caplog, monkeypatch
):
    def database_gone_for_the_trace(rows):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(trace._trace_rows, "_write", database_gone_for_the_trace)
    outcome = call(company, "testapp_increment_counter", {"name": "visits"}, idempotency_key="k-1")

    assert not outcome.is_error
    assert outcome.body["value"] == 1
    assert Counter.objects.get(company=company, name="visits").value == 1
    assert not ToolCall.objects.exists()
    assert "conversation trace: could not write 1 items; dropped" in caplog.text


@pytest.mark.django_db
def test_inside_a_callers_transaction_a_failing_trace_leaves_it_usable(
    company, caplog, monkeypatch
):
    def refused_by_the_database(rows):
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM tooling_toolcall WHERE no_such_column = 1")

    monkeypatch.setattr(trace._trace_rows, "_write", refused_by_the_database)
    outcome = call(company, "list_services", {})

    assert not outcome.is_error
    assert "conversation trace: could not write 1 items; dropped" in caplog.text
    assert Counter.objects.filter(company=company).count() == 0  # the transaction still works


@pytest.mark.django_db(transaction=True)
def test_a_call_that_failed_with_the_database_down_is_traced_as_system(make_company):
    sandbox = make_company(environment=Company.Environment.SANDBOX)

    outcome = call(
        sandbox,
        "testapp_increment_counter",
        {"name": "visits"},
        idempotency_key="k-1",
        fault="database",
    )

    assert outcome.error_type == "SYSTEM"
    (traced,) = trace_of(sandbox, "conv-trace")
    assert (traced.error_type, traced.code) == ("SYSTEM", "database_unavailable")


@pytest.mark.django_db
def test_the_trim_task_deletes_calls_past_the_retention_setting(company, settings):
    settings.GARANTE_TRACE_RETENTION_DAYS = 30
    for _ in range(3):
        call(company, "list_services", {}, conversation_id=f"c-{uuid.uuid4().hex[:6]}")
    old, kept, recent = ToolCall.objects.order_by("id")
    now = timezone.now()
    ToolCall.objects.filter(pk=old.pk).update(created_at=now - timedelta(days=31))
    ToolCall.objects.filter(pk=kept.pk).update(created_at=now - timedelta(days=29))

    result = tool_calls_trim_task.delay().get()

    assert result == {"deleted": 1}
    assert set(ToolCall.objects.values_list("pk", flat=True)) == {kept.pk, recent.pk}


def test_celery_beat_schedules_the_trim():
    """What `celery -A config beat` does at start-up, in a fresh process."""
    script = (
        "from config.celery import app\n"
        "app.loader.init_worker()\n"
        "app.finalize()\n"
        "from celery.beat import Scheduler\n"
        f"entry = Scheduler(app=app, lazy=False).schedule[{TRIM_TASK_NAME!r}]\n"
        "print(entry.task, entry.schedule.remaining_estimate(entry.last_run_at).total_seconds())\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "PYTHONPATH": str(ROOT)}

    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )

    assert done.returncode == 0, done.stderr
    task, seconds_to_next_run = done.stdout.split()
    assert task == TRIM_TASK_NAME
    assert 0 <= float(seconds_to_next_run) <= 24 * 3600  # daily
