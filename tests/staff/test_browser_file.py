"""The customer's file in a real browser (headless Chromium, tests/browser.py): a contact's page
shows each kind of their records with its count, a smart button opens the admin list of just
theirs, and a booking started from the file has the customer already chosen. With
GARANTE_REFRESH_DOCS_SCREENSHOTS=1 the screenshots docs/admin.md shows are copied to
docs/images/admin/ (names prefixed `file-`)."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from agenda.models import Appointment
from agenda.services import appointment_book, appointment_mark_attended
from core.models import Conversation
from core.services import contact_create
from sales.services.quote_lifecycle import quote_create
from sales.services.quote_pricing import QuoteItem
from support.services import case_open
from tests.browser import click_and_load, log_in, page_text, wait_for
from tests.browser import screenshot as browser_screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

DOCUMENTED = {"file-01-contact-file", "file-02-smart-button-list", "file-03-booking-from-file"}


def screenshot(driver: webdriver.Chrome, name: str) -> Path:
    return browser_screenshot(driver, name, documented=name in DOCUMENTED)


def count_of(driver: webdriver.Chrome, key: str) -> str:
    return driver.find_element(By.CSS_SELECTOR, f"#file-button-{key} .garante-file-count").text


def choose(driver: webdriver.Chrome, field: str, typed: str, shown: str) -> None:
    """Pick `shown` in the admin's autocomplete (select2) of `field`, typing `typed`."""
    driver.find_element(By.CSS_SELECTOR, f"#id_{field} + .select2 .select2-selection").click()
    wait_for(driver, ".select2-container--open .select2-search__field").send_keys(typed)

    def pick(d: webdriver.Chrome) -> bool:
        for option in d.find_elements(By.CSS_SELECTOR, ".select2-results__option"):
            if shown in option.text:
                option.click()
                return True
        return False

    # select2 redraws its list as each keystroke's answer arrives: look again until clicked.
    WebDriverWait(driver, 20, ignored_exceptions=(StaleElementReferenceException,)).until(pick)


def _history_of_ana(day) -> None:
    """Ana has been a customer for a while: a past visit, another appointment next week, a
    second quote, a second case, a conversation with the agent."""
    company, contact = day.company, day.contact
    local = timezone.now().astimezone(company.tz).replace(minute=0, second=0, microsecond=0)
    for starts in (local - timedelta(days=7), local + timedelta(days=7)):
        appointment = appointment_book(
            company=company,
            contact=contact,
            service=day.service,
            professional=day.professional,
            starts_at=starts,
            created_via=Appointment.Via.STAFF,
            enforce_customer_rules=False,
            now=starts - timedelta(days=1),
        )
    past = Appointment.objects.filter(contact=contact).order_by("starts_at").first()
    appointment_mark_attended(company=company, reference=past.reference)
    assert appointment.state == "scheduled"
    quote_create(
        company=company, contact=contact, items=[QuoteItem(day.quote.lines.first().sku, 1)]
    )
    case_open(company=company, contact=contact, subject="Cambio de cita", description="¿Puedo?")
    Conversation.objects.create(company=company, external_id="conv-ana-file", contact=contact)


def test_a_receptionist_reads_the_customers_file_follows_a_button_and_books_from_it(
    browser, live_server, sol_day, luna_day, supervisor
):
    day = sol_day
    company, ana = day.company, day.contact
    _history_of_ana(day)
    bea = contact_create(company=company, first_name="Bea", phone="+34600999888")
    beas_case = case_open(company=company, contact=bea, subject="Otra clienta", description="x")
    log_in(browser, live_server.url, supervisor.username)

    # 1. The contact's page is the customer's file: a button per kind with its count.
    browser.get(f"{live_server.url}/admin/core/contact/")
    browser.find_element(By.LINK_TEXT, str(ana)).click()
    wait_for(browser, "#file-button-appointments")
    counts = {
        key: count_of(browser, key)
        for key in ("appointments", "quotes", "orders", "cases", "conversations", "security")
    }
    assert counts == {
        "appointments": "3",
        "quotes": "2",
        "orders": "0",
        "cases": "2",
        "conversations": "1",
        "security": "1",
    }
    text = page_text(browser)
    assert "2 próximas" in text
    assert "Ficha del cliente" in text
    # Upcoming first (the soonest at the top), then the past.
    rows = [
        e.text.split()[0]
        for e in browser.find_elements(By.CSS_SELECTOR, "#file-appointments tbody tr")
    ]
    assert rows[0] == "Próximas" and rows[1] == day.appointment.reference
    assert rows.index("Pasadas") > 2
    # Another company's customer, and another customer, are nowhere.
    assert luna_day.appointment.reference not in text
    assert beas_case.reference not in text
    screenshot(browser, "file-01-contact-file")

    # 2. The cases button opens the case list filtered to Ana's: both of hers, not Bea's.
    browser.find_element(By.CSS_SELECTOR, "#file-button-cases a").click()
    wait_for(browser, "#result_list")
    listed = page_text(browser)
    assert day.case.reference in listed and "Cambio de cita" in listed
    assert beas_case.reference not in listed
    assert len(browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")) == 2
    screenshot(browser, "file-02-smart-button-list")

    # 3. Back to the file, "Reservar cita": the booking form with Ana already chosen.
    browser.back()
    wait_for(browser, "a.garante-file-action")
    browser.find_element(By.LINK_TEXT, "Reservar cita").click()
    wait_for(browser, "#appointment_form")
    chosen = browser.find_element(
        By.CSS_SELECTOR, "#id_contact + .select2 .select2-selection__rendered"
    )
    assert chosen.get_attribute("title") == str(ana)
    choose(browser, "service", "Cons", day.service.name)
    choose(browser, "professional", "Dra", day.professional.display_name)
    when = (timezone.now() + timedelta(days=2)).astimezone(company.tz)
    browser.find_element(By.ID, "id_day").send_keys(when.date().isoformat())
    browser.find_element(By.ID, "id_at").send_keys("10:00")
    screenshot(browser, "file-03-booking-from-file")
    click_and_load(
        browser,
        browser.find_element(By.CSS_SELECTOR, 'input[name="_save"]'),
        "ul.messagelist li.success",
    )
    booked = Appointment.objects.filter(contact=ana).order_by("-created_at").first()
    assert booked.starts_at.astimezone(company.tz).strftime("%Y-%m-%d %H:%M") == (
        f"{when.date().isoformat()} 10:00"
    )

    # 4. The file counts it: four appointments, three of them upcoming.
    browser.get(f"{live_server.url}/admin/core/contact/{ana.pk}/change/")
    wait_for(browser, "#file-button-appointments")
    assert count_of(browser, "appointments") == "4"
    assert "3 próximas" in page_text(browser)
    assert booked.reference in page_text(browser)
