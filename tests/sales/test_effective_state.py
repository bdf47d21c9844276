"""A quote's effective state, one rule: the model method and the QuerySet agree at every
instant around the end of a quote's validity, in every recorded state."""

from datetime import timedelta

import pytest

from sales.models import Quote
from sales.services.quote_lifecycle import quote_create
from sales.services.quote_pricing import QuoteItem
from tests.factories import quote_in

pytestmark = pytest.mark.django_db

ONE_MICROSECOND = timedelta(microseconds=1)


def _filtered_state(quote: Quote, now) -> set[str]:
    """The effective states whose filter, run in the database at `now`, finds this quote."""
    return {
        state
        for state in Quote.State.values
        if Quote.objects.in_effective_state(state, now).filter(pk=quote.pk).exists()
    }


@pytest.mark.parametrize("state", Quote.State.values)
def test_the_queryset_finds_each_quote_under_the_state_the_model_method_tells(
    company, ana, catalog, state
):
    """Just before, exactly at and just after the validity instant, the one effective state the
    database filter finds the quote under is the one `effective_state` returns."""
    quote = quote_in(state, company, ana)
    quote.refresh_from_db()

    for now in (
        quote.valid_until - ONE_MICROSECOND,
        quote.valid_until,
        quote.valid_until + ONE_MICROSECOND,
    ):
        assert _filtered_state(quote, now) == {quote.effective_state(now)}


def test_an_open_quote_is_expired_from_the_instant_its_validity_ends(company, ana, catalog):
    """At the validity instant itself the quote is already expired (the end is exclusive)."""
    quote = quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 1)])
    quote.refresh_from_db()

    assert quote.effective_state(quote.valid_until - ONE_MICROSECOND) == Quote.State.SENT
    assert quote.effective_state(quote.valid_until) == Quote.State.EXPIRED
    assert not quote.is_lapsed(quote.valid_until - ONE_MICROSECOND)
    assert quote.is_lapsed(quote.valid_until)


@pytest.mark.parametrize("state", Quote.State.values)
def test_lapsed_finds_exactly_the_open_quotes_the_model_calls_lapsed(company, ana, catalog, state):
    """The expiry sweep's selection (`lapsed`) is the model's `is_lapsed`, at every instant."""
    quote = quote_in(state, company, ana)
    quote.refresh_from_db()

    for now in (quote.valid_until - ONE_MICROSECOND, quote.valid_until):
        found = Quote.objects.lapsed(now).filter(pk=quote.pk).exists()
        assert found is quote.is_lapsed(now)
