"""The smaller holes of issue #42 (docs/threats/smaller-holes.md): each test here failed on the
code before its fix. Answers the issue describes as HTTP answers are checked over real HTTP,
against gunicorn (tests/servers.py)."""

import json
import os
import re
import socket
import time
from datetime import timedelta
from urllib.parse import urlsplit

import httpx
import pytest
from django.core import mail

from config import deployment
from config.deployment import InsecureSettings
from core.durable import keeping_evidence
from core.errors import PermissionRefused, ValidationFailed
from core.identity import identify_contact
from core.models import Conversation, GatewayCredential, SecurityEvent, VerificationChallenge
from core.services import gateway_credential_issue, gateway_credential_revoke
from core.verification import challenge_issue, challenge_verify
from integration.models import IntegrationCredential
from integration.services import integration_credential_issue

pytestmark = pytest.mark.django_db(transaction=True)

METRICS_TOKEN = "scrape-token-for-the-small-holes"


def json_error(response: httpx.Response) -> dict:
    """The canonical error body of an answer, after checking that it is one."""
    assert response.headers["content-type"].startswith("application/json"), response.text[:300]
    body = response.json()
    assert {"error_type", "code", "user_message"} <= body.keys()
    return body


# Deep JSON on /api/v1 ------------------------------------------------------------------------


def test_json_nested_beyond_the_parser_is_malformed_on_the_integration_api_as_on_the_tool_api(
    gunicorn_server, company, ana, token
):
    server = gunicorn_server(workers=1)
    _, api_token = integration_credential_issue(
        company=company, name="erp", scope=IntegrationCredential.Scope.READ_WRITE
    )
    json_type = {"Content-Type": "application/json"}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        for index, body in enumerate([b"[" * 100_000, b'{"a":' * 100_000]):
            integration = http.post(
                "/api/v1/cases",
                content=body,
                headers={
                    **json_type,
                    "Authorization": f"Bearer {api_token}",
                    "Idempotency-Key": f"deep-{index}",
                },
            )
            tools = http.post(
                "/api/tools/list_services",
                content=body,
                headers={
                    **json_type,
                    "Authorization": f"Bearer {token}",
                    "X-Conversation-Id": "c1",
                },
            )
            assert (integration.status_code, tools.status_code) == (400, 400)
            assert json_error(integration)["code"] == json_error(tools)["code"] == "malformed_json"
    assert "RecursionError" not in server.log()


# Revocation within 1 s ----------------------------------------------------------------------

REDIS_URL = "redis://127.0.0.1:6379/15"
# The set-ups docs/operations.md and docs/scaling.md describe for gunicorn: the default one
# (production settings, tasks through the Celery broker's Redis, no GARANTE_REDIS_URL), and one
# with no Redis to share (tasks run in process, as in the demo; here with two workers).
SET_UPS = {
    "the default set-up": {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "CELERY_BROKER_URL": REDIS_URL,
        "CELERY_TASK_ALWAYS_EAGER": "0",
        "GARANTE_REDIS_URL": "",
    },
    "no Redis to share": {"GARANTE_REDIS_URL": ""},
}


@pytest.mark.parametrize("set_up", SET_UPS)
def test_a_revoked_gateway_token_is_refused_by_every_worker_within_a_second(
    gunicorn_server, company, settings, set_up
):
    """Bearers of a revoked token were still served for up to 5 s by the processes that had
    it cached, unless GARANTE_REDIS_URL was set. The revocation is made by another process
    (this one: staff's admin runs in one process of many)."""
    if set_up == "the default set-up":
        if not settings.REDIS_AVAILABLE:
            pytest.skip("needs Redis")
        # This process is of the same set-up: its commit is told over the broker's Redis.
        settings.CELERY_TASK_ALWAYS_EAGER, settings.CELERY_BROKER_URL = False, REDIS_URL
    assert not os.environ.get("GARANTE_PROCESS_CACHE_SECONDS")  # the default lifetime
    credential, token = gateway_credential_issue(company=company, name="gateway")
    server = gunicorn_server(workers=2, threads=2, env=SET_UPS[set_up])

    def call() -> int:
        # A connection of its own each time, so the kernel spreads them over both workers.
        return httpx.post(
            f"{server.url}/api/tools/list_services",
            json={},
            headers={"Authorization": f"Bearer {token}", "X-Conversation-Id": "revoked"},
            timeout=10,
        ).status_code

    assert [call() for _ in range(20)] == [200] * 20  # every worker has the token cached
    gateway_credential_revoke(credential=GatewayCredential.objects.get(pk=credential.pk))
    revoked_at = time.monotonic()
    answers = []  # (seconds from the revocation to the request, its status)
    # Calls for a while past the bound (the old one was 5 s), however slow the machine.
    while (sent := time.monotonic() - revoked_at) < 6 or len(answers) < 30:
        answers.append((round(sent, 3), call()))

    late = [(sent, status) for sent, status in answers if sent >= 1.0]
    assert len(late) >= 20 and {status for _, status in late} == {401}, answers
    assert "Traceback" not in server.log()


