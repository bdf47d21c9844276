"""From quote to delivery: an accepted quote's reservation is consumed when its order is
delivered and released when it is cancelled; winning an opportunity settles its other open
quotes; stock tracking is not turned off under live reservations; a closed opportunity's
amount stays what it closed at."""

from decimal import Decimal
from importlib import import_module

import pytest
from django.apps import apps
from django.db import IntegrityError
from django.db.models import Sum
from django_fsm_log.models import StateLog

from core.errors import ValidationFailed
from sales.models import Opportunity, Product, Quote, StockReservation
from sales.services.catalog import product_stock_set, product_tracking_set
from sales.services.opportunities import (
    opportunity_create,
    opportunity_details_set,
    opportunity_lose,
    opportunity_win,
)
from sales.services.quote_lifecycle import (
    quote_accept,
    quote_cancel,
    quote_create,
    quote_deliver,
    quote_expire,
    quote_reject,
    quotes_expire_due,
)
from sales.services.quote_pricing import QuoteItem

pytestmark = pytest.mark.django_db

BASKET = [QuoteItem("CAF-001", 3), QuoteItem("TAZ-002", 2), QuoteItem("MOL-003", 1)]


def stock(product: Product) -> tuple[int, int]:
    """(on hand, reserved)."""
    product.refresh_from_db()
    return product.quantity_on_hand, product.quantity_reserved


def reservations(quote: Quote) -> dict[str, tuple[int, str]]:
    return {
        r.product.sku: (r.quantity, r.state)
        for r in StockReservation.objects.filter(quote=quote).select_related("product")
    }


def assert_reserved_is_the_sum_of_live_reservations() -> None:
    for product in Product.objects.all():
        live = StockReservation.objects.filter(product=product, state="live").aggregate(
            n=Sum("quantity")
        )["n"]
        assert product.quantity_reserved == (live or 0), product.sku
        assert 0 <= product.quantity_reserved <= product.quantity_on_hand


def accepted(company, contact, items=BASKET, **kwargs) -> Quote:
    return quote_accept(quote=quote_create(company=company, contact=contact, items=items, **kwargs))


# Reservation, delivery, cancellation ---------------------------------------------------------


def test_acceptance_records_what_the_order_reserves_of_each_tracked_product(company, ana, catalog):
    quote = accepted(company, ana)

    assert reservations(quote) == {"CAF-001": (3, "live"), "TAZ-002": (2, "live")}
    assert (stock(catalog.coffee), stock(catalog.mug)) == ((10, 3), (3, 2))
    assert_reserved_is_the_sum_of_live_reservations()


def test_delivering_consumes_the_reservation_the_units_leave_the_shelf(company, ana, catalog):
    quote = accepted(company, ana)

    delivered = quote_deliver(quote=quote)

    assert delivered.state == Quote.State.DELIVERED
    assert delivered.delivered_at is not None
    assert (stock(catalog.coffee), stock(catalog.mug)) == ((7, 0), (1, 0))
    assert stock(catalog.grinder) == (0, 0)  # untracked: nothing reserved, nothing consumed
    assert reservations(quote) == {"CAF-001": (3, "consumed"), "TAZ-002": (2, "consumed")}
    assert StateLog.objects.filter(object_id=quote.pk, transition="deliver").count() == 1
    assert_reserved_is_the_sum_of_live_reservations()


def test_delivering_twice_is_a_no_op_with_the_same_answer(company, ana, catalog):
    quote = accepted(company, ana)
    first = quote_deliver(quote=quote)

    again = quote_deliver(quote=quote)

    assert (again.pk, again.state, again.delivered_at) == (
        first.pk,
        Quote.State.DELIVERED,
        first.delivered_at,
    )
    assert (stock(catalog.coffee), stock(catalog.mug)) == ((7, 0), (1, 0))  # consumed once
    assert StateLog.objects.filter(object_id=quote.pk, transition="deliver").count() == 1


def test_a_delivery_note_matching_the_order_delivers_it(company, ana, catalog):
    quote = accepted(company, ana)
    note = [QuoteItem("taz-002", 1), QuoteItem("CAF-001", 3), QuoteItem("TAZ-002", 1)]

    assert quote_deliver(quote=quote, items=[*note, QuoteItem("MOL-003", 1)]).state == "delivered"
    assert stock(catalog.mug) == (1, 0)


