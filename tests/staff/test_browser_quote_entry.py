"""A salesperson types a quote in headless Chromium (tests/browser.py): products found by
name as they type, each row's price, stock and total and the quote's totals shown as they
type, the stock problem said with how many are left, then the quote saved with its rows."""

from decimal import Decimal

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from sales.models import Quote
from sales.services.catalog import price_list_item_set, product_create
from tests.browser import click_and_load, log_in, screenshot, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]


def choose(browser, select_id: str, typed: str, shown: str) -> None:
    """Pick in one of Django admin's autocompletes (select2) by typing, as staff do."""
    container = browser.find_element(By.CSS_SELECTOR, f"#{select_id} + .select2")
    container.find_element(By.CSS_SELECTOR, ".select2-selection").click()
    search = wait_for(browser, ".select2-container--open .select2-search__field")
    search.send_keys(typed)
    # Until the search answers, the list is the one shown on opening (every product): wait
    # for the highlighted choice to be the one wanted before Enter.
    WebDriverWait(browser, 20).until(
        lambda d: any(
            shown in option.text
            for option in d.find_elements(By.CSS_SELECTOR, ".select2-results__option--highlighted")
        )
    )
    search.send_keys(Keys.ENTER)


def cell_text(browser, row: int, field: str) -> str:
    return browser.find_element(By.CSS_SELECTOR, f"#lines-{row} td.field-{field}").text


def wait_text(browser, css: str, text: str) -> None:
    WebDriverWait(browser, 20).until(
        lambda d: any(text in e.text for e in d.find_elements(By.CSS_SELECTOR, css))
    )


def test_a_salesperson_types_a_quote_and_sees_prices_stock_and_totals_as_they_type(
    browser, live_server, sol_day, sol_admin
):
    company = sol_day.company
    price_list = sol_day.quote.price_list
    mug = product_create(
        company=company, sku="TAZ-002", name="Taza de cerámica", quantity_on_hand=3
    )
    price_list_item_set(price_list=price_list, product=mug, unit_price=Decimal("4.99"))
    log_in(browser, live_server.url, sol_admin.username)

    browser.get(f"{live_server.url}/admin/sales/quote/add/")
    wait_for(browser, "#lines-group")
    Select(browser.find_element(By.ID, "id_company")).select_by_visible_text(company.name)
    choose(browser, "id_contact", "Ana", "Ana")

    # The first row: found by name, priced as soon as it is chosen.
    choose(browser, "id_lines-0-product", "crema", "Crema")
    quantity = browser.find_element(By.ID, "id_lines-0-quantity")
    quantity.clear()
    quantity.send_keys("2")
    WebDriverWait(browser, 20).until(
        lambda d: (
            "12,50" in cell_text(d, 0, "unit_price_shown")
            and "30,25" in cell_text(d, 0, "total_shown")  # 25,00 and 21 % tax
        )
    )

    # The second: more mugs than there are, said with how many are left.
    choose(browser, "id_lines-1-product", "TAZ", "Taza")
    quantity = browser.find_element(By.ID, "id_lines-1-quantity")
    quantity.clear()
    quantity.send_keys("5")
    wait_text(browser, "#lines-1 .quote-entry-row-problems li", "Solo quedan 3")
    assert cell_text(browser, 1, "available_shown") == "3"
    screenshot(browser, "quote-entry-stock", documented=True)

    quantity.send_keys(Keys.BACKSPACE, "3")
    WebDriverWait(browser, 20).until(
        lambda d: not d.find_elements(By.CSS_SELECTOR, "#lines-1 .quote-entry-row-problems li")
    )
    # 30,25 and 14,97 with its 21 % tax, 18,11.
    WebDriverWait(browser, 20).until(
        lambda d: "48,36" in d.find_element(By.ID, "quote-entry-totals").text
    )
    screenshot(browser, "quote-entry-priced", documented=True)

    click_and_load(
        browser,
        browser.find_element(By.CSS_SELECTOR, 'input[name="_save"]'),
        "ul.messagelist li.success",
    )
    quote = Quote.objects.exclude(pk=sol_day.quote.pk).get()
    assert [(line.sku, line.quantity) for line in quote.lines.all()] == [
        (sol_day.quote.lines.first().sku, 2),
        ("TAZ-002", 3),
    ]
    assert quote.state == Quote.State.DRAFT
