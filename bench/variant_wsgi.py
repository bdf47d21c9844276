"""Garante's WSGI application with the code-level mechanisms named in GARANTE_BENCH_OFF replaced
by what plain Django and mcp_types do (bench/variants.py), for the A/B rows of bench/load.py."""

import os
from collections.abc import Callable
from typing import TypeVar

from django.db import transaction

_OFF = set(os.environ.get("GARANTE_BENCH_OFF", "").split(","))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.variant_settings")
T = TypeVar("T")

if "without_savepoint" in _OFF:
    # Before the services import it: a savepoint of their own, as `transaction.atomic()` does.
    from core import transactions

    def _with_savepoint(work: Callable[[], T]) -> T:
        with transaction.atomic():
            return work()

    transactions.without_savepoint = _with_savepoint

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
