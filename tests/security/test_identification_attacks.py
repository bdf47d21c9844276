"""Attacks on identification over real HTTP: the REST mirror of a live server on the test
database (PostgreSQL in CI), and the one-command demo (SQLite under gunicorn).

Enumeration through identify_contact, a lockout of every customer through the limits shared
by all conversations, codes that must go only to the customers' own channels within their
budgets, and codes and alarms that must void what they void. docs/threats/identification.md
says, per attack, what the attacker learns, what it costs them and the business, and names
the test here that holds it.

The lockout runs the issue's sizes (1,000 random identifiers from 200 conversations while 50
customers identify); GARANTE_ATTACK_SCALE multiplies the attackers' conversations for a
longer soak (the customers stay 50, within the default budget of codes).
"""

import itertools
import os
import re
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta

import httpx
import pytest
from django.core import mail
from django.utils import timezone

from core.models import Company, Conversation, SecurityEvent, VerificationChallenge
from core.services import contact_create, gateway_credential_issue
from tests.factories import ANA_DOCUMENT, ANA_EMAIL, ANA_PHONE, ANA_PHONE_NATIONAL, BRUNO_DOCUMENT

pytestmark = pytest.mark.django_db(transaction=True)

SCALE = float(os.environ.get("GARANTE_ATTACK_SCALE", "1"))
ATTACK_CONVERSATIONS = max(1, round(200 * SCALE))
TRIES_PER_CONVERSATION = 5  # the conversation's own limit (default): every try is answered
CUSTOMERS = 50
PARALLEL = 16

Status = VerificationChallenge.Status
Purpose = VerificationChallenge.Purpose

_nobodys = itertools.count(699_000_001)


def nobodys_phone() -> str:
    """A valid Spanish mobile number no customer has."""
    return str(next(_nobodys))


def customer_phone(n: int) -> str:
    return f"6221{n:05d}"


def new_conversation() -> str:
    return f"conv-{uuid.uuid4().hex[:12]}"


class Gateway:
    """Tool calls over the REST mirror through one gateway credential, as many at once as
    the pool allows, each with a fresh idempotency key."""

    def __init__(self, base_url: str, token: str) -> None:
        self.http = httpx.Client(
            base_url=base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=120,
            limits=httpx.Limits(max_connections=PARALLEL, max_keepalive_connections=PARALLEL),
        )

    def call(self, name: str, arguments: dict, conversation_id: str) -> httpx.Response:
        headers = {"X-Conversation-Id": conversation_id, "Idempotency-Key": uuid.uuid4().hex}
        return self.http.post(f"/api/tools/{name}", json=arguments, headers=headers)

    def identify(self, conversation_id: str, **arguments: str) -> httpx.Response:
        return self.call("identify_contact", arguments, conversation_id)

    def verify(self, conversation_id: str, identifier: str, code: str) -> httpx.Response:
        return self.call("verify_code", {"identifier": identifier, "code": code}, conversation_id)


@pytest.fixture
def gateway(live_server, token):
    client = Gateway(live_server.url, token)
    yield client
    client.http.close()  # frees the live server's keep-alive threads and their connections


def kind_of(response: httpx.Response) -> str:
    """What an identification answered: identified, awaiting_code (verified mode) or the
    error's code."""
    body = response.json()
    if response.status_code == 200 and "identified" in body:
        return "identified" if body["identified"] else "awaiting_code"
    return body.get("code", str(response.status_code))


def code_in(text: str) -> str:
    return re.search(r"\b(\d{6})\b", text).group(1)


def texts_to(outbox: list, phone: str) -> list[str]:
    return [m.body for m in outbox if m.to == f"+34{phone}"]


def wrong(code: str) -> str:
    return f"{(int(code) + 1) % 1_000_000:06d}"


def in_parallel(jobs: list[Callable[[], object]]) -> list:
    with ThreadPoolExecutor(PARALLEL) as pool:
        return list(pool.map(lambda job: job(), jobs))


def limits(company: Company, **fields: int) -> None:
    for name, value in fields.items():
        setattr(company, name, value)
    company.save()  # the process cache of gateway tokens forgets the company (core.signals)


