"""Leads reach sales, and security alerts reach those who can act, in a real browser (headless
Chromium, tests/browser.py) against the live server: a lead from the agent's tool emails the
sales staff, waits on the dashboard with its age and is assigned; a burst of failed
identifications on a gateway credential stands out on the dashboard, is emailed to the
administrators with a link, and the credential is revoked from there after a confirmation.
With GARANTE_REFRESH_DOCS_SCREENSHOTS=1 the screenshots docs/admin.md shows are copied to
docs/images/admin/ (named leads-*)."""

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.core import mail
from django.utils import timezone
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from core.models import Company, GatewayCredential, SecurityEvent
from core.services import gateway_credential_issue
from sales.models import Opportunity
from tests.browser import click_and_load, log_in, page_text, wait_for
from tests.browser import screenshot as browser_screenshot
from tests.factories import ANA_DOCUMENT
from tests.staff.trace_calls import call

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

DOCUMENTED = {
    "leads-01-dashboard-new-leads",
    "leads-02-lead-assigned",
    "leads-03-security-alert",
    "leads-04-security-event",
    "leads-05-revoke-confirmation",
}


def screenshot(driver: webdriver.Chrome, name: str) -> Path:
    return browser_screenshot(driver, name, documented=name in DOCUMENTED)


def link_in(body: str, path_part: str) -> str:
    (url,) = re.findall(rf"https?://\S+{re.escape(path_part)}\S*", body)
    return url


def panel_rows(driver: webdriver.Chrome, key: str) -> list:
    return driver.find_elements(By.CSS_SELECTOR, f"#panel-{key} tbody tr")


def test_a_lead_from_the_agent_reaches_the_sales_staff_and_is_assigned_on_the_dashboard(
    browser, live_server, sol_day, make_staff, sol, settings
):
    settings.GARANTE_PUBLIC_URL = live_server.url
    seller = make_staff("vera.ventas", sol, "supervisor", first_name="Vera", email="vera@sol.es")
    make_staff("recepcion.sol", sol, "agent", email="recepcion@sol.es")  # not sales staff
    # A lead from yesterday afternoon that nobody took: past the pickup time.
    stale = call(
        sol,
        "identify_contact",
        {"document": ANA_DOCUMENT},
        conversation_id="conv-ana-old",
        idempotency_key="k-old-1",
    )
    assert not stale.is_error, stale.body
    call(
        sol,
        "request_sales_contact",
        {"identifier": ANA_DOCUMENT, "topic": "Tinte para el salón"},
        conversation_id="conv-ana-old",
        idempotency_key="k-old-2",
    )
    Opportunity.objects.update(created_at=timezone.now() - timedelta(hours=20))
    mail.outbox.clear()

    # 1. The customer asks the agent for a salesperson: the tool opens a lead.
    call(
        sol,
        "identify_contact",
        {"document": ANA_DOCUMENT},
        conversation_id="conv-ana-lead",
        idempotency_key="k-1",
    )
    result = call(
        sol,
        "request_sales_contact",
        {
            "identifier": ANA_DOCUMENT,
            "topic": "Secadores para tres puestos",
            "notes": "Quiere presupuesto antes del viernes",
        },
        conversation_id="conv-ana-lead",
        idempotency_key="k-2",
    )
    assert not result.is_error, result.body
    lead = Opportunity.objects.get(title="Secadores para tres puestos")

    # 2. The sales staff are emailed once, with a link to the lead; the receptionist is not.
    (email,) = mail.outbox
    assert email.bcc == ["vera@sol.es"]
    assert lead.reference in email.subject
    assert "Quiere presupuesto antes del viernes" in email.body
    url = link_in(email.body, f"/admin/sales/opportunity/{lead.pk}/change/")

    # 3. The dashboard lists the new leads with their age, the one nobody took in time first
    # and highlighted.
    log_in(browser, live_server.url, seller.username)
    rows = panel_rows(browser, "leads")
    assert [row.get_attribute("class") for row in rows] == ["garante-highlight", ""]
    assert "20 horas" in rows[0].text and "nadie aún" in rows[0].text
    assert lead.reference in rows[1].text and "minuto" in rows[1].text
    screenshot(browser, "leads-01-dashboard-new-leads")

    # 4. The email's link opens the lead; the seller assigns it, choosing among sales staff.
    browser.get(url)
    owner = Select(wait_for(browser, "select#id_owner"))
    offered = [option.text for option in owner.options if option.get_attribute("value")]
    assert offered == ["vera.ventas"]
    owner.select_by_visible_text("vera.ventas")
    click_and_load(
        browser,
        browser.find_element(By.CSS_SELECTOR, "input[name=_continue]"),
        "ul.messagelist li.success",
    )
    lead.refresh_from_db()
    assert lead.owner == seller and lead.assigned_at is not None
    assert "Equipo de ventas avisado" in page_text(browser)
    screenshot(browser, "leads-02-lead-assigned")

    # 5. Back on the dashboard the lead shows who has it; only the stale one is highlighted.
    browser.get(f"{live_server.url}/admin/")
    rows = panel_rows(browser, "leads")
    taken = next(row for row in rows if lead.reference in row.text)
    assert "Vera" in taken.text and taken.get_attribute("class") == ""
    assert len(mail.outbox) == 1  # assigning it sent nothing more


