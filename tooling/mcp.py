"""MCP endpoint placeholder; replaced by the transport implementation."""

from django.http import HttpResponse


def mcp_endpoint(request):
    return HttpResponse(status=501)
