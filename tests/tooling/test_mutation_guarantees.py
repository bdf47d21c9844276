"""Guarantees defended by more than one test each (docs/testing.md, the matrix).

Planting a defect in a guarantee (its check removed) showed these were defended by one or two
tests of the fast suite; each test here asserts the behaviour a customer or the Gateway would
notice: the answer's `error_type`, `code` and fields, the rows written, and a message that is
there, non-empty and in the company's language (not its exact words).
"""

import base64
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone, translation

from core.durable import keeping_evidence
from core.errors import Ambiguous, Conflict, NotFound, PermissionRefused, ValidationFailed
from core.idempotency.engine import idempotency_records_purge, idempotent_execute, in_progress
from core.identity import identify_contact
from core.identity.ownership import (
    check_owner,
    contact_for_conversation,
    identification_required,
    identified_contact,
    identity_changed,
)
from core.models import Company, Contact, Conversation, IdempotencyRecord, SecurityEvent
from core.services import gateway_credential_issue
from sales.models import OPPORTUNITY_STATE_LABELS
from sales.money import STORED_AMOUNT_LIMIT
from sales.services import (
    opportunity_create,
    opportunity_lose,
    opportunity_qualify,
    opportunity_win,
)
from sales.services.catalog import price_list_item_set, product_create
from sales.services.quote_guards import quote_lock, quote_opportunity_locked
from sales.services.quote_lifecycle import quote_create
from sales.services.quote_pricing import (
    MAX_LINE_QUANTITY,
    MAX_QUOTE_LINES,
    QuoteItem,
    check_expected_total,
    quote_total_compute,
)
from support.models import CUSTOMER_STATE_LABELS, Case, CaseComment
from support.services import case_close, case_open, case_resolve, case_start
from tests import factories
from tests.factories import ANA_DOCUMENT
from tests.wording import message_of, told_in_its_own_words
from tooling.context import CallMeta, ToolContext
from tooling.execution import call_tool
from tooling.ledger import (
    MAX_CANDIDATES,
    LedgerEntry,
    ledger_record,
    ledger_resolve,
    ledger_resolve_owned,
)
from tooling.output import MAX_CURSOR_START, capped, cursor_start, dumps, listing
from tooling.registry import registry

pytestmark = pytest.mark.django_db


def call(company: Company, conversation: str, name: str, arguments: dict[str, Any]) -> Any:
    meta = CallMeta(conversation_id=conversation, idempotency_key=f"k-{uuid.uuid4().hex}")
    return call_tool(
        registry.get(name), company=company, arguments=arguments, meta=meta, surface="mcp"
    )


def at_instant(monkeypatch: pytest.MonkeyPatch, instant: datetime) -> None:
    """The clock (django.utils.timezone.now, which the engine and the limits read) at
    `instant` for the rest of the test."""
    monkeypatch.setattr(timezone, "now", lambda: instant)


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


# --- the owner check and the other refusals of ownership ---


@pytest.mark.parametrize(
    ("refusal", "code"),
    [
        (identification_required, "identification_required"),
        (identity_changed, "identity_switch"),
    ],
)
def test_the_refusals_of_identity_say_why_in_the_companys_language(refusal, code):
    error = refusal()

    assert (error.error_type, error.code) == ("PERMISSION", code)
    told_in_its_own_words(error)


@pytest.mark.parametrize("owner", ["another", "nobody"])
def test_the_owner_check_refuses_what_is_not_the_speakers(ana, bruno, owner):
    owner_id = bruno.pk if owner == "another" else None

    with pytest.raises(PermissionRefused) as refused:
        check_owner(contact=ana, owner_id=owner_id)

    assert (refused.value.error_type, refused.value.code) == ("PERMISSION", "not_owner")
    assert refused.value.extras == {}  # nothing about whose it is
    told_in_its_own_words(refused.value)
    check_owner(contact=ana, owner_id=ana.pk)  # the speaker's own passes


def test_an_identifier_of_somebody_else_is_refused_in_its_own_words(company, ana, bruno, ana_conv):
    with pytest.raises(PermissionRefused) as refused:
        contact_for_conversation(conversation=ana_conv, identifier=bruno.document_number)

    assert refused.value.code == "identity_mismatch"
    told_in_its_own_words(refused.value)
    event = SecurityEvent.objects.get(company=company, conversation_key=ana_conv.external_id)
    assert (event.kind, event.contact, event.claimed_contact) == (
        SecurityEvent.Kind.IDENTITY_SWITCH,
        ana,
        bruno,
    )
    assert event.detail == {"read_as": ["document"]}
    assert event.identifier_digest  # which value, without the value
    assert bruno.document_number not in str(event.detail)
    with pytest.raises(PermissionRefused) as unidentified:
        identified_contact(Conversation.objects.create(company=company, external_id="conv-anon"))
    assert unidentified.value.code == "identification_required"


