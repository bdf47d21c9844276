"""Agenda's Celery tasks: the sweep that marks overdue appointments as no-shows, and the
appointment messages (agenda.appointment_messages): each one's send, and the sweep that queues the
reminders when they are due."""

import logging

from celery import shared_task

from agenda.appointment_messages import (
    SEND_TASK,
    appointment_message_deliver,
    appointment_messages_sweep,
)
from agenda.models import AppointmentMessage
from agenda.services import appointments_mark_no_shows
from core.customer_messages import SEND_TASK_OPTIONS, send_task_run
from core.periodic import every
from core.sweeps import SWEEP_TIME_LIMITS

logger = logging.getLogger("garante.agenda.messages")

NO_SHOW_TASK_NAME = "agenda.appointments_mark_no_shows"
NO_SHOW_EVERY_SECONDS = 15 * 60
MESSAGES_SWEEP_TASK_NAME = "agenda.appointment_messages_sweep"
MESSAGES_SWEEP_EVERY_SECONDS = 60


@shared_task(name=NO_SHOW_TASK_NAME, ignore_result=True, **SWEEP_TIME_LIMITS)
def appointments_mark_no_shows_task() -> int:
    """Mark as no-show what is still scheduled past its end (companies that enabled it)."""
    return appointments_mark_no_shows()


# Retried for transient errors only, as every customer message's task
# (core.customer_messages.SEND_TASK_OPTIONS).
@shared_task(name=SEND_TASK, **SEND_TASK_OPTIONS)
def appointment_message_send(self, message_id: int, sent: dict[str, str] | None = None) -> str:
    """Send one confirmation or reminder to the customer, once. A retry given `sent` only
    records a message that left while the database was down."""
    return send_task_run(
        self,
        message_id,
        sent,
        model=AppointmentMessage,
        deliver=appointment_message_deliver,
        logger=logger,
        what="appointment message",
    )


@shared_task(name=MESSAGES_SWEEP_TASK_NAME, ignore_result=True, **SWEEP_TIME_LIMITS)
def appointment_messages_sweep_task() -> dict[str, int]:
    """Queue the reminders that are due; publish again messages lost on their way; settle
    those stopped while sending. Each row on its own (core.sweeps): one that fails is logged
    and counted."""
    result = appointment_messages_sweep()
    return {"queued": result.queued, "settled": result.settled, "failed": result.failed}


every(NO_SHOW_EVERY_SECONDS, appointments_mark_no_shows_task)
every(MESSAGES_SWEEP_EVERY_SECONDS, appointment_messages_sweep_task)