@pytest.mark.parametrize(
    ("note", "code", "extras"),
    [
        (
            [QuoteItem("CAF-001", 4), QuoteItem("TAZ-002", 2), QuoteItem("MOL-003", 1)],
            "delivery_exceeds_reserved",
            {"sku": "CAF-001", "reserved": 3},
        ),
        (
            [QuoteItem("CAF-001", 3), QuoteItem("TAZ-002", 2), QuoteItem("FIL-005", 1)],
            "product_not_in_order",
            {"sku": "FIL-005"},
        ),
        (
            [QuoteItem("CAF-001", 3), QuoteItem("TAZ-002", 1), QuoteItem("MOL-003", 1)],
            "delivery_incomplete",
            {"sku": "TAZ-002", "ordered": 2},
        ),
    ],
)
def test_a_delivery_note_that_is_not_the_order_is_refused_and_nothing_changes(
    company, ana, catalog, note, code, extras
):
    quote = accepted(company, ana)

    with pytest.raises(ValidationFailed) as caught:
        quote_deliver(quote=quote, items=note)

    assert (caught.value.code, caught.value.extras) == (code, extras)
    assert extras["sku"] in str(caught.value.user_message)
    quote.refresh_from_db()
    assert quote.state == Quote.State.ACCEPTED
    assert (stock(catalog.coffee), stock(catalog.mug)) == ((10, 3), (3, 2))
    assert reservations(quote) == {"CAF-001": (3, "live"), "TAZ-002": (2, "live")}


def test_delivering_more_than_reserved_is_refused_even_once_delivered(company, ana, catalog):
    quote = accepted(company, ana)
    quote_deliver(quote=quote)

    with pytest.raises(ValidationFailed) as caught:
        quote_deliver(quote=quote, items=[QuoteItem("TAZ-002", 5)])

    assert caught.value.code == "delivery_exceeds_reserved"
    assert stock(catalog.mug) == (1, 0)


def test_cancelling_releases_the_reservation(company, ana, catalog):
    quote = accepted(company, ana)

    cancelled = quote_cancel(quote=quote)

    assert cancelled.state == Quote.State.CANCELLED
    assert cancelled.cancelled_at is not None
    assert (stock(catalog.coffee), stock(catalog.mug)) == ((10, 0), (3, 0))
    assert reservations(quote) == {"CAF-001": (3, "released"), "TAZ-002": (2, "released")}
    assert quote_cancel(quote=quote).cancelled_at == cancelled.cancelled_at  # again: a no-op
    assert StateLog.objects.filter(object_id=quote.pk, transition="cancel").count() == 1
    assert_reserved_is_the_sum_of_live_reservations()


def test_released_stock_can_be_sold_again(company, ana, bruno, catalog):
    brunos = quote_create(company=company, contact=bruno, items=[QuoteItem("TAZ-002", 1)])
    anas = accepted(company, ana, items=[QuoteItem("TAZ-002", 3)])
    with pytest.raises(ValidationFailed):
        quote_accept(quote=brunos)

    quote_cancel(quote=anas)

    assert quote_accept(quote=brunos).state == Quote.State.ACCEPTED
    assert stock(catalog.mug) == (3, 1)


@pytest.mark.parametrize(
    ("first", "then"),
    [(quote_deliver, quote_cancel), (quote_cancel, quote_deliver)],
)
def test_a_delivered_order_cannot_be_cancelled_nor_a_cancelled_one_delivered(
    company, ana, catalog, first, then
):
    quote = accepted(company, ana)
    done = first(quote=quote)

    with pytest.raises(ValidationFailed) as caught:
        then(quote=quote)

    assert caught.value.code == "invalid_state"
    assert caught.value.extras["state"] == done.state
    assert_reserved_is_the_sum_of_live_reservations()


def test_only_an_accepted_order_is_delivered(company, ana, catalog):
    quote = quote_create(company=company, contact=ana, items=BASKET)

    with pytest.raises(ValidationFailed) as caught:
        quote_deliver(quote=quote)

    assert caught.value.extras == {"state": "sent", "state_label": "enviada"}


def test_an_order_past_the_quotes_validity_is_still_delivered(company, ana, catalog):
    quote = accepted(company, ana)
    Quote.objects.filter(pk=quote.pk).update(valid_until=quote.created_at)

    assert quote_deliver(quote=quote).state == Quote.State.DELIVERED
    assert quotes_expire_due() == 0


