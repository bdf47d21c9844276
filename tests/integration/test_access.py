"""Who can reach what: bearer credentials per company (shown once, stored hashed, revocable,
read or read-write), staff sessions on their own companies, and nothing of another company."""

from datetime import time

import httpx
import pytest
from django.contrib.auth import get_user_model
from django_fsm_log.models import StateLog
from rest_framework.test import APIClient

from agenda.models import Appointment, Service
from agenda.services import appointment_book, professional_create
from core.models import Contact, StaffMembership
from core.services import contact_create
from integration.models import IntegrationCredential
from integration.services import integration_credential_issue, integration_credential_revoke
from sales.services import opportunity_create
from support.services import case_open
from tests.factories import local
from tests.integration.conftest import reference_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def theirs(other_company, frozen_clock):
    """Another company's contact, appointment, opportunity and case."""
    contact = contact_create(company=other_company, first_name="Olga", phone="+34600999888")
    service = Service.objects.create(company=other_company, name="Radiografía")
    professional = professional_create(
        company=other_company,
        display_name="Dr. Ruiz",
        services=[service],
        weekly_hours=[(d, time(9), time(19)) for d in range(7)],
    )
    appointment = appointment_book(
        company=other_company,
        contact=contact,
        service=service,
        professional=professional,
        starts_at=local(2026, 12, 8, 10),
        created_via=Appointment.Via.STAFF,
    )
    opportunity = opportunity_create(company=other_company, contact=contact, title="Equipo")
    case = case_open(company=other_company, contact=contact, subject="Rayos", description="No va")
    return {
        "contact": contact,
        "service": service,
        "professional": professional,
        "appointment": appointment,
        "opportunity": opportunity,
        "case": case,
    }


# --- Tokens -----------------------------------------------------------------------------------


def test_a_credential_token_is_returned_once_and_stored_only_as_a_hash(company):
    credential, token = integration_credential_issue(company=company, name="ERP")

    assert token.startswith("gi_") and len(token) > 40
    assert credential.token_hash == IntegrationCredential.hash_token(token)
    assert token not in {f.value_from_object(credential) for f in credential._meta.fields}
    assert credential.scope == IntegrationCredential.Scope.READ  # least privilege by default


def test_a_missing_or_wrong_token_is_401_with_www_authenticate_over_http(live_server, rw_token):
    url = f"{live_server.url}/api/v1/contacts"

    missing = httpx.get(url)
    wrong = httpx.get(url, headers={"Authorization": "Bearer gi_not-a-token"})
    malformed = httpx.get(url, headers={"Authorization": "Bearer two words"})
    right = httpx.get(url, headers={"Authorization": f"Bearer {rw_token}"})

    assert missing.headers["WWW-Authenticate"] == "Bearer"
    for response in (wrong, malformed):  # RFC 6750: credentials came, and were wrong
        assert response.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'
    for response in (missing, wrong, malformed):
        assert response.status_code == 401
        assert response.headers["Content-Type"] == "application/json"
        assert response.json()["error_type"] == "PERMISSION"
        assert response.json()["code"] == "unauthenticated"
    assert right.status_code == 200


def test_a_gateway_token_is_not_an_integration_credential(live_server, token):
    response = httpx.get(
        f"{live_server.url}/api/v1/contacts", headers={"Authorization": f"Bearer {token}"}
    )

    assert response.status_code == 401


def test_a_revoked_credential_stops_working_at_once(company):
    credential, token = integration_credential_issue(company=company, name="ERP")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert client.get("/api/v1/contacts").status_code == 200

    integration_credential_revoke(credential=credential)

    assert client.get("/api/v1/contacts").status_code == 401


def test_use_is_recorded_on_the_credential(company):
    credential, token = integration_credential_issue(company=company, name="ERP")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    client.get("/api/v1/contacts")

    credential.refresh_from_db()
    assert credential.last_used_at is not None


def test_a_read_only_credential_reads_but_cannot_write(read_api, ana):
    listed = read_api.get("contacts")
    created = read_api.post("contacts", {"first_name": "Carla"})

    assert listed.status_code == 200
    assert listed.json()["count"] == 1
    assert created.status_code == 403
    assert created.json()["error_type"] == "PERMISSION"
    assert created.json()["code"] == "read_only_credential"
    assert Contact.objects.count() == 1


