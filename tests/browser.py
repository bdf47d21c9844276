"""Headless Chromium for the browser tests (Debian's chromium and chromium-driver, driven by
Selenium), loaded for every test by tests/conftest.py (`pytest_plugins`).

Fixtures: `chromium` (the binaries, installed when missing and we are root), `browser` (a staff
member's desktop window, in Spanish) and `phone_browser` (a customer's phone, 390x844). Every
screenshot is saved under var/screenshots/; one marked `documented` is also copied into
docs/images/<folder>/ when GARANTE_REFRESH_DOCS_SCREENSHOTS is set. Under GARANTE_REQUIRE_SERVICES
(CI, which installs Chromium itself) a missing browser fails the tests instead of skipping them.
"""

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from tests.factories import PASSWORD

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = ROOT / "var" / "screenshots"
DOCS_IMAGES = ROOT / "docs" / "images"
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
DESKTOP = (1600, 1000)
PHONE = (390, 844)


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
    if paths is None and os.environ.get("GARANTE_REQUIRE_SERVICES"):
        pytest.fail("GARANTE_REQUIRE_SERVICES is set but headless Chromium is not available")
    if paths is None:
        pytest.skip(
            "headless Chromium is not available and could not be installed: "
            "run `apt-get install -y chromium chromium-driver` as root"
        )
    return paths


def _driver(chromium: tuple[str, str], size: tuple[int, int], mobile: bool) -> webdriver.Chrome:
    binary, driver_path = chromium
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--window-size={size[0]},{size[1]}")
    # The reader's language: Spanish, as the Accept-Language header a Spanish browser sends.
    options.add_experimental_option("prefs", {"intl.accept_languages": "es-ES,es"})
    if mobile:
        options.add_experimental_option(
            "mobileEmulation",
            {"deviceMetrics": {"width": size[0], "height": size[1], "pixelRatio": 2}},
        )
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.implicitly_wait(0)
    return driver


@pytest.fixture
def browser(chromium) -> Iterator[webdriver.Chrome]:
    driver = _driver(chromium, DESKTOP, mobile=False)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def phone_browser(chromium) -> Iterator[webdriver.Chrome]:
    driver = _driver(chromium, PHONE, mobile=True)
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(
    driver: webdriver.Chrome, name: str, *, documented: bool = False, folder: str = "admin"
) -> Path:
    """The whole page, not just the window: grow the window to the page's height first (a
    phone-emulating window keeps its width)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    original = driver.get_window_size()
    driver.set_window_size(original["width"], max(800, min(int(height) + 40, 5000)))
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    driver.set_window_size(original["width"], original["height"])
    if documented and os.environ.get("GARANTE_REFRESH_DOCS_SCREENSHOTS"):
        target = DOCS_IMAGES / folder
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target / path.name)
    return path


def wait_for(driver: webdriver.Chrome, css: str):
    return WebDriverWait(driver, 20).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css))
    )


def click_and_load(driver: webdriver.Chrome, element, css: str):
    """Click `element`, which loads another page, and wait for `css` on the new one (the old
    page may show the same selector, say the last save's message)."""
    old_page = driver.find_element(By.TAG_NAME, "html")
    element.click()
    WebDriverWait(driver, 20).until(expected_conditions.staleness_of(old_page))
    return wait_for(driver, css)


def log_in(driver: webdriver.Chrome, base_url: str, username: str) -> None:
    """A staff member logs in to the admin and lands on the dashboard."""
    driver.get(f"{base_url}/admin/login/")
    driver.find_element(By.NAME, "username").send_keys(username)
    driver.find_element(By.NAME, "password").send_keys(PASSWORD)
    driver.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait_for(driver, "#panel-appointments")


def page_text(driver: webdriver.Chrome) -> str:
    return driver.find_element(By.TAG_NAME, "body").text
