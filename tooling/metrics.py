"""A finished tool call counted and logged, once, from tooling.execution.call_tool: its
Prometheus series (core.metrics), and its log line's fields (on its request's line,
core.request_log, or a line of its own outside a request).

The series' children are bound once per (surface, tool) and per error type, then reused: a
call costs two increments and a dictionary lookup or two, not a label lookup under a lock.
"""

import logging

from prometheus_client import Counter, Histogram

from core.metrics import TOOL_CALL_SECONDS, TOOL_CALLS
from core.models import Company
from core.outcome import Outcome
from core.request_log import current_request

logger = logging.getLogger("garante.tools")


class _ToolSeries:
    """The children of one tool's series on one surface."""

    __slots__ = ("duration", "errors", "ok", "surface", "tool")

    def __init__(self, tool: str, surface: str) -> None:
        self.tool, self.surface = tool, surface
        self.duration: Histogram = TOOL_CALL_SECONDS.labels(tool, surface)
        self.ok: Counter = TOOL_CALLS.labels(tool, surface, "ok", "")
        self.errors: dict[str, Counter] = {}

    def error(self, error_type: str) -> Counter:
        child = self.errors.get(error_type)
        if child is None:
            child = self.errors.setdefault(
                error_type, TOOL_CALLS.labels(self.tool, self.surface, "error", error_type)
            )
        return child


# surface -> tool name -> its series.
_series: dict[str, dict[str, _ToolSeries]] = {}


def _series_of(tool: str, surface: str) -> _ToolSeries:
    by_tool = _series.get(surface)
    if by_tool is None:
        by_tool = _series.setdefault(surface, {})
    series = by_tool.get(tool)
    if series is None:
        series = by_tool.setdefault(tool, _ToolSeries(tool, surface))
    return series


def tool_call_observed(
    *,
    tool: str,
    surface: str,
    company: Company,
    conversation_id: object,
    outcome: Outcome,
    seconds: float,
) -> None:
    """Count one finished call, and give its fields to its request's log line
    (core.request_log), or write its own line when no request runs it. The fields name the
    call, never its arguments or its answer: the tool, the company, the conversation, how it
    ended and how long it took."""
    series = _series_of(tool, surface)
    error_type = outcome.error_type if outcome.is_error else None
    (series.error(error_type or "SYSTEM") if outcome.is_error else series.ok).inc()
    series.duration.observe(seconds)
    request = current_request()
    if request is None and not logger.isEnabledFor(logging.INFO):
        return
    code = outcome.body.get("code") if outcome.is_error else None
    fields = {
        "event": "tool_call",
        "tool": tool,
        # The caller's text, masked by core.logs like the rest of the line.
        "conversation_id": conversation_id[:255] if isinstance(conversation_id, str) else None,
        "outcome": "error" if outcome.is_error else "ok",
        "error_type": error_type,
        "error_code": code if isinstance(code, str) else None,
        "replayed": outcome.replayed,
        "tool_duration_ms": round(seconds * 1000, 3),
    }
    if request is not None:
        request.company_id = company.pk
        request.tool_call = fields
        return
    logger.info(
        "tool %s: %s in %.1f ms",
        tool,
        error_type or "ok",
        seconds * 1000,
        extra={
            **fields,
            "company": company.pk,
            "surface": surface,
            "duration_ms": round(seconds * 1000, 3),
        },
    )
