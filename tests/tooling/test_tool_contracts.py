"""Every tool's contract, as the official MCP SDK client meets it over real HTTP in both eras.

Bad arguments: for every registered tool, one call per constraint of its own input schema
(generated from the schema, so a tool added later is covered without touching this file) is
answered as a tool result with `isError: true` and a VALIDATION body naming the field, never
as a JSON-RPC error, since the model reads tool results and corrects its call from them.

Good results: a conversation that uses every production tool successfully gets, from each, a
`structuredContent` that its `outputSchema` in `tools/list` accepts.
"""

import io
import itertools
import json
import re
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import anyio.to_thread
import jsonschema
import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from mcp import Client

from core.models import OutboxMessage
from core.sms import LocmemBackend
from support.models import Case
from support.services import case_resolve, case_start
from tests.factories import ANA_DOCUMENT
from tests.tooling.sdk import run_sdk
from tooling.registry import Tool, registry

pytestmark = pytest.mark.django_db(transaction=True)

ERAS = ["legacy", "2026-07-28"]
CONVERSATION = "com.asixto/conversationId"
KEY = "com.asixto/idempotencyKey"
# Values the schema cannot say are valid (a validator of the tool's own): the base of its cases.
VALID_OVERRIDES = {
    "identify_contact": {"document": ANA_DOCUMENT},  # exactly one of its three optional fields
    "testapp_cancel_reservation": {"reference": "RS-ABC123"},
}


# --- generated bad arguments ----------------------------------------------------------------


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """The node itself, through a `$ref` and past an optional's `anyOf [..., null]`."""
    if "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    options = [o for o in node.get("anyOf", []) if o.get("type") != "null"]
    numbers = [o for o in options if o.get("type") == "number"]
    if numbers:  # a decimal: a number, or a string of one
        options = numbers
    if len(options) == 1:
        return {**_resolve(schema, options[0]), **{k: v for k, v in node.items() if k != "anyOf"}}
    return node


def _valid(schema: dict[str, Any], node: dict[str, Any]) -> Any:
    """A value the node accepts, the smallest its constraints allow."""
    node = _resolve(schema, node)
    if "enum" in node:
        return node["enum"][0]
    if "const" in node:
        return node["const"]
    kind = node.get("type")
    if kind in ("integer", "number"):
        return node.get("minimum", 1)
    if kind == "array":
        return [_valid(schema, node["items"])] * max(node.get("minItems", 1), 1)
    if kind == "object":
        return {name: _valid(schema, node["properties"][name]) for name in node.get("required", [])}
    if kind == "boolean":
        return True
    return "x" * max(node.get("minLength", 1), 3)


def _breaking(schema: dict[str, Any], node: dict[str, Any]) -> Iterator[tuple[str, Any, str]]:
    """(constraint, value that breaks it, the path below this node the problem names)."""
    node = _resolve(schema, node)
    kind = node.get("type")
    yield "type", ("x" if kind in ("array", "object") else {"not": "this"}), ""
    if "maxLength" in node:
        yield "maxLength", "x" * (node["maxLength"] + 1), ""
    if node.get("minLength", 0) >= 1:
        yield "minLength", "x" * (node["minLength"] - 1), ""
    if "maximum" in node:
        yield "maximum", node["maximum"] + 1, ""
    if "minimum" in node:
        yield "minimum", node["minimum"] - 1, ""
    if "exclusiveMaximum" in node:
        yield "exclusiveMaximum", node["exclusiveMaximum"], ""
    if "enum" in node:
        yield "enum", "no-such-value", ""
    if kind == "array":
        item = _valid(schema, node["items"])
        if "maxItems" in node:
            yield "maxItems", [item] * (node["maxItems"] + 1), ""
        if node.get("minItems", 0) >= 1:
            yield "minItems", [], ""
        # Each constraint of an item, in the first item.
        for constraint, value, below in _breaking(schema, node["items"]):
            yield f"items.{constraint}", [value], ".".join(p for p in ("0", below) if p)
    if kind == "object":
        base = _valid(schema, node)
        for name, child in node.get("properties", {}).items():
            for constraint, value, below in _breaking(schema, child):
                yield f"{name}.{constraint}", {**base, name: value}, _join(name, below)
        for name in node.get("required", []):
            yield f"{name}.missing", {k: v for k, v in base.items() if k != name}, name
        yield "additionalProperties", {**base, "surplus": 1}, "surplus"


