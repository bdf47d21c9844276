"""Periodic upkeep of the conversation trace: trimming tool calls past their retention."""

import logging
from typing import Any

from celery import Celery
from celery.schedules import crontab

from core.celery import app
from tooling.trace import tool_calls_trim

logger = logging.getLogger("garante.tools")

TRIM_TASK_NAME = "tooling.tool_calls_trim"
# Daily, at a quiet hour (UTC), off the top of the hour.
TRIM_SCHEDULE = crontab(hour=3, minute=41)


@app.task(name=TRIM_TASK_NAME, ignore_result=True)
def tool_calls_trim_task() -> dict[str, int]:
    """Delete trace rows older than settings.GARANTE_TRACE_RETENTION_DAYS."""
    deleted = tool_calls_trim()
    logger.info("trace trim: deleted=%s", deleted)
    return {"deleted": deleted}


def schedule_periodic_tasks(sender: Celery, **kwargs: Any) -> None:
    # Registered here rather than in CELERY_BEAT_SCHEDULE: each app schedules its own tasks.
    sender.add_periodic_task(TRIM_SCHEDULE, tool_calls_trim_task.s(), name=TRIM_TASK_NAME)


if app.finalized:  # imported after finalisation (rare): the signal has already been sent
    schedule_periodic_tasks(app)
else:
    app.on_after_finalize.connect(schedule_periodic_tasks, weak=False)