# --- the server-decided totals ---


def priced(company: Company, price_list: Any, items: list[tuple[str, int]]) -> Any:
    return quote_total_compute(
        company=company,
        price_list=price_list,
        items=[QuoteItem(sku=sku, quantity=quantity) for sku, quantity in items],
    )


def test_fifty_distinct_products_make_one_quote_and_fifty_one_are_too_many(company, catalog):
    fifty = [(f"NO-{n:03d}", 1) for n in range(MAX_QUOTE_LINES)]

    with pytest.raises(NotFound) as unknown:  # counted, then looked up
        priced(company, catalog.price_list, fifty)
    with pytest.raises(ValidationFailed) as too_many:
        priced(company, catalog.price_list, [*fifty, ("NO-999", 1)])

    assert unknown.value.code == "product_not_found"
    assert too_many.value.code == "too_many_items"
    assert str(MAX_QUOTE_LINES) in str(too_many.value.user_message)


def test_a_quote_of_nothing_is_refused(company, catalog):
    with pytest.raises(ValidationFailed) as refused:
        priced(company, catalog.price_list, [])

    assert refused.value.code == "no_items"
    assert str(refused.value.user_message).strip()


@pytest.fixture
def big_ticket(company: Company, catalog: Any) -> Any:
    """Two untaxed products whose prices add up to the stored-amount limit at 10,000 units."""
    limit_per_unit = STORED_AMOUNT_LIMIT / MAX_LINE_QUANTITY
    products = []
    for sku, price in (("BIG-1", limit_per_unit / 2), ("BIG-2", limit_per_unit / 2)):
        product = product_create(company=company, sku=sku, name=sku, tax_rate=Decimal(0))
        price_list_item_set(price_list=catalog.price_list, product=product, unit_price=price)
        products.append(product)
    return catalog.price_list


def test_a_grand_total_at_the_stored_amount_limit_is_refused_though_each_line_fits(
    company, big_ticket
):
    with pytest.raises(ValidationFailed) as refused:
        priced(company, big_ticket, [("BIG-1", MAX_LINE_QUANTITY), ("BIG-2", MAX_LINE_QUANTITY)])

    assert refused.value.code == "amount_too_large"
    half = priced(company, big_ticket, [("BIG-1", MAX_LINE_QUANTITY)])
    assert half.total == STORED_AMOUNT_LIMIT / 2


def test_a_grand_total_just_under_the_limit_is_priced(company, big_ticket):
    totals = priced(
        company, big_ticket, [("BIG-1", MAX_LINE_QUANTITY), ("BIG-2", MAX_LINE_QUANTITY - 1)]
    )

    assert totals.total == STORED_AMOUNT_LIMIT - STORED_AMOUNT_LIMIT / MAX_LINE_QUANTITY / 2
    assert totals.total == totals.subtotal + totals.tax
    assert [line.quantity for line in totals.lines] == [MAX_LINE_QUANTITY, MAX_LINE_QUANTITY - 1]


@pytest.mark.parametrize("expected", ["", "abc", "NaN", "Infinity", "12.49", "12.51", "-12.50"])
def test_a_total_that_is_not_ours_exactly_is_refused_with_ours(expected):
    with pytest.raises(ValidationFailed) as refused:
        check_expected_total(expected, Decimal("12.50"), "EUR")

    assert refused.value.code == "total_mismatch"
    assert refused.value.extras == {"total": "12.50", "currency": "EUR"}
    assert str(refused.value.user_message).strip()


@pytest.mark.parametrize("expected", [None, "12.5", "12.50", "12.500", Decimal("12.50")])
def test_our_total_in_any_spelling_or_none_passes(expected):
    check_expected_total(expected, Decimal("12.50"), "EUR")


# --- the ledger's loose references: ambiguity, its order and its cap ---


def seen_alike(company: Company, count: int) -> ToolContext:
    """A conversation shown `count` cases with one label, recorded in no particular order."""
    ctx = ToolContext(company=company, meta=CallMeta(conversation_id="conv-alike"))
    references = [f"CS-{n:02d}ZZZZ" for n in range(count)]
    entries = [LedgerEntry(r, "Pantalla rota") for r in reversed(references)]
    ledger_record(ctx, "case", entries)
    return ctx


