"""POST /mcp over real HTTP: both protocol eras, and the precise answer to every bad input."""

import base64
import itertools
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.db import OperationalError, connection
from pydantic import Field

from agenda.models import Service
from core.errors import NotFound
from core.models import Company, GatewayCredential, IdempotencyRecord
from core.services import gateway_credential_revoke
from tests.conftest import McpClient
from tests.factories import ANA_DOCUMENT
from tooling import mcp as mcp_module
from tooling.mcp import RequestId
from tooling.registry import Tool, ToolInput, ToolOutput, registry

pytestmark = pytest.mark.django_db(transaction=True)

PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"


def result_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body = response.json()
    assert "error" not in body, body
    return body["result"]


def error_of(response: httpx.Response, status: int, code: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert "result" not in body
    assert body["error"]["code"] == code, body
    return body


class RecordIn(ToolInput):
    note: str = Field(max_length=50)


class RecordOut(ToolOutput):
    recorded: str


@pytest.fixture
def write_tool() -> Iterator[Tool]:
    """A write tool that only this module's tests register: no domain write tool is needed."""

    def handler(ctx: Any, params: RecordIn) -> dict:
        if params.note == "missing":
            raise NotFound(code="note_not_found")
        if params.note == "explode":
            raise RuntimeError("secret internal detail /srv/garante/path")
        return {"recorded": params.note}

    tool = registry.register(
        Tool(
            name="test_record_note",
            title="Record a note",
            description="Test-only write tool.",
            input=RecordIn,
            output=RecordOut,
            handler=handler,
            write=True,
        )
    )
    yield tool
    registry.unregister(tool.name)


# --- legacy era --------------------------------------------------------------------------


def initialize(version: Any, request_id: RequestId = 1) -> dict[str, Any]:
    params = {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


def test_initialize_echoes_a_supported_version(mcp, subtests):
    for version in ["2025-11-25", "2025-06-18", "2025-03-26"]:
        with subtests.test(version=version):
            response = mcp.post(initialize(version))

            result = result_of(response)
            assert result["protocolVersion"] == version
            assert result["capabilities"] == {"tools": {"listChanged": False}}
            assert result["serverInfo"]["name"] == "garante"
            assert response.json()["id"] == 1


def test_initialize_counter_offers_the_latest_handshake_version(mcp, subtests):
    for offered in ["2024-11-05", "1999-01-01", "2026-07-28"]:
        with subtests.test(offered=offered):
            response = mcp.post(initialize(offered, "init"))

            assert result_of(response)["protocolVersion"] == "2025-11-25"
            assert response.json()["id"] == "init"


def test_initialize_without_client_info_is_invalid_params(mcp):
    response = mcp.post(
        {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"capabilities": {}}}
    )

    body = error_of(response, 200, -32602)
    assert body["id"] == 3
    assert {e["field"] for e in body["error"]["data"]["problems"]} >= {"params.protocolVersion"}


def test_notifications_are_accepted_with_202_and_no_body(mcp, subtests):
    for method in ["notifications/initialized", "notifications/cancelled", "notifications/x"]:
        with subtests.test(method=method):
            response = mcp.post({"jsonrpc": "2.0", "method": method})

            assert response.status_code == 202
            assert response.content == b""
            assert "content-type" not in response.headers


def test_a_modern_notification_is_accepted_too(mcp):
    response = mcp.post(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        {"MCP-Protocol-Version": "2026-07-28"},
    )

    assert response.status_code == 202
    assert response.content == b""


def test_a_notification_at_a_version_we_do_not_serve_is_400_unsupported(mcp):
    response = mcp.post(
        {"jsonrpc": "2.0", "method": "notifications/cancelled"},
        {"MCP-Protocol-Version": "2099-01-01"},
    )

    body = error_of(response, 400, -32022)
    assert body["id"] is None
    assert body["error"]["data"] == {"supported": ["2026-07-28"], "requested": "2099-01-01"}


def test_ping_answers_an_empty_result(mcp):
    assert result_of(mcp.request("ping")) == {}


def test_a_request_without_version_header_is_served_as_2025_03_26(mcp):
    response = mcp.post({"jsonrpc": "2.0", "id": 9, "method": "tools/list"})

    assert "list_services" in [t["name"] for t in result_of(response)["tools"]]


def test_tools_list_describes_every_tool_in_a_fixed_order(mcp):
    tools = result_of(mcp.request("tools/list"))["tools"]

    names = [t["name"] for t in tools]
    assert names == sorted(names) == [t.name for t in registry.all()]
    listed = next(t for t in tools if t["name"] == "list_services")
    tool = registry.get("list_services")
    assert listed["title"] == tool.title
    assert listed["description"] == tool.description
    assert listed["inputSchema"] == tool.input_schema
    assert listed["inputSchema"]["properties"]["limit"]["maximum"] == 50
    assert listed["annotations"] == {
        "title": tool.title,
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    }


def test_tools_list_in_legacy_carries_no_modern_fields(mcp):
    result = result_of(mcp.request("tools/list"))

    assert set(result) == {"tools"}


def test_tools_call_returns_structured_content_and_the_same_json_as_text(mcp, company):
    Service.objects.create(company=company, name="Corte", duration_minutes=30)

    result = result_of(mcp.call("list_services", {"limit": 5}))

    expected = {
        "items": [{"name": "Corte", "description": "", "duration_minutes": 30}],
        "count": 1,
        "has_more": False,
        "next_cursor": None,
    }
    assert result["isError"] is False
    assert result["structuredContent"] == expected
    assert result["content"] == [
        {"type": "text", "text": json.dumps(expected, separators=(",", ":"))}
    ]


def test_a_business_error_is_a_result_with_is_error(mcp):
    response = mcp.call("list_services", {}, meta={"com.asixto/conversationId": None})

    result = result_of(response)
    assert result["isError"] is True
    assert result["structuredContent"]["error_type"] == "VALIDATION"
    assert result["structuredContent"]["code"] == "missing_conversation_id"
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def test_a_write_tool_without_idempotency_key_is_a_validation_result(mcp, write_tool):
    result = result_of(mcp.call(write_tool.name, {"note": "hola"}))

    assert result["isError"] is True
    assert result["structuredContent"]["code"] == "missing_idempotency_key"


def test_a_write_tool_with_a_key_runs_once_and_replays(mcp, write_tool, company):
    first = result_of(mcp.call(write_tool.name, {"note": "hola"}, key="k-1"))
    again = result_of(mcp.call(write_tool.name, {"note": "hola"}, key="k-1"))
    other = result_of(mcp.call(write_tool.name, {"note": "adiós"}, key="k-1"))

    assert first == again
    assert first["structuredContent"] == {"recorded": "hola"}
    assert other["isError"] is True
    assert other["structuredContent"]["error_type"] == "CONFLICT"


def test_a_not_found_from_the_handler_is_a_typed_result(mcp, write_tool):
    result = result_of(mcp.call(write_tool.name, {"note": "missing"}, key="k-nf"))

    assert result["isError"] is True
    assert result["structuredContent"]["error_type"] == "NOT_FOUND"


def test_an_unexpected_handler_failure_is_a_system_result_without_trace(mcp, write_tool):
    response = mcp.call(write_tool.name, {"note": "explode"}, key="k-boom")

    result = result_of(response)
    assert result["isError"] is True
    assert result["structuredContent"]["error_type"] == "SYSTEM"
    assert "secret" not in response.text
    assert "Traceback" not in response.text


def test_an_injected_database_outage_is_a_system_result(mcp, company):
    Company.objects.filter(pk=company.pk).update(environment=Company.Environment.SANDBOX)
    result = result_of(mcp.call("list_services", {}, meta={"com.garante/fault": "database"}))

    assert result["isError"] is True
    assert result["structuredContent"]["error_type"] == "SYSTEM"
    # The next call on the same server works again.
    assert result_of(mcp.call("list_services", {}))["isError"] is False


# --- modern era --------------------------------------------------------------------------


def test_server_discover_describes_the_server(mcp):
    result = result_of(mcp.request("server/discover", modern=True))

    assert result["supportedVersions"] == ["2026-07-28"]
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["resultType"] == "complete"
    # The same for every caller, so shared caches may keep it, for an hour.
    assert result["cacheScope"] == "public"
    assert result["ttlMs"] == 3_600_000
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "garante"


def test_modern_tools_list_is_cacheable_per_credential(mcp):
    result = result_of(mcp.request("tools/list", modern=True))

    assert result["resultType"] == "complete"
    assert result["cacheScope"] == "private"
    assert result["ttlMs"] == 300_000  # five minutes: a new tool shows within them
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "garante"
    assert [t["name"] for t in result["tools"]] == [t.name for t in registry.all()]


def test_modern_tools_call_returns_a_complete_result(mcp, company):
    Service.objects.create(company=company, name="Tinte", duration_minutes=60)

    result = result_of(mcp.call("list_services", {}, modern=True))

    assert result["resultType"] == "complete"
    assert result["isError"] is False
    assert [item["name"] for item in result["structuredContent"]["items"]] == ["Tinte"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "garante"


def test_a_base64_encoded_mcp_name_header_is_decoded(mcp):
    encoded = "=?base64?" + base64.b64encode(b"list_services").decode() + "?="

    response = mcp.request(
        "tools/call",
        {"name": "list_services", "_meta": {"com.asixto/conversationId": "c"}},
        modern=True,
        headers={"Mcp-Name": encoded},
    )

    assert result_of(response)["isError"] is False


def test_a_method_the_modern_era_lacks_is_404_method_not_found(mcp, subtests):
    for method in ["ping", "initialize", "resources/list", "logging/setLevel", "no/such"]:
        with subtests.test(method=method):
            body = error_of(mcp.request(method, modern=True), 404, -32601)

            assert isinstance(body["id"], int)


def test_a_modern_request_without_its_meta_keys_is_400_invalid_params(mcp, subtests):
    for params in [{}, {"_meta": {PV: "2026-07-28"}}, {"_meta": {CAPS: {}}}, {"_meta": "x"}]:
        with subtests.test(params=params):
            response = mcp.post(
                {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": params},
                {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
            )

            body = error_of(response, 400, -32602)
            assert body["id"] == 4
            data = body["error"]["data"]
            assert (data["error_type"], data["code"]) == ("VALIDATION", "invalid_params")
            assert data["problems"][0]["field"].startswith("_meta")


def _modern_body(method: str, params: dict | None = None, version: str = "2026-07-28") -> dict:
    params = dict(params or {})
    params["_meta"] = {PV: version, CAPS: {}, **params.get("_meta", {})}
    return {"jsonrpc": "2.0", "id": 5, "method": method, "params": params}


MISMATCHED_HEADERS = [
    ("version header missing", {"Mcp-Method": "tools/list"}, None),
    ("method header missing", {"MCP-Protocol-Version": "2026-07-28"}, None),
    ("method differs", {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}, None),
    ("version differs", {"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"}, None),
    ("name missing", {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}, "n"),
    (
        "name differs",
        {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "other"},
        "n",
    ),
    (
        "base64 name differs",
        {
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": "=?base64?bm90LWl0?=",
        },
        "n",
    ),
    (
        "malformed base64",
        {
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": "=?base64?%%%?=",
        },
        "n",
    ),
]


def test_modern_headers_that_disagree_with_the_body_are_400_header_mismatch(mcp, subtests):
    for case, headers, named in MISMATCHED_HEADERS:
        with subtests.test(case):
            method = "tools/call" if named else "tools/list"
            params = {"name": "list_services"} if named else {}

            body = error_of(mcp.post(_modern_body(method, params), headers), 400, -32020)

            assert body["id"] == 5


def test_an_unsupported_modern_version_is_400_with_the_supported_list(mcp):
    response = mcp.post(
        _modern_body("tools/list", version="2099-01-01"),
        {"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"},
    )

    body = error_of(response, 400, -32022)
    assert body["error"]["data"] == {"supported": ["2026-07-28"], "requested": "2099-01-01"}


def test_an_unsupported_handshake_version_header_is_400_unsupported(mcp):
    response = mcp.post(
        {"jsonrpc": "2.0", "id": 6, "method": "tools/list"},
        {"MCP-Protocol-Version": "2024-11-05"},
    )

    body = error_of(response, 400, -32022)
    assert body["error"]["data"]["requested"] == "2024-11-05"
    assert "2025-11-25" in body["error"]["data"]["supported"]


# --- bad input, both eras ----------------------------------------------------------------


def test_malformed_json_is_a_parse_error_with_null_id(mcp, subtests):
    not_json_numbers = [
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_services",'
        b'"arguments":{"limit":' + constant + b'},"_meta":{"com.asixto/conversationId":"c"}}}'
        for constant in (b"NaN", b"Infinity", b"-Infinity", b"1e400", b'"\\ud800"')
    ]
    for raw in [
        b"{not json",
        b"",
        b'{"jsonrpc": "2.0", "id": 1,',
        b"\xff\xfe",
        b"[" * 100_000,
        *not_json_numbers,
        b'{"jsonrpc":"2.0","id":"\\udc00","method":"ping"}',  # half a character, as the id
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\\ud800"}}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","\xed\xa0\x80":1}',
    ]:
        with subtests.test(raw=raw[:30]):
            body = error_of(mcp.post(raw), 400, -32700)

            assert body["id"] is None
            assert body["error"]["data"]["code"] == "malformed_json"


INVALID_ENVELOPES = [
    ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, 1),
    ({"id": 2, "method": "ping"}, 2),
    ({"jsonrpc": "2.0", "id": 3}, 3),
    ({"jsonrpc": "2.0", "id": "x", "method": 7}, "x"),
    ({"jsonrpc": "2.0", "id": None, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": True, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": 4, "method": "ping", "params": [1, 2]}, 4),
    ({"jsonrpc": "2.0", "id": 5, "result": {}}, 5),
    ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], None),
    ([], None),
    (b'"ping"', None),
]


