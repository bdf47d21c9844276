"""Failed identifications limited per conversation, per gateway credential and per identifier
value, over real HTTP (REST mirror of a live server), on PostgreSQL and on SQLite alike: past
the credential's or the identifier's limit, identification goes on in verified mode; and code
requests sent at once keeping to the send limits. The attacks themselves are in
tests/security/test_identification_attacks.py."""

import itertools
import re
import uuid
from functools import partial

import httpx
import pytest
from django.core import mail

from core.models import SecurityEvent, VerificationChallenge
from core.services import gateway_credential_issue
from tests.factories import ANA_DOCUMENT, ANA_EMAIL, ANA_PHONE, ANA_PHONE_NATIONAL
from tests.servers import at_once

pytestmark = pytest.mark.django_db(transaction=True)

_phones = itertools.count(699_000_001)


def random_phone() -> str:
    """A valid Spanish mobile number nobody has."""
    return str(next(_phones))


def limits(company, **fields):
    for name, value in fields.items():
        setattr(company, name, value)
    company.save()  # the process cache of gateway tokens forgets the company (core.signals)


def call(client, name, arguments, conversation_id=None):
    return client.call(
        name, arguments, key=uuid.uuid4().hex, conversation_id=conversation_id or new_id()
    )


def new_id() -> str:
    return f"conv-{uuid.uuid4().hex[:12]}"


def identify(client, conversation_id=None, **arguments):
    return call(client, "identify_contact", arguments, conversation_id)


def outcome(response: httpx.Response) -> str:
    body = response.json()
    if response.status_code == 200:
        return "identified" if body["identified"] else "awaiting_code"
    return body["code"]


def test_an_enumeration_through_one_credential_is_answered_alike_past_its_limit_and_staff_are_told(
    tool_client, company, ana, make_staff, sms_outbox
):
    """The probe of issue 28: random phones, each in a new conversation. Past the
    credential's limit every phone gets one answer (verified mode); the customer's real
    phone too, and her code goes to her phone. One burst event is raised and mailed to
    the company's administrators, not one per call."""
    make_staff("marta", role="admin", email="marta@example.com")
    make_staff("pablo", role="supervisor", email="pablo@example.com")  # may not revoke it
    limits(company, identify_failures_per_credential=8, identify_credential_window_minutes=60)

    probes = [identify(tool_client, phone=random_phone()) for _ in range(12)]
    real = identify(tool_client, phone=ANA_PHONE_NATIONAL)

    assert [outcome(r) for r in probes] == ["contact_not_found"] * 8 + ["awaiting_code"] * 4
    assert real.status_code == 200
    assert {r.content for r in probes[8:]} == {real.content}
    assert "Ana" not in real.text
    assert [m.to for m in sms_outbox] == [ANA_PHONE]
    events = SecurityEvent.objects.filter(company=company)
    bursts = events.filter(kind=SecurityEvent.Kind.IDENTIFICATION_BURST)
    assert bursts.count() == 1
    assert bursts.get().staff_notified_at is not None
    assert [m.bcc for m in mail.outbox] == [["marta@example.com"]]
    assert "gateway" in mail.outbox[0].subject
    failures = events.filter(kind=SecurityEvent.Kind.IDENTIFICATION_FAILED)
    assert failures.count() == 8
    assert {e.identifier_digest for e in failures} != {""}
    assert not any(ANA_PHONE_NATIONAL in str(e.detail) for e in events)


def test_another_credential_of_the_company_is_not_held_by_the_first_ones_limit(
    tool_client, company, ana, live_server
):
    limits(company, identify_failures_per_credential=3)
    for _ in range(4):
        identify(tool_client, phone=random_phone())
    other_token = gateway_credential_issue(company=company, name="second gateway")[1]
    other = type(tool_client)(live_server.url, other_token, new_id())

    with other.http:
        assert outcome(identify(other, phone=ANA_PHONE_NATIONAL)) == "identified"


