"""Every staff page, checked with axe-core in headless Chromium (WCAG A and AA: no serious or
critical violation), as each role meets it: the landing page, every section and list of the
role's menu, the add form of each, the change form of a seeded record of each, and the pages
those link to (the agenda, moving an appointment). On the way, a change page offers Save only
when something on it can be edited."""

from urllib.parse import urlsplit

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from core.roles import staff_membership_set
from tests.browser import log_in, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

ROLES = ["agent", "sales", "supervisor", "admin"]

# What a page may offer staff to fill in or choose: a Save button needs one of these.
EDITABLE = """
const form = document.querySelector('#content-main form');
if (!form) return 0;
return [...form.querySelectorAll('input, select, textarea')].filter(e =>
  !['hidden', 'submit', 'button'].includes(e.type) && !e.disabled
  && !e.closest('.empty-form') && e.offsetParent !== null).length;
"""


def links(driver: webdriver.Chrome, css: str) -> list[str]:
    return [a.get_attribute("href") for a in driver.find_elements(By.CSS_SELECTOR, css)]


def path_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


def summary(problems: dict[str, list]) -> str:
    """Each rule broken, with the elements and one page where it was found."""
    rules: dict[tuple[str, str], tuple[set[str], str]] = {}
    for page, found in problems.items():
        for violation in found:
            nodes, _first = rules.setdefault((violation["id"], violation["help"]), (set(), page))
            nodes.update(violation["nodes"])
    return "\n".join(
        f"{rule} ({help_}): {sorted(nodes)[:8]} on {page} and others"
        for (rule, help_), (nodes, page) in rules.items()
    )


def first_change_link(driver: webdriver.Chrome) -> str | None:
    found = links(driver, "#result_list tbody tr a[href*='/change/']")
    return found[0] if found else None


def test_every_staff_page_of_each_role_passes_axe_and_offers_save_only_to_edit(
    browser, live_server, axe, make_staff, sol_day, luna_day
):
    users = {role: make_staff(f"{role}.axe", sol_day.company, role) for role in ROLES}
    # Someone in two companies sees the company column on the landing page.
    staff_membership_set(user=users["admin"], company=luna_day.company, role="agent")

    problems: dict[str, list] = {}
    save_without_fields: list[str] = []
    visited: set[tuple[str, str]] = set()
    # A page two roles see alike is checked once: its address, and what it lets them edit.
    checked: set[tuple[str, bool, int]] = set()

    def check(role: str, url: str) -> None:
        if (role, path_of(url)) in visited:
            return
        visited.add((role, path_of(url)))
        browser.get(url)
        wait_for(browser, "#content")
        saves, editable = (
            bool(browser.find_elements(By.NAME, "_save")),
            browser.execute_script(EDITABLE),
        )
        if saves and not editable:
            save_without_fields.append(f"{role} {path_of(url)}")
        if (path_of(url), saves, editable) in checked:
            return
        checked.add((path_of(url), saves, editable))
        found = axe(browser)
        if found:
            problems[f"{role} {path_of(url)}"] = found

    for role, user in users.items():
        browser.delete_all_cookies()
        log_in(browser, live_server.url, user.username)
        check(role, f"{live_server.url}/admin/")
        menu = links(browser, ".garante-apps a")
        more = links(browser, ".garante-more a")
        for url in dict.fromkeys([*menu, *more]):
            check(role, url)
            if "/add/" in url or not url.rstrip("/").count("/") >= 5:
                continue
            record = first_change_link(browser)
            if record:
                check(role, record)
        # The pages of their own, off the menu: the agenda and moving an appointment.
        for page in (
            "/admin/agenda/professional/agenda/",
            "/admin/agenda/professional/agenda/?view=week",
            f"/admin/agenda/professional/{sol_day.professional.pk}/day/",
            f"/admin/agenda/appointment/{sol_day.appointment.pk}/move/",
        ):
            check(role, f"{live_server.url}{page}")

    assert len(checked) > 40, checked
    assert save_without_fields == []
    assert problems == {}, summary(problems)
