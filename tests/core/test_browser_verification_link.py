"""Verification by link on a customer's phone: headless Chromium at phone width against the live
server. The agent asks for a verification, the customer opens the texted link, sees one button
and their first name, taps it, and the agent's next call goes through; opened again, the link
says it was used. Every page is checked with axe-core (no serious or critical WCAG A/AA
violation); the screenshots docs/customer-links.md shows go to docs/images/links/ with
GARANTE_REFRESH_DOCS_SCREENSHOTS=1."""

import re
import uuid

import pytest
from django.core.cache import caches
from selenium import webdriver
from selenium.webdriver.common.by import By

from core.models import Company, VerificationChallenge
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


def test_a_customer_taps_the_link_and_the_agents_next_call_goes_through(
    phone_browser, settings, live_server, mcp, company, ana, sms_outbox, axe
):
    settings.GARANTE_PUBLIC_URL = live_server.url
    company.verification_form_sms = Company.VerificationForm.LINK
    company.save()
    caches["shared"].clear()
    me = {"identifier": ANA_DOCUMENT}
    change = {**me, "email": "ana.nueva@example.org"}
    agent(mcp, "identify_contact", {"document": ANA_DOCUMENT})
    refused = agent(mcp, "update_contact_details", change)
    assert refused["structuredContent"]["code"] == "verification_required"
    sent = agent(mcp, "request_verification_code", {**me, "channel": "sms"})
    assert sent["structuredContent"]["sent_as"] == "link"
    link = re.search(re.escape(live_server.url) + r"/v/\S+", sms_outbox[-1].body).group(0)
    driver = phone_browser

    driver.get(link)
    wait_for(driver, "main h1")
    text = page_text(driver)
    assert "Confirme que es usted" in text and "Hola, Ana." in text
    assert "García" not in text
    assert len(driver.find_elements(By.TAG_NAME, "button")) == 1
    assert fits_a_phone(driver)
    assert axe(driver) == []
    shot(driver, "20-verification")
    # Opening the page verified nothing (a link scanner does as much).
    assert agent(mcp, "verification_status", me)["structuredContent"]["verified"] is False

    driver.find_element(By.XPATH, "//button[normalize-space()='Sí, soy yo']").click()
    wait_for(driver, ".done")
    assert "Listo, ya está confirmado" in page_text(driver)
    assert fits_a_phone(driver)
    assert axe(driver) == []
    shot(driver, "21-verified")

    status = agent(mcp, "verification_status", me)["structuredContent"]
    assert status["verified"] is True
    done = agent(mcp, "update_contact_details", change)
    assert done["isError"] is False, done
    assert VerificationChallenge.objects.get(purpose="step_up").status == "verified"

    driver.get(link)
    wait_for(driver, "main h1")
    assert "Este enlace ya se usó" in page_text(driver)
    assert fits_a_phone(driver)
    assert axe(driver) == []
    shot(driver, "22-verification-used")
