"""The OpenAPI 3 document of the integration API, and schemathesis driving every operation in
it against a live server: whatever it sends, the server never answers 5xx."""

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from rest_framework.test import APIClient

from support.services import case_open

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")


def test_the_openapi_document_describes_every_resource_and_the_key_header(live_server):
    response = httpx.get(f"{live_server.url}/api/v1/schema/?format=json")

    assert response.status_code == 200
    document = response.json()
    assert document["openapi"].startswith("3.")
    paths = document["paths"]
    for resource in (
        "contacts",
        "services",
        "professionals",
        "slots",
        "appointments",
        "products",
        "quotes",
        "opportunities",
        "cases",
    ):
        assert f"/api/v1/{resource}" in paths
    cancel = paths["/api/v1/appointments/{reference}/cancel"]["post"]
    key = next(p for p in cancel["parameters"] if p["name"] == "Idempotency-Key")
    assert key["in"] == "header" and key["required"] is True
    assert key["schema"]["pattern"] == "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
    assert {"409", "410", "422", "503"} <= set(cancel["responses"])
    assert "Idempotency-Key" in document["info"]["description"]
    assert document["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    assert document["components"]["schemas"]["CaseInRequest"]["additionalProperties"] is False


def test_the_error_shape_lists_problems_and_marks_errors_deprecated(live_server):
    document = httpx.get(f"{live_server.url}/api/v1/schema/?format=json").json()

    error = document["components"]["schemas"]["ErrorOut"]["properties"]
    assert error["problems"]["items"]["$ref"].endswith("/ProblemOut")
    assert error["problems_omitted"]["type"] == "integer"
    assert error["errors"]["deprecated"] is True
    assert "Deprecated" in document["info"]["description"]


def test_the_interactive_docs_are_served(live_server):
    response = httpx.get(f"{live_server.url}/api/v1/docs/")

    assert response.status_code == 200
    assert "swagger" in response.text.lower()


def test_schemathesis_finds_no_server_error_in_any_operation(
    live_server, company, ana, rw_token, settings, tmp_path
):
    settings.REST_FRAMEWORK = settings.REST_FRAMEWORK | {
        "DEFAULT_THROTTLE_RATES": {"integration": None}
    }
    case_open(company=company, contact=ana, subject="Grifo", description="Gotea")

    done = subprocess.run(
        [
            str(SCHEMATHESIS),
            "run",
            f"{live_server.url}/api/v1/schema/?format=json",
            "--checks",
            "not_a_server_error",
            "--header",
            f"Authorization: Bearer {rw_token}",
            "--max-examples",
            "4",
            "--phases",
            "examples,fuzzing",
            "--workers",
            "1",
            "--seed",
            "20261207",
            "--generation-database",
            "none",
            "--no-color",
            "--request-timeout",
            "20",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )

    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_the_document_lists_the_statuses_writes_and_lists_really_answer(api):
    document = APIClient().get("/api/v1/schema/?format=json").json()
    create = document["paths"]["/api/v1/contacts"]["post"]
    listing = document["paths"]["/api/v1/cases"]["get"]
    malformed = api.client.post(
        "/api/v1/contacts", data="{", content_type="application/json", HTTP_IDEMPOTENCY_KEY="k-9"
    )
    not_json = api.client.post(
        "/api/v1/contacts", data="a=b", content_type="text/plain", HTTP_IDEMPOTENCY_KEY="k-8"
    )
    not_acceptable = api.client.get("/api/v1/cases", HTTP_ACCEPT="text/csv")

    assert (malformed.status_code, not_json.status_code, not_acceptable.status_code) == (
        400,
        415,
        406,
    )
    assert {"400", "406", "413", "415", "422"} <= set(create["responses"])
    assert {"406", "422"} <= set(listing["responses"])


def test_lists_document_their_cursor_pages(api):
    document = APIClient().get("/api/v1/schema/?format=json").json()
    listing = document["paths"]["/api/v1/cases"]["get"]

    names = {p["name"] for p in listing["parameters"]}
    page = listing["responses"]["200"]["content"]["application/json"]["schema"]
    page = document["components"]["schemas"][page["$ref"].rsplit("/", 1)[-1]]
    assert {"limit", "cursor", "ordering"} <= names and "offset" not in names
    assert set(page["properties"]) == {"count", "next", "previous", "results"}