def test_an_invalid_envelope_is_400_invalid_request(mcp, subtests):
    for payload, expected_id in INVALID_ENVELOPES:
        with subtests.test(payload=payload):
            body = error_of(mcp.post(payload), 400, -32600)

            assert body["id"] == expected_id


def test_a_legacy_unknown_method_is_method_not_found(mcp):
    body = error_of(mcp.request("resources/list"), 200, -32601)

    assert body["id"] == 1
    error_of(mcp.request("no/such/method"), 200, -32601)


ERAS = [("legacy", False, 200), ("modern", True, 400)]


def test_an_unknown_tool_is_invalid_params(mcp, subtests):
    for era, modern, status in ERAS:
        with subtests.test(era=era):
            body = error_of(mcp.call("no_such_tool", {}, modern=modern), status, -32602)

            assert "no_such_tool" in body["error"]["message"]
            data = body["error"]["data"]
            assert (data["error_type"], data["code"]) == ("VALIDATION", "unknown_tool")
            assert data["problems"] == [{"field": "name", "message": "No tool with this name."}]


BAD_ARGUMENTS = [
    ({"limit": "many"}, "limit"),
    ({"limit": 0}, "limit"),
    ({"limit": 51}, "limit"),
    ({"limit": None}, "limit"),
    ({"limit": 5, "colour": "red"}, "colour"),
]


