"""Staff emails of support through a real broker, a real Celery worker process and a real SMTP
server: a new case, a customer's comment, and a notice lost with the broker that the sweep
sends once the broker is back."""

from datetime import timedelta

import pytest
from django.utils import timezone

from support import selectors, services, tasks
from support.models import Case, CaseComment
from tests.servers import (
    free_port,
    mail_through_a_database_that_stops_answering,
    postgresql_test_database_url,
    refusing_smtp,
    start_celery_worker,
    start_mail_worker,
    task_log,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis, pytest.mark.postgres]

REDIS_DB = 14  # this module's own Redis database and queue: no other session's worker sees them
NOTIFY_TASK = "support.tasks.case_notify_staff"


@pytest.fixture(scope="module")
def support_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    with start_mail_worker(
        database_url=postgresql_test_database_url(django_db_blocker),
        redis_db=REDIS_DB,
        log_dir=tmp_path_factory.mktemp("support-worker"),
    ) as (worker, inbox):
        yield worker, inbox


@pytest.fixture
def inbox(support_worker, celery_publisher):
    """The worker's SMTP inbox, emptied, with this process publishing to the worker."""
    worker, inbox = support_worker
    inbox.messages.clear()
    celery_publisher(worker.broker_url, queue=worker.queue)
    return inbox


def test_staff_get_an_email_for_a_new_case_and_for_the_customers_comment(
    company, ana, make_staff, inbox
):
    make_staff("marta", email="marta@sol.example")

    case = services.case_open(
        company=company, contact=ana, subject="Sin luz", description="Desde ayer."
    )
    opened = wait_for(lambda: inbox.messages and inbox.messages[0])
    comment = services.case_comment_add(case=case, body="¿Hay novedades?", author_contact=ana)
    commented = wait_for(lambda: len(inbox.messages) == 2 and inbox.messages[1])

    assert opened["To"] == commented["To"] == "marta@sol.example"
    assert case.reference in opened["Subject"] and "Sin luz" in opened["Subject"]
    assert "¿Hay novedades?" in commented.get_payload(decode=True).decode()
    assert wait_for(lambda: Case.objects.get(pk=case.pk).staff_notified_at)
    assert wait_for(lambda: CaseComment.objects.get(pk=comment.pk).staff_notified_at)


def test_a_notice_lost_with_the_broker_goes_out_once_through_the_sweep(
    company, ana, make_staff, inbox, support_worker, celery_publisher
):
    make_staff("marta", email="marta@sol.example")
    worker, _ = support_worker
    celery_publisher(f"redis://127.0.0.1:{free_port()}/0")  # down: nothing listens there
    case = services.case_open(
        company=company, contact=ana, subject="Sin agua", description="Desde hoy."
    )
    assert Case.objects.get(pk=case.pk).staff_notified_at is None  # its task was lost
    Case.objects.filter(pk=case.pk).update(created_at=timezone.now() - timedelta(minutes=20))

    celery_publisher(worker.broker_url, queue=worker.queue)  # the broker is back
    assert tasks.case_staff_notices_resend() == 1

    message = wait_for(lambda: inbox.messages and inbox.messages[0])
    assert message["To"] == "marta@sol.example" and case.reference in message["Subject"]
    assert wait_for(lambda: Case.objects.get(pk=case.pk).staff_notified_at)
    assert tasks.case_staff_notices_resend() == 0
    assert len(inbox.messages) == 1


def test_a_worker_whose_database_stops_answering_mid_notice_retries_and_tells_staff_once(
    company, ana, make_staff, celery_publisher, django_db_blocker, tmp_path
):
    """The worker's session goes silent in the middle of the notice's first statement (a
    failover, a partition): its wait is bounded, the task fails on the database and is retried
    like a mail server that is down, on a new connection, instead of waiting for the 15-minute
    sweep."""
    make_staff("marta", email="marta@sol.example")

    worker, inbox = mail_through_a_database_that_stops_answering(
        database_url=postgresql_test_database_url(django_db_blocker),
        redis_db=REDIS_DB,
        log_dir=tmp_path,
        publish_to=celery_publisher,
        create=lambda: services.case_open(
            company=company, contact=ana, subject="Sin gas", description="Desde hoy."
        ),
        sent=lambda case: Case.objects.get(pk=case.pk).staff_notified_at,
    )

    (message,) = inbox.messages
    assert message["To"] == "marta@sol.example" and "Sin gas" in message["Subject"]
    assert b"OperationalError" in worker.log.read_bytes()


def test_a_worker_tries_a_notice_refused_for_good_once_and_the_sweep_leaves_it(
    company, ana, make_staff, celery_publisher, django_db_blocker, tmp_path
):
    """550 no such mailbox: retrying cannot help. Retried as an SMTPException, it took six
    SMTP sessions per sweep, and the sweep found it again every 15 minutes all day."""
    make_staff("marta", email="gone@sol.example")
    with (
        refusing_smtp("550 5.1.1 No such user") as (host, port, server),
        start_celery_worker(
            database_url=postgresql_test_database_url(django_db_blocker),
            redis_db=REDIS_DB,
            log_dir=tmp_path,
            env={
                "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
                "EMAIL_HOST": host,
                "EMAIL_PORT": str(port),
            },
        ) as worker,
    ):
        celery_publisher(worker.broker_url, queue=worker.queue)
        since = worker.log.stat().st_size
        case = services.case_open(
            company=company, contact=ana, subject="Sin luz", description="Desde ayer."
        )
        assert wait_for(lambda: Case.objects.get(pk=case.pk).staff_notified_at, timeout=30)
        # The run has ended: a retry it asked for would be in the log by now.
        wait_for(lambda: "succeeded" in task_log(worker, NOTIFY_TASK, since), timeout=30)
        attempts = server.rcpt_attempts

    assert task_log(worker, NOTIFY_TASK, since) == ["received", "succeeded"]

    assert attempts == 1
    assert b"refused for good (SMTP recipient refused 550)" in worker.log.read_bytes()
    later = timezone.now() + timedelta(minutes=20)
    assert selectors.case_staff_notices_pending(now=later) == []


def test_a_public_reply_reaches_the_customers_mailbox_once_through_the_worker(
    company, ana, make_staff, inbox, support_worker
):
    """The reply's message is published after the commit, claimed and sent by the worker,
    and recorded sent; staff emails about the case go to staff only."""
    from support.models import CaseMessage

    worker, _ = support_worker
    since = worker.log.stat().st_size
    lucia = make_staff("lucia", first_name="Lucía")  # no email: no staff notice in the inbox
    case = services.case_open(
        company=company, contact=ana, subject="Sin cobertura", description="Desde ayer."
    )
    services.case_start(case=case)
    services.case_comment_add(case=case, body="Revisar la antena.", author_user=lucia, public=False)
    comment = services.case_comment_add(case=case, body="Mañana va un técnico.", author_user=lucia)

    message = wait_for(lambda: inbox.messages and inbox.messages[0])
    sent = wait_for(
        lambda: CaseMessage.objects.filter(
            pk=comment.customer_message.pk, status=CaseMessage.Status.SENT
        ).first()
    )
    assert message["To"] == ana.email and case.reference in message["Subject"]
    body = message.get_payload(decode=True).decode()
    assert "Mañana va un técnico." in body and "Desde ayer." in body
    assert "Revisar la antena." not in body
    assert sent.attempts == 1 and sent.masked_destination == "a***@example.com"
    assert wait_for(lambda: "succeeded" in task_log(worker, "support.case_message_send", since))
    assert task_log(worker, "support.case_message_send", since) == ["received", "succeeded"]
    assert len(inbox.messages) == 1
