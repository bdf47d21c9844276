"""The agenda tools over real HTTP (the REST mirror of a live server), with a fixed clock."""

import uuid
from datetime import time

import pytest
from django.contrib.contenttypes.models import ContentType
from django_fsm_log.models import StateLog

from agenda.models import Appointment, Service, TimeOff
from agenda.services import appointment_book, professional_create
from tests.factories import ANA_DOCUMENT, BRUNO_DOCUMENT, MONDAY_8AM, WEEKDAYS, local
from tooling.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

APPOINTMENT_KEYS = {
    "appointment",
    "service",
    "professional",
    "date",
    "weekday",
    "time",
    "state",
    "state_label",
}


def key() -> str:
    return uuid.uuid4().hex


def find(client, **arguments):
    arguments = {"service": "Corte de pelo", "from": "2026-12-08", "to": "2026-12-08"} | arguments
    response = client.call("find_available_slots", arguments)
    assert response.status_code == 200, response.text
    return response.json()


def book(client, slot, *, identifier=ANA_DOCUMENT, conversation_id=None, idempotency_key=None):
    return client.call(
        "book_appointment",
        {"identifier": identifier, "service": "Corte de pelo", "slot": slot},
        key=idempotency_key or key(),
        conversation_id=conversation_id,
    )


def cancel(client, appointment, *, identifier=ANA_DOCUMENT, idempotency_key=None):
    return client.call(
        "cancel_appointment",
        {"identifier": identifier, "appointment": appointment},
        key=idempotency_key or key(),
    )


def test_it_lists_free_slots_with_local_date_weekday_and_a_reference(
    tool_client, marta, frozen_clock
):
    body = find(tool_client, limit=3)

    assert body["count"] == 3 and body["has_more"] is True
    assert body["service"] == "Corte de pelo"
    first = body["items"][0]
    assert set(first) == {"slot", "date", "weekday", "time", "professional"}
    assert first["slot"].startswith("SL-")
    assert (first["date"], first["weekday"], first["time"]) == ("2026-12-08", "martes", "09:00")
    assert first["professional"] == "Marta"


def test_a_search_without_free_slots_is_a_success_with_an_empty_list(
    tool_client, marta, frozen_clock
):
    body = find(tool_client, **{"from": "2026-12-12", "to": "2026-12-13"})  # a weekend

    assert body["items"] == [] and body["count"] == 0


@pytest.mark.parametrize(
    ("first", "last"),
    [
        ("9999-12-31", None),
        ("hoy", "9999-12-31"),
        ("9999-12-20", "9999-12-31"),
    ],
)
def test_a_date_at_the_calendars_edge_is_a_validation_error_not_an_outage(
    tool_client, marta, frozen_clock, first, last
):
    arguments = {"service": "Corte de pelo", "from": first} | ({"to": last} if last else {})
    response = tool_client.call("find_available_slots", arguments)

    assert response.status_code == 422, response.text
    assert response.json()["code"] == "invalid_date"


def test_a_range_longer_than_a_search_says_how_far_it_searched_and_that_more_may_exist(
    tool_client, marta, frozen_clock
):
    """Marta is away until 7 January: a search from 7 December to the end of February covers
    31 days and finds nothing, which must not read as "nothing is free"."""
    TimeOff.objects.create(
        professional=marta, starts_at=local(2026, 12, 7), ends_at=local(2027, 1, 7)
    )

    body = find(tool_client, **{"from": "2026-12-07", "to": "2027-02-28"})

    assert body["items"] == [] and body["has_more"] is True
    assert body["searched_until"] == "2027-01-06"
    after = find(tool_client, **{"from": "2027-01-07", "to": "2027-02-28"}, limit=2)
    assert after["items"][0]["date"] == "2027-01-07" and "searched_until" in after
    within = find(tool_client, **{"from": "2027-01-07", "to": "2027-01-08"})
    assert "searched_until" not in within


def test_an_unknown_service_is_not_found(tool_client, marta, frozen_clock):
    response = tool_client.call("find_available_slots", {"service": "Manicura", "from": "hoy"})

    assert response.status_code == 404
    assert response.json()["error_type"] == "NOT_FOUND"


