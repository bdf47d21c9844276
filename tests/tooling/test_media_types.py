"""The tool mirror and /mcp read a body only when it is sent as application/json (with, at most,
charset=utf-8) and encoded in UTF-8 without a byte-order mark; anything else is 415 or a parse
error, never read as JSON anyway (the MCP transport demands it)."""

import pytest

from core.request_json import is_json_media_type

pytestmark = pytest.mark.django_db(transaction=True)

BODY = b'{"limit": 5}'
RPC = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'
NOT_JSON_TYPES = [
    "text/plain",
    "application/x-www-form-urlencoded",
    "application/json; charset=utf-16",
]


@pytest.mark.parametrize(
    "content_type, expected",
    [
        ("application/json", True),
        ("Application/JSON; charset=UTF-8", True),
        ('application/json; charset="utf-8"', True),
        ("application/json; charset=latin-1", False),
        ("application/json-patch+json", False),
        ("text/plain", False),
        (None, False),
    ],
)
def test_only_json_in_utf8_is_a_json_media_type(content_type, expected):
    assert is_json_media_type(content_type) is expected


@pytest.mark.parametrize("content_type", NOT_JSON_TYPES)
def test_the_tool_mirror_answers_415_to_another_media_type(tool_client, content_type):
    headers = {"X-Conversation-Id": "c-1", "Content-Type": content_type}

    response = tool_client.http.post("/api/tools/list_services", content=BODY, headers=headers)

    assert response.status_code == 415, response.text
    assert response.json()["code"] == "unsupported_media_type"


@pytest.mark.parametrize("body", [b"\xef\xbb\xbf" + BODY, BODY.decode().encode("utf-16")])
def test_the_tool_mirror_refuses_a_bom_or_utf16_body_as_malformed(tool_client, body):
    headers = {"X-Conversation-Id": "c-1", "Content-Type": "application/json"}

    response = tool_client.http.post("/api/tools/list_services", content=body, headers=headers)

    assert response.status_code == 400, response.text
    assert response.json()["code"] == "malformed_json"


@pytest.mark.parametrize("content_type", [*NOT_JSON_TYPES, None])
def test_mcp_answers_415_with_a_json_rpc_error_to_another_media_type(mcp, content_type):
    headers = {"MCP-Protocol-Version": mcp.LEGACY}
    if content_type is not None:
        headers["Content-Type"] = content_type

    response = mcp.http.post(mcp.url, content=RPC, headers=headers)

    assert response.status_code == 415
    assert response.json()["error"]["code"] == -32600
    assert response.json()["id"] is None


@pytest.mark.parametrize("body", [b"\xef\xbb\xbf" + RPC, RPC.decode().encode("utf-16")])
def test_mcp_refuses_a_bom_or_utf16_body_as_a_parse_error(mcp, body):
    response = mcp.post(body, {"MCP-Protocol-Version": mcp.LEGACY})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700


def test_mcp_still_takes_json_with_charset_utf8(mcp):
    headers = {
        "MCP-Protocol-Version": mcp.LEGACY,
        "Content-Type": "application/json; charset=utf-8",
    }

    response = mcp.http.post(mcp.url, content=RPC, headers=headers)

    assert response.status_code == 200
    assert "tools" in response.json()["result"]


def test_the_documented_conversation_id_is_what_the_server_takes(tool_client):
    from django.test import Client

    document = Client().get("/api/openapi.json").json()
    operation = document["paths"]["/api/tools/list_services"]["post"]
    header = next(p for p in operation["parameters"] if p["name"] == "X-Conversation-Id")
    empty = tool_client.http.post(
        "/api/tools/list_services", json={}, headers={"X-Conversation-Id": ""}
    )
    longest = tool_client.call("list_services", {}, conversation_id="c" * 255)

    assert header["schema"]["minLength"] == 1 and header["schema"]["maxLength"] == 255
    assert longest.status_code == 200
    assert empty.status_code == 422
