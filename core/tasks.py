"""Celery tasks of the core app: delivery of verification codes, and settling the deliveries
no worker will finish; staff emails about security events (and the sweep that resends lost
ones); telling a customer at their old channel that their contact details changed; and, from
core.idempotency.tasks, purging idempotency records."""

import logging
import random

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from core.idempotency import tasks as idempotency_tasks  # noqa: F401  (the purge, on beat)
from core.periodic import every
from core.security import security_event_notices_pending, security_event_staff_notify
from core.services import contact_change_notice_send
from core.sms import SmsTransientError
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
SECURITY_NOTICE_SWEEP_EVERY_SECONDS = 15 * 60


def retry_countdown(retries: int) -> float:
    """Exponential backoff with jitter: base, 2 x base, 4 x base, ... (+ up to 20%)."""
    delay = settings.GARANTE_VERIFICATION_RETRY_BACKOFF_SECONDS * (2**retries)
    return delay * (1 + random.random() / 5)


@shared_task(bind=True, name="core.challenge_deliver", ignore_result=True, acks_late=False)
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
        # An outage, or a connection that stopped answering (config.celery bounds the wait).
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


@shared_task(name="core.challenge_deliveries_settle", ignore_result=True)
def challenge_deliveries_settle_task() -> int:
    """Mark the deliveries of expired codes that no worker will finish (core.verification)."""
    return challenge_deliveries_settle()


# Only transient errors reach these tasks: a refusal for good is settled by the service.
# OSError covers SMTPException (4yz replies, a dropped connection) and the network.
@shared_task(autoretry_for=(OSError, *DATABASE_FAILURES), retry_backoff=True, max_retries=5)
def security_event_notify_staff(event_id: int) -> int:
    """Email the company's staff about a security event (a burst of failed identifications)."""
    return security_event_staff_notify(event_id=event_id)


@shared_task
def security_event_notices_resend() -> int:
    """Enqueue again the security emails that never went out (the broker was down)."""
    pending = security_event_notices_pending(now=timezone.now())
    for event_id in pending:
        security_event_notify_staff.delay(event_id=event_id)
    return len(pending)


@shared_task(
    autoretry_for=(OSError, SmsTransientError, *DATABASE_FAILURES),
    retry_backoff=True,
    max_retries=5,
)
def contact_change_notify(
    contact_id: int, channel: str, destination: str, changed: list[str]
) -> bool:
    """Tell the customer at their old phone or email that their contact details changed."""
    return contact_change_notice_send(
        contact_id=contact_id, channel=channel, destination=destination, changed=changed
    )


every(SETTLE_EVERY_SECONDS, challenge_deliveries_settle_task, key=SETTLE_TASK_NAME)
every(
    SECURITY_NOTICE_SWEEP_EVERY_SECONDS,
    security_event_notices_resend,
    key="core: resend security emails that never went out",
)
