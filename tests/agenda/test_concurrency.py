"""Many conversations booking the same slot at once against a multi-worker gunicorn: on
PostgreSQL the exclusion constraint lets exactly one through; on the SQLite demo, the
serialised write transactions do."""

import threading
import uuid
from collections import Counter
from datetime import time, timedelta

import httpx
import pytest
from django.utils import timezone

from agenda.models import Appointment, Service
from agenda.selectors import agenda_settings_for
from agenda.services import professional_create
from core.identity import identify_contact
from core.models import Conversation
from core.services import contact_create, gateway_credential_issue

CONVERSATIONS = 50


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_fifty_conversations_booking_the_same_slot_make_exactly_one_appointment(
    gunicorn_server, company
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

    barrier = threading.Barrier(CONVERSATIONS)
    outcomes: Counter = Counter()
    lock = threading.Lock()

    def book(conversation_id: str, email: str) -> None:
        barrier.wait(timeout=30)
        try:
            response = http.post(
                "/api/tools/book_appointment",
                json={"identifier": email, "service": "Revisión", "slot": slot},
                headers={"X-Conversation-Id": conversation_id, "Idempotency-Key": uuid.uuid4().hex},
            )
            outcome = (response.status_code, response.json().get("code", "booked"))
        except Exception as error:  # a transport failure must show in the count
            outcome = (0, type(error).__name__)
        with lock:
            outcomes[outcome] += 1

    threads = [threading.Thread(target=book, args=c) for c in conversations]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    http.close()

    assert outcomes == Counter({(200, "booked"): 1, (422, "slot_taken"): CONVERSATIONS - 1}), (
        outcomes,
        server.log()[-3000:],
    )
    assert Appointment.objects.filter(state=Appointment.State.SCHEDULED).count() == 1


SQLITE_SETUP = """
import uuid
from datetime import time, timedelta
from django.utils import timezone
from agenda.models import Service
from agenda.selectors import agenda_settings_for
from agenda.services import professional_create
from core.identity import identify_contact
from core.models import Company, Conversation
from core.services import contact_create, gateway_credential_issue

company = Company.objects.create(name="Demo", slug="demo", environment="sandbox")
settings = agenda_settings_for(company=company)
settings.minimum_notice_minutes = 0
settings.save()
service = Service.objects.create(company=company, name="Revisión", duration_minutes=30)
professional_create(
    company=company, display_name="Dra. Ruiz", services=[service],
    weekly_hours=[(day, time(9), time(18)) for day in range(7)],
)
conversations = []
for n in range(COUNT):
    contact = contact_create(company=company, first_name=f"C{n}", email=f"c{n}@example.com")
    conversation = Conversation.objects.create(company=company, external_id=f"race-{n}")
    identify_contact(conversation=conversation, kind="email", value=contact.email)
    conversations.append([conversation.external_id, contact.email])
day = (timezone.now().astimezone(company.tz) + timedelta(days=3)).date().isoformat()
result = {
    "token": gateway_credential_issue(company=company, name="gateway")[1],
    "day": day,
    "conversations": conversations,
}
"""


@pytest.mark.django_db(transaction=True)
def test_on_the_sqlite_demo_concurrent_bookings_of_one_slot_make_one_appointment(
    gunicorn_server, sqlite_database
):
    """No exclusion constraint there: BEGIN IMMEDIATE serialises the booking transactions."""
    count = 12
    database = sqlite_database()
    setup = database.run(SQLITE_SETUP.replace("COUNT", str(count)))
    server = gunicorn_server(workers=2, threads=4, database_url=database.url)
    http = httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {setup['token']}"}, timeout=60
    )
    slots = {
        http.post(
            "/api/tools/find_available_slots",
            json={"service": "Revisión", "from": setup["day"], "to": setup["day"], "limit": 1},
            headers={"X-Conversation-Id": conversation_id},
        ).json()["items"][0]["slot"]
        for conversation_id, _email in setup["conversations"]
    }
    assert len(slots) == 1
    slot = slots.pop()
    barrier = threading.Barrier(count)
    outcomes: Counter = Counter()
    lock = threading.Lock()

    def book(conversation_id: str, email: str) -> None:
        barrier.wait(timeout=30)
        response = http.post(
            "/api/tools/book_appointment",
            json={"identifier": email, "service": "Revisión", "slot": slot},
            headers={"X-Conversation-Id": conversation_id, "Idempotency-Key": uuid.uuid4().hex},
        )
        with lock:
            outcomes[(response.status_code, response.json().get("code", "booked"))] += 1

    threads = [threading.Thread(target=book, args=c) for c in setup["conversations"]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    http.close()

    assert outcomes == Counter({(200, "booked"): 1, (422, "slot_taken"): count - 1}), (
        outcomes,
        server.log()[-3000:],
    )
    scheduled = database.run(
        "from agenda.models import Appointment\n"
        "result = Appointment.objects.filter(state='scheduled').count()"
    )
    assert scheduled == 1