@pytest.mark.parametrize("count", [2, MAX_CANDIDATES, MAX_CANDIDATES + 1, MAX_CANDIDATES + 5])
def test_a_label_several_share_is_ambiguous_listing_at_most_ten_in_reference_order(company, count):
    ctx = seen_alike(company, count)

    with pytest.raises(Ambiguous) as ambiguous:
        ledger_resolve(ctx, "case", "pantalla  ROTA")

    assert (ambiguous.value.error_type, ambiguous.value.code) == (
        "AMBIGUOUS",
        "ambiguous_reference",
    )
    expected = [f"CS-{n:02d}ZZZZ" for n in range(min(count, MAX_CANDIDATES))]
    assert ambiguous.value.extras["candidates"] == [
        {"reference": r, "label": "Pantalla rota"} for r in expected
    ]
    worded = {lang: message_of(ambiguous.value.user_message, lang) for lang in ("es", "en")}
    assert worded["es"].strip() and worded["en"].strip() and worded["es"] != worded["en"]


def test_candidates_come_by_label_then_reference(company):
    ctx = ToolContext(company=company, meta=CallMeta(conversation_id="conv-order"))
    ledger_record(
        ctx,
        "case",
        [
            LedgerEntry("CS-BBBB77", "b"),
            LedgerEntry("CS-AAAA77", "c"),
            LedgerEntry("CS-CCCC77", "a"),
            LedgerEntry("CS-DDDD77", "b"),
        ],
    )

    with pytest.raises(Ambiguous) as ambiguous:
        ledger_resolve(ctx, "case", "77")

    assert [c["reference"] for c in ambiguous.value.extras["candidates"]] == [
        "CS-CCCC77",
        "CS-BBBB77",
        "CS-DDDD77",
        "CS-AAAA77",
    ]


def test_one_character_is_no_reference_ending(company):
    ctx = seen_alike(company, 1)

    with pytest.raises(ValidationFailed) as refused:
        ledger_resolve(ctx, "case", "Z")

    assert refused.value.code == "reference_not_seen"
    assert ledger_resolve(ctx, "case", "ZZ").reference == "CS-00ZZZZ"


# --- the terminal-state guards: a closed case, through the tools ---


@pytest.mark.parametrize("language", ["es", "en"])
@pytest.mark.parametrize("tool", ["report_case_not_fixed", "confirm_case_resolved"])
def test_a_closed_case_refuses_the_customers_transitions_with_its_state(
    make_company, language, tool
):
    company = make_company(language=language)
    ana = factories.ana(company)
    case = case_open(company=company, contact=ana, subject="Ruido", description="Nada.")
    case = case_close(case=case_resolve(case=case_start(case=case)), contact=ana)
    shown_in(company, ana, "conv-closed")

    arguments = {"identifier": ANA_DOCUMENT, "case": case.reference}
    if tool == "report_case_not_fixed":
        arguments["message"] = "Sigue igual."

    answer = call(company, "conv-closed", tool, arguments)

    assert answer.is_error is True
    body = answer.body
    assert (body["error_type"], body["code"], body["state"]) == (
        "VALIDATION",
        "case_closed",
        "closed",
    )
    labels = {lang: message_of(CUSTOMER_STATE_LABELS["closed"], lang) for lang in ("es", "en")}
    assert labels["es"] != labels["en"]
    assert body["state_label"] == labels[language]
    assert body["user_message"].strip()
    case.refresh_from_db()
    assert case.state == Case.State.CLOSED
    assert not CaseComment.objects.filter(case=case).exists()


# --- the terminal-state guards: a won or lost opportunity ---


@pytest.mark.parametrize("language", ["es", "en"])
def test_a_won_opportunity_cannot_be_lost_and_says_so_in_the_companys_language(
    make_company, language
):
    company = make_company(language=language)
    opportunity = opportunity_win(
        opportunity=opportunity_create(
            company=company, contact=factories.ana(company), title="Cafetera"
        )
    )
    closed_at = opportunity.closed_at

    with translation.override(language), pytest.raises(ValidationFailed) as refused:
        opportunity_lose(opportunity=opportunity, reason="precio")

    assert (refused.value.code, refused.value.extras["state"]) == ("invalid_state", "won")
    labels = {lang: message_of(OPPORTUNITY_STATE_LABELS["won"], lang) for lang in ("es", "en")}
    assert labels["es"] != labels["en"]
    assert refused.value.extras["state_label"] == labels[language]
    assert str(refused.value.user_message).strip()
    opportunity.refresh_from_db()
    assert (opportunity.state, opportunity.closed_at, opportunity.lost_reason) == (
        "won",
        closed_at,
        "",
    )


