"""Typing a quote in the admin: the rows priced as staff type them, every problem at once in
staff's words (sales.services.quote_pricing.quote_preview, sales.admin.quote_entry)."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import override

from core.errors import GaranteError, ValidationFailed
from core.models import StaffMembership
from sales.models import PriceList, Product, Quote
from sales.money import STORED_AMOUNT_LIMIT, shown
from sales.services.catalog import price_list_item_set, product_create
from sales.services.quote_pricing import (
    MAX_LINE_QUANTITY,
    MAX_QUOTE_LINES,
    QuoteItem,
    check_expected_total,
    quote_preview,
    quote_total_compute,
    require_price_list,
)
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


def test_blank_rows_are_left_out_and_each_row_keeps_what_was_typed(company, catalog):
    result = preview(company, [("  ", 3), (" caf-001 ", 2), ("", None)])

    [line] = result.lines
    assert (line.sku, line.quantity, line.product, line.problems) == (
        "caf-001",
        2,
        catalog.coffee,
        (),
    )
    assert (result.currency, result.total) == ("EUR", Decimal("27.50"))


def test_a_price_list_in_another_currency_prices_in_it(company, catalog):
    PriceList.objects.filter(pk=catalog.price_list.pk).update(currency="USD")

    assert preview(company, [("CAF-001", 1)]).currency == "USD"


def test_without_a_price_list_no_product_is_looked_up(company, catalog):
    PriceList.objects.filter(pk=catalog.price_list.pk).update(
        valid_from=timezone.now() + timedelta(days=1)
    )

    result = preview(company, [("CAF-001", 1)])

    assert result.currency == company.currency
    assert [(line.product, line.available, line.total) for line in result.lines] == [
        (None, None, None)
    ]


def test_a_row_of_the_most_units_is_one_and_one_unit_more_is_not(company, catalog):
    most = preview(company, [("MOL-003", MAX_LINE_QUANTITY)])
    over = preview(company, [("MOL-003", MAX_LINE_QUANTITY - 1), ("mol-003", 2)])

    assert most.ok and most.lines[0].problems == ()
    assert most.total == Decimal("423500.00")
    assert not over.ok
    assert [len(line.problems) for line in over.lines] == [1, 1]
    # Said on its rows, once: not again as the quote's, and no total for a quote not taken.
    assert (over.problems, over.subtotal, over.total) == ((), 0, 0)


def test_a_shortage_of_several_units_is_told_in_each_language_with_its_numbers(company, catalog):
    said = {}
    for language in ("es", "en"):
        with override(language):
            result = quote_preview(company=company, rows=[("TAZ-002", 7)], at=timezone.now())
        (problem,) = result.lines[0].problems
        said[language] = problem
        # Three left (a plural), seven asked, the product named: its words are the catalogue's.
        assert "3" in problem and "7" in problem and "Taza de cerámica" in problem
    assert said["es"] != said["en"]


def test_a_shortage_in_thousands_groups_its_numbers_as_each_language_does(company, catalog):
    Product.objects.filter(sku="TAZ-002").update(quantity_on_hand=1234)
    said = {}
    for language in ("es", "en"):
        with override(language):
            result = quote_preview(company=company, rows=[("TAZ-002", 5000)], at=timezone.now())
        (said[language],) = result.lines[0].problems

    assert "1.234" in said["es"] and "5.000" in said["es"]
    assert "1,234" in said["en"] and "5,000" in said["en"]


def test_asking_for_exactly_what_is_left_is_fine(company, catalog):
    result = preview(company, [("TAZ-002", 2), ("TAZ-002", 1)])

    assert result.ok and [line.available for line in result.lines] == [3, 3]


def test_a_row_without_a_quantity_asks_for_no_stock_and_has_no_total(company, catalog):
    Product.objects.filter(sku="TAZ-002").update(quantity_on_hand=0)

    result = preview(company, [("CAF-001", 2), ("CAF-001", 0), ("TAZ-002", None)])

    assert [line.total for line in result.lines] == [Decimal("27.50"), None, None]
    assert [line.unit_price for line in result.lines] == [
        Decimal("12.50"),
        Decimal("12.50"),
        Decimal("4.99"),
    ]
    assert [len(line.problems) for line in result.lines] == [0, 1, 1]  # the quantity alone
    assert (result.subtotal, result.tax, result.total) == (0, 0, 0)


def test_the_preview_prices_from_the_list_in_force_at_its_instant(company, catalog):
    now = timezone.now()
    PriceList.objects.filter(pk=catalog.price_list.pk).update(valid_from=now)

    before = quote_preview(company=company, rows=[("CAF-001", 1)], at=now - timedelta(days=1))

    assert before.lines[0].unit_price is None and not before.ok
    assert quote_preview(company=company, rows=[("CAF-001", 1)], at=now).ok


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


# --- quote_total_compute and its refusals, as the agent's tools meet them ----------------------


def priced(company, price_list, items):
    return quote_total_compute(
        company=company,
        price_list=price_list,
        items=[QuoteItem(sku=sku, quantity=quantity) for sku, quantity in items],
    )


class LazyShown:
    """An amount as the language in use writes it, when it is read."""

    def __init__(self, amount, currency):
        self.amount, self.currency = amount, currency

    def __str__(self):
        return shown(self.amount, self.currency)


def refused_in_each_language(attempt, values=()):
    """The refusal `attempt` raises for a Spanish and for an English company: one code and
    extras, and a message in each language (not the other's, not its type's generic one).
    Its words are not pinned. `values` are what the message carries written in the language
    in use (an amount): the words around them must differ too, not only the way a number is
    written."""
    said = {}
    for language in ("es", "en"):
        with override(language):
            with pytest.raises(GaranteError) as refused:
                attempt()
            error = refused.value
            said[language] = (str(error.user_message), str(type(error).default_message))
            said[language, "code"] = (error.code, error.extras)
            words = said[language][0]
            for value in values:
                written = str(value)
                assert written in words
                words = words.replace(written, "")
            said[language, "words"] = words
    assert said["es", "code"] == said["en", "code"]
    assert said["es"][0].strip() and said["en"][0].strip()
    assert said["es"][0] != said["en"][0]
    assert said["es", "words"] != said["en", "words"]
    assert said["es"][0] != said["es"][1] and said["en"][0] != said["en"][1]
    return error


def test_repeats_of_a_sku_are_one_line_priced_from_the_catalog(company, catalog):
    totals = priced(company, catalog.price_list, [("CAF-001", 2), (" caf-001 ", 1), ("MOL-003", 1)])

    coffee, grinder = totals.lines
    assert (coffee.product, coffee.quantity, coffee.unit_price, coffee.tax_rate) == (
        catalog.coffee,
        3,
        Decimal("12.50"),
        Decimal("10.00"),
    )
    assert (coffee.subtotal, coffee.tax, coffee.total) == (
        Decimal("37.50"),
        Decimal("3.75"),
        Decimal("41.25"),
    )
    assert (grinder.product, grinder.quantity, grinder.total) == (
        catalog.grinder,
        1,
        Decimal("42.35"),
    )
    assert (totals.currency, totals.subtotal, totals.tax, totals.total) == (
        "EUR",
        Decimal("72.50"),
        Decimal("11.10"),
        Decimal("83.60"),
    )


def test_a_line_of_one_and_a_line_of_the_most_units_are_priced(company, catalog):
    one = priced(company, catalog.price_list, [("MOL-003", 1)])
    most = priced(company, catalog.price_list, [("MOL-003", 6_000), ("MOL-003", 4_000)])

    assert [line.quantity for line in one.lines] == [1]
    assert [line.quantity for line in most.lines] == [MAX_LINE_QUANTITY]
    assert most.total == Decimal("423500.00")


@pytest.mark.parametrize(
    ("items", "code", "extras"),
    [
        ([("CAF-001", 0)], "invalid_quantity", {}),
        ([("CAF-001", 2), ("MOL-003", -1)], "invalid_quantity", {}),
        ([("CAF-001", MAX_LINE_QUANTITY + 1)], "invalid_quantity", {}),
        ([("MOL-003", 6_000), ("mol-003", 4_001)], "invalid_quantity", {}),  # one line
        ([], "no_items", {}),
        ([(f"NO-{n}", 1) for n in range(MAX_QUOTE_LINES + 1)], "too_many_items", {}),
        ([("CAF-001", 1), (" nope-1 ", 1)], "product_not_found", {"sku": "nope-1"}),
        ([("FIL-005", 1)], "product_not_found", {"sku": "FIL-005"}),  # not priced
        ([("CAF-001", 1), ("DES-004", 1)], "product_not_found", {"sku": "DES-004"}),  # retired
    ],
)
def test_each_refusal_of_pricing_has_its_code_and_its_own_words(
    company, catalog, items, code, extras
):
    error = refused_in_each_language(lambda: priced(company, catalog.price_list, items))

    assert (error.code, error.extras) == (code, extras)


def test_an_amount_too_large_to_store_is_refused_in_its_own_words(company, catalog):
    huge = product_create(company=company, sku="BIG-1", name="Grande", track_stock=False)
    price_list_item_set(price_list=catalog.price_list, product=huge, unit_price="99999999.00")

    error = refused_in_each_language(
        lambda: priced(company, catalog.price_list, [("BIG-1", 10_000)])
    )

    assert (error.code, error.extras) == ("amount_too_large", {})


def test_a_total_not_ours_is_refused_with_ours_in_its_own_words():
    error = refused_in_each_language(
        lambda: check_expected_total("12.49", Decimal("12.50"), "EUR"),
        values=[LazyShown(Decimal("12.50"), "EUR")],
    )

    assert (error.code, error.extras) == ("total_mismatch", {"total": "12.50", "currency": "EUR"})


def test_the_price_list_to_quote_from_is_the_one_in_force_then(company, catalog):
    now = timezone.now()
    PriceList.objects.filter(pk=catalog.price_list.pk).update(valid_from=now)

    assert require_price_list(company, now) == catalog.price_list
    error = refused_in_each_language(lambda: require_price_list(company, now - timedelta(days=1)))
    assert (error.code, error.extras) == ("no_price_list", {})


def test_a_grand_total_over_the_limit_only_with_its_tax_is_refused(company, catalog):
    """Each line, and the sum of the lines before tax, fits; the total with tax does not."""
    items = []
    for sku in ("BIG-1", "BIG-2"):
        product = product_create(company=company, sku=sku, name=sku, tax_rate=Decimal("10.00"))
        unit_price = STORED_AMOUNT_LIMIT * Decimal("0.46") / MAX_LINE_QUANTITY
        price_list_item_set(price_list=catalog.price_list, product=product, unit_price=unit_price)
        items.append((sku, MAX_LINE_QUANTITY))

    one = priced(company, catalog.price_list, items[:1])
    with pytest.raises(ValidationFailed) as refused:
        priced(company, catalog.price_list, items)

    assert one.total < STORED_AMOUNT_LIMIT and 2 * one.subtotal < STORED_AMOUNT_LIMIT
    assert refused.value.code == "amount_too_large"
