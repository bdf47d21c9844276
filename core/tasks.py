"""Celery tasks of the core app: delivery of verification codes, and settling the deliveries
no worker will finish."""

import logging
import random
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError

from core.celery import app
from core.verification import (
    DeliveryOutcome,
    challenge_deliver_once,
    challenge_deliveries_settle,
)

logger = logging.getLogger("garante.verification")

# The database failed rather than the code: retried like a transient delivery error.
DATABASE_FAILURES = (OperationalError, InterfaceError)
SETTLE_EVERY_SECONDS = 15 * 60
SETTLE_TASK_NAME = "core: settle deliveries of expired verification codes"


def retry_countdown(retries: int) -> float:
    """Exponential backoff with jitter: base, 2 x base, 4 x base, ... (+ up to 20%)."""
    delay = settings.GARANTE_VERIFICATION_RETRY_BACKOFF_SECONDS * (2**retries)
    return delay * (1 + random.random() / 5)


@app.task(bind=True, name="core.challenge_deliver", ignore_result=True, acks_late=False)
def challenge_deliver(self, challenge_id: int, sealed_code: str) -> str:
    """Send one verification code. The arguments hold the code sealed, never in clear, and the
    result never holds it either (Celery logs both at some levels)."""
    max_retries = settings.GARANTE_VERIFICATION_DELIVERY_RETRIES
    try:
        outcome = challenge_deliver_once(
            challenge_id=challenge_id,
            sealed_code=sealed_code,
            last_try=self.request.retries >= max_retries,
        )
    except DATABASE_FAILURES as exc:
        # An outage, or a connection that stopped answering (core.celery bounds the wait).
        # Retried on a new connection. Should the claim have committed, the retry finds the
        # delivery claimed and sends nothing: a code is never sent twice.
        if self.request.is_eager or self.request.retries >= max_retries:
            raise
        logger.warning("verification code %s: database unavailable (%s)", challenge_id, exc)
        raise self.retry(
            countdown=retry_countdown(self.request.retries), max_retries=max_retries
        ) from exc
    if outcome == DeliveryOutcome.RETRY:
        if self.request.is_eager:
            # Eager mode (demo, tests) with eager_propagates lets Retry escape apply(), so
            # retry in place, as Celery's own eager retry would (without the wait).
            return self.apply(
                args=(challenge_id, sealed_code), retries=self.request.retries + 1
            ).result
        raise self.retry(countdown=retry_countdown(self.request.retries), max_retries=max_retries)
    return str(outcome)


@app.task(name="core.challenge_deliveries_settle", ignore_result=True)
def challenge_deliveries_settle_task() -> int:
    """Mark the deliveries of expired codes that no worker will finish (core.verification)."""
    return challenge_deliveries_settle()


@app.on_after_finalize.connect
def register_periodic_tasks(sender: Any, **kwargs: Any) -> None:
    sender.add_periodic_task(
        SETTLE_EVERY_SECONDS, challenge_deliveries_settle_task.s(), name=SETTLE_TASK_NAME
    )