def into_verified_mode(gateway: Gateway, company: Company, failures: int = 3) -> None:
    """Spend the credential's limit on random phones, each from a new conversation."""
    limits(company, identify_failures_per_credential=failures)
    answers = [
        kind_of(gateway.identify(new_conversation(), phone=nobodys_phone()))
        for _ in range(failures)
    ]
    assert answers == ["contact_not_found"] * failures


# --- Enumeration -------------------------------------------------------------------------------


def test_an_enumeration_from_many_conversations_at_once_learns_nothing_past_the_credential_limit(
    gateway, company, sms_outbox
):
    """Random phones from a new conversation each, sixteen at a time: no more than the
    credential's limit are told "not found"; past it, customers' phones and nobody's get one
    answer, byte for byte, and only the customers' own phones receive a code."""
    limits(company, identify_failures_per_credential=20)
    phones = [customer_phone(n) for n in range(10)]
    for n, phone in enumerate(phones):
        contact_create(company=company, first_name=f"Cliente{n}", phone=phone)

    flood = in_parallel([lambda: gateway.identify(new_conversation(), phone=nobodys_phone())] * 60)
    mixed_phones = phones + [nobodys_phone() for _ in range(30)]
    mixed = in_parallel(
        [lambda p=p: (p, gateway.identify(new_conversation(), phone=p)) for p in mixed_phones]
    )

    assert Counter(kind_of(r) for r in flood) == {"contact_not_found": 20, "awaiting_code": 40}
    assert {kind_of(r) for _, r in mixed} == {"awaiting_code"}
    answered_alike = [r for _, r in mixed] + [r for r in flood if kind_of(r) == "awaiting_code"]
    assert len({(r.status_code, r.content) for r in answered_alike}) == 1
    assert not any(f"Cliente{n}" in r.text for _, r in mixed for n in range(10))
    assert Counter(m.to for m in sms_outbox) == {f"+34{phone}": 1 for phone in phones}
    failures = SecurityEvent.objects.filter(
        company=company, kind=SecurityEvent.Kind.IDENTIFICATION_FAILED
    )
    assert failures.count() == 20


def test_a_burst_of_misses_at_once_is_told_not_found_no_more_than_the_limit_allows(
    gateway, company
):
    """Failures recorded at once cannot pass the credential's limit together; those that
    find it reached meanwhile answer in verified mode, as the next ones do."""
    limits(company, identify_failures_per_credential=5)

    answers = in_parallel(
        [lambda: gateway.identify(new_conversation(), phone=nobodys_phone())] * 24
    )

    assert Counter(kind_of(r) for r in answers) == {"contact_not_found": 5, "awaiting_code": 19}


# --- Lockout -----------------------------------------------------------------------------------


@dataclass
class LockoutRun:
    attacker: list[httpx.Response]
    # Each customer's phone: what identify_contact answered, verify_code (if a code was asked
    # for), and a tool acting for them afterwards.
    customers: dict[str, tuple[httpx.Response, httpx.Response | None, httpx.Response]]


