"""Exports and calendar feeds in a real browser (headless Chromium, tests/browser.py): a
supervisor downloads the contacts list as Excel from the list's actions and the file opens with
typed cells; issues the company's calendar feed, subscribes to its address, regenerates it
after the confirmation page, and the old address is gone. Screenshots named feeds-* are the
ones docs/admin.md shows."""

import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from icalendar import Calendar
from openpyxl import load_workbook
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.browser import click_and_load, log_in, page_text, screenshot, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]


def downloaded(folder: Path, suffix: str, timeout: float = 30) -> Path:
    """The file the browser finished saving into `folder`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # Chromium writes into a .crdownload file and may leave an empty placeholder under the
        # final name until it renames the finished one over it.
        files = list(folder.iterdir())
        done = [p for p in files if p.suffix == suffix and p.stat().st_size > 0]
        if done and not any(p.suffix == ".crdownload" for p in files):
            return done[0]
        time.sleep(0.2)
    raise AssertionError(f"no {suffix} downloaded into {folder}: {list(folder.iterdir())}")


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=20) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as refusal:
        return refusal.code, refusal.read()


def test_a_supervisor_downloads_the_contacts_as_excel(
    browser, live_server, sol_day, supervisor, tmp_path
):
    browser.execute_cdp_cmd(
        "Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)}
    )
    log_in(browser, live_server.url, supervisor.username)
    browser.get(f"{live_server.url}/admin/core/contact/")
    wait_for(browser, "input.action-select").click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("export_xlsx")
    screenshot(browser, "feeds-01-export-action", documented=True)
    browser.find_element(By.CSS_SELECTOR, "button[name=index]").click()

    workbook = load_workbook(downloaded(tmp_path, ".xlsx"))
    header, row = [[cell.value for cell in r] for r in workbook.worksheets[0].iter_rows()]
    assert header[:2] == ["nombre", "apellidos"]
    assert row[0] == sol_day.contact.first_name


def test_a_supervisor_issues_regenerates_and_subscribes_to_a_calendar_feed(
    browser, live_server, sol_day, supervisor
):
    log_in(browser, live_server.url, supervisor.username)
    browser.get(f"{live_server.url}/admin/agenda/calendarfeed/add/")
    Select(wait_for(browser, "select[name=company]")).select_by_visible_text(sol_day.company.name)
    message = click_and_load(
        browser, browser.find_element(By.NAME, "_continue"), "ul.messagelist li.warning"
    ).text
    screenshot(browser, "feeds-02-calendar-feed-issued", documented=True)
    old_url = next(word for word in message.split() if word.endswith(".ics"))
    assert old_url.startswith(live_server.url + "/calendar/")

    status, body = fetch(old_url)
    assert status == 200
    events = Calendar.from_ical(body).walk("VEVENT")
    assert [str(e["SUMMARY"]) for e in events] == [
        f"Consulta · {sol_day.contact.first_name} ({sol_day.professional.display_name})"
    ]

    browser.find_element(By.LINK_TEXT, "Regenerar dirección").click()
    wait_for(browser, "input[type=submit]")
    assert "deja de funcionar en el acto" in page_text(browser)
    screenshot(browser, "feeds-03-regenerate-confirmation", documented=True)
    assert fetch(old_url)[0] == 200  # the confirmation page changed nothing
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()

    message = wait_for(browser, "ul.messagelist li.warning").text
    new_url = next(word for word in message.split() if word.endswith(".ics"))
    assert new_url != old_url
    assert fetch(new_url)[0] == 200
    status, body = fetch(old_url)
    assert status == 410 and "revocado" in body.decode()
