"""Prometheus metrics: the kernel's series, and their exposition at /metrics behind a token.

Each concern counts in its one place: HTTP requests in core.request_log, the idempotency
engine's outcomes in core.idempotency.engine, verification codes in core.verification, Celery
tasks through Celery's signals (config.celery), tool calls in tooling.metrics (from
tooling.execution.call_tool). Children of labelled series are bound once (module constants
here, a cache per tool there), so counting on the request path is an increment, not a label
lookup.

Several processes: gunicorn's workers each count their own calls, so a scrape that one worker
answers from its own memory would see a fraction. With PROMETHEUS_MULTIPROC_DIR set (the
repository's gunicorn.conf.py sets it for every server it starts), every process writes its
values to files of its own in that directory, and a scrape adds them up
(prometheus_client's multiprocess mode); without it (runserver, the test process), the values
are the process's own.
"""

import hmac
import os

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess as _multiprocess

# From a cheap tool call (a few milliseconds) to the database's answer deadline.
LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

HTTP_REQUESTS = Counter(
    "garante_http_requests",
    "HTTP requests answered, by surface (mcp, rest, integration, admin, other) and status.",
    ["surface", "status"],
)
HTTP_REQUEST_SECONDS = Histogram(
    "garante_http_request_duration_seconds",
    "Time to answer an HTTP request, by surface.",
    ["surface"],
    buckets=LATENCY_BUCKETS,
)

TOOL_CALLS = Counter(
    "garante_tool_calls",
    "Tool calls, by tool, surface (mcp, rest), outcome (ok, error) and error type.",
    ["tool", "surface", "outcome", "error_type"],
)
TOOL_CALL_SECONDS = Histogram(
    "garante_tool_call_duration_seconds",
    "Time a tool call took inside the tool path (arguments to outcome), by tool and surface.",
    ["tool", "surface"],
    buckets=LATENCY_BUCKETS,
)

_IDEMPOTENCY = Counter(
    "garante_idempotency_outcomes",
    "Writes through the idempotency engine (both APIs), by outcome: executed (first run), "
    "replayed (a stored answer), joined (waited for a concurrent twin, then replayed its "
    "answer), conflict (the key used for another request), expired (past its replay window), "
    "in_progress (the twin still running past the wait).",
    ["outcome"],
)
IDEMPOTENCY_EXECUTED = _IDEMPOTENCY.labels("executed")
IDEMPOTENCY_REPLAYED = _IDEMPOTENCY.labels("replayed")
IDEMPOTENCY_JOINED = _IDEMPOTENCY.labels("joined")
IDEMPOTENCY_CONFLICT = _IDEMPOTENCY.labels("conflict")
IDEMPOTENCY_EXPIRED = _IDEMPOTENCY.labels("expired")
IDEMPOTENCY_IN_PROGRESS = _IDEMPOTENCY.labels("in_progress")

_VERIFICATION = Counter(
    "garante_verification_codes",
    "Step-up verification codes, by event: issued, sent (delivered to the channel), "
    "delivery_failed (refused, or out of retries), verified, wrong (a wrong guess), locked "
    "(out of attempts).",
    ["event"],
)
CODES_ISSUED = _VERIFICATION.labels("issued")
CODES_SENT = _VERIFICATION.labels("sent")
CODES_DELIVERY_FAILED = _VERIFICATION.labels("delivery_failed")
CODES_VERIFIED = _VERIFICATION.labels("verified")
CODES_WRONG = _VERIFICATION.labels("wrong")
CODES_LOCKED = _VERIFICATION.labels("locked")

CELERY_TASKS = Counter(
    "garante_celery_tasks",
    "Celery tasks finished, by task and outcome (success, failure, retry, rejected, revoked).",
    ["task", "outcome"],
)

SWEEP_ROWS = Counter(
    "garante_sweep_rows",
    "Rows handled by the periodic sweeps (core.sweeps), by sweep and outcome: done, or failed "
    "(logged, and left due for the next run).",
    ["sweep", "outcome"],
)


def _multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def exposed_registry() -> CollectorRegistry:
    """What a scrape reads: the sum over all processes writing to the multiprocess directory
    when there is one, this process's own series otherwise."""
    if _multiprocess_dir() is None:
        return REGISTRY
    registry = CollectorRegistry()
    _multiprocess.MultiProcessCollector(registry)
    return registry


def metrics_exposition() -> bytes:
    """Every series in Prometheus' text format (`exposed_registry`)."""
    return generate_latest(exposed_registry())


# A scraper authenticates by its bearer token, never by a cookie, so a forged cross-site POST
# has nothing to ride on; and CSRF's check, run first, answered a POST with the right token
# with Django's HTML 403 page instead of this view's 405.
@csrf_exempt
def metrics_view(request: HttpRequest) -> HttpResponse:
    """GET /metrics. Off (404, as any unknown path) unless settings.GARANTE_METRICS_TOKEN is
    set; then only for `Authorization: Bearer <that token>` (401 otherwise), and only GET or
    HEAD (405 otherwise)."""
    expected = settings.GARANTE_METRICS_TOKEN
    if not expected:
        return HttpResponse("Not Found\n", status=404, content_type="text/plain")
    scheme, _, given = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        given.strip().encode(), expected.encode()
    ):
        answer = HttpResponse("Unauthorized\n", status=401, content_type="text/plain")
        answer["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return answer
    if request.method not in ("GET", "HEAD"):
        answer = HttpResponse("Method Not Allowed\n", status=405, content_type="text/plain")
        answer["Allow"] = "GET, HEAD"
        return answer
    return HttpResponse(metrics_exposition(), content_type=CONTENT_TYPE_LATEST)
