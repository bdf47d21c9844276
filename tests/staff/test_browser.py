"""The admin in a real browser: headless Chromium (tests/browser.py) against pytest-django's
live server. Every test saves screenshots under var/screenshots/; with
GARANTE_REFRESH_DOCS_SCREENSHOTS=1 the ones docs/admin.md shows are copied to docs/images/admin/.
"""

from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from core.models import Conversation
from tests.browser import click_and_load, log_in, page_text, wait_for
from tests.browser import screenshot as browser_screenshot
from tests.factories import ANA_DOCUMENT
from tests.staff.confirming import CONFIRMATION_PAGE, answer_confirmation
from tests.staff.trace_calls import call

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

# The screenshots docs/admin.md shows.
DOCUMENTED = {
    "01-landing",
    "03-appointment-cancelled-with-history",
    "05-conversation-trace",
    "06-agenda-free-slots",
    "07-booking-form-prefilled",
    "08-agenda-booked",
    "08b-agenda-moving",
    "10-quote-sent",
    "11-case-replied",
}


def screenshot(driver: webdriver.Chrome, name: str) -> Path:
    return browser_screenshot(driver, name, documented=name in DOCUMENTED)


def test_a_staff_member_cancels_an_appointment_sees_the_history_and_only_their_company(
    browser, live_server, sol_day, luna_day, agent
):
    appointment = sol_day.appointment
    conversation = Conversation.objects.create(company=sol_day.company, external_id="conv-ana-1")
    call(
        sol_day.company,
        "identify_contact",
        {"document": ANA_DOCUMENT},
        conversation_id=conversation.external_id,
        idempotency_key="k-1",
    )
    call(
        sol_day.company,
        "list_my_appointments",
        {"identifier": ANA_DOCUMENT},
        conversation_id=conversation.external_id,
    )
    call(
        sol_day.company,
        "cancel_appointment",
        {"identifier": ANA_DOCUMENT, "appointment": "AP-ZZZZZZ"},
        conversation_id=conversation.external_id,
        idempotency_key="k-2",
    )

    # 1. Log in: the landing page shows today's work of this company only.
    log_in(browser, live_server.url, agent.username)
    landing = page_text(browser)
    assert appointment.reference in landing
    assert sol_day.case.reference in landing
    assert sol_day.quote.reference in landing
    assert luna_day.appointment.reference not in landing
    assert luna_day.company.name not in landing
    screenshot(browser, "01-landing")

    # 2. Open today's appointment from the landing page, press "Cancel", and confirm it on
    # the page that opens, with a reason.
    browser.find_element(By.LINK_TEXT, appointment.reference).click()
    wait_for(browser, 'button[name="_fsm_transition_to"][value="cancel"]')
    screenshot(browser, "02-appointment-change")
    browser.find_element(
        By.CSS_SELECTOR, 'button[name="_fsm_transition_to"][value="cancel"]'
    ).click()
    wait_for(browser, CONFIRMATION_PAGE)
    answer_confirmation(browser, "customer_asked")
    wait_for(browser, "ul.messagelist li.success")

    # 3. The appointment is cancelled, and its history says who did it.
    appointment.refresh_from_db()
    assert appointment.state == "cancelled"
    history = browser.find_element(By.CSS_SELECTOR, "#content-main .inline-group").text
    assert "Cancelar" in history  # the button pressed, as staff read it
    assert "Agendada" in history and "Cancelada" in history
    assert agent.username in history
    assert not browser.find_elements(
        By.CSS_SELECTOR, 'button[name="_fsm_transition_to"][value="cancel"]'
    )
    screenshot(browser, "03-appointment-cancelled-with-history")

    # 4. The case queue: this company's cases, none of the other's.
    browser.get(f"{live_server.url}/admin/support/case/")
    wait_for(browser, "#result_list")
    queue = page_text(browser)
    assert sol_day.case.reference in queue
    assert luna_day.case.reference not in queue
    screenshot(browser, "04-case-queue")

    # 5. The conversation's trace, in order, arguments masked.
    browser.get(f"{live_server.url}/admin/core/conversation/{conversation.pk}/change/")
    trace = wait_for(browser, "table.garante-trace").text
    assert trace.index("identify_contact") < trace.index("list_my_appointments")
    assert "reference_not_seen" in trace
    assert ANA_DOCUMENT not in page_text(browser)
    screenshot(browser, "05-conversation-trace")

    # 6. Another company's appointment, even by its address, does not exist for this user.
    browser.get(f"{live_server.url}/admin/agenda/appointment/{luna_day.appointment.pk}/change/")
    wait_for(browser, "ul.messagelist")
    assert luna_day.appointment.reference not in page_text(browser)
    assert luna_day.contact.first_name not in page_text(browser)
    luna_day.appointment.refresh_from_db()
    assert luna_day.appointment.state == "scheduled"