def _join(*parts: str) -> str:
    return ".".join(p for p in parts if p)


def bad_calls(tool: Tool) -> list[tuple[str, dict[str, Any], str]]:
    """One call per constraint of the tool's input schema: (case, arguments, field)."""
    schema = tool.input_schema
    base = {**_valid(schema, schema), **VALID_OVERRIDES.get(tool.name, {})}
    tool.input.model_validate(base)  # the generator's own check: the base is valid
    cases = []
    for name, node in schema["properties"].items():
        for constraint, value, below in _breaking(schema, node):
            cases.append((f"{name}.{constraint}", {**base, name: value}, _join(name, below)))
    for name in schema.get("required", []):
        cases.append((f"{name}.missing", {k: v for k, v in base.items() if k != name}, name))
    cases.append(("additionalProperties", {**base, "surplus": 1}, "surplus"))
    return cases


BAD_CALLS = [(tool, *case) for tool in registry.all() for case in bad_calls(tool)]


def test_the_generator_covers_every_tool_and_every_kind_of_constraint():
    """The table below is not hand-listed: every tool has cases, and each kind of constraint
    the tools use is broken somewhere."""
    assert {tool.name for tool, *_ in BAD_CALLS} == {tool.name for tool in registry.all()}
    kinds = {case.rsplit(".", 1)[-1] for _, case, _, _ in BAD_CALLS}
    expected = {"type", "maxLength", "minLength", "maximum", "minimum", "enum", "missing"}
    assert expected | {"maxItems", "minItems", "exclusiveMaximum"} <= kinds | {
        "additionalProperties"
    }


def assert_validation_result(result: Any, field: str, context: str) -> dict[str, Any]:
    assert result.is_error is True, context
    body = result.structured_content
    assert json.loads(result.content[0].text) == body, context
    assert len(result.content[0].text) <= settings.GARANTE_OUTPUT_MAX_CHARS, context
    assert body["error_type"] == "VALIDATION", context
    assert body["code"] == "invalid_arguments", context
    assert body["user_message"].strip(), context
    assert all(set(p) == {"field", "message"} and p["message"] for p in body["problems"])
    assert field in [p["field"] for p in body["problems"]], (context, body["problems"])
    return body


@pytest.mark.parametrize("mode", ERAS)
def test_bad_arguments_to_any_tool_are_a_validation_result_naming_the_field(
    live_server, token, mode
):
    async def session(client: Client) -> list[tuple[str, Any]]:
        results = []
        for tool, case, arguments, field in BAD_CALLS:
            meta = {CONVERSATION: "conv-bad-arguments", KEY: uuid.uuid4().hex}
            result = await client.call_tool(tool.name, arguments, meta=meta)
            results.append((f"{tool.name}:{case}", field, result))
        return results

    for context, field, result in run_sdk(f"{live_server.url}/mcp", token, mode, session):
        assert_validation_result(result, field, context)


def test_the_rest_mirror_answers_the_same_problems_with_422(tool_client):
    for tool, case, arguments, field in BAD_CALLS:
        response = tool_client.call(tool.name, arguments, key=uuid.uuid4().hex)

        assert response.status_code == 422, (tool.name, case)
        body = response.json()
        assert body["code"] == "invalid_arguments", (tool.name, case)
        assert field in [p["field"] for p in body["problems"]], (tool.name, case)


def test_a_call_refused_for_its_arguments_keeps_its_key_for_the_corrected_call(mcp, company):
    """Nothing runs, nothing is stored: the same key then carries the corrected call, which
    runs (it is neither a replay of the refusal nor a conflict with it)."""
    from tests.testapp.models import Counter

    refused = mcp.call("testapp_increment_counter", {"name": "c", "by": 0}, key="k-fix-1")
    corrected = mcp.call("testapp_increment_counter", {"name": "c", "by": 2}, key="k-fix-1")

    assert refused.json()["result"]["isError"] is True
    assert refused.json()["result"]["structuredContent"]["problems"][0]["field"] == "by"
    assert corrected.json()["result"]["isError"] is False
    assert corrected.json()["result"]["structuredContent"]["value"] == 2
    assert Counter.objects.get(company=company, name="c").value == 2