def test_a_read_only_credential_cannot_move_a_case(read_api, company, ana):
    case = case_open(company=company, contact=ana, subject="Grifo", description="Gotea")

    response = read_api.post(f"cases/{case.reference}/start")

    assert response.status_code == 403
    case.refresh_from_db()
    assert case.state == "open"


# --- Tenancy ----------------------------------------------------------------------------------


def test_another_companys_lists_are_empty(api, theirs):
    for resource in ("contacts", "services", "professionals", "appointments", "quotes"):
        body = api.get(resource).json()
        assert (resource, body["count"], body["results"]) == (resource, 0, [])
    assert api.get("opportunities").json()["results"] == []
    assert api.get("cases").json()["results"] == []


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("appointment", "appointments/{}"),
        ("opportunity", "opportunities/{}"),
        ("case", "cases/{}"),
        ("contact", "contacts/{}"),
        ("service", "services/{}"),
        ("professional", "professionals/{}"),
    ],
)
def test_another_companys_reference_is_not_found_not_forbidden(api, theirs, kind, path):
    entity = theirs[kind]
    reference = getattr(entity, "reference", None) or reference_of(entity)

    response = api.get(path.format(reference))

    assert response.status_code == 404
    assert response.json()["error_type"] == "NOT_FOUND"


@pytest.mark.parametrize(
    ("kind", "action"),
    [
        ("appointment", "appointments/{}/cancel"),
        ("opportunity", "opportunities/{}/qualify"),
        ("case", "cases/{}/start"),
    ],
)
def test_another_companys_reference_cannot_be_moved(api, theirs, kind, action):
    entity = theirs[kind]

    response = api.post(action.format(entity.reference))

    assert response.status_code == 404
    entity.refresh_from_db()
    assert entity.state in ("scheduled", "new", "open")


def test_another_companys_contact_cannot_be_booked_or_quoted(api, company, theirs, service, marta):
    booking = api.post(
        "appointments",
        {
            "contact": reference_of(theirs["contact"]),
            "service": reference_of(service),
            "professional": reference_of(marta),
            "starts_at": "2026-12-08T10:00:00",
        },
    )
    quoting = api.post(
        "quotes",
        {"contact": reference_of(theirs["contact"]), "items": [{"sku": "X", "quantity": 1}]},
    )

    assert booking.status_code == quoting.status_code == 404
    assert booking.json()["code"] == "contact_not_found"


def test_filtering_by_another_companys_contact_finds_nothing(api, theirs):
    body = api.get("appointments", contact=reference_of(theirs["contact"])).json()

    assert body["results"] == []


# --- Staff sessions (browsable API) -----------------------------------------------------------


@pytest.mark.staff_permissions()  # none: browsing the API needs no admin permission
def test_staff_browse_their_own_company_only(staff, ana, theirs):
    client = APIClient()
    client.force_login(staff)

    mine = client.get("/api/v1/contacts")
    html = client.get("/api/v1/contacts", HTTP_ACCEPT="text/html")
    foreign = client.get(f"/api/v1/cases/{theirs['case'].reference}")

    assert [c["first_name"] for c in mine.json()["results"]] == ["Ana"]
    assert html.status_code == 200 and b"Ana" in html.content
    assert foreign.status_code == 404


def test_staff_of_several_companies_name_the_one_they_work_on(staff, other_company, theirs):
    StaffMembership.objects.create(user=staff, company=other_company)
    client = APIClient()
    client.force_login(staff)

    unnamed = client.get("/api/v1/cases")
    named = client.get("/api/v1/cases", HTTP_X_GARANTE_COMPANY=other_company.slug)

    assert unnamed.status_code == 403
    assert unnamed.json()["code"] == "company_required"
    assert [c["reference"] for c in named.json()["results"]] == [theirs["case"].reference]


def test_a_logged_in_user_who_is_not_staff_is_not_let_in(company):
    user = get_user_model().objects.create_user("cliente", password="x")
    StaffMembership.objects.create(user=user, company=company)
    client = APIClient()
    client.force_login(user)

    assert client.get("/api/v1/contacts").status_code == 401


def test_staff_writes_go_through_the_same_engine_and_are_recorded_as_theirs(staff, company, ana):
    client = APIClient()
    client.force_login(staff)
    case = case_open(company=company, contact=ana, subject="Grifo", description="Gotea")

    response = client.post(
        f"/api/v1/cases/{case.reference}/start", {}, format="json", HTTP_IDEMPOTENCY_KEY="k-1"
    )

    assert response.status_code == 200
    assert StateLog.objects.get(object_id=case.pk, transition="start").by == staff
