"""Per-company scoping across every admin: lists, filters, choices and the landing page."""

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import RequestFactory
from django.utils import translation

from agenda.models import Appointment
from core.admin import CompanyScopedAdmin
from core.models import Company
from sales.services import opportunity_create
from tests.staff.conftest import local_clock

pytestmark = pytest.mark.django_db(transaction=True)

# Admins registered by Django itself: user accounts are the platform operator's (superusers);
# no role grants their permissions.
UNSCOPED_BY_DESIGN = {"auth.User", "auth.Group"}


def luna_marks(day) -> list[str]:
    """Strings that appear only in Luna's data."""
    return [
        day.company.name,
        day.contact.first_name,
        day.professional.display_name,
        day.appointment.reference,
        day.case.reference,
        day.quote.reference,
        day.event.conversation_key,
    ]


def test_every_registered_admin_is_scoped_by_company():
    unscoped = [
        model._meta.label
        for model, model_admin in admin.site._registry.items()
        if not isinstance(model_admin, CompanyScopedAdmin)
        and model._meta.label not in UNSCOPED_BY_DESIGN
    ]

    assert unscoped == []


def test_no_admin_list_shows_another_companys_rows(client, sol_day, luna_day, sol_admin):
    """Every changelist, as an admin of Sol (who may view everything there), shows none of
    Luna's rows, names or filter choices."""
    client.force_login(sol_admin)
    leaks = {}
    for model, model_admin in admin.site._registry.items():
        if model._meta.label in UNSCOPED_BY_DESIGN:
            continue
        url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        response = client.get(url)
        assert response.status_code == 200, url
        page = response.content.decode()
        found = [mark for mark in luna_marks(luna_day) if mark in page]
        if found:
            leaks[url] = found
        request = RequestFactory().get(url)
        request.user = sol_admin
        rows = model_admin.get_queryset(request)
        path = model_admin.company_path
        assert not rows.filter(**{path: luna_day.company.pk}).exists(), url

    assert leaks == {}


def test_related_filters_list_only_the_staff_members_own_professionals_and_staff(
    client, sol_day, luna_day, sol_admin, make_staff
):
    luna_seller = make_staff("ventas.luna", luna_day.company, "supervisor")  # sales staff
    opportunity_create(
        company=luna_day.company, contact=luna_day.contact, title="Renovación", owner=luna_seller
    )
    client.force_login(sol_admin)

    appointments = client.get("/admin/agenda/appointment/").content.decode()
    opportunities = client.get("/admin/sales/opportunity/").content.decode()

    assert sol_day.professional.display_name in appointments
    assert luna_day.professional.display_name not in appointments
    assert "ventas.luna" not in opportunities


def test_a_superuser_sees_every_company(client, sol_day, luna_day):
    root = User.objects.create_superuser("root", password="pw-root-2026!")
    client.force_login(root)

    appointments = client.get("/admin/agenda/appointment/").content.decode()
    landing = client.get("/admin/").content.decode()

    assert sol_day.appointment.reference in appointments
    assert luna_day.appointment.reference in appointments
    assert sol_day.appointment.reference in landing
    assert luna_day.appointment.reference in landing
    assert "Clínica Luna" in landing  # a company column when several companies are shown


def test_staff_cannot_open_another_companys_objects_even_by_url(client, sol_day, luna_day, agent):
    client.force_login(agent)

    for obj in (luna_day.appointment, luna_day.case, luna_day.contact, luna_day.event):
        url = f"/admin/{obj._meta.app_label}/{obj._meta.model_name}/{obj.pk}/change/"
        response = client.get(url, follow=True)
        # As for a record that does not exist: back to the admin's index, saying so.
        assert response.redirect_chain == [("/admin/", 302)], url
        page = response.content.decode()
        missing = f"No hay ningún registro de {obj._meta.verbose_name} con el ID «{obj.pk}»."
        assert f"{missing} Quizás se eliminó." in page, url
        assert obj.company.name not in response.content.decode()


def test_the_landing_page_shows_todays_work_of_the_staff_members_company_in_local_time(
    client, sol_day, luna_day, agent
):
    client.force_login(agent)

    response = client.get("/admin/")

    page = response.content.decode()
    panels = {p.key: p for p in response.context["dashboard_panels"]}
    assert set(panels) == {
        "appointments",
        "cases",
        "leads",
        "quotes",
        "codes",
        "verified_mode",
        "security",
    }  # and "security_alerts" only while a burst's credential is active
    assert [row["cells"][1] for row in panels["appointments"].rows] == [
        sol_day.appointment.reference
    ]
    assert panels["appointments"].rows[0]["cells"][0] == local_clock(
        sol_day.appointment.starts_at, sol_day.company
    )
    assert panels["cases"].rows[0]["cells"][1] == sol_day.case.reference
    assert panels["quotes"].rows[0]["cells"][1] == sol_day.quote.reference
    assert panels["security"].total == 1
    for mark in luna_marks(luna_day):
        assert mark not in page


def test_the_landing_page_leaves_out_what_is_not_today_or_no_longer_waiting(client, sol_day, agent):
    from agenda.services import appointment_cancel
    from sales.services import quote_accept
    from support.services import case_close, case_resolve, case_start

    appointment_cancel(
        company=sol_day.company, reference=sol_day.appointment.reference, enforce_cutoff=False
    )
    quote_accept(quote=sol_day.quote)
    case_close(case=case_resolve(case=case_start(case=sol_day.case)))
    client.force_login(agent)

    panels = {p.key: p for p in client.get("/admin/").context["dashboard_panels"]}

    # A cancelled appointment is still today's (and says so); the rest leaves the queues.
    with translation.override("es"):
        assert panels["appointments"].rows[0]["cells"][-1] == str(Appointment.State.CANCELLED.label)
    assert panels["cases"].total == 0
    assert panels["quotes"].total == 0


def test_security_events_can_be_filtered_by_kind(client, sol_day, sol_admin):
    client.force_login(sol_admin)

    matching = client.get("/admin/core/securityevent/?kind__exact=identity_switch")
    other = client.get("/admin/core/securityevent/?kind__exact=verification_locked")

    assert sol_day.event.conversation_key in matching.content.decode()
    assert sol_day.event.conversation_key not in other.content.decode()


def test_companies_of_a_staff_member_are_all_they_can_pick_in_forms(client, sol, luna, agent):
    client.force_login(agent)

    form = client.get("/admin/agenda/appointment/add/").content.decode()

    assert sol.name in form
    assert luna.name not in form
    assert Company.objects.count() == 2
