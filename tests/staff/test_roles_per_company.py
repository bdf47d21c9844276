"""Staff who work for several companies, with a different role in each: the admin lets them do
in each company what their role there allows, and no more; and no form moves a row to another
company or ties it to another company's things (core.admin.CompanyScopedAdmin)."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from agenda.models import Professional, Service, TimeOff
from agenda.services import time_off_add
from core.models import Contact, GatewayCredential, StaffMembership
from core.roles import staff_membership_set
from core.services import gateway_credential_issue
from sales.models import Opportunity
from tests.admin_pages import form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_in_sol_agent_in_luna(make_staff, sol, luna) -> User:
    user = make_staff("dual", sol, "admin")
    staff_membership_set(user=user, company=luna, role="agent")
    return User.objects.get(pk=user.pk)


@pytest.fixture
def supervisor_of_both(make_staff, sol, luna) -> User:
    user = make_staff("both.sup", sol, "supervisor")
    staff_membership_set(user=user, company=luna, role="supervisor")
    return User.objects.get(pk=user.pk)


def change(client, obj, **changes):
    """Post `obj`'s change page back as the browser shows it, with `changes`."""
    url = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])
    data = form_data(client.get(url))
    data.update(changes)
    return client.post(url, data)


def test_an_admin_of_one_company_is_only_an_agent_in_the_other(
    client, admin_in_sol_agent_in_luna, sol, luna
):
    client.force_login(admin_in_sol_agent_in_luna)
    add = reverse("admin:core_gatewaycredential_add")

    issued_for_sol = client.post(add, {"company": sol.pk, "name": "gateway"})
    issued_for_luna = client.post(add, {"company": luna.pk, "name": "intruso"})

    assert issued_for_sol.status_code == 302
    assert issued_for_luna.status_code == 200  # refused: Luna is not among the choices
    assert issued_for_luna.context["adminform"].form.errors["company"]
    assert list(GatewayCredential.objects.values_list("company_id", flat=True)) == [sol.pk]
    # Luna's credentials are not even listed: an agent there does not see them.
    gateway_credential_issue(company=luna, name="luna-gateway")
    listed = client.get(reverse("admin:core_gatewaycredential_changelist"))
    assert "luna-gateway" not in listed.content.decode()


def test_an_agent_in_a_company_cannot_raise_their_own_role_there(
    client, admin_in_sol_agent_in_luna, luna
):
    client.force_login(admin_in_sol_agent_in_luna)
    in_luna = StaffMembership.objects.get(user=admin_in_sol_agent_in_luna, company=luna)

    page = client.get(reverse("admin:core_staffmembership_change", args=[in_luna.pk]))
    raised = client.post(
        reverse("admin:core_staffmembership_change", args=[in_luna.pk]), {"role": "admin"}
    )

    assert page.status_code == 302  # not listed for an agent: back to the admin's index
    assert raised.status_code in (302, 403)
    in_luna.refresh_from_db()
    assert in_luna.role == "agent"


def test_an_admin_who_raises_a_shared_colleague_raises_them_only_in_their_own_company(
    client, make_staff, sol_admin, sol, luna
):
    shared = make_staff("shared", sol, "agent")
    staff_membership_set(user=shared, company=luna, role="agent")
    client.force_login(sol_admin)
    change(client, StaffMembership.objects.get(user=shared, company=sol), role="admin")
    assert StaffMembership.objects.get(user=shared, company=sol).role == "admin"

    client.force_login(User.objects.get(pk=shared.pk))
    issued = client.post(
        reverse("admin:core_gatewaycredential_add"), {"company": luna.pk, "name": "y"}
    )

    assert issued.status_code == 200
    assert not GatewayCredential.objects.filter(company=luna).exists()


def test_a_row_action_runs_only_on_the_companies_where_the_role_allows_it(
    client, admin_in_sol_agent_in_luna, sol, luna
):
    """The changelist only lists what the role lets them see; an action posted with another
    company's selected ids (a crafted request) still acts only where the role allows it."""
    sol_credential, _ = gateway_credential_issue(company=sol, name="sol")
    luna_credential, _ = gateway_credential_issue(company=luna, name="luna")
    client.force_login(admin_in_sol_agent_in_luna)
    before = timezone.now()

    client.post(
        reverse("admin:core_gatewaycredential_changelist"),
        {
            "action": "revoke",
            "_selected_action": [sol_credential.pk, luna_credential.pk],
            "post": "yes",  # as the confirmation page posts it
        },
    )

    sol_credential.refresh_from_db()
    luna_credential.refresh_from_db()
    assert before <= sol_credential.revoked_at <= timezone.now()
    assert luna_credential.revoked_at is None


