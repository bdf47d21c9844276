"""Duplicates and races at once, against a multi-worker gunicorn over MCP (the Gateway's surface):
100 identical calls make one effect and 100 identical answers; 50 conversations racing for one
slot make one booking and 49 VALIDATION answers, never SYSTEM."""

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import time, timedelta

import pytest
from django.utils import timezone

from agenda.models import Appointment, Service
from agenda.selectors import agenda_settings_for
from agenda.services import professional_create
from core.identity import identify_contact
from core.models import Company, Conversation, IdempotencyRecord
from core.services import contact_create
from support.models import Case
from tests.factories import ANA_DOCUMENT, ANA_PHONE
from tests.reliability.conftest import Answer, Gateway, assert_clean_wire, unique

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DUPLICATES = 100
RACERS = 50


def at_once(count: int, call) -> list[Answer]:
    """`count` calls released together (a barrier), each on its own thread."""
    barrier = threading.Barrier(count)

    def run(n: int) -> Answer:
        barrier.wait(timeout=60)
        return call(n)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(run, range(count)))


def test_a_hundred_identical_calls_at_once_make_one_case_and_a_hundred_identical_answers(
    gunicorn_server, company: Company, token: str
):
    contact = contact_create(
        company=company, first_name="Ana", document_number=ANA_DOCUMENT, phone=ANA_PHONE
    )
    conversation = Conversation.objects.create(company=company, external_id=unique("conv"))
    identify_contact(conversation=conversation, kind="document", value=contact.document_number)
    server = gunicorn_server(workers=3, threads=8)
    gateway = Gateway(server.url, token, timeout=60)
    arguments = {"identifier": ANA_DOCUMENT, "subject": "Sin luz", "description": "Nada funciona."}
    key = unique("dup")

    answers = at_once(
        DUPLICATES,
        lambda n: gateway.call(
            "open_case", arguments, conversation=conversation.external_id, key=key
        ),
    )
    gateway.close()

    assert Counter(a.status for a in answers) == {200: DUPLICATES}
    assert all(a.result["isError"] is False for a in answers), {a.text for a in answers}
    assert len({a.text for a in answers}) == 1  # byte for byte, first answer included
    assert Case.objects.filter(company=company).count() == 1
    assert IdempotencyRecord.objects.get(company=company, key=key).replay_count == DUPLICATES - 1
    assert answers[0].body["reference"] == Case.objects.get(company=company).reference


def test_fifty_conversations_booking_one_slot_at_once_make_one_booking_and_49_validation(
    gunicorn_server, company: Company, token: str
):
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
    racers = []
    for n in range(RACERS):
        contact = contact_create(company=company, first_name=f"C{n}", email=f"c{n}@example.com")
        conversation = Conversation.objects.create(company=company, external_id=unique("race"))
        identify_contact(conversation=conversation, kind="email", value=contact.email)
        racers.append((conversation.external_id, contact.email))
    server = gunicorn_server(workers=3, threads=8)
    gateway = Gateway(server.url, token, timeout=60)
    day = (timezone.now().astimezone(company.tz) + timedelta(days=3)).date().isoformat()
    search = {"service": "Revisión", "from": day, "to": day, "limit": 1}
    shown = set()
    for conversation_id, _email in racers:  # each conversation sees the slot it will book
        found = gateway.call("find_available_slots", search, conversation=conversation_id)
        shown.add(found.body["items"][0]["slot"])
    assert len(shown) == 1
    slot = shown.pop()

    answers = at_once(
        RACERS,
        lambda n: gateway.call(
            "book_appointment",
            {"identifier": racers[n][1], "service": "Revisión", "slot": slot},
            conversation=racers[n][0],
            key=unique("book"),
        ),
    )
    gateway.close()

    for answer in answers:
        assert answer.status == 200, answer.text[:300]
        assert_clean_wire(answer.text)
    outcomes = Counter(a.error_type or "booked" for a in answers)
    assert outcomes == {"booked": 1, "VALIDATION": RACERS - 1}, outcomes
    assert Appointment.objects.filter(company=company, state="scheduled").count() == 1
    refused = [a.body for a in answers if a.error_type]
    assert all(body.get("user_message") for body in refused)
