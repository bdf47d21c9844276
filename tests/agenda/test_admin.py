"""The agenda admin: scoped lists, transition buttons and staff bookings through the services."""

import re
from datetime import UTC, datetime, time, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.urls import reverse
from django_fsm_log.models import StateLog

from agenda import clock
from agenda.models import Appointment, TimeOff
from agenda.services import appointment_book, appointment_cancel, professional_create
from core.models import StaffMembership
from core.services import contact_create
from tests.admin_pages import change_url, confirm, form_data, transition_buttons
from tests.factories import MONDAY_8AM, local

# Staff here hold the agenda's permissions only.
pytestmark = [
    pytest.mark.django_db,
    pytest.mark.usefixtures("frozen_clock"),
    pytest.mark.staff_permissions("agenda"),
]


@pytest.fixture
def staff_client(client, staff):
    client.force_login(staff)
    return client


@pytest.fixture
def appointment(company, service, marta, ana):
    return appointment_book(
        company=company,
        contact=ana,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 8, 10),
        created_via="gateway",
        now=MONDAY_8AM,
    )


def press(client, appointment: Appointment, transition: str):
    """Post the change page back with one transition button pressed, as a browser would."""
    page = client.get(change_url(appointment))
    data = {"_fsm_transition_to": transition}
    for inline in page.context["inline_admin_formsets"]:
        management = inline.formset.management_form
        for name in ("TOTAL_FORMS", "INITIAL_FORMS", "MIN_NUM_FORMS", "MAX_NUM_FORMS"):
            data[f"{management.prefix}-{name}"] = management[name].value()
    return client.post(change_url(appointment), data, follow=True)


def history(appointment: Appointment):
    return StateLog.objects.filter(
        content_type=ContentType.objects.get_for_model(Appointment), object_id=appointment.pk
    ).order_by("timestamp")


def test_staff_see_only_their_companys_appointments(
    staff_client, appointment, other_company, agenda_settings
):
    from agenda.models import Service
    from agenda.services import professional_create

    elsewhere_service = Service.objects.create(company=other_company, name="Radiografía")
    elsewhere = professional_create(
        company=other_company,
        display_name="Dr. Vidal",
        services=[elsewhere_service],
        weekly_hours=[(1, local(2026, 1, 1, 9).time(), local(2026, 1, 1, 13).time())],
    )
    stranger = contact_create(company=other_company, first_name="Eva", email="e@example.com")
    theirs = appointment_book(
        company=other_company,
        contact=stranger,
        service=elsewhere_service,
        professional=elsewhere,
        starts_at=local(2026, 12, 8, 10),
        created_via="staff",
        now=MONDAY_8AM,
    )

    page = staff_client.get(reverse("admin:agenda_appointment_changelist")).content.decode()

    assert appointment.reference in page
    assert theirs.reference not in page
    assert "08/12/2026 10:00" in page  # local time, not UTC
    assert staff_client.get(change_url(theirs)).status_code == 302  # not theirs: redirected


def test_a_scheduled_appointment_offers_its_transitions_and_a_terminal_one_none(
    staff_client, appointment
):
    assert transition_buttons(staff_client.get(change_url(appointment))) == {
        "cancel",
        "mark_attended",
        "mark_no_show",
        "reschedule",
    }

    confirm(staff_client, appointment, "cancel", "customer_asked")

    assert transition_buttons(staff_client.get(change_url(appointment))) == set()


def test_the_cancel_button_goes_through_the_service_and_records_who_and_why(
    staff_client, staff, appointment
):
    # The button opens the confirmation page; its "Yes" cancels (core.admin.confirmation).
    response = confirm(staff_client, appointment, "cancel", "customer_asked")

    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.CANCELLED
    assert "está ahora cancelada" in response.content.decode()  # the admin speaks Spanish
    assert [(log.transition, log.by, log.description) for log in history(appointment)] == [
        ("cancel", staff, "A petición del cliente")
    ]


def test_a_button_the_service_refuses_shows_why_and_changes_nothing(staff_client, appointment):
    response = press(staff_client, appointment, "mark_attended")  # it has not started yet

    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.SCHEDULED
    assert "Esa cita todavía no ha comenzado." in response.content.decode()
    assert not history(appointment).exists()


