"""The agenda page: free slots from the tools' own search, a free slot opening the booking form
prefilled, and the booking refused in the form when the slot went meanwhile; moving an
appointment from it the same way, through its reschedule."""

from datetime import timedelta
from urllib.parse import parse_qs, urlparse

import pytest
from django.urls import reverse
from django.utils.html import escape
from django_fsm_log.models import StateLog

from agenda.availability.search import slots_available
from agenda.models import Appointment
from agenda.services import appointment_book, appointment_cancel
from core.services import contact_create
from tests.staff.conftest import local_clock

pytestmark = pytest.mark.django_db(transaction=True)


def agenda(client, **query):
    return client.get(reverse("admin:agenda_company_day"), query)


def free_slots(page) -> list[dict]:
    return [slot for column in page.context["grid"] for slot in column["free"]]


def test_the_agenda_shows_the_free_slots_the_tools_would_offer(client, sol_day, agent):
    client.force_login(agent)
    company = sol_day.company

    page = agenda(client)

    day = page.context["day"]
    start = sol_day.appointment.starts_at.astimezone(company.tz).replace(hour=0, minute=0)
    searched = slots_available(
        company=company,
        service=sol_day.service,
        starts_at=start,
        ends_at=start + timedelta(days=1),
        now=sol_day.appointment.created_at,
        professional=sol_day.professional,
    )
    shown = [slot["time"] for slot in free_slots(page)]
    assert day == start.date()
    assert shown  # a working day with room
    assert set(shown) <= {s.starts_at.astimezone(company.tz).strftime("%H:%M") for s in searched}
    booked = sol_day.appointment.starts_at.astimezone(company.tz).strftime("%H:%M")
    assert booked not in shown
    assert sol_day.appointment.reference in page.content.decode()


def test_a_free_slot_opens_the_booking_form_prefilled_and_books_it(client, sol_day, agent):
    client.force_login(agent)
    slot = free_slots(agenda(client))[-1]

    form_page = client.get(slot["url"])
    initial = form_page.context["adminform"].form.initial
    query = {k: v[0] for k, v in parse_qs(urlparse(slot["url"]).query).items()}
    booked = client.post(
        reverse("admin:agenda_appointment_add"), {**query, "contact": sol_day.contact.pk}
    )

    assert initial["at"] == slot["time"]
    assert initial["professional"] == str(sol_day.professional.pk)
    assert booked.status_code == 302
    new = Appointment.objects.exclude(pk=sol_day.appointment.pk).get()
    assert new.starts_at.astimezone(sol_day.company.tz).strftime("%H:%M") == slot["time"]
    assert slot["time"] not in [s["time"] for s in free_slots(agenda(client))]


def test_a_slot_taken_a_moment_ago_is_refused_in_the_form_and_nothing_is_booked(
    client, sol_day, agent
):
    client.force_login(agent)
    slot = free_slots(agenda(client))[-1]
    query = {k: v[0] for k, v in parse_qs(urlparse(slot["url"]).query).items()}
    # The agent takes the slot by chat while the receptionist fills the form.
    other = contact_create(company=sol_day.company, first_name="Eva", phone="+34600999888")
    taken = appointment_book(
        company=sol_day.company,
        contact=other,
        service=sol_day.service,
        professional=sol_day.professional,
        starts_at=_instant(sol_day, query),
        created_via=Appointment.Via.GATEWAY,
    )

    response = client.post(
        reverse("admin:agenda_appointment_add"), {**query, "contact": sol_day.contact.pk}
    )

    assert response.status_code == 200
    assert "Esa franja ya está ocupada." in response.content.decode()
    assert set(Appointment.objects.values_list("pk", flat=True)) == {
        sol_day.appointment.pk,
        taken.pk,
    }


def _instant(day, query):
    from datetime import date, time

    from agenda.availability.local_time import local_instant

    hour, minute = map(int, query["at"].split(":"))
    return local_instant(date.fromisoformat(query["day"]), time(hour, minute), day.company.tz)


def test_a_time_outside_the_working_hours_is_refused_in_the_form(client, sol_day, agent):
    sol_day.professional.working_hours.all().delete()  # not working at all
    client.force_login(agent)
    day = sol_day.appointment.starts_at.astimezone(sol_day.company.tz) + timedelta(days=1)

    response = client.post(
        reverse("admin:agenda_appointment_add"),
        {
            "company": sol_day.company.pk,
            "contact": sol_day.contact.pk,
            "service": sol_day.service.pk,
            "professional": sol_day.professional.pk,
            "day": day.date().isoformat(),
            "at": "10:00",
        },
    )

    assert response.status_code == 200
    assert "fuera del horario de atención" in response.content.decode()
    assert Appointment.objects.count() == 1


def test_a_professionals_week_and_another_companys_agenda(client, sol_day, luna_day, agent):
    client.force_login(agent)

    week = client.get(
        reverse("admin:agenda_professional_day", args=[sol_day.professional.pk]), {"view": "week"}
    )
    theirs = client.get(reverse("admin:agenda_professional_day", args=[luna_day.professional.pk]))
    their_company = agenda(client, company=luna_day.company.pk)

    assert len(week.context["grid"]) == 7
    assert theirs.status_code == 404
    assert their_company.context["company"] == sol_day.company  # never the other one
    assert luna_day.professional.display_name not in their_company.content.decode()


def moving_page(client, sol_day):
    """The agenda page, after the receptionist pressed Move on the appointment."""
    page = agenda(client)
    (column,) = page.context["grid"]
    reference = sol_day.appointment.reference
    (entry,) = [a for a in column["appointments"] if a["reference"] == reference]
    assert entry["move_url"] and escape(entry["move_url"]) in page.content.decode()
    return client.get(entry["move_url"])


