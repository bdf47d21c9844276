"""URL routes: the admin, the MCP endpoint and the REST API, and the error pages Django
answers itself (no route matched, a request it refused, a crash), which on the machine API's
paths are the canonical JSON error rather than an HTML page."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.utils.translation import gettext_lazy as _
from django.views import defaults

from core.errors import NotFound, PermissionRefused, SystemUnavailable, ValidationFailed
from tooling.api import api
from tooling.http import error_response
from tooling.mcp import mcp_endpoint

urlpatterns = [
    path("admin/", admin.site.urls),
    path("mcp", mcp_endpoint, name="mcp"),
    path("api/v1/", include("integration.urls")),
    path("api/", api.urls),
]


def _is_api(request: HttpRequest) -> bool:
    # Any path at all under /api/, even one no pattern can match (a reference ending in a
    # newline, which `$` and `.` both refuse): an integrator's client parses every answer.
    return request.path_info.startswith("/api/") or request.path_info == "/mcp"


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return error_response(NotFound(_("No encontré lo que busca."), code="not_found"))
    return defaults.page_not_found(request, exception)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return error_response(
            ValidationFailed(_("La petición no es válida."), code="bad_request", http_status=400)
        )
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return error_response(
            PermissionRefused(_("No tiene permiso para hacer eso."), code="permission_denied")
        )
    return defaults.permission_denied(request, exception)


def server_error(request: HttpRequest, *args: Any) -> HttpResponse:
    if _is_api(request):
        return error_response(SystemUnavailable())
    return defaults.server_error(request)


handler400 = bad_request
handler403 = permission_denied
handler404 = not_found
handler500 = server_error
