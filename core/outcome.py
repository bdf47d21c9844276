"""A call's outcome and its HTTP answer, below every API (MCP, the REST tool mirror, the
integration API), and what the tool-call trace records.

An error becomes its canonical body (core.errors), shrunk to the output cap, with its status;
an outcome becomes its HTTP answer with seed 2's replay and retry headers. Which error an
exception is, and an error's HTTP answer, are core.boundary's.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http import HttpResponse

from core.errors import GaranteError

# One encoder for every answer: json.dumps with options builds a new one per call, which costs
# a cheap tool call's answer a quarter of its encoding time. An encoder keeps no state between
# calls, so threads share it.
_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(payload: Any) -> str:
    """The JSON text of a payload, as it goes on the wire (compact, UTF-8 kept)."""
    return _encoder.encode(payload)


@dataclass(frozen=True)
class Outcome:
    body: dict[str, Any]
    is_error: bool
    status: int
    replayed: bool = False
    error_type: str | None = None
    # The body's JSON text as it goes on the wire, when the call already wrote it (the output
    # cap measures it, a replay has it stored): the answer reuses it instead of encoding again.
    text: str | None = None

    def body_text(self) -> str:
        return self.text if self.text is not None else dumps(self.body)


def error_outcome(error: GaranteError) -> Outcome:
    """The outcome of a refusal or a failure, whatever raised it and whichever surface answers."""
    body, text = error_capped(error.as_dict())
    return Outcome(
        body=body,
        is_error=True,
        status=error.http_status,
        error_type=error.error_type.value,
        text=text,
    )


def error_capped(payload: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """An error body within the output cap (settings.GARANTE_OUTPUT_MAX_CHARS, the cap of
    every tool result, tooling.output), and its JSON text: an argument error keeps the
    problems that fit and says how many it left out; any other too large an error keeps only
    its type, message (shortened) and code."""
    limit = settings.GARANTE_OUTPUT_MAX_CHARS
    text = dumps(payload)
    if len(text) <= limit:
        return payload, text
    problems = payload.get("problems")
    if isinstance(problems, list):
        omitted = payload.get("problems_omitted") or 0
        shrunk = dict(payload, problems=list(problems))
        # The integration API's deprecated alias of the same list (integration.errors) is cut
        # alike.
        alias = isinstance(payload.get("errors"), list)
        if alias:
            shrunk["errors"] = list(payload["errors"])
        while shrunk["problems"] and len(dumps(shrunk)) > limit:
            shrunk["problems"].pop()
            if alias:
                shrunk["errors"].pop()
            omitted += 1
            shrunk["problems_omitted"] = omitted
        text = dumps(shrunk)
        if len(text) <= limit:
            return shrunk, text
    short = {
        "error_type": payload["error_type"],
        "user_message": str(payload.get("user_message", ""))[:500],
        "code": payload.get("code", ""),
    }
    return short, dumps(short)


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
    """The HTTP answer of an outcome (seed 2): a replay keeps the original status and body and
    says so; a retryable error (request_in_progress) carries Retry-After."""
    headers = {}
    if outcome.replayed:
        headers["X-Idempotency-Replayed"] = "true"
    if outcome.is_error and "retry_after_seconds" in outcome.body:
        headers["Retry-After"] = str(outcome.body["retry_after_seconds"])
    return text_response(outcome.body_text(), outcome.status, headers)
