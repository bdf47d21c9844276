"""URL routes: the admin, the MCP endpoint and the REST API."""

from django.contrib import admin
from django.urls import include, path

from tooling.api import api
from tooling.mcp import mcp_endpoint

urlpatterns = [
    path("admin/", admin.site.urls),
    path("mcp", mcp_endpoint, name="mcp"),
    path("api/v1/", include("integration.urls")),
    path("api/", api.urls),
]
