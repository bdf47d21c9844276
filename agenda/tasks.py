"""Agenda's Celery tasks: the sweep that marks overdue appointments as no-shows."""

from typing import Any

from celery import Celery

from agenda.services import appointments_mark_no_shows
from core.celery import app

NO_SHOW_TASK_NAME = "agenda.appointments_mark_no_shows"
NO_SHOW_EVERY_SECONDS = 15 * 60


@app.task(name=NO_SHOW_TASK_NAME, ignore_result=True)
def appointments_mark_no_shows_task() -> int:
    """Mark as no-show what is still scheduled past its end (companies that enabled it)."""
    return appointments_mark_no_shows()


def schedule_periodic_tasks(sender: Celery, **kwargs: Any) -> None:
    # Registered here rather than in CELERY_BEAT_SCHEDULE: each app schedules its own tasks.
    sender.add_periodic_task(
        NO_SHOW_EVERY_SECONDS, appointments_mark_no_shows_task.s(), name=NO_SHOW_TASK_NAME
    )


if app.finalized:  # imported after finalisation: the signal has already been sent
    schedule_periodic_tasks(app)
else:
    app.on_after_finalize.connect(schedule_periodic_tasks, weak=False)
