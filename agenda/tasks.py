"""Agenda's Celery tasks: the sweep that marks overdue appointments as no-shows."""

from celery import shared_task

from agenda.services import appointments_mark_no_shows
from core.periodic import every
from core.sweeps import SWEEP_TIME_LIMITS

NO_SHOW_TASK_NAME = "agenda.appointments_mark_no_shows"
NO_SHOW_EVERY_SECONDS = 15 * 60


@shared_task(name=NO_SHOW_TASK_NAME, ignore_result=True, **SWEEP_TIME_LIMITS)
def appointments_mark_no_shows_task() -> int:
    """Mark as no-show what is still scheduled past its end (companies that enabled it)."""
    return appointments_mark_no_shows()


every(NO_SHOW_EVERY_SECONDS, appointments_mark_no_shows_task)
