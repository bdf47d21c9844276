"""The central output cap holds for every registered tool, and every tool is listed well-formed.

The tools are taken from the registry at run time, so a tool added later is covered without
touching this file. Each tool's handler is swapped for one that answers far too much (its
input schema for an empty one, so no tool-specific arguments are needed): whatever a handler
returns or raises, the result on the wire stays within 3,000 characters of JSON.
"""

import dataclasses
import itertools
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings
from mcp_types import methods

from core.errors import Ambiguous, ValidationFailed
from tooling.context import CallMeta
from tooling.execution import call_tool
from tooling.mcp import tool_entry
from tooling.output import capped, cursor_start, dumps, listing
from tooling.registry import Tool, ToolInput, registry

TOOL_NAMES = [tool.name for tool in registry.all()]
VERSIONS = ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
_keys = itertools.count(1)


class NoArguments(ToolInput):
    pass


def huge_listing(ctx: Any, params: Any) -> dict:
    items = [{"reference": f"AP-{n:06d}", "label": "ñ" * 80, "n": n} for n in range(400)]
    return listing(items, has_more=False)


def huge_listing_of_one_giant_item(ctx: Any, params: Any) -> dict:
    return listing([{"text": "x" * 10_000}], has_more=False)


def huge_payload(ctx: Any, params: Any) -> dict:
    return {"summary": "ü" * 8_000, "nested": {"rows": [["x" * 50] * 20] * 20}}


def huge_error(ctx: Any, params: Any) -> dict:
    raise ValidationFailed("Demasiado. " * 400, code="too_much", details=["y" * 100] * 100)


def huge_ambiguity(ctx: Any, params: Any) -> dict:
    raise Ambiguous(
        candidates=[{"reference": f"QT-{n:06d}", "label": "z" * 60} for n in range(300)]
    )


OVERSIZED: dict[str, Callable[[Any, Any], dict]] = {
    "listing": huge_listing,
    "giant_item": huge_listing_of_one_giant_item,
    "payload": huge_payload,
    "error": huge_error,
    "ambiguity": huge_ambiguity,
}


def oversized(tool: Tool, handler: Callable[[Any, Any], dict]) -> Tool:
    """The tool answering `handler`'s result, without arguments (so without an identifier
    to check, a step-up or a confirmation to ask: the cap is what is under test)."""
    undeclared = {
        "identified": False,
        "step_up": None,
        "step_up_deferred": False,
        "confirmation": False,
    }
    return dataclasses.replace(tool, input=NoArguments, handler=handler, **undeclared)


def assert_capped(body: dict[str, Any], kind: str) -> None:
    assert len(dumps(body)) <= settings.GARANTE_OUTPUT_MAX_CHARS
    if kind in ("listing", "giant_item"):
        assert body["has_more"] is True
        assert body["count"] == len(body["items"])
    if kind in ("error", "ambiguity"):
        assert body["error_type"] in ("VALIDATION", "AMBIGUOUS")
        assert body["user_message"]


@pytest.mark.django_db
@pytest.mark.parametrize("kind", list(OVERSIZED))
@pytest.mark.parametrize("name", TOOL_NAMES)
def test_every_tool_result_fits_the_cap_through_the_execution_path(company, name, kind):
    tool = oversized(registry.get(name), OVERSIZED[kind])
    meta = CallMeta(conversation_id="conv-cap", idempotency_key=f"cap-{next(_keys)}")

    outcome = call_tool(tool, company=company, arguments={}, meta=meta, surface="mcp")

    assert outcome.is_error is (kind in ("error", "ambiguity"))
    assert_capped(outcome.body, kind)
    assert outcome.body_text() == dumps(outcome.body)  # the text the answer reuses


@pytest.mark.django_db(transaction=True)
def test_every_tool_result_fits_the_cap_over_mcp(mcp, monkeypatch):
    """Over the wire: structuredContent and its text block both stay within the cap."""
    patched: dict[str, Tool] = {}
    original_get = registry.get
    monkeypatch.setattr(registry, "get", lambda name: patched.get(name) or original_get(name))
    limit = settings.GARANTE_OUTPUT_MAX_CHARS

    for name, (kind, handler) in itertools.product(TOOL_NAMES, OVERSIZED.items()):
        patched[name] = oversized(original_get(name), handler)
        key = f"wire-{next(_keys)}"

        response = mcp.call(name, {}, key=key, modern=kind == "payload")

        assert response.status_code == 200, (name, kind, response.text)
        result = response.json()["result"]
        assert result["isError"] is (kind in ("error", "ambiguity")), (name, kind)
        assert_capped(result["structuredContent"], kind)
        assert len(result["content"][0]["text"]) <= limit, (name, kind)
        assert result["content"][0]["text"] == dumps(result["structuredContent"]), (name, kind)


@pytest.mark.parametrize("name", TOOL_NAMES)
def test_every_tool_is_listed_well_formed(name):
    tool = registry.get(name)
    entry = tool_entry(tool)

    assert re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", entry["name"])
    assert entry["title"].strip()
    assert entry["description"].strip()
    schema = entry["inputSchema"]
    assert schema["type"] == "object"
    assert isinstance(schema["properties"], dict)
    assert schema.get("additionalProperties") is False, "unknown arguments must be rejected"
    assert set(schema.get("required", [])) <= set(schema["properties"])
    hints = entry["annotations"]
    assert hints["readOnlyHint"] is (not tool.write)
    assert isinstance(hints["destructiveHint"], bool)
    assert isinstance(hints["idempotentHint"], bool)
    assert hints["openWorldHint"] is False
    if not tool.write:
        assert hints["destructiveHint"] is False
    for version in VERSIONS:
        cache = {"ttlMs": 0, "cacheScope": "private", "resultType": "complete"}
        result = {"tools": [entry], **(cache if version == "2026-07-28" else {})}
        # The per-version wire shape keeps every field we send (nothing silently dropped).
        assert methods.serialize_server_result("tools/list", version, result)["tools"] == [entry]


def test_the_cap_is_the_seeds_3000_characters():
    assert settings.GARANTE_OUTPUT_MAX_CHARS == 3000


def test_the_cap_moves_a_listings_cursor_back_to_its_last_kept_item():
    items = [{"text": "x" * 400} for _ in range(20)]
    body, _ = capped(listing(items, has_more=False, start=40))

    assert body["truncated"] is True and body["has_more"] is True
    assert cursor_start(body["next_cursor"]) == 40 + body["count"]
