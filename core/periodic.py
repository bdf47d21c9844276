"""Periodic tasks, each put on beat's schedule by the app that owns it.

An app calls `every(...)` in its tasks module, which Celery's autodiscovery imports in every
worker and in beat; no central file lists the apps' schedules. Beat runs them through
`ClaimingScheduler`, so a second beat sends nothing the first has sent (docs/scaling.md).
"""

import logging
import os
from datetime import timedelta
from typing import Any

from celery import Task, current_app
from celery.beat import PersistentScheduler
from celery.schedules import crontab
from django.conf import settings

logger = logging.getLogger("garante.periodic")


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


class ClaimingScheduler(PersistentScheduler):
    """Beat's scheduler (settings.CELERY_BEAT_SCHEDULER), safe when a second beat is started
    by mistake (two nodes each running one, a deploy that overlaps): before sending an entry's
    task it claims the entry in the broker's Redis (`SET NX` for nine tenths of the entry's
    period, one minute's worth for a crontab), and a beat that finds the entry claimed skips
    it. Whichever beat claims first sends; if it stops, the other's next due time sends.
    A Redis that cannot be reached cannot deliver the task either: then the entry is sent
    as Celery would, and the send fails or succeeds on its own."""

    def apply_entry(self, entry: Any, producer: Any = None) -> None:
        if not self.claim(entry):
            logger.info("beat: %s skipped, sent by another beat this period", entry.name)
            return
        super().apply_entry(entry, producer=producer)

    def claim(self, entry: Any) -> bool:
        seconds = claim_seconds(entry.schedule)
        key = f"garante:beat-claim:{settings.DATABASES['default']['NAME']}:{entry.name}"
        try:
            client = self._claims()
            return bool(client.set(key, os.getpid(), nx=True, px=int(seconds * 1000)))
        except Exception:
            logger.warning("beat: could not claim %s in Redis; sending it", entry.name)
            return True

    def _claims(self) -> Any:
        client = getattr(self, "_claim_client", None)
        if client is None:
            import redis

            client = redis.Redis.from_url(
                self.app.conf.broker_url, socket_timeout=2, socket_connect_timeout=2
            )
            self._claim_client = client
        return client


def claim_seconds(schedule: Any) -> float:
    """How long a sent entry stays claimed: most of its period, so the same beat's next send
    (a little early or late) is not refused and another beat's is."""
    run_every = getattr(schedule, "run_every", None)
    if isinstance(schedule, crontab) or run_every is None:
        return 55.0
    return max(0.5, 0.9 * run_every.total_seconds())
