"""Attacks on contact changes and on every tool taking an identifier, over real HTTP (the REST
mirror of a live server), on PostgreSQL and on the SQLite demo alike (issue #42, item 2).

The attacker is a customer of the company, verified through their own channel as the tools
require, who then types other people's phones, emails and identifiers. They must learn
nothing about whom a value belongs to, and send no more messages than the code budgets allow.
docs/threats/contact-changes.md says what each test holds.
"""

import re
import uuid
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.core import mail

from core.models import Contact, SecurityEvent, StepUpPolicy, VerificationChallenge
from core.normalize import mask_email, mask_phone
from tests import factories
from tests.factories import ANA_DOCUMENT, ANA_PHONE, BRUNO_EMAIL
from tests.reliability.tenants import arguments_for
from tooling.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)

NOBODYS_DOCUMENT = "99999999R"


@pytest.fixture
def customers(company, ana, bruno) -> list[Contact]:
    """Five customers, as in the issue's probe: Ana and four others."""
    others = [
        factories.contact(company, first_name=name, phone=phone, email=f"{name.lower()}@ex.es")
        for name, phone in (("Carla", "+34600555666"), ("Dario", "+34600777888"))
    ]
    others.append(factories.contact(company, first_name="Elena", phone="+34611000111"))
    return [ana, bruno, *others]


def new_conversation() -> str:
    return f"conv-{uuid.uuid4().hex[:12]}"


def call(client, name: str, arguments: dict[str, Any], conversation: str) -> httpx.Response:
    return client.call(name, arguments, key=uuid.uuid4().hex, conversation_id=conversation)


def code_in(text: str) -> str:
    return re.search(r"\b(\d{6})\b", text).group(1)


def texts_to(outbox: list, number: str) -> list[str]:
    return [m.body for m in outbox if m.to == number]


def verified_as_ana(client, outbox: list) -> tuple[str, str]:
    """A conversation identified as Ana and verified with a code to her own phone; the
    conversation and that code."""
    conversation = new_conversation()
    assert (
        call(client, "identify_contact", {"document": ANA_DOCUMENT}, conversation).status_code
        == 200
    )
    asked = call(
        client,
        "request_verification_code",
        {"identifier": ANA_DOCUMENT, "channel": "sms"},
        conversation,
    )
    assert asked.status_code == 200, asked.text
    code = code_in(texts_to(outbox, ANA_PHONE)[-1])
    verified = call(client, "verify_code", {"identifier": ANA_DOCUMENT, "code": code}, conversation)
    assert verified.status_code == 200, verified.text
    return conversation, code


def ask_change(client, conversation: str, **change: str) -> httpx.Response:
    return call(
        client, "update_contact_details", {"identifier": ANA_DOCUMENT, **change}, conversation
    )


def confirm(client, conversation: str, code: str) -> httpx.Response:
    return call(
        client, "confirm_contact_change", {"identifier": ANA_DOCUMENT, "code": code}, conversation
    )


SENT = (200, "sent", ["channel", "expires_in_minutes", "sent_to", "updated"])
TOO_MANY_CODES = (
    403,
    "too_many_codes",
    ["code", "error_type", "retry_after_seconds", "user_message"],
)


def outcome(response: httpx.Response) -> tuple[int, str, list[str]]:
    """What an answer tells, whatever value it was about: status, code and fields."""
    body = response.json()
    return response.status_code, body.get("code", "sent"), sorted(body)


def contacts_now(company) -> list[tuple[str, str]]:
    return sorted(Contact.objects.filter(company=company).values_list("phone", "email"))


def change_codes() -> int:
    return VerificationChallenge.objects.filter(
        purpose=VerificationChallenge.Purpose.CONTACT_CHANGE
    ).count()


# --- enumeration through update_contact_details ---------------------------------------------


def test_probing_phones_finds_no_customer_saves_nothing_and_texts_within_the_budget(
    tool_client, company, customers, sms_outbox
):
    """The issue's probe: a verified customer types phone after phone. Before, each of the
    other customers' phones answered identifier_taken and every other number was saved at
    once and texted. Now every probe answers alike until the conversation's code budget is
    spent, then every probe is refused alike; nothing is saved."""
    conversation, _code = verified_as_ana(tool_client, sms_outbox)
    before = contacts_now(company)
    taken = [c.phone for c in customers[1:]]
    free = [f"+346990000{n:02d}" for n in range(len(taken))]
    probes = [number for pair in zip(taken, free, strict=True) for number in pair]

    answers = [ask_change(tool_client, conversation, phone=p) for p in probes]

    per_conversation, _window = settings.GARANTE_VERIFICATION_SENDS_PER_CONVERSATION
    sent = per_conversation - 1  # the step-up code was the conversation's first
    assert [outcome(a) for a in answers] == [SENT] * sent + [TOO_MANY_CODES] * (len(probes) - sent)
    assert [a.json()["sent_to"] for a in answers[:sent]] == [mask_phone(p) for p in probes[:sent]]
    assert all(a.json()["updated"] is False for a in answers[:sent])
    assert contacts_now(company) == before
    texted = [m.to for m in sms_outbox if m.to != ANA_PHONE]
    assert texted == probes[:sent]


