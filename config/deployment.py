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

import math
import string
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

# The key `make demo` and the tests' in-process settings may use (DEBUG on); never in production.
DEMO_SECRET_KEY = "garante-insecure-demo-key-change-me"
# Django's own bar for a key (`check --deploy`, security.W009): long and varied enough.
SECRET_KEY_MIN_LENGTH = 50
SECRET_KEY_MIN_UNIQUE_CHARACTERS = 5
# Length and variety alone let "changeme" seven times or "0123456789" five times through: the
# key must also hold this many bits by `secret_key_entropy_bits`, which counts a repeat or a
# run as the few bits it takes to describe, not as fresh characters. A key made as the errors
# below suggest holds about 300 (token_urlsafe(50): 67 characters of 64); NIST's floor for an
# HMAC key is 112 bits.
SECRET_KEY_MIN_ENTROPY_BITS = 128
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
    bits = secret_key_entropy_bits(key)
    if bits < SECRET_KEY_MIN_ENTROPY_BITS:
        raise InsecureSettings(
            f"DJANGO_SECRET_KEY is patterned or low in entropy (DEBUG is off): about {bits:.0f} "
            f"bits, at least {SECRET_KEY_MIN_ENTROPY_BITS} needed (repeats and runs such as "
            "'abcabc' or '12345' count for little); set a random one, e.g. "
            "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`"
        )
    return key


# Stretches shorter than this are taken as chance and paid for character by character.
_PATTERN_MIN_LENGTH = 3
# A run steps through neighbouring characters: "aaaa" (0), "abcd" or "4321" (1), "02468" (2).
_RUN_MAX_STEP = 2
_CLASSES = (string.ascii_lowercase, string.ascii_uppercase, string.digits)


def secret_key_entropy_bits(key: str) -> float:
    """An estimate of the bits a guesser must cover to find `key`, the way zxcvbn counts a
    password's guesses: the key is read left to right as pieces, each at the cost of saying
    it. A character costs log2 of the alphabet of the classes the key uses (lower case, upper
    case, digits, anything else: 33); a repeat of an earlier stretch of 3 characters or more
    costs where it starts and how long it is; a run of 3 or more steps of one size (at most 2)
    costs its first character, its step and its length. The cheapest reading wins
    (dynamic programming over the key, quadratic in its length: nothing at a key's sizes)."""
    size = sum(len(chars) for chars in _CLASSES if any(c in chars for c in key))
    size += 33 if any(not any(c in chars for chars in _CLASSES) for c in key) else 0
    literal = math.log2(max(size, 2))
    n = len(key)
    cost = [0.0] + [math.inf] * n  # cost[i]: the cheapest reading of key[:i]
    for i in range(n):
        if cost[i] == math.inf:
            continue
        cost[i + 1] = min(cost[i + 1], cost[i] + literal)
        # A repeat: key[i:i+length] equal to a stretch starting earlier (it may overlap).
        for start in range(i):
            length = 0
            while i + length < n and key[start + length] == key[i + length]:
                length += 1
            if length >= _PATTERN_MIN_LENGTH:
                price = math.log2(i) + math.log2(n)
                for end in range(i + _PATTERN_MIN_LENGTH, i + length + 1):
                    cost[end] = min(cost[end], cost[i] + price)
        # A run: key[i], key[i] + step, key[i] + 2 * step, ...
        if i + 1 < n:
            step = ord(key[i + 1]) - ord(key[i])
            if abs(step) <= _RUN_MAX_STEP:
                end = i + 2
                while end < n and ord(key[end]) - ord(key[end - 1]) == step:
                    end += 1
                price = literal + math.log2(2 * _RUN_MAX_STEP + 1) + math.log2(n)
                for stop in range(i + _PATTERN_MIN_LENGTH, end + 1):
                    cost[stop] = min(cost[stop], cost[i] + price)
    return cost[n]


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
