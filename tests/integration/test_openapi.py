"""The OpenAPI 3 document of the integration API, and schemathesis driving every operation in
it against a live server: whatever it sends, the server never answers 5xx."""

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

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
