"""A sent quote's email through a real broker, a real Celery worker process and a real SMTP
server; and a broker that is down does not lose the quote."""

import pytest
from django.utils import timezone

from sales.models import Quote
from sales.services.quote_email import quote_email_deliver, quote_emails_pending
from sales.services.quote_lifecycle import quote_create
from sales.services.quote_pricing import QuoteItem
from tests.factories import ANA_EMAIL
from tests.servers import (
    at_once,
    free_port,
    mail_through_a_database_that_stops_answering,
    postgresql_test_database_url,
    start_mail_worker,
    start_smtp,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True)]

REDIS_DB = 13  # this module's own Redis database and queue: no other session's worker sees them


@pytest.fixture
def publish_to(celery_publisher):
    """Publish for real (not eager) to a broker URL; the test settings are restored after."""
    return celery_publisher


@pytest.fixture(scope="module")
def sales_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    """`celery -A config worker` in its own process, on this module's queue, against the test
    database, sending email to a local SMTP server."""
    with start_mail_worker(
        database_url=postgresql_test_database_url(django_db_blocker),
        redis_db=REDIS_DB,
        log_dir=tmp_path_factory.mktemp("sales-worker"),
    ) as (worker, inbox):
        yield {"queue": worker.queue, "broker_url": worker.broker_url, "inbox": inbox}


@pytest.mark.redis
@pytest.mark.postgres
def test_a_worker_emails_the_sent_quote_to_the_customer(
    company, ana, catalog, sales_worker, publish_to
):
    publish_to(sales_worker["broker_url"], queue=sales_worker["queue"])

    quote = quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 3)])

    message = wait_for(lambda: sales_worker["inbox"].messages and sales_worker["inbox"].messages[0])
    assert message["To"] == ANA_EMAIL
    assert quote.reference in message["Subject"]
    body = message.get_payload(decode=True).decode()
    assert "41,25\u00a0€" in body
    assert wait_for(lambda: Quote.objects.get(pk=quote.pk).emailed_at)


def test_a_broker_that_is_down_does_not_lose_the_quote(company, ana, catalog, publish_to):
    publish_to(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there

    quote = quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 1)])

    quote.refresh_from_db()
    assert (quote.state, quote.emailed_at) == (Quote.State.SENT, None)
    later = timezone.now() + timezone.timedelta(minutes=20)
    assert quote_emails_pending(now=later) == [quote.pk]


@pytest.mark.postgres
def test_two_deliveries_of_one_quote_at_once_send_one_email(company, ana, catalog, settings):
    quote = quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 1)])
    # As if its task had waited in the queue past the grace period: the sweep publishes it
    # again, and the two copies reach two workers together.
    Quote.objects.filter(pk=quote.pk).update(emailed_at=None)

    with start_smtp(delay=0.5) as (host, port, inbox):  # a mail server slow to accept
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = host, port
        sent = at_once(*[lambda: quote_email_deliver(quote_id=quote.pk)] * 2)

    assert sorted(sent) == [False, True]
    assert len(inbox.messages) == 1
    assert Quote.objects.get(pk=quote.pk).emailed_at is not None


@pytest.mark.redis
@pytest.mark.postgres
def test_a_worker_whose_database_stops_answering_mid_email_retries_and_emails_the_quote_once(
    company, ana, catalog, publish_to, django_db_blocker, tmp_path
):
    """The worker's session goes silent in the middle of the email's first statement (a
    failover, a partition): its wait is bounded, the task fails on the database and is retried
    like a mail server that is down, on a new connection, instead of waiting for the 15-minute
    sweep."""
    worker, inbox = mail_through_a_database_that_stops_answering(
        database_url=postgresql_test_database_url(django_db_blocker),
        redis_db=REDIS_DB,
        log_dir=tmp_path,
        publish_to=publish_to,
        create=lambda: quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 2)]),
        sent=lambda quote: Quote.objects.get(pk=quote.pk).emailed_at,
    )

    (message,) = inbox.messages
    assert message["To"] == ANA_EMAIL
    assert b"OperationalError" in worker.log.read_bytes()