def test_a_burst_alert_reaches_the_administrators_and_the_credential_is_revoked_confirmed(
    browser, live_server, sol_day, make_staff, sol, agent, settings
):
    settings.GARANTE_PUBLIC_URL = live_server.url
    boss = make_staff("gerente.sol", sol, "admin", first_name="Inés", email="gerente@sol.es")
    make_staff("super.sol", sol, "supervisor", email="super@sol.es")  # may not revoke
    credential = gateway_credential_issue(company=sol, name="WhatsApp Business")[0]
    Company.objects.filter(pk=sol.pk).update(identify_failures_per_credential=3)
    gateway = Company.objects.get(pk=sol.pk)
    gateway.gateway_credential_id = credential.pk  # as authentication hands it to a call

    # 1. Someone tries phone numbers through the credential: the third failure is a burst.
    for n in range(3):
        call(
            gateway,
            "identify_contact",
            {"phone": f"+3469910000{n}"},
            conversation_id=f"conv-probe-{n}",
            idempotency_key=f"probe-{n}",
        )
    burst = SecurityEvent.objects.get(kind=SecurityEvent.Kind.IDENTIFICATION_BURST)

    # 2. Only the administrator is emailed, with the credential's links.
    (email,) = mail.outbox
    assert email.bcc == ["gerente@sol.es"]
    revoke = link_in(email.body, f"/admin/core/gatewaycredential/{credential.pk}/revoke/")
    assert link_in(email.body, f"/admin/core/gatewaycredential/{credential.pk}/change/")

    # 3. An agent sees the alert at the top of the dashboard, pointing to the event.
    log_in(browser, live_server.url, agent.username)
    alert = wait_for(browser, "#panel-security_alerts.garante-alert")
    assert "WhatsApp Business" in alert.text and "Avise a un administrador" in alert.text
    browser.delete_all_cookies()  # the agent leaves; the administrator sits down

    # 4. The administrator's dashboard: the alert first, the burst highlighted among events.
    log_in(browser, live_server.url, boss.username)
    panels = browser.find_elements(By.CSS_SELECTOR, ".garante-panel")
    assert panels[0].get_attribute("id") == "panel-security_alerts"
    assert "3 en 60 min" in panels[0].text
    recent = panel_rows(browser, "security")
    assert any(
        "ráfaga" in row.text.lower() and row.get_attribute("class") == "garante-highlight"
        for row in recent
    )
    screenshot(browser, "leads-03-security-alert")

    # 5. The event's page reads as labelled fields, with the way to revoke.
    browser.get(f"{live_server.url}/admin/core/securityevent/{burst.pk}/change/")
    details = wait_for(browser, "table.garante-event-details").text
    assert "identificaciones fallidas permitidas" in details and "60 minutos" in details
    assert "{" not in details
    assert "sigue activa" in browser.find_element(By.ID, "burst-credential").text
    screenshot(browser, "leads-04-security-event")

    # 6. The email's link asks first; following it changed nothing.
    browser.get(revoke)
    effect = wait_for(browser, "#revoke-effect").text
    assert "no se puede deshacer" in effect
    assert GatewayCredential.objects.get(pk=credential.pk).revoked_at is None
    screenshot(browser, "leads-05-revoke-confirmation")

    # 7. Confirmed: revoked, and the alert leaves the dashboard.
    click_and_load(
        browser, browser.find_element(By.ID, "confirm-revoke"), "ul.messagelist li.success"
    )
    assert GatewayCredential.objects.get(pk=credential.pk).revoked_at is not None
    assert not browser.find_elements(By.ID, "credential-revoke")
    browser.get(f"{live_server.url}/admin/")
    wait_for(browser, "#panel-appointments")
    assert not browser.find_elements(By.ID, "panel-security_alerts")
