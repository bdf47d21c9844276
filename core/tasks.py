"""Celery tasks of the core app: delivery of verification codes, and settling the deliveries
no worker will finish; staff emails about security events (and the sweep that resends lost
ones); telling a customer at their old channel that their contact details changed; and, from
core.idempotency.tasks, purging idempotency records."""

import logging

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from core.idempotency import tasks as idempotency_tasks  # noqa: F401  (the purge, on beat)
from core.outbound import OutboundTransient
from core.periodic import every
from core.security import security_event_notices_pending, security_event_staff_notify
from core.services import contact_change_notice_send
from core.sweeps import SWEEP_TIME_LIMITS, enqueued, sweep
from core.verification import (
    DeliveryOutcome,
    SentUnrecorded,
    challenge_deliver_once,
    challenge_deliveries_settle,
    challenge_delivery_record_sent,
)

logger = logging.getLogger("garante.verification")

# The database failed rather than the code: retried like a transient delivery error.
DATABASE_FAILURES = (OperationalError, InterfaceError)
SETTLE_EVERY_SECONDS = 15 * 60
SETTLE_TASK_NAME = "core: settle deliveries of expired verification codes"
SECURITY_NOTICE_SWEEP_EVERY_SECONDS = 15 * 60


class DeliveryToRetry(Exception):
    """The channel failed in a way a later try may not (a 4yz reply, a provider's 5xx)."""


@shared_task(
    bind=True,
    name="core.challenge_deliver",
    ignore_result=True,
    acks_late=False,
    # An outage, or a connection that stopped answering (config.celery bounds the wait), is
    # retried on a new connection like a transient delivery error. Should the claim have
    # committed, the retry finds the delivery claimed and sends nothing: a code is never sent
    # twice.
    autoretry_for=(DeliveryToRetry, *DATABASE_FAILURES),
    max_retries=settings.GARANTE_VERIFICATION_DELIVERY_RETRIES,
    retry_backoff=settings.GARANTE_VERIFICATION_RETRY_BACKOFF_SECONDS,
    retry_jitter=True,
)
def challenge_deliver(
    self, challenge_id: int, sealed_code: str, sent: dict[str, str] | None = None
) -> str:
    """Send one verification code. The arguments hold the code sealed, never in clear, and the
    result never holds it either (Celery logs both at some levels). A retry given `sent` only
    records a message that left while the database was down."""
    if sent is not None:
        challenge_delivery_record_sent(challenge_id=challenge_id, **sent)
        return str(DeliveryOutcome.SENT)
    try:
        outcome = challenge_deliver_once(
            challenge_id=challenge_id,
            sealed_code=sealed_code,
            last_try=self.request.retries >= self.max_retries,
        )
    except SentUnrecorded as exc:
        logger.warning("verification code %s: sent, recording it is retried", challenge_id)
        raise self.retry_after_backoff(
            args=(challenge_id, ""),  # the code is not needed again
            kwargs={"sent": exc.sent},
            exc=exc.__cause__,
        ) from exc
    if outcome == DeliveryOutcome.RETRY:
        raise DeliveryToRetry(challenge_id)
    return str(outcome)


@shared_task(name="core.challenge_deliveries_settle", ignore_result=True, **SWEEP_TIME_LIMITS)
def challenge_deliveries_settle_task() -> int:
    """Mark the deliveries of expired codes that no worker will finish (core.verification)."""
    return challenge_deliveries_settle()


# Only transient errors reach these tasks: a refusal for good is settled by the service.
# OSError covers SMTPException (4yz replies, a dropped connection) and the network.
@shared_task(autoretry_for=(OSError, *DATABASE_FAILURES), retry_backoff=True, max_retries=5)
def security_event_notify_staff(event_id: int) -> int:
    """Email the company's staff about a security event (a burst of failed identifications)."""
    return security_event_staff_notify(event_id=event_id)


@shared_task(**SWEEP_TIME_LIMITS)
def security_event_notices_resend() -> int:
    """Enqueue again the security emails that never went out (the broker was down)."""
    return sweep(
        "core.security_notices_resend",
        security_event_notices_pending(now=timezone.now()),
        lambda event_id: enqueued(security_event_notify_staff, event_id=event_id),
    ).done


@shared_task(
    autoretry_for=(OutboundTransient, *DATABASE_FAILURES),
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