def press_transition(driver: webdriver.Chrome, name: str) -> None:
    driver.find_element(
        By.CSS_SELECTOR, f'button[name="_fsm_transition_to"][value="{name}"]'
    ).click()
    wait_for(driver, "ul.messagelist li")


def choose_by_autocomplete(driver: webdriver.Chrome, field: str, typed: str, shown: str) -> None:
    """Pick `shown` in the admin's autocomplete (select2) of `field`, typing `typed`."""
    driver.find_element(By.CSS_SELECTOR, f"#id_{field} + .select2 .select2-selection").click()
    search = wait_for(driver, ".select2-container--open .select2-search__field")
    search.send_keys(typed)

    def pick(d: webdriver.Chrome) -> bool:
        for option in d.find_elements(By.CSS_SELECTOR, ".select2-results__option"):
            if shown in option.text:
                option.click()
                return True
        return False

    # select2 redraws its list when the answer to each keystroke arrives: an option found a
    # moment ago may be gone, so look again until the one shown is clicked.
    WebDriverWait(driver, 20, ignored_exceptions=(StaleElementReferenceException,)).until(pick)


def test_a_receptionist_books_from_a_free_slot_moves_it_and_cancels_it(
    browser, live_server, sol_day, luna_day, agent
):
    from agenda.models import Appointment

    company = sol_day.company
    log_in(browser, live_server.url, agent.username)

    # The agenda page: every professional of the company, today, with the free slots.
    browser.get(f"{live_server.url}/admin/agenda/professional/agenda/")
    wait_for(browser, ".agenda-column a.free-slot")
    assert sol_day.appointment.reference in page_text(browser)
    assert luna_day.professional.display_name not in page_text(browser)
    screenshot(browser, "06-agenda-free-slots")

    slot = browser.find_elements(By.CSS_SELECTOR, ".agenda-column a.free-slot")[-1]
    at = slot.get_attribute("data-time")
    slot.click()

    # The booking form comes prefilled with the slot; the contact is chosen by autocomplete.
    wait_for(browser, "#appointment_form")
    assert browser.find_element(By.ID, "id_at").get_attribute("value") == at
    choose_by_autocomplete(browser, "contact", "Ana", str(sol_day.contact))
    screenshot(browser, "07-booking-form-prefilled")
    click_and_load(
        browser,
        browser.find_element(By.CSS_SELECTOR, 'input[name="_save"]'),
        "ul.messagelist li.success",
    )
    booked = Appointment.objects.exclude(pk=sol_day.appointment.pk).get(company=company)
    assert booked.starts_at.astimezone(company.tz).strftime("%H:%M") == at

    # Back on the agenda: the appointment is there and its slot is no longer offered.
    browser.get(f"{live_server.url}/admin/agenda/professional/agenda/")
    wait_for(browser, ".agenda-column")
    assert booked.reference in page_text(browser)
    offered = [
        e.get_attribute("data-time")
        for e in browser.find_elements(By.CSS_SELECTOR, ".agenda-column a.free-slot")
    ]
    assert at not in offered
    screenshot(browser, "08-agenda-booked")

    # Move it by phone: Move, then a free slot; the reschedule form comes prefilled.
    browser.find_element(
        By.CSS_SELECTOR, f'a.move-appointment[data-reference="{booked.reference}"]'
    ).click()
    wait_for(browser, "#agenda-moving")
    screenshot(browser, "08b-agenda-moving")
    target = browser.find_elements(By.CSS_SELECTOR, ".agenda-column a.free-slot")[0]
    to = target.get_attribute("data-time")
    target.click()
    wait_for(browser, "#id_at")
    assert browser.find_element(By.ID, "id_at").get_attribute("value") == to
    click_and_load(
        browser,
        browser.find_element(By.CSS_SELECTOR, 'input[type="submit"]'),
        "ul.messagelist li.success",
    )
    booked.refresh_from_db()
    assert booked.starts_at.astimezone(company.tz).strftime("%H:%M") == to
    assert booked.reference in page_text(browser)  # the team's calendar of its new day

    # Cancel it with the transition button, from its page, and its confirmation.
    browser.get(f"{live_server.url}/admin/agenda/appointment/{booked.pk}/change/")
    wait_for(browser, 'button[name="_fsm_transition_to"][value="cancel"]')
    browser.find_element(
        By.CSS_SELECTOR, 'button[name="_fsm_transition_to"][value="cancel"]'
    ).click()
    answer_confirmation(browser, "duplicate")
    booked.refresh_from_db()
    assert booked.state == "cancelled"
    # Settled: neither Save nor Delete any more.
    assert not browser.find_elements(By.CSS_SELECTOR, 'input[name="_save"]')
    assert not browser.find_elements(By.CSS_SELECTOR, "a.deletelink")
    screenshot(browser, "09-booked-then-cancelled")


