"""One error boundary (core.boundary): every API lists field problems in one shape with one
cut, answers 401, 405 and 415 alike, and maps what Django, django-ninja, DRF and pydantic
raise once; a bug of ours is InternalError, answered as SYSTEM like an outage."""

import logging
import uuid
from typing import Any

import httpx
import pydantic
import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import OperationalError
from django.http import Http404
from ninja.errors import AuthenticationError
from rest_framework import exceptions as drf

from core.boundary import MAX_PROBLEMS, as_garante_error
from core.errors import InternalError, SystemUnavailable
from core.outcome import error_outcome
from integration.models import IntegrationCredential
from integration.services import integration_credential_issue
from tests.conftest import McpClient

PROBLEM_KEYS = {"field", "message"}
# One field more than a body lists, and then some: every surface names the first
# MAX_PROBLEMS and counts the rest.
BAD_FIELDS = {f"field_{n:02}": n for n in range(MAX_PROBLEMS + 5)}
LISTED = sorted(BAD_FIELDS)[:MAX_PROBLEMS]

logger = logging.getLogger("garante.tests")


@pytest.fixture
def integration_token(company: Any) -> str:
    scope = IntegrationCredential.Scope.READ_WRITE
    return integration_credential_issue(company=company, name="ERP", scope=scope)[1]


def assert_problems(body: dict[str, Any], prefix: str = "") -> None:
    assert all(set(p) == PROBLEM_KEYS and p["message"] for p in body["problems"]), body
    assert [p["field"].removeprefix(prefix) for p in body["problems"]] == LISTED
    assert body["problems_omitted"] == len(BAD_FIELDS) - MAX_PROBLEMS


@pytest.mark.django_db(transaction=True)
def test_every_api_lists_the_same_problems_with_the_same_cut(
    live_server: Any, token: str, integration_token: str
):
    """Twenty-five unknown fields: the REST tool mirror and MCP's tool result (a tool's
    arguments), MCP's -32602 (a request's params) and the integration API (a body)."""
    conversation = {"X-Conversation-Id": f"conv-{uuid.uuid4().hex[:8]}"}
    with httpx.Client(base_url=live_server.url, timeout=30) as http:
        mirror = http.post(
            "/api/tools/list_services",
            json=BAD_FIELDS,
            headers={"Authorization": f"Bearer {token}", **conversation},
        )
        integration = http.post(
            "/api/v1/contacts",
            json=BAD_FIELDS,
            headers={"Authorization": f"Bearer {integration_token}", "Idempotency-Key": "k-1"},
        )
    with McpClient(live_server.url, token, "conv-problems") as mcp:
        tool_result = mcp.call("list_services", BAD_FIELDS).json()["result"]
        # A prompt's arguments must be text: the protocol's own schema refuses each one.
        invalid_params = mcp.request("prompts/get", {"name": "x", "arguments": BAD_FIELDS})

    assert (mirror.status_code, integration.status_code) == (422, 422)
    assert_problems(mirror.json())
    assert_problems(integration.json())
    assert tool_result["isError"] is True
    assert tool_result["structuredContent"] == mirror.json()
    assert invalid_params.json()["error"]["code"] == -32602
    data = invalid_params.json()["error"]["data"]
    assert (data["error_type"], data["code"]) == ("VALIDATION", "invalid_params")
    assert_problems(data, prefix="params.arguments.")


@pytest.mark.django_db(transaction=True)
def test_every_api_refuses_a_wrong_token_with_the_same_401(
    live_server: Any, token: str, integration_token: str
):
    wrong = {"Authorization": "Bearer gt_not-a-token"}
    with httpx.Client(base_url=live_server.url, timeout=30) as http:
        mirror = http.post("/api/tools/list_services", json={}, headers=wrong)
        integration = http.get("/api/v1/contacts", headers=wrong)
        missing = http.get("/api/v1/contacts")
    with McpClient(live_server.url, "gt_not-a-token", "c") as stranger:
        mcp = stranger.request("tools/list")

    expected = {
        "error_type": "PERMISSION",
        "user_message": "Credenciales no válidas.",
        "code": "unauthenticated",
    }
    assert mirror.json() == integration.json() == mcp.json()["error"]["data"] == expected
    for response in (mirror, integration, mcp):
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'
    assert missing.headers["WWW-Authenticate"] == "Bearer"


