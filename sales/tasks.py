"""Sales' Celery tasks: email a sent quote, expire quotes past validity, retry lost emails;
email the sales staff about a new opportunity, and resend those notices that never went out."""

from celery import shared_task
from django.utils import timezone

from core.outbound import OutboundTransient
from core.periodic import every
from core.sweeps import SWEEP_TIME_LIMITS, enqueued, sweep
from core.tasks import DATABASE_FAILURES
from sales.services.lead_notice import opportunity_team_notices_pending, opportunity_team_notify
from sales.services.quote_email import quote_email_deliver, quote_emails_pending
from sales.services.quote_lifecycle import quotes_expire_due

EXPIRE_EVERY_SECONDS = 5 * 60
EMAIL_SWEEP_EVERY_SECONDS = 15 * 60


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
