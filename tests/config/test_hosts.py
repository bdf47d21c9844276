"""A Host header not in ALLOWED_HOSTS: 400 (the canonical JSON error on the machine API, Django's
page elsewhere) and one WARNING line in the log, no traceback."""

import logging

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("method", "path", "json_body"),
    [
        ("post", "/mcp", True),
        ("post", "/api/tools/list_services", True),
        ("get", "/api/v1/contacts", True),
        ("get", "/admin/", False),
    ],
)
def test_a_host_not_allowed_is_a_400_logged_in_one_line(caplog, method, path, json_body):
    caplog.set_level(logging.INFO)
    client = Client(HTTP_HOST="evil.example.com")
    response = getattr(client, method)(path, data={}, content_type="application/json")
    assert response.status_code == 400
    if json_body:
        assert response.json()["code"] == "bad_request"
    else:
        assert response["Content-Type"].startswith("text/html")
    assert [(r.name, r.levelname) for r in caplog.records] == [
        ("django.security.DisallowedHost", "WARNING")
    ]
    (record,) = caplog.records
    assert record.exc_info is None
    assert "'evil.example.com'" in record.getMessage()
    assert "\n" not in record.getMessage()


def test_an_allowed_host_goes_through():
    assert Client(HTTP_HOST="localhost").get("/api/ping").status_code == 200
