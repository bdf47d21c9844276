"""The browser's middleware steps aside for the machine API and nowhere else (core.middleware)."""

import threading
from typing import Any

import httpx
import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import translation

from core.middleware import Api, api_of
from tests.conftest import McpClient
from tooling.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)


def _routes(patterns: list, prefix: str = "/") -> list[str]:
    """Every route of the URLconf, as the literal path it matches (converters left as text)."""
    routes = []
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            routes += _routes(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern):
            routes.append(route)
    return routes


def test_the_machine_api_is_the_mcp_endpoint_and_the_rest_tool_mirror_only():
    routes = _routes(get_resolver().url_patterns)
    machine = sorted(route for route in routes if api_of(route) is Api.MACHINE)
    expected = ["/api/ping", "/mcp", *(f"/api/tools/{tool.name}" for tool in registry.all())]
    assert machine == sorted(expected)
    # What stays a browser's: the admin, the integration API (staff sessions), the docs pages.
    for path in ("/admin/", "/admin/login/", "/api/v1/contacts/", "/api/docs", "/api/openapi.json"):
        assert api_of(path) is not Api.MACHINE, path
    assert api_of("/mcpx") is not Api.MACHINE
    assert api_of("/api/tools") is not Api.MACHINE


def test_every_path_under_an_api_is_the_api_and_the_pages_are_not():
    for path in ("/mcp", "/mcp/", "/mcp/x", "/api/tools/nothing", "/api/v1/x\n", "/api/docs"):
        assert api_of(path) is not None, path
    assert api_of("/mcp/") is not Api.MACHINE  # no endpoint there: a JSON 404, no deadline
    for path in ("/admin/", "/mcpx", "/mcpx/", "/api", "/messages/opt-out/abc", "/metrics"):
        assert api_of(path) is None, path


def test_an_mcp_answer_carries_no_browser_state_but_keeps_the_security_headers(mcp: McpClient):
    response = mcp.request("ping", headers={"Accept-Language": "en", "Cookie": "sessionid=abc"})
    assert response.status_code == 200, response.text
    assert "set-cookie" not in response.headers
    assert "x-frame-options" not in response.headers
    assert "content-language" not in response.headers
    assert "vary" not in response.headers
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "same-origin"


def test_an_unknown_host_is_still_refused_on_the_machine_api(live_server: Any, token: str):
    response = httpx.post(
        f"{live_server.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={"Host": "evil.example", "Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 400


def test_the_api_speaks_the_sites_language_whatever_the_thread_served_before(token: str):
    """A thread that served an English-speaking staff member, then a request with a bad token:
    the answer is in the default language, not in the browser's or the previous request's."""
    client = Client()
    answers: list[dict] = []

    def serve() -> None:
        translation.activate("en")  # what LocaleMiddleware left after an English admin page
        response = client.post(
            "/mcp",
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            content_type="application/json",
            headers={"Authorization": "Bearer wrong", "Accept-Language": "en"},
        )
        answers.append(response.json())

    worker = threading.Thread(target=serve)
    worker.start()
    worker.join()
    assert answers[0]["error"]["data"]["user_message"] == "Credenciales no válidas."


def test_the_admin_keeps_csrf_sessions_frame_options_and_the_browsers_language(
    django_user_model: Any,
):
    client = Client(enforce_csrf_checks=True)
    refused = client.post("/admin/login/", {"username": "x", "password": "y"})
    assert refused.status_code == 403  # no CSRF token

    page = client.get("/admin/login/", headers={"Accept-Language": "en"})
    assert page.status_code == 200
    assert page.headers["X-Frame-Options"] == "DENY"
    assert page.headers["Content-Language"] == "en"
    assert "csrftoken" in page.cookies
    token = page.cookies["csrftoken"].value
    django_user_model.objects.create_superuser("root", "root@example.com", "pw-123456789")
    logged_in = client.post(
        "/admin/login/",
        {"username": "root", "password": "pw-123456789", "csrfmiddlewaretoken": token},
    )
    assert logged_in.status_code == 302
    assert "sessionid" in logged_in.cookies


@pytest.mark.django_db
def test_a_path_under_the_mcp_endpoint_is_a_json_404(client):
    for path in ("/mcp/", "/mcp/x", "/mcp/tools/list"):
        response = client.post(path, {}, content_type="application/json")
        assert response.status_code == 404, path
        assert response["Content-Type"].startswith("application/json"), path
        assert response.json()["code"] == "not_found"