# POST /metrics -------------------------------------------------------------------------------


def test_a_post_to_metrics_with_the_right_token_is_405_not_a_csrf_page(gunicorn_server):
    server = gunicorn_server(workers=1, env={"GARANTE_METRICS_TOKEN": METRICS_TOKEN})
    bearer = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    posted = httpx.post(f"{server.url}/metrics", headers=bearer, timeout=30)
    assert posted.status_code == 405
    assert posted.headers["Allow"] == "GET, HEAD"
    assert "csrf" not in posted.text.lower()
    assert httpx.get(f"{server.url}/metrics", headers=bearer, timeout=30).status_code == 200


# Oversized headers ---------------------------------------------------------------------------


def raw_exchange(url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `request` as is (httpx would refuse to build some of them); the answer's status,
    headers and body."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines)}
    return int(status_line.split()[1]), headers, body


REFUSED_BY_GUNICORN = [
    (
        b"GET /api/ping HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "
        + b"x" * 10_000
        + b"\r\nConnection: close\r\n\r\n",
        431,
        "request_headers_too_large",
    ),
    (
        b"GET /" + b"a" * 5_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        414,
        "request_line_too_long",
    ),
    (b"NOT A REQUEST\r\n\r\n", 400, "bad_request"),
]


def test_what_gunicorn_refuses_before_django_is_answered_in_json(gunicorn_server):
    """A 10 kB header (past limit_request_field_size), a 5 kB request line and a malformed
    request: each gets the APIs' JSON error with gunicorn's status, not its HTML page."""
    server = gunicorn_server(workers=1)
    for request_bytes, status, code in REFUSED_BY_GUNICORN:
        got, headers, body = raw_exchange(server.url, request_bytes)
        assert got == status
        assert headers["content-type"] == "application/json"
        answer = json.loads(body)
        assert answer["error_type"] == "VALIDATION" and answer["code"] == code
        assert answer["user_message"] and "<" not in answer["user_message"]
        assert int(headers["content-length"]) == len(body)


# Secret keys ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [
        "changeme" * 7,
        "0123456789" * 5,
        "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMN",
        "Tr0ub4dor&3" * 5,
        "abcde" * 10,
        "zyxwvutsrqponmlkjihgfedcba" * 2,
        "s3cr3t-" + "2468" * 12,
    ],
)
def test_a_patterned_secret_key_stops_the_process_at_start(key):
    assert len(key) >= deployment.SECRET_KEY_MIN_LENGTH
    assert len(set(key)) >= deployment.SECRET_KEY_MIN_UNIQUE_CHARACTERS
    with pytest.raises(
        InsecureSettings, match=r"^DJANGO_SECRET_KEY is patterned or low in entropy"
    ):
        deployment.secret_key({"DJANGO_SECRET_KEY": key}, debug=False)


@pytest.mark.parametrize(
    "make",
    [
        lambda: __import__("secrets").token_urlsafe(50),
        lambda: __import__("secrets").token_hex(32),
        lambda: __import__(
            "django.core.management.utils"
        ).core.management.utils.get_random_secret_key(),
    ],
    ids=["token_urlsafe(50)", "token_hex(32)", "django's get_random_secret_key"],
)
def test_random_keys_made_the_usual_ways_are_taken(make):
    for _ in range(200):
        key = make()
        assert deployment.secret_key({"DJANGO_SECRET_KEY": key}, debug=False) == key


# A daily budget of wrong codes per contact -------------------------------------------------


def identified(contact, external_id: str) -> Conversation:
    conversation = Conversation.objects.create(company=contact.company, external_id=external_id)
    identify_contact(conversation=conversation, kind="document", value=contact.document_number)
    conversation.refresh_from_db()
    return conversation