def test_a_lost_opportunity_keeps_its_reason_and_date_when_asked_to_move_again(company, ana):
    opportunity = opportunity_lose(
        opportunity=opportunity_create(company=company, contact=ana, title="Molinillo"),
        reason="precio",
    )
    closed_at = opportunity.closed_at

    for move in (opportunity_win, opportunity_qualify):
        with pytest.raises(ValidationFailed) as refused:
            move(opportunity=opportunity)
        assert (refused.value.code, refused.value.extras["state"]) == ("invalid_state", "lost")

    opportunity.refresh_from_db()
    assert (opportunity.state, opportunity.closed_at, opportunity.lost_reason) == (
        "lost",
        closed_at,
        "precio",
    )


# --- the output cap ---


def test_a_result_exactly_at_the_cap_is_kept_and_one_character_more_is_not(settings):
    limit = settings.GARANTE_OUTPUT_MAX_CHARS
    fits = {"text": "x" * (limit - len(dumps({"text": ""})))}

    kept, text = capped(fits)
    over, over_text = capped({"text": fits["text"] + "x"})

    assert (kept, text) == (fits, dumps(fits)) and len(text) == limit
    assert over["truncated"] is True and set(over) == {"truncated", "message"}
    assert over_text == dumps(over) and len(over_text) <= limit
    worded = {}
    for language in ("es", "en"):
        with translation.override(language):
            worded[language] = capped({"text": fits["text"] + "x"})[0]["message"]
    assert worded["es"].strip() and worded["es"] != worded["en"]


def test_a_listing_over_the_cap_keeps_the_longest_head_that_fits(settings):
    limit = settings.GARANTE_OUTPUT_MAX_CHARS
    items = [{"reference": f"CS-{n:04d}AA", "label": "y" * 150} for n in range(40)]

    body, text = capped(listing(items, has_more=False))

    kept = body["items"]
    assert kept == items[: len(kept)] and 0 < len(kept) < len(items)
    assert (body["count"], body["has_more"], body["truncated"]) == (len(kept), True, True)
    assert text == dumps(body) and len(text) <= limit
    one_more = dict(body, items=items[: len(kept) + 1], count=len(kept) + 1)
    assert len(dumps(one_more)) > limit


def test_the_last_cursor_reaches_the_deepest_row_and_no_further():
    three = [{"n": n} for n in range(3)]

    deepest = listing(three, has_more=True, start=MAX_CURSOR_START - 3)
    past = listing(three, has_more=True, start=MAX_CURSOR_START - 2)

    assert cursor_start(deepest["next_cursor"]) == MAX_CURSOR_START
    assert past["next_cursor"] is None
    with pytest.raises(ValidationFailed) as refused:
        cursor_start(base64.urlsafe_b64encode(f"p{MAX_CURSOR_START + 1}".encode()).decode())
    assert (refused.value.code, refused.value.extras) == ("invalid_cursor", {"field": "cursor"})


# --- the identification limits, in the fast suite ---


def test_an_enumeration_through_identify_contact_stops_at_the_conversations_limit(company, ana):
    """The limit refuses even the right identifier once the conversation guessed too often,
    with the wait; the conversation stays anonymous and each guess is on record."""
    guesses = ["00000000T", "11111111H", "22222222J", "33333333P", "44444444A"]
    assert len(guesses) == company.identify_failures_per_conversation
    for guess in guesses:
        answer = call(company, "conv-enum", "identify_contact", {"document": guess})
        assert (answer.is_error, answer.body["code"]) == (True, "contact_not_found")

    answer = call(company, "conv-enum", "identify_contact", {"document": ANA_DOCUMENT})

    assert answer.is_error is True
    assert (answer.body["error_type"], answer.body["code"]) == ("PERMISSION", "too_many_attempts")
    window = company.identify_conversation_window_minutes * 60
    assert 0 < answer.body["retry_after_seconds"] <= window + 1
    assert answer.body["user_message"].strip()
    bound = Conversation.objects.filter(company=company, external_id="conv-enum")
    assert not bound.exclude(contact=None).exists()
    recorded = SecurityEvent.objects.filter(company=company, conversation_key="conv-enum")
    assert recorded.count() == len(guesses)


