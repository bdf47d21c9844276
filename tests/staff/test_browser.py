"""The admin in a real browser: headless Chromium (Debian's chromium and chromium-driver) driven
by Selenium against pytest-django's live server. Screenshots of the main pages are saved under
artifacts/screenshots/ for people to look at.
"""

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.models import Conversation
from tests.factories import PASSWORD
from tests.staff.test_trace import call

selenium = pytest.importorskip("selenium", reason="selenium is not installed (requirements-dev)")
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--lang=es-ES",
]
PACKAGES = ["chromium", "chromium-driver"]


def _browser_paths() -> tuple[str, str] | None:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    return (chromium, driver) if chromium and driver else None


@pytest.fixture(scope="session")
def chromium() -> tuple[str, str]:
    """Debian's Chromium and ChromeDriver, installed here when missing and we are root."""
    paths = _browser_paths()
    if paths is None and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (
            ["apt-get", "update", "-qq"],
            ["apt-get", "install", "-y", "-qq", *PACKAGES],
        ):
            subprocess.run(command, env=env, capture_output=True, timeout=900, check=False)
        paths = _browser_paths()
    if paths is None:
        pytest.skip(
            "headless Chromium is not available and could not be installed: "
            "run `apt-get install -y chromium chromium-driver` as root"
        )
    return paths


@pytest.fixture
def browser(chromium) -> Iterator[webdriver.Chrome]:
    binary, driver_path = chromium
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument("--window-size=1600,1000")
    # The staff's language: Spanish, as the Accept-Language header a Spanish browser sends.
    options.add_experimental_option("prefs", {"intl.accept_languages": "es-ES,es"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(driver: webdriver.Chrome, name: str) -> Path:
    """The whole page, not just the window: grow the window to the page's height first."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1600, max(800, min(int(height) + 40, 5000)))
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    driver.set_window_size(1600, 1000)
    return path


def wait_for(driver: webdriver.Chrome, css: str):
    return WebDriverWait(driver, 20).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css))
    )


def log_in(driver: webdriver.Chrome, base_url: str, username: str) -> None:
    driver.get(f"{base_url}/admin/login/")
    driver.find_element(By.NAME, "username").send_keys(username)
    driver.find_element(By.NAME, "password").send_keys(PASSWORD)
    driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait_for(driver, "#panel-appointments")


def page_text(driver: webdriver.Chrome) -> str:
    return driver.find_element(By.TAG_NAME, "body").text


def test_a_staff_member_cancels_an_appointment_sees_the_history_and_only_their_company(
    browser, live_server, sol_day, luna_day, agent
):
    appointment = sol_day.appointment
    conversation = Conversation.objects.create(company=sol_day.company, external_id="conv-ana-1")
    call(
        sol_day.company,
        "identify_contact",
        {"document": "12345678Z"},
        conversation_id=conversation.external_id,
        idempotency_key="k-1",
    )
    call(
        sol_day.company,
        "list_my_appointments",
        {"identifier": "12345678Z"},
        conversation_id=conversation.external_id,
    )
    call(
        sol_day.company,
        "cancel_appointment",
        {"identifier": "12345678Z", "appointment": "AP-ZZZZZZ"},
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

    # 2. Open today's appointment from the landing page and press "Cancel".
    browser.find_element(By.LINK_TEXT, appointment.reference).click()
    wait_for(browser, 'button[name="_fsm_transition_to"][value="cancel"]')
    screenshot(browser, "02-appointment-change")
    browser.find_element(
        By.CSS_SELECTOR, 'button[name="_fsm_transition_to"][value="cancel"]'
    ).click()
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
    assert "12345678Z" not in page_text(browser)
    screenshot(browser, "05-conversation-trace")

    # 6. Another company's appointment, even by its address, does not exist for this user.
    browser.get(f"{live_server.url}/admin/agenda/appointment/{luna_day.appointment.pk}/change/")
    wait_for(browser, "ul.messagelist")
    assert luna_day.appointment.reference not in page_text(browser)
    assert luna_day.contact.first_name not in page_text(browser)
    luna_day.appointment.refresh_from_db()
    assert luna_day.appointment.state == "scheduled"
