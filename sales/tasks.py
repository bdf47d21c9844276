"""Sales' Celery tasks: email a sent quote, expire quotes past validity, retry lost emails."""

from typing import Any

from core.celery import app
from core.tasks import DATABASE_FAILURES
from sales.services import quote_email_deliver, quote_emails_pending, quotes_expire_due

EXPIRE_EVERY_SECONDS = 5 * 60
EMAIL_SWEEP_EVERY_SECONDS = 15 * 60


# Only transient errors reach the task: quote_email_deliver records a refusal for good (a 5yz
# reply) instead of raising. OSError covers SMTPException (4yz replies, a dropped connection).
@app.task(autoretry_for=(OSError, *DATABASE_FAILURES), retry_backoff=True, max_retries=5)
def quote_email_send(quote_id: int) -> bool:
    """Email a sent quote to the customer's own address; retried while mail or the database is
    down (a database that stops answering fails within GARANTE_DB_ANSWER_SECONDS), never for a
    refusal that retrying cannot change."""
    return quote_email_deliver(quote_id=quote_id)


@app.task
def quotes_expire() -> int:
    """Mark expired every open quote past its validity."""
    return quotes_expire_due()


@app.task
def quote_emails_resend() -> int:
    """Enqueue again the emails of sent quotes that never went out (broker down at commit)."""
    pending = quote_emails_pending()
    for quote_id in pending:
        quote_email_send.delay(quote_id)
    return len(pending)


@app.on_after_finalize.connect
def register_periodic_tasks(sender: Any, **kwargs: Any) -> None:
    # Registered here rather than in CELERY_BEAT_SCHEDULE, so the app owns its own schedule.
    sender.add_periodic_task(
        EXPIRE_EVERY_SECONDS, quotes_expire.s(), name="sales: expire quotes past validity"
    )
    sender.add_periodic_task(
        EMAIL_SWEEP_EVERY_SECONDS,
        quote_emails_resend.s(),
        name="sales: resend quote emails that never went out",
    )