def test_probing_emails_finds_no_customer_and_saves_nothing(
    tool_client, company, customers, sms_outbox
):
    conversation, _code = verified_as_ana(tool_client, sms_outbox)
    before = contacts_now(company)
    probes = [BRUNO_EMAIL, "nadie@example.com"]

    answers = [ask_change(tool_client, conversation, email=e) for e in probes]

    assert [outcome(a) for a in answers] == [SENT, SENT]
    assert [a.json()["sent_to"] for a in answers] == [mask_email(e) for e in probes]
    assert contacts_now(company) == before
    assert sorted(m.to[0] for m in mail.outbox) == sorted(probes)


def test_many_conversations_of_one_customer_text_no_more_than_the_customers_budget(
    tool_client, company, customers, sms_outbox
):
    """Opening conversation after conversation does not renew the budget: every code, the
    step-up codes included, counts towards the customer's hourly limit."""
    per_contact, _window = settings.GARANTE_VERIFICATION_SENDS_PER_CONTACT
    before = contacts_now(company)
    refused = []
    for n in range(per_contact):
        conversation = new_conversation()
        call(tool_client, "identify_contact", {"document": ANA_DOCUMENT}, conversation)
        asked = call(
            tool_client,
            "request_verification_code",
            {"identifier": ANA_DOCUMENT, "channel": "sms"},
            conversation,
        )
        if asked.status_code != 200:
            refused.append(asked.json()["code"])
            continue
        code = code_in(texts_to(sms_outbox, ANA_PHONE)[-1])
        call(tool_client, "verify_code", {"identifier": ANA_DOCUMENT, "code": code}, conversation)
        for phone in (customers[1 + n % 4].phone, f"+34699100{n:03d}"):
            probe = ask_change(tool_client, conversation, phone=phone)
            if probe.status_code != 200:
                refused.append(probe.json()["code"])

    assert len(sms_outbox) == per_contact
    assert set(refused) == {"too_many_codes"}
    assert contacts_now(company) == before
    assert not SecurityEvent.objects.filter(kind=SecurityEvent.Kind.CONTACT_CHANGE_TAKEN).exists()


# --- proof before any change, and before "taken" ---------------------------------------------


def test_without_the_code_sent_to_the_new_phone_guesses_change_nothing_and_lock_it(
    tool_client, company, ana, sms_outbox
):
    conversation, _code = verified_as_ana(tool_client, sms_outbox)
    ask_change(tool_client, conversation, phone="+34699000123")
    right = code_in(texts_to(sms_outbox, "+34699000123")[-1])
    wrong = [f"{(int(right) + n) % 10**6:06d}" for n in range(1, 6)]

    answers = [confirm(tool_client, conversation, c) for c in [*wrong, right]]

    assert [a.json()["code"] for a in answers] == ["wrong_code"] * 4 + ["verification_locked"] * 2
    assert [a.json().get("attempts_left") for a in answers[:4]] == [4, 3, 2, 1]
    assert Contact.objects.get(pk=ana.pk).phone == ANA_PHONE
    assert SecurityEvent.objects.filter(kind=SecurityEvent.Kind.VERIFICATION_LOCKED).count() == 1


def test_taken_is_said_only_to_whoever_received_the_code_and_then_nothing_is_saved(
    tool_client, company, customers, sms_outbox
):
    """Only the holder of the other customer's phone can read the code sent to it: they
    alone learn that the number is registered, and the change is refused, once."""
    bruno = customers[1]
    conversation, _code = verified_as_ana(tool_client, sms_outbox)
    before = contacts_now(company)
    ask_change(tool_client, conversation, phone=bruno.phone)
    code = code_in(texts_to(sms_outbox, bruno.phone)[-1])

    first = confirm(tool_client, conversation, code)
    again = confirm(tool_client, conversation, code)

    assert (first.status_code, first.json()["code"]) == (422, "identifier_taken")
    assert "registrado para otro cliente" in first.json()["user_message"]
    assert bruno.first_name not in first.text
    assert again.json()["code"] == "code_used"
    assert contacts_now(company) == before
    [event] = SecurityEvent.objects.filter(kind=SecurityEvent.Kind.CONTACT_CHANGE_TAKEN)
    assert (event.contact_id, event.claimed_contact_id) == (customers[0].pk, bruno.pk)
    assert "+34" not in str(event.detail) and "@" not in str(event.detail)


