"""The manage-my-booking link on a customer's phone: headless Chromium at phone width
(tests/browser.py's `phone_browser`) against the live server, following the link of the SMS
as it came, with no JavaScript of ours. Every page is checked with axe-core (WCAG A and AA:
no serious or critical violation). With GARANTE_REFRESH_DOCS_SCREENSHOTS=1 the screenshots
docs/customer-links.md shows are copied to docs/images/links/."""

import pytest
from django.core.cache import caches
from selenium import webdriver
from selenium.webdriver.common.by import By

from agenda.models import Appointment
from agenda.services import appointment_book
from tests.browser import page_text, screenshot, wait_for
from tests.factories import local

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

TUESDAY_10 = local(2026, 12, 8, 10)


def shot(driver: webdriver.Chrome, name: str) -> None:
    screenshot(driver, f"links-{name}", documented=True, folder="links")


def accessible(driver: webdriver.Chrome, axe) -> None:
    found = axe(driver)
    assert found == [], found


@pytest.fixture
def booked(settings, live_server, frozen_clock, company, service, marta, ana, sms_outbox):
    """Ana's appointment on Tuesday at 10:00 and the link of its confirmation's SMS."""
    settings.GARANTE_PUBLIC_URL = live_server.url
    caches["shared"].clear()
    appointment = appointment_book(
        company=company,
        contact=ana,
        service=service,
        professional=marta,
        starts_at=TUESDAY_10,
        created_via=Appointment.Via.GATEWAY,
    )
    (sms,) = sms_outbox
    link = next(word for word in sms.body.split() if word.startswith(f"{live_server.url}/a/"))
    return appointment, link


def choose_slot(driver: webdriver.Chrome, day: str, time: str) -> None:
    """Tap the free slot at `time` under the day headed `day`."""
    heading = next(h for h in driver.find_elements(By.CSS_SELECTOR, "main h2") if h.text == day)
    slots = heading.find_element(By.XPATH, "following-sibling::ul[1]")
    label = next(lab for lab in slots.find_elements(By.TAG_NAME, "label") if time in lab.text)
    label.click()


def test_a_customer_moves_then_cancels_from_the_sms_link(phone_browser, booked, axe, sms_outbox):
    appointment, link = booked
    driver = phone_browser

    # 1. The link opens the appointment, in Spanish, laid out for the phone.
    driver.get(link)
    wait_for(driver, "main h1")
    text = page_text(driver)
    assert "Su cita" in text and "Corte de pelo" in text and "martes 08/12/2026" in text
    assert "10:00" in text and "agendada" in text
    width = driver.execute_script("return document.documentElement.scrollWidth")
    assert width <= 390  # nothing wider than the phone: no sideways scrolling
    accessible(driver, axe)
    shot(driver, "01-appointment")

    # 2. Change the day or time: the free slots of the same service, grouped by day.
    driver.find_element(By.LINK_TEXT, "Cambiar de día u hora").click()
    wait_for(driver, "input[name=slot]")
    assert "Elija la nueva hora" in page_text(driver)
    accessible(driver, axe)
    shot(driver, "02-move")
    choose_slot(driver, "martes 08/12/2026", "11:00")
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(driver, ".done")
    assert "Hecho: su cita es ahora el martes 08/12/2026 a las 11:00." in (page_text(driver))
    accessible(driver, axe)
    shot(driver, "03-moved")
    appointment.refresh_from_db()
    assert appointment.starts_at == local(2026, 12, 8, 11)
    assert "se ha cambiado al martes 08/12/2026 a las 11:00" in sms_outbox[-1].body

    # 3. Cancel, with a reason: a confirmation first.
    driver.find_element(By.LINK_TEXT, "Cancelar la cita").click()
    wait_for(driver, "textarea#reason")
    accessible(driver, axe)
    shot(driver, "04-cancel")
    driver.find_element(By.ID, "reason").send_keys("Me surgió un viaje")
    driver.find_element(By.CSS_SELECTOR, "button.danger").click()
    wait_for(driver, ".done")
    text = page_text(driver)
    assert "Su cita está cancelada." in text and "cancelada" in text
    assert "Cambiar de día u hora" not in text
    accessible(driver, axe)
    shot(driver, "05-cancelled")
    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.CANCELLED
    assert "ha quedado cancelada" in sms_outbox[-1].body

    # 4. The link again, later: the state is shown, and no action is offered any more.
    driver.get(link + "/cancel")
    wait_for(driver, "main h1")
    assert "cancelada" in page_text(driver)
    assert not driver.find_elements(By.CSS_SELECTOR, "button.danger")
    assert Appointment.objects.get(pk=appointment.pk).state == Appointment.State.CANCELLED


def test_a_slot_taken_meanwhile_offers_the_nearest_on_the_phone(
    phone_browser, booked, axe, company, service, marta, bruno
):
    appointment, link = booked
    driver = phone_browser
    driver.get(link + "/move")
    wait_for(driver, "input[name=slot]")
    choose_slot(driver, "martes 08/12/2026", "11:00")
    appointment_book(  # Bruno takes it while Ana looks at the page
        company=company,
        contact=bruno,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 8, 11),
        created_via=Appointment.Via.STAFF,
    )
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_for(driver, ".error")

    text = page_text(driver)
    assert "Esa hora ya no está libre. Estas son las horas libres más cercanas:" in text
    assert "Horas libres más cercanas" in text
    assert "Bruno" not in text
    accessible(driver, axe)
    shot(driver, "06-slot-taken")
    appointment.refresh_from_db()
    assert appointment.starts_at == TUESDAY_10


def test_an_altered_link_shows_a_clear_page(phone_browser, booked, axe, live_server):
    _appointment, link = booked
    phone_browser.get(link[:-4])
    wait_for(phone_browser, "main h1")
    assert "Enlace no válido" in page_text(phone_browser)
    accessible(phone_browser, axe)
    shot(phone_browser, "07-invalid")