def test_past_the_limit_a_tool_refuses_other_identifiers_but_not_the_speakers(
    ana_conv, ana, monkeypatch
):
    company = ana_conv.company
    for n in range(company.identify_failures_per_conversation):
        with pytest.raises(PermissionRefused) as refused:
            contact_for_conversation(conversation=ana_conv, identifier=f"nadie{n}@example.com")
        assert refused.value.code == "identity_mismatch"
    # The failures at one instant, the next guess ten seconds later: the wait is what is left
    # of the conversation's window for the oldest of them, rounded up.
    failed_at = timezone.now()
    SecurityEvent.objects.filter(conversation_key=ana_conv.external_id).update(created_at=failed_at)
    at_instant(monkeypatch, failed_at + timedelta(seconds=10))

    with pytest.raises(PermissionRefused) as limited:
        contact_for_conversation(conversation=ana_conv, identifier="otro@example.com")

    assert limited.value.code == "too_many_attempts"
    window = company.identify_conversation_window_minutes * 60
    assert limited.value.extras == {"retry_after_seconds": window - 10 + 1}
    assert contact_for_conversation(conversation=ana_conv, identifier=ANA_DOCUMENT) == ana


# --- the idempotency engine's edges ---


def counting_effect(body: dict[str, Any]) -> tuple[Any, list[int]]:
    runs: list[int] = []

    def effect() -> tuple[dict[str, Any], int]:
        runs.append(1)
        return body, 201

    return effect, runs


def test_a_decimal_and_a_datetime_go_through_the_engine_and_replay_byte_for_byte(company):
    at = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)
    effect, runs = counting_effect({"total": Decimal("12.50"), "at": at, "note": "cañón"})

    first = idempotent_execute(
        company=company, key="k-dec", operation="op", request={}, effect=effect
    )
    again = idempotent_execute(
        company=company, key="k-dec", operation="op", request={}, effect=effect
    )

    assert first.body == {"total": "12.50", "at": "2026-12-01T09:30:00Z", "note": "cañón"}
    assert (first.status, first.replayed, again.replayed) == (201, False, True)
    assert (again.body, again.text, again.status) == (first.body, first.text, 201)
    assert runs == [1]


def test_a_replay_holds_until_the_last_instant_of_its_window_and_then_is_expired(
    company, monkeypatch
):
    effect, runs = counting_effect({"done": True})
    idempotent_execute(company=company, key="k-win", operation="op", request={}, effect=effect)
    record = IdempotencyRecord.objects.get(company=company, key="k-win")

    at_instant(monkeypatch, record.replay_until - timedelta(microseconds=1))
    replayed = idempotent_execute(
        company=company, key="k-win", operation="op", request={}, effect=effect
    )
    at_instant(monkeypatch, record.replay_until)
    with pytest.raises(Conflict) as expired:
        idempotent_execute(company=company, key="k-win", operation="op", request={}, effect=effect)

    assert replayed.replayed is True
    assert (expired.value.code, expired.value.http_status) == ("idempotency_expired", 410)
    assert str(expired.value.user_message).strip()
    assert runs == [1]


def test_a_key_is_forgotten_exactly_when_it_expires_and_runs_again(company, monkeypatch):
    effect, runs = counting_effect({"done": True})
    idempotent_execute(company=company, key="k-exp", operation="op", request={}, effect=effect)
    record = IdempotencyRecord.objects.get(company=company, key="k-exp")

    at_instant(monkeypatch, record.expires_at - timedelta(microseconds=1))
    with pytest.raises(Conflict) as tombstone:
        idempotent_execute(company=company, key="k-exp", operation="op", request={}, effect=effect)
    at_instant(monkeypatch, record.expires_at)
    fresh = idempotent_execute(
        company=company, key="k-exp", operation="op", request={}, effect=effect
    )

    assert tombstone.value.code == "idempotency_expired"
    assert fresh.replayed is False
    assert runs == [1, 1]


def test_the_purge_tombstones_old_answers_and_forgets_only_expired_keys(company, other_company):
    now = timezone.now()
    hour = timedelta(hours=1)
    rows = {
        "replayable": (company, now + hour, now + 2 * hour, "{}"),
        "to_tombstone": (company, now - hour, now + hour, "{}"),
        "at_the_edge": (other_company, now, now + hour, "{}"),
        "already_tombstoned": (company, now - 2 * hour, now + hour, None),
        "expired": (company, now - 2 * hour, now, None),
    }
    for key, (owner, replay_until, expires_at, response) in rows.items():
        IdempotencyRecord.objects.create(
            company=owner,
            key=key,
            operation="op",
            fingerprint="f" * 64,
            response=response,
            created_at=now - 3 * hour,
            replay_until=replay_until,
            expires_at=expires_at,
        )

    assert idempotency_records_purge(now=now) == (2, 1)

    left = dict(IdempotencyRecord.objects.values_list("key", "response"))
    assert left == {
        "replayable": "{}",
        "to_tombstone": None,
        "at_the_edge": None,
        "already_tombstoned": None,
    }


