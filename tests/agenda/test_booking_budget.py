"""The SQL of a first book_appointment, reschedule_appointment and cancel_appointment (issue #11),
and the guarantees the lean write path keeps.

Each test bounds the statements of the call's own work, from the idempotency key lookup to the
COMMIT of its transaction, as the Gateway's calls run them (`call_tool` with a fresh key), so a
setting read twice or a lazy foreign-key load that creeps back fails the ceiling here. The
call's trace (tooling_toolcall) and authentication (core_gatewaycredential) are other code's
budget and are left out.
"""

from datetime import time, timedelta

import pytest
from django.contrib.contenttypes.models import ContentType
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django_fsm_log.models import StateLog

from agenda import clock, services
from agenda.models import Appointment
from agenda.services import (
    appointment_book,
    appointment_cancel,
    appointment_reschedule,
    professional_create,
    time_off_add,
)
from core import references
from core.errors import ValidationFailed
from core.identity import identify_contact
from core.models import Company, Conversation
from tests.factories import ANA_DOCUMENT, MONDAY_8AM, WEEKDAYS, local
from tests.statements import Budget, call_statements, shape

CONVERSATION = "conv-budget"

# book_appointment (besides BEGIN and COMMIT): the engine's key lookup and claim, the call's
# conversation and step-up policy, the slot in the ledger and the service it names; then ONE
# statement locking the professional and the customer, ONE read for the whole check (rules,
# hours, time off, the professional's and the customer's busy times, the customer's own
# booking of this slot, the professional's name), the INSERT (a reference collision or an
# overlap the exclusion constraint refuses writes nothing: no savepoint), the messages, and
# the ledger with the stored answer (one statement). Issue #45's budget; it sends 11.
BOOK = Budget(
    at_most=12,
    includes=(
        "BEGIN",
        "INSERT core_idempotencyrecord",
        # The professional's row and the customer's, locked until the end in one statement:
        # one professional's bookings check and insert one at a time, a change of their
        # schedule in flight commits first (agenda.models.lock_schedules), and one customer's
        # bookings with two professionals check and insert one at a time
        # (agenda.availability.check.lock_booking). The customer's lock also makes the calls
        # of one intent (the customer and the slot) run one at a time, with no lock of its own
        # (core.idempotency.intent).
        "SELECT agenda_professional FOR NO KEY UPDATE",
        # The check, in a statement after the locks; it also looks for the customer's own
        # booking of this slot, which a model that re-planned with a new key is answered with.
        "SELECT agenda_professional",
        "INSERT agenda_appointment",
        "INSERT agenda_appointmentmessage",  # its confirmation and reminder
        # The ledger written with the stored answer, in one statement (core.sql.execute_all).
        # The new appointment, seen by the conversation.
        "INSERT tooling_exposedreference + UPDATE core_idempotencyrecord",
        "COMMIT",
    ),
)
# reschedule_appointment and cancel_appointment follow a booking: the step-up policy it read is
# kept in the process cache (core.identity.step_up_policies).
RESCHEDULE = Budget(
    # The UPDATE keeps its savepoint: an overlap the exclusion constraint refuses is answered
    # with the nearest free slots, read in the transaction it leaves usable.
    at_most=17,
    includes=(
        "BEGIN",
        "INSERT core_idempotencyrecord",
        "LOCK intent",  # the move of this appointment to this slot, one call at a time
        "SELECT agenda_appointment",  # already there?
        # Locked with its service, professional and the cut-off; only its own row is locked.
        "SELECT agenda_appointment FOR UPDATE",
        "SELECT agenda_professional FOR NO KEY UPDATE",  # the schedule's and customer's locks
        "SAVEPOINT",
        "INSERT django_fsm_log_statelog",
        "UPDATE agenda_appointment",
        "RELEASE SAVEPOINT",
        "UPDATE agenda_appointmentmessage",  # the reminder for the old time dropped
        "INSERT agenda_appointmentmessage",  # the confirmation and the new reminder
        # The ledger written with the stored answer, in one statement (core.sql.execute_all).
        "INSERT tooling_exposedreference + UPDATE core_idempotencyrecord",
        "COMMIT",
    ),
)
CANCEL = Budget(
    at_most=10,
    includes=(
        "BEGIN",
        "INSERT core_idempotencyrecord",
        "SELECT agenda_appointment FOR UPDATE",  # with the cut-off, the service and professional
        "INSERT django_fsm_log_statelog",
        "UPDATE agenda_appointment",
        "UPDATE agenda_appointmentmessage",  # the reminder dropped
        "INSERT agenda_appointmentmessage",  # the cancellation's confirmation
        "UPDATE core_idempotencyrecord",
        "COMMIT",
    ),
)


