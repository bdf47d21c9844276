"""The team's calendar (agenda.admin.calendar, agenda.calendar_page): its menu entry, the day
and week grid with every professional, the filters, booking from a free cell (an existing or
a new customer) through the same service and checks, an appointment's page (move, cancel
through the confirmation page, read-only once past), staff notes, and the slot grid staff
bookings keep unless they override it."""

from datetime import date, time, timedelta

import pytest
from django.urls import reverse

from agenda import calendar_page
from agenda.availability.search import slots_available
from agenda.models import Appointment, Service
from agenda.services import appointment_book, appointment_notes_set, professional_create
from core.errors import ValidationFailed
from core.models import Contact
from tests import factories
from tests.admin_pages import change_url, confirmation_data
from tests.factories import ANA_PHONE, MONDAY_8AM, local

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen_clock")]

CALENDAR = "/admin/agenda/calendar/"


@pytest.fixture
def agent(make_staff, company):
    return make_staff("recepcion", company, "agent")


@pytest.fixture
def agent_client(client, agent):
    client.force_login(agent)
    return client


@pytest.fixture
def tinte(company, agenda_settings) -> Service:
    return factories.service(company, name="Tinte", duration_minutes=60, buffer_after_minutes=0)


@pytest.fixture
def luis(company, service, tinte):
    """Gives both services, Monday to Saturday 10:00-14:00."""
    return professional_create(
        company=company,
        display_name="Luis",
        services=[service, tinte],
        weekly_hours=[(d, time(10), time(14)) for d in range(6)],
    )


@pytest.fixture
def booked(company, service, marta, ana):
    """Ana with Marta, Tuesday 8 December at 10:00."""
    return appointment_book(
        company=company,
        contact=ana,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 8, 10),
        created_via=Appointment.Via.STAFF,
        now=MONDAY_8AM,
        notes="Prefiere lavado en frío",
    )


def grid_of(response) -> calendar_page.Grid:
    assert response.status_code == 200, response.content[:500]
    return response.context["grid"]


def cells(grid, professional, day: date) -> list[str]:
    return [
        cell.time
        for column in grid.columns
        if column.professional == professional and column.day == day
        for cell in column.free
    ]


# The menu entry -----------------------------------------------------------------------------------


def test_the_calendar_is_in_the_menu_for_whoever_sees_appointments(agent_client):
    index = agent_client.get(reverse("admin:index")).content.decode()
    app = agent_client.get(reverse("admin:app_list", args=["agenda"])).content.decode()

    assert f'href="{CALENDAR}"' in index
    assert "Calendario" in app
    assert reverse("admin:agenda_calendar_changelist") == CALENDAR


def test_the_dashboards_see_all_link_opens_the_calendar(agent_client, company):
    from agenda.dashboard import _agenda_url

    assert _agenda_url([company.pk]) == f"{CALENDAR}?company={company.pk}"


def test_staff_without_the_appointments_do_not_get_the_calendar(client, make_staff, company):
    from django.contrib.auth.models import Permission

    user = factories.staff_member(
        "ventas", company, "agent", permissions=Permission.objects.filter(codename="view_quote")
    )
    client.force_login(user)

    assert client.get(CALENDAR).status_code == 403
    assert f'href="{CALENDAR}"' not in client.get(reverse("admin:index")).content.decode()


# Day and week ---------------------------------------------------------------------------------


def test_the_day_shows_every_professional_side_by_side_with_blocks_and_free_time(
    agent_client, company, marta, luis, booked
):
    grid = grid_of(agent_client.get(CALENDAR, {"date": "2026-12-08"}))
    page = agent_client.get(CALENDAR, {"date": "2026-12-08"}).content.decode()

    assert [c.professional.display_name for c in grid.columns] == ["Luis", "Marta"]
    marta_column = next(c for c in grid.columns if c.professional == marta)
    assert [b.appointment.reference for b in marta_column.blocks] == [booked.reference]
    for shown in ("Ana García", ANA_PHONE, "Corte de pelo", "Agendada", "Prefiere lavado en frío"):
        assert shown in page
    # 10:00-10:30 plus 10 minutes of buffer are busy; 30-minute steps (agenda_settings).
    free = cells(grid, marta, date(2026, 12, 8))
    assert "10:00" not in free and "10:30" not in free
    assert {"09:00", "09:30", "11:00", "12:30", "15:00", "18:30"} <= set(free)
    assert "13:00" not in free and "14:30" not in free  # the lunch break is not working time
    assert cells(grid, luis, date(2026, 12, 8))[0] == "10:00"
    assert grid.rows[0] == "09:00" and grid.rows[-1] == "18:30"