def test_arguments_that_fail_the_schema_are_a_validation_result_listing_the_problems(mcp, subtests):
    """Not -32602 (spec 2025-11-25, SEP-1303): the model reads the result and corrects."""
    for (era, modern, _), (arguments, field) in itertools.product(ERAS, BAD_ARGUMENTS):
        with subtests.test(era=era, arguments=arguments):
            response = mcp.call("list_services", arguments, modern=modern)

            assert response.status_code == 200
            result = result_of(response)
            assert result["isError"] is True
            body = result["structuredContent"]
            assert (body["error_type"], body["code"]) == ("VALIDATION", "invalid_arguments")
            assert [e["field"] for e in body["problems"]] == [field]
            assert json.loads(result["content"][0]["text"]) == body


def test_text_with_a_nul_character_is_a_validation_result_and_stores_nothing(
    mcp, company, write_tool, subtests
):
    cases = [
        ("list_services", {"limit": 5, "colour\x00": "red"}, "colour"),
        ("test_record_note", {"note": "a\x00b"}, "note"),
    ]
    for (era, modern, _), (name, arguments, field) in itertools.product(ERAS, cases):
        with subtests.test(era=era, arguments=arguments):
            response = mcp.call(name, arguments, key="key-nul", modern=modern)

            body = result_of(response)["structuredContent"]
            assert body["code"] == "invalid_arguments"
            assert [e["field"] for e in body["problems"]] == [field]
    assert not IdempotencyRecord.objects.filter(company=company).exists()


