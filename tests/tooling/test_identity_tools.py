"""The identity tools over real HTTP (REST mirror): identify, request a code, verify it."""

import re
import socket
import time
import uuid

import pytest

from config.celery import app as celery_app
from core.models import Conversation, SecurityEvent, VerificationChallenge
from tests.factories import ANA_DOCUMENT, ANA_EMAIL, ANA_PHONE, ANA_PHONE_NATIONAL, BRUNO_DOCUMENT

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def close_client(tool_client):
    """Closing the keep-alive socket lets the live server's thread release its connection."""
    yield
    tool_client.http.close()


def key() -> str:
    return uuid.uuid4().hex


def call(client, name, arguments, **kwargs):
    return client.call(name, arguments, key=kwargs.pop("key", None) or key(), **kwargs)


def identify(client, **arguments):
    return call(client, "identify_contact", arguments)


def code_in(text):
    return re.search(r"\b(\d{6})\b", text).group(1)


def test_identify_answers_only_a_first_name_and_masked_channels(tool_client, ana):
    response = identify(tool_client, document="12.345.678-Z")

    assert response.status_code == 200
    assert response.json() == {
        "identified": True,
        "first_name": "Ana",
        "phone": "teléfono terminado en 22",
        "email": "a***@example.com",
        "verification_channels": ["sms", "email"],
    }
    assert "García" not in response.text and ANA_PHONE_NATIONAL not in response.text


def test_identify_needs_exactly_one_identifier(tool_client, ana):
    response = identify(tool_client, document=ANA_DOCUMENT, email=ANA_EMAIL)

    assert response.status_code == 422
    assert response.json()["code"] == "invalid_arguments"


def test_an_unknown_customer_is_not_found(tool_client, ana):
    response = identify(tool_client, email="nadie@example.com")

    assert response.status_code == 404
    assert response.json()["error_type"] == "NOT_FOUND"


def test_repeated_failures_are_rate_limited_with_a_retry_after(tool_client, company, ana):
    started = time.monotonic()
    for n in range(5):
        assert identify(tool_client, phone=f"60099988{n}").status_code == 404

    response = identify(tool_client, document=ANA_DOCUMENT)

    assert response.status_code == 403
    body = response.json()
    assert (body["error_type"], body["code"]) == ("PERMISSION", "too_many_attempts")
    assert response.headers["Retry-After"] == str(body["retry_after_seconds"])
    # Until the first failure leaves the conversation's window (rounded up to a second).
    window = company.identify_conversation_window_minutes * 60
    assert window - (time.monotonic() - started) <= body["retry_after_seconds"] <= window + 1


def test_identifying_as_someone_else_is_refused_and_recorded(tool_client, company, ana, bruno):
    assert identify(tool_client, document=ANA_DOCUMENT).status_code == 200

    response = identify(tool_client, document=BRUNO_DOCUMENT)

    assert response.status_code == 403
    assert response.json()["code"] == "identity_switch"
    event = SecurityEvent.objects.get(conversation_key=tool_client.conversation_id)
    assert (event.kind, event.contact, event.claimed_contact) == ("identity_switch", ana, bruno)


def test_the_same_identification_replayed_is_the_same_answer(tool_client, ana):
    same = key()
    first = call(tool_client, "identify_contact", {"phone": ANA_PHONE_NATIONAL}, key=same)
    second = call(tool_client, "identify_contact", {"phone": ANA_PHONE_NATIONAL}, key=same)

    assert first.json() == second.json()
    assert second.headers.get("X-Idempotency-Replayed") == "true"


def test_step_up_by_sms_from_request_to_verified(tool_client, ana, sms_outbox):
    identify(tool_client, email=ANA_EMAIL)

    sent = call(
        tool_client, "request_verification_code", {"identifier": ANA_DOCUMENT, "channel": "sms"}
    )
    code = code_in(sms_outbox[0].body)
    verified = call(tool_client, "verify_code", {"identifier": ANA_DOCUMENT, "code": code})

    assert sent.status_code == 200
    assert sent.json() == {
        "sent": True,
        "channel": "sms",
        "sent_to": "teléfono terminado en 22",
        "sent_as": "code",  # a new company's default
        "expires_in_minutes": 10,
    }
    assert code not in sent.text
    assert sms_outbox[0].to == ANA_PHONE
    assert verified.status_code == 200
    assert verified.json() == {"verified": True, "valid_for_minutes": 15}
    conversation = Conversation.objects.get(external_id=tool_client.conversation_id)
    assert conversation.verified_until is not None