def test_time_already_past_is_not_offered(agent_client, marta, frozen_clock):
    frozen_clock["now"] = local(2026, 12, 7, 11, 10)

    grid = grid_of(agent_client.get(CALENDAR, {"date": "2026-12-07"}))

    offered = [cell.time for cell in grid.columns[0].free]
    assert offered[0] == "11:30"
    assert all(cell.url for cell in grid.columns[0].free)
    assert grid.rows[0] == "09:00"  # the day is still drawn from its start


@pytest.mark.parametrize(
    ("asked", "monday"),
    [
        ("2026-12-09", date(2026, 12, 7)),
        ("2026-12-07", date(2026, 12, 7)),
        ("2026-12-13", date(2026, 12, 7)),
        ("2026-12-14", date(2026, 12, 14)),
    ],
)
def test_the_week_runs_monday_to_sunday_whatever_day_is_asked(agent_client, marta, asked, monday):
    grid = grid_of(agent_client.get(CALENDAR, {"date": asked, "view": "week"}))

    assert grid.days == [monday + timedelta(days=n) for n in range(7)]
    assert calendar_page.week_start(date.fromisoformat(asked)) == monday


def test_today_previous_and_next_move_by_a_day_or_a_week(agent_client, marta):
    day = agent_client.get(CALENDAR, {"date": "2026-12-09"})
    week = agent_client.get(CALENDAR, {"date": "2026-12-09", "view": "week"})

    assert "date=2026-12-07" in day.context["today_query"]  # MONDAY_8AM
    assert "date=2026-12-08" in day.context["previous_query"]
    assert "date=2026-12-10" in day.context["next_query"]
    assert "date=2026-12-02" in week.context["previous_query"]
    assert "date=2026-12-16" in week.context["next_query"]
    assert "view=week" in week.context["next_query"]


def test_the_week_shows_each_days_appointments_under_its_day(agent_client, company, marta, booked):
    grid = grid_of(agent_client.get(CALENDAR, {"date": "2026-12-10", "view": "week"}))

    with_blocks = [(c.day, b.appointment.reference) for c in grid.columns for b in c.blocks]
    assert with_blocks == [(date(2026, 12, 8), booked.reference)]
    saturday = next(c for c in grid.columns if c.day == date(2026, 12, 12))
    assert saturday.free == [] and saturday.working == []  # Marta does not work Saturdays


# Filters --------------------------------------------------------------------------------------


def test_all_professionals_and_all_services_by_default_and_filters_narrow_them(
    agent_client, company, service, tinte, marta, luis
):
    everyone = grid_of(agent_client.get(CALENDAR, {"date": "2026-12-08"}))
    only_luis = grid_of(agent_client.get(CALENDAR, {"date": "2026-12-08", "professional": luis.pk}))
    dyeing = grid_of(agent_client.get(CALENDAR, {"date": "2026-12-08", "service": tinte.pk}))

    assert {c.professional for c in everyone.columns} == {marta, luis}
    assert [c.professional for c in only_luis.columns] == [luis]
    assert [c.professional for c in dyeing.columns] == [luis]  # Marta does not dye
    searched = slots_available(
        company=company,
        service=tinte,
        starts_at=local(2026, 12, 8),
        ends_at=local(2026, 12, 9),
        now=MONDAY_8AM,
    )
    assert cells(dyeing, luis, date(2026, 12, 8)) == [
        s.starts_at.astimezone(company.tz).strftime("%H:%M") for s in searched
    ]
    assert "13:30" not in cells(dyeing, luis, date(2026, 12, 8))  # 60 minutes do not fit


def test_an_appointment_of_another_company_is_not_there(agent_client, other_company, booked):
    theirs = factories.service(other_company)
    professional = factories.marta(other_company, theirs)
    other = appointment_book(
        company=other_company,
        contact=factories.bruno(other_company),
        service=theirs,
        professional=professional,
        starts_at=local(2026, 12, 8, 11),
        created_via=Appointment.Via.STAFF,
        now=MONDAY_8AM,
    )

    page = agent_client.get(CALENDAR, {"date": "2026-12-08", "company": other_company.pk})
    detail = agent_client.get(reverse("admin:agenda_calendar_appointment", args=[other.pk]))

    assert other.reference not in page.content.decode()
    assert booked.reference in page.content.decode()
    assert detail.status_code == 403


