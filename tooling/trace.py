"""The conversation trace: one row per tool call, its arguments redacted, never its answer.

Staff read it to answer "why did the assistant say that?": which tool ran, with what (masked)
arguments, how it ended (error type and stable code), how long it took and whether it was a
replay. Writing it must never change the call it describes: it runs after the call is over,
outside the write's transaction, in batches off the request path (core.deferred), and a
failure to write is logged and swallowed.
"""

import json
import logging
import math
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection
from django.utils import timezone

from core.deferred import DeferredQueue
from core.models import Company
from core.outcome import Outcome, dumps
from core.redaction import IDENTIFIER_KEYS, SECRET_KEYS, scrub_text
from tooling.models import ToolCall

if TYPE_CHECKING:
    from tooling.context import CallMeta
    from tooling.registry import Tool

logger = logging.getLogger("garante.tools")

# Structural keys (references, dates, enums, catalogue terms) kept as given, but scrubbed of
# anything that looks like an email, a phone or a document number. Every other string is
# treated as free text and reduced to its length, so a new tool's field is masked by default.
KEPT_KEYS = frozenset(
    {
        "limit",
        "status",
        "state",
        "channel",
        "service",
        "professional",
        "slot",
        "from",
        "to",
        "appointment",
        "quote",
        "case",
        "related_case",
        "opportunity",
        "items",
        "sku",
        "quantity",
        "expected_total",
        "query",
    }
)
MAX_KEPT_CHARS = 120
MAX_LIST_ITEMS = 50
MAX_DEPTH = 4
MAX_ARGUMENTS_CHARS = 4000


def redact_arguments(arguments: Any) -> Any:
    """The arguments as the trace keeps them: personal data masked, sizes bounded."""
    redacted = _redact(arguments, key="", depth=0)
    if len(json.dumps(redacted, ensure_ascii=False, default=str)) > MAX_ARGUMENTS_CHARS:
        return {"_truncated": True}
    return redacted


def _redact(value: Any, *, key: str, depth: int) -> Any:
    name = key.lower()
    if name in SECRET_KEYS:
        return "[hidden]"
    if value is None or value == "":
        return value
    if name in IDENTIFIER_KEYS:
        return _mask_identifier(str(value))
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            return "[…]"
        return {
            _storable(str(k)[:64]): _redact(v, key=str(k), depth=depth + 1)
            for k, v in list(value.items())[:MAX_LIST_ITEMS]
        }
    if isinstance(value, list | tuple):
        if depth >= MAX_DEPTH:
            return "[…]"
        # Items of a list take the list's key: a list of messages stays masked.
        return [_redact(v, key=key, depth=depth + 1) for v in value[:MAX_LIST_ITEMS]]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # NaN and Infinity are not JSON: PostgreSQL would refuse the batch
    if isinstance(value, bool | int | float):
        return value
    text = str(value)
    if name in KEPT_KEYS:
        return scrub_text(_storable(text[:MAX_KEPT_CHARS]))
    return f"[text, {len(text)} chars]"


def _mask_identifier(value: str) -> str:
    if "@" in value:
        kind, visible = "email", value.split("@", 1)[0]
    elif sum(c.isdigit() for c in value) >= 7 and not any(c.isalpha() for c in value):
        kind, visible = "phone", value
    else:
        kind, visible = "document", value
    tail = "".join(c for c in visible if c.isalnum())[-2:]
    return f"[{kind} •••{tail}]"


def _storable(text: str) -> str:
    """Text PostgreSQL can store: a NUL character (which no text column or JSON value may
    hold, and which a rejected call may well have carried) becomes U+FFFD."""
    return text.replace("\x00", "\ufffd")


def tool_call_record(
    *,
    tool: "Tool",
    company: Company,
    meta: "CallMeta",
    surface: str,
    arguments: Any,
    outcome: Outcome,
    latency_ms: float,
) -> None:
    """Record one finished tool call. Never raises: the trace must not break the call.

    Call after the call's own transaction has ended. The row is written by the deferred
    writer (core.deferred), in a batch with the process's other calls of that moment.
    """
    try:
        row = _row(tool, company, meta, surface, arguments, outcome, latency_ms)
    except Exception:
        # A trace bug must not turn a good answer into a failure.
        logger.exception("could not record the trace of tool %s", tool.name)
        return
    _trace_rows.add(row)


def _row(
    tool: "Tool",
    company: Company,
    meta: "CallMeta",
    surface: str,
    arguments: Any,
    outcome: Outcome,
    latency_ms: float,
) -> dict[str, Any]:
    key = meta.conversation_id if isinstance(meta.conversation_id, str) else ""
    body = outcome.body if isinstance(outcome.body, dict) else {}
    count = body.get("count") if not outcome.is_error else None
    idempotency_key = meta.idempotency_key if isinstance(meta.idempotency_key, str) else ""
    return {
        "company_id": company.pk,
        "conversation_key": _storable(key[:255]),
        "tool": tool.name,
        "surface": surface[:16],
        "outcome": ToolCall.Outcome.ERROR if outcome.is_error else ToolCall.Outcome.OK,
        "error_type": (outcome.error_type or "") if outcome.is_error else "",
        "code": str(body.get("code", ""))[:64] if outcome.is_error else "",
        "replayed": outcome.replayed,
        "latency_ms": round(latency_ms, 3),
        "result_count": count if isinstance(count, int) and count >= 0 else None,
        "arguments": redact_arguments(arguments),
        "idempotency_key": _storable(idempotency_key[:255]),
        "created_at": timezone.now() - timedelta(milliseconds=latency_ms),
    }


def _write_rows(rows: list[dict[str, Any]]) -> None:
    """Write a batch of trace rows. On PostgreSQL with COPY: a row costs a fifth of
    bulk_create's CPU (no model instance, no per-value preparation: `_row` builds values of the
    columns' own types, and the redacted arguments, plain JSON values by construction, go in as
    their JSON text, which COPY's text format hands to the column's own input function)."""
    if connection.vendor != "postgresql":
        ToolCall.objects.bulk_create([ToolCall(**row) for row in rows])
        return
    fields = [field for field in ToolCall._meta.concrete_fields if not field.primary_key]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(field.column) for field in fields)
    names = [field.attname for field in fields]
    with (
        connection.cursor() as cursor,
        cursor.copy(f"COPY {quote(ToolCall._meta.db_table)} ({columns}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row(
                [dumps(row[name]) if name == "arguments" else row[name] for name in names]
            )


_trace_rows = DeferredQueue("conversation trace", _write_rows)


def tool_calls_trim(*, now: datetime | None = None, batch_size: int = 5000) -> int:
    """Delete trace rows older than settings.GARANTE_TRACE_RETENTION_DAYS; return how many.

    In batches, so a large backlog never holds a long lock on the table.
    """
    cutoff = (now or timezone.now()) - timedelta(days=settings.GARANTE_TRACE_RETENTION_DAYS)
    deleted = 0
    while True:
        batch = list(
            ToolCall.objects.filter(created_at__lt=cutoff).values_list("pk", flat=True)[:batch_size]
        )
        if not batch:
            return deleted
        deleted += ToolCall.objects.filter(pk__in=batch).delete()[0]
