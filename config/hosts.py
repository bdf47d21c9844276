"""A request for a host this server does not serve: 400, and one line in the log.

Django answers a Host header missing from ALLOWED_HOSTS with 400 (the canonical JSON error on
the machine API's paths, config.urls), but only once a middleware or view first reads the
host, and it logs each one at ERROR with a full traceback. Scanners and misdirected clients
send such requests all day: a traceback each would bury the log and page someone for nothing.
Here the host is checked first, before any other middleware (the health probes aside), and a
refusal is logged as one WARNING line on Django's own `django.security.DisallowedHost` logger,
and the "Bad Request" line Django writes for every 4xx answer is filtered out for it
(`HostRefusedOnce`).
"""

import logging
from collections.abc import Callable

from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponseBase
from django.urls import get_resolver

logger = logging.getLogger("django.security.DisallowedHost")


class RefuseUnknownHosts:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        try:
            request.get_host()
        except DisallowedHost as refused:
            logger.warning("%s (%s %r)", refused, request.method, request.path_info[:200])
            request.garante_host_refused = True  # type: ignore[attr-defined]
            return get_resolver().resolve_error_handler(400)(request, refused)
        return self.get_response(request)


class HostRefusedOnce(logging.Filter):
    """On Django's `django.request` logger (settings.LOGGING): drops its "Bad Request" line for
    a request RefuseUnknownHosts refused, whose one line is already written."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        return not getattr(request, "garante_host_refused", False)
