"""Guarantees defended by more than one test each (docs/testing.md, the matrix).

Planting a defect in a guarantee (its check removed) showed these were defended by one or two
tests of the fast suite; each test here asserts the behaviour a customer or the Gateway would
notice: the answer's `error_type`, `code` and fields, the rows written, and a message that is
there, non-empty and in the company's language (not its exact words).
"""

import uuid
from typing import Any

import pytest
from django.utils import translation

from core.errors import ValidationFailed
from core.models import Company, Contact, Conversation
from support.models import Case, CaseComment
from support.services import case_open
from tests import factories
from tests.factories import ANA_DOCUMENT
from tooling.context import CallMeta, ToolContext
from tooling.execution import call_tool
from tooling.ledger import LedgerEntry, ledger_record, ledger_resolve, ledger_resolve_owned
from tooling.registry import registry

pytestmark = pytest.mark.django_db


def call(company: Company, conversation: str, name: str, arguments: dict[str, Any]) -> Any:
    meta = CallMeta(conversation_id=conversation, idempotency_key=f"k-{uuid.uuid4().hex}")
    return call_tool(
        registry.get(name), company=company, arguments=arguments, meta=meta, surface="mcp"
    )


def message_of(lazy_message: Any, language: str) -> str:
    """A translatable message as `language` reads it: the tests compare an answer with the
    catalogue's wording of the same message, never with words of their own."""
    with translation.override(language):
        return str(lazy_message)


@pytest.fixture
def ana_case(company: Company, ana: Contact) -> Case:
    return case_open(company=company, contact=ana, subject="No enciende", description="Nada.")


def shown_in(company: Company, ana: Contact, conversation: str) -> Conversation:
    """Conversation `conversation` identified as Ana, having listed her cases."""
    answer = call(company, conversation, "identify_contact", {"document": ANA_DOCUMENT})
    assert answer.is_error is False
    listed = call(company, conversation, "list_my_cases", {"identifier": ANA_DOCUMENT})
    assert listed.is_error is False
    return Conversation.objects.get(company=company, external_id=conversation)


# --- the ledger's conversation scope ---


def test_a_customers_own_case_seen_in_another_conversation_takes_no_comment_here(
    company, ana, ana_case
):
    """The owner check would let Ana comment on her own case; only the ledger knows this
    conversation never showed it."""
    shown_in(company, ana, "conv-where-shown")
    assert call(company, "conv-new", "identify_contact", {"document": ANA_DOCUMENT}).is_error is (
        False
    )

    answer = call(
        company,
        "conv-new",
        "add_case_comment",
        {"identifier": ANA_DOCUMENT, "case": ana_case.reference, "message": "Sigue igual."},
    )

    assert answer.is_error is True
    assert answer.body["error_type"] == "VALIDATION"
    assert answer.body["code"] == "reference_not_seen"
    assert answer.body["user_message"].strip()
    assert ana_case.reference not in answer.body["user_message"]
    assert not CaseComment.objects.filter(case=ana_case).exists()
    # Where it was shown, the same call acts: the refusal above is the ledger's, not another.
    done = call(
        company,
        "conv-where-shown",
        "add_case_comment",
        {"identifier": ANA_DOCUMENT, "case": ana_case.reference, "message": "Sigue igual."},
    )
    assert done.is_error is False
    assert CaseComment.objects.filter(case=ana_case).count() == 1


@pytest.mark.parametrize("language", ["es", "en"])
def test_the_refusal_of_a_reference_seen_elsewhere_speaks_the_companys_language(
    make_company, language
):
    company = make_company(language=language)
    ana = factories.ana(company)
    case = case_open(company=company, contact=ana, subject="Ruido", description="Nada.")
    shown_in(company, ana, "conv-where-shown")
    call(company, "conv-new", "identify_contact", {"document": ANA_DOCUMENT})

    answer = call(
        company,
        "conv-new",
        "add_case_comment",
        {"identifier": ANA_DOCUMENT, "case": case.reference, "message": "Sigue igual."},
    )

    assert (answer.body["error_type"], answer.body["code"]) == ("VALIDATION", "reference_not_seen")
    here = ToolContext(company=company, meta=CallMeta(conversation_id="conv-new"))
    with pytest.raises(ValidationFailed) as refused:
        ledger_resolve(here, "case", case.reference)
    worded = {lang: message_of(refused.value.user_message, lang) for lang in ("es", "en")}
    assert worded["es"] != worded["en"]
    assert answer.body["user_message"] == worded[language]
    assert not CaseComment.objects.filter(case=case).exists()


def test_the_speakers_own_reference_seen_elsewhere_is_not_seen_not_resolved(company, ana):
    """ledger_resolve_owned: owned by the speaker, so no PERMISSION; unseen here, so refused."""
    elsewhere = ToolContext(company=company, meta=CallMeta(conversation_id="conv-a"))
    here = ToolContext(company=company, meta=CallMeta(conversation_id="conv-b"))
    ledger_record(elsewhere, "case", [LedgerEntry("CS-OWNAA2", "Mi caso")])

    with pytest.raises(ValidationFailed) as refused:
        ledger_resolve_owned(
            here, "case", "CS-OWNAA2", contact=ana, owner_of=lambda reference: ana.pk
        )

    assert refused.value.code == "reference_not_seen"
    assert ledger_resolve(elsewhere, "case", "cs-ownaa2").reference == "CS-OWNAA2"


@pytest.mark.parametrize("given", ["AA2", "Mi caso"])
def test_an_ending_or_label_seen_only_in_another_conversation_resolves_nothing(company, given):
    elsewhere = ToolContext(company=company, meta=CallMeta(conversation_id="conv-a"))
    here = ToolContext(company=company, meta=CallMeta(conversation_id="conv-b"))
    ledger_record(elsewhere, "case", [LedgerEntry("CS-OWNAA2", "Mi caso")])

    with pytest.raises(ValidationFailed) as refused:
        ledger_resolve(here, "case", given)

    assert refused.value.code == "reference_not_seen"
    assert ledger_resolve(elsewhere, "case", given).reference == "CS-OWNAA2"