def test_a_long_problem_list_is_cut_within_the_cap_saying_how_many_were_left(mcp):
    arguments = {f"unknown_{'n' * 100}_{n}": n for n in range(300)}

    response = mcp.call("list_services", arguments)

    result = response.json()["result"]
    body = result["structuredContent"]
    assert result["isError"] is True
    assert len(result["content"][0]["text"]) <= settings.GARANTE_OUTPUT_MAX_CHARS
    assert 0 < len(body["problems"]) < 300
    assert len(body["problems"]) + body["problems_omitted"] == 300
    assert body["problems"][0]["message"].startswith("Unknown argument. Accepted: limit, cursor")


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"subject": "s" * 1_000_000, "identifier": "x" * 3, "description": "d"}, "subject"),
        ({"subject": "\x01\x02\x7f" * 100, "identifier": "\x00", "description": "d"}, "identifier"),
        (
            {"identifier": "abc", "subject": "s", "description": json.loads("[" * 500 + "]" * 500)},
            "description",
        ),
        # A field name is shown cut to 128 characters, each unprintable one as "?".
        (
            {"identifier": "abc", "subject": "s", "description": "d", "\x07" * 500: 1},
            "?" * 127 + "…",
        ),
    ],
    ids=["a 1 MB string", "binary text", "deep nesting", "a binary field name"],
)
def test_bad_input_is_never_echoed_back(mcp, arguments, field):
    response = mcp.call("open_case", arguments, key=uuid.uuid4().hex)

    result = response.json()["result"]
    text = result["content"][0]["text"]
    assert result["isError"] is True
    assert len(text) <= settings.GARANTE_OUTPUT_MAX_CHARS
    assert "sssss" not in text and "\x01" not in text and "\x07" not in text
    assert [p["field"] for p in result["structuredContent"]["problems"]] == [field]


@pytest.mark.parametrize("limit", [-1, 0, 51, 10**30])
def test_a_negative_or_huge_limit_is_named_with_what_is_accepted(mcp, limit):
    result = mcp.call("list_services", {"limit": limit}).json()["result"]

    assert result["isError"] is True
    (problem,) = result["structuredContent"]["problems"]
    assert problem["field"] == "limit"
    assert re.search(r"(less|greater) than or equal to (1|50)", problem["message"])


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_services",'
        b'"arguments":{"limit":NaN}}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_services",'
        b'"arguments":{"limit":Infinity}}}',
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_services",'
        b'"arguments":{"cursor":"\xff\xfe"}}}',
    ],
    ids=["NaN", "Infinity", "invalid UTF-8"],
)
def test_what_is_not_json_is_a_parse_error(mcp, body):
    response = mcp.post(body)

    assert response.json()["error"]["code"] == -32700
    assert response.json()["id"] is None


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"name": "no_such_tool", "arguments": {}}, -32602),
        ({"arguments": {}}, -32602),
    ],
    ids=["unknown tool", "missing name"],
)
def test_the_protocol_keeps_its_own_errors(mcp, params, code):
    response = mcp.request("tools/call", params)

    assert response.json()["error"]["code"] == code


# --- good results against the output schemas -------------------------------------------------


@pytest.fixture
def sandbox(live_server, settings) -> Iterator[str]:
    """The declared sandbox and its token; its codes are kept in its outbox, never sent, so a
    provider configured here would get nothing."""
    settings.GARANTE_SMS_BACKEND = "locmem"
    LocmemBackend.outbox.clear()
    out = io.StringIO()
    call_command("seed_sandbox", stdout=out)
    yield re.search(r"Gateway token: (\S+)", out.getvalue()).group(1)
    assert LocmemBackend.outbox == []


def _code() -> str:
    """The last code the sandbox sent, read from its outbox as staff read it in the admin."""
    texts = OutboxMessage.objects.filter(channel="sms").order_by("-pk")
    body = texts.values_list("body", flat=True)[0]
    return re.search(r"\b(\d{6})\b", body).group(1)


def _resolved_by_staff(reference: str) -> None:
    case = Case.objects.get(reference=reference)
    case_resolve(case=case_start(case=case))