def guess(conversation, contact, code: str) -> str:
    """A verify_code as a tool call makes it (its unit of work rolled back by an error, its
    evidence kept: core.durable): the error's code, or "verified"."""
    try:
        keeping_evidence(
            lambda: challenge_verify(conversation=conversation, contact=contact, code=code)
        )
    except (ValidationFailed, PermissionRefused) as error:
        return error.code
    return "verified"


def sent_code(sms_outbox) -> str:
    return re.search(r"\b(\d{6})\b", sms_outbox[-1].body).group(1)


def wrong(code: str, n: int = 1) -> str:
    return f"{(int(code) + n) % 1_000_000:06d}"


def test_four_wrong_guesses_a_code_spend_the_contacts_daily_budget_and_staff_are_told(
    ana, make_staff, sms_outbox, django_user_model
):
    """Four wrong guesses a code, then a new code, never locked one: twenty guesses an hour,
    every hour. Ten wrong guesses in 24 hours, however spread over codes, now end it."""
    budget = 10  # in 24 hours: settings.GARANTE_VERIFICATION_WRONG_CODES_PER_CONTACT
    make_staff("recepcion", email="recepcion@example.com")
    make_staff("gerencia", role="admin", email="gerencia@example.com")
    answers = []
    for n in range(5):  # five codes, the hourly send limit
        conversation = identified(ana, f"guesser-{n}")
        try:
            challenge_issue(contact=ana, channel="sms", conversation=conversation)
        except PermissionRefused as refused:
            answers.append(refused.code)
            retry_after = refused.extras["retry_after_seconds"]
            break
        code = sent_code(sms_outbox)
        answers += [guess(conversation, ana, wrong(code, k)) for k in range(1, 5)]
    else:
        pytest.fail(f"every code was sent: {answers}")

    # Guesses past the budget's last (at a locked code), then the next code asked for: refused.
    assert answers[:budget] == ["wrong_code"] * (budget - 1) + ["verification_locked"]
    assert set(answers[budget:]) == {"verification_locked"}
    assert len(sms_outbox) == 3  # the third code took the budget's last two guesses
    assert 23 * 3600 < retry_after <= 24 * 3600 + 1
    wrong_guesses = sum(
        VerificationChallenge.objects.filter(contact=ana).values_list("attempts", flat=True)
    )
    assert wrong_guesses == budget
    events = SecurityEvent.objects.filter(kind=SecurityEvent.Kind.WRONG_CODES_BUDGET_SPENT)
    assert [(e.contact_id, e.detail["wrong_codes"]) for e in events] == [(ana.pk, budget)]
    [notice] = [m for m in mail.outbox if str(ana) in m.subject]  # in the company's Spanish
    assert notice.subject == (
        "Alerta de seguridad: demasiados códigos de verificación erróneos para Ana García"
    )
    assert sorted(notice.bcc) == ["gerencia@example.com", "recepcion@example.com"]
    assert "10 códigos de verificación erróneos en 24 horas" in notice.body
    assert events[0].staff_notified_at is not None

    # Still refused from another conversation; staff, having checked who asks, may send one.
    with pytest.raises(PermissionRefused) as later:
        challenge_issue(contact=ana, channel="sms", conversation=identified(ana, "later"))
    assert later.value.code == "verification_locked"
    staff_user = django_user_model.objects.get(username="recepcion")
    by_staff = challenge_issue(
        contact=ana, channel="email", conversation=identified(ana, "desk"), issued_by=staff_user
    )
    assert by_staff.status == VerificationChallenge.Status.ACTIVE
    assert SecurityEvent.objects.filter(kind=events[0].kind).count() == 1  # told once


def test_a_code_still_active_elsewhere_takes_no_guess_once_the_budget_is_spent(
    ana, sms_outbox, settings
):
    """A guesser holding codes in several conversations cannot spend the budget in one and
    go on guessing in the others: those take no guess, the right code included."""
    settings.GARANTE_VERIFICATION_WRONG_CODES_PER_CONTACT = (4, timedelta(hours=24))
    waiting = identified(ana, "waiting")
    challenge_issue(contact=ana, channel="sms", conversation=waiting)
    waiting_code = sent_code(sms_outbox)
    spending = identified(ana, "spending")
    challenge_issue(contact=ana, channel="sms", conversation=spending)
    spending_code = sent_code(sms_outbox)

    answers = [guess(spending, ana, wrong(spending_code, k)) for k in range(1, 5)]

    assert answers == ["wrong_code"] * 3 + ["verification_locked"]
    assert guess(waiting, ana, waiting_code) == "verification_locked"
    assert set(VerificationChallenge.objects.values_list("status", flat=True)) == {"locked"}