def test_a_date_it_cannot_read_is_a_validation_error(tool_client, marta, frozen_clock):
    response = tool_client.call(
        "find_available_slots", {"service": "corte de pelo", "from": "el martes que viene"}
    )

    assert response.status_code == 422
    assert response.json()["code"] == "invalid_date"


def test_it_books_a_slot_the_conversation_saw(ana_client, marta, frozen_clock):
    slot = find(ana_client)["items"][1]

    response = book(ana_client, slot["slot"])

    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == APPOINTMENT_KEYS | {"already_done"}
    assert body["already_done"] is False  # a new appointment (docs/tools.md, above the key)
    assert body["appointment"].startswith("AP-")
    assert (body["date"], body["time"], body["weekday"]) == ("2026-12-08", "09:30", "martes")
    assert (body["service"], body["professional"], body["state"], body["state_label"]) == (
        "Corte de pelo",
        "Marta",
        "scheduled",
        "agendada",
    )
    appointment = Appointment.objects.get(reference=body["appointment"])
    assert appointment.created_via == Appointment.Via.GATEWAY
    assert appointment.conversation.external_id == ana_client.conversation_id


def test_it_books_by_the_date_and_time_it_showed(ana_client, marta, frozen_clock):
    find(ana_client)

    response = book(ana_client, "2026-12-08 10:00")

    assert response.status_code == 200, response.text
    assert response.json()["time"] == "10:00"


def test_a_slot_the_conversation_never_saw_is_rejected(
    ana_client, marta, frozen_clock, tool_client
):
    other_conversation = f"conv-{uuid.uuid4().hex[:8]}"
    seen_elsewhere = tool_client.call(
        "find_available_slots",
        {"service": "Corte de pelo", "from": "2026-12-08"},
        conversation_id=other_conversation,
    ).json()["items"][0]["slot"]

    response = book(ana_client, seen_elsewhere)

    assert response.status_code == 422
    assert response.json()["error_type"] == "VALIDATION"
    assert response.json()["code"] == "reference_not_seen"
    assert not Appointment.objects.exists()


def test_a_busy_slot_is_rejected_with_the_nearest_free_times(
    ana_client, marta, frozen_clock, company, bruno, service
):
    slot = find(ana_client)["items"][2]  # 10:00
    appointment_book(
        company=company,
        contact=bruno,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 8, 10),
        created_via="staff",
        now=MONDAY_8AM,
    )

    response = book(ana_client, slot["slot"])

    assert response.status_code == 422
    body = response.json()
    assert (body["error_type"], body["code"]) == ("VALIDATION", "slot_taken")
    assert [s["time"] for s in body["nearest_free_slots"]] == ["09:00", "11:00", "11:30"]
    assert "Bruno" not in response.text  # nothing about who holds it
    assert Appointment.objects.count() == 1


def test_a_slot_of_today_that_has_passed_is_rejected(ana_client, marta, frozen_clock):
    slot = find(ana_client, **{"from": "hoy", "to": "hoy"})["items"][0]
    assert slot["time"] == "09:00"
    frozen_clock["now"] = local(2026, 12, 7, 11)

    response = book(ana_client, slot["slot"])

    assert response.status_code == 422
    assert response.json()["code"] == "slot_in_past"


def test_cancelling_twice_with_the_same_key_has_one_effect_and_the_same_answer(
    ana_client, marta, frozen_clock
):
    booked = book(ana_client, find(ana_client)["items"][0]["slot"]).json()
    same_key = key()

    first = cancel(ana_client, booked["appointment"], idempotency_key=same_key)
    second = cancel(ana_client, booked["appointment"], idempotency_key=same_key)

    assert first.status_code == second.status_code == 200
    assert first.text == second.text
    assert (first.json()["state"], first.json()["state_label"]) == ("cancelled", "cancelada")
    assert second.headers.get("X-Idempotency-Replayed") == "true"
    appointment = Appointment.objects.get(reference=booked["appointment"])
    cancellations = StateLog.objects.filter(
        content_type=ContentType.objects.get_for_model(Appointment),
        object_id=appointment.pk,
        transition="cancel",
    )
    assert cancellations.count() == 1


