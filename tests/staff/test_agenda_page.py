"""The agenda page: free slots from the tools' own search, a free slot opening the booking form
prefilled, and the booking refused in the form when the slot went meanwhile."""

from datetime import timedelta
from urllib.parse import parse_qs, urlparse

import pytest
from django.urls import reverse

from agenda.availability.search import slots_available
from agenda.models import Appointment
from agenda.services import appointment_book
from core.services import contact_create

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