def lockout_attempt(
    gateway: Gateway, phones: list[str], code_for: Callable[[str], str]
) -> LockoutRun:
    """ATTACK_CONVERSATIONS conversations each try five random phones while each customer,
    in a conversation of their own, identifies by phone, types the code their phone received
    if asked, and lists their cases: all at once, PARALLEL calls at a time."""

    def attacker() -> list[httpx.Response]:
        conversation = new_conversation()
        return [
            gateway.identify(conversation, phone=nobodys_phone())
            for _ in range(TRIES_PER_CONVERSATION)
        ]

    def customer(phone: str) -> tuple:
        conversation = new_conversation()
        identified = gateway.identify(conversation, phone=phone)
        verified = None
        if kind_of(identified) == "awaiting_code":
            verified = gateway.verify(conversation, phone, code_for(phone))
        acting = gateway.call("list_my_cases", {"identifier": phone}, conversation)
        return phone, (identified, verified, acting)

    # The customers come in among the attackers, the first after the first 20 conversations.
    jobs: list[Callable[[], object]] = []
    waiting = list(phones)
    every = max(1, (ATTACK_CONVERSATIONS - 20) // len(phones))
    for n in range(ATTACK_CONVERSATIONS):
        jobs.append(attacker)
        if n >= 20 and (n - 20) % every == 0 and waiting:
            phone = waiting.pop(0)
            jobs.append(lambda phone=phone: customer(phone))
    jobs += [lambda phone=phone: customer(phone) for phone in waiting]
    results = in_parallel(jobs)
    return LockoutRun(
        attacker=[r for result in results if isinstance(result, list) for r in result],
        customers=dict(result for result in results if isinstance(result, tuple)),
    )


def check_nobody_locked_out(run: LockoutRun, texted: Counter, failures_limit: int) -> None:
    """What the lockout attempt must come to, on any database."""
    attacker = Counter(kind_of(r) for r in run.attacker)
    assert len(run.attacker) == ATTACK_CONVERSATIONS * TRIES_PER_CONVERSATION
    assert set(attacker) <= {"contact_not_found", "awaiting_code"}, attacker
    assert attacker["contact_not_found"] <= failures_limit
    by_code = []
    for phone, (identified, verified, acting) in run.customers.items():
        assert kind_of(identified) in ("identified", "awaiting_code"), identified.text
        if verified is not None:
            by_code.append(phone)
            assert verified.status_code == 200, verified.text
            assert verified.json()["verified"] is True
        assert acting.status_code == 200, (phone, acting.text)
    # Verified mode was on for most of them (the test would prove nothing otherwise).
    assert len(by_code) >= len(run.customers) // 2
    # One answer in verified mode, whoever the phone belongs to.
    verified_mode = [r for r in run.attacker if kind_of(r) == "awaiting_code"]
    verified_mode += [run.customers[phone][0] for phone in by_code]
    assert len({(r.status_code, r.content) for r in verified_mode}) == 1
    # A code to each customer who was asked for one, on their own phone, and to nobody else.
    assert texted == {f"+34{phone}": 1 for phone in by_code}


def test_a_lockout_attempt_leaves_every_customer_identified(gateway, company, sms_outbox):
    """One credential, 1,000 random phones from 200 conversations: today's 51 failures then
    refused every customer for an hour. Now the credential's limit puts identification in
    verified mode: every customer is identified, by the code sent to their own phone."""
    phones = [customer_phone(n) for n in range(CUSTOMERS)]
    for n, phone in enumerate(phones):
        contact_create(company=company, first_name=f"Cliente{n}", phone=phone)

    def code_for(phone: str) -> str:
        return code_in(texts_to(sms_outbox, phone)[-1])

    run = lockout_attempt(gateway, phones, code_for)

    check_nobody_locked_out(
        run, Counter(m.to for m in sms_outbox), company.identify_failures_per_credential
    )
    for phone in phones:
        conversation = Conversation.objects.get(
            company=company,
            external_id=run.customers[phone][2].request.headers["X-Conversation-Id"],
        )
        assert conversation.contact.phone == f"+34{phone}"
    sent = VerificationChallenge.objects.filter(company=company, purpose=Purpose.IDENTIFICATION)
    admitted = sent.exclude(delivery_status__in=["queued", "not_sent"])
    assert (
        admitted.count() == len(sms_outbox) <= company.verified_mode_codes_per_credential_per_hour
    )
    assert not SecurityEvent.objects.filter(
        company=company, kind=SecurityEvent.Kind.VERIFICATION_LOCKED
    ).exists()


SQLITE_SEED = """
from core.models import Company
from core.services import contact_create, gateway_credential_issue
company = Company.objects.create(name="Demo", slug="demo", environment="production")
for n, phone in enumerate(PHONES):
    contact_create(company=company, first_name=f"Cliente{n}", phone=phone)
result = gateway_credential_issue(company=company, name="gateway")[1]
"""


def test_on_the_sqlite_demo_a_lockout_attempt_leaves_every_customer_identified(
    gunicorn_server, sqlite_database, tmp_path
):
    phones = [customer_phone(n) for n in range(CUSTOMERS)]
    database = sqlite_database()
    token = database.run(SQLITE_SEED.replace("PHONES", repr(phones)))
    texts = tmp_path / "sms"
    server = gunicorn_server(
        workers=2,
        threads=4,
        database_url=database.url,
        env={"GARANTE_SMS_BACKEND": "file", "GARANTE_SMS_FILE_PATH": str(texts)},
    )
    gateway = Gateway(server.url, token)

    def sent() -> list[tuple[str, str]]:
        found = []
        for path in sorted(texts.glob("*.sms")):
            head, _, body = path.read_text().partition("\n\n")
            found.append((head.removeprefix("To: ").strip(), body))
        return found

    def code_for(phone: str) -> str:
        return code_in([body for to, body in sent() if to == f"+34{phone}"][-1])

    try:
        run = lockout_attempt(gateway, phones, code_for)
    finally:
        gateway.http.close()

    check_nobody_locked_out(run, Counter(to for to, _ in sent()), failures_limit=50)
    assert "database is locked" not in server.log()


# --- Verified mode, one behaviour at a time ----------------------------------------------------


def test_a_customers_document_named_from_other_conversations_does_not_lock_them_out(
    gateway, company, ana, bruno, sms_outbox
):
    """Ten conversations identified as Bruno name Ana's document (ten identity switches):
    her document's limit is reached. Ana, in a new conversation, is identified by the code
    sent to her phone, instead of waiting an hour."""
    for _ in range(10):
        conversation = new_conversation()
        assert kind_of(gateway.identify(conversation, document=BRUNO_DOCUMENT)) == "identified"
        assert kind_of(gateway.identify(conversation, document=ANA_DOCUMENT)) == "identity_switch"
    own = new_conversation()

    answer = gateway.identify(own, document=ANA_DOCUMENT)
    code = code_in(texts_to(sms_outbox, ANA_PHONE_NATIONAL)[-1])
    verified = gateway.verify(own, ANA_DOCUMENT, code)

    assert kind_of(answer) == "awaiting_code"
    assert answer.json()["user_message"].startswith("Si esos datos corresponden a un cliente")
    assert verified.json() == {"verified": True, "valid_for_minutes": 15}
    assert Conversation.objects.get(external_id=own).contact == ana
    assert gateway.call("list_my_cases", {"identifier": ANA_PHONE_NATIONAL}, own).status_code == 200


def test_the_conversations_own_limit_still_refuses_that_conversation_alone(gateway, company, ana):
    into_verified_mode(gateway, company)
    conversation = new_conversation()

    answers = [kind_of(gateway.identify(conversation, phone=nobodys_phone())) for _ in range(5)]
    refused = gateway.identify(conversation, phone=ANA_PHONE_NATIONAL)
    elsewhere = gateway.identify(new_conversation(), phone=ANA_PHONE_NATIONAL)

    assert answers == ["awaiting_code"] * 5
    assert kind_of(refused) == "too_many_attempts"
    # Its own wait (the conversation's 15 minutes), not the credential's hour.
    assert 0 < refused.json()["retry_after_seconds"] <= 15 * 60 + 1
    assert kind_of(elsewhere) == "awaiting_code"


def test_verified_mode_ends_by_itself_once_the_failures_leave_the_window(gateway, company, ana):
    into_verified_mode(gateway, company)
    assert (
        kind_of(gateway.identify(new_conversation(), phone=ANA_PHONE_NATIONAL)) == "awaiting_code"
    )

    SecurityEvent.objects.filter(company=company).update(
        created_at=timezone.now() - timedelta(minutes=61)
    )

    assert kind_of(gateway.identify(new_conversation(), phone=ANA_PHONE_NATIONAL)) == "identified"
    assert kind_of(gateway.identify(new_conversation(), phone=nobodys_phone())) == (
        "contact_not_found"
    )


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ({"phone": ANA_PHONE_NATIONAL}, ("sms", ANA_PHONE)),
        ({"email": "ANA@example.com"}, ("email", ANA_EMAIL)),
        ({"document": ANA_DOCUMENT}, ("sms", ANA_PHONE)),
    ],
    ids=["phone", "email", "document"],
)
def test_the_code_goes_to_the_channel_on_the_customers_record(
    gateway, company, ana, sms_outbox, typed, expected
):
    into_verified_mode(gateway, company)

    assert kind_of(gateway.identify(new_conversation(), **typed)) == "awaiting_code"

    sent = [("sms", m.to) for m in sms_outbox] + [("email", m.to[0]) for m in mail.outbox]
    assert sent == [expected]


