"""Bad input at scale against a real gunicorn: a hypothesis fuzzer of MCP JSON-RPC envelopes,
headers and tool arguments, and schemathesis over the tool API's OpenAPI document. Whatever is
sent: no 500, no stack trace or path on the wire, no tool result over 3,000 characters."""

import io
import json
import os
import re
import uuid
from typing import Any

import httpx
import pytest
import schemathesis
from django.core.management import call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.models import Company
from tests.factories import ANA_DOCUMENT, ANA_EMAIL
from tests.reliability.conftest import OUTPUT_LIMIT, assert_clean_wire
from tooling.registry import registry

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CONVERSATION = "fuzz-conversation"
ENVELOPES = int(os.environ.get("GARANTE_FUZZ_ENVELOPES", "200"))
ARGUMENT_SETS = int(os.environ.get("GARANTE_FUZZ_ARGUMENTS", "250"))
OPENAPI_EXAMPLES = int(os.environ.get("GARANTE_FUZZ_OPENAPI", "4"))
# What a JSON-RPC endpoint may answer: never a server error.
MCP_STATUSES = {200, 202, 400, 401, 403, 404, 405, 413, 415}  # 415: not application/json


def bounded(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=bool(os.environ.get("CI")),  # reproducible in CI, exploring elsewhere
        suppress_health_check=list(HealthCheck),
    )


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
# Printable ASCII without surrounding spaces: what an HTTP client can put in a header at all.
header_text = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40).map(
    str.strip
)
# Strings that have broken parsers and normalisers elsewhere.
nasty = st.sampled_from(
    [
        "",
        " ",
        ANA_DOCUMENT,
        "12345678z ",
        "+34 600 111 222",
        ANA_EMAIL,
        "AP-",
        "CS-ZZZZZZ",
        "SL-000000",
        "2026-02-30",
        "2026-12-07 10:00",
        "hoy",
        "mañana",
        "' OR 1=1 --",
        "\x00",
        "\u202e\u0000\ud7ff",
        "\U0001d518\U0001d52b\U0001d526",  # letters outside the BMP
        "9" * 400,
        "x" * 5000,
        "=?base64?bGlzdF9zZXJ2aWNlcw==?=",
    ]
)
loose = json_values | nasty | st.text(max_size=200)


def production_tools() -> list[Any]:
    return [t for t in registry.all() if not t.name.startswith("testapp_")]


def check_mcp_answer(response: httpx.Response) -> None:
    assert response.status_code in MCP_STATUSES, (response.status_code, response.text[:500])
    assert_clean_wire(response.text)
    if not response.content:
        assert response.status_code == 202
        return
    assert response.headers["content-type"].startswith("application/json")
    answer = response.json()
    result = answer.get("result") if isinstance(answer, dict) else None
    if isinstance(result, dict) and "content" in result:
        for block in result["content"]:
            assert len(block.get("text", "")) <= OUTPUT_LIMIT, block.get("text", "")[:200]
        structured = json.dumps(
            result.get("structuredContent"), ensure_ascii=False, separators=(",", ":")
        )
        assert len(structured) <= OUTPUT_LIMIT


@pytest.fixture
def sandbox(gunicorn_server) -> dict[str, Any]:
    """The declared sandbox (rich data of every app), served by gunicorn; a conversation of it
    identified as Ana, so tool arguments can get past identity."""
    out = io.StringIO()
    call_command("seed_sandbox", stdout=out)
    token = re.search(r"Gateway token:\s*(\S+)", out.getvalue()).group(1)
    server = gunicorn_server(workers=2, threads=4)
    http = httpx.Client(
        base_url=server.url,
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
        timeout=30,
    )
    identified = http.post(
        "/api/tools/identify_contact",
        json={"document": ANA_DOCUMENT},
        headers={"X-Conversation-Id": CONVERSATION, "Idempotency-Key": "fuzz-identify"},
    )
    assert identified.status_code == 200, identified.text
    assert Company.objects.get(slug="sandbox").is_sandbox
    yield {"url": server.url, "token": token, "http": http}
    http.close()


def meta_strategy() -> st.SearchStrategy:
    return st.fixed_dictionaries(
        {},
        optional={
            "com.asixto/conversationId": st.just(CONVERSATION) | loose,
            "com.asixto/idempotencyKey": st.uuids().map(str) | loose,
            "com.garante/fault": st.sampled_from(["database", "disk"]) | loose,
            "io.modelcontextprotocol/protocolVersion": st.sampled_from(
                ["2026-07-28", "2025-11-25", "2024-01-01"]
            )
            | loose,
            "io.modelcontextprotocol/clientCapabilities": st.just({}) | loose,
        },
    )


