"""Sales data for the declared sandbox (see core's seed_sandbox command): a priced catalog, and
quotes and opportunities in terminal states for the sandbox contacts, built by the services.

Idempotent: each piece is created only if missing, so the command can run again.
"""

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from core.models import Company, Contact
from sales.models import Opportunity, PriceList, Product, Quote
from sales.services.catalog import price_list_create, price_list_item_set, product_create
from sales.services.opportunities import opportunity_create, opportunity_lose
from sales.services.quote_lifecycle import quote_accept, quote_create, quote_expire
from sales.services.quote_pricing import QuoteItem

PRICE_LIST = "Tarifa general"
PRODUCTS = [
    # sku, name, unit, tax rate, stock (None: not tracked), unit price
    ("CAF-001", "Café en grano 1 kg", "kg", "10.00", 40, "12.50"),
    ("TAZ-002", "Taza de cerámica", "unidad", "21.00", 3, "4.99"),
    ("MOL-003", "Molinillo manual", "unidad", "21.00", 8, "35.00"),
    ("CAF-010", "Cafetera espresso", "unidad", "21.00", 2, "249.00"),
    ("SRV-020", "Instalación a domicilio", "servicio", "21.00", None, "60.00"),
]


def seed(company: Company) -> None:
    price_list = _catalog(company)
    contacts = list(Contact.objects.filter(company=company).order_by("pk")[:2])
    if not contacts or not price_list.items.exists():
        return
    first, second = contacts[0], contacts[-1]
    # The first contact: an accepted quote that won its opportunity, and an expired quote.
    if not Opportunity.objects.filter(contact=first, state=Opportunity.State.WON).exists():
        won = _lead(company=company, contact=first, title="Equipamiento de oficina")
        quote_accept(
            quote=_quoted(
                company=company,
                contact=first,
                items=[QuoteItem("CAF-001", 2), QuoteItem("MOL-003", 1)],
                opportunity=won,
            )
        )
    if not Quote.objects.filter(contact=first, state=Quote.State.EXPIRED).exists():
        # Quoted a month ago, so its validity has run out; expired as the beat task would.
        past = timezone.now() - timedelta(days=30)
        quote_expire(
            quote=_quoted(
                company=company, contact=first, items=[QuoteItem("CAF-010", 1)], now=past
            ),
            tell_customer=False,
        )
    # The second contact: a lost opportunity.
    if not Opportunity.objects.filter(contact=second, state=Opportunity.State.LOST).exists():
        lost = _lead(
            company=company, contact=second, title="Cafetera para la tienda", notes="Presupuesto"
        )
        opportunity_lose(opportunity=lost, reason="Eligió otro proveedor")


def _lead(**fields: Any) -> Opportunity:
    """An opportunity as the past left it: its sales staff heard of it then, not at every
    seeding (the lead notice, run at commit, finds it notified)."""
    opportunity = opportunity_create(**fields)
    Opportunity.objects.filter(pk=opportunity.pk).update(team_notified_at=opportunity.created_at)
    return opportunity


def _quoted(**fields: Any) -> Quote:
    """A quote as the past left it: sent, and emailed then, not at every seeding (the command
    runs in one transaction, so its email task, published at commit, finds it emailed)."""
    quote = quote_create(**fields)
    Quote.objects.filter(pk=quote.pk).update(emailed_at=quote.sent_at)
    return quote


def _catalog(company: Company) -> PriceList:
    price_list = PriceList.objects.filter(company=company, name=PRICE_LIST).first()
    if price_list is None:
        price_list = price_list_create(
            company=company,
            name=PRICE_LIST,
            currency=company.currency,
            is_default=not PriceList.objects.filter(company=company, is_default=True).exists(),
        )
    for sku, name, unit, tax_rate, stock, price in PRODUCTS:
        product = Product.objects.filter(company=company, sku=sku).first()
        if product is None:
            product = product_create(
                company=company,
                sku=sku,
                name=name,
                unit=unit,
                tax_rate=Decimal(tax_rate),
                track_stock=stock is not None,
                quantity_on_hand=stock or 0,
            )
        if not price_list.items.filter(product=product).exists():
            price_list_item_set(price_list=price_list, product=product, unit_price=price)
    return price_list
