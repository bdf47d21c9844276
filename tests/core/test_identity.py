"""Identification, ownership, identity-switch alarms and step-up requirements."""

from datetime import timedelta

import pytest
from django.utils import timezone

from core.durable import keeping_evidence
from core.errors import NotFound, PermissionRefused, ValidationFailed
from core.identity import (
    check_owner,
    contact_for_conversation,
    conversation_is_verified,
    identify_contact,
    require_step_up,
)
from core.models import Company, Conversation, SecurityEvent, StepUpPolicy
from core.services import contact_create
from tests.factories import ANA_DOCUMENT, ANA_PHONE, BRUNO_DOCUMENT, BRUNO_EMAIL, BRUNO_PHONE

pytestmark = pytest.mark.django_db


def events(conversation, kind=None):
    queryset = SecurityEvent.objects.filter(
        company=conversation.company, conversation_key=conversation.external_id
    )
    return queryset.filter(kind=kind) if kind else queryset


def verify(conversation, minutes=15):
    now = timezone.now()
    Conversation.objects.filter(pk=conversation.pk).update(
        verified_at=now, verified_until=now + timedelta(minutes=minutes)
    )
    conversation.refresh_from_db()


@pytest.mark.parametrize(
    ("kind", "value"),
    [("document", "12.345.678-z"), ("phone", "+34 600 11 12 22"), ("email", " ANA@example.com")],
)
def test_it_identifies_a_contact_by_any_normalised_identifier(conversation, ana, kind, value):
    before = timezone.now()
    contact = identify_contact(conversation=conversation, kind=kind, value=value)

    conversation.refresh_from_db()
    assert contact == ana
    assert conversation.contact == ana
    assert conversation.identified_via == kind
    assert before <= conversation.identified_at <= timezone.now()


def test_an_unknown_identifier_is_not_found_and_counted(conversation, ana):
    with pytest.raises(NotFound):
        identify_contact(conversation=conversation, kind="document", value="Y7654321G")

    assert events(conversation, SecurityEvent.Kind.IDENTIFICATION_FAILED).count() == 1


def test_another_companys_contact_is_not_found(conversation, other_company):
    contact_create(company=other_company, first_name="Zoe", document_number=ANA_DOCUMENT)

    with pytest.raises(NotFound):
        identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT)


def test_repeated_failures_are_rate_limited_even_for_a_real_identifier(conversation, ana):
    for _ in range(5):
        with pytest.raises(NotFound):
            identify_contact(conversation=conversation, kind="phone", value="600999888")

    with pytest.raises(PermissionRefused) as refused:
        identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT)

    assert refused.value.code == "too_many_attempts"
    assert 0 < refused.value.extras["retry_after_seconds"] <= 15 * 60 + 1
    conversation.refresh_from_db()
    assert conversation.contact is None


def test_failures_of_another_conversation_do_not_count(company, conversation, ana):
    other = Conversation.objects.create(company=company, external_id="conv-2")
    for _ in range(5):
        with pytest.raises(NotFound):
            identify_contact(conversation=other, kind="phone", value="600999888")

    assert identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT) == ana


def test_identifying_as_someone_else_is_an_alarm_and_drops_verification(conversation, ana, bruno):
    identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT)
    verify(conversation)

    with pytest.raises(PermissionRefused) as refused:
        identify_contact(conversation=conversation, kind="email", value=BRUNO_EMAIL)

    assert refused.value.code == "identity_switch"
    event = events(conversation, SecurityEvent.Kind.IDENTITY_SWITCH).get()
    assert (event.contact, event.claimed_contact) == (ana, bruno)
    conversation.refresh_from_db()
    assert conversation.contact == ana
    assert not conversation_is_verified(conversation)


def test_the_identified_contacts_own_identifiers_resolve_to_it(conversation, ana):
    identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT)

    for identifier in ("12345678z", ANA_PHONE, "Ana@Example.com"):
        assert contact_for_conversation(conversation=conversation, identifier=identifier) == ana