def test_the_reschedule_form_moves_the_appointment_in_local_time(staff_client, appointment, marta):
    url = reverse(
        "admin:agenda_appointment_transition",
        kwargs={"object_id": appointment.pk, "transition_name": "reschedule"},
    )
    page = staff_client.get(url)
    assert page.status_code == 200
    # Its button says what it does, and the date widget's scripts are on the page.
    content = page.content.decode()
    assert 'value="Cambiar fecha"' in content and "Apply" not in content
    assert "DateTimeShortcuts.js" in content

    staff_client.post(url, {"professional": marta.pk, "day": "2026-12-09", "at": "11:30"})

    appointment.refresh_from_db()
    assert appointment.starts_at == local(2026, 12, 9, 11, 30)
    assert appointment.state == Appointment.State.SCHEDULED
    assert [log.transition for log in history(appointment)] == ["reschedule"]


def test_the_reschedule_form_refuses_a_busy_time(
    staff_client, appointment, company, service, marta, bruno
):
    appointment_book(
        company=company,
        contact=bruno,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 9, 11),
        created_via="staff",
        now=MONDAY_8AM,
    )
    url = reverse(
        "admin:agenda_appointment_transition",
        kwargs={"object_id": appointment.pk, "transition_name": "reschedule"},
    )

    response = staff_client.post(
        url, {"professional": marta.pk, "day": "2026-12-09", "at": "11:15"}, follow=True
    )

    assert "Esa franja ya está ocupada." in response.content.decode()
    appointment.refresh_from_db()
    assert appointment.starts_at == local(2026, 12, 8, 10)


def test_staff_book_through_the_add_form_in_company_local_time(
    staff_client, company, service, marta, ana
):
    response = staff_client.post(
        reverse("admin:agenda_appointment_add"),
        {
            "company": company.pk,
            "contact": ana.pk,
            "service": service.pk,
            "professional": marta.pk,
            "day": "2026-12-07",
            "at": "09:00",  # inside the customers' notice: staff may
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    appointment = Appointment.objects.get()
    assert appointment.starts_at == local(2026, 12, 7, 9)
    assert appointment.created_via == Appointment.Via.STAFF
    assert appointment.reference.startswith("AP-")


def test_the_add_form_refuses_a_busy_slot(staff_client, company, service, marta, appointment):
    response = staff_client.post(
        reverse("admin:agenda_appointment_add"),
        {
            "company": company.pk,
            "contact": appointment.contact.pk,
            "service": service.pk,
            "professional": marta.pk,
            "day": "2026-12-08",
            "at": "10:15",
        },
    )

    assert response.status_code == 200
    assert "Esa franja ya está ocupada." in response.content.decode()
    assert Appointment.objects.count() == 1


def test_the_day_view_shows_hours_and_appointments_in_local_time(staff_client, marta, appointment):
    response = staff_client.get(
        reverse("admin:agenda_professional_day", args=[marta.pk]), {"date": "2026-12-08"}
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert "09:00-13:00, 15:00-19:00" in page
    assert appointment.reference in page and "10:00-10:30" in page
    assert "martes 08/12/2026" in page


def test_time_off_over_scheduled_appointments_warns_staff_with_each_one(
    staff_client, company, service, marta, appointment, bruno
):
    later = appointment_book(
        company=company,
        contact=bruno,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 8, 12),
        created_via="staff",
        now=MONDAY_8AM,
    )
    cancelled = appointment_book(
        company=company,
        contact=bruno,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 8, 11),
        created_via="staff",
        now=MONDAY_8AM,
    )
    appointment_cancel(company=company, reference=cancelled.reference, now=MONDAY_8AM)
    outside = appointment_book(
        company=company,
        contact=bruno,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 8, 15),
        created_via="staff",
        now=MONDAY_8AM,
    )

    response = staff_client.post(
        reverse("admin:agenda_timeoff_add"),
        {
            "professional": marta.pk,
            "starts_at_0": "2026-12-08",
            "starts_at_1": "10:15",  # inside the first appointment (10:00-10:30)
            "ends_at_0": "2026-12-08",
            "ends_at_1": "13:00",
            "reason": "Médico",
        },
        follow=True,
    )

    assert response.status_code == 200
    [warning] = [m for m in response.context["messages"] if m.level_tag == "warning"]
    text = str(warning)
    assert appointment.reference in text and "08/12/2026 10:00" in text
    assert later.reference in text and "08/12/2026 12:00" in text
    assert cancelled.reference not in text and outside.reference not in text
    assert TimeOff.objects.filter(professional=marta).count() == 1