@pytest.mark.parametrize("mode", ERAS)
def test_every_tool_answers_what_its_output_schema_says(live_server, sandbox, mode):
    """Ana uses every production tool once, successfully; the SDK client checks each
    structuredContent against the tool's outputSchema, and so does this test."""
    ana = ANA_DOCUMENT
    day = (timezone.localdate() + timedelta(days=2)).isoformat()
    conversation = f"conv-schemas-{mode}"
    results: dict[str, Any] = {}

    async def session(client: Client) -> dict[str, Any]:
        schemas = {
            t.name: registry.get(t.name).output_schema for t in (await client.list_tools()).tools
        }
        keys = itertools.count(1)

        async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            meta = {CONVERSATION: conversation, KEY: f"{mode}-{next(keys)}"}
            result = await client.call_tool(name, arguments, meta=meta)
            assert result.is_error is False, (name, result.structured_content)
            jsonschema.Draft202012Validator(schemas[name]).validate(result.structured_content)
            results[name] = result.structured_content
            return result.structured_content

        me = {"identifier": ana}
        await call("identify_contact", {"document": ana})
        await call("request_verification_code", {**me, "channel": "sms"})
        await call("verify_code", {**me, "code": await anyio_to_thread(_code)})
        await call("verification_status", me)
        await call("list_services", {"limit": 2})
        slots = await call("find_available_slots", {"service": "Corte de pelo", "from": day})
        booked = await call(
            "book_appointment",
            {**me, "service": "Corte de pelo", "slot": slots["items"][0]["slot"]},
        )
        await call("list_my_appointments", me)
        moves = await call(
            "find_available_slots",
            {"service": "Corte de pelo", "from": day, "appointment": booked["appointment"]},
        )
        await call(
            "reschedule_appointment",
            {**me, "appointment": booked["appointment"], "slot": moves["items"][-1]["slot"]},
        )
        await call("cancel_appointment", {**me, "appointment": booked["appointment"]})
        products = await call("search_products", {"query": ""})
        in_stock = [p for p in products["items"] if p["in_stock"]]
        item = {"sku": in_stock[0]["sku"], "quantity": 1}
        quote = await call("create_quote", {**me, "items": [item]})
        await call("list_my_quotes", me)
        await call("get_quote", {**me, "quote": quote["reference"]})
        await call("accept_quote", {**me, "quote": quote["reference"]})
        other = await call("create_quote", {**me, "items": [item]})
        await call("reject_quote", {**me, "quote": other["reference"], "reason": "Caro"})
        await call("request_sales_contact", {**me, "topic": "Quiero una oferta"})
        opened = await call("open_case", {**me, "subject": "No enciende", "description": "Nada."})
        cases = await call("list_my_cases", {**me, "state": "resolved"})
        await call("get_case", {**me, "case": opened["reference"]})
        await call("add_case_comment", {**me, "case": opened["reference"], "message": "Más"})
        await call("confirm_case_resolved", {**me, "case": cases["items"][0]["reference"]})
        await anyio_to_thread(_resolved_by_staff, opened["reference"])
        await call("report_case_not_fixed", {**me, "case": opened["reference"], "message": "Sigue"})
        await call("update_contact_details", {**me, "phone": "611 98 76 54"})
        await call("confirm_contact_change", {**me, "code": await anyio_to_thread(_code)})
        return results

    run_sdk(f"{live_server.url}/mcp", sandbox, mode, session)

    production = {t.name for t in registry.all() if not t.name.startswith("testapp_")}
    assert set(results) == production, "every production tool needs a step in this conversation"


async def anyio_to_thread(function: Any, *args: Any) -> Any:
    """Staff act from another thread (the ORM is synchronous), which closes its database
    connection after (or the test database could not be dropped)."""

    def run() -> Any:
        try:
            return function(*args)
        finally:
            connection.close()

    return await anyio.to_thread.run_sync(run)


def test_every_tool_lists_an_object_output_schema(mcp):
    tools = mcp.request("tools/list", {}).json()["result"]["tools"]

    for listed in tools:
        schema = listed["outputSchema"]
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["type"] == "object", listed["name"]
        tool = registry.get(listed["name"])
        assert schema == tool.listed_output_schema
        # The success shape exactly, or an error body (for clients that check error results).
        success, error = schema["anyOf"]
        assert success["properties"] == tool.output_schema["properties"]
        assert set(error["required"]) == {"error_type", "user_message", "code"}
