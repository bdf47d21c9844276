"""Delivery of verification codes: a real SMTP server, a real HTTP SMS provider, a real broker
and a real Celery worker process."""

import email
import re
import signal
import smtplib
import threading
import time
from datetime import timedelta

import psycopg
import pytest
from aiosmtpd.controller import Controller
from django.conf import settings as django_settings
from django.utils import timezone
from werkzeug import Response

from core.errors import SystemUnavailable
from core.identity import conversation_is_verified
from core.mail import smtp_error_is_transient
from core.models import VerificationChallenge
from core.sms import SmsMessage, SmsPermanentError, SmsTransientError, TwilioBackend
from core.tasks import challenge_deliver
from core.verification import (
    DELIVERY_SETTLE_GRACE,
    challenge_deliveries_settle,
    challenge_issue,
    challenge_verify,
)
from tests.factories import ANA_EMAIL, ANA_PHONE
from tests.row_faults import first_update_refused
from tests.servers import (
    free_port,
    frozen_backend,
    postgresql_test_database_url,
    start_celery_worker,
    start_mail_worker,
    start_smtp,
    task_log,
    wait_for,
)

pytestmark = pytest.mark.django_db(transaction=True)

Delivery = VerificationChallenge.Delivery
TWILIO_PATH = "/2010-04-01/Accounts/AC123/Messages.json"
REDIS_DB = 11  # this test module's own Redis database: other sessions' workers never see it


def code_in(text: str) -> str:
    return re.search(r"\b(\d{6})\b", text).group(1)


@pytest.fixture(scope="module")
def smtp_server():
    with start_smtp() as server:
        yield server


@pytest.fixture
def smtp_inbox(smtp_server, settings):
    host, port, inbox = smtp_server
    inbox.messages.clear()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = host, port
    return inbox


@pytest.fixture
def twilio(httpserver, settings):
    settings.GARANTE_SMS_BACKEND = "twilio"
    settings.GARANTE_TWILIO_API_URL = httpserver.url_for("/")
    settings.GARANTE_TWILIO_ACCOUNT_SID = "AC123"
    settings.GARANTE_TWILIO_AUTH_TOKEN = "secret-token"
    settings.GARANTE_TWILIO_FROM = "+34911000000"
    settings.GARANTE_SMS_TIMEOUT_SECONDS = 1
    return httpserver


def sms_accepted(sid: str = "SM0001"):
    return {"sid": sid, "status": "queued"}


# The SMS provider over real HTTP ----------------------------------------------------------


def test_twilio_gets_a_form_post_with_basic_auth_and_answers_a_message_id(twilio):
    twilio.expect_oneshot_request(TWILIO_PATH, method="POST").respond_with_json(
        sms_accepted("SM42"), status=201
    )

    result = TwilioBackend().send(SmsMessage(to=ANA_PHONE, body="Hola 123456"))

    assert (result.message_id, result.status) == ("SM42", "queued")
    request, _ = twilio.log[0]
    assert request.authorization.username == "AC123"
    assert request.authorization.password == "secret-token"
    assert request.form.to_dict() == {
        "To": ANA_PHONE,
        "Body": "Hola 123456",
        "From": "+34911000000",
    }


def test_a_provider_5xx_or_timeout_is_transient_and_a_4xx_is_permanent(twilio):
    twilio.expect_oneshot_request(TWILIO_PATH).respond_with_data("down", status=503)
    twilio.expect_oneshot_request(TWILIO_PATH).respond_with_json(
        {"code": 21211, "message": "Invalid 'To' Phone Number: Hola 123456"}, status=400
    )
    # The third answer is held until the client has given up on it (its read timed out).
    gave_up = threading.Event()
    twilio.expect_oneshot_request(TWILIO_PATH).respond_with_handler(
        lambda request: gave_up.wait(30) and Response("late")
    )
    message = SmsMessage(to=ANA_PHONE, body="Hola 123456")

    with pytest.raises(SmsTransientError):
        TwilioBackend().send(message)
    with pytest.raises(SmsPermanentError) as permanent:
        TwilioBackend().send(message)
    with pytest.raises(SmsTransientError) as timeout:
        TwilioBackend().send(message)
    gave_up.set()

    assert permanent.value.detail == "HTTP 400 (twilio 21211)"  # the body is never echoed
    assert timeout.value.detail.startswith("timeout")
    # The slow answer is logged by the server when it finally goes out; wait for it here, or
    # it lands in the next test's request log.
    assert wait_for(lambda: len(twilio.log) == 3, timeout=10)


