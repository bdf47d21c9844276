"""HTTP answers of tool outcomes, shared by the REST tool mirror and the DRF integration API.

Free of ninja and DRF so either surface can use it (seed 2's replay and retry headers live here).
"""

import json
from collections.abc import Mapping
from typing import Any

from django.http import HttpResponse

from core.errors import GaranteError
from tooling.execution import Outcome, error_outcome
from tooling.output import dumps


def loads(body: bytes | str) -> Any:
    """A request body's JSON. NaN and Infinity, which Python's parser accepts and JSON does not
    (RFC 8259), are refused like any other malformed body (ValueError): taken as numbers, they
    would reach a trace or a record that PostgreSQL's JSON refuses."""
    return json.loads(body, parse_constant=_not_json)


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def json_response(
    body: dict[str, Any], status: int, headers: Mapping[str, str] | None = None
) -> HttpResponse:
    return text_response(dumps(body), status, headers)


def text_response(
    text: str, status: int = 200, headers: Mapping[str, str] | None = None
) -> HttpResponse:
    """A JSON answer from its text. Encoded here: given bytes, Django skips looking up the
    response's charset, which costs a tool call more than the encoding (docs/performance.md)."""
    response = HttpResponse(text.encode(), status=status, content_type="application/json")
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def outcome_response(outcome: Outcome) -> HttpResponse:
    """The HTTP answer of a tool outcome (seed 2): a replay keeps the original status and body
    and says so; a retryable error (request_in_progress) carries Retry-After."""
    headers = {}
    if outcome.replayed:
        headers["X-Idempotency-Replayed"] = "true"
    if outcome.is_error and "retry_after_seconds" in outcome.body:
        headers["Retry-After"] = str(outcome.body["retry_after_seconds"])
    return text_response(outcome.body_text(), outcome.status, headers)


def error_response(error: GaranteError) -> HttpResponse:
    return outcome_response(error_outcome(error))
