"""The agenda's edges (issue #33, item 3): one customer in one place at a time, a move search
that never offers the appointment's own time, working hours until midnight, and a search past
the booking horizon that says why it is empty."""

import contextlib
import threading
from datetime import time

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import IntegrityError, connections, transaction
from django.urls import reverse

from agenda import clock
from agenda.availability.search import slots_available
from agenda.availability.slots import Move
from agenda.models import Appointment, WorkingHours
from agenda.services import appointment_book, appointment_reschedule, professional_create
from core.errors import ValidationFailed
from core.identity import identify_contact
from core.models import Conversation, StaffMembership
from tests.admin_pages import form_data
from tests.factories import ANA_DOCUMENT, MONDAY_8AM, WEEKDAYS, local
from tests.statements import call_statements

WAIT_SECONDS = 30  # an upper bound for a thread to get where it is going, not a timing
CONVERSATION = "conv-edges"


@pytest.fixture
def luis(company, service):
    """A second professional of the same service, Monday to Friday 09:00-19:00."""
    return professional_create(
        company=company,
        display_name="Luis",
        services=[service],
        weekly_hours=[(d, time(9), time(19)) for d in WEEKDAYS],
    )


def book_with(company, service, professional, contact, starts_at, **extra):
    return appointment_book(
        company=company,
        contact=contact,
        service=service,
        professional=professional,
        starts_at=starts_at,
        created_via=Appointment.Via.GATEWAY,
        now=MONDAY_8AM,
        **extra,
    )


# --- One ana, one place at a time ----------------------------------------------------------


@pytest.mark.django_db
def test_it_refuses_a_customer_a_second_appointment_overlapping_another_professionals(
    company, service, marta, luis, ana
):
    book_with(company, service, marta, ana, local(2026, 12, 8, 10))

    with pytest.raises(ValidationFailed) as caught:
        book_with(company, service, luis, ana, local(2026, 12, 8, 10, 15))

    error = caught.value.as_dict()
    assert error["error_type"] == "VALIDATION"
    assert error["code"] == "appointment_overlap"
    # The other appointment's date and time, in Madrid's time.
    assert "martes 08/12/2026 a las 10:00" in error["user_message"]
    assert error["overlapping_appointment"] == {
        "date": "2026-12-08",
        "weekday": "martes",
        "time": "10:00",
    }
    assert Appointment.objects.filter(contact=ana).count() == 1


@pytest.mark.django_db
def test_staff_cannot_book_a_customer_twice_at_once_either(company, service, marta, luis, ana):
    book_with(company, service, marta, ana, local(2026, 12, 8, 10))

    with pytest.raises(ValidationFailed) as caught:
        book_with(
            company,
            service,
            luis,
            ana,
            local(2026, 12, 8, 9, 45),
            enforce_customer_rules=False,
        )
    assert caught.value.code == "appointment_overlap"


@pytest.mark.django_db
def test_back_to_back_appointments_of_a_customer_are_not_an_overlap(
    company, service, marta, luis, ana
):
    book_with(company, service, marta, ana, local(2026, 12, 8, 10))

    # The customer's time is the service's (10:00-10:30), not the professional's buffers.
    book_with(company, service, luis, ana, local(2026, 12, 8, 10, 30))

    assert Appointment.objects.filter(contact=ana).count() == 2


@pytest.mark.django_db
def test_another_customer_may_book_the_same_time_with_another_professional(
    company, service, marta, luis, ana, bruno
):
    book_with(company, service, marta, ana, local(2026, 12, 8, 10))

    book_with(company, service, luis, bruno, local(2026, 12, 8, 10))


@pytest.mark.django_db
def test_a_cancelled_appointment_does_not_block_its_time(company, service, marta, luis, ana):
    first = book_with(company, service, marta, ana, local(2026, 12, 8, 10))
    Appointment.objects.filter(pk=first.pk).update(state=Appointment.State.CANCELLED)

    book_with(company, service, luis, ana, local(2026, 12, 8, 10))