def test_no_quote_that_was_not_accepted_holds_stock(company, ana, bruno, catalog):
    """Expiry, rejection, losing the opportunity and being superseded end quotes that were
    never accepted: none holds a reservation, and the counters add up throughout."""
    lost = opportunity_create(company=company, contact=ana, title="Perdida")
    won = opportunity_create(company=company, contact=bruno, title="Ganada")
    quotes = {
        "expired": quote_create(company=company, contact=ana, items=BASKET),
        "rejected": quote_create(company=company, contact=ana, items=BASKET),
        "lost": quote_create(company=company, contact=ana, items=BASKET, opportunity=lost),
        "winner": quote_create(company=company, contact=bruno, items=BASKET, opportunity=won),
        "superseded": quote_create(company=company, contact=bruno, items=BASKET, opportunity=won),
    }
    quote_expire(quote=quotes["expired"])
    quote_reject(quote=quotes["rejected"])
    opportunity_lose(opportunity=lost, reason="Otro proveedor")
    quote_accept(quote=quotes["winner"])

    states = {name: Quote.objects.get(pk=q.pk).state for name, q in quotes.items()}
    assert states == {
        "expired": "expired",
        "rejected": "rejected",
        "lost": "expired",
        "winner": "accepted",
        "superseded": "superseded",
    }
    holding = set(StockReservation.objects.values_list("quote_id", flat=True))
    assert holding == {quotes["winner"].pk}
    assert stock(catalog.coffee) == (10, 3)
    assert_reserved_is_the_sum_of_live_reservations()


def test_the_database_refuses_a_reservation_beyond_what_is_on_hand(company, catalog):
    with pytest.raises(IntegrityError):
        Product.objects.filter(pk=catalog.mug.pk).update(quantity_reserved=4)


# Winning settles the other open quotes -------------------------------------------------------


def test_accepting_a_quote_settles_the_opportunitys_other_open_quotes(company, ana, catalog):
    opportunity = opportunity_create(company=company, contact=ana, title="Cafetería")
    chosen, other, draft = (
        quote_create(company=company, contact=ana, items=BASKET, opportunity=opportunity, send=send)
        for send in (True, True, False)
    )
    rejected = quote_reject(
        quote=quote_create(company=company, contact=ana, items=BASKET, opportunity=opportunity)
    )
    unrelated = quote_create(company=company, contact=ana, items=BASKET)

    quote_accept(quote=chosen)

    states = dict(Quote.objects.values_list("pk", "state"))
    assert states == {
        chosen.pk: "accepted",
        other.pk: "superseded",
        draft.pk: "superseded",
        rejected.pk: "rejected",
        unrelated.pk: "sent",
    }
    assert Quote.objects.get(pk=other.pk).resolved_at == Quote.objects.get(pk=chosen.pk).resolved_at
    with pytest.raises(ValidationFailed) as caught:
        quote_accept(quote=other)
    assert caught.value.extras == {"state": "superseded", "state_label": "sin efecto"}
    assert stock(catalog.coffee) == (10, 3)  # reserved once, by the chosen quote
    assert StateLog.objects.filter(object_id=other.pk, transition="supersede").count() == 1


def test_winning_an_opportunity_by_hand_settles_its_open_quotes(company, ana, catalog):
    opportunity = opportunity_create(company=company, contact=ana, title="Cafetería")
    quote = quote_create(company=company, contact=ana, items=BASKET, opportunity=opportunity)

    opportunity_win(opportunity=opportunity)

    quote.refresh_from_db()
    assert quote.state == Quote.State.SUPERSEDED
    with pytest.raises(ValidationFailed):
        quote_accept(quote=quote)
    assert stock(catalog.coffee) == (10, 0)


def test_a_quote_of_a_won_opportunity_left_open_cannot_be_accepted(company, ana, catalog):
    """One left open before winning settled them (the migration settles those it finds)."""
    opportunity = opportunity_create(company=company, contact=ana, title="Cafetería")
    first = quote_create(company=company, contact=ana, items=BASKET, opportunity=opportunity)
    second = quote_create(company=company, contact=ana, items=BASKET, opportunity=opportunity)
    quote_accept(quote=first)
    Quote.objects.filter(pk=second.pk).update(state=Quote.State.SENT, resolved_at=None)

    with pytest.raises(ValidationFailed) as caught:
        quote_accept(quote=second)

    assert caught.value.extras["state"] == "superseded"
    assert stock(catalog.coffee) == (10, 3)


