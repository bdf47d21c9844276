"""Garante's WSGI application with the code-level mechanisms named in GARANTE_BENCH_OFF replaced
by what plain Django and mcp_types do (bench/variants.py), for the A/B rows of bench/load.py."""

import os

_OFF = set(os.environ.get("GARANTE_BENCH_OFF", "").split(","))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.variant_settings")

from config.wsgi import application  # noqa: E402

if "health_check_poll" in _OFF:
    from django.db.backends.postgresql import base as django_base

    from core.postgresql import base as garante_base

    garante_base.DatabaseWrapper.close_if_health_check_failed = (
        django_base.DatabaseWrapper.close_if_health_check_failed
    )

if "answer_deadline" in _OFF:
    from core.postgresql.base import bound_this_process

    bound_this_process(None)

__all__ = ["application"]
