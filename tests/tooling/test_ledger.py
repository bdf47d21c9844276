"""The exposure ledger: a mutation may act only on references its conversation has seen."""

import pytest

from core.errors import Ambiguous, ValidationFailed
from tooling.context import CallMeta, ToolContext
from tooling.ledger import LedgerEntry, ledger_record, ledger_resolve

pytestmark = pytest.mark.django_db


def context(company, conversation_id="conv-1"):
    return ToolContext(company=company, meta=CallMeta(conversation_id=conversation_id))


@pytest.fixture
def ctx(company):
    ctx = context(company)
    ledger_record(
        ctx,
        "appointment",
        [
            LedgerEntry("AP-7K2F9Q", "2026-12-01 10:00", {"professional": "Luis"}),
            LedgerEntry("AP-3M8H9Q", "2026-12-01 11:00"),
            LedgerEntry("AP-4TT2ZX", "2026-12-02 10:00"),
        ],
    )
    return ctx


def test_a_reference_never_shown_is_refused(ctx):
    with pytest.raises(ValidationFailed) as refused:
        ledger_resolve(ctx, "appointment", "AP-ZZZZZZ")

    assert refused.value.code == "reference_not_seen"


def test_an_exact_reference_resolves_with_its_data(ctx):
    entry = ledger_resolve(ctx, "appointment", " ap-7k2f9q ")

    assert entry.reference == "AP-7K2F9Q"
    assert entry.label == "2026-12-01 10:00"
    assert entry.data == {"professional": "Luis"}


def test_a_unique_suffix_resolves(ctx):
    assert ledger_resolve(ctx, "appointment", "2zx").reference == "AP-4TT2ZX"


def test_a_label_resolves(ctx):
    assert ledger_resolve(ctx, "appointment", "2026-12-01T11:00").reference == "AP-3M8H9Q"


def test_a_suffix_shared_by_several_is_ambiguous_with_only_references_and_labels(ctx):
    with pytest.raises(Ambiguous) as ambiguous:
        ledger_resolve(ctx, "appointment", "9Q")

    assert ambiguous.value.extras["candidates"] == [
        {"reference": "AP-7K2F9Q", "label": "2026-12-01 10:00"},
        {"reference": "AP-3M8H9Q", "label": "2026-12-01 11:00"},
    ]


def test_a_label_shared_by_several_is_ambiguous(ctx):
    ledger_record(ctx, "appointment", [LedgerEntry("AP-9XXXXX", "2026-12-01 10:00")])

    with pytest.raises(Ambiguous) as ambiguous:
        ledger_resolve(ctx, "appointment", "2026-12-01 10:00")

    assert {c["reference"] for c in ambiguous.value.extras["candidates"]} == {
        "AP-7K2F9Q",
        "AP-9XXXXX",
    }


def test_the_exact_reference_wins_over_suffixes(ctx):
    ledger_record(ctx, "appointment", [LedgerEntry("X-AP-7K2F9Q")])

    assert ledger_resolve(ctx, "appointment", "AP-7K2F9Q").reference == "AP-7K2F9Q"


def test_another_conversation_has_not_seen_it(ctx, company):
    with pytest.raises(ValidationFailed):
        ledger_resolve(context(company, "conv-2"), "appointment", "AP-7K2F9Q")


def test_another_company_with_the_same_conversation_id_has_not_seen_it(ctx, other_company):
    with pytest.raises(ValidationFailed):
        ledger_resolve(context(other_company, "conv-1"), "appointment", "AP-7K2F9Q")


def test_another_kind_is_not_confused(ctx):
    with pytest.raises(ValidationFailed):
        ledger_resolve(ctx, "quote", "AP-7K2F9Q")


def test_recording_again_refreshes_the_label_and_data(ctx):
    ledger_record(ctx, "appointment", [LedgerEntry("AP-7K2F9Q", "2026-12-03 09:00", {"n": 2})])

    entry = ledger_resolve(ctx, "appointment", "2026-12-03 09:00")
    assert (entry.reference, entry.data) == ("AP-7K2F9Q", {"n": 2})
    with pytest.raises(ValidationFailed):
        ledger_resolve(ctx, "appointment", "2026-12-01 10:00")


def test_a_single_character_is_not_a_reference(ctx):
    with pytest.raises(ValidationFailed):
        ledger_resolve(ctx, "appointment", "X")