def call(company: Company, tool: str, arguments: dict, *, key: bool = True):
    """A tool call's outcome and the shapes of its own statements, up to its COMMIT."""
    outcome, statements = call_statements(
        company, tool, arguments, conversation_id=CONVERSATION, key=key
    )
    return outcome, [shape(sql) for sql in statements]


def first_slot(company: Company, day: str) -> str:
    outcome, _ = call(
        company,
        "find_available_slots",
        {"service": "Corte de pelo", "from": day, "to": day, "limit": 1},
        key=False,
    )
    assert outcome.is_error is False, outcome.body
    return outcome.body["items"][0]["slot"]


@pytest.fixture
def gateway(company, marta, ana, monkeypatch):
    """The company as authentication hands it to a call, with Ana identified in the
    conversation, on Monday 7 December 2026 at 08:00 in Madrid."""
    monkeypatch.setattr(clock, "now", lambda: MONDAY_8AM)
    conversation = Conversation.objects.create(company=company, external_id=CONVERSATION)
    identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT)
    ContentType.objects.get_for_model(Appointment)  # the transition log's, cached per process
    return Company.objects.get(pk=company.pk)


@pytest.fixture
def crowded(company, service, ana, marta):
    """Two more professionals give the service, and everybody has appointments and time off
    in the weeks booked: none of it may add a statement."""
    others = [
        professional_create(
            company=company,
            display_name=name,
            services=[service],
            weekly_hours=[(d, time(9), time(19)) for d in WEEKDAYS],
        )
        for name in ("Luis", "Eva")
    ]
    # At 16:00, 17:00 and 18:00: one customer is never booked twice at once.
    for hour, professional in enumerate([marta, *others], start=16):
        for day in (8, 9, 29, 30):
            time_off_add(
                professional=professional,
                starts_at=local(2026, 12, day, 12),
                ends_at=local(2026, 12, day, 13),
            )
            appointment_book(
                company=company,
                contact=ana,
                service=service,
                professional=professional,
                starts_at=local(2026, 12, day, hour),
                created_via=Appointment.Via.STAFF,
                now=MONDAY_8AM,
            )
    return others


def book(company: Company, slot: str):
    return call(
        company,
        "book_appointment",
        {"identifier": ANA_DOCUMENT, "service": "Corte de pelo", "slot": slot},
    )


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_first_booking_stays_within_its_statement_budget(gateway, ana):
    slot = first_slot(gateway, "2026-12-08")
    outcome, statements = call_statements(
        gateway,
        "book_appointment",
        {"identifier": ANA_DOCUMENT, "service": "Corte de pelo", "slot": slot},
        conversation_id=CONVERSATION,
    )

    assert outcome.is_error is False, outcome.body
    shapes = [shape(sql) for sql in statements]
    BOOK.check(shapes)
    assert "SAVEPOINT" not in shapes
    (lock,) = [sql for sql in statements if sql.endswith("FOR NO KEY UPDATE")]
    assert '"core_contact"' in lock  # the customer's row, with the professional's
    # The intent costs no statement: no lock of its own, and its look is in the check's.
    assert "LOCK intent" not in shapes and "SELECT agenda_appointment" not in shapes
    (check,) = [sql for sql in statements if shape(sql) == "SELECT agenda_professional"]
    assert 'AS "own_booking_id"' in check
    booked = Appointment.objects.get(reference=outcome.body["appointment"])
    assert (booked.professional.display_name, booked.starts_at) == ("Marta", local(2026, 12, 8, 9))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("day", ["2026-12-08", "2026-12-30"])
