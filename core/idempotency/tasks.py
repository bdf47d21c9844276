"""Periodic upkeep of the idempotency engine: purging records past their lifetimes (imported by
core.tasks, which Celery's autodiscovery finds)."""

import logging

from celery import shared_task
from celery.schedules import crontab

from core.idempotency.engine import idempotency_records_purge
from core.periodic import every
from core.postgresql.base import answers_within

logger = logging.getLogger("garante.idempotency")

PURGE_TASK_NAME = "core.idempotency_records_purge"
# Off the top of the hour, where other housekeeping tends to pile up.
PURGE_SCHEDULE = crontab(minute=17)
# Tombstoning reads the whole table (1.1 s at 10,000,000 records) in one statement, so the
# purge waits for PostgreSQL longer than a worker's other tasks (config.celery), not for ever.
PURGE_ANSWER_SECONDS = 15 * 60


@shared_task(
    name=PURGE_TASK_NAME,
    ignore_result=True,
    soft_time_limit=PURGE_ANSWER_SECONDS + 5 * 60,
    time_limit=PURGE_ANSWER_SECONDS + 6 * 60,
)
def idempotency_records_purge_task() -> dict[str, int]:
    """Tombstone responses past their replay window; delete records past their tombstone."""
    with answers_within(PURGE_ANSWER_SECONDS):
        tombstoned, deleted = idempotency_records_purge()
    logger.info("idempotency purge: tombstoned=%s deleted=%s", tombstoned, deleted)
    return {"tombstoned": tombstoned, "deleted": deleted}


every(PURGE_SCHEDULE, idempotency_records_purge_task)