# --- bad input: a clear typed error, nothing saved, nothing sent ------------------------------


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("phone", "12", "invalid_phone"),
        ("phone", "+34 000 000 000", "invalid_phone"),
        ("phone", "llámame", "invalid_phone"),
        ("phone", "+999 123 456 789", "invalid_phone"),
        # Numbers the company would not text: a code never goes there (core.sms_policy).
        ("phone", "+34 806 123 456", "phone_not_mobile"),  # Spanish premium rate
        ("phone", "+34 912 345 678", "phone_not_mobile"),  # a landline
        ("phone", "+1 900 555 0123", "phone_country_not_served"),  # US premium rate
        ("email", "ana@", "invalid_email"),
        ("email", "@example.com", "invalid_email"),
        ("email", "ana garcía@example.com", "invalid_email"),
        ("email", "ana@example..com", "invalid_email"),
    ],
)
def test_a_malformed_phone_or_email_is_a_typed_error_with_nothing_saved_or_sent(
    tool_client, company, ana, sms_outbox, field, value, code
):
    conversation, _code = verified_as_ana(tool_client, sms_outbox)
    before, texts = contacts_now(company), len(sms_outbox)

    response = call(
        tool_client,
        "update_contact_details",
        {"identifier": ANA_DOCUMENT, field: value},
        conversation,
    )

    assert response.status_code == 422
    assert (response.json()["error_type"], response.json()["code"]) == ("VALIDATION", code)
    assert contacts_now(company) == before
    assert (len(sms_outbox), mail.outbox, change_codes()) == (texts, [], 0)


def test_a_code_from_another_conversation_confirms_nothing(tool_client, company, ana, sms_outbox):
    """A change is bound to the conversation that asked for it: its code, given in another
    conversation of the same customer, finds no change there, or is wrong for the change
    that conversation asked for."""
    asking, _code = verified_as_ana(tool_client, sms_outbox)
    ask_change(tool_client, asking, phone="+34699000201")
    code = code_in(texts_to(sms_outbox, "+34699000201")[-1])
    other, _code = verified_as_ana(tool_client, sms_outbox)

    elsewhere = confirm(tool_client, other, code)
    ask_change(tool_client, other, phone="+34699000202")
    crossed = confirm(tool_client, other, code)

    assert (elsewhere.status_code, elsewhere.json()["code"]) == (422, "no_change_pending")
    assert (crossed.status_code, crossed.json()["code"]) == (422, "wrong_code")
    assert Contact.objects.get(pk=ana.pk).phone == ANA_PHONE
    own = confirm(tool_client, asking, code)
    assert own.status_code == 200
    assert Contact.objects.get(pk=ana.pk).phone == "+34699000201"


def test_the_code_sent_to_the_old_phone_does_not_confirm_the_new_one(
    tool_client, company, ana, sms_outbox
):
    conversation, step_up_code = verified_as_ana(tool_client, sms_outbox)
    ask_change(tool_client, conversation, phone="+34699000301")

    response = confirm(tool_client, conversation, step_up_code)

    assert response.status_code == 422
    assert response.json()["code"] == "code_for_current_channel"
    assert response.json()["attempts_left"] == settings.GARANTE_VERIFICATION_MAX_ATTEMPTS - 1
    assert Contact.objects.get(pk=ana.pk).phone == ANA_PHONE


def test_the_code_sent_to_a_new_phone_never_verifies_the_conversation(
    tool_client, company, ana, sms_outbox
):
    """Where a company does not ask for a code to change contact details, the code sent to
    the new number proves that number, not the customer: given to verify_code it verifies
    nothing, and a protected action still asks for the customer's own code."""
    StepUpPolicy.objects.create(company=company, actions=["open_case"])
    conversation = new_conversation()
    call(tool_client, "identify_contact", {"document": ANA_DOCUMENT}, conversation)
    ask_change(tool_client, conversation, phone="+34699000401")
    code = code_in(texts_to(sms_outbox, "+34699000401")[-1])

    verified = call(
        tool_client, "verify_code", {"identifier": ANA_DOCUMENT, "code": code}, conversation
    )
    protected = call(
        tool_client,
        "open_case",
        {"identifier": ANA_DOCUMENT, "subject": "Factura", "description": "Revisar."},
        conversation,
    )

    assert (verified.status_code, verified.json()["code"]) == (422, "no_code_pending")
    assert (protected.status_code, protected.json()["code"]) == (403, "verification_required")
    assert ana.conversations.get(external_id=conversation).verified_until is None


