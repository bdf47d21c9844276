"""The customer confirms what cannot be undone: under the company's policy, cancelling or moving
an appointment, rejecting a quote and closing a case happen only with the code sent to the
customer's own channel for that very action, in the same conversation, within its lifetime.

Over real HTTP (the REST mirror of a live server), as the Gateway calls the tools."""

import io
import re
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.contenttypes.models import ContentType
from django.core.cache import caches
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from django_fsm_log.models import StateLog

from agenda.models import Appointment
from agenda.services import appointment_cancel
from core.management.commands.seed_sandbox import CERTIFIED_UNCONFIRMED
from core.models import Company, StepUpPolicy, VerificationChallenge
from core.step_up_choices import confirm_choices
from sales.models import Quote
from support import services as support_services
from support.models import Case
from tests.customer_links import PUBLIC_URL, form_token, visible_text
from tests.factories import ANA_DOCUMENT, BRUNO_DOCUMENT
from tooling.context import CallMeta, ToolContext
from tooling.execution import handler_run_checked
from tooling.registry import Tool, ToolInput, ToolOutput

pytestmark = pytest.mark.django_db(transaction=True)

Status = VerificationChallenge.Status
CONFIRMABLE = [
    "cancel_appointment",
    "confirm_case_resolved",
    "reject_quote",
    "reschedule_appointment",
]


def key() -> str:
    return uuid.uuid4().hex


def confirm_on(company: Company, *actions: str) -> None:
    """The company has its customer confirm `actions` (and asks no step-up code)."""
    StepUpPolicy.objects.update_or_create(
        company=company, defaults={"actions": [], "confirm_actions": list(actions)}
    )


def codes_sent(outbox) -> list:
    """The messages with a code (a booking's own message is not one)."""
    return [message for message in outbox if "su código es" in message.body]


def sent_code(outbox) -> str:
    return re.search(r"\b(\d{6})\b", codes_sent(outbox)[-1].body).group(1)


def find(client, **arguments) -> list[dict]:
    arguments = {"service": "Corte de pelo", "from": "2026-12-08", "to": "2026-12-08"} | arguments
    response = client.call("find_available_slots", arguments)
    assert response.status_code == 200, response.text
    return response.json()["items"]


def booked(client) -> tuple[str, list[dict]]:
    """Ana's appointment at the first free slot, and the slots the conversation saw."""
    slots = find(client)
    response = client.call(
        "book_appointment",
        {"identifier": ANA_DOCUMENT, "service": "Corte de pelo", "slot": slots[0]["slot"]},
        key=key(),
    )
    assert response.status_code == 200, response.text
    return response.json()["appointment"], slots


def cancel(client, reference: str, code: str | None = None, *, idempotency_key=None, conv=None):
    arguments = {"identifier": ANA_DOCUMENT, "appointment": reference}
    if code is not None:
        arguments["confirmation_code"] = code
    return client.call(
        "cancel_appointment", arguments, key=idempotency_key or key(), conversation_id=conv
    )


def state(reference: str) -> str:
    return Appointment.objects.get(reference=reference).state


# --- each action under the policy ----------------------------------------------------------------


def test_a_cancellation_waits_for_the_code_sent_to_the_customers_phone(
    ana_client, company, marta, frozen_clock, sms_outbox
):
    confirm_on(company, "cancel_appointment")
    reference, _ = booked(ana_client)

    asked = cancel(ana_client, reference)

    assert asked.status_code == 403
    assert asked.json() == {
        "error_type": "PERMISSION",
        "user_message": "Para hacerlo necesito que usted lo confirme: le he enviado un código a "
        "su teléfono terminado en 22. Cuando lo reciba, dígamelo (caduca en 10 minutos).",
        "code": "confirmation_required",
        "channel": "sms",
        "sent_to": "teléfono terminado en 22",
        "sent_as": "code",
        "expires_in_minutes": 10,
    }
    assert state(reference) == "scheduled"
    [message] = codes_sent(sms_outbox)
    assert f"anular su cita {reference}" in message.body

    done = cancel(ana_client, reference, sent_code(sms_outbox))

    assert done.status_code == 200, done.text
    assert done.json()["state"] == "cancelled"
    challenge = VerificationChallenge.objects.get()
    assert (challenge.purpose, challenge.action, challenge.status) == (
        "confirmation",
        "cancel_appointment",
        Status.VERIFIED,
    )
    assert challenge.consumed_at is not None
    # A confirmation verifies nothing else: the conversation's step-up stays as it was.
    assert challenge.conversation.verified_until is None