def test_a_booking_costs_the_same_whatever_the_professionals_appointments_or_day(
    gateway, crowded, day
):
    outcome, statements = book(gateway, first_slot(gateway, day))

    assert outcome.is_error is False, outcome.body
    BOOK.check(statements)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_first_reschedule_stays_within_its_statement_budget(gateway, crowded):
    booked, _ = book(gateway, first_slot(gateway, "2026-12-08"))

    outcome, statements = call(
        gateway,
        "reschedule_appointment",
        {
            "identifier": ANA_DOCUMENT,
            "appointment": booked.body["appointment"],
            "slot": first_slot(gateway, "2026-12-30"),
        },
    )

    assert outcome.is_error is False, outcome.body
    RESCHEDULE.check(statements)
    assert (outcome.body["date"], outcome.body["time"]) == ("2026-12-30", "09:00")
    assert StateLog.objects.filter(transition="reschedule").count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_first_cancel_stays_within_its_statement_budget(gateway):
    booked, _ = book(gateway, first_slot(gateway, "2026-12-09"))

    outcome, statements = call(
        gateway,
        "cancel_appointment",
        {"identifier": ANA_DOCUMENT, "appointment": booked.body["appointment"]},
    )

    assert outcome.is_error is False, outcome.body
    CANCEL.check(statements)
    assert outcome.body["state"] == "cancelled"
    assert Appointment.objects.get(reference=booked.body["appointment"]).state == "cancelled"


# The guarantees the lean path keeps --------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_reference_collision_draws_another_reference_within_the_call(gateway, monkeypatch):
    taken, _ = book(gateway, first_slot(gateway, "2026-12-08"))
    draws = iter([taken.body["appointment"], "AP-NEW234"])
    monkeypatch.setattr(references, "new_reference", lambda prefix: next(draws))

    outcome, statements = book(gateway, first_slot(gateway, "2026-12-08"))

    assert outcome.is_error is False, outcome.body
    assert outcome.body["appointment"] == "AP-NEW234"
    assert statements.count("INSERT agenda_appointment") == 2  # the taken one wrote nothing
    assert "SAVEPOINT" not in statements and statements[-1] == "COMMIT"
    assert Appointment.objects.count() == 2


def _overlapping(appointment: Appointment, contact) -> Appointment:
    """Another customer's appointment at the same time, written as a concurrent booking
    that committed first would be."""
    return Appointment.objects.create(
        company=appointment.company,
        reference="AP-RACE22",
        contact=contact,
        service=appointment.service,
        professional=appointment.professional,
        starts_at=appointment.starts_at,
        ends_at=appointment.ends_at,
        blocked_from=appointment.blocked_from,
        blocked_until=appointment.blocked_until,
        created_via=Appointment.Via.STAFF,
    )


