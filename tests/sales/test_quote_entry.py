"""Typing a quote in the admin: the rows priced as staff type them, every problem at once in
staff's words (sales.services.quote_pricing.quote_preview, sales.admin.quote_entry)."""

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import override

from core.models import StaffMembership
from sales.models import Product, Quote
from sales.services.catalog import price_list_item_set, product_create
from sales.services.quote_pricing import MAX_QUOTE_LINES, quote_preview
from tests.admin_pages import quote_form_data

pytestmark = pytest.mark.django_db

PREVIEW = "/admin/sales/quote/add/preview/"


@pytest.fixture
def seller(company):
    user = get_user_model().objects.create_user(username="vera", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="sales"))
    StaffMembership.objects.create(user=user, company=company)
    return user


@pytest.fixture
def seller_client(client, seller):
    client.force_login(seller)
    return client


def preview(company, rows):
    with override("es"):
        return quote_preview(company=company, rows=rows, at=timezone.now())


# --- quote_preview -----------------------------------------------------------------------------


def test_rows_are_priced_with_stock_and_totals_as_the_quote_would_be(company, catalog):
    result = preview(company, [("CAF-001", 3), ("MOL-003", 1)])

    assert result.ok
    coffee, grinder = result.lines
    assert (coffee.unit_price, coffee.available, coffee.total) == (
        Decimal("12.50"),
        10,
        Decimal("41.25"),  # 37.50 and 10 % tax
    )
    assert (grinder.available, grinder.total) == (None, Decimal("42.35"))  # stock not tracked
    assert (result.subtotal, result.tax, result.total) == (
        Decimal("72.50"),
        Decimal("11.10"),
        Decimal("83.60"),
    )


def test_every_problem_is_found_at_once_each_on_its_row(company, catalog):
    result = preview(
        company, [("TAZ-002", 4), ("NOPE-1", 1), ("FIL-005", 1), ("CAF-001", 0), ("CAF-001", None)]
    )

    assert not result.ok
    assert [list(line.problems) for line in result.lines] == [
        ["Solo quedan 3 de «Taza de cerámica» (se piden 4)."],
        ["Ningún producto activo tiene el SKU «NOPE-1»."],
        ["«Filtros» no está en la lista de precios vigente."],
        ["La cantidad debe estar entre 1 y 10.000."],
        ["La cantidad debe estar entre 1 y 10.000."],
    ]
    assert result.total == 0  # no total while a row cannot be priced


def test_repeated_skus_count_together_against_the_stock(company, catalog):
    result = preview(company, [("TAZ-002", 2), ("taz-002", 2)])

    assert [list(line.problems) for line in result.lines] == [
        ["Solo quedan 3 de «Taza de cerámica» (se piden 4)."],
        [],
    ]


def test_one_left_and_none_left_are_said_as_such(company, catalog):
    Product.objects.filter(sku="TAZ-002").update(quantity_on_hand=1)
    assert preview(company, [("TAZ-002", 2)]).lines[0].problems == (
        "Solo queda 1 de «Taza de cerámica» (se piden 2).",
    )
    Product.objects.filter(sku="TAZ-002").update(quantity_on_hand=0)
    assert preview(company, [("TAZ-002", 1)]).lines[0].problems == (
        "No quedan existencias de «Taza de cerámica».",
    )


def test_the_quote_wide_limits(company, catalog):
    assert preview(company, []).problems == ("Añada al menos un producto.",)
    for number in range(MAX_QUOTE_LINES + 1):
        product = product_create(
            company=company, sku=f"X-{number}", name=f"Extra {number}", track_stock=False
        )
        price_list_item_set(price_list=catalog.price_list, product=product, unit_price="1.00")
    fifty = preview(company, [(f"X-{n}", 1) for n in range(MAX_QUOTE_LINES)])
    fifty_one = preview(company, [(f"X-{n}", 1) for n in range(MAX_QUOTE_LINES + 1)])
    assert fifty.ok
    assert fifty_one.problems == ("Una cotización admite como máximo 50 productos distintos.",)


