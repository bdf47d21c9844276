"""The one JSON error shape for everything that can go wrong before or around a service call:
routing, methods, bodies, throttling, and a database that is down (503, never a 500 page)."""

import logging

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from core.boundary import as_garante_error
from core.models import StaffMembership
from core.roles import staff_membership_set
from support.models import Case
from support.services import case_open

pytestmark = pytest.mark.django_db

ERROR_KEYS = {"error_type", "user_message", "code"}


def test_an_unknown_path_under_the_api_is_a_json_404(api):
    for path in ("/api/v1/nothing", "/api/v1/appointments/AP-1/nothing", "/api/v1/contacts/"):
        response = api.client.get(path)
        assert response.status_code == 404, path
        assert response["Content-Type"] == "application/json"
        assert response.json()["error_type"] == "NOT_FOUND"


def test_a_wrong_method_is_405_in_the_error_shape(api, company, ana):
    response = api.client.delete("/api/v1/contacts")
    put = api.client.put("/api/v1/contacts", {}, format="json")

    assert response.status_code == put.status_code == 405
    assert response.json()["code"] == "method_not_allowed"
    assert "GET" in response["Allow"]


def test_malformed_json_is_400_validation(api):
    response = api.client.post(
        "/api/v1/contacts",
        b"{not json",
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="k",
    )

    assert response.status_code == 400
    assert (response.json()["error_type"], response.json()["code"]) == (
        "VALIDATION",
        "malformed_json",
    )


def test_a_body_that_is_not_json_is_415(api):
    response = api.client.post(
        "/api/v1/contacts", "first_name=Ana", content_type="text/plain", HTTP_IDEMPOTENCY_KEY="k"
    )

    assert response.status_code == 415
    assert response.json()["error_type"] == "VALIDATION"


def test_json_in_another_charset_is_415_as_on_the_tool_api(api):
    body = '{"first_name": "Begoña"}'
    answers = {
        charset: api.client.post(
            "/api/v1/contacts",
            body.encode(charset),
            content_type=f"application/json; charset={charset}",
            HTTP_IDEMPOTENCY_KEY=f"k-{charset}",
        )
        for charset in ("latin-1", "utf-16")
    }

    for charset, response in answers.items():
        assert response.status_code == 415, charset
        assert response.json()["code"] == "unsupported_media_type"
    bad_bytes = api.client.post(
        "/api/v1/contacts",
        body.encode("latin-1"),
        content_type="application/json; charset=utf-8",
        HTTP_IDEMPOTENCY_KEY="k-bytes",
    )
    assert (bad_bytes.status_code, bad_bytes.json()["code"]) == (400, "malformed_json")


def test_a_body_that_is_not_an_object_is_422(api):
    response = api.post("contacts", ["Ana"])

    assert response.status_code == 422
    assert response.json()["code"] == "invalid_request"


def test_field_problems_are_listed_by_field_including_nested_ones(api, ana):
    response = api.post(
        "quotes", {"contact": "not a reference!", "items": [{"sku": "A", "quantity": 0}]}
    )

    assert response.status_code == 422
    body = response.json()
    assert {e["field"] for e in body["problems"]} == {"contact", "items.0.quantity"}
    assert set(body) == ERROR_KEYS | {"problems", "errors"}


def test_errors_is_the_deprecated_alias_of_problems_cut_alike(api):
    response = api.post("contacts", {f"extra_{n}": n for n in range(25)})

    assert response.status_code == 422
    body = response.json()
    assert len(body["problems"]) == 20 and body["problems_omitted"] == 5
    assert body["errors"] == [
        {"field": p["field"], "problem": p["message"]} for p in body["problems"]
    ]


def test_a_problem_never_repeats_the_value_sent(api):
    sent = "<b>zq-sent-value</b>"
    answers = [
        api.get("quotes", state=sent),
        api.post("cases", {"subject": "S", "channel": sent, "priority": sent}),
    ]

    for response in answers:
        assert response.status_code == 422
        body = response.json()
        assert body["problems"] and "zq-sent-value" not in response.content.decode()
    assert {p["message"] for p in answers[0].json()["problems"]} == {
        "No es una de las opciones admitidas."
    }


