"""The machine API answers in JSON, errors included.

A request the API's own views never see is answered by Django or django-ninja with a page: a
path under `/api/tools/` that names no tool (404), a tool called with GET (405), a request
Django refuses before any view (400), an error page (500). For the Gateway these are the same
kind of answer as any other: the canonical error body (`error_type`, `user_message`, `code`)
with the same status. Placed right after SecurityMiddleware, which still adds its headers.
"""

import time
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.utils.translation import gettext_lazy as _

from core.boundary import error_for_status, error_response
from core.errors import GaranteError, NotFound
from core.middleware import Api, request_api
from core.postgresql.base import call_within


def api_error_for(status: int, path: str) -> GaranteError:
    """The canonical error an API answers with `status` instead of Django's page
    (core.boundary.error_for_status), naming what is missing under the tool mirror: the one
    mapping of this middleware and of the project's error handlers (config urls)."""
    if status == 404 and path.startswith("/api/tools/"):
        return NotFound(_("No existe esa herramienta."), code="unknown_tool")
    return error_for_status(status)


def arrived_at(request: HttpRequest) -> float | None:
    """When the request reached the proxy in front (nginx's `X-Request-Start: t=<seconds>`),
    on this process's monotonic clock; None without the header. The time it waited for a
    thread counts towards the call's deadline. A time in the future counts as now."""
    header = request.META.get("HTTP_X_REQUEST_START")
    if not header:  # no proxy in front: nothing to raise and catch on every request
        return None
    try:
        sent = float(header.removeprefix("t="))
    except ValueError:
        return None
    waited = max(0.0, time.time() - sent)
    return time.monotonic() - waited


class MachineApiErrors:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        machine = request_api(request) is Api.MACHINE
        if machine:
            # One deadline for the whole call (core.postgresql.base.call_within).
            with call_within(settings.GARANTE_CALL_DEADLINE_SECONDS, started=arrived_at(request)):
                response = self.get_response(request)
        else:
            response = self.get_response(request)
        if (
            response.status_code < 400
            or response.get("Content-Type", "").startswith("application/json")
            or not machine
        ):
            return response
        answer = error_response(api_error_for(response.status_code, request.path_info), request)
        if "Allow" in response:
            answer["Allow"] = response["Allow"]
        return answer