@pytest.mark.django_db
def test_a_move_onto_the_customers_other_appointment_is_refused(company, service, marta, luis, ana):
    book_with(company, service, marta, ana, local(2026, 12, 8, 10))
    later = book_with(company, service, luis, ana, local(2026, 12, 8, 16))

    with pytest.raises(ValidationFailed) as caught:
        appointment_reschedule(
            company=company,
            reference=later.reference,
            contact=ana,
            starts_at=local(2026, 12, 8, 10),
            now=MONDAY_8AM,
        )

    assert caught.value.code == "appointment_overlap"
    assert "08/12/2026 a las 10:00" in caught.value.as_dict()["user_message"]
    later.refresh_from_db()
    assert later.starts_at == local(2026, 12, 8, 16)


@pytest.mark.django_db
def test_a_move_overlapping_only_its_own_old_time_is_allowed(company, service, luis, ana):
    appointment = book_with(company, service, luis, ana, local(2026, 12, 8, 10))

    moved = appointment_reschedule(
        company=company,
        reference=appointment.reference,
        contact=ana,
        starts_at=local(2026, 12, 8, 10, 15),
        now=MONDAY_8AM,
    )

    assert moved.starts_at == local(2026, 12, 8, 10, 15)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_bookings_of_one_customer_with_two_professionals_make_one(
    company, service, marta, luis, ana
):
    """Both start together (a Barrier), and neither commits before the other has booked or
    the wait for it times out: without a lock both would check, find nothing, insert and
    commit. The contact's lock makes the second wait inside its booking until the first
    commits, then read the first appointment and be refused."""
    started = threading.Barrier(2, timeout=WAIT_SECONDS)
    both_booked = threading.Barrier(2, timeout=3)
    outcomes: dict[str, str] = {}

    def book(professional) -> None:
        try:
            started.wait()
            with transaction.atomic():
                book_with(company, service, professional, ana, local(2026, 12, 8, 10))
                # Broken when the other is waiting for this one's lock: then commit.
                with contextlib.suppress(threading.BrokenBarrierError):
                    both_booked.wait()
            outcomes[professional.display_name] = "booked"
        except ValidationFailed as refused:
            outcomes[professional.display_name] = refused.code
            with contextlib.suppress(threading.BrokenBarrierError):
                both_booked.wait()
        finally:
            connections.close_all()

    threads = [threading.Thread(target=book, args=(p,)) for p in (marta, luis)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_SECONDS)

    assert sorted(outcomes.values()) == ["appointment_overlap", "booked"], outcomes
    assert Appointment.objects.filter(contact=ana).count() == 1


# --- A move search never offers the appointment's own time --------------------------------------


@pytest.fixture
def gateway(company, marta, ana, monkeypatch):
    """A conversation in which Ana is identified, on Monday 7 December 2026 at 08:00."""
    monkeypatch.setattr(clock, "now", lambda: MONDAY_8AM)
    conversation = Conversation.objects.create(company=company, external_id=CONVERSATION)
    identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT)
    return company


def call(company, tool: str, arguments: dict, *, write: bool = False):
    outcome, _statements = call_statements(
        company, tool, arguments, conversation_id=CONVERSATION, key=write
    )
    return outcome


def booked_by_the_agent(company, day: str, at: str) -> str:
    """Book the slot at `at` on `day` through the tools; the appointment's reference."""
    found = call(company, "find_available_slots", {"service": "Corte de pelo", "from": day})
    assert found.is_error is False, found.body
    [slot] = [s["slot"] for s in found.body["items"] if (s["date"], s["time"]) == (day, at)]
    outcome = call(
        company,
        "book_appointment",
        {"identifier": ANA_DOCUMENT, "service": "Corte de pelo", "slot": slot},
        write=True,
    )
    assert outcome.is_error is False, outcome.body
    return outcome.body["appointment"]