def test_time_off_over_no_appointment_saves_without_a_warning(staff_client, marta, appointment):
    response = staff_client.post(
        reverse("admin:agenda_timeoff_add"),
        {
            "professional": marta.pk,
            "starts_at_0": "2026-12-08",
            "starts_at_1": "10:30",  # the appointment ends at 10:30
            "ends_at_0": "2026-12-08",
            "ends_at_1": "13:00",
        },
        follow=True,
    )

    assert response.status_code == 200
    assert not [m for m in response.context["messages"] if m.level_tag == "warning"]
    assert TimeOff.objects.filter(professional=marta).count() == 1


def test_time_off_added_on_the_professionals_page_warns_too(staff_client, marta, appointment):
    url = reverse("admin:agenda_professional_change", args=[marta.pk])
    data = form_data(staff_client.get(url))
    data.update(
        {
            "time_off-TOTAL_FORMS": "1",
            "time_off-0-starts_at_0": "2026-12-08",
            "time_off-0-starts_at_1": "09:00",
            "time_off-0-ends_at_0": "2026-12-08",
            "time_off-0-ends_at_1": "19:00",
            "time_off-0-reason": "Formación",
        }
    )

    response = staff_client.post(url, data, follow=True)

    assert response.status_code == 200
    assert [str(m) for m in response.context["messages"] if m.level_tag == "warning"] == [
        f"Citas programadas de Marta caen dentro de esta ausencia y siguen reservadas hasta que "
        f"las reprograme o cancele: {appointment.reference} (08/12/2026 10:00, Ana García)."
    ]
    assert TimeOff.objects.filter(professional=marta, reason="Formación").exists()
    assert marta.working_hours.count() == 10  # the hours posted back unchanged


@pytest.fixture
def two_company_client(client, company, make_company):
    """A receptionist of the Madrid salon and of a clinic in Mexico City."""
    user = get_user_model().objects.create_user(username="recepcion2", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="agenda"))
    StaffMembership.objects.create(user=user, company=company, role="admin")
    clinic = make_company(name="Clínica", timezone="America/Mexico_City")
    StaffMembership.objects.create(user=user, company=clinic, role="admin")
    client.force_login(user)
    return client


@pytest.fixture
def superuser_client(client):
    client.force_login(get_user_model().objects.create_superuser(username="raiz"))
    return client


TIME_OFF = {
    "starts_at_0": "2026-12-08",
    "starts_at_1": "10:00",
    "ends_at_0": "2026-12-08",
    "ends_at_1": "13:00",
    "reason": "Médico",
}


@pytest.mark.parametrize("who", ["two_company_client", "superuser_client"])
def test_time_off_typed_by_staff_of_several_companies_is_read_in_the_professionals_time(
    request, who, marta
):
    """Nothing on the add page but the professional tells the company: "10:00" typed for
    Marta is 10:00 in Madrid, not in UTC."""
    client = request.getfixturevalue(who)

    response = client.post(
        reverse("admin:agenda_timeoff_add"), {"professional": marta.pk, **TIME_OFF}, follow=True
    )

    assert response.status_code == 200
    time_off = TimeOff.objects.get(professional=marta)
    assert (time_off.starts_at, time_off.ends_at) == (
        local(2026, 12, 8, 10),
        local(2026, 12, 8, 13),
    )


def rendered(response, name: str) -> str:
    """The value a text input of the page shows."""
    [value] = re.findall(rf'name="{name}" value="([^"]*)"', response.content.decode())
    return value


