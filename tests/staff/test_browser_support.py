"""Support as a conversation with the customer, in a real browser (headless Chromium against
the live server, Celery eager): a support agent's internal note stays in the house, a public
reply reaches the customer's mailbox (or, for a customer with only a phone, the SMS outbox),
resolving the case tells them too, and a customer who cannot be reached keeps the reply while
the agent is warned. Screenshots marked below are the ones docs/admin.md shows
(GARANTE_REFRESH_DOCS_SCREENSHOTS=1 copies them to docs/images/admin/).
"""

from pathlib import Path

import pytest
from django.core import mail
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from core.services import contact_create
from support.models import Case, CaseComment, CaseMessage
from support.services import case_open, case_start
from tests.browser import click_and_load, log_in, page_text, wait_for
from tests.browser import screenshot as browser_screenshot
from tests.staff.confirming import CONFIRMATION_PAGE, answer_confirmation

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

DOCUMENTED = {
    "support-01-public-reply-emailed",
    "support-02-reply-texted",
    "support-03-resolved-customer-told",
    "support-04-customer-unreachable",
    "support-05-resolve-confirmation",
}


def screenshot(driver: webdriver.Chrome, name: str) -> Path:
    return browser_screenshot(driver, name, documented=name in DOCUMENTED)


def open_case(driver: webdriver.Chrome, base_url: str, case: Case) -> None:
    driver.get(f"{base_url}/admin/support/case/{case.pk}/change/")
    wait_for(driver, "#content-main")


def write_comment(driver: webdriver.Chrome, body: str, *, public: bool | None) -> None:
    """Write in the form under the thread; choose public or internal (None: leave the default)
    and save, staying on the page."""
    textarea = driver.find_elements(
        By.CSS_SELECTOR, 'textarea[name^="comments-"]:not([name*="__prefix__"])'
    )[-1]
    textarea.send_keys(body)
    prefix = textarea.get_attribute("name").removesuffix("-body")
    if public is not None:
        driver.find_element(
            By.CSS_SELECTOR, f'input[name="{prefix}-public"][value="{public}"]'
        ).click()
    save = driver.find_element(By.CSS_SELECTOR, 'input[name="_continue"]')
    click_and_load(driver, save, "ul.messagelist li")


def message_log(driver: webdriver.Chrome) -> str:
    """The case page's log of messages to the customer (its inline group)."""
    for group in driver.find_elements(By.CSS_SELECTOR, "#content-main .inline-group"):
        if "mensajes al cliente" in group.text.lower():  # headings may be upper-cased by CSS
            return group.text
    raise AssertionError("the case page has no message log")


def notices(driver: webdriver.Chrome) -> list[str]:
    return [item.text for item in driver.find_elements(By.CSS_SELECTOR, "ul.messagelist li")]


