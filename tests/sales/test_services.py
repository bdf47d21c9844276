"""Sales services: totals decided by the system, stock reserved at acceptance, guarded states."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core import mail
from django.utils import timezone
from django_fsm_log.models import StateLog

from core.errors import NotFound, ValidationFailed
from core.outbound import OutboundTransient
from sales.models import Opportunity, PriceList, Product, Quote
from sales.services.catalog import (
    price_list_create,
    price_list_item_set,
    product_create,
    product_stock_set,
)
from sales.services.opportunities import opportunity_create, opportunity_lose
from sales.services.quote_email import quote_email_deliver, quote_emails_pending
from sales.services.quote_lifecycle import (
    QUOTE_VALIDITY,
    quote_accept,
    quote_create,
    quote_reject,
    quote_send,
    quotes_expire_due,
)
from sales.services.quote_pricing import QuoteItem
from sales.tasks import quote_email_send
from tests.factories import ANA_EMAIL

pytestmark = pytest.mark.django_db

# 3 x 12.50 at 10 % + 2 x 4.99 at 21 %: 37.50 + 3.75 and 9.98 + 2.10 (2.0958 rounded).
BASKET = [QuoteItem("CAF-001", 3), QuoteItem("TAZ-002", 2)]


def stock(product: Product) -> tuple[int, int]:
    product.refresh_from_db()
    return product.quantity_on_hand, product.quantity_reserved


def test_it_prices_a_quote_from_the_catalog_and_the_price_list(company, ana, catalog):
    quote = quote_create(company=company, contact=ana, items=BASKET)

    assert quote.reference.startswith("QT-")
    assert quote.state == Quote.State.SENT
    assert (quote.currency, quote.subtotal, quote.tax_total, quote.total) == (
        "EUR",
        Decimal("47.48"),
        Decimal("5.85"),
        Decimal("53.33"),
    )
    lines = list(quote.lines.values_list("sku", "quantity", "unit_price", "tax_rate", "total"))
    assert lines == [
        ("CAF-001", 3, Decimal("12.50"), Decimal("10.00"), Decimal("41.25")),
        ("TAZ-002", 2, Decimal("4.99"), Decimal("21.00"), Decimal("12.08")),
    ]


def test_a_quote_keeps_its_prices_when_the_price_list_changes_later(company, ana, catalog):
    from sales.services.catalog import price_list_item_set

    quote = quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 1)])
    price_list_item_set(price_list=catalog.price_list, product=catalog.coffee, unit_price="99.00")

    quote.refresh_from_db()
    assert quote.total == Decimal("13.75")
    assert quote.lines.get().unit_price == Decimal("12.50")


def test_it_refuses_an_altered_total_stating_the_real_one(company, ana, catalog):
    with pytest.raises(ValidationFailed) as caught:
        quote_create(company=company, contact=ana, items=BASKET, expected_total="50.00")

    body = caught.value.as_dict()
    assert body["code"] == "total_mismatch"
    assert body["total"] == "53.33"
    assert body["currency"] == "EUR"
    assert "53,33\u00a0€" in body["user_message"]
    assert not Quote.objects.exists()


@pytest.mark.parametrize("expected", ["53.33", "53.330", Decimal("53.33")])
def test_it_accepts_an_expected_total_equal_to_the_real_one(company, ana, catalog, expected):
    quote = quote_create(company=company, contact=ana, items=BASKET, expected_total=expected)

    assert quote.total == Decimal("53.33")


def test_it_refuses_a_total_with_more_precision_than_the_currency(company, ana, catalog):
    with pytest.raises(ValidationFailed, match="53,33"):
        quote_create(company=company, contact=ana, items=BASKET, expected_total="53.331")


def test_it_merges_repeated_skus_and_matches_them_case_insensitively(company, ana, catalog):
    quote = quote_create(
        company=company,
        contact=ana,
        items=[QuoteItem("caf-001", 1), QuoteItem("CAF-001", 2)],
    )

    assert list(quote.lines.values_list("sku", "quantity")) == [("CAF-001", 3)]


@pytest.mark.postgres
def test_a_sku_whose_upper_case_differs_between_python_and_the_database_is_found(
    company, ana, catalog
):
    """Python upper-cases "ß" to "SS"; PostgreSQL leaves it: the lookup sends the SKU as the
    customer wrote it, and an unknown one is named as written."""
    grinder = product_create(company=company, sku="GROß-1", name="Molinillo", track_stock=False)
    price_list_item_set(price_list=catalog.price_list, product=grinder, unit_price="20.00")

    quote = quote_create(
        company=company, contact=ana, items=[QuoteItem("groß-1", 1), QuoteItem("GROß-1", 1)]
    )
    with pytest.raises(NotFound) as caught:
        quote_create(company=company, contact=ana, items=[QuoteItem("straße-9", 1)])

    assert list(quote.lines.values_list("sku", "quantity")) == [("GROß-1", 2)]
    assert caught.value.extras["sku"] == "straße-9"


@pytest.mark.parametrize(
    "quantities",
    [[0], [10_001], [6_000, 4_001], [1, -1]],
    ids=["none", "too many", "repeats", "negative"],
)
def test_a_line_holds_between_one_and_ten_thousand_units_repeats_counted_together(
    company, ana, catalog, quantities
):
    items = [QuoteItem("MOL-003", q) for q in quantities]  # the grinder: stock not tracked

    with pytest.raises(ValidationFailed) as caught:
        quote_create(company=company, contact=ana, items=items)

    assert caught.value.code == "invalid_quantity"
    quote = quote_create(
        company=company,
        contact=ana,
        items=[QuoteItem("MOL-003", 6_000), QuoteItem("mol-003", 4_000)],
    )
    assert list(quote.lines.values_list("quantity", flat=True)) == [10_000]


@pytest.mark.parametrize("sku", ["NOPE-1", "DES-004", "FIL-005"])
def test_it_does_not_quote_unknown_retired_or_unpriced_products(company, ana, catalog, sku):
    with pytest.raises(NotFound) as caught:
        quote_create(company=company, contact=ana, items=[QuoteItem(sku, 1)])

    assert caught.value.extras["sku"] == sku


def test_it_refuses_to_quote_more_than_is_available(company, ana, catalog):
    with pytest.raises(ValidationFailed) as caught:
        quote_create(company=company, contact=ana, items=[QuoteItem("TAZ-002", 4)])

    assert caught.value.code == "insufficient_stock"
    assert "3" not in str(caught.value.user_message)  # quantities are not disclosed


def test_untracked_products_are_quoted_in_any_quantity(company, ana, catalog):
    quote = quote_create(company=company, contact=ana, items=[QuoteItem("MOL-003", 500)])

    assert quote.total == Decimal("21175.00")


def test_it_needs_a_price_list_valid_now(company, ana, catalog):
    catalog.price_list.valid_until = timezone.now() - timedelta(days=1)
    catalog.price_list.valid_from = timezone.now() - timedelta(days=30)
    catalog.price_list.save()

    with pytest.raises(ValidationFailed) as caught:
        quote_create(company=company, contact=ana, items=BASKET)

    assert caught.value.code == "no_price_list"


def test_a_quote_does_not_outlive_its_price_list(company, ana, catalog):
    end = timezone.now() + timedelta(days=2)
    catalog.price_list.valid_until = end
    catalog.price_list.save()

    quote = quote_create(company=company, contact=ana, items=BASKET)

    assert quote.valid_until == end


def test_a_draft_sent_later_gives_the_customer_its_whole_validity_from_sending(
    company, ana, catalog
):
    drafted = timezone.now() - timedelta(days=14)
    quote = quote_create(company=company, contact=ana, items=BASKET, send=False, now=drafted)

    sent = quote_send(quote=quote)

    assert sent.valid_until == sent.sent_at + QUOTE_VALIDITY
    quote.refresh_from_db()
    assert quote.valid_until == sent.valid_until
    assert quote_accept(quote=quote, now=drafted + timedelta(days=20)).state == (
        Quote.State.ACCEPTED
    )


def test_a_draft_sent_later_does_not_outlive_its_price_list(company, ana, catalog):
    quote = quote_create(company=company, contact=ana, items=BASKET, send=False)
    end = timezone.now() + timedelta(days=2)
    catalog.price_list.valid_until = end
    catalog.price_list.save()

    assert quote_send(quote=quote).valid_until == end


def test_a_draft_past_its_validity_is_not_sent(company, ana, catalog):
    drafted = timezone.now() - timedelta(days=16)
    quote = quote_create(company=company, contact=ana, items=BASKET, send=False, now=drafted)

    with pytest.raises(ValidationFailed) as caught:
        quote_send(quote=quote)

    assert caught.value.extras["state"] == "expired"
    quote.refresh_from_db()
    assert quote.state == Quote.State.DRAFT


def test_a_draft_whose_price_list_has_closed_is_not_sent_already_expired(company, ana, catalog):
    draft = quote_create(company=company, contact=ana, items=BASKET, send=False)
    PriceList.objects.filter(pk=catalog.price_list.pk).update(
        valid_until=timezone.now() - timedelta(minutes=1)
    )

    with pytest.raises(ValidationFailed) as caught:
        quote_send(quote=draft)

    assert caught.value.code == "price_list_outdated"
    draft.refresh_from_db()
    assert (draft.state, draft.sent_at) == (Quote.State.DRAFT, None)


def test_a_draft_is_not_sent_at_the_prices_of_a_replaced_price_list(company, ana, catalog):
    draft = quote_create(company=company, contact=ana, items=BASKET, send=False)
    new_list = price_list_create(company=company, name="Tarifa 2027", is_default=True)
    price_list_item_set(price_list=new_list, product=catalog.coffee, unit_price="15.00")

    with pytest.raises(ValidationFailed) as caught:
        quote_send(quote=draft)

    assert caught.value.code == "price_list_outdated"
    assert "lista de precios" in str(caught.value.user_message)
    draft.refresh_from_db()
    assert draft.state == Quote.State.DRAFT


def test_a_new_default_price_list_replaces_the_old_default(company, catalog):
    usd = price_list_create(company=company, name="Dólares", currency="usd", is_default=True)

    catalog.price_list.refresh_from_db()
    assert catalog.price_list.is_default is False
    assert usd.currency == "USD"


def test_money_follows_the_currencys_minor_units(company, ana, catalog):
    from sales.services.catalog import price_list_item_set

    yen = price_list_create(company=company, name="Yen", currency="JPY", is_default=True)
    price_list_item_set(price_list=yen, product=catalog.mug, unit_price="499")

    quote = quote_create(company=company, contact=ana, items=[QuoteItem("TAZ-002", 1)])

    assert (quote.currency, quote.total) == ("JPY", Decimal("604"))  # 499 + 104.79 of tax → 105


def test_it_emails_the_sent_quote_to_the_customers_own_address(
    company, ana, catalog, django_capture_on_commit_callbacks
):
    before = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        quote = quote_create(company=company, contact=ana, items=BASKET)

    assert len(mail.outbox) == 1
    email = mail.outbox[0]
    assert email.to == [ANA_EMAIL]
    assert quote.reference in email.subject
    assert "53,33\u00a0€" in email.body
    assert "Válida hasta el" in email.body and "Para aceptarla o rechazarla" in email.body
    assert "Estado:" not in email.body
    quote.refresh_from_db()
    assert before <= quote.emailed_at <= timezone.now()
    assert quote_emails_pending(now=timezone.now() + timedelta(hours=1)) == []


def test_the_quote_email_speaks_the_companys_language(
    company, ana, catalog, django_capture_on_commit_callbacks
):
    company.language = "en"
    company.save(update_fields=["language"])

    with django_capture_on_commit_callbacks(execute=True):
        quote = quote_create(company=company, contact=ana, items=BASKET)

    (email,) = mail.outbox
    assert email.subject == f"{company.name}: your quote {quote.reference}"
    assert email.body.startswith("Hello Ana,")
    assert "Total: €53.33" in email.body  # the English number format too
    assert "Valid until" in email.body and "To accept or reject it" in email.body
    assert "Válida" not in email.body and "53,33" not in email.body


def test_each_email_line_is_quantity_times_unit_price_adding_up_to_the_subtotal(
    company, ana, catalog
):
    quote = quote_create(company=company, contact=ana, items=BASKET)  # on_commit never runs

    assert quote_email_deliver(quote_id=quote.pk)

    body = mail.outbox[0].body
    times = "\N{MULTIPLICATION SIGN}"
    assert f"- 3 {times} Café en grano 1 kg (CAF-001), 12,50\u00a0€ c/u: 37,50\u00a0€\n" in body
    assert f"- 2 {times} Taza de cerámica (TAZ-002), 4,99\u00a0€ c/u: 9,98\u00a0€\n" in body
    assert "Subtotal: 47,48\u00a0€\nImpuestos: 5,85\u00a0€\nTotal: 53,33\u00a0€\n" in body


@pytest.mark.parametrize(
    ("language", "hour", "sentence"),
    [
        # core.l10n's one date-time shape of each language, then one full stop.
        ("en", 4, r"Valid until \d{4}-\d{2}-\d{2} 04:43\.\n"),
        ("en", 16, r"Valid until \d{4}-\d{2}-\d{2} 16:43\.\n"),
        ("es", 4, r"Válida hasta el \d{2}/\d{2}/\d{4} 04:43\.\n"),
    ],
)
def test_the_validity_sentence_ends_with_one_full_stop(
    company, ana, catalog, language, hour, sentence
):
    company.language = language
    company.save(update_fields=["language"])
    quote = quote_create(company=company, contact=ana, items=BASKET)
    local = timezone.localtime(quote.valid_until, company.tz)
    valid_until = local.replace(hour=hour, minute=43)
    Quote.objects.filter(pk=quote.pk).update(valid_until=valid_until)

    assert quote_email_deliver(quote_id=quote.pk)

    body = mail.outbox[0].body
    assert re.search(sentence, body), body
    assert ".." not in body


@pytest.mark.parametrize(
    ("settle", "label"),
    [
        (lambda quote: quote_accept(quote=quote), "aceptada"),
        (lambda quote: quote_reject(quote=quote), "rechazada"),
        # Past its validity before the expiry sweep ran: expired all the same.
        (
            lambda quote: Quote.objects.filter(pk=quote.pk).update(
                valid_until=timezone.now() - timedelta(minutes=1)
            ),
            "vencida",
        ),
    ],
)
def test_a_quote_settled_before_its_email_left_is_still_emailed_with_its_state(
    company, ana, catalog, settle, label
):
    """The customer was told the quote was on its way, then answered it in the chat before
    the worker ran: the email still goes, a record of what was quoted, without the offer to
    accept it."""
    quote = quote_create(company=company, contact=ana, items=BASKET)  # on_commit never runs
    settle(quote)

    assert quote_emails_pending(now=timezone.now() + timedelta(minutes=20)) == [quote.pk]
    assert quote_email_deliver(quote_id=quote.pk) is True

    (email,) = mail.outbox
    assert "53,33\u00a0€" in email.body
    assert f"Estado: {label}." in email.body
    assert "Para aceptarla" not in email.body
    assert quote_email_deliver(quote_id=quote.pk) is False  # once


def test_a_quote_whose_email_never_went_out_is_picked_up_again(company, ana, catalog):
    quote = quote_create(company=company, contact=ana, items=BASKET)  # on_commit never runs

    assert quote_emails_pending(now=timezone.now()) == []
    assert quote_emails_pending(now=timezone.now() + timedelta(minutes=20)) == [quote.pk]


def test_a_quote_email_refused_for_good_is_recorded_and_not_sent_again(
    company, ana, catalog, smtp_refusing, caplog
):
    quote = quote_create(company=company, contact=ana, items=BASKET)
    server = smtp_refusing("550 5.1.1 No such user")

    assert quote_email_send.apply(args=[quote.pk]).get() is False

    assert server.rcpt_attempts == 1 and server.messages == []
    assert "email refused for good (SMTP recipient refused 550)" in caplog.text
    quote.refresh_from_db()
    assert (quote.emailed_at, quote.email_error) == (None, "SMTP recipient refused 550")
    assert quote_emails_pending(now=timezone.now() + timedelta(minutes=20)) == []


def test_a_quote_email_refused_for_now_is_retried_then_delivered(
    company, ana, catalog, smtp_refusing
):
    """451 greylisting: the task retries it (OutboundTransient is in its autoretry_for)."""
    quote = quote_create(company=company, contact=ana, items=BASKET)
    server = smtp_refusing("451 4.7.1 Greylisted, please try again later", times=1)

    with pytest.raises(OutboundTransient):
        quote_email_deliver(quote_id=quote.pk)
    assert quote_emails_pending(now=timezone.now() + timedelta(minutes=20)) == [quote.pk]
    assert issubclass(OutboundTransient, quote_email_send.autoretry_for)

    assert quote_email_deliver(quote_id=quote.pk) is True
    assert [envelope for envelope, _message in server.messages] == [[ana.email]]


def test_accepting_reserves_the_stock_of_tracked_products_only(company, ana, catalog):
    quote = quote_create(
        company=company,
        contact=ana,
        items=[*BASKET, QuoteItem("MOL-003", 1)],
    )

    accepted = quote_accept(quote=quote, expected_total="95.68")

    assert accepted.state == Quote.State.ACCEPTED
    assert stock(catalog.coffee) == (10, 3)
    assert stock(catalog.mug) == (3, 2)
    assert stock(catalog.grinder) == (0, 0)


def test_accepting_with_an_altered_total_is_refused_and_reserves_nothing(company, ana, catalog):
    quote = quote_create(company=company, contact=ana, items=BASKET)

    with pytest.raises(ValidationFailed) as caught:
        quote_accept(quote=quote, expected_total="10.00")

    assert caught.value.extras == {"total": "53.33", "currency": "EUR"}
    assert stock(catalog.mug) == (3, 0)
    quote.refresh_from_db()
    assert quote.state == Quote.State.SENT


def test_accepting_twice_is_refused_with_the_state_and_reserves_once(company, ana, catalog):
    quote = quote_create(company=company, contact=ana, items=BASKET)
    quote_accept(quote=quote)

    with pytest.raises(ValidationFailed) as caught:
        quote_accept(quote=quote)

    assert caught.value.extras["state"] == "accepted"
    assert stock(catalog.coffee) == (10, 3)


def test_stock_taken_by_another_customer_after_the_quote_is_refused_at_acceptance(
    company, ana, bruno, catalog
):
    anas = quote_create(company=company, contact=ana, items=[QuoteItem("TAZ-002", 2)])
    brunos = quote_create(company=company, contact=bruno, items=[QuoteItem("TAZ-002", 2)])
    quote_accept(quote=brunos)

    with pytest.raises(ValidationFailed) as caught:
        quote_accept(quote=anas)

    assert caught.value.code == "insufficient_stock"
    assert caught.value.extras["sku"] == "TAZ-002"
    assert stock(catalog.mug) == (3, 2)
    anas.refresh_from_db()
    assert anas.state == Quote.State.SENT


def test_a_quote_past_its_validity_cannot_be_accepted_even_before_the_sweep(company, ana, catalog):
    quote = quote_create(company=company, contact=ana, items=BASKET)
    later = quote.valid_until + timedelta(seconds=1)

    for resolve in (quote_accept, quote_reject):
        with pytest.raises(ValidationFailed) as caught:
            resolve(quote=quote, now=later)
        assert caught.value.extras["state"] == "expired"
    assert stock(catalog.coffee) == (10, 0)


def test_a_quote_is_valid_until_the_instant_not_the_day(company, ana, catalog):
    quote = quote_create(company=company, contact=ana, items=BASKET)

    with pytest.raises(ValidationFailed):
        quote_accept(quote=quote, now=quote.valid_until)
    assert quote_accept(quote=quote, now=quote.valid_until - timedelta(seconds=1)).state == (
        Quote.State.ACCEPTED
    )


def test_the_sweep_expires_open_quotes_past_validity_and_nothing_else(company, ana, bruno, catalog):
    old = quote_create(company=company, contact=ana, items=BASKET)
    accepted = quote_create(company=company, contact=bruno, items=[QuoteItem("MOL-003", 1)])
    quote_accept(quote=accepted)
    fresh = quote_create(
        company=company, contact=bruno, items=BASKET, now=timezone.now() + timedelta(days=10)
    )

    expired = quotes_expire_due(now=old.valid_until + timedelta(minutes=1))

    assert expired == 1
    states = {q.pk: q.state for q in Quote.objects.all()}
    assert states == {
        old.pk: Quote.State.EXPIRED,
        accepted.pk: Quote.State.ACCEPTED,
        fresh.pk: Quote.State.SENT,
    }
    with pytest.raises(ValidationFailed) as caught:
        quote_accept(quote=old)
    assert caught.value.extras["state"] == "expired"


def test_rejecting_keeps_the_reason_and_cannot_be_repeated(company, ana, catalog):
    quote = quote_create(company=company, contact=ana, items=BASKET)

    rejected = quote_reject(quote=quote, reason="  Muy caro ")

    assert (rejected.state, rejected.rejection_reason) == (Quote.State.REJECTED, "Muy caro")
    with pytest.raises(ValidationFailed) as caught:
        quote_reject(quote=quote)
    assert caught.value.extras["state"] == "rejected"
    with pytest.raises(ValidationFailed):
        quote_accept(quote=quote)


def test_accepting_a_quote_wins_its_opportunity_at_the_quotes_total(company, ana, catalog):
    opportunity = opportunity_create(company=company, contact=ana, title="Cafetería nueva")
    quote = quote_create(company=company, contact=ana, items=BASKET, opportunity=opportunity)

    before = timezone.now()
    quote_accept(quote=quote)

    opportunity.refresh_from_db()
    assert opportunity.state == Opportunity.State.WON
    assert (opportunity.amount, opportunity.currency) == (Decimal("53.33"), "EUR")
    assert before <= opportunity.closed_at <= timezone.now()


def test_losing_an_opportunity_expires_its_open_quotes(company, ana, catalog):
    opportunity = opportunity_create(company=company, contact=ana, title="Cafetería nueva")
    sent = quote_create(company=company, contact=ana, items=BASKET, opportunity=opportunity)
    draft = quote_create(
        company=company, contact=ana, items=BASKET, opportunity=opportunity, send=False
    )
    rejected = quote_reject(
        quote=quote_create(company=company, contact=ana, items=BASKET, opportunity=opportunity)
    )
    other = quote_create(company=company, contact=ana, items=BASKET)  # of no opportunity

    opportunity_lose(opportunity=opportunity, reason="Eligió a otro proveedor")

    states = dict(Quote.objects.values_list("pk", "state"))
    assert states == {
        sent.pk: Quote.State.EXPIRED,
        draft.pk: Quote.State.EXPIRED,
        rejected.pk: Quote.State.REJECTED,
        other.pk: Quote.State.SENT,
    }
    with pytest.raises(ValidationFailed) as caught:
        quote_accept(quote=sent)
    assert caught.value.extras["state"] == "expired"
    assert stock(catalog.coffee) == (10, 0)
    assert StateLog.objects.filter(object_id=sent.pk, transition="expire").exists()


def test_a_quote_of_a_lost_opportunity_left_open_cannot_be_accepted(company, ana, catalog):
    """A quote still open when its opportunity is lost (lost before losing expired them)."""
    opportunity = opportunity_create(company=company, contact=ana, title="Cafetería nueva")
    quote = quote_create(company=company, contact=ana, items=BASKET, opportunity=opportunity)
    opportunity_lose(opportunity=opportunity, reason="Eligió a otro proveedor")
    Quote.objects.filter(pk=quote.pk).update(state=Quote.State.SENT, resolved_at=None)

    with pytest.raises(ValidationFailed) as caught:
        quote_accept(quote=quote)

    assert caught.value.code == "opportunity_lost"
    assert stock(catalog.coffee) == (10, 0)


def test_a_draft_of_a_lost_opportunity_is_not_sent(company, ana, catalog):
    opportunity = opportunity_create(company=company, contact=ana, title="Cafetería nueva")
    draft = quote_create(
        company=company, contact=ana, items=BASKET, opportunity=opportunity, send=False
    )
    opportunity_lose(opportunity=opportunity, reason="Compró a otro proveedor")
    with pytest.raises(ValidationFailed) as caught:
        quote_send(quote=draft)
    assert caught.value.extras["state"] == "expired"  # losing expired it

    # Even a draft left open (lost before losing expired them) is not sent.
    Quote.objects.filter(pk=draft.pk).update(state=Quote.State.DRAFT, resolved_at=None)
    with pytest.raises(ValidationFailed) as caught:
        quote_send(quote=draft)
    assert caught.value.extras["state"] == "lost"
    draft.refresh_from_db()
    assert (draft.state, draft.sent_at) == (Quote.State.DRAFT, None)


def test_a_closed_opportunity_gets_no_new_quotes(company, ana, catalog):
    opportunity = opportunity_create(company=company, contact=ana, title="Cafetería nueva")
    opportunity_lose(opportunity=opportunity, reason="Sin presupuesto")

    with pytest.raises(ValidationFailed) as caught:
        quote_create(company=company, contact=ana, items=BASKET, opportunity=opportunity)

    assert caught.value.extras["state"] == "lost"


def test_losing_needs_a_reason(company, ana):
    opportunity = opportunity_create(company=company, contact=ana, title="Cafetería nueva")

    with pytest.raises(ValidationFailed):
        opportunity_lose(opportunity=opportunity, reason="  ")

    lost = opportunity_lose(opportunity=opportunity, reason="Sin presupuesto")
    assert (lost.state, lost.lost_reason) == (Opportunity.State.LOST, "Sin presupuesto")
    assert lost.reference.startswith("OP-")


def test_counted_stock_cannot_drop_below_what_is_reserved(company, ana, catalog):
    quote_accept(quote=quote_create(company=company, contact=ana, items=[QuoteItem("TAZ-002", 2)]))

    with pytest.raises(ValidationFailed):
        product_stock_set(product=catalog.mug, quantity_on_hand=1)

    product_stock_set(product=catalog.mug, quantity_on_hand=2)
    assert stock(catalog.mug) == (2, 2)


def test_transitions_are_recorded_in_the_history(company, ana, catalog, django_user_model):
    staff = django_user_model.objects.create_user("vendedora")
    quote = quote_create(company=company, contact=ana, items=BASKET, by=staff)
    quote_accept(quote=quote)

    history = StateLog.objects.for_(quote).order_by("timestamp", "pk")

    assert [(h.source_state, h.state, h.by) for h in history] == [
        ("draft", "sent", staff),
        ("sent", "accepted", None),
    ]


def test_the_state_cannot_be_written_directly(company, ana, catalog):
    quote = quote_create(company=company, contact=ana, items=BASKET)

    with pytest.raises(AttributeError):
        quote.state = Quote.State.ACCEPTED