def test_a_code_request_needs_an_identified_conversation(tool_client, ana, sms_outbox):
    response = call(
        tool_client, "request_verification_code", {"identifier": ANA_DOCUMENT, "channel": "sms"}
    )

    assert response.status_code == 403
    assert response.json()["code"] == "identification_required"
    assert sms_outbox == []


def test_a_code_cannot_be_sent_for_another_contact(tool_client, ana, bruno, sms_outbox):
    identify(tool_client, document=ANA_DOCUMENT)

    response = call(
        tool_client, "request_verification_code", {"identifier": BRUNO_DOCUMENT, "channel": "sms"}
    )

    assert response.status_code == 403
    assert sms_outbox == []
    assert SecurityEvent.objects.filter(kind="identity_switch").count() == 1


def test_brute_force_over_http_is_locked_after_five_attempts(tool_client, ana, sms_outbox):
    identify(tool_client, document=ANA_DOCUMENT)
    call(tool_client, "request_verification_code", {"identifier": ANA_DOCUMENT, "channel": "sms"})
    code = code_in(sms_outbox[0].body)
    guesses = [f"{(int(code) + n) % 1_000_000:06d}" for n in range(1, 6)]

    answers = [
        call(tool_client, "verify_code", {"identifier": ANA_DOCUMENT, "code": g}) for g in guesses
    ]
    final = call(tool_client, "verify_code", {"identifier": ANA_DOCUMENT, "code": code})

    assert [a.status_code for a in answers] == [422, 422, 422, 422, 403]
    assert answers[0].json()["attempts_left"] == 4
    assert final.status_code == 403
    assert final.json()["code"] == "verification_locked"
    assert VerificationChallenge.objects.get().attempts == 5


def test_verify_twice_in_one_turn_is_one_verification(tool_client, ana, sms_outbox):
    identify(tool_client, document=ANA_DOCUMENT)
    call(tool_client, "request_verification_code", {"identifier": ANA_DOCUMENT, "channel": "sms"})
    arguments = {"identifier": ANA_DOCUMENT, "code": code_in(sms_outbox[0].body)}
    same = key()

    first = call(tool_client, "verify_code", arguments, key=same)
    second = call(tool_client, "verify_code", arguments, key=same)

    assert first.status_code == second.status_code == 200
    assert second.headers.get("X-Idempotency-Replayed") == "true"


@pytest.fixture
def broker_down():
    """This process publishes for real to a port where no broker listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    conf = celery_app.conf
    saved = (conf.broker_url, conf.task_always_eager)
    celery_app._pool = None
    celery_app.amqp._producer_pool = None
    conf.broker_url, conf.task_always_eager = f"redis://127.0.0.1:{port}/0", False
    yield
    celery_app._pool = None
    celery_app.amqp._producer_pool = None
    conf.broker_url, conf.task_always_eager = saved


@pytest.mark.postgres(
    reason="a broker outage needs a broker: the SQLite demo runs its tasks in process "
    "(CELERY_TASK_ALWAYS_EAGER), and publishes a code's task when the call commits"
)
def test_an_unreachable_broker_answers_system_and_a_retry_can_succeed(
    tool_client, ana, sms_outbox, broker_down
):
    identify(tool_client, document=ANA_DOCUMENT)
    arguments = {"identifier": ANA_DOCUMENT, "channel": "sms"}
    same = key()

    response = call(tool_client, "request_verification_code", arguments, key=same)

    assert response.status_code == 503
    assert response.json()["error_type"] == "SYSTEM"
    challenge = VerificationChallenge.objects.get()
    assert challenge.delivery_status == VerificationChallenge.Delivery.NOT_SENT
    assert sms_outbox == []
    # Only successes are stored: the same key runs again (here still against no broker).
    again = call(tool_client, "request_verification_code", arguments, key=same)
    assert again.status_code == 503
    assert "X-Idempotency-Replayed" not in again.headers
