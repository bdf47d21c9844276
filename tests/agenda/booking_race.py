"""Fifty conversations booking the same slot at once against a multi-worker gunicorn: run by
tests/agenda/test_concurrency.py, and again through PgBouncer by tests/cluster/test_pgbouncer.py."""

import uuid
from collections import Counter
from datetime import time, timedelta
from functools import partial

import httpx
from django.utils import timezone

from agenda.models import Appointment, Service
from agenda.selectors import agenda_settings_for
from agenda.services import professional_create
from core.identity import identify_contact
from core.models import Conversation
from core.services import contact_create, gateway_credential_issue
from tests.servers import at_once

CONVERSATIONS = 50


def book_all_at_once(http: httpx.Client, slot: str, conversations: list) -> Counter:
    """Each (conversation id, email) books `slot` from its own thread, all released together;
    the count of (HTTP status, code) answers, a transport failure counted by its type."""

    def book(conversation_id: str, email: str) -> tuple[int, str]:
        response = http.post(
            "/api/tools/book_appointment",
            json={"identifier": email, "service": "Revisión", "slot": slot},
            headers={"X-Conversation-Id": conversation_id, "Idempotency-Key": uuid.uuid4().hex},
        )
        return response.status_code, response.json().get("code", "booked")

    results = at_once(*[partial(book, *c) for c in conversations])
    return Counter(r if isinstance(r, tuple) else (0, type(r).__name__) for r in results)


def fifty_conversations_book_the_same_slot(gunicorn_server, company) -> None:
    """Fifty identified conversations, each shown the same first slot of a multi-worker
    gunicorn, book it at once: exactly one appointment, and 49 `slot_taken`."""
    settings = agenda_settings_for(company=company)
    settings.minimum_notice_minutes = 0
    settings.save()
    service = Service.objects.create(company=company, name="Revisión", duration_minutes=30)
    professional_create(
        company=company,
        display_name="Dra. Ruiz",
        services=[service],
        weekly_hours=[(day, time(9), time(18)) for day in range(7)],
    )
    token = gateway_credential_issue(company=company, name="gateway")[1]
    day = (timezone.now().astimezone(company.tz) + timedelta(days=3)).date().isoformat()
    conversations = []
    for n in range(CONVERSATIONS):
        contact = contact_create(company=company, first_name=f"C{n}", email=f"c{n}@example.com")
        conversation = Conversation.objects.create(
            company=company, external_id=f"race-{n}-{uuid.uuid4().hex[:6]}"
        )
        identify_contact(conversation=conversation, kind="email", value=contact.email)
        conversations.append((conversation.external_id, contact.email))

    server = gunicorn_server(workers=3, threads=4)
    http = httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )
    slots = set()
    for conversation_id, _email in conversations:
        found = http.post(
            "/api/tools/find_available_slots",
            json={"service": "Revisión", "from": day, "to": day, "limit": 1},
            headers={"X-Conversation-Id": conversation_id},
        )
        assert found.status_code == 200, found.text
        slots.add(found.json()["items"][0]["slot"])
    assert len(slots) == 1  # everybody was shown the same first slot
    slot = slots.pop()

    outcomes = book_all_at_once(http, slot, conversations)
    http.close()

    assert outcomes == Counter({(200, "booked"): 1, (422, "slot_taken"): CONVERSATIONS - 1}), (
        outcomes,
        server.log()[-3000:],
    )
    assert Appointment.objects.filter(state=Appointment.State.SCHEDULED).count() == 1
