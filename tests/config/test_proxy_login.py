"""Staff log into the admin through an HTTPS reverse proxy, as a browser behind it would: the
request reaches Django over plain HTTP with the proxy's X-Forwarded-Proto header and the public
Host, the browser's Origin naming https://garante.example.com. With the documented settings
the login succeeds; without them Django refuses it with its CSRF origin 403."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from config import deployment
from tests.config.environment import documented_environment

PUBLIC_HOST = "garante.example.com"
PUBLIC_ORIGIN = f"https://{PUBLIC_HOST}"


@pytest.fixture
def staff_password(db) -> str:
    get_user_model().objects.create_superuser("ops", "ops@example.com", "a-long-pass-phrase")
    return "a-long-pass-phrase"


def behind_proxy(settings, environ: dict[str, str]) -> None:
    """The settings config.settings computes from `environ`, on top of the test settings."""
    for name, value in deployment.proxy_settings(environ, debug=False).items():
        setattr(settings, name, value)
    settings.ALLOWED_HOSTS = deployment.allowed_hosts(environ, debug=False)


def log_in(client: Client, password: str, **proxy_headers: str):
    page = client.get("/admin/login/", **proxy_headers)
    assert page.status_code == 200
    return client.post(
        "/admin/login/?next=/admin/",
        {
            "username": "ops",
            "password": password,
            "csrfmiddlewaretoken": page.context["csrf_token"],
            "next": "/admin/",
        },
        HTTP_ORIGIN=PUBLIC_ORIGIN,
        HTTP_REFERER=f"{PUBLIC_ORIGIN}/admin/login/",
        **proxy_headers,
    )


def test_the_admin_login_works_behind_the_tls_proxy_with_the_documented_settings(
    settings, staff_password
):
    behind_proxy(settings, documented_environment())
    client = Client(enforce_csrf_checks=True)
    headers = {"HTTP_HOST": PUBLIC_HOST, "HTTP_X_FORWARDED_PROTO": "https"}
    response = log_in(client, staff_password, **headers)
    assert response.status_code == 302
    assert response["Location"] == "/admin/"
    session_cookie = response.cookies[settings.SESSION_COOKIE_NAME]
    assert session_cookie["secure"]  # sent back over HTTPS only
    home = client.get("/admin/", **headers)
    assert home.status_code == 200
    assert home.wsgi_request.user.username == "ops"
    assert home["Strict-Transport-Security"].startswith("max-age=31536000")


def test_a_proxy_that_rewrites_host_works_with_forwarded_host(settings, staff_password):
    """A proxy that sends its own upstream name as Host and the public one in
    X-Forwarded-Host: DJANGO_USE_X_FORWARDED_HOST=1."""
    behind_proxy(settings, {**documented_environment(), "DJANGO_USE_X_FORWARDED_HOST": "1"})
    client = Client(enforce_csrf_checks=True)
    headers = {
        "HTTP_HOST": "web:8000",
        "HTTP_X_FORWARDED_HOST": PUBLIC_HOST,
        "HTTP_X_FORWARDED_PROTO": "https",
    }
    assert log_in(client, staff_password, **headers).status_code == 302


def test_without_the_proxy_settings_the_login_gets_djangos_csrf_403(
    settings, staff_password, caplog
):
    """No DJANGO_SECURE_PROXY_SSL_HEADER: Django takes the request for plain HTTP, so the
    browser's https Origin matches neither the request nor any trusted origin."""
    behind_proxy(
        settings,
        {"DJANGO_ALLOWED_HOSTS": PUBLIC_HOST, "DJANGO_SECURE_SSL_REDIRECT": "0"},
    )
    client = Client(enforce_csrf_checks=True)
    headers = {"HTTP_HOST": PUBLIC_HOST, "HTTP_X_FORWARDED_PROTO": "https"}
    response = log_in(client, staff_password, **headers)
    assert response.status_code == 403
    assert response.wsgi_request.user.is_anonymous
    (refusal,) = [r for r in caplog.records if r.name == "django.security.csrf"]
    assert "Origin checking failed - https://garante.example.com" in refusal.getMessage()


def test_plain_http_is_redirected_to_https_unless_the_proxy_says_https(settings, db):
    behind_proxy(settings, documented_environment())
    client = Client()
    plain = client.get("/admin/login/", HTTP_HOST=PUBLIC_HOST)
    assert plain.status_code == 301
    assert plain["Location"] == f"{PUBLIC_ORIGIN}/admin/login/"
    proxied = client.get("/admin/login/", HTTP_HOST=PUBLIC_HOST, HTTP_X_FORWARDED_PROTO="https")
    assert proxied.status_code == 200
