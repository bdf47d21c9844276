"""The bearer proxy the conformance suite talks through (tests/conformance/proxy.py).

The suite's verdicts are only worth something if the proxy changes nothing but the token: these
tests pin that against a live server.
"""

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conformance.proxy import bearer_proxy
from tests.servers import free_port

pytestmark = pytest.mark.django_db(transaction=True)

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
def proxied(live_server: Any, token: str) -> Iterator[str]:
    with bearer_proxy(live_server.url, token) as url:
        yield url


def test_a_client_without_a_token_reaches_the_tools_through_the_proxy(live_server, proxied):
    """The server refuses a request without a token; the same request through the proxy
    carries the gateway token and is answered."""
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
    direct = httpx.post(f"{live_server.url}/mcp", json=body, headers=ACCEPT)
    through = httpx.post(f"{proxied}/mcp", json=body, headers=ACCEPT)

    assert direct.status_code == 401
    assert through.status_code == 200, through.text
    assert through.json()["id"] == 7
    assert "list_services" in {tool["name"] for tool in through.json()["result"]["tools"]}


def test_the_proxy_replaces_a_token_the_client_sent(proxied):
    response = httpx.post(
        f"{proxied}/mcp", json=PING, headers={**ACCEPT, "Authorization": "Bearer wrong"}
    )

    assert response.status_code == 200, response.text
    assert response.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}


def test_host_and_origin_pass_through_unchanged_so_the_server_judges_the_clients(proxied):
    """A foreign Host is refused by the server as if the client had called it directly, and so
    is a foreign Origin: the proxy does not launder what DNS rebinding protection checks."""
    foreign_host = httpx.post(
        f"{proxied}/mcp", json=PING, headers={**ACCEPT, "Host": "evil.example"}
    )
    foreign_origin = httpx.post(
        f"{proxied}/mcp", json=PING, headers={**ACCEPT, "Origin": "http://evil.example"}
    )
    same_origin = httpx.post(f"{proxied}/mcp", json=PING, headers={**ACCEPT, "Origin": proxied})

    assert foreign_host.status_code == 400
    assert foreign_origin.status_code == 403
    assert foreign_origin.json()["error"]["code"] == -32600
    assert same_origin.status_code == 200, same_origin.text


def test_statuses_headers_and_empty_bodies_come_back_as_the_server_sent_them(proxied):
    notification = httpx.post(
        f"{proxied}/mcp",
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers=ACCEPT,
    )
    get = httpx.get(f"{proxied}/mcp", headers=ACCEPT)

    assert notification.status_code == 202
    assert notification.content == b""
    assert "content-type" not in notification.headers
    assert get.status_code == 405
    assert get.headers["allow"] == "POST"
    assert get.headers["content-type"].startswith("application/json")


def test_a_server_that_is_down_is_a_502_from_the_proxy():
    with bearer_proxy(f"http://127.0.0.1:{free_port()}", "token") as url:
        response = httpx.post(f"{url}/mcp", json=PING)

    assert response.status_code == 502
