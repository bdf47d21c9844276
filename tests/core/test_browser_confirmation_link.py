"""A customer's confirmation by link on their phone: headless Chromium at phone width (390px)
against the live server. The company has its customers confirm cancellations and sends links;
the agent's cancel answers confirmation_required, the customer opens the texted link, reads
what the tap confirms (in the words of the message), taps the one button, and the agent's
next call with the same arguments cancels; opened again, the link says it was used. Every
page is checked with axe-core (no serious or critical WCAG A/AA violation)."""

import re
import uuid

import pytest
from django.core.cache import caches
from selenium import webdriver
from selenium.webdriver.common.by import By

from agenda.models import Appointment
from core.models import Company, StepUpPolicy
from tests.browser import page_text, screenshot, wait_for
from tests.factories import ANA_DOCUMENT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]


def shot(driver: webdriver.Chrome, name: str) -> None:
    screenshot(driver, f"links-{name}", documented=True, folder="links")


def agent(mcp, name: str, arguments: dict) -> dict:
    response = mcp.call(name, arguments, key=uuid.uuid4().hex)
    assert response.status_code == 200, response.text
    return response.json()["result"]


def fits_a_phone(driver: webdriver.Chrome) -> bool:
    return driver.execute_script("return document.documentElement.scrollWidth") <= 390


def test_a_customer_taps_the_confirmation_link_and_the_agents_next_call_cancels(
    phone_browser, settings, live_server, mcp, company, ana, marta, frozen_clock, sms_outbox, axe
):
    settings.GARANTE_PUBLIC_URL = live_server.url
    company.verification_form_sms = Company.VerificationForm.LINK
    company.save()
    StepUpPolicy.objects.update_or_create(
        company=company, defaults={"actions": [], "confirm_actions": ["cancel_appointment"]}
    )
    caches["shared"].clear()
    me = {"identifier": ANA_DOCUMENT}
    agent(mcp, "identify_contact", {"document": ANA_DOCUMENT})
    found = agent(
        mcp,
        "find_available_slots",
        {"service": "Corte de pelo", "from": "2026-12-08", "to": "2026-12-08"},
    )
    slot = found["structuredContent"]["items"][0]["slot"]
    booked = agent(mcp, "book_appointment", {**me, "service": "Corte de pelo", "slot": slot})
    reference = booked["structuredContent"]["appointment"]
    cancel = {**me, "appointment": reference}

    asked = agent(mcp, "cancel_appointment", cancel)["structuredContent"]
    assert (asked["code"], asked["sent_as"]) == ("confirmation_required", "link")
    link = re.search(re.escape(live_server.url) + r"/v/\S+", sms_outbox[-1].body).group(0)
    driver = phone_browser

    driver.get(link)
    wait_for(driver, "main h1")
    text = page_text(driver)
    assert "Confirme su operación" in text and "Hola, Ana." in text
    assert f"confirmar que quiere anular su cita {reference}" in text
    assert "García" not in text
    assert len(driver.find_elements(By.TAG_NAME, "button")) == 1
    assert fits_a_phone(driver)
    assert axe(driver) == []
    shot(driver, "30-confirmation")
    # Opening the page did nothing (a link scanner does as much).
    assert Appointment.objects.get(reference=reference).state == "scheduled"

    driver.find_element(By.XPATH, "//button[normalize-space()='Sí, lo confirmo']").click()
    wait_for(driver, ".done")
    assert "Listo, queda confirmado" in page_text(driver)
    assert fits_a_phone(driver)
    assert axe(driver) == []
    shot(driver, "31-confirmed")
    # The tap answered the confirmation; the agent's next call does the cancellation.
    assert Appointment.objects.get(reference=reference).state == "scheduled"
    assert agent(mcp, "verification_status", me)["structuredContent"]["verified"] is False

    done = agent(mcp, "cancel_appointment", cancel)
    assert done["isError"] is False, done
    assert done["structuredContent"]["state"] == "cancelled"

    driver.get(link)
    wait_for(driver, "main h1")
    assert "Este enlace ya se usó" in page_text(driver)
    assert fits_a_phone(driver)
    assert axe(driver) == []
