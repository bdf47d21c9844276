"""The sandbox's sales data: a priced catalog and terminal-state quotes and opportunities."""

import pytest
from django.core.management import call_command

from core.models import Company
from sales.models import Opportunity, Product, Quote

pytestmark = pytest.mark.django_db


def test_seed_sandbox_creates_the_sales_data_once(capsys):
    call_command("seed_sandbox")
    call_command("seed_sandbox")  # idempotent

    company = Company.objects.get(slug="sandbox")
    assert Product.objects.filter(company=company).count() == 5
    assert sorted(Quote.objects.filter(company=company).values_list("state", flat=True)) == [
        "accepted",
        "expired",
    ]
    assert sorted(Opportunity.objects.filter(company=company).values_list("state", flat=True)) == [
        "lost",
        "won",
    ]
    won = Opportunity.objects.get(company=company, state="won")
    assert won.quotes.get().state == Quote.State.ACCEPTED
    assert Product.objects.get(company=company, sku="CAF-001").quantity_reserved == 2
