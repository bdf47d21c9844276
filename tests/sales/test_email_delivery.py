"""A sent quote's email through a real broker, a real Celery worker process and a real SMTP
server; and a broker that is down does not lose the quote."""

import email
import time

import pytest
from aiosmtpd.controller import Controller
from django.db import connection
from django.utils import timezone

from sales.models import Quote
from sales.services import QuoteItem, quote_create, quote_emails_pending
from tests.servers import database_url_of_current_connection, free_port, start_celery_worker

pytestmark = [pytest.mark.django_db(transaction=True)]

REDIS_DB = 13  # this module's own Redis database and queue: no other session's worker sees them


def wait_for(predicate, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


class Inbox:
    def __init__(self) -> None:
        self.messages: list[email.message.Message] = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append(email.message_from_bytes(envelope.content))
        return "250 Message accepted"


@pytest.fixture
def publish_to(celery_publisher):
    """Publish for real (not eager) to a broker URL; the test settings are restored after."""
    return celery_publisher


@pytest.fixture(scope="module")
def sales_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    """`celery -A core worker` in its own process, on this module's queue, against the test
    database, sending email to a local SMTP server."""
    with django_db_blocker.unblock():
        if connection.vendor != "postgresql":
            pytest.skip("the worker process needs the PostgreSQL test database")
        url = database_url_of_current_connection()
    inbox = Inbox()
    smtp = Controller(inbox, hostname="127.0.0.1", port=free_port())
    smtp.start()
    env = {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(smtp.port),
    }
    try:
        with start_celery_worker(
            database_url=url,
            redis_db=REDIS_DB,
            log_dir=tmp_path_factory.mktemp("sales-worker"),
            env=env,
        ) as worker:
            yield {"queue": worker.queue, "broker_url": worker.broker_url, "inbox": inbox}
    finally:
        smtp.stop()


@pytest.mark.redis
@pytest.mark.postgres
def test_a_worker_emails_the_sent_quote_to_the_customer(
    company, ana, catalog, sales_worker, publish_to, settings
):
    publish_to(sales_worker["broker_url"])
    settings.GARANTE_SALES_QUEUE = sales_worker["queue"]

    quote = quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 3)])

    message = wait_for(lambda: sales_worker["inbox"].messages and sales_worker["inbox"].messages[0])
    assert message["To"] == "ana@example.com"
    assert quote.reference in message["Subject"]
    body = message.get_payload(decode=True).decode()
    assert "41,25 EUR" in body
    assert wait_for(lambda: Quote.objects.get(pk=quote.pk).emailed_at)


def test_a_broker_that_is_down_does_not_lose_the_quote(company, ana, catalog, publish_to):
    publish_to(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there

    quote = quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 1)])

    quote.refresh_from_db()
    assert (quote.state, quote.emailed_at) == (Quote.State.SENT, None)
    later = timezone.now() + timezone.timedelta(minutes=20)
    assert quote_emails_pending(now=later) == [quote.pk]
