"""Concurrent acceptances on PostgreSQL, each in its own thread and database connection."""

from collections import Counter
from functools import partial

import pytest

from core.errors import ValidationFailed
from core.services import contact_create
from sales.models import Opportunity, Product, Quote
from sales.selectors import price_list_current
from sales.services.catalog import price_list_item_set, product_create
from sales.services.opportunities import opportunity_create, opportunity_lose
from sales.services.quote_lifecycle import quote_accept, quote_create
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
    """Losing locks the quotes before the opportunity, as acceptance does: one of them wins,
    and the other is refused with the outcome (never a deadlock, never both)."""
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
        assert states == ["accepted", "accepted"]