@pytest.mark.django_db(transaction=True)
def test_every_api_answers_a_wrong_method_and_a_body_not_json_alike(
    live_server: Any, token: str, integration_token: str
):
    gateway = {"Authorization": f"Bearer {token}", "X-Conversation-Id": "c"}
    integration = {"Authorization": f"Bearer {integration_token}", "Idempotency-Key": "k-1"}
    text = {"Content-Type": "text/plain"}
    with httpx.Client(base_url=live_server.url, timeout=30) as http:
        methods = [
            http.get("/api/tools/list_services", headers=gateway).json(),
            http.delete("/api/v1/contacts", headers=integration).json(),
            http.get("/mcp", headers=gateway).json()["error"]["data"],
        ]
        media_types = [
            http.post("/api/tools/list_services", content="{}", headers=gateway | text).json(),
            http.post("/api/v1/contacts", content="{}", headers=integration | text).json(),
            http.post("/mcp", content="{}", headers=gateway | text).json()["error"]["data"],
        ]

    assert all(body == methods[0] for body in methods), methods
    assert methods[0]["code"] == "method_not_allowed"
    assert all(body == media_types[0] for body in media_types), media_types
    assert media_types[0]["code"] == "unsupported_media_type"


@pytest.mark.parametrize(
    ("raised", "error_type", "code"),
    [
        (Http404(), "NOT_FOUND", "not_found"),
        (PermissionDenied(), "PERMISSION", "permission_denied"),
        (ValidationError({"name": ["Demasiado largo."]}), "VALIDATION", "invalid_request"),
        (drf.ValidationError({"items": [{"quantity": ["No."]}]}), "VALIDATION", "invalid_request"),
        (drf.Throttled(wait=3), "PERMISSION", "throttled"),
        (AuthenticationError(), "PERMISSION", "unauthenticated"),
        (drf.NotAuthenticated(), "PERMISSION", "unauthenticated"),
    ],
)
def test_what_django_ninja_and_drf_raise_maps_to_one_canonical_error(raised, error_type, code):
    error = as_garante_error(raised, logger=logger)

    assert (error.error_type, error.code) == (error_type, code)


def test_a_django_validation_error_lists_its_fields_as_problems():
    error = as_garante_error(ValidationError({"name": ["Demasiado largo."]}), logger=logger)

    assert error.as_dict()["problems"] == [{"field": "name", "message": "Demasiado largo."}]


def test_a_bug_is_an_internal_error_with_the_outages_answer_and_its_trace_logged(caplog):
    def caught(exc: Exception) -> Any:
        try:
            raise exc
        except Exception as raised:
            return as_garante_error(raised, logger=logger, where="a test")

    bug = caught(KeyError("missing"))
    # pydantic refusing our own output is our bug too, not the caller's mistake.
    output = caught(_pydantic_error())

    assert isinstance(bug, InternalError) and not isinstance(bug, SystemUnavailable)
    assert isinstance(output, InternalError)
    assert error_outcome(bug).body == error_outcome(SystemUnavailable()).body
    assert error_outcome(bug).status == 503
    logged = [r for r in caplog.records if r.name == "garante.tests"]
    assert logged and all(r.exc_info for r in logged)
    assert logged[0].getMessage() == "unexpected failure in a test"


# With the database: the failure path looks at the connection when one is open.
def test_a_database_failure_is_system_unavailable_saying_the_same_key_is_safe(caplog, db):
    error = as_garante_error(OperationalError("server closed the connection"), logger=logger)

    assert isinstance(error, SystemUnavailable)
    assert error.as_dict() | {"user_message": ""} == {
        "error_type": "SYSTEM",
        "user_message": "",
        "code": "database_unavailable",
        "retry_with_same_key": True,
        "effect_may_have_happened": False,
    }


def _pydantic_error() -> pydantic.ValidationError:
    try:
        pydantic.TypeAdapter(int).validate_python("not a number")
    except pydantic.ValidationError as exc:
        return exc
    raise AssertionError("pydantic accepted text as an integer")
