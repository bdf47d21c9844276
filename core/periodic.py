"""Periodic tasks, each put on beat's schedule by the app that owns it.

An app calls `every(...)` in its tasks module, which Celery's autodiscovery imports in every
worker and in beat; no central file lists the apps' schedules.
"""

from datetime import timedelta
from typing import Any

from celery import Task, current_app
from celery.schedules import crontab


def every(schedule: float | timedelta | crontab, task: Task, *, key: str = "") -> None:
    """Run `task` on `schedule` (seconds, a timedelta or a crontab) as beat's entry `key` (the
    task's name by default). Added once the Celery app has bound its tasks, or at once if a
    late import comes after that."""

    def schedule_it(sender: Any = None, **kwargs: Any) -> None:
        app = sender or current_app
        app.add_periodic_task(schedule, task.s(), name=key or task.name)

    if current_app.finalized:
        schedule_it()
    else:
        current_app.on_after_finalize.connect(schedule_it, weak=False)