def test_a_move_is_confirmed_for_its_new_time_only(
    ana_client, company, marta, frozen_clock, sms_outbox
):
    confirm_on(company, "reschedule_appointment")
    reference, slots = booked(ana_client)

    def move(slot: str, code: str | None = None):
        arguments = {"identifier": ANA_DOCUMENT, "appointment": reference, "slot": slot}
        if code is not None:
            arguments["confirmation_code"] = code
        return ana_client.call("reschedule_appointment", arguments, key=key())

    asked = move(slots[3]["slot"])
    assert asked.json()["code"] == "confirmation_required"
    code = sent_code(sms_outbox)
    assert f"cambiar su cita {reference} al" in sms_outbox[-1].body
    assert "a las 10:30" in sms_outbox[-1].body

    elsewhere = move(slots[5]["slot"], code)

    assert elsewhere.status_code == 422
    assert elsewhere.json()["code"] == "no_confirmation_pending"
    assert Appointment.objects.get(reference=reference).starts_at.minute == 0  # still 09:00

    done = move(slots[3]["slot"], code)

    assert done.status_code == 200, done.text
    assert (done.json()["appointment"], done.json()["time"]) == (reference, "10:30")


def test_rejecting_a_quote_waits_for_the_customers_code(
    tool_client, company, ana, catalog, make_identified, sms_outbox
):
    make_identified(ana, tool_client.conversation_id)
    confirm_on(company, "reject_quote")
    items = [{"sku": "CAF-001", "quantity": 1}]
    created = tool_client.call(
        "create_quote", {"identifier": ANA_DOCUMENT, "items": items}, key=key()
    )
    reference = created.json()["reference"]
    arguments = {"identifier": ANA_DOCUMENT, "quote": reference, "reason": "Prefiero esperar"}

    asked = tool_client.call("reject_quote", arguments, key=key())

    assert (asked.status_code, asked.json()["code"]) == (403, "confirmation_required")
    assert Quote.objects.get(reference=reference).state == Quote.State.SENT
    assert f"rechazar su presupuesto {reference}" in sms_outbox[-1].body

    done = tool_client.call(
        "reject_quote", {**arguments, "confirmation_code": sent_code(sms_outbox)}, key=key()
    )

    assert (done.status_code, done.json()["state"]) == (200, "rejected")


def test_closing_a_case_waits_for_the_customers_code(ana_client, company, ana, sms_outbox):
    confirm_on(company, "confirm_case_resolved")
    case = support_services.case_open(
        company=company, contact=ana, subject="No enciende", description="La tele no se enciende."
    )
    case = support_services.case_resolve(case=support_services.case_start(case=case))
    assert ana_client.call("list_my_cases", {"identifier": ANA_DOCUMENT}).status_code == 200
    arguments = {"identifier": ANA_DOCUMENT, "case": case.reference}

    asked = ana_client.call("confirm_case_resolved", arguments, key=key())

    assert (asked.status_code, asked.json()["code"]) == (403, "confirmation_required")
    assert Case.objects.get(pk=case.pk).state == Case.State.RESOLVED
    assert f"cerrar su caso {case.reference}" in sms_outbox[-1].body

    done = ana_client.call(
        "confirm_case_resolved",
        {**arguments, "confirmation_code": sent_code(sms_outbox)},
        key=key(),
    )

    assert (done.status_code, done.json()["state"]) == (200, "closed")


def test_a_customer_with_only_an_email_gets_the_code_by_email(
    ana_client, company, ana, marta, frozen_clock, mailoutbox
):
    ana.phone = ""
    ana.save(update_fields=["phone"])
    confirm_on(company, "cancel_appointment")
    reference, _ = booked(ana_client)

    asked = cancel(ana_client, reference)

    assert (asked.json()["channel"], asked.json()["sent_to"]) == ("email", "a***@example.com")
    assert f"anular su cita {reference}" in codes_sent(mailoutbox)[-1].body
    assert cancel(ana_client, reference, sent_code(mailoutbox)).status_code == 200


