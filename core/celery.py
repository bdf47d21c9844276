"""The Celery application: Redis broker, tasks discovered from every installed app."""

import os
from typing import Any

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "core.settings")

app = Celery("garante")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


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