# Booking from a free cell ------------------------------------------------------------------------


def book(client, **data):
    return client.post(reverse("admin:agenda_calendar_book"), data)


def test_a_free_cell_opens_the_booking_page_prefilled(agent_client, company, marta, service):
    grid = grid_of(agent_client.get(CALENDAR, {"date": "2026-12-08"}))
    cell = next(c for c in grid.columns[0].free if c.time == "11:00")

    page = agent_client.get(cell.url)

    form = page.context["form"]
    assert page.status_code == 200
    assert form.initial["professional"] == str(marta.pk)
    assert form.initial["at"] == "11:00" and form.initial["day"] == "2026-12-08"
    assert form.initial["service"] == service.pk  # the professional's first service


def test_an_existing_customer_is_booked_through_the_service_with_notes(
    agent_client, company, marta, service, ana
):
    response = book(
        agent_client,
        company=company.pk,
        professional=marta.pk,
        day="2026-12-08",
        at="11:00",
        service=service.pk,
        contact=ana.pk,
        notes="  Alergia al amoniaco ",
    )

    appointment = Appointment.objects.get()
    assert response.status_code == 302
    assert response["Location"].startswith(CALENDAR)
    assert appointment.starts_at == local(2026, 12, 8, 11)
    assert appointment.contact == ana and appointment.created_via == "staff"
    assert appointment.notes == "Alergia al amoniaco"
    assert appointment.messages.filter(kind="booked").exists()  # as every booking
    (told,) = [str(m) for m in agent_client.get(response["Location"]).context["messages"]]
    assert "martes 08/12/2026 11:00" in told  # staff read back the day and time they booked


def test_a_new_customer_is_created_with_the_booking(agent_client, company, marta, service):
    response = book(
        agent_client,
        company=company.pk,
        professional=marta.pk,
        day="2026-12-08",
        at="11:30",
        service=service.pk,
        first_name="Íñigo",
        last_name="Sáez",
        phone="600 555 777",
    )

    appointment = Appointment.objects.get()
    assert response.status_code == 302
    assert appointment.contact.first_name == "Íñigo"
    assert appointment.contact.phone == "+34600555777"


def test_a_new_customer_with_the_phone_of_one_already_there_is_not_created_twice(
    agent_client, company, marta, service, ana
):
    response = book(
        agent_client,
        company=company.pk,
        professional=marta.pk,
        day="2026-12-08",
        at="11:30",
        service=service.pk,
        first_name="Anita",
        phone=ANA_PHONE,
    )

    assert response.status_code == 200
    assert "Ana García" in response.context["form"].errors["phone"][0]
    assert not Appointment.objects.exists()
    assert Contact.objects.filter(company=company).count() == 1


def test_a_new_customer_needs_a_name_and_a_phone_or_email(agent_client, company, marta, service):
    nobody = book(
        agent_client,
        company=company.pk,
        professional=marta.pk,
        day="2026-12-08",
        at="11:30",
        service=service.pk,
    )
    no_channel = book(
        agent_client,
        company=company.pk,
        professional=marta.pk,
        day="2026-12-08",
        at="11:30",
        service=service.pk,
        first_name="Íñigo",
    )

    assert nobody.status_code == no_channel.status_code == 200
    assert nobody.context["form"].errors["contact"]
    assert no_channel.context["form"].errors["phone"]
    assert not Appointment.objects.exists()