def test_the_task_retries_a_5xx_and_stores_the_providers_message_id(ana, ana_conv, twilio):
    twilio.expect_ordered_request(TWILIO_PATH).respond_with_data("busy", status=502)
    twilio.expect_ordered_request(TWILIO_PATH).respond_with_json(sms_accepted("SM77"), 201)

    challenge_issue(contact=ana, channel="sms", conversation=ana_conv)

    challenge = VerificationChallenge.objects.get()
    assert challenge.delivery_status == Delivery.SENT
    assert (challenge.provider_message_id, challenge.provider_status) == ("SM77", "queued")
    assert challenge.delivery_attempts == 2
    assert len(twilio.log) == 2


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_from_the_provider_is_a_permanent_error_never_a_sent_sms(
    ana, ana_conv, twilio, status
):
    """An http:// API URL, or a proxy in front, answers the POST with a redirect: the
    provider never handled it, and the same URL will answer the same."""
    twilio.expect_request(TWILIO_PATH).respond_with_data(
        "", status=status, headers={"Location": "https://api.twilio.com" + TWILIO_PATH}
    )

    challenge_issue(contact=ana, channel="sms", conversation=ana_conv)

    challenge = VerificationChallenge.objects.get()
    assert (challenge.delivery_status, challenge.delivery_attempts) == (Delivery.FAILED, 1)
    assert challenge.delivery_error == f"HTTP {status}: not an answer of the API"
    assert challenge.provider_message_id == ""
    assert len(twilio.log) == 1  # not retried, and the redirect not followed


def test_a_permanent_refusal_is_not_retried(ana, ana_conv, twilio):
    twilio.expect_request(TWILIO_PATH).respond_with_json({"code": 20003}, status=401)

    challenge_issue(contact=ana, channel="sms", conversation=ana_conv)

    challenge = VerificationChallenge.objects.get()
    assert (challenge.delivery_status, challenge.delivery_attempts) == (Delivery.FAILED, 1)
    assert challenge.delivery_error == "HTTP 401 (twilio 20003)"
    assert len(twilio.log) == 1


def test_retries_are_bounded(ana, ana_conv, twilio, monkeypatch):
    monkeypatch.setattr(challenge_deliver, "max_retries", 2)
    twilio.expect_request(TWILIO_PATH).respond_with_data("down", status=503)

    challenge_issue(contact=ana, channel="sms", conversation=ana_conv)

    challenge = VerificationChallenge.objects.get()
    assert (challenge.delivery_status, challenge.delivery_attempts) == (Delivery.FAILED, 3)
    assert len(twilio.log) == 3


# Email over real SMTP ---------------------------------------------------------------------


def test_the_code_arrives_by_smtp_and_verifies(ana, ana_conv, smtp_inbox):
    challenge_issue(contact=ana, channel="email", conversation=ana_conv)

    (message,) = smtp_inbox.messages
    assert message["To"] == ANA_EMAIL
    challenge = VerificationChallenge.objects.get()
    assert challenge.provider_message_id == message["Message-ID"]
    challenge_verify(conversation=ana_conv, contact=ana, code=code_in(message.get_payload()))
    ana_conv.refresh_from_db()
    assert conversation_is_verified(ana_conv)


def test_an_smtp_server_that_is_down_ends_in_a_failed_delivery(
    ana, ana_conv, settings, monkeypatch
):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", free_port()
    monkeypatch.setattr(challenge_deliver, "max_retries", 1)

    challenge_issue(contact=ana, channel="email", conversation=ana_conv)

    challenge = VerificationChallenge.objects.get()
    assert (challenge.delivery_status, challenge.delivery_attempts) == (Delivery.FAILED, 2)
    assert challenge.delivery_error == "SMTP ConnectionRefusedError"


