"""Booking, rescheduling and cancelling: every rule re-checked at the instant of the write."""

import re
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import translation

from agenda.availability import check
from agenda.availability.check import slot_lock_and_check
from agenda.availability.slots import Move
from agenda.guards import appointment_check_cutoff, appointment_lock
from agenda.models import AgendaSettings, Appointment
from agenda.services import (
    appointment_book,
    appointment_cancel,
    appointment_reschedule,
    time_off_add,
)
from core.errors import NotFound, PermissionRefused, ValidationFailed
from tests.factories import MONDAY_8AM, local

pytestmark = pytest.mark.django_db

TUESDAY_10 = local(2026, 12, 8, 10)


@pytest.fixture
def book(company, service, marta, ana):
    def book(starts_at=TUESDAY_10, *, now=MONDAY_8AM, contact=None, **kwargs):
        return appointment_book(
            company=company,
            contact=contact or ana,
            service=service,
            professional=marta,
            starts_at=starts_at,
            created_via="gateway",
            now=now,
            **kwargs,
        )

    return book


def test_it_books_a_free_slot_with_a_public_reference(book, ana):
    appointment = book()

    assert appointment.reference.startswith("AP-") and len(appointment.reference) == 9
    assert appointment.state == Appointment.State.SCHEDULED
    assert appointment.contact == ana
    assert appointment.ends_at - appointment.starts_at == timedelta(minutes=30)


def test_a_slot_of_today_whose_time_has_passed_is_rejected(book):
    with pytest.raises(ValidationFailed) as caught:
        book(local(2026, 12, 7, 10), now=local(2026, 12, 7, 10, 5))

    assert caught.value.code == "slot_in_past"
    assert not Appointment.objects.exists()


def test_a_slot_inside_the_minimum_notice_is_rejected(book):
    with pytest.raises(ValidationFailed) as caught:
        book(local(2026, 12, 7, 10), now=local(2026, 12, 7, 9, 30))

    assert caught.value.code == "slot_too_soon"


def test_a_one_minute_notice_is_said_in_the_singular_in_english(book, company, agenda_settings):
    agenda_settings.minimum_notice_minutes = 1
    agenda_settings.save()

    with translation.override("en"), pytest.raises(ValidationFailed) as caught:
        book(local(2026, 12, 7, 10), now=local(2026, 12, 7, 9, 59) + timedelta(seconds=30))

    assert "at least 1 minute in advance" in str(caught.value.user_message)


def test_staff_may_book_inside_the_notice_but_never_in_the_past(book):
    now = local(2026, 12, 7, 9, 30)
    assert book(local(2026, 12, 7, 10), now=now, enforce_customer_rules=False)

    with pytest.raises(ValidationFailed) as caught:
        book(local(2026, 12, 7, 9), now=now, enforce_customer_rules=False)
    assert caught.value.code == "slot_in_past"


def test_a_slot_beyond_the_horizon_is_rejected(book):
    with pytest.raises(ValidationFailed) as caught:
        book(local(2027, 3, 1, 10))

    assert caught.value.code == "slot_beyond_horizon"


def test_a_busy_slot_is_rejected_with_the_nearest_free_slots(book, bruno):
    book()

    with pytest.raises(ValidationFailed) as caught:
        book(local(2026, 12, 8, 10, 15), contact=bruno)

    error = caught.value.as_dict()
    assert error["code"] == "slot_taken"
    assert error["error_type"] == "VALIDATION"
    # 10:00-10:30 plus 10 minutes of buffer: the closest free starts on the 30-minute grid.
    assert [(s["date"], s["time"]) for s in error["nearest_free_slots"]] == [
        ("2026-12-08", "09:00"),
        ("2026-12-08", "11:00"),
        ("2026-12-08", "11:30"),
    ]
    assert error["nearest_free_slots"][0] == {
        "date": "2026-12-08",
        "weekday": "martes",
        "time": "09:00",
        "professional": "Marta",
    }
    assert "martes 08/12/2026 a las 09:00 con Marta" in error["user_message"]
    assert Appointment.objects.count() == 1


def test_back_to_back_appointments_coexist(book, bruno):
    book()

    # The first one blocks until 10:40 (buffer included); ranges are half-open.
    second = book(local(2026, 12, 8, 10, 40), contact=bruno)

    assert second.blocked_from == local(2026, 12, 8, 10, 40)