@pytest.mark.django_db
def test_a_move_search_does_not_offer_the_appointments_current_slot(gateway):
    reference = booked_by_the_agent(gateway, "2026-12-08", "09:00")

    found = call(
        gateway,
        "find_available_slots",
        {
            "service": "Corte de pelo",
            "from": "2026-12-08",
            "to": "2026-12-08",
            "appointment": reference,
            "limit": 3,
        },
    )

    assert found.is_error is False, found.body
    # 09:00 is its own time; 09:30 would overlap its buffer, were it not the one moving.
    assert [s["time"] for s in found.body["items"]] == ["09:30", "10:00", "10:30"]


@pytest.mark.django_db
def test_the_nearest_slots_of_a_refused_move_leave_out_its_current_slot(
    company, service, marta, ana, bruno
):
    mine = book_with(company, service, marta, ana, local(2026, 12, 8, 10))
    book_with(company, service, marta, bruno, local(2026, 12, 8, 11))

    with pytest.raises(ValidationFailed) as caught:
        appointment_reschedule(
            company=company,
            reference=mine.reference,
            contact=ana,
            starts_at=local(2026, 12, 8, 11),
            now=MONDAY_8AM,
        )

    nearest = caught.value.as_dict()["nearest_free_slots"]
    assert nearest, caught.value.as_dict()
    assert ("2026-12-08", "10:00") not in [(s["date"], s["time"]) for s in nearest]


@pytest.mark.django_db
def test_a_move_search_still_offers_the_same_time_with_another_professional(
    company, service, marta, luis, ana
):
    mine = book_with(company, service, marta, ana, local(2026, 12, 8, 10))

    found = slots_available(
        company=company,
        service=service,
        starts_at=local(2026, 12, 8, 10),
        ends_at=local(2026, 12, 8, 10, 1),
        now=MONDAY_8AM,
        move=Move.of(mine),
    )

    assert [(s.professional.display_name, s.starts_at) for s in found] == [
        ("Luis", local(2026, 12, 8, 10))
    ]


# --- A search past the booking horizon says why it is empty -------------------------------------


@pytest.mark.django_db
def test_a_search_past_the_horizon_names_the_last_bookable_date(gateway):
    # Sixty days from Monday 7 December 2026, 08:00: Friday 5 February 2027, 08:00.
    found = call(
        gateway, "find_available_slots", {"service": "Corte de pelo", "from": "2027-02-06"}
    )

    assert found.is_error is True
    assert found.body["error_type"] == "VALIDATION"
    assert found.body["code"] == "slot_beyond_horizon"
    assert "60 días" in found.body["user_message"]
    assert "viernes 05/02/2027 a las 08:00" in found.body["user_message"]
    assert found.body["last_bookable"] == {
        "date": "2027-02-05",
        "weekday": "viernes",
        "time": "08:00",
    }


@pytest.mark.django_db
def test_a_search_that_starts_inside_the_horizon_still_lists_what_it_can(gateway):
    found = call(
        gateway,
        "find_available_slots",
        {"service": "Corte de pelo", "from": "2027-02-04", "to": "2027-02-20"},
    )

    assert found.is_error is False, found.body
    # Thursday 4 February only: the horizon ends the next morning, before Marta starts.
    assert {s["date"] for s in found.body["items"]} == {"2027-02-04"}


@pytest.mark.django_db
def test_staff_may_book_inside_the_notice_but_not_past_the_horizon(
    company, service, marta, ana, agenda_settings
):
    """The horizon is how far the agenda is open, for the desk as for the chat; the notice is
    the customers' alone (a customer at the desk is booked for now)."""
    with pytest.raises(ValidationFailed) as caught:
        book_with(company, service, marta, ana, local(2027, 3, 2, 10), enforce_customer_rules=False)

    assert caught.value.code == "slot_beyond_horizon"
    assert str(caught.value.user_message) == (
        "Solo se puede reservar con hasta 60 días de antelación."
    )
    assert not Appointment.objects.exists()