# --- what the model sends cannot skip it ---------------------------------------------------------


def test_a_code_from_another_conversation_does_nothing(
    ana_client, company, ana, marta, frozen_clock, sms_outbox, make_identified
):
    confirm_on(company, "cancel_appointment")
    reference, _ = booked(ana_client)
    assert cancel(ana_client, reference).json()["code"] == "confirmation_required"
    code = sent_code(sms_outbox)
    other = f"conv-{uuid.uuid4().hex[:8]}"
    make_identified(ana, other)
    listed = ana_client.call(
        "list_my_appointments", {"identifier": ANA_DOCUMENT}, conversation_id=other
    )
    assert listed.status_code == 200

    response = cancel(ana_client, reference, code, conv=other)

    assert (response.status_code, response.json()["code"]) == (422, "no_confirmation_pending")
    assert state(reference) == "scheduled"
    # The code still confirms the request it was sent for, in its own conversation.
    assert cancel(ana_client, reference, code).status_code == 200


def test_a_code_for_another_action_does_nothing(
    ana_client, company, marta, frozen_clock, sms_outbox
):
    confirm_on(company, "cancel_appointment", "reschedule_appointment")
    reference, slots = booked(ana_client)
    move = {"identifier": ANA_DOCUMENT, "appointment": reference, "slot": slots[3]["slot"]}
    assert ana_client.call("reschedule_appointment", move, key=key()).status_code == 403
    code_for_the_move = sent_code(sms_outbox)

    response = cancel(ana_client, reference, code_for_the_move)

    assert (response.status_code, response.json()["code"]) == (422, "no_confirmation_pending")
    assert state(reference) == "scheduled"


def test_a_wrong_code_is_counted_and_the_fifth_locks_the_confirmation(
    ana_client, company, marta, frozen_clock, sms_outbox
):
    confirm_on(company, "cancel_appointment")
    reference, _ = booked(ana_client)
    cancel(ana_client, reference)
    right = sent_code(sms_outbox)
    wrong = f"{(int(right) + 1) % 1_000_000:06d}"

    first = cancel(ana_client, reference, wrong)
    answers = [cancel(ana_client, reference, wrong).json()["code"] for _ in range(4)]

    assert (first.status_code, first.json()["code"], first.json()["attempts_left"]) == (
        422,
        "wrong_code",
        4,
    )
    assert answers == ["wrong_code", "wrong_code", "wrong_code", "verification_locked"]
    assert cancel(ana_client, reference, right).json()["code"] == "verification_locked"
    assert state(reference) == "scheduled"


def test_wrong_confirmation_codes_spend_the_customers_one_budget_of_wrong_codes(
    ana_client, company, marta, frozen_clock, sms_outbox, settings
):
    settings.GARANTE_VERIFICATION_WRONG_CODES_PER_CONTACT = (2, timedelta(hours=24))
    confirm_on(company, "cancel_appointment")
    reference, _ = booked(ana_client)
    cancel(ana_client, reference)
    right = sent_code(sms_outbox)
    wrong = f"{(int(right) + 1) % 1_000_000:06d}"

    assert cancel(ana_client, reference, wrong).json()["code"] == "wrong_code"
    assert cancel(ana_client, reference, wrong).json()["code"] == "verification_locked"

    # The same budget as a verification code's: no step-up code either until it has room.
    step_up = ana_client.call(
        "request_verification_code", {"identifier": ANA_DOCUMENT, "channel": "sms"}, key=key()
    )
    assert (step_up.status_code, step_up.json()["code"]) == (403, "verification_locked")
    assert state(reference) == "scheduled"


def test_an_identity_alarm_voids_a_pending_confirmation(
    ana_client, company, bruno, marta, frozen_clock, sms_outbox
):
    confirm_on(company, "cancel_appointment")
    reference, _ = booked(ana_client)
    cancel(ana_client, reference)
    switched = ana_client.call("list_my_appointments", {"identifier": BRUNO_DOCUMENT}, key=key())
    assert switched.status_code == 403

    response = cancel(ana_client, reference, sent_code(sms_outbox))

    assert (response.status_code, response.json()["code"]) == (422, "code_revoked")
    assert state(reference) == "scheduled"