def test_cancelling_a_cancelled_appointment_is_a_validation_error_with_its_state(
    ana_client, marta, frozen_clock
):
    booked = book(ana_client, find(ana_client)["items"][0]["slot"]).json()
    assert cancel(ana_client, booked["appointment"]).status_code == 200

    response = cancel(ana_client, booked["appointment"])

    assert response.status_code == 422
    assert response.json() == {
        "error_type": "VALIDATION",
        "user_message": "Esa cita ya está cancelada.",
        "code": "invalid_transition",
        "state": "cancelled",
        "state_label": "cancelada",
    }


def test_another_customers_appointment_is_a_permission_error(
    ana_client, marta, frozen_clock, company, bruno, service
):
    theirs = appointment_book(
        company=company,
        contact=bruno,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 9, 10),
        created_via="staff",
        now=MONDAY_8AM,
    )

    response = cancel(ana_client, theirs.reference)

    assert response.status_code == 403
    assert response.json()["error_type"] == "PERMISSION"
    theirs.refresh_from_db()
    assert theirs.state == Appointment.State.SCHEDULED


def test_an_identifier_that_is_not_the_conversations_customer_is_a_permission_error(
    ana_client, marta, frozen_clock, bruno
):
    booked = book(ana_client, find(ana_client)["items"][0]["slot"]).json()

    response = cancel(ana_client, booked["appointment"], identifier=BRUNO_DOCUMENT)

    assert response.status_code == 403
    assert response.json()["error_type"] == "PERMISSION"


def test_a_customer_cannot_cancel_inside_the_cut_off(ana_client, marta, frozen_clock):
    booked = book(ana_client, find(ana_client)["items"][0]["slot"]).json()  # Tuesday 09:00
    frozen_clock["now"] = local(2026, 12, 8, 7, 30)

    response = cancel(ana_client, booked["appointment"])

    assert response.status_code == 422
    assert response.json()["code"] == "cutoff_passed"


def test_it_lists_only_the_customers_own_appointments(
    ana_client, marta, frozen_clock, company, bruno, service
):
    mine = book(ana_client, find(ana_client)["items"][0]["slot"]).json()
    appointment_book(
        company=company,
        contact=bruno,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 9, 10),
        created_via="staff",
        now=MONDAY_8AM,
    )

    body = ana_client.call("list_my_appointments", {"identifier": ANA_DOCUMENT}).json()

    mine.pop("already_done")  # the booking's answer only
    assert body["items"] == [mine]
    assert "Bruno" not in str(body)


def test_it_filters_appointments_by_state_value_or_spanish_label(ana_client, marta, frozen_clock):
    slots = find(ana_client)["items"]
    kept = book(ana_client, slots[0]["slot"]).json()
    dropped = book(ana_client, slots[4]["slot"]).json()
    cancel(ana_client, dropped["appointment"])

    def listed(state: str) -> list[str]:
        response = ana_client.call(
            "list_my_appointments", {"identifier": ANA_DOCUMENT, "state": state}
        )
        assert response.status_code == 200, response.text
        return [a["appointment"] for a in response.json()["items"]]

    assert listed("cancelled") == listed("Cancelada") == [dropped["appointment"]]
    assert listed("scheduled") == listed("agendada") == [kept["appointment"]]
    assert listed("no_show") == listed("No asistida") == []


def test_an_unknown_state_filter_is_refused_naming_the_allowed_states(ana_client, frozen_clock):
    response = ana_client.call(
        "list_my_appointments", {"identifier": ANA_DOCUMENT, "state": "perdida"}
    )
    old_name = ana_client.call(
        "list_my_appointments", {"identifier": ANA_DOCUMENT, "status": "agendada"}
    )

    assert response.status_code == old_name.status_code == 422
    assert response.json()["code"] == "invalid_arguments"
    problem = response.json()["problems"][0]
    assert problem["field"].split(".")[-1] == "state"
    assert all(value in problem["message"] for value in ("scheduled", "cancelled", "no_show"))


def test_the_state_filter_lists_the_machine_values_in_the_tool_schema():
    schema = registry.get("list_my_appointments").input_schema["properties"]["state"]

    assert schema["anyOf"][0]["enum"] == ["scheduled", "cancelled", "attended", "no_show"]