def test_a_slot_outside_the_working_hours_is_rejected(book):
    with pytest.raises(ValidationFailed) as caught:
        book(local(2026, 12, 8, 13, 45))

    assert caught.value.code == "slot_unavailable"
    assert caught.value.as_dict()["nearest_free_slots"]


def test_a_slot_in_time_off_is_rejected(book, marta):
    time_off_add(professional=marta, starts_at=TUESDAY_10, ends_at=local(2026, 12, 8, 11))

    with pytest.raises(ValidationFailed) as caught:
        book()

    assert caught.value.code == "slot_unavailable"


def test_an_inactive_professional_cannot_be_booked(book, marta):
    marta.active = False
    marta.save()

    with pytest.raises(ValidationFailed) as caught:
        book()

    assert caught.value.code == "professional_unavailable"


def test_a_customer_cannot_cancel_another_customers_appointment(book, company, bruno):
    appointment = book()

    with pytest.raises(PermissionRefused):
        appointment_cancel(
            company=company,
            reference=appointment.reference,
            contact=bruno,
            now=MONDAY_8AM,
        )

    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.SCHEDULED


def test_a_customer_cannot_reschedule_another_customers_appointment(book, company, bruno):
    appointment = book()

    with pytest.raises(PermissionRefused):
        appointment_reschedule(
            company=company,
            reference=appointment.reference,
            contact=bruno,
            starts_at=local(2026, 12, 9, 10),
            now=MONDAY_8AM,
        )


def test_ownership_is_checked_before_the_state(book, company, ana, bruno):
    appointment = book()
    appointment_cancel(company=company, reference=appointment.reference, now=MONDAY_8AM)

    with pytest.raises(PermissionRefused):
        appointment_cancel(
            company=company,
            reference=appointment.reference,
            contact=bruno,
            now=MONDAY_8AM,
        )


def test_an_unknown_reference_is_not_found(company):
    with pytest.raises(NotFound):
        appointment_cancel(company=company, reference="AP-ZZZZZZ", now=MONDAY_8AM)


def test_an_unknown_reference_is_not_found_in_its_own_words(company):
    with pytest.raises(NotFound) as caught:
        appointment_cancel(company=company, reference="AP-ZZZZZZ", now=MONDAY_8AM)

    assert (caught.value.error_type, caught.value.code) == ("NOT_FOUND", "appointment_not_found")
    told = {}
    for language in ("es", "en"):
        with translation.override(language):
            told[language] = str(caught.value.user_message)
            assert told[language].strip()
            assert told[language] != str(NotFound.default_message)
    assert told["es"] != told["en"]


def test_the_lock_reads_the_appointment_its_relations_and_cut_off_in_one_statement(
    book, company, django_assert_num_queries
):
    """One statement reads the row with its service, professional, contact and the company's
    cut-off; the cut-off check then reads nothing more."""
    appointment = book()

    with django_assert_num_queries(1):
        locked = appointment_lock(company, appointment.reference.lower(), with_cutoff=True)
        assert (locked.service, locked.professional, locked.contact) == (
            appointment.service,
            appointment.professional,
            appointment.contact,
        )
        assert locked.company is company
        appointment_check_cutoff(locked, MONDAY_8AM, "cancel")
    assert locked.pk == appointment.pk


def test_an_unknown_reference_is_read_again_before_it_is_not_found(
    company, django_assert_num_queries
):
    """A row a concurrent move gave another professional drops out of the first read: the
    second read, after that move, finds it. Nothing to find is NotFound after both."""
    with django_assert_num_queries(2), pytest.raises(NotFound):
        appointment_lock(company, "AP-ZZZZZZ")


def test_another_companys_appointment_is_not_found(book, other_company):
    appointment = book()

    with pytest.raises(NotFound):
        appointment_cancel(company=other_company, reference=appointment.reference)


def test_a_customer_cannot_cancel_after_the_cut_off(book, company, ana):
    appointment = book()

    with pytest.raises(ValidationFailed) as caught:
        appointment_cancel(
            company=company,
            reference=appointment.reference,
            contact=ana,
            now=TUESDAY_10 - timedelta(minutes=119),
        )

    assert caught.value.code == "cutoff_passed"
    assert "2 h 00 min" in str(caught.value.user_message)


def test_a_customer_can_cancel_right_before_the_cut_off(book, company, ana):
    appointment = book()

    appointment_cancel(
        company=company,
        reference=appointment.reference,
        contact=ana,
        now=TUESDAY_10 - timedelta(minutes=121),
    )

    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.CANCELLED


