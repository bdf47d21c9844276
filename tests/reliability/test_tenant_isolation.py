"""Tenant isolation: every tool, over MCP and over its /api/tools endpoint, called with a second
company's token and the first company's references and customers' identifiers, even from a
conversation with the very same id as the first company's; and every operation of the
integration API (/api/v1, taken from its OpenAPI document) called with a second company's
read-write credential on the first company's references: nothing of the first company is
shown, and nothing of it changes."""

import re
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone

from agenda.models import Appointment, Professional, Service
from core.errors import HTTP_STATUS
from core.identity import identify_contact
from core.models import Company, Contact, Conversation
from core.services import contact_create
from integration.models import IntegrationCredential
from integration.services import integration_credential_issue, public_references_assign
from sales.models import Opportunity, Product, Quote
from support.models import Case
from tests.factories import ANA_DOCUMENT, ANA_EMAIL, ANA_PHONE_NATIONAL, BRUNO_DOCUMENT, BRUNO_EMAIL
from tests.reliability.conftest import Gateway, assert_clean_wire, unique
from tests.reliability.tenants import arguments_for, production_tools, seeded_sandbox, snapshot

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SHARED_CONVERSATION = "conversation-7"  # both companies' Gateways may use the same id
CARLA = "87654321X"  # the second company's own customer
PRIVATE = [
    "García",
    "López",
    ANA_DOCUMENT,
    BRUNO_DOCUMENT,
    ANA_PHONE_NATIONAL,
    "600333444",
    ANA_EMAIL,
    BRUNO_EMAIL,
    '"Ana"',
    '"Bruno"',
]


def first_company_sees_its_things(server_url: str, token: str) -> dict[str, str]:
    """The first company's Gateway, in SHARED_CONVERSATION: identify Ana and read what she has,
    so its exposure ledger holds every reference."""
    gateway = Gateway(server_url, token)
    conv = SHARED_CONVERSATION
    identified = gateway.call(
        "identify_contact", {"document": ANA_DOCUMENT}, conversation=conv, key="a-id"
    )
    assert identified.result["isError"] is False, identified.text
    day = (timezone.now() + timedelta(days=7)).date().isoformat()
    slots = gateway.call(
        "find_available_slots", {"service": "Corte de pelo", "from": day}, conversation=conv
    )
    appointments = gateway.call(
        "list_my_appointments", {"identifier": ANA_DOCUMENT}, conversation=conv
    )
    quotes = gateway.call("list_my_quotes", {"identifier": ANA_DOCUMENT}, conversation=conv)
    cases = gateway.call("list_my_cases", {"identifier": ANA_DOCUMENT}, conversation=conv)
    gateway.close()
    by_state = {c["state"]: c["reference"] for c in cases.body["items"]}
    return {
        "day": day,
        "slot": slots.body["items"][0]["slot"],
        "appointment": appointments.body["items"][0]["appointment"],
        "quote": quotes.body["items"][0]["reference"],
        "case": by_state["open"],
        "closed_case": by_state["closed"],
        "resolved_case": by_state["resolved"],
    }


def leaks(text: str, sent: dict[str, Any], foreign_references: set[str]) -> list[str]:
    sent_text = str(sent)
    found = [p for p in PRIVATE if p in text and p.strip('"') not in sent_text]
    found += [r for r in foreign_references if r in text and r not in sent_text]
    return found