class RefusingRecipientsOnce:
    """A mail server refusing every recipient once with the given reply, then accepting."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.refused = 0
        self.messages: list[email.message.Message] = []

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if not self.refused:
            self.refused += 1
            return self.reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.messages.append(email.message_from_bytes(envelope.content))
        return "250 Message accepted"


@pytest.fixture
def refusing_once(settings):
    def start(reply: str) -> RefusingRecipientsOnce:
        handler = RefusingRecipientsOnce(reply)
        controller = Controller(handler, hostname="127.0.0.1", port=free_port())
        controller.start()
        controllers.append(controller)
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = controller.hostname, controller.port
        return handler

    controllers: list[Controller] = []
    yield start
    for controller in controllers:
        controller.stop()


@pytest.mark.parametrize(
    "reply",
    ["451 4.7.1 Greylisted, please try again later", "452 4.2.2 Mailbox full"],
)
def test_a_temporary_refusal_of_the_recipient_is_retried_and_the_code_delivered(
    ana, ana_conv, refusing_once, reply
):
    server = refusing_once(reply)

    challenge_issue(contact=ana, channel="email", conversation=ana_conv)

    challenge = VerificationChallenge.objects.get()
    assert (challenge.delivery_status, challenge.delivery_error) == (Delivery.SENT, "")
    assert challenge.delivery_attempts == 2
    assert server.refused == 1
    assert [message["To"] for message in server.messages] == [ANA_EMAIL]


def test_a_refusal_of_the_recipient_for_good_is_not_retried(ana, ana_conv, refusing_once):
    server = refusing_once("550 5.1.1 No such user")

    challenge_issue(contact=ana, channel="email", conversation=ana_conv)

    challenge = VerificationChallenge.objects.get()
    assert (challenge.delivery_status, challenge.delivery_attempts) == (Delivery.FAILED, 1)
    assert challenge.delivery_error == "SMTP recipient refused 550"
    assert server.messages == []


def _refused(*codes: int) -> smtplib.SMTPRecipientsRefused:
    return smtplib.SMTPRecipientsRefused(
        {f"r{n}@example.com": (code, b"...") for n, code in enumerate(codes)}
    )


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (_refused(451), True),
        (_refused(452, 451), True),
        (_refused(451, 550), False),  # one of them will never take it
        (_refused(550), False),
        (_refused(), False),
        (smtplib.SMTPSenderRefused(451, b"try later", "from@example.com"), True),
        (smtplib.SMTPDataError(554, b"rejected"), False),
        (smtplib.SMTPAuthenticationError(535, b"bad credentials"), False),
        (smtplib.SMTPServerDisconnected("gone"), True),
        (smtplib.SMTPNotSupportedError("no STARTTLS"), False),
        (ConnectionRefusedError(), True),
        (TimeoutError(), True),
    ],
)
def test_an_smtp_error_is_transient_only_when_retrying_may_help(error, transient):
    assert smtp_error_is_transient(error) is transient


# The broker -------------------------------------------------------------------------------


@pytest.fixture
def broker(celery_publisher):
    """Publishing for real (not eager) to the given broker URL, restored afterwards."""
    return celery_publisher


def test_an_unreachable_broker_is_a_system_error_and_the_code_is_never_sent(
    ana, ana_conv, broker, sms_outbox
):
    broker(f"redis://127.0.0.1:{free_port()}/0")

    with pytest.raises(SystemUnavailable) as unavailable:
        challenge_issue(contact=ana, channel="sms", conversation=ana_conv)

    assert unavailable.value.code == "delivery_unavailable"
    challenge = VerificationChallenge.objects.get()
    assert challenge.delivery_status == Delivery.NOT_SENT
    assert challenge.status == VerificationChallenge.Status.REVOKED
    assert sms_outbox == []


@pytest.fixture(scope="module")
def celery_worker(
    django_db_setup, django_db_blocker, smtp_server, make_httpserver, tmp_path_factory
):
    """`celery -A config worker` in its own process, on this module's Redis database and queue,
    against the test database, sending email to `smtp_server` and SMS to the HTTP server."""
    url = postgresql_test_database_url(django_db_blocker)
    host, port, _ = smtp_server
    env = {
        "DJANGO_SECRET_KEY": django_settings.SECRET_KEY,  # to unseal the codes it is given
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": host,
        "EMAIL_PORT": str(port),
        "GARANTE_SMS_BACKEND": "twilio",
        "GARANTE_TWILIO_API_URL": make_httpserver.url_for("/"),
        "GARANTE_TWILIO_ACCOUNT_SID": "AC123",
        "GARANTE_TWILIO_AUTH_TOKEN": "secret-token",
        "GARANTE_TWILIO_FROM": "+34911000000",
        "GARANTE_VERIFICATION_RETRY_BACKOFF_SECONDS": "0.3",
        "GARANTE_LOG_LEVEL": "DEBUG",
    }
    with start_celery_worker(
        database_url=url,
        redis_db=REDIS_DB,
        log_dir=tmp_path_factory.mktemp("worker"),
        env=env,
    ) as worker:
        yield {"queue": worker.queue, "broker_url": worker.broker_url, "log": worker.log}


@pytest.fixture
def worker(celery_worker, broker, settings):
    broker(celery_worker["broker_url"])
    settings.GARANTE_VERIFICATION_QUEUE = celery_worker["queue"]
    return celery_worker


def delivered(challenge_id: int):
    challenge = VerificationChallenge.objects.get(pk=challenge_id)
    return challenge if challenge.delivery_status in (Delivery.SENT, Delivery.FAILED) else None


@pytest.mark.redis
def test_a_worker_delivers_the_code_by_email_through_the_broker(ana, ana_conv, worker, smtp_inbox):
    issued = challenge_issue(contact=ana, channel="email", conversation=ana_conv)

    challenge = wait_for(lambda: delivered(issued.pk))
    assert challenge.delivery_status == Delivery.SENT
    (message,) = smtp_inbox.messages
    assert message["To"] == ANA_EMAIL
    code = code_in(message.get_payload())
    challenge_verify(conversation=ana_conv, contact=ana, code=code)
    assert code not in worker["log"].read_text()


@pytest.mark.redis
def test_a_worker_retries_the_sms_provider_after_a_5xx_and_sends_once(
    ana, ana_conv, worker, httpserver
):
    httpserver.expect_ordered_request(TWILIO_PATH).respond_with_data("down", status=503)
    httpserver.expect_ordered_request(TWILIO_PATH).respond_with_json(sms_accepted("SM99"), 201)

    since = worker["log"].stat().st_size
    issued = challenge_issue(contact=ana, channel="sms", conversation=ana_conv)

    challenge = wait_for(lambda: delivered(issued.pk))
    assert challenge.delivery_status == Delivery.SENT
    assert (challenge.provider_message_id, challenge.delivery_attempts) == ("SM99", 2)
    # The run that sent it has ended: a duplicate delivery would be a further run, or a retry
    # that run asked for, and either is logged by now.
    wait_for(lambda: "succeeded" in task_log(worker["log"], "core.challenge_deliver", since))
    assert task_log(worker["log"], "core.challenge_deliver", since) == [
        "received",
        "retry",
        "received",
        "succeeded",
    ]
    assert len(httpserver.log) == 2
    request, _ = httpserver.log[-1]
    assert request.form["To"] == ANA_PHONE
    assert code_in(request.form["Body"]) not in worker["log"].read_text()


# Deliveries no worker will finish -----------------------------------------------------------


def challenge_with(contact, delivery: str, *, expired_ago: timedelta) -> VerificationChallenge:
    return VerificationChallenge.objects.create(
        company=contact.company,
        contact=contact,
        channel="sms",
        destination=ANA_PHONE,
        masked_destination="teléfono terminado en 22",
        nonce="n",
        code_hmac="h",
        expires_at=timezone.now() - expired_ago,
        delivery_status=delivery,
    )


def test_deliveries_no_worker_will_finish_are_settled_once_their_code_expired(ana):
    past = DELIVERY_SETTLE_GRACE + timedelta(minutes=1)
    lost = challenge_with(ana, Delivery.QUEUED, expired_ago=past)
    lost_retry = challenge_with(ana, Delivery.RETRYING, expired_ago=past)
    stopped = challenge_with(ana, Delivery.SENDING, expired_ago=past)
    sent = challenge_with(ana, Delivery.SENT, expired_ago=past)
    failed = challenge_with(ana, Delivery.FAILED, expired_ago=past)
    # Still within the code's life or the grace after it: a worker may yet finish them.
    in_grace = challenge_with(ana, Delivery.SENDING, expired_ago=timedelta(minutes=1))
    live = challenge_with(ana, Delivery.QUEUED, expired_ago=-timedelta(minutes=5))

    assert challenge_deliveries_settle() == 3

    def delivery(challenge):
        challenge.refresh_from_db()
        return challenge.delivery_status, challenge.delivery_error

    assert delivery(lost) == (Delivery.NOT_SENT, "expired before delivery")
    assert delivery(lost_retry) == (Delivery.NOT_SENT, "expired before delivery")
    assert delivery(stopped)[0] == Delivery.UNKNOWN
    assert "stopped while sending" in delivery(stopped)[1]
    assert [delivery(c)[0] for c in (sent, failed, in_grace, live)] == [
        Delivery.SENT,
        Delivery.FAILED,
        Delivery.SENDING,
        Delivery.QUEUED,
    ]
    assert challenge_deliveries_settle() == 0


def test_settling_is_on_the_beat_schedule_of_the_core_app():
    from config.celery import app

    app.loader.import_default_modules()
    app.finalize()
    schedule = app.conf.beat_schedule
    assert any(e["task"] == "core.challenge_deliveries_settle" for e in schedule.values())


@pytest.mark.redis
def test_a_worker_killed_while_sending_leaves_an_unknown_delivery_once_the_code_expired(
    ana, ana_conv, broker, settings, django_db_blocker, tmp_path
):
    url = postgresql_test_database_url(django_db_blocker)
    with start_mail_worker(
        database_url=url,
        redis_db=REDIS_DB,
        log_dir=tmp_path,
        env={"DJANGO_SECRET_KEY": django_settings.SECRET_KEY},  # to unseal the codes
        smtp_delay=30,
    ) as (doomed, inbox):
        broker(doomed.broker_url)
        settings.GARANTE_VERIFICATION_QUEUE = doomed.queue
        issued = challenge_issue(contact=ana, channel="email", conversation=ana_conv)
        wait_for(
            lambda: VerificationChallenge.objects.filter(
                pk=issued.pk, delivery_status=Delivery.SENDING
            ).exists()
        )
        doomed.process.send_signal(signal.SIGKILL)  # in the middle of the SMTP conversation
        doomed.process.wait(timeout=10)

        challenge = VerificationChallenge.objects.get(pk=issued.pk)
        assert challenge.delivery_status == Delivery.SENDING  # nothing else will change it
        assert challenge_deliveries_settle() == 0  # the code is still alive
        after_expiry = challenge.expires_at + DELIVERY_SETTLE_GRACE + timedelta(seconds=1)

        assert challenge_deliveries_settle(now=after_expiry) == 1
        challenge.refresh_from_db()
        assert challenge.delivery_status == Delivery.UNKNOWN
        assert challenge.delivery_attempts == 1
        assert inbox.messages == []


@pytest.mark.redis
def test_a_worker_whose_database_stops_answering_mid_task_delivers_the_code_on_a_new_connection(
    ana, ana_conv, broker, settings, django_db_blocker, tmp_path
):
    """A failover or a partition leaves a worker's connection open on a server that will never
    answer it: here its server process is stopped in the middle of the task's first statement
    (caught waiting for a table lock the test holds), while new connections are served. The
    worker's wait is bounded (config.celery), so the task fails within seconds and its retry
    delivers the code on a new connection; before, the worker waited for ever and every code
    after it stayed queued."""
    name = f"garante-worker-{time.monotonic_ns()}"
    url = postgresql_test_database_url(django_db_blocker)
    holder = psycopg.connect(url, autocommit=False)
    with start_mail_worker(
        database_url=f"{url}?application_name={name}",
        redis_db=REDIS_DB,
        log_dir=tmp_path,
        env={
            "DJANGO_SECRET_KEY": django_settings.SECRET_KEY,
            "GARANTE_DB_ANSWER_SECONDS": "2",
            "GARANTE_VERIFICATION_RETRY_BACKOFF_SECONDS": "0.3",
        },
    ) as (worker, inbox):
        broker(worker.broker_url)
        settings.GARANTE_VERIFICATION_QUEUE = worker.queue
        try:
            # The code is issued while the worker is stopped, so that its task starts after
            # the table is locked.
            worker.process.send_signal(signal.SIGSTOP)
            try:
                issued = challenge_issue(contact=ana, channel="email", conversation=ana_conv)
                holder.execute("LOCK TABLE core_verificationchallenge IN SHARE MODE")
            finally:
                worker.process.send_signal(signal.SIGCONT)
            with frozen_backend(name, release=holder.rollback):
                challenge = wait_for(lambda: delivered(issued.pk), timeout=40)
        finally:
            holder.close()

        assert challenge.delivery_status == Delivery.SENT
        assert challenge.delivery_attempts == 1  # the stopped try never claimed it
        (message,) = inbox.messages
        challenge_verify(conversation=ana_conv, contact=ana, code=code_in(message.get_payload()))
        # Celery's autoretry, with its backoff, not a countdown of ours.
        assert re.search(rb"retry: Retry in \d+s: OperationalError\(", worker.log.read_bytes())


@pytest.mark.django_db(transaction=True)
@pytest.mark.postgres
def test_a_code_sent_while_its_record_fails_is_recorded_by_the_retry_never_sent_again(
    ana, ana_conv, smtp_inbox, caplog
):
    """The message left; the UPDATE recording it failed (here a trigger refuses it once, as a
    database that stopped answering would). The task's retry records it, and sends nothing."""
    with first_update_refused(VerificationChallenge, "NEW.delivery_status = 'sent'"):
        issued = challenge_issue(contact=ana, channel="email", conversation=ana_conv)

    (message,) = smtp_inbox.messages
    challenge = VerificationChallenge.objects.get(pk=issued.pk)
    assert (challenge.delivery_status, challenge.delivery_attempts) == (Delivery.SENT, 1)
    assert challenge.provider_message_id == message["Message-ID"]
    assert f"verification code {issued.pk}: sent, recording it is retried" in caplog.text
