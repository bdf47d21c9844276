"""Email from the cluster's processes, started with the environment the cluster gives them:
a verification code requested through nginx leaves by the file backend `make cluster` uses,
or reaches a local SMTP server, and is marked sent; with the SMTP server down while it is sent,
its delivery says so (retrying, with the refusal) and it leaves once, when the server is back."""

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from email import message_from_bytes

from aiosmtpd.controller import Controller

from deploy.processes import stop_started
from tests.cluster.conftest import tool
from tests.factories import BRUNO_EMAIL
from tests.servers import Inbox, free_port, wait_for

# Bruno: Ana's codes are counted by other tests (five a contact an hour).


def code_requested(cluster) -> int:
    """A code for Bruno by email, asked for through nginx; the challenge's id."""
    conversation = f"conv-{uuid.uuid4().hex[:10]}"
    for name, body in [
        ("identify_contact", {"email": BRUNO_EMAIL}),
        ("request_verification_code", {"identifier": BRUNO_EMAIL, "channel": "email"}),
    ]:
        response = tool(
            cluster.url,
            name,
            body,
            token=cluster.token,
            conversation=conversation,
            key=uuid.uuid4().hex,
        )
        assert response.status_code == 200, response.text
    assert response.json()["sent"] is True
    ((challenge,),) = cluster.sql(
        "SELECT c.id FROM core_verificationchallenge c JOIN core_conversation v"
        " ON v.id = c.conversation_id WHERE v.external_id = %s",
        (conversation,),
    )
    return challenge


def delivery(cluster, challenge: int) -> tuple[str, int, str, str]:
    (row,) = cluster.sql(
        "SELECT delivery_status, delivery_attempts, delivery_error, provider_message_id"
        " FROM core_verificationchallenge WHERE id = %s",
        (challenge,),
    )
    return row


@contextmanager
def workers_mailing(cluster, **mail: str) -> Iterator[None]:
    """The cluster's two workers, started again with `mail` besides their environment; as the
    cluster starts them afterwards."""
    try:
        for n in (1, 2):
            stop_started(cluster.process(f"worker{n}"))
            cluster.start_worker(n, env=mail)
        yield
    finally:
        for n in (1, 2):
            cluster.restart(f"worker{n}")


def test_an_email_code_leaves_by_the_clusters_own_backend_and_is_marked_sent(cluster):
    mail = cluster.directory / "mail"
    before = set(mail.glob("*")) if mail.exists() else set()
    challenge = code_requested(cluster)
    wait_for(lambda: delivery(cluster, challenge)[0] == "sent", timeout=60)
    status, attempts, error, message_id = delivery(cluster, challenge)
    assert (status, attempts, error) == ("sent", 1, "")
    written = [message_from_bytes(path.read_bytes()) for path in set(mail.glob("*")) - before]
    assert [(m["To"], m["Message-ID"]) for m in written] == [(BRUNO_EMAIL, message_id)]


def test_an_email_code_reaches_an_smtp_server_and_is_marked_sent(cluster):
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        smtp = {
            "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "EMAIL_HOST": controller.hostname,
            "EMAIL_PORT": str(controller.port),
        }
        with workers_mailing(cluster, **smtp):
            challenge = code_requested(cluster)
            wait_for(lambda: delivery(cluster, challenge)[0] == "sent", timeout=60)
    finally:
        controller.stop()
    status, attempts, _error, message_id = delivery(cluster, challenge)
    assert (status, attempts) == ("sent", 1)
    assert [(m["To"], m["Message-ID"]) for m in inbox.messages] == [(BRUNO_EMAIL, message_id)]


def test_a_code_sent_while_the_smtp_server_is_down_leaves_once_when_it_is_back(cluster):
    port = free_port()  # nothing listens there yet
    smtp = {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(port),
        # The retries' first waits: up to 1, 2, 4 s (Celery's backoff, drawn at random).
        "GARANTE_VERIFICATION_RETRY_BACKOFF_SECONDS": "1",
    }
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    with workers_mailing(cluster, **smtp):
        challenge = code_requested(cluster)
        # Staff see why it has not left yet, and that it will be tried again.
        wait_for(lambda: delivery(cluster, challenge)[0] == "retrying", timeout=60)
        status, _attempts, error, _ = delivery(cluster, challenge)
        assert "refused" in error.lower(), error
        controller.start()
        try:
            wait_for(lambda: delivery(cluster, challenge)[0] == "sent", timeout=60)
        finally:
            controller.stop()
    status, attempts, error, message_id = delivery(cluster, challenge)
    assert status == "sent" and attempts >= 2 and error == ""
    assert [(m["To"], m["Message-ID"]) for m in inbox.messages] == [(BRUNO_EMAIL, message_id)]
