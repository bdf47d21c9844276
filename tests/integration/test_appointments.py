"""Appointments over the integration API: slots, booking, listing, and every transition
through the agenda services (same availability and state guards as the tools)."""

import pytest

from agenda.models import Appointment, TimeOff
from agenda.services import appointment_book, appointment_cancel
from tests.factories import local
from tests.integration.conftest import reference_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def booked(company, ana, service, marta, frozen_clock):
    """Ana's appointment on Tuesday 8 December 2026 at 10:00 (booked by the agent)."""
    return appointment_book(
        company=company,
        contact=ana,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 8, 10),
        created_via=Appointment.Via.GATEWAY,
    )


def book(api, ana, service, marta, starts_at: str, **extra):
    body = {
        "contact": reference_of(ana),
        "service": reference_of(service),
        "professional": reference_of(marta),
        "starts_at": starts_at,
    }
    return api.post("appointments", body | extra)


def test_it_lists_free_slots_of_a_service_in_local_time(api, service, marta, frozen_clock):
    response = api.get(
        "slots",
        service=reference_of(service),
        date_from="2026-12-08",
        date_to="2026-12-08",
        limit=5,
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["service"] == reference_of(service)
    first = body["results"][0]
    assert first["starts_at"] == "2026-12-08T09:00:00+01:00"
    assert (first["date"], first["time"], first["weekday"]) == ("2026-12-08", "09:00", "martes")
    assert first["professional"] == reference_of(marta)
    assert first["professional_name"] == "Marta"
    assert len(body["results"]) == 5
    assert body["has_more"] is True  # 16 free slots that day


def test_a_range_longer_than_a_search_says_more_may_exist(api, service, marta, frozen_clock):
    TimeOff.objects.create(
        professional=marta, starts_at=local(2026, 12, 7), ends_at=local(2027, 1, 7)
    )

    response = api.get(
        "slots", service=reference_of(service), date_from="2026-12-07", date_to="2027-02-28"
    )

    assert response.status_code == 200, response.content
    assert response.json()["results"] == []
    assert response.json()["has_more"] is True  # 31 days searched; Marta is back on 7 January


def test_it_books_a_free_slot_and_answers_201_with_the_appointment(
    api, ana, service, marta, frozen_clock
):
    response = book(api, ana, service, marta, "2026-12-08T10:00:00")

    assert response.status_code == 201, response.content
    body = response.json()
    appointment = Appointment.objects.get(reference=body["reference"])
    assert appointment.created_via == Appointment.Via.INTEGRATION
    assert body["state"] == "scheduled"
    assert body["starts_at"] == "2026-12-08T10:00:00+01:00"  # naive input is local time
    assert body["contact"] == reference_of(ana)
    assert "id" not in body and "pk" not in body


def test_a_busy_slot_is_refused_with_the_nearest_free_ones(
    api, ana, service, marta, booked, frozen_clock
):
    response = book(api, ana, service, marta, "2026-12-08T10:00:00+01:00")

    assert response.status_code == 422
    body = response.json()
    assert (body["error_type"], body["code"]) == ("VALIDATION", "slot_taken")
    assert body["nearest_free_slots"]
    assert Appointment.objects.count() == 1


def test_a_past_slot_is_refused(api, ana, service, marta, frozen_clock):
    response = book(api, ana, service, marta, "2026-12-07T07:00:00")

    assert response.status_code == 422
    assert response.json()["code"] == "slot_in_past"


def test_it_lists_appointments_filtered_by_state_and_local_day(
    api, company, ana, service, marta, booked, frozen_clock
):
    later = appointment_book(
        company=company,
        contact=ana,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 9, 16),
        created_via=Appointment.Via.STAFF,
    )
    appointment_cancel(company=company, reference=later.reference, enforce_cutoff=False)

    everything = api.get("appointments").json()
    scheduled = api.get("appointments", state="scheduled").json()
    on_the_9th = api.get("appointments", date_from="2026-12-09", date_to="2026-12-09").json()
    newest_first = api.get("appointments", ordering="-starts_at").json()

    assert [a["reference"] for a in everything["results"]] == [booked.reference, later.reference]
    assert everything["count"] == 2
    assert [a["reference"] for a in scheduled["results"]] == [booked.reference]
    assert [a["reference"] for a in on_the_9th["results"]] == [later.reference]
    assert [a["reference"] for a in newest_first["results"]] == [later.reference, booked.reference]


def test_an_unknown_state_filter_is_a_validation_error_naming_the_parameter(api):
    response = api.get("appointments", state="lost")

    assert response.status_code == 422
    assert response.json()["problems"][0]["field"] == "state"


def test_it_retrieves_an_appointment_by_its_reference(api, booked):
    response = api.get(f"appointments/{booked.reference.lower()}")

    assert response.status_code == 200
    assert response.json()["reference"] == booked.reference


def test_it_cancels_and_a_second_cancel_is_refused_with_the_state(api, booked):
    cancelled = api.post(f"appointments/{booked.reference}/cancel")
    again = api.post(f"appointments/{booked.reference}/cancel")

    assert cancelled.status_code == 200, cancelled.content
    assert (cancelled.json()["state"], cancelled.json()["state_label"]) == (
        "cancelled",
        "cancelada",
    )
    assert again.status_code == 422
    assert again.json() | {"user_message": ""} == {
        "error_type": "VALIDATION",
        "user_message": "",
        "code": "invalid_transition",
        "state": "cancelled",
        "state_label": "cancelada",
    }
    assert again.json()["user_message"] == "Esa cita ya está cancelada."


def test_cancelling_inside_the_cut_off_is_refused_as_for_customers(api, booked, frozen_clock):
    frozen_clock["now"] = local(2026, 12, 8, 9)  # one hour before; the cut-off is two

    response = api.post(f"appointments/{booked.reference}/cancel")

    assert response.status_code == 422
    assert response.json()["code"] == "cutoff_passed"


def test_it_reschedules_to_another_free_time(api, booked):
    response = api.post(
        f"appointments/{booked.reference}/reschedule", {"starts_at": "2026-12-08T16:30:00"}
    )

    assert response.status_code == 200, response.content
    assert response.json()["starts_at"] == "2026-12-08T16:30:00+01:00"
    booked.refresh_from_db()
    assert booked.starts_at == local(2026, 12, 8, 16, 30)


def test_attendance_is_recorded_only_once_the_appointment_has_started(api, booked, frozen_clock):
    too_early = api.post(f"appointments/{booked.reference}/mark-attended")
    frozen_clock["now"] = local(2026, 12, 8, 10, 5)
    attended = api.post(f"appointments/{booked.reference}/mark-attended")
    no_show = api.post(f"appointments/{booked.reference}/mark-no-show")

    assert too_early.status_code == 422
    assert too_early.json()["code"] == "appointment_not_started"
    assert attended.status_code == 200
    assert attended.json()["state"] == "attended"
    assert no_show.status_code == 422
    assert (no_show.json()["state"], no_show.json()["state_label"]) == ("attended", "atendida")


def test_unknown_fields_in_a_body_are_refused(api, ana, service, marta, frozen_clock):
    response = book(api, ana, service, marta, "2026-12-08T10:00:00", price="0")

    assert response.status_code == 422
    assert response.json()["problems"] == [{"field": "price", "message": "Este campo no existe."}]
    assert not Appointment.objects.exists()
