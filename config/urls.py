"""URL routes: the admin, the MCP endpoint and the REST API, and the error pages Django
answers itself (no route matched, a request it refused, a crash), which on the machine API's
paths are the canonical JSON error rather than an HTML page."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import include, path
from django.views import defaults

from agenda.manage_views import (
    appointment_manage,
    appointment_manage_cancel,
    appointment_manage_move,
)
from agenda.views import appointment_messages_opt_out, calendar_feed
from core.boundary import error_response
from core.metrics import metrics_view
from core.middleware import api_of
from core.verification.link_views import verification_link_page
from sales.quote_views import (
    quote_page,
    quote_page_accept_view,
    quote_page_code_view,
    quote_page_reject_view,
)
from tooling.api import api
from tooling.mcp import mcp_endpoint
from tooling.middleware import api_error_for

urlpatterns = [
    path("admin/", admin.site.urls),
    path("mcp", mcp_endpoint, name="mcp"),
    path("api/v1/", include("integration.urls")),
    path("api/", api.urls),
    path("metrics", metrics_view, name="metrics"),
    path(
        "messages/opt-out/<str:token>",
        appointment_messages_opt_out,
        name="appointment_messages_opt_out",
    ),
    path("calendar/<str:token>.ics", calendar_feed, name="calendar_feed"),
    # The customers' pages behind the links in their messages (docs/customer-links.md).
    path("a/<str:token>", appointment_manage, name="appointment_manage"),
    path("a/<str:token>/cancel", appointment_manage_cancel, name="appointment_manage_cancel"),
    path("a/<str:token>/move", appointment_manage_move, name="appointment_manage_move"),
    path("q/<str:token>", quote_page, name="quote_page"),
    path("q/<str:token>/accept", quote_page_accept_view, name="quote_page_accept"),
    path("q/<str:token>/reject", quote_page_reject_view, name="quote_page_reject"),
    path("q/<str:token>/code", quote_page_code_view, name="quote_page_code"),
    path("v/<str:token>", verification_link_page, name="verification_link"),
]


def _api_or(page: Any, status: int) -> Any:
    """Django's error page, or on the API's paths (any at all, even one no pattern can match:
    an integrator's client parses every answer) the canonical JSON error for that status."""

    def handler(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if api_of(request.path_info) is not None:
            return error_response(api_error_for(status, request.path_info), request)
        return page(request, *args, **kwargs)

    return handler


bad_request = _api_or(defaults.bad_request, 400)
permission_denied = _api_or(defaults.permission_denied, 403)
not_found = _api_or(defaults.page_not_found, 404)
server_error = _api_or(defaults.server_error, 500)

handler400 = bad_request
handler403 = permission_denied
handler404 = not_found
handler500 = server_error