def test_request_in_progress_tells_when_to_retry(settings):
    settings.GARANTE_IDEMPOTENCY_RETRY_AFTER_SECONDS = 7

    busy = in_progress()

    assert (busy.error_type, busy.code, busy.http_status) == (
        "CONFLICT",
        "request_in_progress",
        409,
    )
    assert busy.extras == {"retry_after_seconds": 7}
    worded = {lang: message_of(busy.user_message, lang) for lang in ("es", "en")}
    assert worded["es"].strip() and worded["es"] != worded["en"]


def test_the_failure_that_reaches_the_credentials_limit_raises_one_burst_event(company):
    credential = gateway_credential_issue(company=company, name="gateway")[0]
    company.gateway_credential_id = credential.pk
    company.identify_failures_per_credential = 3
    company.identify_credential_window_minutes = 45

    def guess(n: int) -> Any:
        conversation = Conversation.objects.create(company=company, external_id=f"conv-b{n}")
        conversation.company = company
        try:
            return keeping_evidence(
                lambda: identify_contact(
                    conversation=conversation, kind="phone", value=f"69910000{n}"
                )
            )
        except NotFound as refused:
            return refused.code

    bursts = SecurityEvent.objects.filter(kind=SecurityEvent.Kind.IDENTIFICATION_BURST)
    assert [guess(1), guess(2)] == ["contact_not_found"] * 2
    assert not bursts.exists()
    assert guess(3) == "contact_not_found"
    # Past the limit identification goes on in verified mode: nobody bound, no new burst.
    assert guess(4) is None

    burst = bursts.get()
    assert (burst.company_id, burst.credential_id, burst.conversation_key) == (
        company.pk,
        credential.pk,
        "conv-b3",
    )
    assert burst.detail == {"failures": 3, "window_minutes": 45}


# --- the quotes' lock order (sales/services/quote_guards.py) ---


def locked_tables(statements: list[dict[str, str]]) -> list[str]:
    """The tables of the row locks taken, in order (only the order is asserted, never SQL)."""
    tables = []
    for statement in statements:
        sql = statement["sql"]
        if "FOR UPDATE" in sql.upper():
            for table in ("sales_opportunity", "sales_quote"):
                if f'FROM "{table}"' in sql:
                    tables.append(table)
    return tables


@pytest.fixture
def quote_of_an_opportunity(company: Company, ana: Contact, catalog: Any) -> Any:
    opportunity = opportunity_create(company=company, contact=ana, title="Pedido")
    return quote_create(
        company=company,
        contact=ana,
        items=[QuoteItem("CAF-001", 1)],
        send=True,
        opportunity=opportunity,
    )


@pytest.mark.postgres
def test_a_quote_and_its_opportunity_are_locked_opportunity_first(quote_of_an_opportunity):
    with CaptureQueriesContext(connection) as both, transaction.atomic():
        locked = quote_lock(quote_of_an_opportunity, with_opportunity=True)
        with CaptureQueriesContext(connection) as afterwards:
            assert quote_opportunity_locked(locked).pk == quote_of_an_opportunity.opportunity_id
    with CaptureQueriesContext(connection) as alone, transaction.atomic():
        quote_lock(quote_of_an_opportunity)

    assert locked_tables(both.captured_queries) == ["sales_opportunity", "sales_quote"]
    assert afterwards.captured_queries == []  # the opportunity locked first is the one kept
    assert locked_tables(alone.captured_queries) == ["sales_quote"]


@pytest.mark.postgres
def test_a_quote_locked_alone_locks_its_opportunity_when_asked(quote_of_an_opportunity):
    with transaction.atomic():
        locked = quote_lock(quote_of_an_opportunity)
        with CaptureQueriesContext(connection) as asked:
            opportunity = quote_opportunity_locked(locked)

    assert opportunity.pk == quote_of_an_opportunity.opportunity_id
    assert locked_tables(asked.captured_queries) == ["sales_opportunity"]
