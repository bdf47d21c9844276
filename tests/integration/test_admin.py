"""Integration credentials in the staff admin: issued with the token shown once, usable at
once, revocable, and visible only to staff of their company."""

import re

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone
from rest_framework.test import APIClient

from core.models import StaffMembership
from integration.models import IntegrationCredential
from integration.services import integration_credential_issue

pytestmark = [pytest.mark.django_db, pytest.mark.staff_permissions("integration")]

URL = "/admin/integration/integrationcredential/"


def test_a_credential_created_in_the_admin_shows_its_token_once_and_works(client, staff, company):
    client.force_login(staff)

    created = client.post(
        f"{URL}add/", {"company": company.pk, "name": "ERP", "scope": "read_write"}, follow=True
    )
    token = re.search(r"gi_[A-Za-z0-9_-]{40,}", created.content.decode()).group(0)
    later = client.get(f"{URL}{IntegrationCredential.objects.get().pk}/change/")

    credential = IntegrationCredential.objects.get(name="ERP")
    assert credential.scope == "read_write"
    assert credential.token_hash == IntegrationCredential.hash_token(token)
    assert token not in later.content.decode()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert api.get("/api/v1/contacts").status_code == 200


def test_revoking_in_the_admin_stops_the_token(client, staff, company):
    credential, token = integration_credential_issue(company=company, name="ERP")
    client.force_login(staff)
    before = timezone.now()

    # The action asks first (core.admin.credentials), then revokes on the confirmation's post.
    asked = client.post(URL, {"action": "revoke", "_selected_action": [credential.pk]})
    assert asked.status_code == 200 and 'id="confirm-revoke"' in asked.content.decode()
    client.post(URL, {"action": "revoke", "_selected_action": [credential.pk], "post": "yes"})

    credential.refresh_from_db()
    assert before <= credential.revoked_at <= timezone.now()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert api.get("/api/v1/contacts").status_code == 401


def test_staff_see_only_their_companys_credentials(client, staff, company, other_company):
    integration_credential_issue(company=company, name="Nuestro ERP")
    integration_credential_issue(company=other_company, name="ERP ajeno")
    client.force_login(staff)

    page = client.get(URL).content.decode()

    assert "Nuestro ERP" in page
    assert "ERP ajeno" not in page


def test_an_issued_credentials_scope_cannot_be_widened_in_place(client, staff, company):
    credential, _token = integration_credential_issue(company=company, name="Web")
    client.force_login(staff)

    client.post(f"{URL}{credential.pk}/change/", {"name": "Web shop", "scope": "read_write"})

    credential.refresh_from_db()
    assert credential.name == "Web shop"  # the change was saved...
    assert credential.scope == IntegrationCredential.Scope.READ  # ...but not the scope


def test_staff_who_may_only_view_credentials_cannot_revoke_them(client, company):
    viewer = User.objects.create_user("pablo", password="pw-pablo-123", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename="view_integrationcredential"))
    StaffMembership.objects.create(user=viewer, company=company, role="agent")
    credential, _ = integration_credential_issue(company=company, name="ERP")
    client.force_login(viewer)

    client.post(URL, {"action": "revoke", "_selected_action": [credential.pk], "post": "yes"})

    credential.refresh_from_db()
    assert credential.revoked_at is None