def test_a_django_validator_that_names_the_value_is_answered_in_words_of_ours():
    refused = ValidationError(
        {
            "amount": ValidationError(
                "“%(value)s” value must be a decimal number.",
                code="invalid",
                params={"value": "DNI 12345678Z"},
            ),
            "notes": ValidationError(
                "Ensure this value has at most %(limit_value)d characters (it has %(show_value)d).",
                code="max_length",
                params={"limit_value": 300, "show_value": 301, "value": "x" * 301},
            ),
        }
    )

    error = as_garante_error(refused, logger=logging.getLogger("test"))

    assert error.extras["problems"] == [
        {"field": "amount", "message": "Ese valor no se admite aquí."},
        {
            "field": "notes",
            "message": "Ensure this value has at most 300 characters (it has 301).",
        },
    ]


def test_too_many_requests_are_429_with_retry_after(api, settings):
    caches["shared"].clear()
    settings.REST_FRAMEWORK = settings.REST_FRAMEWORK | {
        "DEFAULT_THROTTLE_RATES": {"integration": "2/minute"}
    }

    statuses = [api.get("contacts").status_code for _ in range(3)]
    response = api.get("contacts")

    assert statuses == [200, 200, 429]
    assert response.json()["code"] == "throttled"
    assert int(response["Retry-After"]) >= 1
    caches["shared"].clear()


@pytest.mark.postgres
def test_a_database_outage_is_a_503_system_error_not_a_500_page(gunicorn_server, rw_token):
    server = gunicorn_server(workers=1, database_url="postgres://postgres@127.0.0.1:9/unreachable")
    headers = {"Authorization": f"Bearer {rw_token}", "Idempotency-Key": "k-1"}

    read = httpx.get(f"{server.url}/api/v1/appointments", headers=headers, timeout=30)
    write = httpx.post(f"{server.url}/api/v1/contacts", json={}, headers=headers, timeout=30)

    for response in (read, write):
        assert response.status_code == 503, server.log()
        assert response.headers["Content-Type"] == "application/json"
        assert (response.json()["error_type"], response.json()["code"]) == (
            "SYSTEM",
            "database_unavailable",
        )
        assert "Traceback" not in response.text


@pytest.mark.parametrize("method", ["post", "delete", "put"])
@pytest.mark.parametrize("path", ["/api/v1/contacts/", "/api/v1/nothing-here"])
def test_a_write_to_an_unknown_path_is_the_json_404_not_a_csrf_page(rw_token, method, path):
    client = APIClient(enforce_csrf_checks=True)  # as a real client: Django's CSRF applies

    response = getattr(client, method)(
        path,
        {"first_name": "Ana"},
        format="json",
        HTTP_AUTHORIZATION=f"Bearer {rw_token}",
        HTTP_IDEMPOTENCY_KEY="k-1",
    )

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["error_type"] == "NOT_FOUND"


def test_a_staff_write_without_the_csrf_token_is_a_translated_refusal(company, ana):
    user = get_user_model().objects.create_user("marta", password="x", is_staff=True)
    staff_membership_set(user=user, company=company, role=StaffMembership.Role.ADMIN)
    case = case_open(company=company, contact=ana, subject="Grifo", description="Gotea")
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(user)

    response = client.post(
        f"/api/v1/cases/{case.reference}/start", {}, format="json", HTTP_IDEMPOTENCY_KEY="k-1"
    )

    assert response.status_code == 403
    body = response.json()
    assert (body["error_type"], body["code"]) == ("PERMISSION", "csrf_failed")
    assert body["user_message"] == (
        "Falta el token de seguridad de la sesión. Recargue la página y vuelva a intentarlo."
    )
    case.refresh_from_db()
    assert case.state == Case.State.OPEN
