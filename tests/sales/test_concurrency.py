"""Concurrent acceptances on PostgreSQL, each in its own thread and database connection."""

from collections import Counter
from functools import partial

import pytest
from django.db import transaction
from django.db.models import Sum
from django_fsm_log.models import StateLog

from core.errors import ValidationFailed
from core.services import contact_create
from sales.models import Opportunity, Product, Quote, StockReservation
from sales.selectors import price_list_current, quote_get
from sales.services.catalog import price_list_item_set, product_create, product_stock_set
from sales.services.opportunities import opportunity_create, opportunity_lose
from sales.services.quote_lifecycle import (
    quote_accept,
    quote_cancel,
    quote_create,
    quote_deliver,
)
from sales.services.quote_pricing import QuoteItem
from tests import factories
from tests.servers import at_once

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def accept_all_at_once(quotes: list[Quote]) -> Counter:
    """Accept every quote from its own thread, released together; count the outcomes."""

    def accept(quote: Quote) -> str:
        try:
            quote_accept(quote=quote)
        except ValidationFailed as error:
            return error.code
        return "accepted"

    # A deadlock or any other failure shows in the count by its type.
    outcomes = at_once(*[partial(accept, quote) for quote in quotes])
    return Counter(o if isinstance(o, str) else type(o).__name__ for o in outcomes)


def customers(company, n: int) -> list:
    return [
        contact_create(company=company, first_name=f"Cliente {i}", email=f"c{i}@example.com")
        for i in range(n)
    ]


def test_concurrent_acceptances_never_oversell(company):
    catalog = factories.catalog(company)  # the mug: 3 on hand
    quotes = [
        quote_create(company=company, contact=c, items=[QuoteItem("TAZ-002", 2)])
        for c in customers(company, 6)
    ]

    outcomes = accept_all_at_once(quotes)

    assert outcomes == Counter({"accepted": 1, "insufficient_stock": 5})
    mug = Product.objects.get(pk=catalog.mug.pk)
    assert (mug.quantity_on_hand, mug.quantity_reserved) == (3, 2)
    assert Quote.objects.filter(state=Quote.State.ACCEPTED).count() == 1


def test_quotes_locking_the_same_products_in_opposite_orders_do_not_deadlock(company):
    factories.catalog(company)
    lamp = product_create(company=company, sku="LAM-006", name="Lámpara", quantity_on_hand=4)
    price_list_item_set(
        price_list=price_list_current(company=company), product=lamp, unit_price="20.00"
    )
    baskets = [
        [QuoteItem("CAF-001", 2), QuoteItem("LAM-006", 1)],
        [QuoteItem("LAM-006", 1), QuoteItem("CAF-001", 2)],
    ] * 4
    quotes = [
        quote_create(company=company, contact=c, items=basket)
        for c, basket in zip(customers(company, len(baskets)), baskets, strict=True)
    ]

    outcomes = accept_all_at_once(quotes)

    # Coffee: 10 on hand, 2 per quote, room for 5. Lamp: 4 on hand, 1 per quote, room for 4.
    # Whatever the interleaving, exactly 4 are accepted and nobody deadlocks.
    assert outcomes == Counter({"accepted": 4, "insufficient_stock": 4})
    for product in Product.objects.filter(track_stock=True):
        assert 0 <= product.quantity_reserved <= product.quantity_on_hand
    assert Product.objects.get(sku="LAM-006").quantity_reserved == 4
    assert Product.objects.get(sku="CAF-001").quantity_reserved == 8


@pytest.mark.parametrize("repeat", range(3))
def test_losing_an_opportunity_while_its_quotes_are_accepted_neither_deadlocks_nor_splits(
    company, repeat
):
    """Losing and accepting both lock the opportunity before its quotes: one of them wins,
    and the others are refused with the outcome (never a deadlock, never both, never two
    acceptances: the first settles the other quote)."""
    factories.catalog(company)
    (contact,) = customers(company, 1)
    opportunity = opportunity_create(company=company, contact=contact, title="Oficina")
    quotes = [
        quote_create(
            company=company,
            contact=contact,
            items=[QuoteItem("CAF-001", 1)],
            opportunity=opportunity,
        )
        for _ in range(2)
    ]

    def attempt(call) -> str:
        try:
            call()
        except ValidationFailed as error:
            return error.code
        return "done"

    outcomes = at_once(
        partial(attempt, partial(opportunity_lose, opportunity=opportunity, reason="Otro")),
        *[partial(attempt, partial(quote_accept, quote=quote)) for quote in quotes],
    )

    assert all(isinstance(outcome, str) for outcome in outcomes), outcomes
    opportunity.refresh_from_db()
    states = sorted(Quote.objects.values_list("state", flat=True))
    if opportunity.state == Opportunity.State.LOST:
        assert outcomes[0] == "done"
        assert states == ["expired", "expired"]
        assert Product.objects.get(sku="CAF-001").quantity_reserved == 0
    else:
        assert (opportunity.state, outcomes[0]) == (Opportunity.State.WON, "invalid_state")
        assert states == ["accepted", "superseded"]
        assert sorted(outcomes[1:]) == ["done", "invalid_state"]
        assert Product.objects.get(sku="CAF-001").quantity_reserved == 1


def outcome_of(call) -> str:
    try:
        result = call()
    except ValidationFailed as error:
        return error.code
    return result.state