def test_a_salesperson_sends_a_quote_and_an_agent_replies_to_a_case(
    browser, live_server, sol_day, luna_day, sol_admin
):
    from django.core import mail

    from core.services import contact_create
    from sales.models import Quote
    from sales.services.quote_lifecycle import quote_create
    from sales.services.quote_pricing import QuoteItem

    company = sol_day.company
    buyer = contact_create(company=company, first_name="Berta", email="berta@example.com")
    sku = sol_day.quote.lines.first().sku
    quote = quote_create(company=company, contact=buyer, items=[QuoteItem(sku, 3)], send=False)
    log_in(browser, live_server.url, sol_admin.username)

    browser.get(f"{live_server.url}/admin/sales/quote/{quote.pk}/change/")
    wait_for(browser, 'button[name="_fsm_transition_to"][value="send"]')
    assert "37,50\xa0€" in page_text(browser) or "37,50 €" in page_text(browser)
    # Sending emails it to the customer: a confirmation page says so first, and only its
    # "Sí" sends it.
    browser.find_element(By.CSS_SELECTOR, 'button[name="_fsm_transition_to"][value="send"]').click()
    wait_for(browser, CONFIRMATION_PAGE)
    assert "Berta recibirá la cotización por correo" in page_text(browser)
    quote.refresh_from_db()
    assert quote.state == Quote.State.DRAFT
    answer_confirmation(browser, None)
    wait_for(browser, "ul.messagelist li.success")
    quote.refresh_from_db()
    assert quote.state == Quote.State.SENT
    WebDriverWait(browser, 20).until(
        lambda _d: any(quote.reference in m.subject + m.body for m in mail.outbox)
    )
    assert [m.to for m in mail.outbox if quote.reference in m.subject + m.body] == [
        ["berta@example.com"]
    ]
    screenshot(browser, "10-quote-sent")

    # A case: a public reply the customer reads, then an internal note.
    case = sol_day.case
    for body, public in (("Le reenviamos la factura hoy.", True), ("Revisar el ERP.", False)):
        browser.get(f"{live_server.url}/admin/support/case/{case.pk}/change/")
        wait_for(browser, 'textarea[name$="-body"]')
        # The new comment's form comes after the comments already made.
        textarea = browser.find_elements(
            By.CSS_SELECTOR, 'textarea[name^="comments-"]:not([name*="__prefix__"])'
        )[-1]
        textarea.send_keys(body)
        prefix = textarea.get_attribute("name").removesuffix("-body")
        # Internal note or public reply: two radio buttons.
        browser.find_element(
            By.CSS_SELECTOR, f'input[name="{prefix}-public"][value="{public}"]'
        ).click()
        click_and_load(
            browser,
            browser.find_element(By.CSS_SELECTOR, 'input[name="_continue"]'),
            "ul.messagelist li.success",
        )
    comments = list(case.comments.order_by("created_at").values_list("body", "public"))
    assert comments[-2:] == [("Le reenviamos la factura hoy.", True), ("Revisar el ERP.", False)]
    screenshot(browser, "11-case-replied")


def test_another_companys_staff_member_sees_none_of_it(
    browser, live_server, sol_day, luna_day, luna_agent
):
    log_in(browser, live_server.url, luna_agent.username)
    ours = [sol_day.appointment.reference, sol_day.case.reference, sol_day.quote.reference]
    for path in ("agenda/appointment", "support/case", "sales/quote", "core/contact"):
        browser.get(f"{live_server.url}/admin/{path}/")
        wait_for(browser, "#changelist")
        assert not any(r in page_text(browser) for r in ours)
        assert sol_day.contact.first_name not in page_text(browser)
    # Detail URLs typed by hand.
    for path, obj in (
        ("agenda/appointment", sol_day.appointment),
        ("support/case", sol_day.case),
        ("sales/quote", sol_day.quote),
        ("core/contact", sol_day.contact),
    ):
        browser.get(f"{live_server.url}/admin/{path}/{obj.pk}/change/")
        wait_for(browser, "ul.messagelist")
        assert str(obj) not in page_text(browser)
    # The autocomplete, asked directly: their own contact, never the other company's.
    autocomplete = (
        f"{live_server.url}/admin/autocomplete/?app_label=agenda"
        "&model_name=appointment&field_name=contact&term="
    )
    browser.get(autocomplete + luna_day.contact.first_name)
    assert luna_day.contact.first_name in page_text(browser)
    browser.get(autocomplete + sol_day.contact.first_name)
    assert sol_day.contact.first_name not in page_text(browser)
    # The agenda page of the other company, by its id.
    browser.get(f"{live_server.url}/admin/agenda/professional/agenda/?company={sol_day.company.pk}")
    wait_for(browser, "#content-main")
    assert sol_day.professional.display_name not in page_text(browser)
    screenshot(browser, "12-other-company-sees-nothing")