def test_a_customer_with_only_an_email_gets_the_code_by_email(gateway, company, sms_outbox):
    contact_create(
        company=company, first_name="Eva", document_number="Y7654321G", email="eva@example.com"
    )
    into_verified_mode(gateway, company)

    assert kind_of(gateway.identify(new_conversation(), document="Y7654321G")) == "awaiting_code"

    assert [m.to for m in mail.outbox] == [["eva@example.com"]]
    assert sms_outbox == []


def test_nobodys_identifier_sends_nothing_anywhere(gateway, company, ana, sms_outbox):
    into_verified_mode(gateway, company)
    typed = [{"phone": nobodys_phone()}, {"email": "nadie@example.com"}, {"document": "Z1111111D"}]

    answers = [gateway.identify(new_conversation(), **t) for t in typed]

    assert {kind_of(a) for a in answers} == {"awaiting_code"}
    assert sms_outbox == [] and mail.outbox == []


def test_a_wrong_code_for_nobody_is_answered_as_for_a_customer_and_locks_alike(
    gateway, company, ana, sms_outbox
):
    """The code of nobody's identifier is one nobody received: its guesses go through the
    same attempts and the same lock as a customer's code."""
    into_verified_mode(gateway, company)
    sequences = []
    for identifier in (ANA_PHONE_NATIONAL, nobodys_phone()):
        conversation = new_conversation()
        gateway.identify(conversation, phone=identifier)
        sequences.append(
            [
                (r.status_code, r.json()["code"], r.json().get("attempts_left"))
                for r in (gateway.verify(conversation, identifier, "000000") for _ in range(6))
            ]
        )

    assert sequences[0] == sequences[1]
    assert [code for _, code, _ in sequences[0]] == ["wrong_code"] * 4 + ["verification_locked"] * 2
    assert len(sms_outbox) == 1  # Ana's, never used