def test_move_shows_the_slots_the_appointment_can_move_to_each_opening_its_move(
    client, sol_day, agent
):
    client.force_login(agent)
    company = sol_day.company
    appointment = sol_day.appointment

    page = moving_page(client, sol_day)

    assert page.context["moving"]["reference"] == appointment.reference
    assert page.context["service"] == appointment.service
    slots = free_slots(page)
    at = local_clock(appointment.starts_at, company)
    # Its own slot is no move; the half hour after it, which it blocks now, is one.
    assert at not in [s["time"] for s in slots]
    after = local_clock(appointment.starts_at + timedelta(minutes=30), company)
    assert after in [s["time"] for s in slots]
    move = reverse("admin:agenda_appointment_move", args=[appointment.pk])
    assert all(s["url"].startswith(f"{move}?") for s in slots)


def test_a_free_slot_opens_the_move_prefilled_and_moves_it_through_the_service(
    client, sol_day, agent, sms_outbox
):
    client.force_login(agent)
    company = sol_day.company
    slot = free_slots(moving_page(client, sol_day))[-1]
    query = {k: v[0] for k, v in parse_qs(urlparse(slot["url"]).query).items()}

    form_page = client.get(slot["url"])
    form = form_page.context["transition_form"]
    moved = client.post(slot["url"], query)

    assert form["at"].value() == slot["time"]
    assert form["professional"].value() == str(sol_day.professional.pk)
    appointment = Appointment.objects.get(pk=sol_day.appointment.pk)
    assert local_clock(appointment.starts_at, company) == slot["time"]
    assert appointment.state == Appointment.State.SCHEDULED
    assert StateLog.objects.for_(appointment).filter(transition="reschedule").exists()
    # Back on the agenda of its new day, no longer moving.
    assert moved.status_code == 302
    back = client.get(moved["Location"])
    assert back.context["moving"] is None  # the team's calendar, no longer moving
    assert appointment.reference in back.content.decode()


def test_a_slot_taken_while_moving_is_refused_with_its_message_and_nothing_moves(
    client, sol_day, agent
):
    client.force_login(agent)
    slot = free_slots(moving_page(client, sol_day))[-1]
    query = {k: v[0] for k, v in parse_qs(urlparse(slot["url"]).query).items()}
    # The agent books that slot by chat while the receptionist looks at the form.
    other = contact_create(company=sol_day.company, first_name="Eva", phone="+34600999888")
    appointment_book(
        company=sol_day.company,
        contact=other,
        service=sol_day.service,
        professional=sol_day.professional,
        starts_at=_instant(sol_day, query),
        created_via=Appointment.Via.GATEWAY,
    )

    response = client.post(slot["url"], query)

    assert response.status_code == 200  # the form again, with the service's refusal
    assert "Esa franja ya está ocupada." in response.content.decode()
    assert Appointment.objects.get(pk=sol_day.appointment.pk).starts_at == (
        sol_day.appointment.starts_at
    )


def test_a_cancelled_or_another_companys_appointment_is_not_moved(client, sol_day, luna_day, agent):
    client.force_login(agent)
    theirs = reverse("admin:agenda_appointment_move", args=[luna_day.appointment.pk])
    appointment_cancel(
        company=sol_day.company, reference=sol_day.appointment.reference, enforce_cutoff=False
    )
    mine = reverse("admin:agenda_appointment_move", args=[sol_day.appointment.pk])

    their_page = client.get(theirs)
    cancelled = client.post(mine, {"professional": sol_day.professional.pk}, follow=True)
    moving_theirs = agenda(client, move=luna_day.appointment.pk)

    assert their_page.status_code == 302  # "does not exist", as for any other company's row
    assert Appointment.objects.get(pk=luna_day.appointment.pk).state == "scheduled"
    assert f"{sol_day.appointment.reference} está Cancelada: ya no puede cambiar." in [
        str(m) for m in cancelled.context["messages"]
    ]
    assert Appointment.objects.get(pk=sol_day.appointment.pk).state == "cancelled"
    assert "moving" not in moving_theirs.context
    assert moving_theirs.context["company"] == sol_day.company


def test_each_professionals_column_shows_the_free_slots_of_the_services_they_give(
    client, sol_day, agent
):
    """Not the company's first service in alphabetical order for everyone: a professional who
    does not give it still shows their own free slots, as the team's calendar does."""
    from datetime import time

    from agenda.models import Service
    from agenda.services import professional_create

    first_by_name = Service.objects.create(
        company=sol_day.company, name="Alisado", duration_minutes=60
    )
    other = professional_create(
        company=sol_day.company,
        display_name="Marta",
        services=[first_by_name],
        weekly_hours=[(d, time(0), time(23, 59)) for d in range(7)],
    )
    client.force_login(agent)

    page = agenda(client)

    by_professional = {column["professional"].pk: column["free"] for column in page.context["grid"]}
    assert page.context["service"] is None  # each professional's own services
    assert by_professional[sol_day.professional.pk]
    assert {s["service"] for s in by_professional[sol_day.professional.pk]} == {"Consulta"}
    assert {s["service"] for s in by_professional[other.pk]} == {"Alisado"}
    slot = by_professional[sol_day.professional.pk][0]
    assert parse_qs(urlparse(slot["url"]).query)["service"] == [str(sol_day.service.pk)]
    html = page.content.decode()
    assert "No hay huecos libres." not in html
    # Choosing one service still narrows every column to it.
    narrowed = agenda(client, service=first_by_name.pk)
    assert not [
        s
        for column in narrowed.context["grid"]
        if column["professional"].pk == sol_day.professional.pk
        for s in column["free"]
    ]
