"""Contacts, the agenda's catalogue, and support cases over the integration API."""

import pytest

from core.models import Contact
from core.services import contact_create
from support.models import Case
from support.services import case_open
from tests.integration.conftest import reference_of

pytestmark = pytest.mark.django_db


def test_a_contact_is_created_with_normalised_identifiers_and_a_public_reference(api):
    response = api.post(
        "contacts",
        {"first_name": "Carla", "phone": "600 444 555", "email": "Carla@Example.com"},
    )

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["reference"].startswith("CT-")
    assert (body["phone"], body["email"]) == ("+34600444555", "carla@example.com")
    assert api.get(f"contacts/{body['reference']}").json() == body


def test_a_duplicate_identifier_is_refused_not_a_server_error(api, ana):
    response = api.post("contacts", {"first_name": "Otra", "phone": "+34 600 111 222"})

    assert response.status_code == 422
    assert response.json()["code"] == "contact_exists"
    assert Contact.objects.count() == 1


def test_an_invalid_phone_is_a_validation_error(api):
    response = api.post("contacts", {"first_name": "Carla", "phone": "12"})

    assert response.status_code == 422
    assert response.json()["error_type"] == "VALIDATION"


def test_contacts_are_found_by_an_identifier_in_any_spelling(api, ana):
    found = api.get("contacts", phone="600 111 222").json()
    missing = api.get("contacts", email="nadie@example.com").json()

    assert [c["first_name"] for c in found["results"]] == ["Ana"]
    assert missing["results"] == []


def test_a_contacts_reference_is_stable(api, ana):
    first = api.get("contacts").json()["results"][0]["reference"]
    second = api.get("contacts").json()["results"][0]["reference"]

    assert first == second == reference_of(ana)


def test_services_and_professionals_are_listed_with_references(api, service, marta):
    services = api.get("services").json()["results"]
    professionals = api.get("professionals", service=reference_of(service)).json()["results"]

    assert [(s["reference"], s["name"]) for s in services] == [
        (reference_of(service), "Corte de pelo")
    ]
    assert professionals == [
        {
            "reference": reference_of(marta),
            "display_name": "Marta",
            "active": True,
            "services": [reference_of(service)],
        }
    ]


def test_lists_are_paginated_with_a_stable_order(api, company):
    for n in range(5):
        contact_create(company=company, first_name="Igual", email=f"c{n}@example.com")

    first = api.get("contacts", limit=2).json()
    second = api.client.get(first["next"]).json()
    third = api.client.get(second["next"]).json()

    seen = [c["email"] for page in (first, second, third) for c in page["results"]]
    assert sorted(seen) == [f"c{n}@example.com" for n in range(5)]
    assert first["count"] == 5 and first["next"] and third["next"] is None


def test_a_case_is_opened_and_worked_to_closed_which_is_final(api, ana):
    opened = api.post(
        "cases",
        {
            "contact": reference_of(ana),
            "subject": "Grifo",
            "description": "Gotea desde ayer",
            "priority": "high",
        },
    )
    reference = opened.json()["reference"]

    states = [
        api.post(f"cases/{reference}/{step}").json()["state"]
        for step in ("start", "wait-for-customer", "resume", "resolve", "reopen", "resolve")
    ]
    closed = api.post(f"cases/{reference}/close")
    reopened = api.post(f"cases/{reference}/reopen")

    assert opened.status_code == 201
    assert (opened.json()["channel"], opened.json()["priority"]) == ("other", "high")
    assert states == [
        "in_progress",
        "waiting_customer",
        "in_progress",
        "resolved",
        "in_progress",
        "resolved",
    ]
    assert closed.json()["state"] == "closed"
    assert reopened.status_code == 422
    assert (reopened.json()["code"], reopened.json()["state"]) == ("case_closed", "closed")


def test_a_follow_up_case_links_the_earlier_one(api, company, ana):
    earlier = case_open(company=company, contact=ana, subject="Grifo", description="Gotea")

    response = api.post(
        "cases",
        {
            "contact": reference_of(ana),
            "subject": "Sigue",
            "description": "Vuelve a gotear",
            "related_case": earlier.reference,
        },
    )

    assert response.json()["related_case"] == earlier.reference


def test_cases_are_filtered_by_state_and_priority(api, company, ana):
    case_open(company=company, contact=ana, subject="A", description="a", priority="urgent")
    case_open(company=company, contact=ana, subject="B", description="b")

    urgent = api.get("cases", priority="urgent", state="open").json()["results"]

    assert [c["subject"] for c in urgent] == ["A"]
    assert Case.objects.count() == 2
