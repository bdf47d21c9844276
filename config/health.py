"""Health probes for load balancers and orchestrators: `GET /healthz` and `GET /readyz`.

- `/healthz` (liveness): the process answers HTTP. It touches nothing else, so a database
  outage never gets healthy web processes restarted.
- `/readyz` (readiness): the database answers, every migration this code knows is applied,
  and the Celery broker answers (not checked when tasks run in process, as in the demo).
  200 when all hold, else 503; the body names each check and how it went, never a host, a
  URL or an error message (those go to the log, at WARNING).

A small module rather than django-health-check: that library's database check writes and
deletes a row of a model of its own on every probe, and its Celery check waits for a worker
to run a task; readiness here needs neither, and it must answer within a bound however the
services fail, which the checks below get by running in threads the probe stops waiting for.

Answered by a middleware placed first in MIDDLEWARE, before Host validation, the HTTPS
redirect, sessions, the tool API's authentication and its trace: probes come from inside the
network, often with an IP address as Host and over plain HTTP, and are no conversation. Their
answer depends on nothing the request carries.
"""

import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, HttpResponseBase

logger = logging.getLogger(__name__)

OK = "ok"
# Threads of their own, so that a check the database or broker never answers (a frozen server,
# a paused proxy) holds a thread for its own timeouts while the probe answers at its bound.
_checks = ThreadPoolExecutor(max_workers=4, thread_name_prefix="garante-readyz")
# Once this code's migrations are all applied they stay so while it runs: checked until then.
_migrated = threading.Event()


def _database() -> dict[str, str]:
    from core.postgresql.base import answers_within  # the apps' backend, loaded by now

    results: dict[str, str] = {}
    try:
        with answers_within(settings.GARANTE_READY_TIMEOUT_SECONDS):
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
                cursor.fetchone()
            results["database"] = OK
            if _migrated.is_set():
                results["migrations"] = OK
            else:
                results["migrations"] = _migrations()
    except Exception as error:  # any failure is the probe's answer, with its cause logged
        logger.warning("readiness: the database check failed: %s", error)
        results["database"] = "unreachable"
        results.setdefault("migrations", "not checked")
    finally:
        connection.close()  # a fresh connection per probe: nothing kept from a failed one
    return results


def _migrations() -> str:
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if pending:
        return f"{len(pending)} not applied"
    _migrated.set()
    return OK


def _broker() -> dict[str, str]:
    if settings.CELERY_TASK_ALWAYS_EAGER:
        return {"broker": "not used (tasks run in process)"}
    from config.celery import app

    broker = app.connection_for_write()
    try:
        # Connecting opens a channel, which PINGs Redis; no retry: the probe is retried anyway.
        broker.ensure_connection(max_retries=0, timeout=settings.GARANTE_READY_TIMEOUT_SECONDS)
        return {"broker": OK}
    except Exception as error:
        logger.warning("readiness: the broker check failed: %s", error)
        return {"broker": "unreachable"}
    finally:
        broker.release()


CHECKS: dict[tuple[str, ...], Callable[[], dict[str, str]]] = {
    ("database", "migrations"): _database,
    ("broker",): _broker,
}


def readiness() -> dict[str, str]:
    """Each check's outcome ("ok" or why not), within GARANTE_READY_TIMEOUT_SECONDS overall."""
    bound = settings.GARANTE_READY_TIMEOUT_SECONDS
    deadline = time.monotonic() + bound
    running = {names: _checks.submit(check) for names, check in CHECKS.items()}
    results: dict[str, str] = {}
    for names, future in running.items():
        try:
            results.update(future.result(timeout=max(0.0, deadline - time.monotonic())))
        except FutureTimeout:
            logger.warning("readiness: the %s check answered nothing within %g s", names[0], bound)
            results.update(dict.fromkeys(names, f"no answer within {bound:g} s"))
    return results


def is_ready(checks: dict[str, str]) -> bool:
    return all(value == OK or value.startswith("not used") for value in checks.values())


def _json(status: int, body: dict[str, Any]) -> HttpResponse:
    response = HttpResponse(json.dumps(body), status=status, content_type="application/json")
    response["Cache-Control"] = "no-store"
    return response


class HealthProbes:
    """Answers /healthz and /readyz before any other middleware runs."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        path = request.path_info
        if path not in ("/healthz", "/readyz"):
            return self.get_response(request)
        if request.method not in ("GET", "HEAD"):
            response = _json(405, {"status": "method not allowed"})
            response["Allow"] = "GET, HEAD"
            return response
        if path == "/healthz":
            return _json(200, {"status": OK})
        checks = readiness()
        ready = is_ready(checks)
        return _json(
            200 if ready else 503, {"status": OK if ready else "unavailable", "checks": checks}
        )
