"""Every request's id, its one log line and its HTTP metrics.

One line per request: a tool call's request (MCP's tools/call, the REST mirror) writes one
line that is also the call's (event "tool_call": the tool, the conversation, how the call
ended and how long it took, tooling.metrics), the others one of event "request". A line
costs about as much CPU as the cheapest tool call's metrics ten times over, and two lines
for one call would say the same request twice.

The id is the caller's `X-Request-ID` when it is well-formed (a proxy or the Gateway that set
it can find our lines by it), else one we draw; either way it is answered in the response's
`X-Request-ID` and stamped on every log line written while the request runs (core.logs). A
malformed one (too long, a character outside `[A-Za-z0-9._:-]`) is replaced, never echoed:
a header is the caller's text, and a log line or a response must not carry it unchecked.

The middleware comes right after the health probes and the Host check in settings.MIDDLEWARE,
so it sees every other answer, Django's own refusals included, and times the rest of the stack.
"""

import contextvars
import logging
import re
import secrets
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase

from core.metrics import HTTP_REQUEST_SECONDS, HTTP_REQUESTS
from core.redaction import scrub_secrets

logger = logging.getLogger("garante.requests")

REQUEST_ID_HEADER = "X-Request-ID"
# Route parameters that carry a credential (an opt-out link's token, a password reset's): a
# logged path names them [token], whatever shape the credential has.
CREDENTIAL_PARAMETERS = frozenset({"token", "signature", "key", "code", "secret", "uidb64"})
REQUEST_ID_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,128}")
# Set on a log record whose writer masked every field and argument itself (this module's
# request line): core.logs writes it as it is, instead of masking each field again, which cost
# the line most of its CPU (docs/performance.md, "request log").
ALREADY_MASKED = "garante_masked"


class RequestState:
    """What the log lines of one request share: its id, its company once it is known, and
    the fields of the tool call it ran (for its line, when lines are on)."""

    __slots__ = ("company_id", "drawn", "request_id", "tool_call")

    def __init__(self, request_id: str, *, drawn: bool = False) -> None:
        self.request_id = request_id
        self.drawn = drawn  # ours (hex), not the caller's text
        self.company_id: int | None = None
        self.tool_call: dict[str, Any] | None = None


_current: contextvars.ContextVar[RequestState | None] = contextvars.ContextVar(
    "garante_request", default=None
)


def current_request() -> RequestState | None:
    """The request this thread is serving, or None (a Celery task, a management command)."""
    return _current.get()


def request_id_from(header: str | None) -> str:
    """The caller's request id if it is well-formed, else a new one (32 hex characters)."""
    if header is not None and REQUEST_ID_PATTERN.fullmatch(header):
        return header
    return secrets.token_hex(16)


def loggable_path(request: HttpRequest, path: str | None = None) -> str:
    """The request's `path` (its path_info unless given) as a log line writes it: never its
    query string (where a filter may name a customer), a credential its route takes in the
    path as [token], the rest masked (core.redaction), at most 200 characters."""
    path = request.path_info if path is None else path
    match = getattr(request, "resolver_match", None)
    if match is not None:
        for name, value in match.kwargs.items():
            if name in CREDENTIAL_PARAMETERS and isinstance(value, str) and value:
                path = path.replace(value, "[token]")
    return scrub_secrets(path[:200])


def surface_of(path: str) -> str:
    """Which of the project's faces a path belongs to, as metrics and log lines name it."""
    if path == "/mcp":
        return "mcp"
    if path.startswith("/api/tools/"):
        return "rest"
    if path.startswith("/api/v1/"):
        return "integration"
    if path.startswith("/admin/"):
        return "admin"
    return "other"


class RequestLogMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response
        # Paths answered without a log line or metrics (probes and scrapes, every few seconds).
        self.quiet = frozenset(settings.GARANTE_QUIET_PATHS)
        # Children bound per (surface, status) on first use: counting is then an increment.
        self._counters: dict[tuple[str, int], object] = {}
        self._timers = {
            surface: HTTP_REQUEST_SECONDS.labels(surface)
            for surface in ("mcp", "rest", "integration", "admin", "other")
        }

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        header = request.META.get("HTTP_X_REQUEST_ID")
        request_id = request_id_from(header)
        state = RequestState(request_id, drawn=request_id is not header)
        token = _current.set(state)
        try:
            response = self.get_response(request)
        finally:
            _current.reset(token)
        response[REQUEST_ID_HEADER] = state.request_id
        path = request.path_info
        if path in self.quiet:
            return response
        seconds = time.perf_counter() - started
        surface = surface_of(path)
        status = response.status_code
        counter = self._counters.get((surface, status))
        if counter is None:
            counter = self._counters.setdefault(
                (surface, status), HTTP_REQUESTS.labels(surface, str(status))
            )
        counter.inc()  # type: ignore[attr-defined]
        self._timers[surface].observe(seconds)
        if logger.isEnabledFor(logging.INFO):
            self._log(request, state, surface, status, seconds)
        return response

    def _log(
        self, request: HttpRequest, state: RequestState, surface: str, status: int, seconds: float
    ) -> None:
        # Masked here, field by field, as core.logs would: only the caller's text can hold
        # personal data or a secret (the method, a request id it sent, the conversation id);
        # the path is masked by loggable_path, and the rest is the project's own (numbers,
        # the surface, a registered tool's name, an outcome, an error's code).
        path = loggable_path(request)
        method = scrub_secrets(request.method or "")
        request_id = state.request_id if state.drawn else scrub_secrets(state.request_id)
        milliseconds = seconds * 1000
        fields: dict[str, Any] = {
            "event": "request",
            "request_id": request_id,
            "company": state.company_id,
            "surface": surface,
            "method": method,
            "path": path,
            "status": status,
            "duration_ms": round(milliseconds, 3),
            ALREADY_MASKED: True,
        }
        call = state.tool_call
        if call is None:
            logger.info("%s %s %s in %.1f ms", method, path, status, milliseconds, extra=fields)
            return
        fields.update(call)
        conversation = call["conversation_id"]
        if conversation:
            fields["conversation_id"] = scrub_secrets(conversation)
        logger.info(
            "%s %s %s in %.1f ms: tool %s %s in %.1f ms",
            method,
            path,
            status,
            milliseconds,
            call["tool"],
            call["error_type"] or "ok",
            call["tool_duration_ms"],
            extra=fields,
        )