def test_the_same_identifier_from_many_conversations_and_credentials_goes_to_verified_mode(
    tool_client, company, ana, live_server
):
    limits(company, identify_failures_per_identifier=3)
    other_token = gateway_credential_issue(company=company, name="second gateway")[1]
    other = type(tool_client)(live_server.url, other_token, new_id())
    tried = random_phone()

    with other.http:
        answers = [
            outcome(identify(client, phone=tried))
            for client in [tool_client, other, tool_client, other, tool_client]
        ]
        another = outcome(identify(other, phone=random_phone()))

    assert answers == ["contact_not_found"] * 3 + ["awaiting_code"] * 2
    assert another == "contact_not_found"  # only that value is in verified mode


def test_an_identified_conversation_keeps_working_while_its_credential_is_limited(
    tool_client, company, ana, sms_outbox
):
    limits(company, identify_failures_per_credential=5)
    conversation = new_id()
    assert outcome(identify(tool_client, conversation, phone=ANA_PHONE_NATIONAL)) == "identified"
    for _ in range(6):
        identify(tool_client, phone=random_phone())
    assert outcome(identify(tool_client, document=ANA_DOCUMENT)) == "awaiting_code"

    again = identify(tool_client, conversation, document=ANA_DOCUMENT)
    cases = call(tool_client, "list_my_cases", {"identifier": ANA_PHONE_NATIONAL}, conversation)
    code = call(
        tool_client,
        "request_verification_code",
        {"identifier": ANA_EMAIL, "channel": "sms"},
        conversation,
    )

    assert (again.status_code, again.json()["first_name"]) == (200, "Ana")
    assert cases.status_code == 200, cases.text
    assert code.status_code == 200, code.text
    assert len(sms_outbox) == 2  # the verified-mode identification's code, and this one


def test_a_legitimate_conversation_that_mistypes_twice_does_not_wait(tool_client, ana):
    conversation = new_id()

    answers = [
        outcome(identify(tool_client, conversation, phone=phone))
        for phone in ["600111223", "600111221", ANA_PHONE_NATIONAL]
    ]

    assert answers == ["contact_not_found", "contact_not_found", "identified"]


def test_once_limited_an_existing_and_an_unknown_identifier_get_the_same_answer(
    tool_client, company, ana
):
    limits(company, identify_failures_per_credential=2)
    for _ in range(2):
        identify(tool_client, phone=random_phone())

    existing = identify(tool_client, phone=ANA_PHONE_NATIONAL)
    unknown = identify(tool_client, phone=random_phone())

    assert existing.status_code == unknown.status_code == 200
    assert existing.content == unknown.content
    assert existing.json()["awaiting_code"] is True
    assert existing.headers.get("content-length") == unknown.headers.get("content-length")


def test_codes_requested_at_once_in_one_conversation_keep_to_its_send_limit(
    tool_client, ana, sms_outbox
):
    conversation = new_id()
    identify(tool_client, conversation, phone=ANA_PHONE_NATIONAL)
    arguments = {"identifier": ANA_PHONE_NATIONAL, "channel": "sms"}

    answers = at_once(
        *[partial(call, tool_client, "request_verification_code", arguments, conversation)] * 10
    )

    assert (
        sorted(r.json().get("code", "sent") for r in answers)
        == ["sent"] * 3 + ["too_many_codes"] * 7
    )
    assert VerificationChallenge.objects.count() == 3
    # Each code supersedes the conversation's last: one superseded before its task ran is
    # never sent, so fewer texts may leave, never more.
    assert 1 <= len(sms_outbox) <= 3


def test_codes_requested_at_once_from_many_conversations_keep_to_the_contacts_limit(
    tool_client, ana, sms_outbox
):
    conversations = [new_id() for _ in range(10)]
    for conversation in conversations:
        identify(tool_client, conversation, phone=ANA_PHONE_NATIONAL)
    arguments = {"identifier": ANA_PHONE_NATIONAL, "channel": "sms"}

    answers = at_once(
        *[
            partial(call, tool_client, "request_verification_code", arguments, conversation)
            for conversation in conversations
        ]
    )

    assert (
        sorted(r.json().get("code", "sent") for r in answers)
        == ["sent"] * 5 + ["too_many_codes"] * 5
    )
    assert len(sms_outbox) == 5
    assert all(re.search(r"\b\d{6}\b", m.body) for m in sms_outbox)
