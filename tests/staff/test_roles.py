"""Staff roles: the groups the data migration creates, and memberships keeping users in them."""

import re

import pytest
from django.contrib.auth.models import Group, User

from core.models import GatewayCredential, StaffMembership
from core.roles import staff_membership_remove, staff_membership_set

pytestmark = pytest.mark.django_db


def permissions_of(role: str) -> set[str]:
    return {
        f"{p.content_type.app_label}.{p.codename}"
        for p in Group.objects.get(name=role).permissions.select_related("content_type")
    }


def test_the_migration_created_the_four_role_groups():
    assert set(Group.objects.values_list("name", flat=True)) >= {
        "agent",
        "sales",
        "supervisor",
        "admin",
    }


@pytest.mark.parametrize(
    ("role", "granted", "refused"),
    [
        (
            "agent",
            {
                "agenda.view_appointment",
                "agenda.change_appointment",
                "support.change_case",
                "support.add_casecomment",
                "tooling.view_toolcall",
                "core.view_securityevent",
                "agenda.add_timeoff",
                "agenda.change_timeoff",
            },
            {
                "agenda.delete_timeoff",
                "agenda.add_workinghours",
                "sales.add_quote",
                "core.view_gatewaycredential",
                "core.add_gatewaycredential",
                "integration.view_integrationcredential",
                "core.add_staffmembership",
                "sales.change_quote",
                "core.add_verificationchallenge",
            },
        ),
        (
            "sales",
            {
                "sales.add_quote",
                "sales.change_quote",
                "sales.add_opportunity",
                "sales.change_opportunity",
                "sales.view_product",
                "agenda.change_appointment",
                "agenda.add_timeoff",
                "core.change_contact",
            },
            {
                "sales.change_product",
                "sales.add_pricelistitem",
                "sales.view_salessettings",
                "core.add_verificationchallenge",
                "core.view_staffmembership",
                "agenda.add_workinghours",
            },
        ),
        (
            "supervisor",
            {
                "sales.change_quote",
                "sales.change_opportunity",
                "agenda.change_professional",
                "core.add_verificationchallenge",
                "core.view_idempotencyrecord",
                "core.view_staffmembership",
            },
            {
                "core.view_gatewaycredential",
                "core.add_staffmembership",
                "core.change_stepuppolicy",
            },
        ),
        (
            "admin",
            {
                "core.add_gatewaycredential",
                "core.change_gatewaycredential",
                "integration.add_integrationcredential",
                "core.add_staffmembership",
                "core.change_stepuppolicy",
                "core.change_company",
                "tooling.view_toolcall",
            },
            {"core.add_company", "core.delete_company", "auth.add_user", "auth.change_user"},
        ),
    ],
)
def test_each_role_grants_what_the_job_needs_and_nothing_more(role, granted, refused):
    permissions = permissions_of(role)

    assert granted <= permissions
    assert not refused & permissions


def test_a_membership_puts_the_user_in_its_role_group_and_makes_them_staff(sol):
    user = User.objects.create_user("nuevo", password="x")

    staff_membership_set(user=user, company=sol, role="agent")

    user = User.objects.get(pk=user.pk)
    assert user.is_staff
    assert list(user.groups.values_list("name", flat=True)) == ["agent"]
    assert user.has_perm("agenda.change_appointment")
    assert not user.has_perm("core.add_gatewaycredential")


def test_changing_the_role_moves_the_user_to_the_new_group(sol):
    user = User.objects.create_user("nuevo", password="x")
    staff_membership_set(user=user, company=sol, role="agent")

    staff_membership_set(user=user, company=sol, role="admin")

    assert StaffMembership.objects.get(user=user).role == "admin"
    assert list(user.groups.values_list("name", flat=True)) == ["admin"]


def test_removing_the_last_membership_takes_the_user_out_of_every_role(sol, luna):
    user = User.objects.create_user("nuevo", password="x")
    staff_membership_set(user=user, company=sol, role="agent")
    staff_membership_set(user=user, company=luna, role="supervisor")

    staff_membership_remove(memberships=StaffMembership.objects.filter(company=sol))
    assert list(user.groups.values_list("name", flat=True)) == ["supervisor"]

    staff_membership_remove(memberships=StaffMembership.objects.filter(user=user))
    assert not user.groups.exists()


def test_an_admin_changes_a_role_in_the_admin_and_the_groups_follow(client, sol_admin, agent):
    membership = StaffMembership.objects.get(user=agent)
    client.force_login(sol_admin)

    response = client.post(
        f"/admin/core/staffmembership/{membership.pk}/change/", {"role": "supervisor"}
    )

    assert response.status_code == 302
    assert list(agent.groups.values_list("name", flat=True)) == ["supervisor"]


def test_an_admin_cannot_hand_a_membership_to_another_companys_staff(
    client, sol_admin, agent, luna_agent, sol
):
    client.force_login(sol_admin)

    form = client.get("/admin/core/staffmembership/add/").content.decode()
    response = client.post(
        "/admin/core/staffmembership/add/",
        {"user": luna_agent.pk, "company": sol.pk, "role": "admin"},
    )

    assert "agente.sol" in form
    assert "agente.luna" not in form
    assert response.status_code == 200  # the form refuses the choice
    assert not StaffMembership.objects.filter(user=luna_agent, company=sol).exists()


def test_agents_cannot_see_gateway_credentials_and_admins_manage_them(
    client, agent, sol_admin, sol
):
    client.force_login(agent)
    assert client.get("/admin/core/gatewaycredential/").status_code == 403

    client.force_login(sol_admin)
    created = client.post(
        "/admin/core/gatewaycredential/add/", {"company": sol.pk, "name": "whatsapp"}, follow=True
    )
    credential = GatewayCredential.objects.get(name="whatsapp")
    shown = [str(m) for m in created.context["messages"]]
    # Revoking cannot be undone: the action first shows what it will do, and revokes nothing.
    asked = client.post(
        "/admin/core/gatewaycredential/",
        {"action": "revoke", "_selected_action": [credential.pk]},
    )
    assert 'id="confirm-revoke"' in asked.content.decode()
    assert GatewayCredential.objects.get(pk=credential.pk).revoked_at is None
    revoked = client.post(
        "/admin/core/gatewaycredential/",
        {"action": "revoke", "_selected_action": [credential.pk], "post": "yes"},
        follow=True,
    )

    token = re.fullmatch(r"Copie este token ahora; no se volverá a mostrar: (gt_\S+)", shown[0])
    assert token is not None and token.group(1).startswith(credential.token_prefix), shown
    assert shown[1:] == [
        f'Se ha añadido «<a href="/admin/core/gatewaycredential/{credential.pk}'
        f'/change/">whatsapp ({credential.token_prefix}…)</a>» (credencial del Gateway).'
    ]
    token_page = client.get(f"/admin/core/gatewaycredential/{credential.pk}/change/")
    assert credential.token_hash not in token_page.content.decode()
    assert revoked.status_code == 200
    # Staff are told how long other servers may still accept it (core.process_cache).
    (told,) = [str(m) for m in revoked.context["messages"]]
    assert told == (
        "Se revocaron 1 credencial(es); todos los servidores las rechazan en "
        "1 segundo como máximo."  # the default lifetime, where no Redis tells them at once
    )
    credential.refresh_from_db()
    assert credential.revoked_at is not None