def test_a_time_off_page_shows_the_professionals_time_to_staff_of_several_companies(
    two_company_client, marta
):
    time_off = TimeOff.objects.create(
        professional=marta, starts_at=local(2026, 12, 8, 10), ends_at=local(2026, 12, 8, 13)
    )

    page = two_company_client.get(reverse("admin:agenda_timeoff_change", args=[time_off.pk]))
    listed = two_company_client.get(reverse("admin:agenda_timeoff_changelist"))

    assert rendered(page, "starts_at_1") == "10:00"
    assert rendered(page, "ends_at_1") == "13:00"
    shown = page.context["adminform"].form["starts_at"].value()
    assert shown.utcoffset() == local(2026, 12, 8, 10).utcoffset()
    assert "08/12/2026 10:00" in listed.content.decode()


def test_time_off_on_the_professionals_page_is_shown_in_the_companys_time(staff_client, marta):
    """The page was rendered after the view had left the company's timezone: staff saw, and
    saved back untouched, UTC times."""
    TimeOff.objects.create(
        professional=marta, starts_at=local(2026, 12, 8, 10), ends_at=local(2026, 12, 8, 13)
    )

    page = staff_client.get(reverse("admin:agenda_professional_change", args=[marta.pk]))

    assert rendered(page, "time_off-0-starts_at_1") == "10:00"


@pytest.fixture
def night_owl(company, service, agenda_settings):
    agenda_settings.booking_horizon_days = 730  # the clocks change next year: open that far
    agenda_settings.save()
    return professional_create(
        company=company,
        display_name="Noche",
        services=[service],
        weekly_hours=[(6, time(1), time(6))],  # Sundays 01:00-06:00
    )


def test_the_add_form_refuses_a_time_the_spring_change_skips(
    staff_client, company, service, ana, night_owl
):
    """On 28 March 2027 Madrid's clocks jump from 02:00 to 03:00: 02:30 was silently booked
    at 03:30."""
    response = staff_client.post(
        reverse("admin:agenda_appointment_add"),
        {
            "company": company.pk,
            "contact": ana.pk,
            "service": service.pk,
            "professional": night_owl.pk,
            "day": "2027-03-28",
            "at": "02:30",
        },
    )

    assert response.status_code == 200
    assert "El 28/03/2027 no existe la hora 02:30" in response.content.decode()
    assert not Appointment.objects.exists()


def test_the_reschedule_form_refuses_a_time_the_spring_change_skips(
    staff_client, company, service, ana, night_owl
):
    appointment = appointment_book(
        company=company,
        contact=ana,
        service=service,
        professional=night_owl,
        starts_at=local(2027, 3, 28, 4),
        created_via="staff",
        now=MONDAY_8AM,
        enforce_customer_rules=False,
    )
    url = reverse(
        "admin:agenda_appointment_transition",
        kwargs={"object_id": appointment.pk, "transition_name": "reschedule"},
    )

    response = staff_client.post(
        url, {"professional": night_owl.pk, "day": "2027-03-28", "at": "02:30"}, follow=True
    )

    assert "El 28/03/2027 no existe la hora 02:30" in response.content.decode()
    appointment.refresh_from_db()
    assert appointment.starts_at == local(2027, 3, 28, 4)


def test_the_add_form_books_the_first_of_a_repeated_autumn_time(
    staff_client, company, service, ana, night_owl
):
    """On 31 October 2027 02:00-03:00 happens twice in Madrid: the first one (summer time)."""
    response = staff_client.post(
        reverse("admin:agenda_appointment_add"),
        {
            "company": company.pk,
            "contact": ana.pk,
            "service": service.pk,
            "professional": night_owl.pk,
            "day": "2027-10-31",
            "at": "02:30",
        },
    )

    assert response.status_code == 302, response.content.decode()[:2000]
    assert Appointment.objects.get().starts_at == datetime(2027, 10, 31, 0, 30, tzinfo=UTC)


def test_the_add_form_refuses_a_time_past_the_booking_horizon(
    staff_client, company, service, ana, marta, agenda_settings
):
    far = (clock.now() + timedelta(days=agenda_settings.booking_horizon_days + 7)).astimezone(
        company.tz
    )
    response = staff_client.post(
        reverse("admin:agenda_appointment_add"),
        {
            "company": company.pk,
            "contact": ana.pk,
            "service": service.pk,
            "professional": marta.pk,
            "day": far.date().isoformat(),
            "at": "10:00",
        },
    )

    assert response.status_code == 200
    assert "Solo se puede reservar con hasta 60 días de antelación." in response.content.decode()
    assert not Appointment.objects.exists()