def test_a_second_companys_token_reaches_nothing_of_the_first_company_through_any_tool(
    gunicorn_server, other_company: Company, other_token: str
):
    first, token = seeded_sandbox()
    carla = contact_create(
        company=other_company, first_name="Carla", document_number=CARLA, phone="+34600999888"
    )
    own = Conversation.objects.create(company=other_company, external_id=SHARED_CONVERSATION)
    identify_contact(conversation=own, kind="document", value=carla.document_number)
    server = gunicorn_server(workers=2, threads=4)
    refs = first_company_sees_its_things(server.url, token)
    foreign = (
        set(Appointment.objects.filter(company=first).values_list("reference", flat=True))
        | set(Quote.objects.filter(company=first).values_list("reference", flat=True))
        | set(Case.objects.filter(company=first).values_list("reference", flat=True))
        | set(Opportunity.objects.filter(company=first).values_list("reference", flat=True))
        | {refs["slot"]}
    )
    before = snapshot(first)
    tools = production_tools()
    assert set(tools) == set(arguments_for(ANA_DOCUMENT, refs)), "add every new tool to this matrix"

    intruder = Gateway(server.url, other_token)
    rest = httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {other_token}"}, timeout=30
    )
    problems = []
    for identifier in (ANA_DOCUMENT, CARLA):
        matrix = arguments_for(identifier, refs)
        for name in tools:
            sent = matrix[name]
            mcp = intruder.call(name, sent, conversation=SHARED_CONVERSATION, key=unique("x"))
            headers = {"X-Conversation-Id": SHARED_CONVERSATION, "Idempotency-Key": unique("x")}
            mirrored = rest.post(f"/api/tools/{name}", json=sent, headers=headers)
            # MCP answers every call 200 (an error is a result); the mirror answers the status
            # its error type names; neither fails (SYSTEM) on another company's things.
            mirrored_type = mirrored.json()["error_type"] if mirrored.status_code != 200 else None
            assert mcp.status == 200, (name, mcp.text[:300])
            assert mirrored.status_code == HTTP_STATUS.get(mirrored_type, 200), mirrored.text[:300]
            assert "SYSTEM" not in (mcp.error_type, mirrored_type), (name, mcp.text[:300])
            for surface, text in (("mcp", mcp.text), ("rest", mirrored.text)):
                assert_clean_wire(text)
                found = leaks(text, sent, foreign)
                if found:
                    problems.append(f"{surface} {name} as {identifier}: {found} in {text[:300]}")
            # Posing as the first company's customer, or naming its service, never succeeds.
            if identifier == ANA_DOCUMENT and name not in ("list_services", "search_products"):
                assert mcp.result["isError"] is True, (name, mcp.text[:300])
                assert mirrored.status_code >= 400, (name, mirrored.text[:300])
    intruder.close()
    rest.close()

    assert problems == []
    assert snapshot(first) == before


# --- the integration API ------------------------------------------------------------------


def first_company_references(first: Company) -> dict[str, list[str]]:
    """Every reference the integration API shows of the first company, by resource."""

    def shown(model: type, kind: str) -> list[str]:
        ids = list(model.objects.filter(company=first).values_list("pk", flat=True))
        return list(public_references_assign(company=first, kind=kind, ids=ids).values())

    def own(model: type) -> list[str]:
        return list(model.objects.filter(company=first).values_list("reference", flat=True))

    return {
        "appointments": own(Appointment),
        "cases": own(Case),
        "opportunities": own(Opportunity),
        "quotes": own(Quote),
        "contacts": shown(Contact, "contact"),
        "services": shown(Service, "service"),
        "professionals": shown(Professional, "professional"),
        "products": list(Product.objects.filter(company=first).values_list("sku", flat=True)),
    }


