"""The quote expiry sweep goes on past a quote that fails, and expires it on a later run."""

from datetime import timedelta

import pytest

from sales.models import Quote
from sales.services.quote_lifecycle import quote_create, quotes_expire_due
from sales.services.quote_pricing import QuoteItem
from tests.row_faults import update_refused

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def test_one_quote_that_fails_to_expire_leaves_the_others_expired_and_stays_due(
    company, ana, bruno, catalog, caplog
):
    failing = quote_create(company=company, contact=ana, items=[QuoteItem("CAF-001", 1)])
    other = quote_create(company=company, contact=bruno, items=[QuoteItem("TAZ-002", 1)])
    later = max(failing.valid_until, other.valid_until) + timedelta(minutes=1)

    with update_refused(failing):
        assert quotes_expire_due(now=later) == 1

    states = dict(Quote.objects.values_list("pk", "state"))
    assert states == {failing.pk: Quote.State.SENT, other.pk: Quote.State.EXPIRED}
    assert f"sweep sales.quotes_expire: row {failing.pk} failed" in caplog.text
    assert quotes_expire_due(now=later) == 1
    failing.refresh_from_db()
    assert failing.state == Quote.State.EXPIRED
