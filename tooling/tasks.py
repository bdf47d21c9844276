"""Periodic upkeep of the conversation trace: trimming tool calls past their retention."""

import logging

from celery import shared_task
from celery.schedules import crontab

from core.periodic import every
from core.sweeps import SWEEP_TIME_LIMITS
from tooling.trace import tool_calls_trim

logger = logging.getLogger("garante.tools")

TRIM_TASK_NAME = "tooling.tool_calls_trim"
# Daily, at a quiet hour (UTC), off the top of the hour.
TRIM_SCHEDULE = crontab(hour=3, minute=41)


@shared_task(name=TRIM_TASK_NAME, ignore_result=True, **SWEEP_TIME_LIMITS)
def tool_calls_trim_task() -> dict[str, int]:
    """Delete trace rows older than settings.GARANTE_TRACE_RETENTION_DAYS."""
    deleted = tool_calls_trim()
    logger.info("trace trim: deleted=%s", deleted)
    return {"deleted": deleted}


every(TRIM_SCHEDULE, tool_calls_trim_task)
