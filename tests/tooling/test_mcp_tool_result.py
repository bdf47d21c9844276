"""A tools/call result, for every protocol version we serve, is what mcp_types' serializer makes
of the body, byte for byte, whether the body's text was stored with the effect or not."""

import json

import pytest
from mcp_types import SERVER_INFO_META_KEY
from mcp_types import methods as mcp_methods

from core.errors import Conflict, ValidationFailed
from core.idempotency.engine import response_text
from core.outcome import Outcome, error_outcome
from tooling.mcp import LEGACY_VERSIONS, MODERN_VERSIONS, SERVER_INFO, Route, _tool_result
from tooling.output import capped

BODY = {
    "items": [{"name": "Corte de pelo", "price": "18.00", "note": None}],
    "count": 1,
    "has_more": False,
    "quoted": 'dice "hola"\\ y adiós\n\u2028',
}


def outcomes() -> dict[str, Outcome]:
    body, text = capped(BODY)
    return {
        "read": Outcome(body=body, is_error=False, status=200, text=text),
        "write, stored text": Outcome(
            body=json.loads(response_text(BODY)),
            is_error=False,
            status=200,
            replayed=True,
            text=response_text(BODY),
        ),
        "no text yet": Outcome(body={"recorded": "ñ"}, is_error=False, status=200),
        "business error": error_outcome(ValidationFailed("La hora ya no está libre.", code="x")),
        "conflict": error_outcome(Conflict("Otra vez.", code="request_in_progress")),
    }


def library_result(outcome: Outcome, version: str, modern: bool) -> dict:
    result = {
        "content": [{"type": "text", "text": outcome.body_text()}],
        "structuredContent": outcome.body,
        "isError": outcome.is_error,
    }
    if modern:
        result = {"resultType": "complete", **result, "_meta": {SERVER_INFO_META_KEY: SERVER_INFO}}
    return mcp_methods.serialize_server_result("tools/call", version, result)


VERSIONS = [(v, False) for v in LEGACY_VERSIONS] + [(v, True) for v in MODERN_VERSIONS]


@pytest.mark.parametrize(("version", "modern"), VERSIONS)
@pytest.mark.parametrize("kind", list(outcomes()))
def test_a_tool_result_is_what_the_schema_library_makes_of_it(version, modern, kind):
    outcome = outcomes()[kind]

    text = _tool_result(outcome, Route(modern=modern, version=version))

    expected = library_result(outcome, version, modern)
    assert json.loads(text) == expected
    assert text == json.dumps(expected, ensure_ascii=False, separators=(",", ":"))
    # The text content and the structured content say the same thing.
    parsed = json.loads(text)
    assert json.loads(parsed["content"][0]["text"]) == parsed["structuredContent"]


def test_the_result_carries_the_error_flag_and_the_modern_stamp():
    error = outcomes()["business error"]

    legacy = json.loads(_tool_result(error, Route(modern=False, version=LEGACY_VERSIONS[0])))
    modern = json.loads(_tool_result(error, Route(modern=True, version=MODERN_VERSIONS[0])))

    assert legacy["isError"] is True and "_meta" not in legacy and "resultType" not in legacy
    assert modern["isError"] is True and modern["resultType"] == "complete"
    assert modern["_meta"] == {SERVER_INFO_META_KEY: SERVER_INFO}
