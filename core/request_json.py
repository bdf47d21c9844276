"""The one JSON reading of a request body, shared by every API: the tool API (MCP and the REST
tool mirror, tooling) and the integration API (integration), so each refuses the same bodies
alike: another media type or charset (415, `is_json_media_type`), malformed JSON (400)."""

import json
import math
from typing import Any

from core.outcome import dumps


def loads(body: bytes | str) -> Any:
    """A request body's JSON, refusing like any other malformed body (ValueError) what Python's
    parser accepts and JSON, or Unicode, does not: bytes that are not UTF-8 (Python would
    guess UTF-16 or UTF-32 and skip a byte-order mark; RFC 8259 allows neither in a request),
    NaN and Infinity (RFC 8259) and numbers too
    large for a float (`1e400`, which Python reads as infinity), and text with a lone surrogate
    (`"\\ud800"`: an escape of half a character, which no UTF-8 can carry). Accepted, they
    reached a trace or a record that PostgreSQL refuses, and an answer that echoed one could
    not be encoded at all. Nesting deeper than the parser can follow (`[` a hundred thousand
    times) is malformed too: the parser's RecursionError, let through, was answered as an
    outage (503 SYSTEM) with its traceback in the log."""
    # Decoded here, strictly: a str starting with a byte-order mark is refused by the parser.
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    try:
        decoded = json.loads(text, parse_constant=_not_json, parse_float=_finite)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    # A surrogate can only come from a \u escape or from the bytes that would encode one
    # (the parser lets both through); most bodies have neither and skip the check.
    raw = body if isinstance(body, bytes) else body.encode("utf-8", "surrogatepass")
    if b"\\u" in raw or b"\xed" in raw:
        try:
            dumps(decoded).encode()
        except UnicodeEncodeError:
            raise ValueError("text with a lone surrogate is not Unicode") from None
    return decoded


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"{literal[:40]} is too large a number")
    return value


def is_json_media_type(content_type: str | None) -> bool:
    """Whether a request's Content-Type is JSON as every API takes it: `application/json`,
    with no parameter but an optional `charset=utf-8` (RFC 8259 JSON is UTF-8; MCP's
    transport answers 415 to anything else, and so does every API)."""
    media_type, *parameters = (content_type or "").split(";")
    if media_type.strip().lower() != "application/json":
        return False
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() != "charset" or value.strip().strip('"').lower() != "utf-8":
            return False
    return True