def test_an_amount_too_large_to_store_is_refused(company, catalog):
    huge = product_create(company=company, sku="BIG-1", name="Grande", track_stock=False)
    price_list_item_set(price_list=catalog.price_list, product=huge, unit_price="99999999.00")

    result = preview(company, [("BIG-1", 10_000)])

    assert result.problems == (
        "El importe supera lo que admite una cotización: divídala en varias.",
    )


def test_without_a_price_list_in_force_nothing_is_priced(company):
    result = preview(company, [("CAF-001", 1)])

    assert result.problems == ("No hay una lista de precios vigente para cotizar.",)
    assert result.lines[0].unit_price is None


def test_the_preview_reads_in_two_statements(company, catalog, django_assert_max_num_queries):
    with django_assert_max_num_queries(2):
        preview(company, [(sku, 1) for sku in ("CAF-001", "TAZ-002", "MOL-003", "FIL-005")])


# --- the form and its preview view ------------------------------------------------------------


def test_the_preview_view_prices_the_form_as_it_stands(seller_client, company, ana, catalog):
    data = quote_form_data(company, ana, [("CAF-001", "3"), ("TAZ-002", "5"), ("", "")])

    answer = seller_client.post(PREVIEW, data, HTTP_ACCEPT_LANGUAGE="es").json()

    assert answer["rows"] == [
        {
            "index": 0,
            "unit_price": "12,50\xa0€",
            "available": 10,
            "total": "41,25\xa0€",
            "problems": [],
        },
        {
            "index": 1,
            "unit_price": "4,99\xa0€",
            "available": 3,
            "total": "30,19\xa0€",
            "problems": ["Solo quedan 3 de «Taza de cerámica» (se piden 5)."],
        },
    ]
    # Priced in full, short of stock or not: what the quote would come to.
    assert answer["total"] == "71,44\xa0€"
    unpriced = {**data, "lines-1-product": catalog.unpriced.pk}
    assert seller_client.post(PREVIEW, unpriced).json()["total"] == "—"  # a row has no price
    data["lines-1-quantity"] = "2"
    answer = seller_client.post(PREVIEW, data).json()
    assert (answer["subtotal"], answer["tax"], answer["total"]) == (
        "47,48\xa0€",
        "5,85\xa0€",
        "53,33\xa0€",
    )


def test_the_preview_view_is_for_the_staffs_own_companies(
    seller_client, company, other_company, ana, catalog
):
    data = quote_form_data(company, ana, [("CAF-001", "1")])
    data["company"] = other_company.pk

    assert seller_client.post(PREVIEW, data).status_code == 403
    assert seller_client.get(PREVIEW).status_code == 405
    assert seller_client.post(PREVIEW, {**data, "company": "x"}).json()["rows"] == []


def test_a_product_of_another_company_is_refused_on_its_row(
    admin_client, company, other_company, ana, catalog
):
    foreign = product_create(company=other_company, sku="CAF-001", name="Café ajeno")
    data = quote_form_data(company, ana, [("CAF-001", "1")])
    data["lines-0-product"] = foreign.pk

    response = admin_client.post(reverse("admin:sales_quote_add"), data)

    assert response.status_code == 200
    assert "Ese producto es de otra empresa." in response.content.decode()
    assert not Quote.objects.exists()


def test_a_quote_made_from_rows_has_them_as_its_lines(seller_client, company, ana, catalog):
    response = seller_client.post(
        reverse("admin:sales_quote_add"),
        quote_form_data(company, ana, [("CAF-001", "2"), ("MOL-003", "1"), ("CAF-001", "1")]),
    )

    assert response.status_code == 302
    quote = Quote.objects.get()
    assert [(line.sku, line.quantity) for line in quote.lines.all()] == [
        ("CAF-001", 3),
        ("MOL-003", 1),
    ]
    assert quote.total == Decimal("41.25") + Decimal("42.35")


def test_the_product_picker_offers_only_active_products(seller_client, company, catalog):
    answer = seller_client.get(
        reverse("admin:autocomplete"),
        {
            "term": "",
            "app_label": "sales",
            "model_name": "quoteline",
            "field_name": "product",
        },
    ).json()

    offered = {item["text"] for item in answer["results"]}
    assert "Café en grano 1 kg (CAF-001)" in offered
    assert "Descalcificador (DES-004)" not in offered