def envelope_strategy() -> st.SearchStrategy:
    names = st.sampled_from([t.name for t in production_tools()]) | loose
    methods = (
        st.sampled_from(
            [
                "initialize",
                "ping",
                "tools/list",
                "tools/call",
                "server/discover",
                "notifications/initialized",
                "resources/list",
            ]
        )
        | loose
    )
    params = st.fixed_dictionaries(
        {},
        optional={
            "name": names,
            "arguments": st.dictionaries(st.text(max_size=15), loose, max_size=5) | loose,
            "_meta": meta_strategy() | loose,
            "protocolVersion": st.sampled_from(["2025-11-25", "2026-07-28"]) | loose,
            "cursor": loose,
            "capabilities": loose,
            "clientInfo": loose,
        },
    )
    envelope = st.fixed_dictionaries(
        {},
        optional={
            "jsonrpc": st.just("2.0") | loose,
            "id": st.integers() | st.text(max_size=10) | loose,
            "method": methods,
            "params": params | loose,
        },
    )
    compact = envelope.map(lambda e: json.dumps(e, ensure_ascii=False).encode())
    return compact | json_values.map(lambda v: json.dumps(v).encode()) | st.binary(max_size=300)


headers_strategy = st.fixed_dictionaries(
    {},
    optional={
        "MCP-Protocol-Version": st.sampled_from(["2025-11-25", "2026-07-28", "2025-03-26"])
        | header_text,
        "Mcp-Method": st.sampled_from(["tools/call", "tools/list"]) | header_text,
        "Mcp-Name": header_text,
        "Content-Type": st.sampled_from(["application/json", "text/plain"]),
        "Origin": st.sampled_from(["https://evil.example", "null"]),
    },
)


def test_fuzzed_mcp_envelopes_headers_and_tool_arguments_never_break_the_endpoint(sandbox):
    http: httpx.Client = sandbox["http"]

    @bounded(ENVELOPES)
    @given(body=envelope_strategy(), headers=headers_strategy)
    def envelopes(body: bytes, headers: dict[str, str]) -> None:
        check_mcp_answer(http.post("/mcp", content=body, headers=headers))

    envelopes()
    tools = production_tools()

    def arguments_of(tool: Any) -> st.SearchStrategy:
        fields = tool.input_schema.get("properties", {})
        return st.fixed_dictionaries({}, optional={name: loose for name in fields}) | loose

    calls = st.sampled_from(tools).flatmap(lambda t: st.tuples(st.just(t.name), arguments_of(t)))

    @bounded(ARGUMENT_SETS)
    @given(call=calls, modern=st.booleans())
    def arguments(call: tuple[str, Any], modern: bool) -> None:
        name, arguments = call
        meta = {
            "com.asixto/conversationId": CONVERSATION,
            "com.asixto/idempotencyKey": uuid.uuid4().hex,
        }
        headers = {"MCP-Protocol-Version": "2025-11-25"}
        if modern:
            meta["io.modelcontextprotocol/protocolVersion"] = "2026-07-28"
            meta["io.modelcontextprotocol/clientCapabilities"] = {}
            headers = {
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "tools/call",
                "Mcp-Name": name,
            }
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": meta},
        }
        response = http.post("/mcp", json=body, headers=headers)
        check_mcp_answer(response)
        # Every call of a known tool is answered as a tool result, malformed arguments too;
        # only `arguments` that is not an object at all is the protocol's own -32602.
        answer = response.json()
        if arguments is not None and not isinstance(arguments, dict):
            assert answer["error"]["code"] == -32602, answer
            return
        assert "error" not in answer, answer
        # The database is up and no fault is asked for: bad input is the caller's mistake and
        # must never be answered as an outage (which tells the agent to try again later).
        assert answer["result"]["structuredContent"].get("error_type") != "SYSTEM", (
            call,
            answer,
        )

    arguments()


def test_schemathesis_over_the_tool_apis_openapi_finds_no_server_error_leak_or_oversize(sandbox):
    document = sandbox["http"].get("/api/openapi.json").json()
    schema = schemathesis.openapi.from_dict(document)
    authorization = f"Bearer {sandbox['token']}"
    statuses = set()
    tried = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        if "/testapp_" in operation.path:
            continue  # test-only tools, some of which fail on purpose

        @bounded(OPENAPI_EXAMPLES)
        @given(case=operation.as_strategy())
        def probe(case: Any) -> None:
            case.headers = {**(case.headers or {}), "Authorization": authorization}
            response = case.call(base_url=sandbox["url"], timeout=30)
            statuses.add(response.status_code)
            assert_clean_wire(response.text)
            assert len(response.text) <= OUTPUT_LIMIT, response.text[:300]
            if response.status_code >= 500:
                # Only a dependency down may answer 5xx, and then as the canonical JSON body.
                assert response.status_code == 503, (case.path, response.text[:300])
                assert response.json()["error_type"] == "SYSTEM"

        probe()
        tried += 1
    assert tried >= len(production_tools())
    assert 200 in statuses  # authenticated cases got through to the tools