def api_requests(refs: dict[str, list[str]], day: str) -> dict[tuple[str, str], dict[str, Any]]:
    """For each operation of the integration API (method, path template), what it is sent:
    query parameters or a body naming the first company's customer, service, professional and
    products. Operations on one record get the first company's references in the path."""
    ana, service, professional = refs["contacts"][0], refs["services"][0], refs["professionals"][0]
    by_contact = {"query": {"contact": ana}}
    at = f"{day}T10:00:00"
    return {
        ("get", "/api/v1/appointments"): {"query": {"contact": ana, "service": service}},
        ("post", "/api/v1/appointments"): {
            "body": {
                "contact": ana,
                "service": service,
                "professional": professional,
                "starts_at": at,
            }
        },
        ("post", "/api/v1/appointments/{reference}/reschedule"): {"body": {"starts_at": at}},
        ("get", "/api/v1/cases"): by_contact,
        ("post", "/api/v1/cases"): {
            "body": {
                "contact": ana,
                "subject": "Sigue igual",
                "description": "Vuelve a pasar.",
                "related_case": refs["cases"][0],
            }
        },
        ("get", "/api/v1/contacts"): {"query": {"document_number": ANA_DOCUMENT}},
        # A contact of its own with the same document: the second company's business.
        ("post", "/api/v1/contacts"): {
            "body": {"first_name": "Ana", "document_number": ANA_DOCUMENT}
        },
        ("get", "/api/v1/opportunities"): by_contact,
        ("post", "/api/v1/opportunities"): {"body": {"contact": ana, "title": "Equipo"}},
        ("post", "/api/v1/opportunities/{reference}/lose"): {"body": {"reason": "Otro"}},
        ("get", "/api/v1/products"): {"query": {"search": "Café"}},
        ("get", "/api/v1/professionals"): {"query": {"service": service}},
        ("get", "/api/v1/quotes"): by_contact,
        ("post", "/api/v1/quotes"): {
            "body": {
                "contact": ana,
                "items": [{"sku": refs["products"][0], "quantity": 1}],
                "opportunity": refs["opportunities"][0],
            }
        },
        ("get", "/api/v1/services"): {"query": {}},
        ("get", "/api/v1/slots"): {
            "query": {"service": service, "professional": professional, "date_from": day}
        },
    }


def operations(document: dict[str, Any]) -> list[tuple[str, str]]:
    methods = ("get", "post", "put", "patch", "delete")
    return [(m, path) for path, ops in document["paths"].items() for m in ops if m in methods]


def test_a_second_companys_credential_reaches_nothing_of_the_first_company_through_the_api(
    gunicorn_server, other_company: Company
):
    first, _ = seeded_sandbox()
    refs = first_company_references(first)
    assert all(refs.values()), refs
    _, token = integration_credential_issue(
        company=other_company, name="intruder", scope=IntegrationCredential.Scope.READ_WRITE
    )
    day = (timezone.now() + timedelta(days=7)).date().isoformat()
    foreign = {ref for kind, values in refs.items() if kind != "products" for ref in values}
    private = [
        *PRIVATE,
        *Service.objects.filter(company=first).values_list("name", flat=True),
        *Product.objects.filter(company=first).values_list("name", flat=True),
    ]
    before = snapshot(first)
    server = gunicorn_server(workers=2, threads=4)
    api = httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    document = api.get("/api/v1/schema/?format=json").json()
    matrix = api_requests(refs, day)

    problems = []
    for method, template in operations(document):
        resource, on_one = template.split("/")[3], "{" in template
        if on_one:
            assert resource in refs, f"add the references of {template} to this matrix"
            path = re.sub(r"\{\w+\}", refs[resource][0], template)
        else:
            path = template
            assert (method, template) in matrix, f"add {method.upper()} {template} to this matrix"
        sent = matrix.get((method, template), {})
        headers = {"Idempotency-Key": unique("x")} if method != "get" else {}
        if method == "get":
            response = api.get(path, params=sent.get("query"))
        else:
            response = api.request(method, path, json=sent.get("body", {}), headers=headers)
        text, label = response.text, f"{method.upper()} {template}"
        assert response.status_code < 500, (label, text[:300])
        assert_clean_wire(text)
        sent_text = f"{path} {sent}"
        found = [p for p in private if p in text and p.strip('"') not in sent_text]
        found += [r for r in foreign if r in text and r not in sent_text]
        if found:
            problems.append(f"{label}: {found} in {text[:300]}")
        if on_one:  # another company's record does not exist for this credential
            assert response.status_code == 404, (label, text[:300])
        elif method == "get":
            assert response.status_code in (200, 404), (label, text[:300])
            if response.status_code == 200:
                assert response.json()["results"] == [], (label, text[:300])
        elif resource != "contacts":  # a write naming the first company's things is refused
            assert 400 <= response.status_code < 500, (label, text[:300])
    api.close()

    assert problems == []
    assert snapshot(first) == before
