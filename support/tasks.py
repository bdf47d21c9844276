"""Support's Celery tasks: staff emails (and the sweep that resends lost ones), the messages
to customers about their cases (support.case_messages: each one's send, and the sweep of lost
ones), and the sweep that closes silent resolved cases."""

import logging

from celery import shared_task
from django.utils import timezone

from core.customer_messages import SEND_TASK_OPTIONS, send_task_run
from core.periodic import every
from core.sweeps import SWEEP_TIME_LIMITS, enqueued, sweep
from core.tasks import DATABASE_FAILURES
from support.case_messages import (
    SEND_TASK,
    case_message_deliver,
    case_messages_sweep,
)
from support.models import CaseMessage
from support.selectors import case_ids_due_for_auto_close, case_staff_notices_pending
from support.services import case_close_if_unanswered, case_staff_notify

logger = logging.getLogger("garante.support.messages")

AUTO_CLOSE_EVERY_SECONDS = 60 * 60
NOTICE_SWEEP_EVERY_SECONDS = 15 * 60
MESSAGES_SWEEP_EVERY_SECONDS = 5 * 60


# Only transient errors reach the task: case_staff_notify settles a notice the mail server
# refuses for good (a 5yz reply) instead of raising. OSError covers SMTPException (4yz
# replies, a dropped connection) and the network.
@shared_task(autoretry_for=(OSError, *DATABASE_FAILURES), retry_backoff=True, max_retries=5)
def case_notify_staff(case_id: int, comment_id: int | None = None) -> int:
    """Tell staff about a new case or a customer's comment; retried while mail or the database
    is down (a database that stops answering fails within GARANTE_DB_ANSWER_SECONDS), never
    for a refusal that retrying cannot change."""
    return case_staff_notify(case_id=case_id, comment_id=comment_id)


@shared_task(**SWEEP_TIME_LIMITS)
def case_staff_notices_resend() -> int:
    """Enqueue again the staff emails that never went out (the broker was down at commit)."""
    return sweep(
        "support.staff_notices_resend",
        case_staff_notices_pending(now=timezone.now()),
        lambda pending: enqueued(case_notify_staff, case_id=pending[0], comment_id=pending[1]),
    ).done


# Retried for transient errors only, as every customer message's task
# (core.customer_messages.SEND_TASK_OPTIONS).
@shared_task(name=SEND_TASK, **SEND_TASK_OPTIONS)
def case_message_send(self, message_id: int, sent: dict[str, str] | None = None) -> str:
    """Send one reply or resolution notice to the customer, once. A retry given `sent` only
    records a message that left while the database was down."""
    return send_task_run(
        self,
        message_id,
        sent,
        model=CaseMessage,
        deliver=case_message_deliver,
        logger=logger,
        what="case message",
    )


@shared_task(**SWEEP_TIME_LIMITS)
def case_messages_resend() -> dict[str, int]:
    """Publish again the customer messages lost on their way; settle those stopped while
    sending. Each row on its own (core.sweeps): one that fails is logged and counted."""
    result = case_messages_sweep()
    return {"queued": result.queued, "settled": result.settled, "failed": result.failed}


@shared_task(**SWEEP_TIME_LIMITS)
def cases_auto_close() -> int:
    """Close every resolved case whose customer stayed silent for the company's period."""
    now = timezone.now()
    # One transaction per case: a failure on one case must not keep the others open.
    return sweep(
        "support.auto_close",
        case_ids_due_for_auto_close(now=now),
        lambda case_id: case_close_if_unanswered(case_id=case_id, now=now),
    ).done


every(
    AUTO_CLOSE_EVERY_SECONDS,
    cases_auto_close,
    key="support: close resolved cases the customer did not answer",
)
every(
    NOTICE_SWEEP_EVERY_SECONDS,
    case_staff_notices_resend,
    key="support: resend staff emails that never went out",
)
every(
    MESSAGES_SWEEP_EVERY_SECONDS,
    case_messages_resend,
    key="support: resend customer messages lost on their way",
)
