"""The staff's lists stay quick as the tables grow: a page reads its rows with their related
rows in one query, and the lists of the logs that grow by millions (tool calls, idempotency
records, the exposure ledger) never read every row to offer their filters or dates."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.models import Conversation, IdempotencyRecord
from core.services import contact_create
from tests.staff.trace_calls import call
from tooling.context import CallMeta, ToolContext
from tooling.ledger import LedgerEntry, ledger_record
from tooling.models import ExposedReference, ToolCall
from tooling.registry import registry

pytestmark = pytest.mark.django_db


def listed(client, url: str) -> tuple[str, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, url
    return response.content.decode(), [q["sql"] for q in captured.captured_queries]


def identified_conversations(company, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        contact = contact_create(
            company=company, first_name=f"Cliente {n}", document_number=f"{n:08d}Z"[-9:]
        )
        Conversation.objects.create(company=company, external_id=f"conv-{n}", contact=contact)


def test_the_conversation_list_reads_its_contacts_with_the_page(client, sol, sol_admin):
    client.force_login(sol_admin)
    identified_conversations(sol, 2)
    _, few = listed(client, "/admin/core/conversation/")

    identified_conversations(sol, 8, start=2)
    page, more = listed(client, "/admin/core/conversation/")

    assert "Cliente 9" in page
    assert len(more) == len(few)


def idempotency_record(company, key: str, operation: str = "open_case") -> IdempotencyRecord:
    now = timezone.now()
    return IdempotencyRecord.objects.create(
        company=company,
        key=key,
        operation=operation,
        fingerprint="f" * 64,
        response='{"reference":"CS-AAAAAA"}',
        status_code=200,
        created_at=now,
        replay_until=now + timedelta(days=1),
        expires_at=now + timedelta(days=30),
    )


def reads_every_row(sql: str, table: str) -> bool:
    """A query of the whole table for a filter's choices or a date hierarchy's range."""
    unbounded = "LIMIT" not in sql and "COUNT(" not in sql
    return table in sql and unbounded and ("DISTINCT" in sql or "MIN(" in sql)


@pytest.mark.parametrize(
    ("url", "table"),
    [
        ("/admin/tooling/toolcall/", "tooling_toolcall"),
        ("/admin/core/idempotencyrecord/", "core_idempotencyrecord"),
        ("/admin/tooling/exposedreference/", "tooling_exposedreference"),
    ],
)
def test_the_logs_lists_never_read_every_row_for_their_filters(client, sol, sol_admin, url, table):
    call(sol, "list_services", {})
    call(sol, "find_available_slots", {"service": "nada", "from": "2026-12-01"})
    idempotency_record(sol, "key-1")
    ledger_record(shown_in(sol, "conv-1"), "case", [LedgerEntry("CS-AAAAAA")])
    client.force_login(sol_admin)

    page, queries = listed(client, url)

    assert [sql for sql in queries if reads_every_row(sql, table)] == []
    assert "Hoy" in page  # dates filtered by period instead (the admin speaks Spanish)


def test_the_tool_filter_offers_every_tool_and_filters_by_it(client, sol, sol_admin):
    call(sol, "list_services", {}, conversation_id="conv-a")
    slots = {"service": "nada", "from": "2026-12-01"}
    call(sol, "find_available_slots", slots, conversation_id="conv-b")
    assert ToolCall.objects.get(conversation_key="conv-b").error_type == "NOT_FOUND"
    client.force_login(sol_admin)

    page, _ = listed(client, "/admin/tooling/toolcall/")
    by_tool, _ = listed(client, "/admin/tooling/toolcall/?tool=list_services")
    by_error, _ = listed(client, "/admin/tooling/toolcall/?error_type=NOT_FOUND")
    by_surface, _ = listed(client, "/admin/tooling/toolcall/?surface=rest")

    assert all(f"?tool={tool.name}" in page for tool in registry.all())
    assert "conv-a" in by_tool and "conv-b" not in by_tool
    assert "conv-b" in by_error and "conv-a" not in by_error
    assert "conv-a" not in by_surface and "conv-b" not in by_surface  # both came over MCP


def shown_in(company, conversation_id: str) -> ToolContext:
    return ToolContext(company=company, meta=CallMeta(conversation_id=conversation_id))


def test_the_ledger_filters_by_every_kind_by_name(client, sol, sol_admin):
    ledger_record(shown_in(sol, "conv-a"), "slot", [LedgerEntry("HX4K2P", "2026-12-01 10:00")])
    ledger_record(shown_in(sol, "conv-b"), "case", [LedgerEntry("CS-AAAAAA")])
    client.force_login(sol_admin)

    page, _ = listed(client, "/admin/tooling/exposedreference/")
    slots, _ = listed(client, "/admin/tooling/exposedreference/?kind__exact=slot")

    for kind in ExposedReference.Kind:
        assert f"?kind__exact={kind.value}" in page
    assert ">franja<" in page and ">caso<" in page  # the kinds by name, in the staff's language
    assert "HX4K2P" in slots and "CS-AAAAAA" not in slots
    conversation = Conversation.objects.get(external_id="conv-a")
    seen, _ = listed(client, f"/admin/core/conversation/{conversation.pk}/change/")
    assert "HX4K2P <small>(franja, 2026-12-01 10:00)</small>" in seen


def test_the_ledger_refuses_a_kind_outside_its_set(sol):
    with pytest.raises(ValueError, match="'slots' is not a valid"):
        ledger_record(shown_in(sol, "conv-a"), "slots", [LedgerEntry("HX4K2P")])

    assert not ExposedReference.objects.exists()


def test_idempotency_records_are_listed_newest_first_and_found_by_exact_key(client, sol, sol_admin):
    older = idempotency_record(sol, "bench-key-older")
    newer = idempotency_record(sol, "bench-key-newer", operation="book_appointment")
    client.force_login(sol_admin)

    page, queries = listed(client, "/admin/core/idempotencyrecord/")
    exact, _ = listed(client, "/admin/core/idempotencyrecord/?q=bench-key-older")
    partial, _ = listed(client, "/admin/core/idempotencyrecord/?q=bench-key")
    by_operation, _ = listed(client, "/admin/core/idempotencyrecord/?q=book_appointment")

    assert page.index(f"/{newer.pk}/change/") < page.index(f"/{older.pk}/change/")
    page_query = next(sql for sql in queries if "ORDER BY" in sql and "core_idempotency" in sql)
    assert page_query.endswith('ORDER BY "core_idempotencyrecord"."id" DESC')
    assert f"/{older.pk}/change/" in exact and f"/{newer.pk}/change/" not in exact
    assert f"/{older.pk}/change/" not in partial  # a key is matched whole, by its index
    assert f"/{newer.pk}/change/" in by_operation and f"/{older.pk}/change/" not in by_operation
