"""Above the key, at once (issue 48, item 1): twenty calls of one intent with twenty keys, sent
together to a multi-worker gunicorn on PostgreSQL, make one effect, and every one of them
answers with it (core.idempotency.intent: a lock every call of the intent takes, then a look
for what it already made in a later statement). The lock is the intent's advisory lock (a
quote), taken by the statement that reads the conversation (a case), or the customer's row
that a booking locks anyway."""

import threading
import uuid
from collections import Counter
from datetime import time, timedelta
from functools import partial

import httpx
import pytest
from django.db import connection, transaction
from django.utils import timezone

from agenda.models import Appointment, AppointmentMessage, Service
from agenda.selectors import agenda_settings_for
from agenda.services import professional_create
from core.errors import Conflict
from core.idempotency import Intent
from core.identity import identify_contact
from core.models import Conversation
from core.services import contact_create, gateway_credential_issue
from sales.models import Quote
from support.models import Case
from support.services import case_open_once
from tests.factories import ANA_DOCUMENT, catalog
from tests.servers import at_once
from tests.statements import call_statements, shape

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CALLS = 20


@pytest.fixture
def chat(gunicorn_server, company):
    """A gunicorn of 3 workers x 4 threads, a customer identified in one conversation, and an
    HTTP client that calls a tool there with a fresh key each time."""
    token = gateway_credential_issue(company=company, name="gateway")[1]
    contact = contact_create(
        company=company, first_name="Eva", email="eva@example.com", document_number="12345678Z"
    )
    conversation = Conversation.objects.create(company=company, external_id="conv-eva")
    identify_contact(conversation=conversation, kind="email", value=contact.email)
    server = gunicorn_server(workers=3, threads=4)
    http = httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )

    def call(tool: str, arguments: dict, *, identified: bool = True) -> httpx.Response:
        identifier = {"identifier": "eva@example.com"} if identified else {}
        return http.post(
            f"/api/tools/{tool}",
            json={**identifier, **arguments},
            headers={"X-Conversation-Id": "conv-eva", "Idempotency-Key": uuid.uuid4().hex},
        )

    yield call, server
    http.close()


def all_at_once(call, tool: str, arguments: dict) -> list[httpx.Response]:
    results = at_once(*[partial(call, tool, arguments) for _ in range(CALLS)])
    failures = [r for r in results if not isinstance(r, httpx.Response)]
    assert not failures, failures
    return results


def test_twenty_bookings_of_one_slot_with_twenty_keys_make_one_appointment(chat, company):
    call, server = chat
    settings = agenda_settings_for(company=company)
    settings.minimum_notice_minutes = 0
    settings.save()
    Service.objects.create(company=company, name="Revisión", duration_minutes=30)
    professional_create(
        company=company,
        display_name="Dra. Ruiz",
        services=Service.objects.filter(company=company),
        weekly_hours=[(day, time(9), time(18)) for day in range(7)],
    )
    day = (timezone.now().astimezone(company.tz) + timedelta(days=3)).date().isoformat()
    found = call(
        "find_available_slots",
        {"service": "Revisión", "from": day, "to": day, "limit": 1},
        identified=False,
    )
    assert found.status_code == 200, found.text
    found = found.json()
    slot = found["items"][0]["slot"]

    answers = all_at_once(call, "book_appointment", {"service": "Revisión", "slot": slot})

    assert [a.status_code for a in answers] == [200] * CALLS, server.log()
    bodies = [a.json() for a in answers]
    assert {b["appointment"] for b in bodies} == {Appointment.objects.get().reference}
    assert Counter(b["already_done"] for b in bodies) == {True: CALLS - 1, False: 1}
    assert AppointmentMessage.objects.filter(kind=AppointmentMessage.Kind.BOOKED).count() == 1


def test_twenty_identical_quotes_with_twenty_keys_make_one_quote(chat, company):
    call, server = chat
    catalog(company)
    items = [{"sku": "CAF-001", "quantity": 2}, {"sku": "MOL-003", "quantity": 1}]

    answers = all_at_once(call, "create_quote", {"items": items})

    assert [a.status_code for a in answers] == [200] * CALLS, server.log()
    bodies = [a.json() for a in answers]
    assert {b["reference"] for b in bodies} == {Quote.objects.get().reference}
    assert Counter(b["already_done"] for b in bodies) == {True: CALLS - 1, False: 1}


def test_twenty_cases_with_twenty_keys_open_one_and_name_it_nineteen_times(chat, company):
    call, server = chat

    answers = all_at_once(
        call, "open_case", {"subject": "No enciende", "description": "La tele no enciende."}
    )

    case = Case.objects.get()
    assert Counter(a.status_code for a in answers) == {200: 1, 409: CALLS - 1}, server.log()
    opened = next(a.json() for a in answers if a.status_code == 200)
    assert opened["reference"] == case.reference
    duplicates = [a.json() for a in answers if a.status_code == 409]
    assert {(d["code"], d["case"], d["subject"]) for d in duplicates} == {
        ("possible_duplicate", case.reference, "No enciende")
    }


def test_a_call_that_waits_for_its_intent_past_the_bound_is_told_to_retry(company, settings, ana):
    """The intent's lock is held by a twin that does not finish: the wait is bounded like the
    key's, CONFLICT request_in_progress, nothing made, and the transaction is not left half
    done."""
    settings.GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS = 200
    intent = Intent.of("open_case", company=company, contact=ana)
    held, release = threading.Event(), threading.Event()

    def twin() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [intent.lock_key])
                held.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    thread = threading.Thread(target=twin)
    thread.start()
    try:
        assert held.wait(timeout=30)
        with pytest.raises(Conflict) as refused:
            case_open_once(company=company, contact=ana, subject="Ruido", description="Ruido.")
    finally:
        release.set()
        thread.join(timeout=30)

    assert refused.value.code == "request_in_progress"
    assert Case.objects.count() == 0
    # Once the twin is gone the same call goes through.
    case_open_once(company=company, contact=ana, subject="Ruido", description="Ruido.")
    assert Case.objects.count() == 1


def test_a_case_whose_intent_is_held_at_the_conversations_read_waits_bounded_too(
    company, settings, ana
):
    """open_case takes its intent's lock in the statement that reads the conversation and
    its customer (tooling.context): the same key as the service's own lock, and the same
    bound, CONFLICT request_in_progress past it, nothing made."""
    settings.GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS = 200
    conversation = Conversation.objects.create(company=company, external_id="conv-held")
    identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT)
    intent = Intent.of("open_case", company=company, contact=ana)
    arguments = {"identifier": ANA_DOCUMENT, "subject": "Ruido", "description": "Ruido."}
    held, release = threading.Event(), threading.Event()

    def twin() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [intent.lock_key])
                held.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    thread = threading.Thread(target=twin)
    thread.start()
    try:
        assert held.wait(timeout=30)
        waited, statements = call_statements(
            company, "open_case", arguments, conversation_id="conv-held"
        )
    finally:
        release.set()
        thread.join(timeout=30)

    assert waited.is_error and waited.body["code"] == "request_in_progress", waited.body
    assert "SELECT core_conversation + LOCK intent" in [shape(sql) for sql in statements]
    assert Case.objects.count() == 0
    opened, _ = call_statements(company, "open_case", arguments, conversation_id="conv-held")
    assert opened.is_error is False, opened.body
    assert Case.objects.get().reference == opened.body["reference"]
