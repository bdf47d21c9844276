"""Sales' Celery tasks: email a sent quote, expire quotes past validity, retry lost emails;
email the sales staff about a new opportunity and its salesperson when it is assigned, and
resend those notices that never went out; send the messages to customers when staff settle
their quote or order (sales.quote_messages), and sweep the lost ones."""

import logging

from celery import shared_task
from django.utils import timezone

from core.customer_messages import SEND_TASK_OPTIONS, send_task_run
from core.outbound import OutboundTransient
from core.periodic import every
from core.sweeps import SWEEP_TIME_LIMITS, enqueued, sweep
from core.tasks import DATABASE_FAILURES
from sales.models import QuoteMessage
from sales.quote_messages import (
    SEND_TASK,
    quote_message_deliver,
    quote_messages_sweep,
)
from sales.services.lead_notice import (
    opportunity_owner_notices_pending,
    opportunity_owner_notify,
    opportunity_team_notices_pending,
    opportunity_team_notify,
)
from sales.services.quote_email import quote_email_deliver, quote_emails_pending
from sales.services.quote_lifecycle import quotes_expire_due

logger = logging.getLogger("garante.sales.messages")

EXPIRE_EVERY_SECONDS = 5 * 60
EMAIL_SWEEP_EVERY_SECONDS = 15 * 60
MESSAGES_SWEEP_EVERY_SECONDS = 5 * 60


# Only transient errors reach the task: quote_email_deliver records a refusal for good (a 5yz
# reply) instead of raising. OutboundTransient is a 4yz reply or a dropped connection.
@shared_task(
    autoretry_for=(OutboundTransient, *DATABASE_FAILURES), retry_backoff=True, max_retries=5
)
def quote_email_send(quote_id: int) -> bool:
    """Email a sent quote to the customer's own address; retried while mail or the database is
    down (a database that stops answering fails within GARANTE_DB_ANSWER_SECONDS), never for a
    refusal that retrying cannot change."""
    return quote_email_deliver(quote_id=quote_id)


@shared_task(**SWEEP_TIME_LIMITS)
def quotes_expire() -> int:
    """Mark expired every open quote past its validity."""
    return quotes_expire_due()


@shared_task(**SWEEP_TIME_LIMITS)
def quote_emails_resend() -> int:
    """Enqueue again the emails of sent quotes that never went out (broker down at commit)."""
    return sweep(
        "sales.quote_emails_resend",
        quote_emails_pending(),
        lambda quote_id: enqueued(quote_email_send, quote_id),
    ).done


# Only transient errors reach the task: a refusal for good is settled by the service.
# OSError covers SMTPException (4yz replies, a dropped connection) and the network.
@shared_task(
    name="sales.tasks.opportunity_team_notify",
    autoretry_for=(OSError, *DATABASE_FAILURES),
    retry_backoff=True,
    max_retries=5,
)
def opportunity_team_notify_task(opportunity_id: int) -> int:
    """Email the company's sales staff about a new opportunity."""
    return opportunity_team_notify(opportunity_id=opportunity_id)


@shared_task(**SWEEP_TIME_LIMITS)
def opportunity_team_notices_resend() -> int:
    """Enqueue again the sales staff's emails about new opportunities that never went out."""
    return sweep(
        "sales.opportunity_team_notices_resend",
        opportunity_team_notices_pending(now=timezone.now()),
        lambda pk: enqueued(opportunity_team_notify_task, opportunity_id=pk),
    ).done


@shared_task(
    name="sales.tasks.opportunity_owner_notify",
    autoretry_for=(OSError, *DATABASE_FAILURES),
    retry_backoff=True,
    max_retries=5,
)
def opportunity_owner_notify_task(opportunity_id: int) -> int:
    """Email the salesperson an opportunity was just assigned to."""
    return opportunity_owner_notify(opportunity_id=opportunity_id)


@shared_task(**SWEEP_TIME_LIMITS)
def opportunity_owner_notices_resend() -> int:
    """Enqueue again the assigned salespeople's emails that never went out."""
    return sweep(
        "sales.opportunity_owner_notices_resend",
        opportunity_owner_notices_pending(now=timezone.now()),
        lambda pk: enqueued(opportunity_owner_notify_task, opportunity_id=pk),
    ).done


# Retried for transient errors only, as every customer message's task
# (core.customer_messages.SEND_TASK_OPTIONS).
@shared_task(name=SEND_TASK, **SEND_TASK_OPTIONS)
def quote_message_send(self, message_id: int, sent: dict[str, str] | None = None) -> str:
    """Send one message about a settled quote or order to the customer, once. A retry given
    `sent` only records a message that left while the database was down."""
    return send_task_run(
        self,
        message_id,
        sent,
        model=QuoteMessage,
        deliver=quote_message_deliver,
        logger=logger,
        what="quote message",
    )


@shared_task(**SWEEP_TIME_LIMITS)
def quote_messages_resend() -> dict[str, int]:
    """Publish again the customer messages lost on their way; settle those stopped while
    sending."""
    result = quote_messages_sweep()
    return {"queued": result.queued, "settled": result.settled, "failed": result.failed}


every(EXPIRE_EVERY_SECONDS, quotes_expire, key="sales: expire quotes past validity")
every(
    EMAIL_SWEEP_EVERY_SECONDS,
    quote_emails_resend,
    key="sales: resend quote emails that never went out",
)
every(
    EMAIL_SWEEP_EVERY_SECONDS,
    opportunity_team_notices_resend,
    key="sales: resend new-lead emails that never went out",
)
every(
    EMAIL_SWEEP_EVERY_SECONDS,
    opportunity_owner_notices_resend,
    key="sales: resend assigned-lead emails that never went out",
)
every(
    MESSAGES_SWEEP_EVERY_SECONDS,
    quote_messages_resend,
    key="sales: resend customer messages lost on their way",
)
