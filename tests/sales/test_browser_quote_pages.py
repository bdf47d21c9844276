"""The quote page on a customer's phone: headless Chromium at phone width against the live
server, from the link of the quote's email to an acceptance with the step-up code texted to
the customer's own phone, and a rejection. Every page is checked with axe-core (WCAG A and
AA: no serious or critical violation); the screenshots docs/customer-links.md shows go to
docs/images/links/ with GARANTE_REFRESH_DOCS_SCREENSHOTS=1."""

import re

import pytest
from django.core import mail
from django.core.cache import caches
from selenium import webdriver
from selenium.webdriver.common.by import By

from sales.models import Quote
from sales.services import QuoteItem, quote_create
from tests.browser import page_text, screenshot, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]


def shot(driver: webdriver.Chrome, name: str) -> None:
    screenshot(driver, f"links-{name}", documented=True, folder="links")


def accessible(driver: webdriver.Chrome, axe) -> None:
    found = axe(driver)
    assert found == [], found


@pytest.fixture
def quote_link(settings, live_server, company, ana, catalog, sms_outbox):
    """Ana's quote of two coffees and a mug, sent: (quote, the link of its email)."""
    settings.GARANTE_PUBLIC_URL = live_server.url
    caches["shared"].clear()
    mail.outbox.clear()
    quote = quote_create(
        company=company,
        contact=ana,
        items=[QuoteItem("CAF-001", 2), QuoteItem("TAZ-002", 1)],
    )
    (email,) = mail.outbox
    link = re.search(re.escape(live_server.url) + r"/q/\S+", email.body).group(0)
    return quote, link


def test_a_customer_accepts_a_quote_with_the_code_texted_to_them(
    phone_browser, quote_link, axe, sms_outbox, catalog
):
    quote, link = quote_link
    driver = phone_browser

    driver.get(link)
    wait_for(driver, "main h1")
    text = page_text(driver)
    assert f"Cotización {quote.reference}" in text
    assert "Café en grano 1 kg" in text and "Taza de cerámica" in text
    assert "Válida hasta" in text and "enviada" in text
    assert driver.execute_script("return document.documentElement.scrollWidth") <= 390
    accessible(driver, axe)
    shot(driver, "10-quote")

    driver.find_element(By.XPATH, "//button[normalize-space()='Aceptar la cotización']").click()
    wait_for(driver, "input#code")
    assert "Le hemos enviado un código de 6 cifras (teléfono terminado en 22)" in page_text(driver)
    accessible(driver, axe)
    shot(driver, "11-code")

    # A wrong code first: said so, nothing accepted.
    code = re.search(r"\b(\d{6})\b", sms_outbox[-1].body).group(1)
    driver.find_element(By.ID, "code").send_keys(f"{(int(code) + 1) % 1_000_000:06d}")
    driver.find_element(By.XPATH, "//button[normalize-space()='Confirmar y aceptar']").click()
    wait_for(driver, ".error")
    assert "El código no es correcto." in page_text(driver)
    accessible(driver, axe)
    shot(driver, "12-wrong-code")
    quote.refresh_from_db()
    assert quote.state == Quote.State.SENT

    driver.find_element(By.ID, "code").send_keys(code)
    driver.find_element(By.XPATH, "//button[normalize-space()='Confirmar y aceptar']").click()
    wait_for(driver, ".done")
    text = page_text(driver)
    assert "Ha aceptado la cotización." in text and "aceptada" in text
    assert "Aceptar la cotización" not in text
    accessible(driver, axe)
    shot(driver, "13-accepted")
    quote.refresh_from_db()
    catalog.coffee.refresh_from_db()
    assert quote.state == Quote.State.ACCEPTED
    assert catalog.coffee.quantity_reserved == 2


def test_a_customer_rejects_a_quote_with_a_reason(phone_browser, quote_link, axe):
    quote, link = quote_link
    driver = phone_browser
    driver.get(link)
    wait_for(driver, "main h1")
    driver.find_element(By.LINK_TEXT, "Rechazarla").click()
    wait_for(driver, "textarea#reason")
    accessible(driver, axe)
    shot(driver, "14-reject")
    driver.find_element(By.ID, "reason").send_keys("Ya lo compré en otro sitio")
    driver.find_element(By.CSS_SELECTOR, "button.danger").click()
    wait_for(driver, ".done")
    assert "Ha rechazado la cotización." in page_text(driver)
    accessible(driver, axe)
    quote.refresh_from_db()
    assert (quote.state, quote.rejection_reason) == (
        Quote.State.REJECTED,
        "Ya lo compré en otro sitio",
    )
