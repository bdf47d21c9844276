"""Each role's admin menu and work: a receptionist (agent) sees the work of the front desk and
not the audit records, a salesperson writes quotes without being a supervisor, and agents note
a professional's time off (core.roles, config.admin_site)."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from agenda.models import TimeOff
from core.roles import staff_membership_set
from sales.models import Quote
from tests.admin_pages import quote_form_data

pytestmark = pytest.mark.django_db

RECORDS = {
    ("tooling", "toolcall"),
    ("tooling", "exposedreference"),
    ("core", "securityevent"),
    ("core", "verificationchallenge"),
    ("core", "outboxmessage"),
}


def menu(client) -> dict[tuple[str, str], str]:
    """The entries of the menu on the landing page: (app, model) to the section's name."""
    response = client.get(reverse("admin:index"))
    assert response.status_code == 200
    return {
        (app["app_label"], model["object_name"].lower()): str(app["name"])
        for app in response.context["app_list"]
        for model in app["models"]
    }


@pytest.fixture
def salesperson(make_staff, sol):
    return make_staff("ventas.sol", sol, "sales")


def test_a_receptionists_menu_has_the_front_desks_work_and_no_audit_records(client, agent, sol_day):
    client.force_login(agent)

    entries = menu(client)

    assert {("agenda", "appointment"), ("agenda", "timeoff"), ("core", "contact")} <= set(entries)
    assert {("support", "case"), ("core", "conversation")} <= set(entries)
    assert not RECORDS & set(entries)
    sections = set(entries.values())
    assert not {"API de herramientas", "Núcleo", "API de integración"} & sections
    assert "Clientes y empresa" in sections


def test_a_receptionist_still_opens_a_record_a_page_links_to(client, agent, sol_day):
    client.force_login(agent)

    assert client.get(reverse("admin:tooling_toolcall_changelist")).status_code == 200
    assert client.get(reverse("admin:app_list", args=["tooling"])).status_code == 200
    event = client.get(reverse("admin:core_securityevent_change", args=[sol_day.event.pk]))
    assert event.status_code == 200


def test_supervisors_and_admins_see_the_records_on_their_menu(
    client, supervisor, sol_admin, sol_day
):
    for user in (supervisor, sol_admin):
        client.force_login(user)
        assert set(menu(client)) >= RECORDS


def test_staff_who_are_agents_in_one_company_and_supervisors_in_another_see_the_records(
    client, agent, luna, sol_day
):
    staff_membership_set(user=agent, company=luna, role="supervisor")
    client.force_login(agent)

    assert set(menu(client)) >= RECORDS


def test_a_salespersons_menu_has_quotes_and_the_pipeline_and_no_audit_records(
    client, salesperson, sol_day
):
    client.force_login(salesperson)

    entries = menu(client)

    assert {("sales", "quote"), ("sales", "opportunity"), ("sales", "product")} <= set(entries)
    assert not RECORDS & set(entries)


def test_a_salesperson_creates_a_quote_without_being_a_supervisor(client, salesperson, sol_day):
    client.force_login(salesperson)
    sku = sol_day.quote.lines.first().product.sku

    response = client.post(
        reverse("admin:sales_quote_add"),
        quote_form_data(sol_day.company, sol_day.contact, [(sku, 3)]),
    )

    assert response.status_code == 302
    created = Quote.objects.exclude(pk=sol_day.quote.pk).get()
    assert (created.company, created.state) == (sol_day.company, Quote.State.DRAFT)


def test_a_salesperson_sets_no_prices_and_an_agent_writes_no_quotes(
    client, salesperson, agent, sol_day
):
    client.force_login(salesperson)
    product = sol_day.quote.lines.first().product
    assert client.get(reverse("admin:sales_product_add")).status_code == 403
    page = client.get(reverse("admin:sales_product_change", args=[product.pk]))
    assert page.status_code == 200 and not page.context["has_change_permission"]

    client.force_login(agent)
    assert client.get(reverse("admin:sales_quote_add")).status_code == 403


def test_an_agent_adds_a_professionals_time_off(client, agent, sol_day):
    client.force_login(agent)
    day = (timezone.now() + timedelta(days=3)).date().isoformat()

    response = client.post(
        reverse("admin:agenda_timeoff_add"),
        {
            "professional": sol_day.professional.pk,
            "starts_at_0": day,
            "starts_at_1": "09:00",
            "ends_at_0": day,
            "ends_at_1": "13:00",
        },
    )

    assert response.status_code == 302
    assert list(TimeOff.objects.values_list("professional_id", flat=True)) == [
        sol_day.professional.pk
    ]
