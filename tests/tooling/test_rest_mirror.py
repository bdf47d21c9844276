"""The REST mirror of the tools, over real HTTP against a live server."""

import json

import pytest

from agenda.models import Service
from core.models import IdempotencyRecord
from tests.factories import ANA_DOCUMENT

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_lists_the_companys_services(tool_client, company, other_company):
    Service.objects.create(company=company, name="Corte", duration_minutes=30)
    Service.objects.create(company=other_company, name="Radiografía", duration_minutes=20)

    response = tool_client.call("list_services")

    assert response.status_code == 200
    assert response.json() == {
        "items": [{"name": "Corte", "description": "", "duration_minutes": 30}],
        "count": 1,
        "has_more": False,
        "next_cursor": None,
    }


def test_an_empty_catalogue_is_a_success_with_an_empty_list(tool_client):
    response = tool_client.call("list_services")

    assert response.status_code == 200
    assert response.json()["items"] == []


def test_it_says_when_more_services_exist_than_the_limit(tool_client, company):
    for n in range(3):
        Service.objects.create(company=company, name=f"S{n}")

    body = tool_client.call("list_services", {"limit": 2}).json()

    assert [s["name"] for s in body["items"]] == ["S0", "S1"]
    assert body["has_more"] is True


def test_it_rejects_a_missing_or_wrong_token_with_401(live_server):
    import httpx

    response = httpx.post(f"{live_server.url}/api/tools/list_services", json={})
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    response = httpx.post(
        f"{live_server.url}/api/tools/list_services",
        json={},
        headers={"Authorization": "Bearer gt_not-a-token", "X-Conversation-Id": "c"},
    )
    assert response.status_code == 401


@pytest.mark.parametrize(
    ("body", "field"),
    [({"limit": "many"}, "limit"), ({"limit": 0}, "limit"), ({"unknown": 1}, "unknown")],
)
def test_it_answers_bad_arguments_with_a_typed_validation_error(tool_client, body, field):
    response = tool_client.call("list_services", body)

    assert response.status_code == 422
    payload = response.json()
    assert payload["error_type"] == "VALIDATION"
    assert payload["code"] == "invalid_arguments"
    assert [problem["field"] for problem in payload["problems"]] == [field]


def test_it_answers_malformed_json_with_a_validation_error(tool_client):
    response = tool_client.http.post(
        "/api/tools/list_services",
        content=b"{not json",
        headers={"X-Conversation-Id": "c", "Content-Type": "application/json"},
    )

    assert response.status_code == 400
    assert response.json()["error_type"] == "VALIDATION"


def test_numbers_and_text_json_does_not_have_are_malformed_json(tool_client):
    for constant in ["NaN", "Infinity", "-Infinity", "1e400", '"\\ud800"']:
        response = tool_client.http.post(
            "/api/tools/list_services",
            content=f'{{"limit": {constant}}}'.encode(),
            headers={"X-Conversation-Id": "c", "Content-Type": "application/json"},
        )

        assert response.status_code == 400, constant
        assert response.json()["code"] == "malformed_json"


def test_text_with_a_nul_character_is_invalid_arguments_and_opens_nothing(tool_client, company):
    arguments = {"identifier": ANA_DOCUMENT, "subject": "Grifo\x00", "description": "Gotea."}

    response = tool_client.call("open_case", arguments, key="key-nul-subject")

    assert response.status_code == 422
    assert response.json()["code"] == "invalid_arguments"
    assert [e["field"] for e in response.json()["problems"]] == ["subject"]
    assert not IdempotencyRecord.objects.filter(company=company).exists()


def test_a_conversation_id_longer_than_a_conversation_holds_is_a_validation_error(tool_client):
    response = tool_client.call("list_services", {"limit": 5}, conversation_id="c" * 256)

    assert response.status_code == 422
    assert response.json()["code"] == "invalid_conversation_id"


def test_the_tools_are_in_the_openapi_document(live_server):
    import httpx

    document = httpx.get(f"{live_server.url}/api/openapi.json").json()

    assert "/api/tools/list_services" in document["paths"]


# The same errors as over MCP, and JSON whatever goes wrong -----------------------------------


def test_bad_arguments_are_named_alike_on_both_surfaces(tool_client, mcp):
    rest = tool_client.call("list_services", {"limit": "many", "unknown": 1}).json()
    over_mcp = mcp.call("list_services", {"limit": "many", "unknown": 1}).json()["result"]

    assert [e["field"] for e in rest["problems"]] == ["limit", "unknown"]
    assert over_mcp["isError"] is True
    assert rest == over_mcp["structuredContent"]


def test_an_argument_named_at_great_length_gets_an_answer_within_the_cap(tool_client, mcp):
    arguments = {"k" * 200_000: 1}

    rest = tool_client.call("list_services", arguments)
    over_mcp = mcp.call("list_services", arguments)

    result = over_mcp.json()["result"]
    assert len(rest.content) <= 3000 and len(result["content"][0]["text"]) <= 3000
    assert rest.json() == result["structuredContent"]
    assert rest.json()["problems"][0]["field"] == "k" * 127 + "…"


def test_a_missing_conversation_id_is_answered_as_over_mcp(tool_client, mcp):
    rest = tool_client.http.post("/api/tools/list_services", json={})
    over_mcp = mcp.request("tools/call", {"name": "list_services", "arguments": {}}).json()

    assert rest.status_code == 422
    assert rest.json()["code"] == over_mcp["result"]["structuredContent"]["code"]
    assert rest.json()["code"] == "missing_conversation_id"


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("POST", "/api/tools/no_such_tool", 404, "unknown_tool"),
        ("POST", "/api/tools/list_services/", 404, "unknown_tool"),
        ("GET", "/api/tools/list_services", 405, "method_not_allowed"),
    ],
)
def test_a_request_no_tool_answers_gets_the_error_body_not_a_page(
    tool_client, method, path, status, code
):
    response = tool_client.http.request(method, path, json={}, headers={"X-Conversation-Id": "c"})

    assert response.status_code == status
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["code"] == code
    assert set(response.json()) >= {"error_type", "user_message", "code"}
    if status == 405:
        assert "POST" in response.headers["Allow"]


def test_a_body_too_large_is_a_json_413(tool_client):
    response = tool_client.http.post(
        "/api/tools/list_services",
        content=json.dumps({"x": "a" * 3_000_000}).encode(),
        headers={"X-Conversation-Id": "c", "Content-Type": "application/json"},
    )

    assert response.status_code == 413
    assert response.json()["code"] == "body_too_large"
