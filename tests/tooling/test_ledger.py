"""The exposure ledger: a mutation may act only on references its conversation has seen."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from core.errors import Ambiguous, ValidationFailed
from core.references import normalize_reference
from tests.wording import told_in_its_own_words
from tooling.context import CallMeta, ToolContext
from tooling.ledger import (
    LAST_SEEN_RESOLUTION,
    LedgerEntry,
    label_key,
    ledger_record,
    ledger_record_shown,
    ledger_resolve,
    ledger_resolve_owned,
    ledger_show,
)
from tooling.models import ExposedReference
from tooling.output import dumps

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


def test_a_tool_records_what_its_answer_as_sent_shows(company):
    """`ledger_show` is the tool's word; `ledger_record_shown` keeps what the final (capped)
    text still shows, so a reference the cap dropped stays unseen."""
    ctx = context(company, "conv-shown")
    ledger_show(
        ctx, "slot", [LedgerEntry("SL-AAAA11", "2026-12-01 10:00"), LedgerEntry("SL-BBBB22")]
    )
    answer = {"items": [{"slot": "SL-AAAA11"}], "has_more": True, "truncated": True}

    ledger_record_shown(ctx, dumps(answer))

    assert ledger_resolve(ctx, "slot", "SL-AAAA11").label == "2026-12-01 10:00"
    with pytest.raises(ValidationFailed):
        ledger_resolve(ctx, "slot", "SL-BBBB22")
    assert ctx.shown == []  # recorded once


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


def stored(conversation) -> list[dict]:
    """A conversation's ledger rows as stored, but for the row's id and conversation."""
    names = [
        f.attname
        for f in ExposedReference._meta.concrete_fields
        if f.attname not in ("id", "conversation_id")
    ]
    rows = ExposedReference.objects.filter(conversation=conversation).order_by("reference")
    return list(rows.values(*names))


def test_it_stores_what_saving_each_reference_would_store(company, monkeypatch):
    """The ledger writes its rows with its own SQL, without model instances; the rows are the
    ones save() would store, timestamps included."""
    moment = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: moment)
    entries = [
        LedgerEntry("sl-aaaaaa", " 2026-12-01T10:00 ", {"professional": 7, "start": "10:00"}),
        LedgerEntry("AP-BBBBBB", "Ñandú " * 50),  # label longer than the column
        LedgerEntry("CS-CCCCCC"),
    ]
    by_ledger = context(company, "by-ledger")
    ledger_record(by_ledger, "slot", entries)
    by_save = context(company, "by-save")
    for entry in entries:
        ExposedReference(
            company=company,
            conversation=by_save.conversation,
            kind="slot",
            reference=normalize_reference(entry.reference),
            label=entry.label[:200],
            label_key=label_key(entry.label),
            data=entry.data or {},
        ).save()

    assert stored(by_ledger.conversation) == stored(by_save.conversation)
    assert len(stored(by_ledger.conversation)) == 3


def test_recording_again_keeps_when_it_was_first_shown(ctx, monkeypatch):
    first = ExposedReference.objects.get(conversation=ctx.conversation, reference="AP-7K2F9Q")
    later = first.last_seen_at + timedelta(minutes=5)
    monkeypatch.setattr(timezone, "now", lambda: later)

    ledger_record(ctx, "appointment", [LedgerEntry("AP-7K2F9Q", "2026-12-01 10:00")])

    again = ExposedReference.objects.get(pk=first.pk)
    assert (again.created_at, again.last_seen_at) == (first.created_at, later)


def _row_version(row_id: int) -> tuple:
    """What changes whenever the row is written: its values and, on PostgreSQL, the
    transaction that wrote its current version (a rewrite of equal values changes it)."""
    row = ExposedReference.objects.filter(pk=row_id)
    values = tuple(row.values_list("label", "data", "last_seen_at").get())
    if connection.vendor != "postgresql":
        return values
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT xmin::text FROM {ExposedReference._meta.db_table} WHERE id = %s", [row_id]
        )
        return (*values, cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)  # each record commits: xmin tells them apart
def test_a_reference_shown_again_unchanged_soon_after_is_not_written_again(company, monkeypatch):
    ctx = context(company, "conv-again")
    shown = [LedgerEntry("SL-AAAA11", "2026-12-01 10:00", {"professional": "Luis"})]
    ledger_record(ctx, "slot", shown)
    row = ExposedReference.objects.get(conversation=ctx.conversation, reference="SL-AAAA11")
    before = _row_version(row.pk)
    soon = row.last_seen_at + LAST_SEEN_RESOLUTION - timedelta(seconds=1)
    monkeypatch.setattr(timezone, "now", lambda: soon)

    ledger_record(ctx, "slot", [*shown, LedgerEntry("SL-BBBB22", "2026-12-01 10:30")])

    assert _row_version(row.pk) == before
    added = ExposedReference.objects.get(conversation=ctx.conversation, reference="SL-BBBB22")
    assert added.last_seen_at == soon


@pytest.mark.parametrize(
    "again",
    [
        LedgerEntry("SL-AAAA11", "2026-12-01 10:05", {"professional": "Luis"}),
        LedgerEntry("SL-AAAA11", "2026-12-01 10:00", {"professional": "Ana"}),
    ],
    ids=["label", "data"],
)
def test_a_reference_shown_again_changed_is_written_at_once(company, monkeypatch, again):
    ctx = context(company, "conv-changed")
    ledger_record(
        ctx, "slot", [LedgerEntry("SL-AAAA11", "2026-12-01 10:00", {"professional": "Luis"})]
    )
    row = ExposedReference.objects.get(conversation=ctx.conversation, reference="SL-AAAA11")
    soon = row.last_seen_at + timedelta(seconds=1)
    monkeypatch.setattr(timezone, "now", lambda: soon)

    ledger_record(ctx, "slot", [again])

    row.refresh_from_db()
    assert (row.label, row.data, row.last_seen_at) == (again.label, again.data, soon)
    assert ledger_resolve(ctx, "slot", again.label).reference == "SL-AAAA11"


def test_a_labels_key_is_stored_in_one_form_case_spacing_and_the_iso_t_aside():
    """The key is stored with each row: its form is what rows already stored match on."""
    assert label_key("  2026-12-01T10:00   Sala\tA ") == "2026-12-01 10:00 sala a"
    assert label_key("Pantalla rota") == "pantalla rota"
    assert label_key("") == ""
    assert label_key("Ñ" * 300) == "ñ" * 200


def test_a_reference_never_shown_is_refused_in_its_own_words(ctx):
    with pytest.raises(ValidationFailed) as refused:
        ledger_resolve(ctx, "appointment", "AP-ZZZZZZ")

    assert refused.value.code == "reference_not_seen"
    told_in_its_own_words(refused.value)


def test_an_empty_reference_designates_nothing(company, ana):
    ctx = context(company, "conv-empty")
    ledger_record(ctx, "case", [LedgerEntry("CS-AAXXXX", "XXXX")])

    for resolve in (
        lambda: ledger_resolve(ctx, "case", ""),
        # Every non-empty reference is another customer's here: an empty one is nobody's.
        lambda: ledger_resolve_owned(
            ctx, "case", "", contact=ana, owner_of=lambda ref: ana.pk + 1 if ref else None
        ),
    ):
        with pytest.raises(ValidationFailed) as refused:
            resolve()
        assert refused.value.code == "reference_not_seen"