def test_a_conversation_id_no_conversation_can_hold_is_a_validation_result(mcp, subtests):
    for conversation_id in ["x" * 256, "conv\x00"]:
        with subtests.test(length=len(conversation_id)):
            response = mcp.call(
                "identify_contact",
                {"document": ANA_DOCUMENT},
                key=f"key-{len(conversation_id)}",
                conversation_id=conversation_id,
            )

            result = result_of(response)
            assert result["isError"] is True
            assert result["structuredContent"]["error_type"] == "VALIDATION"
            assert result["structuredContent"]["code"] == "invalid_conversation_id"
    assert result_of(mcp.call("list_services", {}, conversation_id="x" * 255))["isError"] is False


def test_an_idempotency_key_with_a_nul_character_is_a_validation_result(mcp, write_tool, company):
    result = result_of(mcp.call("test_record_note", {"note": "x"}, key="key\x00"))

    assert result["isError"] is True
    assert result["structuredContent"]["code"] == "invalid_idempotency_key"
    assert not IdempotencyRecord.objects.filter(company=company).exists()


def test_malformed_tools_call_params_are_invalid_params(mcp, subtests):
    for params in [{"arguments": {}}, {"name": 7}, {"name": "list_services", "arguments": [1]}]:
        with subtests.test(params=params):
            body = error_of(mcp.request("tools/call", params), 200, -32602)

            assert body["error"]["data"]["problems"]


