"""Agenda's Celery tasks: the sweep that marks overdue appointments as no-shows, and the
appointment messages (agenda.appointment_messages): each one's send, and the sweep that queues the
reminders when they are due."""

import logging

from celery import shared_task
from django.db import InterfaceError, OperationalError

from agenda.appointment_messages import (
    SEND_TASK,
    appointment_message_deliver,
    appointment_message_record_sent,
    appointment_messages_sweep,
)
from agenda.services import appointments_mark_no_shows
from core.outbound import OutboundTransient, SentUnrecorded
from core.periodic import every
from core.sweeps import SWEEP_TIME_LIMITS

logger = logging.getLogger("garante.agenda.messages")

NO_SHOW_TASK_NAME = "agenda.appointments_mark_no_shows"
NO_SHOW_EVERY_SECONDS = 15 * 60
MESSAGES_SWEEP_TASK_NAME = "agenda.appointment_messages_sweep"
MESSAGES_SWEEP_EVERY_SECONDS = 60
MESSAGE_RETRIES = 5


@shared_task(name=NO_SHOW_TASK_NAME, ignore_result=True, **SWEEP_TIME_LIMITS)
def appointments_mark_no_shows_task() -> int:
    """Mark as no-show what is still scheduled past its end (companies that enabled it)."""
    return appointments_mark_no_shows()


# Retried (with exponential backoff and jitter) for transient errors only: the provider's, and
# the database's (a claim that committed before the connection failed leaves the message
# `sending`, and the retry sends nothing). acks_late stays off: a redelivered copy would find
# the message claimed anyway, and the claim is what keeps it single. The hard limit is past
# the SMTP and SMS timeouts (10 s each); the soft one, reached while the provider holds the
# message, settles it as unknown rather than sending it again.
@shared_task(
    bind=True,
    name=SEND_TASK,
    ignore_result=True,
    acks_late=False,
    autoretry_for=(OutboundTransient, OperationalError, InterfaceError),
    retry_backoff=True,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=MESSAGE_RETRIES,
    soft_time_limit=45,
    time_limit=60,
)
def appointment_message_send(self, message_id: int, sent: dict[str, str] | None = None) -> str:
    """Send one confirmation or reminder to the customer, once. A retry given `sent` only
    records a message that left while the database was down."""
    if sent is not None:
        appointment_message_record_sent(message_id=message_id, **sent)
        return "sent"
    try:
        return appointment_message_deliver(
            message_id=message_id, last_try=self.request.retries >= self.max_retries
        )
    except SentUnrecorded as exc:
        logger.warning("appointment message %s: sent, recording it is retried", message_id)
        raise self.retry_after_backoff(
            args=(message_id,), kwargs={"sent": exc.sent}, exc=exc.__cause__
        ) from exc


@shared_task(name=MESSAGES_SWEEP_TASK_NAME, ignore_result=True, **SWEEP_TIME_LIMITS)
def appointment_messages_sweep_task() -> dict[str, int]:
    """Queue the reminders that are due; publish again messages lost on their way; settle
    those stopped while sending. Each row on its own (core.sweeps): one that fails is logged
    and counted."""
    result = appointment_messages_sweep()
    return {"queued": result.queued, "settled": result.settled, "failed": result.failed}


every(NO_SHOW_EVERY_SECONDS, appointments_mark_no_shows_task)
every(MESSAGES_SWEEP_EVERY_SECONDS, appointment_messages_sweep_task)