def test_an_expired_code_does_nothing(ana_client, company, marta, frozen_clock, sms_outbox):
    confirm_on(company, "cancel_appointment")
    reference, _ = booked(ana_client)
    cancel(ana_client, reference)
    VerificationChallenge.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    response = cancel(ana_client, reference, sent_code(sms_outbox))

    assert (response.status_code, response.json()["code"]) == (422, "code_expired")
    assert state(reference) == "scheduled"


def test_a_code_is_used_once(ana_client, company, marta, frozen_clock, sms_outbox):
    confirm_on(company, "reschedule_appointment")
    reference, slots = booked(ana_client)
    move = {"identifier": ANA_DOCUMENT, "appointment": reference, "slot": slots[3]["slot"]}
    back = {**move, "slot": slots[0]["slot"]}
    ana_client.call("reschedule_appointment", move, key=key())
    code = sent_code(sms_outbox)
    assert (
        ana_client.call(
            "reschedule_appointment", {**move, "confirmation_code": code}, key=key()
        ).status_code
        == 200
    )
    ana_client.call("reschedule_appointment", back, key=key())
    back_code = sent_code(sms_outbox)
    assert (
        ana_client.call(
            "reschedule_appointment", {**back, "confirmation_code": back_code}, key=key()
        ).status_code
        == 200
    )

    # The first move again, with its code already used: asked anew, nothing moved.
    again = ana_client.call(
        "reschedule_appointment", {**move, "confirmation_code": code}, key=key()
    )

    assert (again.status_code, again.json()["code"]) == (422, "code_used")
    assert Appointment.objects.get(reference=reference).starts_at.minute == 0


def test_a_record_changed_meanwhile_answers_its_state_and_spends_no_attempt(
    ana_client, company, marta, frozen_clock, sms_outbox
):
    confirm_on(company, "cancel_appointment")
    reference, _ = booked(ana_client)
    cancel(ana_client, reference)
    appointment_cancel(company=company, reference=reference, enforce_cutoff=False)

    response = cancel(ana_client, reference, sent_code(sms_outbox))

    assert response.status_code == 422
    assert (response.json()["code"], response.json()["state"]) == (
        "invalid_transition",
        "cancelled",
    )
    challenge = VerificationChallenge.objects.get()
    assert (challenge.status, challenge.attempts, challenge.consumed_at) == (Status.ACTIVE, 0, None)


def test_a_burst_of_confirmation_requests_meets_the_send_limits(
    ana_client, company, marta, frozen_clock, sms_outbox, settings
):
    limit, _ = settings.GARANTE_VERIFICATION_SENDS_PER_CONVERSATION
    confirm_on(company, "cancel_appointment")
    reference, _ = booked(ana_client)

    answers = [cancel(ana_client, reference).json() for _ in range(limit + 2)]

    assert [a["code"] for a in answers] == ["confirmation_required"] * limit + [
        "too_many_codes"
    ] * 2
    assert answers[-1]["retry_after_seconds"] > 0
    assert len(codes_sent(sms_outbox)) == limit
    # Each request superseded the one before: only the last code works.
    assert VerificationChallenge.objects.filter(status=Status.ACTIVE).count() == 1
    assert state(reference) == "scheduled"


def test_the_confirmed_call_replayed_with_its_key_is_replayed_not_done_again(
    ana_client, company, marta, frozen_clock, sms_outbox
):
    confirm_on(company, "cancel_appointment")
    reference, _ = booked(ana_client)
    cancel(ana_client, reference)
    code, same = sent_code(sms_outbox), key()

    first = cancel(ana_client, reference, code, idempotency_key=same)
    replay = cancel(ana_client, reference, code, idempotency_key=same)

    assert first.status_code == replay.status_code == 200
    assert replay.text == first.text
    assert replay.headers.get("X-Idempotency-Replayed") == "true"
    appointment = Appointment.objects.get(reference=reference)
    cancellations = StateLog.objects.filter(
        content_type=ContentType.objects.get_for_model(Appointment),
        object_id=appointment.pk,
        transition="cancel",
    )
    assert cancellations.count() == 1
    assert len(codes_sent(sms_outbox)) == 1


