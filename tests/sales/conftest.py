"""Sales fixtures: two customers of one company and a small priced catalog, built by services."""

from dataclasses import dataclass
from decimal import Decimal

import pytest

from core.models import Company, Contact
from core.services import contact_create
from sales.models import PriceList, Product
from sales.services.catalog import price_list_create, price_list_item_set, product_create


@dataclass
class Catalog:
    price_list: PriceList
    coffee: Product  # 12.50 + 10 % tax, 10 on hand
    mug: Product  # 4.99 + 21 % tax, 3 on hand
    grinder: Product  # 35.00 + 21 % tax, stock not tracked
    retired: Product  # inactive
    unpriced: Product  # active, but not in the price list


@pytest.fixture
def ana(company: Company) -> Contact:
    return contact_create(
        company=company,
        first_name="Ana",
        last_name="García",
        document_number="12345678Z",
        phone="+34600111222",
        email="ana@example.com",
    )


@pytest.fixture
def bruno(company: Company) -> Contact:
    return contact_create(
        company=company,
        first_name="Bruno",
        last_name="López",
        document_number="X1234567L",
        phone="+34600333444",
        email="bruno@example.com",
    )


def build_catalog(company: Company) -> Catalog:
    price_list = price_list_create(company=company, name="Tarifa", currency="EUR", is_default=True)
    coffee = product_create(
        company=company,
        sku="CAF-001",
        name="Café en grano 1 kg",
        tax_rate=Decimal("10.00"),
        quantity_on_hand=10,
    )
    mug = product_create(
        company=company, sku="TAZ-002", name="Taza de cerámica", quantity_on_hand=3
    )
    grinder = product_create(
        company=company, sku="MOL-003", name="Molinillo manual", track_stock=False
    )
    retired = product_create(
        company=company, sku="DES-004", name="Descalcificador", active=False, quantity_on_hand=5
    )
    unpriced = product_create(company=company, sku="FIL-005", name="Filtros", quantity_on_hand=5)
    price_list_item_set(price_list=price_list, product=coffee, unit_price="12.50")
    price_list_item_set(price_list=price_list, product=mug, unit_price="4.99")
    price_list_item_set(price_list=price_list, product=grinder, unit_price="35.00")
    price_list_item_set(price_list=price_list, product=retired, unit_price="9.00")
    return Catalog(price_list, coffee, mug, grinder, retired, unpriced)


@pytest.fixture
def catalog(company: Company) -> Catalog:
    return build_catalog(company)