def past_the_cut_off(company, appointment, action, *, now, contact):
    """The refusal of a customer's cancel or move at `now`: ValidationFailed `cutoff_passed`."""
    with pytest.raises(ValidationFailed) as caught:
        if action == "cancel":
            appointment_cancel(
                company=company, reference=appointment.reference, contact=contact, now=now
            )
        else:
            appointment_reschedule(
                company=company,
                reference=appointment.reference,
                contact=contact,
                starts_at=local(2026, 12, 9, 10),
                now=now,
            )
    assert (caught.value.error_type, caught.value.code) == ("VALIDATION", "cutoff_passed")
    return caught.value


@pytest.mark.parametrize("action", ["cancel", "reschedule"])
def test_the_cut_off_starts_at_its_exact_instant(book, company, ana, action):
    appointment = book()

    past_the_cut_off(
        company, appointment, action, now=TUESDAY_10 - timedelta(minutes=120), contact=ana
    )

    appointment.refresh_from_db()
    assert (appointment.state, appointment.starts_at) == (Appointment.State.SCHEDULED, TUESDAY_10)


@pytest.mark.parametrize(("cutoff", "span"), [(120, "2 h 00 min"), (90, "1 h 30 min"), (45, "45")])
@pytest.mark.parametrize("action", ["cancel", "reschedule"])
def test_past_the_cut_off_the_customer_is_told_the_span_in_the_language_in_use(
    book, company, ana, agenda_settings, action, cutoff, span
):
    """The span is the company's cut-off (hours and minutes, or minutes alone), standing as
    its own words in a sentence of the catalogue: the English one differs from the Spanish."""
    agenda_settings.cancellation_cutoff_minutes = cutoff
    agenda_settings.save()
    appointment = book()
    now = TUESDAY_10 - timedelta(minutes=cutoff - 1)

    sentences = {}
    for language in ("es", "en"):
        with translation.override(language):
            message = str(
                past_the_cut_off(company, appointment, action, now=now, contact=ana).user_message
            )
        assert re.search(rf"(^|\s){re.escape(span)}(\s|$)", message), message
        if cutoff < 60:  # minutes alone, no hours
            assert " h " not in message, message
        sentences[language] = message.replace(span, "{span}")

    assert sentences["es"] != sentences["en"]
    appointment.refresh_from_db()
    assert (appointment.state, appointment.starts_at) == (Appointment.State.SCHEDULED, TUESDAY_10)


def test_one_minute_of_cut_off_is_told_in_the_singular(book, company, ana, agenda_settings):
    """1 minute and 2 minutes name their unit differently (singular, plural), in both
    languages; each span stands as its own words."""
    units = {}
    for minutes in (1, 2):
        agenda_settings.cancellation_cutoff_minutes = minutes
        agenda_settings.save()
        appointment = book(local(2026, 12, 8, 10 + minutes))
        for language in ("es", "en"):
            with translation.override(language):
                message = str(
                    past_the_cut_off(
                        company,
                        appointment,
                        "cancel",
                        now=appointment.starts_at,
                        contact=ana,
                    ).user_message
                )
            found = re.search(rf"(^|\s){minutes} (\w+)", message)
            assert found, message
            units[(minutes, language)] = found.group(2)

    assert units[(1, "es")] != units[(2, "es")]
    assert units[(1, "en")] != units[(2, "en")]


def test_a_cancel_and_a_move_past_the_cut_off_are_told_apart(book, company, ana):
    appointment = book()
    now = TUESDAY_10 - timedelta(minutes=60)

    told = {
        action: str(past_the_cut_off(company, appointment, action, now=now, contact=ana))
        for action in ("cancel", "reschedule")
    }

    assert told["cancel"] != told["reschedule"]


def test_before_its_settings_are_saved_a_company_has_the_default_cut_off(book, company, ana):
    appointment = book()
    AgendaSettings.objects.filter(company=company).delete()
    default = AgendaSettings._meta.get_field("cancellation_cutoff_minutes").default

    past_the_cut_off(
        company, appointment, "cancel", now=TUESDAY_10 - timedelta(minutes=default), contact=ana
    )
    appointment_cancel(
        company=company,
        reference=appointment.reference,
        contact=ana,
        now=TUESDAY_10 - timedelta(minutes=default + 1),
    )

    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.CANCELLED


def test_staff_may_cancel_after_the_cut_off(book, company):
    appointment = book()

    appointment_cancel(
        company=company,
        reference=appointment.reference,
        now=TUESDAY_10 - timedelta(minutes=5),
        enforce_cutoff=False,
    )

    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.CANCELLED