def test_verify_code_needs_the_identifier_typed_to_identify(gateway, company, ana, sms_outbox):
    into_verified_mode(gateway, company)
    conversation = new_conversation()
    gateway.identify(conversation, phone=ANA_PHONE_NATIONAL)
    code = code_in(sms_outbox[-1].body)

    # Ana's own document, but not what was typed: refused without a guess being used.
    other = gateway.verify(conversation, ANA_DOCUMENT, code)
    same = gateway.verify(conversation, ANA_PHONE_NATIONAL, code)

    assert kind_of(other) == "identity_mismatch"
    assert same.json()["verified"] is True


def test_a_code_typed_in_another_conversation_is_refused_and_nothing_is_saved(
    gateway, company, ana, sms_outbox
):
    into_verified_mode(gateway, company)
    sent_for = new_conversation()
    gateway.identify(sent_for, phone=ANA_PHONE_NATIONAL)
    code = code_in(sms_outbox[-1].body)
    elsewhere = new_conversation()
    events_before = SecurityEvent.objects.count()

    refused = gateway.verify(elsewhere, ANA_PHONE_NATIONAL, code)

    assert refused.status_code == 403
    assert kind_of(refused) == "identification_required"
    assert not Conversation.objects.filter(external_id=elsewhere, contact__isnull=False).exists()
    challenge = VerificationChallenge.objects.get(conversation__external_id=sent_for)
    assert (challenge.status, challenge.attempts) == (Status.ACTIVE, 0)
    assert SecurityEvent.objects.count() == events_before
    assert gateway.verify(sent_for, ANA_PHONE_NATIONAL, code).json()["verified"] is True


def test_past_the_credentials_budget_the_answer_is_the_same_and_nothing_is_sent(
    gateway, company, sms_outbox
):
    phones = [customer_phone(n) for n in range(3)]
    for n, phone in enumerate(phones):
        contact_create(company=company, first_name=f"Cliente{n}", phone=phone)
    into_verified_mode(gateway, company)
    limits(company, verified_mode_codes_per_credential_per_hour=2)
    conversations = [new_conversation() for _ in phones]

    answers = [gateway.identify(c, phone=p) for c, p in zip(conversations, phones, strict=True)]
    nobody = gateway.identify(new_conversation(), phone=nobodys_phone())
    guess = gateway.verify(conversations[2], phones[2], "123456")

    assert len({(a.status_code, a.content) for a in [*answers, nobody]}) == 1
    assert [m.to for m in sms_outbox] == [f"+34{p}" for p in phones[:2]]
    withheld = VerificationChallenge.objects.get(conversation__external_id=conversations[2])
    assert (withheld.status, withheld.delivery_status) == (Status.ACTIVE, "not_sent")
    assert withheld.delivery_error == "over the credential's hourly budget"
    assert kind_of(guess) == "wrong_code"  # as at any code


