"""Many conversations booking the same slot at once against a multi-worker gunicorn: on
PostgreSQL the exclusion constraint lets exactly one through; on the SQLite demo, the
serialised write transactions do. And on PostgreSQL, a professional's bookings check and
insert one at a time, so two inserts never wait for each other in the constraint's check."""

import threading
import time as clock_time
from collections import Counter
from collections.abc import Callable
from datetime import time

import httpx
import pytest
from django.db import connection, connections, transaction

from agenda.models import Appointment, TimeOff, WorkingHours
from agenda.services import appointment_book, appointment_cancel, professional_create
from core.errors import ValidationFailed
from tests.agenda.booking_race import (
    book_all_at_once,
    fifty_conversations_book_the_same_slot,
)
from tests.factories import MONDAY_8AM, local

WAIT_SECONDS = 30  # an upper bound for the other thread to get where it is going, not a timing


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_fifty_conversations_booking_the_same_slot_make_exactly_one_appointment(
    gunicorn_server, company
):
    fifty_conversations_book_the_same_slot(gunicorn_server, company)


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

    outcomes = book_all_at_once(http, slot, setup["conversations"])
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


def _waiting_statement(pid: int) -> str | None:
    """The statement backend `pid` is running while it waits for a lock, if it is waiting."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT query FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'",
            [pid],
        )
        row = cursor.fetchone()
    return row[0] if row else None


def behind_a_transaction(hold: Callable[[], object], then: Callable[[], object]) -> tuple:
    """Run `hold` in a transaction of its own thread and keep it open; then run `then` in a
    transaction of another thread, catch the statement it waits on for a lock (None if it
    never waits), let the first commit, and return (that statement, what `then` came to:
    "done" or the code of its refusal)."""
    held, may_commit = threading.Event(), threading.Event()
    second: dict = {}

    def first() -> None:
        try:
            with transaction.atomic():
                hold()
                held.set()
                may_commit.wait(WAIT_SECONDS)
        finally:
            connections.close_all()

    def after() -> None:
        try:
            with transaction.atomic():
                connection.ensure_connection()
                second["pid"] = connection.connection.info.backend_pid
                then()
            second["outcome"] = "done"
        except ValidationFailed as refused:
            second["outcome"] = refused.code
        finally:
            connections.close_all()

    holder = threading.Thread(target=first)
    holder.start()
    assert held.wait(WAIT_SECONDS)
    racer = threading.Thread(target=after)
    racer.start()
    deadline = clock_time.monotonic() + WAIT_SECONDS
    waiting = None
    while waiting is None and racer.is_alive() and clock_time.monotonic() < deadline:
        clock_time.sleep(0.02)
        if second.get("pid"):
            waiting = _waiting_statement(second["pid"])
    may_commit.set()
    holder.join(WAIT_SECONDS)
    racer.join(WAIT_SECONDS)
    return waiting, second.get("outcome")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_second_booking_of_a_professional_waits_at_the_slot_check_and_then_is_refused(
    company, service, marta, ana, bruno
):
    """Two overlapping inserts in flight could each find the other's row in the exclusion
    constraint's check and wait for each other, a deadlock PostgreSQL breaks by failing one.
    The slot check locks the professional, so the second booking waits there, with nothing
    inserted, and is refused as taken once the first commits."""
    starts_at = local(2026, 12, 8, 10)

    def book(contact):
        return appointment_book(
            company=company,
            contact=contact,
            service=service,
            professional=marta,
            starts_at=starts_at,
            created_via=Appointment.Via.STAFF,
            now=MONDAY_8AM,
        )

    waiting, second = behind_a_transaction(lambda: book(ana), lambda: book(bruno))

    # The slot check (pg_stat_activity keeps the first 1,024 characters), not the INSERT.
    assert waiting is not None and waiting.startswith('SELECT "agenda_professional"'), waiting
    assert second == "slot_taken"
    assert Appointment.objects.get().contact_id == ana.pk


def _tuesday_morning_off(marta) -> None:
    TimeOff.objects.create(
        professional=marta,
        starts_at=local(2026, 12, 8, 9),
        ends_at=local(2026, 12, 8, 13),
        reason="Médico",
    )


def _tuesday_morning_hours_removed(marta) -> None:
    WorkingHours.objects.get(professional=marta, weekday=1, start_time=time(9)).delete()


def _tuesday_morning_hours_shortened(marta) -> None:
    hours = WorkingHours.objects.get(professional=marta, weekday=1, start_time=time(9))
    hours.start_time = time(11)
    hours.save()


def _service_no_longer_given(marta) -> None:
    marta.services.clear()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("change", "refused_as"),
    [
        (_tuesday_morning_off, "slot_unavailable"),
        (_tuesday_morning_hours_removed, "slot_unavailable"),
        (_tuesday_morning_hours_shortened, "slot_unavailable"),
        (_service_no_longer_given, "professional_unavailable"),
    ],
    ids=["time off added", "hours removed", "hours shortened", "service withdrawn"],
)
def test_a_booking_waits_for_a_schedule_change_in_flight_and_decides_on_it(
    company, service, marta, ana, change, refused_as
):
    """Staff change a professional's schedule (in the admin: one transaction) while a customer
    books inside what changes. Before, the booking read the schedule as it was and landed in
    the new time off (or outside the new hours). A schedule change locks the professional as a
    booking does, and the booking reads the schedule only once it holds that lock."""
    starts_at = local(2026, 12, 8, 10)  # a Tuesday

    waiting, booking = behind_a_transaction(
        lambda: change(marta),
        lambda: appointment_book(
            company=company,
            contact=ana,
            service=service,
            professional=marta,
            starts_at=starts_at,
            created_via=Appointment.Via.GATEWAY,
            now=MONDAY_8AM,
        ),
    )

    assert waiting is not None, booking  # it waited for the change to commit
    assert booking == refused_as
    assert not Appointment.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_cancel_waiting_behind_a_move_to_another_professional_cancels_the_moved_appointment(
    company, service, marta, ana
):
    """The cancel locks the appointment's row and reads its professional in one statement; a
    move to another professional commits while it waits: the cancel finds the appointment as
    moved, instead of answering that it does not exist."""
    lucia = professional_create(
        company=company,
        display_name="Lucía",
        services=[service],
        weekly_hours=[(day, time(9), time(18)) for day in range(5)],
    )
    booked = appointment_book(
        company=company,
        contact=ana,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 8, 10),
        created_via=Appointment.Via.STAFF,
        now=MONDAY_8AM,
    )

    def move_to_lucia() -> None:
        Appointment.objects.select_for_update().get(pk=booked.pk)
        Appointment.objects.filter(pk=booked.pk).update(professional=lucia)

    def cancel() -> None:
        appointment_cancel(company=company, reference=booked.reference, enforce_cutoff=False)

    waiting, outcome = behind_a_transaction(move_to_lucia, cancel)

    # The cancel's locking read (pg_stat_activity keeps its first 1,024 characters).
    assert waiting is not None and waiting.startswith('SELECT "agenda_appointment"'), waiting
    assert outcome == "done"
    cancelled = Appointment.objects.get(pk=booked.pk)
    assert (cancelled.state, cancelled.professional_id) == (Appointment.State.CANCELLED, lucia.pk)
