"""The admin shows each staff user only their companies' data."""

import re

import pytest

from core.models import GatewayCredential, StaffMembership
from core.roles import staff_roles_sync
from core.selectors import gateway_company_authenticate
from core.services import contact_create

pytestmark = [pytest.mark.django_db, pytest.mark.staff_permissions("core")]


def test_staff_see_only_their_companys_contacts(client, staff, company, other_company):
    contact_create(company=company, first_name="Ana")
    contact_create(company=other_company, first_name="Zoe")
    client.force_login(staff)

    page = client.get("/admin/core/contact/").content.decode()

    assert "Ana" in page
    assert "Zoe" not in page


def test_staff_cannot_open_another_companys_contact(client, staff, other_company):
    foreign = contact_create(company=other_company, first_name="Zoe")
    client.force_login(staff)

    response = client.get(f"/admin/core/contact/{foreign.pk}/change/")

    assert response.status_code == 302  # the admin redirects: "does not exist"


def test_staff_only_see_their_companies_in_the_company_list(client, staff, company, other_company):
    client.force_login(staff)

    page = client.get("/admin/core/company/").content.decode()

    assert company.name in page
    assert other_company.name not in page


def test_creating_a_credential_in_the_admin_shows_the_token_once(client, staff, company):
    client.force_login(staff)

    response = client.post(
        "/admin/core/gatewaycredential/add/",
        {"company": company.pk, "name": "whatsapp"},
        follow=True,
    )

    credential = GatewayCredential.objects.get(name="whatsapp")
    shown = [str(m) for m in response.context["messages"]]
    token = re.fullmatch(r"Copie este token ahora; no se volverá a mostrar: (gt_\S+)", shown[0])
    assert token is not None, shown
    assert gateway_company_authenticate(token.group(1)) == company
    assert shown[1:] == [
        f'Se ha añadido «<a href="/admin/core/gatewaycredential/{credential.pk}'
        f'/change/">whatsapp ({credential.token_prefix}…)</a>» (credencial del Gateway).'
    ]
    assert all(credential.token_hash not in m for m in shown)


def test_staff_cannot_create_a_credential_for_another_company(client, staff, other_company):
    client.force_login(staff)

    client.post("/admin/core/gatewaycredential/add/", {"company": other_company.pk, "name": "evil"})

    assert not GatewayCredential.objects.filter(name="evil").exists()


def test_a_new_records_company_is_chosen_for_staff_of_one_company(
    client, staff, company, other_company
):
    client.force_login(staff)

    form = client.get("/admin/core/contact/add/").context["adminform"].form

    assert form.initial["company"] == company.pk
    # One named in the address (a link from another page) is kept.
    named = client.get(f"/admin/core/contact/add/?company={other_company.pk}")
    assert named.context["adminform"].form.initial["company"] == str(other_company.pk)


def test_staff_of_two_companies_choose_theirs(client, make_staff, company, other_company):
    member = make_staff("pablo", company, "admin")
    StaffMembership.objects.create(user=member, company=other_company, role="admin")
    staff_roles_sync(user=member)
    client.force_login(member)

    form = client.get("/admin/core/contact/add/").context["adminform"].form

    assert "company" not in form.initial