def test_a_public_reply_and_the_resolution_reach_the_customers_mailbox_and_phone(
    browser, live_server, sol_day, agent, sms_outbox
):
    company = sol_day.company
    berta = contact_create(company=company, first_name="Berta", email="berta@example.com")
    emailed = case_start(
        case=case_open(
            company=company,
            contact=berta,
            subject="El pedido llegó incompleto",
            description="Faltan dos frascos de crema.",
        )
    )
    log_in(browser, live_server.url, agent.username)

    # 1. An internal note is the default: it is saved and reaches no one.
    open_case(browser, live_server.url, emailed)
    write_comment(browser, "Comprobar el albarán con almacén.", public=None)
    assert CaseComment.objects.get(case=emailed).public is False
    assert not [m for m in mail.outbox if m.to == ["berta@example.com"]]

    # 2. A public reply: Berta's mailbox receives it with the thread, never the note.
    write_comment(browser, "Le enviamos hoy los dos frascos que faltan.", public=True)
    assert "La respuesta se está enviando a Berta por correo electrónico." in notices(browser)
    WebDriverWait(browser, 20).until(
        lambda _d: [m for m in mail.outbox if m.to == ["berta@example.com"]]
    )
    (email,) = [m for m in mail.outbox if m.to == ["berta@example.com"]]
    assert email.subject == f"{company.name}: respuesta a su caso {emailed.reference}"
    assert "Faltan dos frascos de crema." in email.body
    assert "Le enviamos hoy los dos frascos que faltan." in email.body
    assert "albarán" not in email.body
    browser.refresh()
    wait_for(browser, "#content-main .inline-group")
    thread = page_text(browser)
    assert "Nota interna: solo el personal" in thread and "Pública: la lee el cliente" in thread
    log = message_log(browser)
    assert "Respuesta pública" in log and "Enviado" in log and "b***@example.com" in log
    screenshot(browser, "support-01-public-reply-emailed")

    # 3. Ana has only a phone: the reply reaches her as a short SMS with the reference.
    texted = sol_day.case
    case_start(case=texted)
    open_case(browser, live_server.url, texted)
    write_comment(browser, "Su factura de noviembre ya está emitida.", public=True)
    assert "La respuesta se está enviando a Ana por SMS." in notices(browser)
    WebDriverWait(browser, 20).until(lambda _d: sms_outbox)
    (sms,) = sms_outbox
    assert sms.to == sol_day.contact.phone
    assert texted.reference in sms.body and "factura" not in sms.body
    browser.refresh()
    wait_for(browser, "#content-main .inline-group")
    assert "Enviado" in message_log(browser)
    screenshot(browser, "support-02-reply-texted")

    # 4. Resolving the case tells her too: its button opens a confirmation page first, which
    # says so, and asks for an optional note that goes into her SMS.
    resolve = browser.find_element(
        By.CSS_SELECTOR, 'button[name="_fsm_transition_to"][value="resolve"]'
    )
    click_and_load(browser, resolve, CONFIRMATION_PAGE)
    shown = page_text(browser)
    assert "Ana recibirá un SMS avisando de que el caso está resuelto, con su nota." in shown
    assert "«Resolver» avisa al cliente." in shown
    texted.refresh_from_db()
    assert texted.state == Case.State.IN_PROGRESS and len(sms_outbox) == 1
    screenshot(browser, "support-05-resolve-confirmation")
    answer_confirmation(browser, None, "Factura reenviada a su dirección")
    assert "Se está avisando a Ana por SMS de que el caso está resuelto." in notices(browser), (
        notices(browser)
    )
    WebDriverWait(browser, 20).until(lambda _d: len(sms_outbox) == 2)
    assert f"hemos resuelto su caso {texted.reference}" in sms_outbox[1].body
    assert "Resolución: Factura reenviada a su dirección." in sms_outbox[1].body
    texted.refresh_from_db()
    assert texted.state == Case.State.RESOLVED
    assert "Caso resuelto" in message_log(browser)
    screenshot(browser, "support-03-resolved-customer-told")


def test_a_reply_to_a_customer_without_email_or_phone_is_kept_and_the_agent_is_warned(
    browser, live_server, sol_day, agent, sms_outbox
):
    walk_in = contact_create(company=sol_day.company, first_name="Pedro")
    case = case_open(
        company=sol_day.company,
        contact=walk_in,
        subject="Cita presencial",
        description="Vino a tienda a reclamar.",
    )
    log_in(browser, live_server.url, agent.username)
    open_case(browser, live_server.url, case)

    write_comment(browser, "Le esperamos el lunes en tienda.", public=True)

    warning = browser.find_element(By.CSS_SELECTOR, "ul.messagelist li.warning").text
    assert warning == (
        "La respuesta se ha guardado, pero no se ha podido enviar a Pedro: el cliente no "
        "tiene teléfono ni correo."
    )
    assert CaseComment.objects.filter(case=case, public=True).exists()
    (message,) = CaseMessage.objects.filter(case=case)
    assert message.status == CaseMessage.Status.NOT_SENT
    log = message_log(browser)
    assert "No enviado" in log and "el cliente no tiene teléfono ni correo" in log
    assert not sms_outbox
    screenshot(browser, "support-04-customer-unreachable")