def test_a_cursor_we_never_handed_out_is_invalid_params_naming_it(mcp):
    body = error_of(mcp.request("tools/list", {"cursor": "abc"}), 200, -32602)

    assert body["error"]["data"]["problems"] == [{"field": "cursor", "message": "Invalid cursor"}]


def test_a_32602_is_written_in_the_companys_language(mcp, company):
    company.language = "en"
    company.save(update_fields=["language"])

    body = error_of(mcp.call("no_such_tool", {}), 200, -32602)

    assert body["error"]["data"]["user_message"] == "The data sent is not valid."


def test_a_body_over_the_limit_is_413(mcp, settings):
    settings.GARANTE_MCP_MAX_BODY_BYTES = 2_000
    padding = "x" * 2_100

    response = mcp.call("list_services", {"limit": 5}, meta={"pad": padding})

    assert response.status_code == 413
    assert response.json()["error"]["code"] == -32600
    assert response.json()["error"]["data"]["code"] == "body_too_large"
    assert result_of(mcp.call("list_services", {}, meta={"pad": "x" * 1_000}))


def test_the_default_limit_is_one_mebibyte(mcp):
    response = mcp.call("list_services", {}, meta={"pad": "x" * (1024 * 1024)})

    assert response.status_code == 413


def test_methods_other_than_post_are_405(mcp, subtests):
    for http_method in ["GET", "DELETE", "PUT", "PATCH", "OPTIONS"]:
        with subtests.test(http_method=http_method):
            response = mcp.http.request(http_method, mcp.url)

            assert response.status_code == 405
            assert response.headers["Allow"] == "POST"


