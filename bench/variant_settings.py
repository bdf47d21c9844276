"""Garante's production settings with the mechanisms named in GARANTE_BENCH_OFF turned off
(bench/variants.py), for the A/B rows of bench/load.py."""

import os

from config.settings import *  # noqa: F403
from config.settings import DATABASES, LOGGING, MIDDLEWARE

_OFF = set(os.environ.get("GARANTE_BENCH_OFF", "").split(","))

if "server_side_binding" in _OFF:
    DATABASES["default"]["OPTIONS"] = {
        **DATABASES["default"].get("OPTIONS", {}),
        "server_side_binding": False,
        "prepare_threshold": None,
    }
if "machine_api_middleware" in _OFF:
    # Django's own browser middleware, run on the machine API's requests too.
    _DJANGO = {
        "core.middleware.SessionMiddleware": "django.contrib.sessions.middleware.SessionMiddleware",
        "core.middleware.LocaleMiddleware": "django.middleware.locale.LocaleMiddleware",
        "core.middleware.CsrfViewMiddleware": "django.middleware.csrf.CsrfViewMiddleware",
        "core.middleware.AuthenticationMiddleware": (
            "django.contrib.auth.middleware.AuthenticationMiddleware"
        ),
        "core.middleware.MessageMiddleware": "django.contrib.messages.middleware.MessageMiddleware",
        "core.middleware.XFrameOptionsMiddleware": (
            "django.middleware.clickjacking.XFrameOptionsMiddleware"
        ),
    }
    MIDDLEWARE = [_DJANGO.get(name, name) for name in MIDDLEWARE]
if "request_log" in _OFF:
    # The request's one line (core.request_log) not written; every other logger as shipped.
    LOGGING["loggers"]["garante.requests"] = {"level": "WARNING"}
