"""The central output cap holds for every registered tool, and every tool is listed well-formed.

The tools are taken from the registry at run time, so a tool added later is covered without
touching this file. Each tool's handler is swapped for one that answers far too much (its
input schema for an empty one, so no tool-specific arguments are needed): whatever a handler
returns or raises, the result on the wire stays within 3,000 characters of JSON.
"""

import base64
import dataclasses
import itertools
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings
from mcp_types import methods

from core.errors import Ambiguous, ValidationFailed
from tests.wording import told_in_its_own_words
from tooling.context import CallMeta
from tooling.execution import call_tool
from tooling.mcp import tool_entry
from tooling.output import MAX_CURSOR_START, Page, capped, cursor_start, dumps, listing, page
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


# --- pages, listings and cursors, as the list tools use them ---


def cursor_of(text: str) -> str:
    """A cursor as `listing` writes them (URL-safe base64, unpadded) of any text."""
    return base64.urlsafe_b64encode(text.encode()).decode("ascii").rstrip("=")


def test_a_page_is_limit_rows_from_its_cursor_and_says_whether_more_exist():
    rows = list(range(10))

    assert page(rows, 4) == Page([0, 1, 2, 3], True, 0)
    assert page(rows, 3, cursor_of("p4")) == Page([4, 5, 6], True, 4)
    assert page(rows, 4, cursor_of("p6")) == Page([6, 7, 8, 9], False, 6)  # exactly the rest
    assert page(rows, 4, cursor_of("p7")) == Page([7, 8, 9], False, 7)
    assert page(rows, 4, cursor_of("p10")) == Page([], False, 10)


def test_a_listing_is_its_items_count_and_extras_and_where_its_next_page_starts():
    items = [{"n": 1}, {"n": 2}]

    plain = listing(items, has_more=True, note="x")
    paged = listing(items, has_more=True, start=5)
    last = listing(items, has_more=False, start=5)

    assert plain == {"items": items, "count": 2, "has_more": True, "note": "x"}
    assert plain.start is None
    assert paged == {"items": items, "count": 2, "has_more": True, "next_cursor": cursor_of("p7")}
    assert paged.start == 5 and cursor_start(paged["next_cursor"]) == 7
    assert last == {"items": items, "count": 2, "has_more": False, "next_cursor": None}


@pytest.mark.parametrize("position", [1, 12, 123, 1234, MAX_CURSOR_START - 1])
def test_a_cursor_the_listing_made_stands_for_its_position(position):
    cursor = listing([{}], has_more=True, start=position - 1)["next_cursor"]

    assert cursor == cursor_of(f"p{position}") and "=" not in cursor
    assert cursor_start(cursor) == position
    assert cursor_start(None) == 0


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "p12",  # the text, not its encoding
        cursor_of("x12"),
        cursor_of("p"),
        cursor_of("p1a"),
        cursor_of("p-1"),
        cursor_of("p²"),  # a digit to Python, not to int()
        cursor_of("p\u0661\u0662"),  # Arabic-Indic digits, which int() reads
        base64.urlsafe_b64encode(b"p\xff1").decode(),  # not ASCII
        "!!!!",
        cursor_of(f"p{MAX_CURSOR_START + 1}"),  # deeper than a cursor reaches
    ],
)
def test_any_other_cursor_is_refused_as_invalid(cursor):
    with pytest.raises(ValidationFailed) as refused:
        cursor_start(cursor)

    assert (refused.value.code, refused.value.extras) == ("invalid_cursor", {"field": "cursor"})
    told_in_its_own_words(refused.value)


def test_a_listing_whose_head_fits_the_cap_exactly_keeps_all_of_that_head(settings):
    limit = settings.GARANTE_OUTPUT_MAX_CHARS
    items = [{"text": "x" * 100} for _ in range(40)]
    head = dict(listing(items[:10], has_more=True), truncated=True)
    items[9] = {"text": "x" * (100 + limit - len(dumps(head)))}

    body, text = capped(listing(items, has_more=False))

    assert len(text) == limit and text == dumps(body)
    assert (body["items"], body["count"], body["has_more"]) == (items[:10], 10, True)


def test_the_cap_leaves_the_tools_own_listing_as_it_was():
    items = [{"text": "x" * 400} for _ in range(20)]
    answer = listing(items, has_more=False, start=0)

    capped(answer)

    assert answer["items"] == items and len(answer["items"]) == 20
    assert (answer["count"], answer["has_more"]) == (20, False)


def test_any_answer_with_items_is_shrunk_as_a_listing_is():
    items = [{"text": "x" * 400} for _ in range(20)]

    body, text = capped({"items": items, "count": 20, "has_more": False, "currency": "EUR"})

    assert 0 < body["count"] == len(body["items"]) < 20 and body["items"] == items[: body["count"]]
    assert (body["has_more"], body["truncated"]) == (True, True) and "next_cursor" not in body
    assert body["currency"] == "EUR"  # what the answer says besides its items is kept
    assert text == dumps(body)