@pytest.mark.parametrize(
    "row",
    [
        lambda day: day.contact,
        lambda day: day.service,
        lambda day: day.professional,
        lambda day: gateway_credential_issue(company=day.company, name="gw")[0],
    ],
    ids=["contact", "service", "professional", "gateway credential"],
)
def test_no_row_moves_to_another_company(client, make_staff, sol_day, luna_day, row):
    """Moving a contact would leave Sol's appointments and cases with a Luna customer, and a
    credential would make Sol's token speak for Luna."""
    obj = row(sol_day)
    admin_of_both = make_staff("both.admin", sol_day.company, "admin")
    staff_membership_set(user=admin_of_both, company=luna_day.company, role="admin")
    client.force_login(admin_of_both)

    moved = change(client, obj, company=luna_day.company.pk)

    assert moved.status_code == 302  # the company is shown, not edited: the rest is saved
    assert type(obj).objects.get(pk=obj.pk).company_id == sol_day.company.pk


def test_a_professional_gives_only_their_own_companys_services(
    client, supervisor_of_both, sol_day, luna_day
):
    client.force_login(supervisor_of_both)

    refused = change(
        client, sol_day.professional, services=[sol_day.service.pk, luna_day.service.pk]
    )

    assert refused.status_code == 200
    assert refused.context["adminform"].form.errors["services"]
    professional = Professional.objects.get(pk=sol_day.professional.pk)
    assert list(professional.services.all()) == [Service.objects.get(pk=sol_day.service.pk)]


def test_an_opportunitys_owner_is_staff_of_its_company(
    client, supervisor_of_both, sol_day, luna_agent, supervisor
):
    client.force_login(supervisor_of_both)
    add = reverse("admin:sales_opportunity_add")
    fields = {
        "company": sol_day.company.pk,
        "contact": sol_day.contact.pk,
        "title": "Tratamiento anual",
        "amount": "0",
        "currency": "",
    }

    refused = client.post(add, {**fields, "owner": luna_agent.pk})
    accepted = client.post(add, {**fields, "owner": supervisor.pk})

    assert refused.status_code == 200
    assert refused.context["adminform"].form.errors["owner"]
    assert accepted.status_code == 302
    assert Opportunity.objects.get().owner == supervisor


def test_staff_of_one_company_still_work_as_before(client, supervisor, sol_day):
    """A single company and role: what the role grants, on that company's rows."""
    client.force_login(supervisor)

    renamed = change(client, sol_day.contact, first_name="Anabel")
    days_off = client.get(reverse("admin:agenda_timeoff_add"))

    assert renamed.status_code == 302
    assert Contact.objects.get(pk=sol_day.contact.pk).first_name == "Anabel"
    assert days_off.status_code == 200


def test_time_off_does_not_move_to_another_companys_professional(
    client, supervisor_of_both, sol_day, luna_day
):
    """A row whose company comes through another row (the professional's): changing that one
    is a move too."""
    time_off = time_off_add(
        professional=sol_day.professional,
        starts_at=timezone.now() + timedelta(days=3),
        ends_at=timezone.now() + timedelta(days=4),
    )
    client.force_login(supervisor_of_both)

    moved = change(client, time_off, professional=luna_day.professional.pk)

    assert moved.status_code == 200
    assert moved.context["adminform"].form.non_field_errors() == [
        "Un registro no puede pasar a otra empresa."
    ]
    assert TimeOff.objects.get(pk=time_off.pk).professional_id == sol_day.professional.pk


def test_a_salesperson_in_one_company_opens_opportunities_only_there(
    client, make_staff, sol_day, luna_day
):
    user = make_staff("dual.sales", sol_day.company, "sales")
    staff_membership_set(user=user, company=luna_day.company, role="agent")
    client.force_login(User.objects.get(pk=user.pk))

    def add(day):
        return client.post(
            reverse("admin:sales_opportunity_add"),
            {
                "company": day.company.pk,
                "contact": day.contact.pk,
                "title": "Tinte para la boda",
                "amount": "80",
                "currency": "",
                "owner": "",
            },
        )

    in_luna = add(luna_day)  # an agent there
    in_sol = add(sol_day)  # a salesperson there

    assert in_luna.status_code == 200
    assert "company" in in_luna.context["adminform"].form.errors
    assert in_sol.status_code == 302
    assert list(Opportunity.objects.values_list("company_id", flat=True)) == [sol_day.company.pk]


def test_a_companys_admin_edits_its_details_but_not_its_slug_or_environment(
    client, sol_admin, sol, luna
):
    client.force_login(sol_admin)

    slug, environment = sol.slug, sol.environment
    saved = change(
        client, sol, name="Peluquería Sol y Sombra", slug=luna.slug, environment="production"
    )

    assert saved.status_code == 302  # no "already exists" error to tell Luna's slug by
    sol.refresh_from_db()
    assert (sol.name, sol.slug, sol.environment) == ("Peluquería Sol y Sombra", slug, environment)
