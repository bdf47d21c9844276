"""The confirmation page in a real browser (headless Chromium, tests/browser.py): a receptionist
opens an appointment, presses Cancelar, reads what will happen ("Ana recibirá un SMS con el
motivo"), gives a reason and confirms; the customer's SMS carries that reason. Then several
appointments at once, from the list; and a salesperson cancelling an order, which reaches the
customer's mailbox with the reason. Screenshots for docs/admin.md are prefixed "confirm-".
"""

from datetime import timedelta

import pytest
from django.core import mail
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from agenda.models import Appointment
from agenda.services import appointment_book
from core.services import contact_create
from sales.models import Quote, QuoteMessage
from sales.services import QuoteItem, quote_accept, quote_create
from tests.browser import log_in, page_text, screenshot, wait_for
from tests.staff.confirming import CONFIRMATION_PAGE, answer_confirmation

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

CANCEL_BUTTON = 'button[name="_fsm_transition_to"][value="cancel"]'


def test_a_receptionist_confirms_a_cancellation_and_the_customer_is_texted_the_reason(
    browser, live_server, sol_day, agent, sms_outbox
):
    appointment = sol_day.appointment
    log_in(browser, live_server.url, agent.username)

    # Open the appointment and press "Cancelar": a page asks first, and nothing is done yet.
    browser.get(f"{live_server.url}/admin/agenda/appointment/{appointment.pk}/change/")
    wait_for(browser, CANCEL_BUTTON).click()
    wait_for(browser, CONFIRMATION_PAGE)
    shown = page_text(browser)
    assert "Ana recibirá un SMS con el motivo." in shown
    assert "La cita se cancela y su hora queda libre." in shown
    assert "«Cancelar» no se puede deshacer." in shown
    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.SCHEDULED
    screenshot(browser, "confirm-01-cancel-page", documented=True)

    # Markup as the reason is refused on the page, which stays open; nothing is done.
    answer_confirmation(browser, "other", "<b>Cerrado</b>")
    assert "Escriba el motivo como texto sin formato" in page_text(browser)
    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.SCHEDULED
    screenshot(browser, "confirm-02-reason-refused", documented=True)

    # A reason from the list, with a few words: cancelled, and the history keeps the reason.
    answer_confirmation(browser, "professional_unavailable", "baja por enfermedad")
    wait_for(browser, "ul.messagelist li.success")
    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.CANCELLED
    history = browser.find_element(By.CSS_SELECTOR, "#content-main .inline-group").text
    assert "El profesional no está disponible: baja por enfermedad" in history
    screenshot(browser, "confirm-03-cancelled-with-reason", documented=True)

    # The customer's SMS says so, with the reason, in the company's language.
    WebDriverWait(browser, 20).until(lambda _d: any("cancelada" in s.body for s in sms_outbox))
    (sms,) = [s for s in sms_outbox if "cancelada" in s.body]
    assert sms.to == sol_day.contact.phone
    assert "Motivo: El profesional no está disponible: baja por enfermedad." in sms.body


def test_a_receptionist_cancels_several_appointments_from_the_list_with_one_reason(
    browser, live_server, sol_day, agent, sms_outbox
):
    later = appointment_book(
        company=sol_day.company,
        contact=sol_day.contact,
        service=sol_day.service,
        professional=sol_day.professional,
        starts_at=sol_day.appointment.starts_at + timedelta(hours=2),
        created_via=Appointment.Via.STAFF,
        enforce_customer_rules=False,
    )
    log_in(browser, live_server.url, agent.username)

    browser.get(f"{live_server.url}/admin/agenda/appointment/")
    wait_for(browser, "#result_list")
    for appointment in (sol_day.appointment, later):
        browser.find_element(
            By.CSS_SELECTOR, f'input[name="_selected_action"][value="{appointment.pk}"]'
        ).click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("confirm_cancel")
    browser.find_element(By.CSS_SELECTOR, 'button[name="index"]').click()

    wait_for(browser, CONFIRMATION_PAGE)
    shown = page_text(browser)
    assert shown.count("Ana recibirá un SMS con el motivo.") == 2
    assert sol_day.appointment.reference in shown and later.reference in shown
    screenshot(browser, "confirm-04-bulk-page", documented=True)
    answer_confirmation(browser, "duplicate")

    wait_for(browser, "ul.messagelist li.success")
    assert "Cancelar: 2 registros hechos." in page_text(browser)
    for appointment in (sol_day.appointment, later):
        appointment.refresh_from_db()
        assert appointment.state == Appointment.State.CANCELLED
    WebDriverWait(browser, 20).until(
        lambda _d: sum("Motivo: Reserva duplicada." in s.body for s in sms_outbox) == 2
    )


def test_a_salesperson_cancels_an_order_and_the_customer_is_emailed_the_reason(
    browser, live_server, sol_day, supervisor
):
    berta = contact_create(company=sol_day.company, first_name="Berta", email="berta@example.com")
    items = [QuoteItem(line.sku, line.quantity) for line in sol_day.quote.lines.all()]
    order = quote_accept(quote=quote_create(company=sol_day.company, contact=berta, items=items))
    mail.outbox.clear()  # the quote's own email
    log_in(browser, live_server.url, supervisor.username)

    browser.get(f"{live_server.url}/admin/sales/quote/{order.pk}/change/")
    wait_for(browser, 'button[name="_fsm_transition_to"][value="cancel"]').click()
    wait_for(browser, CONFIRMATION_PAGE)
    shown = page_text(browser)
    assert "Berta recibirá un correo con el motivo." in shown
    assert "El pedido no se entregará: sus existencias reservadas quedan libres." in shown
    order.refresh_from_db()
    assert order.state == Quote.State.ACCEPTED and mail.outbox == []
    screenshot(browser, "confirm-05-order-cancel-page", documented=True)

    answer_confirmation(browser, "cannot_supply", "sin existencias del proveedor")
    wait_for(browser, "ul.messagelist li.success")
    assert "se está avisando a Berta por correo electrónico, con el motivo" in page_text(browser)
    order.refresh_from_db()
    assert order.state == Quote.State.CANCELLED

    # Berta's mailbox: the cancellation, with the reason, in the company's language.
    WebDriverWait(browser, 20).until(lambda _d: mail.outbox)
    (email,) = mail.outbox
    assert email.to == ["berta@example.com"]
    assert email.subject == f"{sol_day.company.name}: su pedido {order.reference} está cancelado"
    assert "Motivo: No se puede suministrar: sin existencias del proveedor." in email.body
    assert QuoteMessage.objects.get(quote=order).status == QuoteMessage.Status.SENT

    # The order's page logs the message sent.
    browser.refresh()
    wait_for(browser, "#content-main .inline-group")
    log = " ".join(
        group.text
        for group in browser.find_elements(By.CSS_SELECTOR, "#content-main .inline-group")
    )
    assert "Pedido cancelado" in log and "Enviado" in log and "b***@example.com" in log
    screenshot(browser, "confirm-06-order-cancelled-customer-emailed", documented=True)