# --- every tool taking an identifier ----------------------------------------------------------

FAKE_REFERENCES = {
    "day": "2030-01-07",
    "slot": "SL-222222",
    "appointment": "AP-222222",
    "quote": "QT-222222",
    "case": "CS-222222",
    "closed_case": "CS-333333",
    "resolved_case": "CS-444444",
}
IDENTIFIED_TOOLS = sorted(
    t.name for t in registry.all() if t.identified and not t.name.startswith("testapp_")
)


def test_every_identifier_taking_tool_answers_alike_for_someone_elses_identifier_and_nobodys(
    tool_client, company, customers, sms_outbox
):
    """Each tool acting for the identified customer, given another customer's document,
    phone or email, answers exactly what it answers for a value nobody has: status, code,
    fields and message. Each call in a conversation of its own, limits raised, so that only
    the value differs."""
    company.identify_failures_per_identifier = 1000
    company.identify_failures_per_credential = 1000
    company.save()
    bruno = customers[1]
    pairs = [
        (bruno.document_number, NOBODYS_DOCUMENT),
        ("600 333 444", "699 999 999"),
        (bruno.email, "nadie@example.com"),
    ]
    differences = []
    for name in IDENTIFIED_TOOLS:
        for someones, nobodys in pairs:
            answers = []
            for identifier in (someones, nobodys):
                conversation = new_conversation()
                call(tool_client, "identify_contact", {"document": ANA_DOCUMENT}, conversation)
                arguments = arguments_for(identifier, FAKE_REFERENCES)[name]
                answers.append(call(tool_client, name, arguments, conversation))
            first, second = answers
            if (first.status_code, first.json()) != (second.status_code, second.json()):
                differences.append((name, someones, first.text, second.text))
            assert first.json()["code"] == "identity_mismatch", (name, first.text)

    assert differences == []
    assert {e.kind for e in SecurityEvent.objects.all()} == {
        SecurityEvent.Kind.IDENTITY_SWITCH,
        SecurityEvent.Kind.IDENTIFIER_MISMATCH,
    }


def test_the_identifier_limit_comes_as_soon_for_someone_elses_identifier_as_for_nobodys(
    tool_client, company, customers, sms_outbox
):
    """Counted alike, refused alike: the number of tries before the limit tells nothing."""
    company.identify_failures_per_identifier = 3
    company.save()
    bruno = customers[1]
    sequences = []
    for identifier in (bruno.document_number, NOBODYS_DOCUMENT):
        seen = []
        for _ in range(5):
            conversation = new_conversation()
            call(tool_client, "identify_contact", {"document": ANA_DOCUMENT}, conversation)
            answer = call(tool_client, "list_my_cases", {"identifier": identifier}, conversation)
            seen.append((answer.status_code, answer.json()["code"]))
        sequences.append(seen)

    assert sequences[0] == sequences[1]
    assert sequences[0] == [(403, "identity_mismatch")] * 3 + [(403, "too_many_attempts")] * 2


# --- the integration API ----------------------------------------------------------------------


def test_whoever_may_be_told_a_contact_exists_may_read_the_contacts_anyway():
    """POST /api/v1/contacts answers contact_exists for a duplicate: no oracle only while
    every staff role that may create contacts may also list them (an integration credential
    always may read). A create-only role would turn that answer into one."""
    creators = Group.objects.filter(permissions__codename="add_contact").distinct()
    assert creators.exists()
    for group in creators:
        assert group.permissions.filter(codename="view_contact").exists(), group.name


def test_the_change_code_expires_with_every_code(tool_client, company, ana, sms_outbox):
    conversation, _code = verified_as_ana(tool_client, sms_outbox)
    ask_change(tool_client, conversation, phone="+34699000501")
    code = code_in(texts_to(sms_outbox, "+34699000501")[-1])
    challenge = VerificationChallenge.objects.get(destination="+34699000501")
    VerificationChallenge.objects.filter(pk=challenge.pk).update(
        expires_at=challenge.created_at - timedelta(seconds=1)
    )

    response = confirm(tool_client, conversation, code)

    assert response.json()["code"] == "code_expired"
    assert Contact.objects.get(pk=ana.pk).phone == ANA_PHONE