def test_past_a_customers_hourly_limit_the_answer_is_the_same_and_nothing_is_sent(
    gateway, company, ana, sms_outbox
):
    into_verified_mode(gateway, company)
    limits(company, verification_codes_per_contact_per_hour=2)

    answers = [gateway.identify(new_conversation(), phone=ANA_PHONE_NATIONAL) for _ in range(4)]

    assert len({(a.status_code, a.content) for a in answers}) == 1
    assert len(sms_outbox) == 2


# --- An identity alarm voids a pending code ----------------------------------------------------


def test_an_identity_alarm_voids_a_pending_code(gateway, company, ana, bruno, sms_outbox):
    """Ana asks for a code, then the conversation names other customers: the code she was
    sent no longer verifies her (it answered verified: true)."""
    conversation = new_conversation()
    gateway.identify(conversation, phone=ANA_PHONE_NATIONAL)
    gateway.call(
        "request_verification_code",
        {"identifier": ANA_PHONE_NATIONAL, "channel": "sms"},
        conversation,
    )
    code = code_in(sms_outbox[-1].body)

    alarms = [kind_of(gateway.identify(conversation, document=BRUNO_DOCUMENT)) for _ in range(5)]
    answer = gateway.verify(conversation, ANA_PHONE_NATIONAL, code)

    assert alarms == ["identity_switch"] * 5
    assert kind_of(answer) == "code_revoked"
    assert VerificationChallenge.objects.get(conversation__external_id=conversation).status == (
        Status.REVOKED
    )
    # The protected action still asks for a code; a new one verifies her.
    gateway.call(
        "request_verification_code",
        {"identifier": ANA_PHONE_NATIONAL, "channel": "sms"},
        conversation,
    )
    fresh = gateway.verify(conversation, ANA_PHONE_NATIONAL, code_in(sms_outbox[-1].body))
    assert fresh.json()["verified"] is True


def test_at_the_limit_an_identity_alarm_voids_a_pending_code_too(
    gateway, company, ana, bruno, sms_outbox
):
    """Past the conversation's limit the switch is refused before the lookup and records no
    failure: the alarm is a verification_voided event, and it voids the code as well."""
    limits(company, identify_failures_per_conversation=1)
    conversation = new_conversation()
    gateway.identify(conversation, phone=ANA_PHONE_NATIONAL)
    assert kind_of(gateway.identify(conversation, document=BRUNO_DOCUMENT)) == "identity_switch"
    gateway.call(
        "request_verification_code",
        {"identifier": ANA_PHONE_NATIONAL, "channel": "sms"},
        conversation,
    )
    code = code_in(sms_outbox[-1].body)

    limited = gateway.identify(conversation, document=BRUNO_DOCUMENT)
    answer = gateway.verify(conversation, ANA_PHONE_NATIONAL, code)

    assert kind_of(limited) == "too_many_attempts"
    assert SecurityEvent.objects.filter(
        conversation_key=conversation, kind=SecurityEvent.Kind.VERIFICATION_VOIDED
    ).exists()
    assert kind_of(answer) == "code_revoked"


def test_each_credential_has_a_budget_of_its_own(live_server, gateway, company, sms_outbox):
    phones = [customer_phone(n) for n in range(2)]
    for n, phone in enumerate(phones):
        contact_create(company=company, first_name=f"Cliente{n}", phone=phone)
    other = Gateway(live_server.url, gateway_credential_issue(company=company, name="second")[1])
    try:
        into_verified_mode(gateway, company)
        into_verified_mode(other, company)
        limits(company, verified_mode_codes_per_credential_per_hour=1)

        first = [gateway.identify(new_conversation(), phone=phone) for phone in phones]
        second = other.identify(new_conversation(), phone=phones[1])
    finally:
        other.http.close()

    assert {kind_of(r) for r in [*first, second]} == {"awaiting_code"}
    # The first credential's second code is over its budget; the second's is its first.
    assert [m.to for m in sms_outbox] == [f"+34{phones[0]}", f"+34{phones[1]}"]