def test_an_unidentified_conversation_is_refused(conversation, ana):
    with pytest.raises(PermissionRefused) as refused:
        contact_for_conversation(conversation=conversation, identifier=ANA_DOCUMENT)

    assert refused.value.code == "identification_required"


def test_another_contacts_identifier_mid_conversation_is_an_alarm(conversation, ana, bruno):
    identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT)
    verify(conversation)
    assert conversation_is_verified(conversation)

    with pytest.raises(PermissionRefused) as refused:
        contact_for_conversation(conversation=conversation, identifier=BRUNO_DOCUMENT)

    assert refused.value.code == "identity_mismatch"  # as for nobody's: see the next test
    assert events(conversation, SecurityEvent.Kind.IDENTITY_SWITCH).get().claimed_contact == bruno
    assert not conversation_is_verified(conversation)


def test_probing_identifiers_through_a_tool_tells_nothing_and_is_limited(conversation, ana, bruno):
    """Every tool taking an identifier answered "someone else's" apart from "nobody's", and
    without a limit: a way to learn which documents, phones and emails are customers'."""
    identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT)
    conversation.company.identify_failures_per_conversation = 4

    answers = []
    for identifier in [BRUNO_DOCUMENT, "Y7654321G", BRUNO_PHONE, "+34699999999", BRUNO_DOCUMENT]:
        with pytest.raises(PermissionRefused) as refused:
            contact_for_conversation(conversation=conversation, identifier=identifier)
        answers.append(refused.value.code)

    assert answers == ["identity_mismatch"] * 4 + ["too_many_attempts"]
    kinds = events(conversation).values_list("kind", flat=True).order_by("created_at")
    assert list(kinds) == ["identity_switch", "identifier_mismatch"] * 2
    assert contact_for_conversation(conversation=conversation, identifier=ANA_DOCUMENT) == ana


def test_an_identifier_of_nobody_is_refused_and_recorded(conversation, ana):
    identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT)

    with pytest.raises(PermissionRefused) as refused:
        contact_for_conversation(conversation=conversation, identifier="Y7654321G")

    assert refused.value.code == "identity_mismatch"
    assert events(conversation, SecurityEvent.Kind.IDENTIFIER_MISMATCH).count() == 1


def test_garbage_is_a_validation_error(conversation, ana):
    identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT)

    with pytest.raises(ValidationFailed):
        contact_for_conversation(conversation=conversation, identifier="¿?")


def test_the_alarm_survives_the_rollback_of_the_failing_call(conversation, ana, bruno):
    """A tool call's transaction is rolled back on error; the evidence must stay."""
    identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT)
    with pytest.raises(PermissionRefused):
        keeping_evidence(
            lambda: contact_for_conversation(conversation=conversation, identifier=BRUNO_DOCUMENT)
        )

    assert events(conversation, SecurityEvent.Kind.IDENTITY_SWITCH).count() == 1


def test_check_owner_refuses_another_contacts_entity(ana, bruno):
    check_owner(contact=ana, owner_id=ana.pk)

    with pytest.raises(PermissionRefused) as refused:
        check_owner(contact=ana, owner_id=bruno.pk)

    assert refused.value.code == "not_owner"


def test_default_policy_needs_step_up_to_accept_a_quote(conversation, ana):
    identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT)

    with pytest.raises(PermissionRefused) as refused:
        require_step_up(conversation=conversation, action="accept_quote")
    require_step_up(conversation=conversation, action="cancel_appointment")

    assert refused.value.code == "verification_required"
    verify(conversation)
    require_step_up(conversation=conversation, action="accept_quote")


def test_an_expired_verification_does_not_count(conversation, ana):
    identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT)
    verify(conversation, minutes=-1)

    with pytest.raises(PermissionRefused):
        require_step_up(conversation=conversation, action="update_contact_details")