def test_a_cancelled_slot_is_free_again(book, company, bruno):
    appointment = book()
    appointment_cancel(company=company, reference=appointment.reference, now=MONDAY_8AM)

    assert book(contact=bruno).starts_at == TUESDAY_10


def test_rescheduling_onto_its_own_buffer_is_not_a_conflict_with_itself(book, company, ana):
    appointment = book()

    moved = appointment_reschedule(
        company=company,
        reference=appointment.reference,
        contact=ana,
        starts_at=local(2026, 12, 8, 10, 30),
        now=MONDAY_8AM,
    )

    assert moved.starts_at == local(2026, 12, 8, 10, 30)


def test_rescheduling_onto_a_busy_slot_is_rejected_and_keeps_the_old_time(
    book, company, ana, bruno
):
    appointment = book()
    book(local(2026, 12, 9, 10), contact=bruno)

    with pytest.raises(ValidationFailed) as caught:
        appointment_reschedule(
            company=company,
            reference=appointment.reference,
            contact=ana,
            starts_at=local(2026, 12, 9, 10),
            now=MONDAY_8AM,
        )

    assert caught.value.code == "slot_taken"
    appointment.refresh_from_db()
    assert appointment.starts_at == TUESDAY_10


@pytest.mark.postgres
def test_the_database_refuses_overlapping_scheduled_appointments(book, bruno):
    first = book()
    overlapping = Appointment(
        company=first.company,
        reference="AP-TEST22",
        contact=bruno,
        service=first.service,
        professional=first.professional,
        starts_at=first.starts_at + timedelta(minutes=15),
        ends_at=first.ends_at + timedelta(minutes=15),
        blocked_from=first.blocked_from + timedelta(minutes=15),
        blocked_until=first.blocked_until + timedelta(minutes=15),
        created_via="staff",
    )

    with pytest.raises(IntegrityError, match="appointment_no_overlap"), transaction.atomic():
        overlapping.save()


@pytest.mark.postgres
def test_a_booking_that_loses_the_race_gets_a_validation_error_with_free_slots(
    book, bruno, monkeypatch
):
    """When the availability read misses a concurrent booking, the constraint catches it."""
    assert connection.vendor == "postgresql"
    book()
    # The check passes whatever it read: the facts stand, their verdict is skipped.
    monkeypatch.setattr(check, "slot_facts_check", lambda facts, **kwargs: None)

    with pytest.raises(ValidationFailed) as caught:
        book(local(2026, 12, 8, 10, 15), contact=bruno)

    assert caught.value.code == "slot_taken"
    assert caught.value.as_dict()["nearest_free_slots"]
    assert Appointment.objects.count() == 1


@pytest.fixture
def withdrawn(book, service):
    """An appointment booked before its service was withdrawn: the customers already booked
    keep it."""
    appointment = book()
    service.active = False
    service.save()
    return appointment


def test_staff_can_move_an_appointment_whose_service_was_withdrawn(withdrawn, company):
    moved = appointment_reschedule(
        company=company,
        reference=withdrawn.reference,
        starts_at=local(2026, 12, 9, 10),
        enforce_customer_rules=False,
        now=MONDAY_8AM,
    )

    assert moved.starts_at == local(2026, 12, 9, 10)
    assert moved.state == Appointment.State.SCHEDULED


def test_a_customer_can_move_an_appointment_whose_service_was_withdrawn(withdrawn, company, ana):
    moved = appointment_reschedule(
        company=company,
        reference=withdrawn.reference,
        contact=ana,
        starts_at=local(2026, 12, 9, 10),
        now=MONDAY_8AM,
    )

    assert moved.starts_at == local(2026, 12, 9, 10)


def test_a_withdrawn_service_takes_no_new_booking(withdrawn, book, bruno):
    with pytest.raises(ValidationFailed) as caught:
        book(local(2026, 12, 9, 10), contact=bruno)
    assert caught.value.code == "service_inactive"


def test_a_service_of_another_company_is_refused_even_for_a_move(
    withdrawn, company, other_company, service
):
    service.company = other_company
    with pytest.raises(ValidationFailed) as caught:
        slot_lock_and_check(
            company=company,
            service=service,
            professional=withdrawn.professional,
            starts_at=local(2026, 12, 9, 10),
            now=MONDAY_8AM,
            move=Move.of(withdrawn),
        )
    assert caught.value.code == "service_inactive"
