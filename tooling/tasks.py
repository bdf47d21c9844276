"""Periodic upkeep of the tool API: purging idempotency records past their lifetimes."""

import logging

from celery import shared_task
from celery.schedules import crontab

from core.periodic import every
from core.postgresql.base import answers_within
from tooling import tasks_trace  # noqa: F401  (the trace trim task registers itself)
from tooling.idempotency import idempotency_records_purge

logger = logging.getLogger("garante.tools")

PURGE_TASK_NAME = "tooling.idempotency_records_purge"
# Off the top of the hour, where other housekeeping tends to pile up.
PURGE_SCHEDULE = crontab(minute=17)
# Tombstoning reads the whole table (1.1 s at 10,000,000 records) in one statement, so the
# purge waits for PostgreSQL longer than a worker's other tasks (config.celery), not for ever.
PURGE_ANSWER_SECONDS = 15 * 60


@shared_task(name=PURGE_TASK_NAME, ignore_result=True)
def idempotency_records_purge_task() -> dict[str, int]:
    """Tombstone responses past their replay window; delete records past their tombstone."""
    with answers_within(PURGE_ANSWER_SECONDS):
        tombstoned, deleted = idempotency_records_purge()
    logger.info("idempotency purge: tombstoned=%s deleted=%s", tombstoned, deleted)
    return {"tombstoned": tombstoned, "deleted": deleted}


every(PURGE_SCHEDULE, idempotency_records_purge_task)
