"""The smaller holes of issue #42 (docs/threats/smaller-holes.md): each test here failed on the
code before its fix. Answers the issue describes as HTTP answers are checked over real HTTP,
against gunicorn (tests/servers.py)."""

import json
import socket
from urllib.parse import urlsplit

import httpx
import pytest

from config import deployment
from config.deployment import InsecureSettings
from integration.models import IntegrationCredential
from integration.services import integration_credential_issue

pytestmark = pytest.mark.django_db(transaction=True)

METRICS_TOKEN = "scrape-token-for-the-small-holes"


def json_error(response: httpx.Response) -> dict:
    """The canonical error body of an answer, after checking that it is one."""
    assert response.headers["content-type"].startswith("application/json"), response.text[:300]
    body = response.json()
    assert {"error_type", "code", "user_message"} <= body.keys()
    return body


# Deep JSON on /api/v1 ------------------------------------------------------------------------


def test_json_nested_beyond_the_parser_is_malformed_on_the_integration_api_as_on_the_tool_api(
    gunicorn_server, company, ana, token
):
    server = gunicorn_server(workers=1)
    _, api_token = integration_credential_issue(
        company=company, name="erp", scope=IntegrationCredential.Scope.READ_WRITE
    )
    json_type = {"Content-Type": "application/json"}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for index, body in enumerate([b"[" * 100_000, b'{"a":' * 100_000]):
            integration = http.post(
                "/api/v1/cases",
                content=body,
                headers={
                    **json_type,
                    "Authorization": f"Bearer {api_token}",
                    "Idempotency-Key": f"deep-{index}",
                },
            )
            tools = http.post(
                "/api/tools/list_services",
                content=body,
                headers={
                    **json_type,
                    "Authorization": f"Bearer {token}",
                    "X-Conversation-Id": "c1",
                },
            )
            assert (integration.status_code, tools.status_code) == (400, 400)
            assert json_error(integration)["code"] == json_error(tools)["code"] == "malformed_json"
    assert "RecursionError" not in server.log()


# POST /metrics -------------------------------------------------------------------------------


def test_a_post_to_metrics_with_the_right_token_is_405_not_a_csrf_page(gunicorn_server):
    server = gunicorn_server(workers=1, env={"GARANTE_METRICS_TOKEN": METRICS_TOKEN})
    bearer = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    posted = httpx.post(f"{server.url}/metrics", headers=bearer, timeout=30)
    assert posted.status_code == 405
    assert posted.headers["Allow"] == "GET, HEAD"
    assert "csrf" not in posted.text.lower()
    assert httpx.get(f"{server.url}/metrics", headers=bearer, timeout=30).status_code == 200


# Oversized headers ---------------------------------------------------------------------------


def raw_exchange(url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `request` as is (httpx would refuse to build some of them); the answer's status,
    headers and body."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines)}
    return int(status_line.split()[1]), headers, body


REFUSED_BY_GUNICORN = [
    (
        b"GET /api/ping HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "
        + b"x" * 10_000
        + b"\r\nConnection: close\r\n\r\n",
        431,
        "request_headers_too_large",
    ),
    (
        b"GET /" + b"a" * 5_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        414,
        "request_line_too_long",
    ),
    (b"NOT A REQUEST\r\n\r\n", 400, "bad_request"),
]


def test_what_gunicorn_refuses_before_django_is_answered_in_json(gunicorn_server):
    """A 10 kB header (past limit_request_field_size), a 5 kB request line and a malformed
    request: each gets the APIs' JSON error with gunicorn's status, not its HTML page."""
    server = gunicorn_server(workers=1)
    for request_bytes, status, code in REFUSED_BY_GUNICORN:
        got, headers, body = raw_exchange(server.url, request_bytes)
        assert got == status
        assert headers["content-type"] == "application/json"
        answer = json.loads(body)
        assert answer["error_type"] == "VALIDATION" and answer["code"] == code
        assert answer["user_message"] and "<" not in answer["user_message"]
        assert int(headers["content-length"]) == len(body)


# Secret keys ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "changeme" * 7,
        "0123456789" * 5,
        "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMN",
        "Tr0ub4dor&3" * 5,
        "abcde" * 10,
        "zyxwvutsrqponmlkjihgfedcba" * 2,
        "s3cr3t-" + "2468" * 12,
    ],
)
def test_a_patterned_secret_key_stops_the_process_at_start(key):
    assert len(key) >= deployment.SECRET_KEY_MIN_LENGTH
    assert len(set(key)) >= deployment.SECRET_KEY_MIN_UNIQUE_CHARACTERS
    with pytest.raises(
        InsecureSettings, match=r"^DJANGO_SECRET_KEY is patterned or low in entropy"
    ):
        deployment.secret_key({"DJANGO_SECRET_KEY": key}, debug=False)


@pytest.mark.parametrize(
    "make",
    [
        lambda: __import__("secrets").token_urlsafe(50),
        lambda: __import__("secrets").token_hex(32),
        lambda: __import__(
            "django.core.management.utils"
        ).core.management.utils.get_random_secret_key(),
    ],
    ids=["token_urlsafe(50)", "token_hex(32)", "django's get_random_secret_key"],
)
def test_random_keys_made_the_usual_ways_are_taken(make):
    for _ in range(200):
        key = make()
        assert deployment.secret_key({"DJANGO_SECRET_KEY": key}, debug=False) == key
