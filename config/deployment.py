"""How Garante is deployed, read from the environment: the secret key and the hosts it serves,
refused when insecure with DEBUG off, and what it needs to know behind an HTTPS reverse proxy.

config.settings reads the environment through these plain functions of a mapping, so a test
can compute the settings of any environment without reloading the settings module; manage.py
turns `InsecureSettings` into its one line.

Secure by default: with DEBUG off the process refuses to start (`InsecureSettings`, one line
naming the variable) without a real secret key or with no allowed host, and the session and
CSRF cookies are Secure and plain HTTP is redirected to HTTPS unless the operator says
otherwise. HSTS stays off until set: browsers remember it (for a year, with the documented
value), so a first deployment whose TLS is not yet right would lock its users out.
"""

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

# The key `make demo` and the tests' in-process settings may use (DEBUG on); never in production.
DEMO_SECRET_KEY = "garante-insecure-demo-key-change-me"
# Django's own bar for a key (`check --deploy`, security.W009): long and varied enough.
SECRET_KEY_MIN_LENGTH = 50
SECRET_KEY_MIN_UNIQUE_CHARACTERS = 5
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class InsecureSettings(ImproperlyConfigured):
    """A setting that must not reach production as it is; the message names the variable."""


def env_flag(environ: Mapping[str, str], name: str, default: bool) -> bool:
    value = environ.get(name)
    if value is None:
        return default
    value = value.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise InsecureSettings(f"{name}={value!r}: expected 1/0, true/false, yes/no or on/off")


def env_list(environ: Mapping[str, str], name: str) -> list[str]:
    return [item.strip() for item in environ.get(name, "").split(",") if item.strip()]


def secret_key(environ: Mapping[str, str], *, debug: bool) -> str:
    """DJANGO_SECRET_KEY; with DEBUG off, refused when missing, the demo's or too weak."""
    key = environ.get("DJANGO_SECRET_KEY", "")
    if debug:
        return key or DEMO_SECRET_KEY
    if not key:
        raise InsecureSettings(
            "DJANGO_SECRET_KEY is not set (DEBUG is off): set it to a random string of at "
            f"least {SECRET_KEY_MIN_LENGTH} characters, e.g. "
            "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`"
        )
    if key == DEMO_SECRET_KEY or key.startswith("django-insecure-"):
        raise InsecureSettings(
            "DJANGO_SECRET_KEY is the insecure demo default (DEBUG is off): set a random one"
        )
    if len(key) < SECRET_KEY_MIN_LENGTH or len(set(key)) < SECRET_KEY_MIN_UNIQUE_CHARACTERS:
        raise InsecureSettings(
            f"DJANGO_SECRET_KEY is too short or too uniform (DEBUG is off): at least "
            f"{SECRET_KEY_MIN_LENGTH} characters, {SECRET_KEY_MIN_UNIQUE_CHARACTERS} different"
        )
    return key


def allowed_hosts(environ: Mapping[str, str], *, debug: bool) -> list[str]:
    """DJANGO_ALLOWED_HOSTS; with DEBUG off, refused when empty. With DEBUG on and none set,
    Django allows localhost, 127.0.0.1 and [::1] (the demo)."""
    hosts = env_list(environ, "DJANGO_ALLOWED_HOSTS")
    if not hosts and not debug:
        raise InsecureSettings(
            "DJANGO_ALLOWED_HOSTS is empty (DEBUG is off): list the host names the server "
            "answers to, comma-separated, e.g. garante.example.com"
        )
    return hosts


def proxy_settings(environ: Mapping[str, str], *, debug: bool) -> dict[str, Any]:
    """The Django settings for HTTPS and a reverse proxy in front, from the environment."""
    secure = not debug
    values: dict[str, Any] = {
        # The public origins browsers post forms from, when they differ from the Host the
        # request arrives with (a proxy that rewrites Host, another port): scheme included.
        "CSRF_TRUSTED_ORIGINS": env_list(environ, "DJANGO_CSRF_TRUSTED_ORIGINS"),
        "USE_X_FORWARDED_HOST": env_flag(environ, "DJANGO_USE_X_FORWARDED_HOST", False),
        "SECURE_SSL_REDIRECT": env_flag(environ, "DJANGO_SECURE_SSL_REDIRECT", secure),
        "SESSION_COOKIE_SECURE": env_flag(environ, "DJANGO_SECURE_COOKIES", secure),
        "CSRF_COOKIE_SECURE": env_flag(environ, "DJANGO_SECURE_COOKIES", secure),
        "SECURE_HSTS_SECONDS": int(environ.get("DJANGO_SECURE_HSTS_SECONDS", "0") or 0),
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": env_flag(
            environ, "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False
        ),
        "SECURE_HSTS_PRELOAD": env_flag(environ, "DJANGO_SECURE_HSTS_PRELOAD", False),
        # Off unless set: trusting the header when no proxy strips it lets any client claim
        # HTTPS.
        "SECURE_PROXY_SSL_HEADER": None,
    }
    for origin in values["CSRF_TRUSTED_ORIGINS"]:
        if "://" not in origin:
            raise InsecureSettings(
                f"DJANGO_CSRF_TRUSTED_ORIGINS: {origin!r} needs its scheme, e.g. https://{origin}"
            )
    header = environ.get("DJANGO_SECURE_PROXY_SSL_HEADER", "").strip()
    if header:
        meta_name = "HTTP_" + header.upper().replace("-", "_")
        values["SECURE_PROXY_SSL_HEADER"] = (meta_name, "https")
    return values