# --- auth, tenancy, origin ---------------------------------------------------------------


def test_a_missing_token_is_401_with_a_bearer_challenge(live_server):
    with McpClient(live_server.url, None, "c") as anonymous:
        response = anonymous.request("tools/list")

    body = error_of(response, 401, -32010)
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert body["id"] == 1
    assert body["error"]["data"]["error_type"] == "PERMISSION"


def test_a_wrong_token_is_401_for_every_message(live_server, subtests):
    messages = [
        initialize("2025-11-25"),
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    with McpClient(live_server.url, "gt_not-a-real-token", "c") as stranger:
        for message in messages:
            with subtests.test(method=message["method"]):
                response = stranger.post(message)

                body = error_of(response, 401, -32010)
                assert body["id"] == message.get("id")
                assert response.headers["WWW-Authenticate"] == 'Bearer error="invalid_token"'


def test_a_revoked_token_is_401(mcp, company):
    credential = GatewayCredential.objects.get(company=company)
    assert result_of(mcp.request("tools/list"))

    gateway_credential_revoke(credential=credential)

    response = mcp.request("tools/list")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_another_companys_token_sees_only_its_own_data(
    live_server, mcp, company, other_company, other_token
):
    Service.objects.create(company=company, name="Corte", duration_minutes=30)
    Service.objects.create(company=other_company, name="Radiografía", duration_minutes=20)
    mine = result_of(mcp.call("list_services", {}))["structuredContent"]["items"]
    with McpClient(live_server.url, other_token, "conv-other") as other:
        theirs = result_of(other.call("list_services", {}, modern=True))["structuredContent"]

    assert [s["name"] for s in mine] == ["Corte"]
    assert [s["name"] for s in theirs["items"]] == ["Radiografía"]


def test_a_foreign_origin_is_403(mcp):
    response = mcp.request("tools/list", headers={"Origin": "https://evil.example"})

    assert response.status_code == 403
    assert response.json()["error"]["code"] == -32600


def test_the_same_host_and_listed_origins_are_allowed(mcp, live_server, settings):
    same = mcp.request("tools/list", headers={"Origin": live_server.url})
    assert same.status_code == 200

    settings.GARANTE_MCP_ALLOWED_ORIGINS = ["https://console.asixto.example"]
    listed = mcp.request("tools/list", headers={"Origin": "https://console.asixto.example"})
    assert listed.status_code == 200
    assert mcp.request("tools/list", headers={"Origin": "null"}).status_code == 403


# --- failures of our own -----------------------------------------------------------------


def _auth_with_database_down(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every query of the authentication fails in the driver layer, as in a real outage."""
    real = mcp_module.gateway_company

    def refuse(execute, sql, params, many, context):
        raise OperationalError("connection refused")

    def authenticate(request):
        with connection.execute_wrapper(refuse):
            return real(request)

    monkeypatch.setattr(mcp_module, "gateway_company", authenticate)


def test_a_database_outage_during_auth_is_a_system_tool_result(mcp, monkeypatch):
    _auth_with_database_down(monkeypatch)

    result = result_of(mcp.call("list_services", {}, modern=True))

    assert result["isError"] is True
    assert result["structuredContent"]["error_type"] == "SYSTEM"
    assert result["resultType"] == "complete"


def test_a_database_outage_during_auth_of_another_method_is_a_json_503(mcp, monkeypatch):
    _auth_with_database_down(monkeypatch)

    body = error_of(mcp.request("tools/list"), 503, -32603)

    assert body["error"]["data"]["error_type"] == "SYSTEM"


def test_an_unexpected_failure_is_internal_error_without_trace(mcp, monkeypatch):
    def boom() -> list:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(registry, "all", boom)

    response = mcp.request("tools/list")

    body = error_of(response, 200, -32603)
    assert body["id"] == 1
    assert "secret" not in response.text
    assert "Traceback" not in response.text