# Stock tracking and live reservations --------------------------------------------------------


def test_turning_tracking_off_is_refused_while_orders_hold_the_product(company, ana, catalog):
    quote = accepted(company, ana)

    with pytest.raises(ValidationFailed) as caught:
        product_tracking_set(product=catalog.mug, track_stock=False)

    assert caught.value.code == "stock_reserved"
    assert caught.value.extras == {"reserved": 2, "orders": [quote.reference]}
    assert quote.reference in str(caught.value.user_message)
    assert Product.objects.get(pk=catalog.mug.pk).track_stock is True

    quote_deliver(quote=quote)  # once delivered (or cancelled), it may be turned off
    assert product_tracking_set(product=catalog.mug, track_stock=False).track_stock is False


def test_orders_accepted_while_untracked_deliver_without_touching_the_count(company, ana, catalog):
    quote = accepted(company, ana, items=[QuoteItem("MOL-003", 2)])
    product_tracking_set(product=catalog.grinder, track_stock=True)
    product_stock_set(product=catalog.grinder, quantity_on_hand=4)

    quote_deliver(quote=quote)

    assert stock(catalog.grinder) == (4, 0)
    assert reservations(quote) == {}


# A closed opportunity's amount ------------------------------------------------------------------


def test_a_closed_opportunitys_amount_cannot_be_changed(company, ana, catalog):
    opportunity = opportunity_create(company=company, contact=ana, title="Cafetería")
    accepted(company, ana, opportunity=opportunity)

    with pytest.raises(ValidationFailed) as caught:
        opportunity_details_set(opportunity=opportunity, changes={"amount": Decimal("1.00")})

    assert caught.value.code == "opportunity_closed"
    assert caught.value.extras == {"state": "won", "state_label": "ganada"}
    opportunity.refresh_from_db()
    assert opportunity.amount == Decimal("95.68")  # what it was won at: the quote's total
    # Its other details remain editable.
    renamed = opportunity_details_set(opportunity=opportunity, changes={"title": "Cafetería 2"})
    assert (renamed.title, renamed.state) == ("Cafetería 2", Opportunity.State.WON)


def test_an_open_opportunitys_amount_can_be_changed(company, ana):
    opportunity = opportunity_create(company=company, contact=ana, title="Cafetería")

    changed = opportunity_details_set(opportunity=opportunity, changes={"amount": Decimal("9")})

    assert changed.amount == Decimal("9")


# The migration that brings existing rows under these rules ----------------------------------------


def test_the_migration_records_existing_orders_and_settles_quotes_of_won_opportunities(
    company, ana, bruno, catalog
):
    """Rows as they were before: reservations only in the counters, a won opportunity's other
    quote still open. The migration's step, run on them, leaves them as the services would."""
    migration = import_module("sales.migrations.0003_order_delivery")
    opportunity = opportunity_create(company=company, contact=ana, title="Cafetería")
    left_open = quote_create(company=company, contact=bruno, items=BASKET)
    order = accepted(company, ana, opportunity=opportunity)
    untracked_order = accepted(company, bruno, items=[QuoteItem("MOL-003", 2)])
    StockReservation.objects.all().delete()
    Quote.objects.filter(pk=left_open.pk).update(opportunity=opportunity)
    Product.objects.filter(pk=catalog.grinder.pk).update(track_stock=True)  # toggled since

    migration.settle_and_record(apps, None)

    assert reservations(order) == {
        "CAF-001": (3, "live"),
        "TAZ-002": (2, "live"),
        "MOL-003": (1, "live"),  # tracked now
    }
    assert reservations(untracked_order) == {"MOL-003": (2, "live")}
    assert Quote.objects.get(pk=left_open.pk).state == Quote.State.SUPERSEDED
    assert (stock(catalog.coffee), stock(catalog.mug)) == ((10, 3), (3, 2))
    assert stock(catalog.grinder) == (3, 3)  # raised to what its orders hold
    assert_reserved_is_the_sum_of_live_reservations()
    quote_deliver(quote=order)
    assert (stock(catalog.coffee), stock(catalog.mug), stock(catalog.grinder)) == (
        (7, 0),
        (1, 0),
        (2, 2),
    )