def test_a_confirmation_answered_without_a_typed_code_lets_the_next_call_act_once(
    ana_client, company, marta, frozen_clock, sms_outbox
):
    """What the one-tap link leaves (the challenge answered, as a right code does): the next
    call of that action, with no code, does it, and uses it up."""
    confirm_on(company, "cancel_appointment")
    reference, _ = booked(ana_client)
    cancel(ana_client, reference)
    VerificationChallenge.objects.update(status=Status.VERIFIED, verified_at=timezone.now())

    done = cancel(ana_client, reference)

    assert (done.status_code, done.json()["state"]) == (200, "cancelled")
    assert VerificationChallenge.objects.get().consumed_at is not None


# --- the one-tap link --------------------------------------------------------------------------

LINK = re.compile(re.escape(PUBLIC_URL) + r"(/v/[A-Za-z0-9_-]{40})")


@pytest.fixture
def by_link(company, settings):
    """The company sends its customers a one-tap link for texts (its step-up's setting)."""
    settings.GARANTE_PUBLIC_URL = PUBLIC_URL
    company.verification_form_sms = Company.VerificationForm.LINK
    company.save()
    caches["shared"].clear()  # the link pages' rate limits
    yield company
    caches["shared"].clear()


def link_sent(outbox) -> str:
    match = LINK.search(outbox[-1].body)
    assert match, outbox[-1].body
    return match.group(1)


def tap(path: str):
    """Open the link's page, then press its one button: (the GET's answer, the POST's)."""
    client = Client()
    page = client.get(path)
    return page, client.post(path, {"form_token": form_token(page.content.decode())})


def test_with_the_company_set_to_link_the_tap_then_the_next_call_cancels(
    ana_client, by_link, marta, frozen_clock, sms_outbox
):
    confirm_on(by_link, "cancel_appointment")
    reference, _ = booked(ana_client)

    asked = cancel(ana_client, reference)

    assert (asked.status_code, asked.json()["code"], asked.json()["sent_as"]) == (
        403,
        "confirmation_required",
        "link",
    )
    assert "le he enviado un enlace" in asked.json()["user_message"]
    body = sms_outbox[-1].body
    assert f"para confirmar que quiere anular su cita {reference}, abra este enlace" in body
    assert "su código es" not in body and not re.search(r"\b\d{6}\b", body)
    path = link_sent(sms_outbox)
    messages = len(sms_outbox)

    # Asked again before the tap: the link already sent stays the one to tap, none is sent.
    waiting = cancel(ana_client, reference)
    # A scanner (or the customer) opening the page does nothing either.
    page = Client().get(path)

    assert (waiting.status_code, waiting.json()["code"]) == (403, "confirmation_required")
    assert "sigue sin pulsarse" in waiting.json()["user_message"]
    assert len(sms_outbox) == messages
    text = visible_text(page.content.decode())
    assert page.status_code == 200 and "Hola, Ana." in text
    assert f"confirmar que quiere anular su cita {reference}" in text
    assert page.content.decode().count("<button") == 1 and "García" not in text
    assert VerificationChallenge.objects.get().status == Status.ACTIVE
    assert state(reference) == "scheduled"

    _page, tapped = tap(path)

    assert tapped.status_code == 200
    assert "Listo, queda confirmado" in visible_text(tapped.content.decode())
    assert state(reference) == "scheduled"  # the tap answers; the model's next call acts
    done = cancel(ana_client, reference)
    assert (done.status_code, done.json()["state"]) == (200, "cancelled")
    challenge = VerificationChallenge.objects.get()
    assert (challenge.status, challenge.sent_as) == (Status.VERIFIED, "link")
    assert challenge.consumed_at is not None
    again = Client().get(path)
    assert again.status_code == 410 and "ya se usó" in visible_text(again.content.decode())


def test_a_tapped_confirmation_does_not_verify_the_conversation(
    ana_client, by_link, marta, frozen_clock, sms_outbox
):
    StepUpPolicy.objects.update_or_create(
        company=by_link,
        defaults={"actions": ["update_contact_details"], "confirm_actions": ["cancel_appointment"]},
    )
    reference, _ = booked(ana_client)
    cancel(ana_client, reference)

    tap(link_sent(sms_outbox))

    status = ana_client.call("verification_status", {"identifier": ANA_DOCUMENT})
    assert status.status_code == 200 and status.json()["verified"] is False
    challenge = VerificationChallenge.objects.get()
    assert challenge.status == Status.VERIFIED
    assert challenge.conversation.verified_until is None
    # A step-up tool still asks for its own verification.
    change = ana_client.call(
        "update_contact_details",
        {"identifier": ANA_DOCUMENT, "email": "ana.nueva@example.org"},
        key=key(),
    )
    assert change.json()["code"] == "verification_required"