def test_an_appointment_listed_in_this_conversation_can_be_cancelled_by_its_suffix(
    ana_client, marta, frozen_clock, company, ana, service
):
    booked_by_staff = appointment_book(
        company=company,
        contact=ana,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 9, 10),
        created_via="staff",
        now=MONDAY_8AM,
    )
    assert cancel(ana_client, booked_by_staff.reference).json()["code"] == "reference_not_seen"
    ana_client.call("list_my_appointments", {"identifier": ANA_DOCUMENT})

    response = cancel(ana_client, booked_by_staff.reference[-4:])

    assert response.status_code == 200, response.text
    assert response.json()["state"] == "cancelled"


def test_it_reschedules_to_a_seen_slot_and_frees_the_old_one(ana_client, marta, frozen_clock):
    slots = find(ana_client)["items"]
    booked = book(ana_client, slots[0]["slot"]).json()

    response = ana_client.call(
        "reschedule_appointment",
        {
            "identifier": ANA_DOCUMENT,
            "appointment": booked["appointment"],
            "slot": slots[3]["slot"],
        },
        key=key(),
    )

    assert response.status_code == 200, response.text
    moved = response.json()
    assert (moved["appointment"], moved["time"], moved["state"]) == (
        booked["appointment"],
        "10:30",
        "scheduled",
    )
    assert find(ana_client)["items"][0]["time"] == "09:00"


def test_the_same_time_with_two_professionals_is_ambiguous(
    ana_client, marta, frozen_clock, company, service
):
    professional_create(
        company=company,
        display_name="Luis",
        services=[service],
        weekly_hours=[(d, time(9), time(13)) for d in WEEKDAYS],
    )
    find(ana_client)

    response = book(ana_client, "2026-12-08 09:00")

    assert response.status_code == 409
    body = response.json()
    assert body["error_type"] == "AMBIGUOUS"
    assert len(body["candidates"]) == 2


def test_the_largest_slot_listing_fits_the_answer_cap_whole(tool_client, marta, frozen_clock):
    response = tool_client.call(
        "find_available_slots",
        {"service": "Corte de pelo", "from": "2026-12-09", "to": "2026-12-11", "limit": 20},
    )

    body = response.json()
    assert body["count"] == 20 and "truncated" not in body
    assert len(response.content.decode()) <= 3000


def test_a_month_long_search_across_the_spring_change_says_only_what_it_searched(
    tool_client, marta, frozen_clock
):
    """Madrid's clocks go forward on 28 March 2027. Marta is back on Monday 5 April: the
    answer must not claim 5 April was searched, or the agent's next search skips it."""
    frozen_clock["now"] = local(2027, 3, 1, 8)
    TimeOff.objects.create(
        professional=marta, starts_at=local(2027, 3, 5), ends_at=local(2027, 4, 5)
    )

    body = find(tool_client, **{"from": "2027-03-05", "to": "2027-04-30"})

    assert body["items"] == [] and body["has_more"] is True
    assert body["searched_until"] == "2027-04-04"
    following = find(tool_client, **{"from": "2027-04-05", "to": "2027-04-30"}, limit=1)
    assert (following["items"][0]["date"], following["items"][0]["time"]) == (
        "2027-04-05",
        "09:00",
    )


def test_scheduled_appointments_list_the_upcoming_soonest_first_then_those_never_closed(
    ana_client, marta, frozen_clock, company, service, ana
):
    """Staff never marked last month's visits attended (automatic no-show is off): "my next
    appointment" must still be the next one, and paging goes on to the overdue ones, most
    recent first."""

    def booked(starts_at, now):
        return appointment_book(
            company=company,
            contact=ana,
            service=service,
            professional=marta,
            starts_at=starts_at,
            created_via="gateway",
            now=now,
        ).reference

    older = booked(local(2026, 11, 9, 10), local(2026, 11, 2, 8))
    recent = booked(local(2026, 11, 16, 10), local(2026, 11, 2, 8))
    later = booked(local(2026, 12, 9, 10), MONDAY_8AM)
    next_one = booked(local(2026, 12, 8, 10), MONDAY_8AM)

    def listed(**arguments):
        arguments = {"identifier": ANA_DOCUMENT, "state": "scheduled", "limit": 2} | arguments
        response = ana_client.call("list_my_appointments", arguments)
        assert response.status_code == 200, response.text
        return response.json()

    first = listed()
    second = listed(cursor=first["next_cursor"])

    assert [a["appointment"] for a in first["items"]] == [next_one, later]
    assert [a["appointment"] for a in second["items"]] == [recent, older]
    assert second["has_more"] is False