def assert_stock_adds_up(product: Product) -> None:
    """Reserved is the sum of the live reservations, within what is on hand."""
    product.refresh_from_db()
    live = StockReservation.objects.filter(product=product, state="live").aggregate(
        n=Sum("quantity")
    )["n"]
    assert product.quantity_reserved == (live or 0)
    assert 0 <= product.quantity_reserved <= product.quantity_on_hand


def test_concurrent_acceptances_of_the_last_units_take_exactly_what_is_left(company):
    """Two units left after an order holding three: of six customers asking one each at once,
    exactly two get them, and availability ends at zero, never below."""
    factories.catalog(company)
    coffee = Product.objects.get(sku="CAF-001")
    product_stock_set(product=coffee, quantity_on_hand=5)
    contacts = customers(company, 7)
    quotes = [
        quote_create(company=company, contact=c, items=[QuoteItem("CAF-001", 1)])
        for c in contacts[:6]
    ]
    quote_accept(
        quote=quote_create(company=company, contact=contacts[6], items=[QuoteItem("CAF-001", 3)])
    )

    outcomes = accept_all_at_once(quotes)

    assert outcomes == Counter({"accepted": 2, "insufficient_stock": 4})
    coffee.refresh_from_db()
    assert (coffee.quantity_on_hand, coffee.quantity_reserved, coffee.quantity_available) == (
        5,
        5,
        0,
    )
    assert_stock_adds_up(coffee)


@pytest.mark.parametrize("repeat", range(3))
def test_acceptances_racing_a_delivery_and_a_cancellation_never_oversell(company, repeat):
    """On hand 5: two orders of two, one unit free. At once: one order is delivered (two units
    leave), the other cancelled (two freed), four customers accept one each. However they
    interleave, what is reserved is what the accepted orders hold, within what is left."""
    factories.catalog(company)
    coffee = Product.objects.get(sku="CAF-001")
    product_stock_set(product=coffee, quantity_on_hand=5)
    contacts = customers(company, 6)
    quotes = [
        quote_create(company=company, contact=c, items=[QuoteItem("CAF-001", 1)])
        for c in contacts[:4]
    ]
    delivered, cancelled = (
        quote_accept(
            quote=quote_create(company=company, contact=c, items=[QuoteItem("CAF-001", 2)])
        )
        for c in contacts[4:]
    )

    outcomes = at_once(
        partial(outcome_of, partial(quote_deliver, quote=delivered)),
        partial(outcome_of, partial(quote_cancel, quote=cancelled)),
        *[partial(outcome_of, partial(quote_accept, quote=q)) for q in quotes],
    )

    assert outcomes[:2] == ["delivered", "cancelled"], outcomes
    accepted = outcomes[2:].count("accepted")
    assert 1 <= accepted <= 3  # 1 free at first, 3 once the cancellation freed two
    assert set(outcomes[2:]) <= {"accepted", "insufficient_stock"}, outcomes
    coffee.refresh_from_db()
    assert (coffee.quantity_on_hand, coffee.quantity_reserved) == (3, accepted)
    assert_stock_adds_up(coffee)


def test_delivering_one_order_twice_at_once_consumes_it_once(company):
    factories.catalog(company)
    (contact,) = customers(company, 1)
    order = quote_accept(
        quote=quote_create(company=company, contact=contact, items=[QuoteItem("TAZ-002", 2)])
    )

    outcomes = at_once(*[partial(outcome_of, partial(quote_deliver, quote=order))] * 2)

    assert outcomes == ["delivered", "delivered"]
    mug = Product.objects.get(sku="TAZ-002")
    assert (mug.quantity_on_hand, mug.quantity_reserved) == (1, 0)
    assert StateLog.objects.filter(object_id=order.pk, transition="deliver").count() == 1


def accept_as_the_tool_does(company, reference: str) -> str:
    """accept_quote's locking: the quote (its opportunity first) read under lock by reference,
    then accepted in the same transaction."""
    try:
        with transaction.atomic():
            quote = quote_get(
                company=company, reference=reference, for_update=True, with_opportunity=True
            )
            return quote_accept(quote=quote, locked=True).state
    except ValidationFailed as error:
        return error.code


@pytest.mark.parametrize("via", ["service", "tool"])
def test_quotes_of_one_opportunity_accepted_at_once_win_it_once(company, via):
    """Every quote of the opportunity accepted at once: one wins it and reserves, the others
    find themselves superseded; nobody deadlocks, stock is reserved once."""
    factories.catalog(company)
    (contact,) = customers(company, 1)
    opportunity = opportunity_create(company=company, contact=contact, title="Oficina")
    quotes = [
        quote_create(
            company=company,
            contact=contact,
            items=[QuoteItem("CAF-001", 2)],
            opportunity=opportunity,
        )
        for _ in range(4)
    ]
    if via == "service":
        calls = [partial(outcome_of, partial(quote_accept, quote=q)) for q in quotes]
    else:
        calls = [partial(accept_as_the_tool_does, company, q.reference) for q in quotes]

    outcomes = at_once(*calls)

    assert sorted(outcomes) == ["accepted", *["invalid_state"] * 3], outcomes
    states = Counter(Quote.objects.values_list("state", flat=True))
    assert states == Counter({"accepted": 1, "superseded": 3})
    coffee = Product.objects.get(sku="CAF-001")
    assert coffee.quantity_reserved == 2
    assert_stock_adds_up(coffee)
