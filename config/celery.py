"""The Celery application: Redis broker, tasks discovered from every installed app.

`celery -A config worker` (or beat) finds it as `config.celery_app`. The apps define their
tasks with `shared_task` and put their periodic ones on beat's schedule themselves
(core.periodic), so they never import this module: it sits above them.
"""

import logging
import logging.config
import os
from typing import Any

from celery import Celery
from celery.signals import (
    setup_logging,
    task_failure,
    task_retry,
    task_revoked,
    task_success,
    worker_init,
)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("garante", task_cls="core.jobs:GaranteTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The app every thread's `shared_task` resolves to: Celery makes an app current only in the
# thread that created it, and a web server's other threads would otherwise enqueue through a
# default app of Celery's own, on its default broker.
app.set_default()
app.autodiscover_tasks()


@setup_logging.connect
def log_as_the_web_does(loglevel: int | None = None, **kwargs: Any) -> None:
    """The worker and beat write the web's lines (settings.LOGGING, core.logs): the format
    GARANTE_LOG_FORMAT chooses, the request or task id stamped, every field masked. Celery
    otherwise replaces the root logger's handlers with its own, which mask nothing and ignore
    the format (a receiver of this signal is what stops it, worker_hijack_root_logger aside).
    The level is GARANTE_LOG_LEVEL's, or `--loglevel`'s where that says more (`-l debug`)."""
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)
    root = logging.getLogger()
    if loglevel and loglevel < root.level:
        root.setLevel(loglevel)


@worker_init.connect
def bound_database_answers(**kwargs: Any) -> None:
    """A worker waits for each answer of PostgreSQL as long as the web server does
    (core.postgresql.base): a task whose server stopped answering in its middle (a failover to
    another host, a partition, a frozen server) fails within seconds, and its retry connects
    again, instead of holding the worker's process for ever. Sent before the pool starts, so
    every process of the pool inherits the bound."""
    from django.conf import settings

    from core.postgresql.base import bound_this_process

    bound_this_process(settings.GARANTE_DB_ANSWER_SECONDS)


@worker_init.connect
def serve_worker_metrics(**kwargs: Any) -> None:
    """With GARANTE_WORKER_METRICS_PORT set, the worker answers Prometheus' scrapes of its own
    series (its tasks' outcomes, the verification codes it delivered) on that port of
    GARANTE_WORKER_METRICS_ADDRESS (127.0.0.1 unless set: a port of its own, not the web's
    token, is what guards it). A prefork pool's processes count in files of their own when the
    worker has a PROMETHEUS_MULTIPROC_DIR (its own, not the web's), and the scrape sums them."""
    port = os.environ.get("GARANTE_WORKER_METRICS_PORT", "").strip()
    if not port:
        return
    from prometheus_client import start_http_server

    from core.metrics import exposed_registry

    address = os.environ.get("GARANTE_WORKER_METRICS_ADDRESS", "").strip() or "127.0.0.1"
    start_http_server(int(port), addr=address, registry=exposed_registry())


def _task_counted(outcome: str) -> Any:
    """A receiver counting a finished task under `outcome` (core.metrics), in the process that
    ran it: a worker's pool process, or the web process when tasks run eagerly (the demo)."""

    def receiver(sender: Any = None, **kwargs: Any) -> None:
        # Imported here: this module loads with the settings (config/__init__.py), before
        # Django is set up, and core.metrics reads Django.
        from core.metrics import CELERY_TASKS

        name = getattr(sender, "name", None) or getattr(kwargs.get("request"), "task", None)
        CELERY_TASKS.labels(str(name or "unknown"), outcome).inc()

    return receiver


# Celery keeps weak references to receivers: these module-level names keep them alive.
_count_success = _task_counted("success")
_count_failure = _task_counted("failure")
_count_retry = _task_counted("retry")
_count_revoked = _task_counted("revoked")
task_success.connect(_count_success)
task_failure.connect(_count_failure)
task_retry.connect(_count_retry)
task_revoked.connect(_count_revoked)