@pytest.fixture
def ana_booked(ana_client, company, service, marta, ana):
    """Ana's appointment on Tuesday 8 December at 10:00 with Marta, which her conversation
    has seen."""
    appointment = appointment_book(
        company=company,
        contact=ana,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 8, 10),
        created_via="gateway",
        now=MONDAY_8AM,
    )
    assert ana_client.call("list_my_appointments", {"identifier": ANA_DOCUMENT}).status_code == 200
    return appointment


def test_a_customer_moves_an_appointment_half_an_hour_later_through_a_search_for_it(
    ana_client, frozen_clock, ana_booked
):
    """10:00 -> 10:30 overlaps the appointment's own time: a plain search counts it busy, a
    search naming the appointment offers 10:30, and reschedule takes that slot."""
    plain = [s["time"] for s in find(ana_client, limit=20)["items"]]
    for_the_move = find(ana_client, appointment=ana_booked.reference, limit=20)
    assert "10:30" not in plain
    [slot] = [s["slot"] for s in for_the_move["items"] if s["time"] == "10:30"]

    response = ana_client.call(
        "reschedule_appointment",
        {"identifier": ANA_DOCUMENT, "appointment": ana_booked.reference, "slot": slot},
        key=key(),
    )

    assert response.status_code == 200, response.text
    assert (response.json()["appointment"], response.json()["time"]) == (
        ana_booked.reference,
        "10:30",
    )


def test_a_search_for_a_move_refuses_another_customers_appointment(
    ana_client, frozen_clock, ana_booked, company, service, marta, bruno
):
    theirs = appointment_book(
        company=company,
        contact=bruno,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 8, 11),
        created_via="staff",
        now=MONDAY_8AM,
    )

    response = ana_client.call(
        "find_available_slots",
        {"service": "Corte de pelo", "from": "2026-12-08", "appointment": theirs.reference},
    )

    assert response.status_code == 403, response.text
    assert response.json()["error_type"] == "PERMISSION"
    assert "11:00" not in response.text


def test_a_search_for_a_move_needs_the_appointment_seen_and_the_customer_identified(
    tool_client, make_identified, ana, frozen_clock, ana_booked
):
    stranger = tool_client.call(
        "find_available_slots",
        {"service": "Corte de pelo", "from": "2026-12-08", "appointment": ana_booked.reference},
        conversation_id="conv-anonymous",
    )
    make_identified(ana, "conv-unseen")
    unseen = tool_client.call(
        "find_available_slots",
        {"service": "Corte de pelo", "from": "2026-12-08", "appointment": "AP-ZZZZZZ"},
        conversation_id="conv-unseen",
    )

    assert stranger.status_code == 403
    assert stranger.json()["code"] == "identification_required"
    assert unseen.status_code == 422
    assert unseen.json()["code"] == "reference_not_seen"


def test_a_search_for_a_move_is_for_the_appointments_own_service(
    ana_client, frozen_clock, ana_booked, company
):
    Service.objects.create(company=company, name="Tinte", duration_minutes=90)

    response = ana_client.call(
        "find_available_slots",
        {"service": "Tinte", "from": "2026-12-08", "appointment": ana_booked.reference},
    )

    assert response.status_code == 422, response.text
    assert response.json()["code"] == "service_mismatch"


def test_an_appointment_of_a_withdrawn_service_can_still_be_moved_through_the_agent(
    ana_client, frozen_clock, ana_booked, service
):
    service.active = False
    service.save()

    assert (
        ana_client.call(
            "find_available_slots", {"service": "Corte de pelo", "from": "2026-12-09"}
        ).json()["error_type"]
        == "NOT_FOUND"
    )
    slots = find(
        ana_client,
        **{"from": "2026-12-09", "to": "2026-12-09"},
        appointment=ana_booked.reference[-4:],
    )["items"]
    response = ana_client.call(
        "reschedule_appointment",
        {"identifier": ANA_DOCUMENT, "appointment": ana_booked.reference, "slot": slots[0]["slot"]},
        key=key(),
    )

    assert response.status_code == 200, response.text
    assert (response.json()["date"], response.json()["time"]) == ("2026-12-09", "09:00")
