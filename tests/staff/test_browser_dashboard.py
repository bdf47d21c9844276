"""The landing page's layout in headless Chromium: from 1280 px no word in a panel breaks in
the middle ("10:0 0", "05/12/2 026"), and on a 390 px phone nothing makes the page scroll
sideways. With GARANTE_REFRESH_DOCS_SCREENSHOTS=1 the phone screenshots docs/admin.md shows
are copied to docs/images/admin/."""

import os
import shutil

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from core.roles import staff_membership_set
from tests.browser import DOCS_IMAGES, SCREENSHOTS, log_in, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

# Every word of the panels' cells drawn on more than one line: a run of characters between
# spaces and hyphens ("conv-ana-1f95" may wrap after a hyphen, "10:00" and "Agendada" may not).
BROKEN_WORDS = """
const broken = [];
for (const cell of document.querySelectorAll('.garante-panel td, .garante-panel th')) {
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const match of node.textContent.matchAll(/[^\\s\\-]+/g)) {
      const range = document.createRange();
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
      if (lines.size > 1) broken.push(match[0]);
    }
  }
}
return broken;
"""
WIDTHS = """return [document.documentElement.scrollWidth, window.innerWidth]"""


def menu_screenshot(driver: webdriver.Chrome, name: str) -> None:
    """The landing page's menu alone (a phone's window does not grow to the whole page)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    menu = driver.find_element(By.CSS_SELECTOR, ".garante-apps")
    driver.execute_script("arguments[0].scrollIntoView()", menu)
    path.write_bytes(menu.screenshot_as_png)
    if os.environ.get("GARANTE_REFRESH_DOCS_SCREENSHOTS"):
        (DOCS_IMAGES / "admin").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_IMAGES / "admin" / path.name)


@pytest.fixture
def two_company_admin(make_staff, sol_day, luna_day):
    """An admin of one company and agent of another: the panels carry a company column too,
    the widest the landing page gets."""
    user = make_staff("admin.two", sol_day.company, "admin")
    staff_membership_set(user=user, company=luna_day.company, role="agent")
    return user


@pytest.mark.parametrize("width", [1280, 1440])
def test_no_word_breaks_in_the_middle_on_a_desktop(browser, live_server, two_company_admin, width):
    browser.set_window_size(width, 900)
    log_in(browser, live_server.url, two_company_admin.username)

    assert browser.execute_script("return document.querySelectorAll('.garante-panel td').length")
    assert browser.execute_script(BROKEN_WORDS) == []
    scroll_width, inner_width = browser.execute_script(WIDTHS)
    assert scroll_width <= inner_width


def test_nothing_scrolls_sideways_on_a_phone(
    phone_browser: webdriver.Chrome, live_server, axe, make_staff, two_company_admin, agent, sol_day
):
    """And the phone layout (rows as cards) passes axe, as the desktop one does
    (tests/staff/test_browser_axe.py)."""
    salesperson = make_staff("ventas.sol", sol_day.company, "sales")
    for user, name in (
        (two_company_admin, "roles-admin"),
        (agent, "roles-receptionist"),
        (salesperson, "roles-sales"),
    ):
        phone_browser.delete_all_cookies()
        log_in(phone_browser, live_server.url, user.username)

        scroll_width, inner_width = phone_browser.execute_script(WIDTHS)
        assert inner_width == 390
        assert scroll_width <= inner_width
        assert phone_browser.execute_script(BROKEN_WORDS) == []
        assert axe(phone_browser) == []
        screenshot(phone_browser, f"{name}-landing-phone", documented=name == "roles-receptionist")
        menu_screenshot(phone_browser, f"{name}-menu-phone")