def test_with_both_the_message_carries_code_and_link_and_either_confirms_once(
    ana_client, by_link, marta, frozen_clock, sms_outbox
):
    by_link.verification_form_sms = Company.VerificationForm.BOTH
    by_link.save()
    confirm_on(by_link, "cancel_appointment", "reschedule_appointment")
    reference, slots = booked(ana_client)
    move = {"identifier": ANA_DOCUMENT, "appointment": reference, "slot": slots[3]["slot"]}

    asked = ana_client.call("reschedule_appointment", move, key=key())

    assert asked.json()["sent_as"] == "both"
    assert "un código y un enlace" in asked.json()["user_message"]
    body = sms_outbox[-1].body
    assert "su código es" in body and LINK.search(body)
    path = link_sent(sms_outbox)
    _page, tapped = tap(path)
    assert tapped.status_code == 200
    done = ana_client.call("reschedule_appointment", move, key=key())
    assert (done.status_code, done.json()["time"]) == (200, "10:30")

    # The cancellation's code, typed: its link then finds the challenge used.
    cancel(ana_client, reference)
    path = link_sent(sms_outbox)
    assert cancel(ana_client, reference, sent_code(sms_outbox)).status_code == 200
    assert Client().get(path).status_code == 410
    assert state(reference) == "cancelled"


def test_a_code_given_for_a_link_is_refused_and_takes_no_attempt(
    ana_client, by_link, marta, frozen_clock, sms_outbox
):
    confirm_on(by_link, "cancel_appointment")
    reference, _ = booked(ana_client)
    cancel(ana_client, reference)

    response = cancel(ana_client, reference, "123456")

    assert (response.status_code, response.json()["code"]) == (422, "link_sent")
    challenge = VerificationChallenge.objects.get()
    assert (challenge.status, challenge.attempts) == (Status.ACTIVE, 0)
    assert state(reference) == "scheduled"


def test_a_tap_confirms_in_its_own_conversation_only(
    ana_client, ana, by_link, marta, frozen_clock, sms_outbox, make_identified
):
    confirm_on(by_link, "cancel_appointment")
    reference, _ = booked(ana_client)
    cancel(ana_client, reference)
    tap(link_sent(sms_outbox))
    other = f"conv-{uuid.uuid4().hex[:8]}"
    make_identified(ana, other)
    ana_client.call("list_my_appointments", {"identifier": ANA_DOCUMENT}, conversation_id=other)

    elsewhere = cancel(ana_client, reference, conv=other)

    assert (elsewhere.status_code, elsewhere.json()["code"]) == (403, "confirmation_required")
    assert state(reference) == "scheduled"
    # The tapped confirmation still does it in the conversation it was asked in.
    assert cancel(ana_client, reference).status_code == 200


def test_a_record_changed_after_the_tap_answers_its_state_and_keeps_the_confirmation(
    ana_client, company, by_link, marta, frozen_clock, sms_outbox
):
    confirm_on(by_link, "cancel_appointment")
    reference, _ = booked(ana_client)
    cancel(ana_client, reference)
    tap(link_sent(sms_outbox))
    appointment_cancel(company=company, reference=reference, enforce_cutoff=False)

    response = cancel(ana_client, reference)

    assert (response.status_code, response.json()["code"]) == (422, "invalid_transition")
    assert response.json()["state"] == "cancelled"
    challenge = VerificationChallenge.objects.get()
    assert (challenge.status, challenge.consumed_at) == (Status.VERIFIED, None)


