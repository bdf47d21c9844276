"""The REST tool mirror's OpenAPI document (tooling.api) describes what its endpoints demand
and answer: X-Conversation-Id on every tool, Idempotency-Key on every write tool, and the
canonical error body with its statuses. (Kept here with the integration API's contract tests.)"""

import pytest
from django.test import Client

from tooling.registry import registry

pytestmark = pytest.mark.django_db


@pytest.fixture
def document():
    return Client().get("/api/openapi.json").json()


def _headers(operation):
    return {p["name"]: p for p in operation["parameters"] if p["in"] == "header"}


def test_conversation_id_is_documented_as_required_as_the_server_demands(document, tool_client):
    operation = document["paths"]["/api/tools/list_services"]["post"]
    response = tool_client.http.post("/api/tools/list_services", json={})  # no X-Conversation-Id

    assert response.status_code == 422
    assert _headers(operation)["X-Conversation-Id"]["required"] is True


def test_idempotency_key_is_required_on_write_tools_and_absent_on_reads(document):
    for tool in registry.all():
        headers = _headers(document["paths"][f"/api/tools/{tool.name}"]["post"])
        if tool.write:
            assert headers["Idempotency-Key"]["required"] is True, tool.name
        else:
            assert "Idempotency-Key" not in headers, tool.name


def test_error_answers_are_documented_with_the_error_body(document):
    write = document["paths"]["/api/tools/cancel_appointment"]["post"]["responses"]
    read = document["paths"]["/api/tools/list_services"]["post"]["responses"]

    assert {"400", "401", "403", "404", "409", "410", "413", "422", "503"} <= set(write)
    assert "410" not in read and {"401", "422", "503"} <= set(read)
    body = schema_of(document, write["422"])
    assert {"error_type", "user_message", "code"} <= set(body["required"])
    assert "problems" in body["properties"]


def schema_of(document: dict, response: dict) -> dict:
    schema = response["content"]["application/json"]["schema"]
    return document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]


def test_every_tools_success_body_is_documented_as_its_mcp_output_schema(document):
    for tool in registry.all():
        success = document["paths"][f"/api/tools/{tool.name}"]["post"]["responses"]["200"]

        assert set(schema_of(document, success)["properties"]) == set(
            tool.output_schema["properties"]
        ), tool.name