def test_a_booking_over_another_is_refused_with_the_nearest_free_slots_and_no_new_customer(
    agent_client, company, marta, service, booked
):
    response = book(
        agent_client,
        company=company.pk,
        professional=marta.pk,
        day="2026-12-08",
        at="10:00",
        service=service.pk,
        first_name="Eva",
        phone="600 999 888",
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert "Esa franja ya está ocupada." in page
    nearest = response.context["nearest"]
    assert nearest and all(slot["professional"] == "Marta" for slot in nearest)
    assert {slot["time"] for slot in nearest} <= {"09:00", "09:30", "11:00", "11:30"}
    assert 'id="cal-nearest"' in page
    assert Appointment.objects.count() == 1
    assert not Contact.objects.filter(first_name="Eva").exists()  # nothing left behind


def test_outside_the_hours_and_in_the_past_are_refused_in_the_grid(
    agent_client, company, marta, service, ana, frozen_clock
):
    outside = book(
        agent_client,
        company=company.pk,
        professional=marta.pk,
        day="2026-12-08",
        at="13:30",
        service=service.pk,
        contact=ana.pk,
    )
    frozen_clock["now"] = local(2026, 12, 8, 12)
    past = book(
        agent_client,
        company=company.pk,
        professional=marta.pk,
        day="2026-12-08",
        at="11:00",
        service=service.pk,
        contact=ana.pk,
    )

    assert "fuera del horario de atención" in outside.content.decode()
    assert outside.context["nearest"]
    assert "Esa franja ya pasó" in past.content.decode()
    assert not Appointment.objects.exists()


def test_a_time_off_the_slot_grid_is_refused_unless_staff_override_it(
    agent_client, company, marta, service, ana
):
    data = {
        "company": company.pk,
        "professional": marta.pk,
        "day": "2026-12-08",
        "at": "11:07",
        "service": service.pk,
        "contact": ana.pk,
    }

    refused = book(agent_client, **data)
    overridden = book(agent_client, **data, off_grid="on")

    assert "cuadrícula" in refused.content.decode()
    assert {slot["time"] for slot in refused.context["nearest"]} >= {"11:00"}
    assert overridden.status_code == 302
    assert Appointment.objects.get().starts_at == local(2026, 12, 8, 11, 7)


def test_the_staff_add_form_keeps_the_grid_too(agent_client, company, marta, service, ana):
    data = {
        "company": company.pk,
        "contact": ana.pk,
        "service": service.pk,
        "professional": marta.pk,
        "day": "2026-12-08",
        "at": "17:07",
    }

    refused = agent_client.post(reverse("admin:agenda_appointment_add"), data)
    overridden = agent_client.post(
        reverse("admin:agenda_appointment_add"), {**data, "off_grid": "on"}
    )

    assert refused.status_code == 200 and "cuadrícula" in refused.content.decode()
    assert overridden.status_code == 302
    assert Appointment.objects.get().starts_at == local(2026, 12, 8, 17, 7)


def test_the_service_refuses_a_start_off_the_grid_with_the_nearest_grid_slots(
    company, marta, service, ana
):
    with pytest.raises(ValidationFailed) as refused:
        appointment_book(
            company=company,
            contact=ana,
            service=service,
            professional=marta,
            starts_at=local(2026, 12, 8, 17, 7),
            created_via=Appointment.Via.STAFF,
            now=MONDAY_8AM,
            enforce_customer_rules=False,
            grid=True,
        )

    assert refused.value.code == "slot_off_grid"
    times = [slot["time"] for slot in refused.value.extras["nearest_free_slots"]]
    assert times and all(t.endswith((":00", ":30")) for t in times)
    assert "17:00" in times


# One appointment ----------------------------------------------------------------------------------


def test_moving_names_the_appointments_time_in_the_one_date_shape(agent_client, booked):
    page = agent_client.get(
        agent_client.get(reverse("admin:agenda_calendar_appointment", args=[booked.pk])).context[
            "move_url"
        ]
    )

    banner = page.content.decode().split('id="cal-moving"', 1)[1].split("<a ", 1)[0]
    local = booked.starts_at.astimezone(booked.company.tz)
    assert local.strftime("%d/%m/%Y") in banner and local.strftime("%Y-%m-%d") not in banner


def test_a_coming_appointment_offers_move_and_cancel_through_the_confirmation_page(
    agent_client, booked
):
    page = agent_client.get(reverse("admin:agenda_calendar_appointment", args=[booked.pk]))

    text = page.content.decode()
    cancel = reverse("admin:agenda_appointment_transition", args=[booked.pk, "cancel"])
    assert page.context["cancel_url"].startswith(cancel + "?next=")
    assert f"move={booked.pk}" in page.context["move_url"]
    assert ANA_PHONE in text and "Prefiere lavado en frío" in text
    assert page.context["contact_url"] == reverse(
        "admin:core_contact_change", args=[booked.contact_id]
    )  # the customer's file, one click away
    confirmation = agent_client.get(page.context["cancel_url"])
    assert confirmation.status_code == 200
    assert 'name="reason"' in confirmation.content.decode()
    answered = agent_client.post(
        page.context["cancel_url"], confirmation_data(confirmation, "customer_asked")
    )
    booked.refresh_from_db()
    assert booked.state == Appointment.State.CANCELLED
    assert answered.status_code == 302 and answered["Location"].startswith(CALENDAR)
    # Its time is free again on the grid, and the cancelled block is gone from it.
    grid = grid_of(agent_client.get(CALENDAR, {"date": "2026-12-08"}))
    assert "10:00" in cells(grid, booked.professional, date(2026, 12, 8))
    assert not [b for c in grid.columns for b in c.blocks]


def test_the_confirmation_page_never_leads_to_another_site(agent_client, booked):
    cancel = reverse("admin:agenda_appointment_transition", args=[booked.pk, "cancel"])

    page = agent_client.get(cancel, {"next": "https://evil.example/"})

    assert page.context["back_url"] == change_url(booked)


def test_a_past_appointment_is_read_only(agent_client, booked, frozen_clock):
    frozen_clock["now"] = local(2026, 12, 8, 10, 15)

    page = agent_client.get(reverse("admin:agenda_calendar_appointment", args=[booked.pk]))
    moving = agent_client.get(CALENDAR, {"move": booked.pk}, follow=True)
    posted = agent_client.post(
        reverse("admin:agenda_calendar_appointment", args=[booked.pk]), {"notes": "x"}
    )

    assert page.context["move_url"] == "" and page.context["cancel_url"] == ""
    assert page.context["form"] is None
    assert 'id="cal-move"' not in page.content.decode()
    assert moving.context["moving"] is None
    assert posted.status_code == 403
    grid = grid_of(agent_client.get(CALENDAR, {"date": "2026-12-08"}))
    assert [b.past for c in grid.columns for b in c.blocks] == [True]


def test_moving_shows_the_slots_it_can_move_to_each_opening_its_move_form(
    agent_client, company, marta, booked
):
    grid = grid_of(agent_client.get(CALENDAR, {"date": "2026-12-08", "move": booked.pk}))

    free = [cell for column in grid.columns for cell in column.free]
    assert free and all(f"/agenda/appointment/{booked.pk}/move/" in cell.url for cell in free)
    assert "10:00" not in [cell.time for cell in free]  # where it is now is no move
    target = next(cell for cell in free if cell.time == "11:30")
    form = agent_client.get(target.url)
    assert form.status_code == 200
    moved = agent_client.post(
        target.url.split("?")[0],
        {"professional": marta.pk, "day": "2026-12-08", "at": "11:30"},
    )
    booked.refresh_from_db()
    assert moved.status_code == 302 and moved["Location"].startswith(CALENDAR)
    assert booked.starts_at == local(2026, 12, 8, 11, 30)


# Notes ---------------------------------------------------------------------------------------


def test_notes_are_saved_from_the_calendar_and_shown_in_the_admin(agent_client, booked):
    url = reverse("admin:agenda_calendar_appointment", args=[booked.pk])

    saved = agent_client.post(url, {"notes": "Trae su propio tinte"})
    record = agent_client.get(change_url(booked)).content.decode()

    booked.refresh_from_db()
    assert saved.status_code == 302
    assert booked.notes == "Trae su propio tinte"
    assert "Trae su propio tinte" in record


def test_notes_too_long_are_refused_not_cut(company, booked):
    with pytest.raises(ValidationFailed) as refused:
        appointment_notes_set(company=company, reference=booked.reference, notes="x" * 2001)

    booked.refresh_from_db()
    assert refused.value.code == "notes_too_long"
    assert booked.notes == "Prefiere lavado en frío"


def test_notes_never_reach_the_customer(booked):
    from agenda.appointment_messages import message_text

    texts = [" ".join(message_text(message)) for message in booked.messages.all()]

    assert len(texts) == 2  # the confirmation and the reminder
    assert all("Corte de pelo" in text and "lavado" not in text for text in texts)


def test_the_older_agenda_page_offers_no_move_for_a_past_appointment(
    agent_client, company, booked, frozen_clock
):
    day_page = reverse("admin:agenda_company_day")
    before = agent_client.get(day_page, {"company": company.pk, "date": "2026-12-08"})
    frozen_clock["now"] = local(2026, 12, 8, 10, 5)
    after = agent_client.get(day_page, {"company": company.pk, "date": "2026-12-08"})

    assert 'class="move-appointment"' in before.content.decode()
    assert 'class="move-appointment"' not in after.content.decode()


def test_a_company_whose_calendars_start_on_sunday_gets_its_weeks_from_sunday(
    client, make_company, make_staff
):
    shop = make_company(
        name="Corner Shop", language="en", country="US", timezone="America/New_York"
    )
    staff = make_staff("front.desk", shop, "agent")
    client.force_login(staff)

    grid = grid_of(client.get(CALENDAR, {"date": "2026-12-09", "view": "week"}))

    assert calendar_page.first_weekday(shop) == 6
    assert grid.days[0] == date(2026, 12, 6)  # Sunday
    assert grid.days[-1] == date(2026, 12, 12)


def test_the_weeks_queries_do_not_grow_with_the_team(agent_client, company, service, marta, ana):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def week_queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            grid_of(agent_client.get(CALENDAR, {"date": "2026-12-09", "view": "week"}))
        return len(captured)

    small = week_queries()
    for n in range(4):
        other = professional_create(
            company=company,
            display_name=f"Estilista {n}",
            services=[service],
            weekly_hours=[(d, time(9), time(18)) for d in range(5)],
        )
        appointment_book(
            company=company,
            contact=factories.contact(company, first_name=f"Cliente {n}", phone=f"+3460077700{n}"),
            service=service,
            professional=other,
            starts_at=local(2026, 12, 9, 10),
            created_via=Appointment.Via.STAFF,
            now=MONDAY_8AM,
        )

    assert week_queries() == small
    # The budget measured with the session, the staff roles (and their companies' language, for
    # the page's) and the grid.
    assert small <= 18


def test_staff_reading_in_english_get_the_calendar_in_english(client, make_company, make_staff):
    shop = make_company(name="Corner Shop", language="en", country="GB", timezone="Europe/London")
    cut = factories.service(shop, name="Haircut")
    factories.marta(shop, cut)
    client.force_login(make_staff("front.desk", shop, "agent"))

    page = client.get(CALENDAR, {"date": "2026-12-08"}, HTTP_ACCEPT_LANGUAGE="en")
    refused = client.post(
        reverse("admin:agenda_calendar_book"),
        {
            "company": shop.pk,
            "professional": shop.professionals.get().pk,
            "day": "2026-12-08",
            "at": "11:07",
            "service": cut.pk,
            "first_name": "Jo",
            "email": "jo@example.com",
        },
        HTTP_ACCEPT_LANGUAGE="en",
    ).content.decode()

    page = page.content.decode()
    assert "Today" in page and "Calendar of Corner Shop" in page and "Hoy" not in page
    assert "not on the booking grid" in refused and "cuadrícula" not in refused


def test_time_off_is_drawn_with_its_reason_and_takes_no_booking(agent_client, marta):
    from agenda.services import time_off_add

    time_off_add(
        professional=marta,
        starts_at=local(2026, 12, 8, 11),
        ends_at=local(2026, 12, 8, 12),
        reason="Médico",
    )

    response = agent_client.get(CALENDAR, {"date": "2026-12-08"})
    grid = grid_of(response)

    column = grid.columns[0]
    assert [(rows, reason) for _row, rows, reason, _style in column.time_off] == [(2, "Médico")]
    assert grid.rows[column.time_off[0][0]] == "11:00"
    free = cells(grid, marta, date(2026, 12, 8))
    assert "11:00" not in free and "11:30" not in free and "12:00" in free
    assert "Ausencia: Médico" in response.content.decode()


def test_the_current_time_is_drawn_on_today_only(agent_client, marta, frozen_clock):
    frozen_clock["now"] = local(2026, 12, 7, 11, 10)

    today = grid_of(agent_client.get(CALENDAR, {"date": "2026-12-07"}))
    tomorrow = grid_of(agent_client.get(CALENDAR, {"date": "2026-12-08"}))
    week = grid_of(agent_client.get(CALENDAR, {"date": "2026-12-07", "view": "week"}))

    # 11:10 is the fifth 30-minute row from 09:00, a third of the way into it.
    assert "grid-row: 6 / span 1; grid-column: 2 / span 1;" in today.now_style
    assert "0.333" in today.now_style
    assert tomorrow.now_style == ""
    assert "grid-column: 2 / span 1;" in week.now_style  # Monday, the week's first day