# --- Working hours until 24:00 ------------------------------------------------------------------


@pytest.fixture
def noa(company, service):
    """Works Tuesday evenings, 20:00 until midnight (24:00, stored as 00:00)."""
    return professional_create(
        company=company,
        display_name="Noa",
        services=[service],
        weekly_hours=[(1, time(20), time(0))],
    )


@pytest.mark.django_db
def test_working_hours_until_midnight_offer_the_days_last_slot(company, service, noa):
    found = slots_available(
        company=company,
        service=service,
        starts_at=local(2026, 12, 8),
        ends_at=local(2026, 12, 10),
        now=MONDAY_8AM,
        professional=noa,
    )

    starts = [s.starts_at for s in found]
    assert starts[0] == local(2026, 12, 8, 20)
    assert starts[-1] == local(2026, 12, 8, 23, 30)  # ends at 24:00
    assert len(starts) == 8  # nothing on Wednesday: the interval is Tuesday's


@pytest.mark.django_db
def test_a_booking_ending_at_midnight_is_accepted(company, service, noa, ana):
    appointment = book_with(company, service, noa, ana, local(2026, 12, 8, 23, 30))

    assert appointment.ends_at == local(2026, 12, 9)
    assert str(noa.working_hours.get()).endswith(" 20:00-24:00")


@pytest.mark.django_db
def test_working_hours_ending_before_they_start_are_still_refused(noa):
    with pytest.raises(IntegrityError), transaction.atomic():
        WorkingHours.objects.create(
            professional=noa, weekday=2, start_time=time(9), end_time=time(8)
        )


@pytest.fixture
def staff_client(client, company, monkeypatch):
    monkeypatch.setattr(clock, "now", lambda: MONDAY_8AM)
    user = get_user_model().objects.create_user(username="recepcion", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="agenda"))
    StaffMembership.objects.create(user=user, company=company)
    client.force_login(user)
    return client


def _post_hours(staff_client, professional, start: str, end: str):
    url = reverse("admin:agenda_professional_change", args=[professional.pk])
    data = form_data(staff_client.get(url))
    total = int(data["working_hours-TOTAL_FORMS"])
    data.update(
        {
            "working_hours-TOTAL_FORMS": str(total + 1),
            f"working_hours-{total}-weekday": "3",
            f"working_hours-{total}-start_time": start,
            f"working_hours-{total}-end_time": end,
        }
    )
    return staff_client.post(url, data)


@pytest.mark.django_db
def test_staff_can_type_24_00_as_the_end_of_working_hours(staff_client, noa):
    response = _post_hours(staff_client, noa, "18:00", "24:00")

    assert response.status_code == 302, response.context and response.context["errors"]
    assert noa.working_hours.filter(weekday=3, start_time=time(18), end_time=time(0)).exists()
    page = staff_client.get(reverse("admin:agenda_professional_change", args=[noa.pk]))
    assert 'value="24:00"' in page.content.decode()


@pytest.mark.django_db
def test_staff_still_cannot_end_working_hours_before_they_start(staff_client, noa):
    response = _post_hours(staff_client, noa, "18:00", "17:00")

    assert response.status_code == 200  # the form again, with its error
    [hours] = [
        inline.formset
        for inline in response.context["inline_admin_formsets"]
        if inline.formset.model is WorkingHours
    ]
    assert [form.non_field_errors() for form in hours.forms if form.errors]  # the constraint's
    assert not noa.working_hours.filter(weekday=3).exists()


@pytest.mark.django_db
def test_the_day_view_shows_hours_until_24_00(staff_client, noa):
    url = reverse("admin:agenda_professional_day", args=[noa.pk])

    response = staff_client.get(url, {"date": "2026-12-08"})

    assert response.status_code == 200
    assert response.context["intervals"] == ["20:00-24:00"]
