"""Deviations schemathesis found between the OpenAPI documents and the servers, each pinned
where it was fixed: the server's answer or the document's promise."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from core.errors import RULE_CODES
from core.models import Contact
from tests.integration.conftest import reference_of

pytestmark = pytest.mark.django_db


def test_a_reference_ending_in_a_newline_gets_the_json_404(api):
    response = api.client.post("/api/v1/appointments/AP-%0A/cancel", HTTP_IDEMPOTENCY_KEY="k-1")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "not_found"


@pytest.mark.parametrize(
    "path", ["/api/tools/no_such_tool", "/api/nothing/here", "/api/v1/cases/CS-1%0A"]
)
def test_every_unknown_path_under_api_answers_json(path):
    response = Client().post(path, data="{}", content_type="application/json")

    assert response.status_code == 404
    assert response.json()["error_type"] == "NOT_FOUND"


def test_the_admin_keeps_django_s_html_404():
    response = Client().get("/admin-nothing/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_the_slots_document_describes_the_one_object_the_list_answers():
    document = APIClient().get("/api/v1/schema/?format=json").json()

    body = document["paths"]["/api/v1/slots"]["get"]["responses"]["200"]["content"]
    assert body["application/json"]["schema"] == {"$ref": "#/components/schemas/SlotListOut"}


@pytest.mark.parametrize(
    "field, value",
    [("first_name", 0), ("first_name", 1.5), ("last_name", 7), ("email", 5)],
)
def test_a_string_field_refuses_a_number_instead_of_storing_its_text(api, field, value):
    body = {"first_name": "Carla", field: value}

    response = api.post("contacts", body)

    assert response.status_code == 422, response.content
    assert [e["field"] for e in response.json()["problems"]] == [field]
    assert not Contact.objects.filter(first_name__in=["0", "1.5", "Carla"]).exists()


@pytest.mark.parametrize("quantity", ["2", 2.0, True])
def test_an_integer_field_refuses_text_floats_and_booleans(api, ana, catalog, quantity):
    items = [{"sku": catalog.coffee.sku, "quantity": quantity}]
    response = api.post("quotes", {"contact": reference_of(ana), "items": items})

    assert response.status_code == 422, response.content
    assert response.json()["problems"][0]["field"] == "items.0.quantity"


@pytest.mark.parametrize("amount", [12, "1e2", " 5", "-1", "", "1.", ".5"])
def test_an_amount_is_a_string_of_plain_digits_as_documented(api, ana, amount):
    response = api.post(
        "opportunities", {"contact": reference_of(ana), "title": "T", "amount": amount}
    )

    assert response.status_code == 422, response.content
    assert [e["field"] for e in response.json()["problems"]] == ["amount"]


def test_the_documented_amount_pattern_is_the_one_the_server_applies(api, ana):
    document = APIClient().get("/api/v1/schema/?format=json").json()
    amount = document["components"]["schemas"]["OpportunityInRequest"]["properties"]["amount"]
    response = api.post(
        "opportunities", {"contact": reference_of(ana), "title": "T", "amount": "1234.5"}
    )

    assert amount["pattern"] == r"^[0-9]{1,11}(?:\.[0-9]{1,3})?$"
    assert response.status_code == 201, response.content


def test_quote_items_document_their_bounds():
    document = APIClient().get("/api/v1/schema/?format=json").json()

    items = document["components"]["schemas"]["QuoteInRequest"]["properties"]["items"]
    assert items["minItems"] == 1 and items["maxItems"] >= 1


def test_a_date_range_in_the_wrong_order_has_its_own_declared_code(api):
    response = api.get("cases", date_from="2026-12-08", date_to="2026-12-07")

    assert response.status_code == 422
    assert response.json()["code"] == "invalid_date_range"
    assert "invalid_date_range" in RULE_CODES


def test_both_documents_declare_the_rule_codes():
    v1 = APIClient().get("/api/v1/schema/?format=json").json()
    mirror = Client().get("/api/openapi.json").json()

    assert v1["info"]["x-rule-codes"] == mirror["info"]["x-rule-codes"] == sorted(RULE_CODES)
    assert "invalid_request" not in RULE_CODES and "invalid_arguments" not in RULE_CODES


def test_the_ordering_parameter_lists_what_the_server_takes():
    document = APIClient().get("/api/v1/schema/?format=json").json()

    ordering = next(
        p
        for p in document["paths"]["/api/v1/contacts"]["get"]["parameters"]
        if p["name"] == "ordering"
    )
    assert (
        "first_name" in ordering["schema"]["enum"] and "-created_at" in ordering["schema"]["enum"]
    )