def test_a_companys_policy_decides_which_actions_need_step_up(company, conversation, ana):
    StepUpPolicy.objects.create(company=company, actions=["cancel_appointment"])
    identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT)

    require_step_up(conversation=conversation, action="accept_quote")
    with pytest.raises(PermissionRefused):
        require_step_up(conversation=conversation, action="cancel_appointment")


def at_the_conversation_limit(conversation, ana, bruno):
    """An identified, verified conversation whose one allowed failure is spent, verified again
    after it (the failure voided the first verification)."""
    identify_contact(conversation=conversation, kind="document", value=ANA_DOCUMENT)
    Company.objects.filter(pk=conversation.company_id).update(identify_failures_per_conversation=1)
    conversation.refresh_from_db()
    with pytest.raises(PermissionRefused) as refused:
        contact_for_conversation(conversation=conversation, identifier="Y7654321G")
    assert refused.value.code == "identity_mismatch"
    verify(conversation)
    assert conversation_is_verified(conversation)


def named_in_a_tool(conversation, identifier):
    contact_for_conversation(conversation=conversation, identifier=identifier)


def named_to_identify(conversation, identifier):
    identify_contact(conversation=conversation, kind="document", value=identifier)


@pytest.mark.parametrize("naming", [named_in_a_tool, named_to_identify])
@pytest.mark.parametrize("identifier", [BRUNO_DOCUMENT, "Z1111111D"], ids=["bruno", "nobody"])
@pytest.mark.django_db(transaction=True)
def test_at_the_limit_another_identifier_still_voids_the_verification(
    conversation, ana, bruno, naming, identifier
):
    """The limit answers before the identifier is looked up and records no failure, so the
    failure's own event cannot void the verification: an event of its own does, durably
    (the refused call's transaction rolls back), whoever the identifier is."""
    at_the_conversation_limit(conversation, ana, bruno)

    with pytest.raises(PermissionRefused) as refused:
        keeping_evidence(lambda: naming(conversation, identifier))

    assert refused.value.code == "too_many_attempts"
    assert events(conversation, SecurityEvent.Kind.VERIFICATION_VOIDED).count() == 1
    conversation.refresh_from_db()
    assert not conversation_is_verified(conversation)
    # The customer's own identifier is no guess: still theirs, and a new code verifies again.
    assert contact_for_conversation(conversation=conversation, identifier=ANA_DOCUMENT) == ana


def test_at_the_limit_without_a_verification_nothing_is_voided(conversation, ana, bruno):
    at_the_conversation_limit(conversation, ana, bruno)
    Conversation.objects.filter(pk=conversation.pk).update(verified_until=None)
    conversation.refresh_from_db()

    with pytest.raises(PermissionRefused) as refused:
        contact_for_conversation(conversation=conversation, identifier=BRUNO_DOCUMENT)

    assert refused.value.code == "too_many_attempts"
    assert not events(conversation, SecurityEvent.Kind.VERIFICATION_VOIDED).exists()


@pytest.mark.django_db(transaction=True)  # the limit is checked again on a connection of its own
def test_a_voided_verification_counts_towards_no_limit(conversation, ana, bruno):
    """It records a refusal, not a guess: once the one failure leaves the window, the
    conversation may try again though the void is still in it."""
    at_the_conversation_limit(conversation, ana, bruno)
    with pytest.raises(PermissionRefused):
        contact_for_conversation(conversation=conversation, identifier=BRUNO_DOCUMENT)
    assert events(conversation, SecurityEvent.Kind.VERIFICATION_VOIDED).count() == 1

    window = timedelta(minutes=conversation.company.identify_conversation_window_minutes)
    events(conversation, SecurityEvent.Kind.IDENTIFIER_MISMATCH).update(
        created_at=timezone.now() - window - timedelta(minutes=1)
    )
    with pytest.raises(PermissionRefused) as refused:
        contact_for_conversation(conversation=conversation, identifier=BRUNO_DOCUMENT)

    assert refused.value.code == "identity_mismatch"