def test_an_expired_link_confirms_nothing_and_the_next_call_sends_a_new_one(
    ana_client, by_link, marta, frozen_clock, sms_outbox
):
    confirm_on(by_link, "cancel_appointment")
    reference, _ = booked(ana_client)
    cancel(ana_client, reference)
    path = link_sent(sms_outbox)
    page = Client().get(path)
    VerificationChallenge.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    pressed = Client().post(path, {"form_token": form_token(page.content.decode())})
    asked = cancel(ana_client, reference)

    assert pressed.status_code == 410
    assert "Este enlace caducó" in visible_text(pressed.content.decode())
    assert asked.json()["code"] == "confirmation_required"
    assert link_sent(sms_outbox) != path
    assert state(reference) == "scheduled"


# --- the policy off, and the sandbox -------------------------------------------------------------


def test_without_the_policy_each_action_is_done_at_once_and_sends_nothing(
    ana_client, company, marta, frozen_clock, sms_outbox
):
    assert not StepUpPolicy.objects.filter(company=company).exists()
    reference, _ = booked(ana_client)

    response = cancel(ana_client, reference)

    assert (response.status_code, response.json()["state"]) == (200, "cancelled")
    assert not VerificationChallenge.objects.exists()
    assert codes_sent(sms_outbox) == []


def test_the_default_for_a_new_company_asks_no_confirmation():
    assert StepUpPolicy._meta.get_field("confirm_actions").get_default() == []


def test_the_tools_a_policy_may_name_are_the_four_that_cannot_be_undone():
    assert confirm_choices() == CONFIRMABLE


def test_the_sandbox_never_asks_a_confirmation_of_a_tool_the_checks_call(settings):
    checks = "\n".join(path.read_text() for path in Path("tooling/certification").glob("*.py"))
    called = {name for name in confirm_choices() if f'"{name}"' in checks}
    assert called <= set(CERTIFIED_UNCONFIRMED)

    settings.GARANTE_CONFIRM_DEFAULT_ACTIONS = CONFIRMABLE
    call_command("seed_sandbox", stdout=io.StringIO())

    sandbox = Company.objects.get(slug="sandbox")
    assert StepUpPolicy.objects.get(company=sandbox).confirm_actions == [
        name for name in CONFIRMABLE if name not in CERTIFIED_UNCONFIRMED
    ]


def test_staff_tick_the_actions_their_customers_confirm(client, staff, company):
    client.force_login(staff)

    form = client.get("/admin/core/stepuppolicy/add/").content.decode()
    response = client.post(
        "/admin/core/stepuppolicy/add/",
        {
            "company": company.pk,
            "actions_text": "accept_quote\n",
            "confirm_actions": ["reject_quote", "cancel_appointment"],
        },
    )

    assert all(f'value="{name}"' in form for name in CONFIRMABLE)
    assert response.status_code == 302
    policy = StepUpPolicy.objects.get(company=company)
    assert (policy.actions, policy.confirm_actions) == (
        ["accept_quote"],
        ["cancel_appointment", "reject_quote"],
    )


def test_staff_cannot_tick_a_tool_that_asks_no_confirmation(client, staff, company):
    client.force_login(staff)

    response = client.post(
        "/admin/core/stepuppolicy/add/",
        {"company": company.pk, "actions_text": "", "confirm_actions": ["book_appointment"]},
    )

    assert response.status_code == 200
    assert "book_appointment" in str(response.context["adminform"].form.errors["confirm_actions"])
    assert not StepUpPolicy.objects.exists()


# --- the platform holds a tool to its declaration ------------------------------------------------


class _Nothing(ToolInput):
    pass


def _tool(answer: dict) -> Tool:
    return Tool(
        name="test_confirmable",
        title="t",
        description="d",
        input=_Nothing,
        output=ToolOutput,
        handler=lambda ctx, params: answer,
        write=True,
        confirmation=True,
    )


def test_a_confirmable_tool_that_acted_without_asking_fails_the_call(company):
    ctx = ToolContext(company=company, meta=CallMeta(conversation_id="c"))

    with pytest.raises(RuntimeError, match="without asking the confirmation"):
        handler_run_checked(_tool({"state": "cancelled"}), ctx, _Nothing())

    # An answer that did nothing (an intent already done) asks nothing.
    answer = {"already_done": True}
    assert handler_run_checked(_tool(answer), ctx, _Nothing()) == answer


def test_a_confirmable_tool_must_take_the_code_and_act_for_an_identified_customer():
    with pytest.raises(ValueError, match="confirmation_code"):
        _tool({}).check_declaration()
