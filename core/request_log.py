"""Every request's id, its one log line and its HTTP metrics.

The id is the caller's `X-Request-ID` when it is well-formed (a proxy or the Gateway that set
it can find our lines by it), else one we draw; either way it is answered in the response's
`X-Request-ID` and stamped on every log line written while the request runs (core.logs). A
malformed one (too long, a character outside `[A-Za-z0-9._:-]`) is replaced, never echoed:
a header is the caller's text, and a log line or a response must not carry it unchecked.

The middleware is the first of settings.MIDDLEWARE, so it sees every answer, Django's own
refusals included, and times the whole stack.
"""

import contextvars
import logging
import re
import secrets
import time
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase

from core.metrics import HTTP_REQUEST_SECONDS, HTTP_REQUESTS
from core.redaction import scrub_text

logger = logging.getLogger("garante.requests")

REQUEST_ID_HEADER = "X-Request-ID"
REQUEST_ID_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,128}")


class RequestState:
    """What the log lines of one request share: its id, and its company once it is known."""

    __slots__ = ("company_id", "request_id")

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.company_id: int | None = None


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
        state = RequestState(request_id_from(request.META.get("HTTP_X_REQUEST_ID")))
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
            # The path without its query string (where a filter may name a customer), scrubbed.
            shown = scrub_text(path[:200])
            logger.info(
                "%s %s %s in %.1f ms",
                request.method,
                shown,
                status,
                seconds * 1000,
                extra={
                    "event": "request",
                    "request_id": state.request_id,
                    "company": state.company_id,
                    "surface": surface,
                    "method": request.method,
                    "path": shown,
                    "status": status,
                    "duration_ms": round(seconds * 1000, 3),
                },
            )
        return response
