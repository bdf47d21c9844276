"""Error reports to Sentry (sentry-sdk), on when SENTRY_DSN is set, with no personal data.

What would carry a customer's data is not sent at all: no request bodies, no local variables
of the failing frames (a handler's locals hold phones, emails and codes), no user, cookies or
headers beyond what sentry-sdk keeps with `send_default_pii` off. What is sent (exception
messages, log messages and breadcrumbs, the URL) is masked with the rule of the trace and the
log lines (core.redaction), and sentry-sdk's own scrubber drops the values of every key named
like a secret or an identifier, at any depth.
"""

from typing import Any

import sentry_sdk
from sentry_sdk.scrubber import DEFAULT_DENYLIST, EventScrubber

from core.redaction import IDENTIFIER_KEYS, SECRET_KEYS, scrub_secrets

DENYLIST = sorted(
    {*DEFAULT_DENYLIST, *SECRET_KEYS, *IDENTIFIER_KEYS, "authorization", "x-conversation-id"}
)


def _scrubbed(value: Any) -> Any:
    """Every text in a JSON-like value masked (core.redaction), keys kept."""
    if isinstance(value, str):
        return scrub_secrets(value)
    if isinstance(value, dict):
        return {key: _scrubbed(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_scrubbed(item) for item in value]
    return value


def scrub_event(event: dict[str, Any], hint: dict[str, Any] | None = None) -> dict[str, Any]:
    """sentry-sdk's before_send: the free text of an event masked (exception values, the log
    message, breadcrumbs, extra data, the request's URL and query string)."""
    for exception in (event.get("exception") or {}).get("values") or []:
        if isinstance(exception.get("value"), str):
            exception["value"] = scrub_secrets(exception["value"])
    for key in ("message", "logentry", "extra", "breadcrumbs", "tags", "contexts"):
        if key in event:
            event[key] = _scrubbed(event[key])
    request = event.get("request")
    if isinstance(request, dict):
        request.pop("data", None)
        request.pop("cookies", None)
        for key in ("url", "query_string"):
            if isinstance(request.get(key), str):
                request[key] = scrub_secrets(request[key])
    event.pop("user", None)
    return event


def scrub_breadcrumb(crumb: dict[str, Any], hint: dict[str, Any] | None = None) -> dict[str, Any]:
    return _scrubbed(crumb)


def sentry_init(
    *, dsn: str, environment: str, traces_sample_rate: float = 0.0, transport: Any = None
) -> None:
    """Start sentry-sdk (its Django, Celery and logging integrations are enabled on their own
    when those libraries are installed). `transport` is for tests."""
    options: dict[str, Any] = {}
    if transport is not None:
        options["transport"] = transport
    sentry_sdk.init(
        dsn=dsn,
        environment=environment,
        send_default_pii=False,
        include_local_variables=False,
        max_request_body_size="never",
        event_scrubber=EventScrubber(denylist=DENYLIST, recursive=True),
        before_send=scrub_event,
        before_breadcrumb=scrub_breadcrumb,
        traces_sample_rate=traces_sample_rate,
        **options,
    )