def _lose_the_race_at(target, professional, racer_contact, monkeypatch) -> None:
    """Make the availability read miss a concurrent booking at `target` (Corte de pelo with
    `professional`): it is written right after the slot check passes."""
    validate = services.slot_lock_and_check

    def validate_then_lose_the_race(**kwargs):
        facts = validate(**kwargs)
        racer = Appointment(
            company=professional.company,
            service=kwargs["service"],
            professional=professional,
            starts_at=target,
            ends_at=target + timedelta(minutes=30),
            blocked_from=target,
            blocked_until=target + timedelta(minutes=40),
        )
        _overlapping(racer, racer_contact)
        return facts

    monkeypatch.setattr(services, "slot_lock_and_check", validate_then_lose_the_race)


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_reschedule_that_loses_the_race_leaves_no_trace_and_the_transaction_usable(
    company, service, marta, ana, bruno, monkeypatch
):
    """The availability read misses a concurrent booking; the exclusion constraint refuses the
    UPDATE, and its savepoint takes the transition's log with it."""
    moving = appointment_book(
        company=company,
        contact=ana,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 8, 10),
        created_via=Appointment.Via.STAFF,
        now=MONDAY_8AM,
    )
    target = local(2026, 12, 9, 10)
    _lose_the_race_at(target, marta, bruno, monkeypatch)

    with transaction.atomic():  # a caller's transaction (the tool engine's, the admin's)
        with pytest.raises(ValidationFailed) as caught:
            appointment_reschedule(
                company=company,
                reference=moving.reference,
                contact=ana,
                starts_at=target,
                now=MONDAY_8AM,
            )
        # Still usable. The stand-in racer was written in this transaction, not the service's
        # savepoint (a real racer commits in its own), so it stays.
        assert Appointment.objects.filter(pk=moving.pk).exists()
        assert Appointment.objects.filter(reference="AP-RACE22").exists()

    assert caught.value.code == "slot_taken"
    assert caught.value.as_dict()["nearest_free_slots"]
    moving.refresh_from_db()
    assert (moving.state, moving.starts_at) == ("scheduled", local(2026, 12, 8, 10))
    assert not StateLog.objects.filter(transition="reschedule").exists()


@pytest.mark.postgres
@pytest.mark.django_db
def test_a_booking_that_loses_the_race_is_refused_with_the_nearest_slots_and_no_savepoint(
    company, service, marta, ana, bruno, monkeypatch
):
    """The availability read misses a concurrent booking; the exclusion constraint refuses the
    INSERT, which writes nothing (ON CONFLICT DO NOTHING), so the nearest free slots are read
    in the same transaction, still usable, with no savepoint."""
    target = local(2026, 12, 9, 10)
    _lose_the_race_at(target, marta, bruno, monkeypatch)

    with transaction.atomic():  # a caller's transaction (the tool engine's, the admin's)
        with (
            CaptureQueriesContext(connection) as captured,
            pytest.raises(ValidationFailed) as caught,
        ):
            appointment_book(
                company=company,
                contact=ana,
                service=service,
                professional=marta,
                starts_at=target,
                created_via=Appointment.Via.STAFF,
                now=MONDAY_8AM,
            )
        assert Appointment.objects.filter(contact=ana).count() == 0  # still usable

    assert caught.value.code == "slot_taken"
    assert caught.value.as_dict()["nearest_free_slots"]
    assert not any(q["sql"].startswith("SAVEPOINT") for q in captured.captured_queries)


@pytest.mark.django_db
def test_refusals_leave_a_callers_transaction_usable(company, service, marta, ana):
    appointment = appointment_book(
        company=company,
        contact=ana,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 7, 9),
        created_via=Appointment.Via.STAFF,
        now=MONDAY_8AM,
        enforce_customer_rules=False,
    )

    with transaction.atomic():
        with pytest.raises(ValidationFailed) as too_late:  # within the 120-minute cut-off
            appointment_cancel(
                company=company, reference=appointment.reference, contact=ana, now=MONDAY_8AM
            )
        with pytest.raises(ValidationFailed) as taken:
            appointment_book(
                company=company,
                contact=ana,
                service=service,
                professional=marta,
                starts_at=local(2026, 12, 7, 9),
                created_via=Appointment.Via.STAFF,
                now=MONDAY_8AM,
            )
        appointment.refresh_from_db()  # the transaction still answers

    assert (too_late.value.code, taken.value.code) == ("cutoff_passed", "slot_taken")
    assert appointment.state == "scheduled"
