"""The team's calendar in headless Chromium, driven by the keyboard only: the receptionist
opens it from the menu, books a free cell for an existing customer (three steps) and for a new
one (four), is refused over another appointment with the nearest free slots, moves and cancels
from the grid (the cancellation through its confirmation page), and finds a past appointment
read-only. axe-core finds no serious or critical violation on any of its pages, at desktop or
phone width, and the phone page does not overflow. The screenshots docs/admin.md shows are
refreshed with GARANTE_REFRESH_DOCS_SCREENSHOTS=1.
"""

from datetime import time, timedelta

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from agenda import clock
from agenda.models import Appointment, WorkingHours
from agenda.services import appointment_book, professional_create, time_off_add
from core.models import Contact
from core.services import contact_create
from tests.browser import log_in, page_text, screenshot, wait_for
from tests.staff.confirming import CONFIRMATION_PAGE

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(600)]

CALENDAR = "/admin/agenda/calendar/"


def shot(driver: webdriver.Chrome, name: str) -> None:
    screenshot(driver, name, documented=True, folder="admin")


def enter(driver: webdriver.Chrome, element, css: str):
    """Focus `element` and press Enter, as a keyboard user does, then wait for `css` on the
    page that loads."""
    old_page = driver.find_element(By.TAG_NAME, "html")
    element.send_keys(Keys.ENTER)
    WebDriverWait(driver, 20).until(lambda d: _stale(old_page))
    return wait_for(driver, css)


def _stale(element) -> bool:
    try:
        element.is_enabled()
    except StaleElementReferenceException:
        return True
    return False


def free_cell(driver: webdriver.Chrome, professional_id: int, *, after: str = "") -> object:
    """An offered free cell of the professional, the first at or after the local time `after`."""
    cells = driver.find_elements(
        By.CSS_SELECTOR, f'a.cal-free[data-professional="{professional_id}"]'
    )
    chosen = [c for c in cells if c.get_attribute("data-time") >= after]
    assert chosen, f"no free cell after {after}"
    return chosen[0]


def choose_customer_by_keyboard(driver: webdriver.Chrome, typed: str, shown: str) -> None:
    """The admin's autocomplete (select2), keyboard only: Enter opens it, the name is typed,
    Enter picks the highlighted answer once it is the one wanted."""
    selection = driver.find_element(By.CSS_SELECTOR, "#id_contact + .select2 .select2-selection")
    selection.send_keys(Keys.ENTER)
    search = wait_for(driver, ".select2-container--open .select2-search__field")
    search.send_keys(typed)
    WebDriverWait(driver, 20).until(
        lambda d: (
            shown
            in " ".join(
                o.text
                for o in d.find_elements(By.CSS_SELECTOR, ".select2-results__option--highlighted")
            )
        )
    )
    search.send_keys(Keys.ENTER)
    WebDriverWait(driver, 10).until(
        lambda d: shown in d.find_element(By.CSS_SELECTOR, "#select2-id_contact-container").text
    )


def team_day(day) -> None:
    """A salon's ordinary day: Dra. Ana works 09:00-20:00, and Luis 10:00-19:00 with a
    customer at 16:00 and a training at 17:00 (the company's local time is about noon: staff
    fixtures)."""
    professional = day.professional
    professional.working_hours.all().delete()
    for weekday in range(7):
        WorkingHours.objects.create(
            professional=professional, weekday=weekday, start_time=time(9), end_time=time(20)
        )
    luis = professional_create(
        company=day.company,
        display_name="Luis",
        services=[day.service],
        weekly_hours=[(d, time(10), time(19)) for d in range(7)],
    )
    local_now = clock.now().astimezone(day.company.tz)
    appointment_book(
        company=day.company,
        contact=contact_create(company=day.company, first_name="Bruno", phone="+34600333444"),
        service=day.service,
        professional=luis,
        starts_at=local_now.replace(hour=16, minute=0, second=0, microsecond=0),
        created_via=Appointment.Via.STAFF,
        enforce_customer_rules=False,
        notes="Primera visita",
    )
    time_off_add(
        professional=luis,
        starts_at=local_now.replace(hour=17, minute=0, second=0, microsecond=0),
        ends_at=local_now.replace(hour=18, minute=0, second=0, microsecond=0),
        reason="Formación",
    )


def assert_accessible(driver: webdriver.Chrome, axe) -> None:
    if driver.find_elements(By.ID, "cal-book-form"):
        # The customer box's name is given once select2 has drawn it (calendar_book.js).
        wait_for(driver, ".select2-selection__rendered[aria-label]")
    found = axe(driver)
    assert found == [], found


def test_a_receptionist_books_moves_and_cancels_from_the_calendar_by_keyboard(
    browser, live_server, sol_day, luna_day, agent, axe, monkeypatch
):
    company, professional = sol_day.company, sol_day.professional
    team_day(sol_day)
    log_in(browser, live_server.url, agent.username)

    # The menu entry, by keyboard: the whole team's day, with phone and state on each block.
    entry = browser.find_element(By.CSS_SELECTOR, f'a[href="{CALENDAR}"]')
    assert entry.text.strip() == "Calendario"
    enter(browser, entry, "#cal-grid")
    text = page_text(browser)
    assert sol_day.appointment.reference in text
    assert sol_day.contact.phone in text and "Agendada" in text
    assert luna_day.appointment.reference not in text
    assert luna_day.professional.display_name not in text
    assert_accessible(browser, axe)
    shot(browser, "calendar-day")

    # The grid is in the tab order: from the grid's region, Tab lands on a cell or a block.
    region = browser.find_element(By.CSS_SELECTOR, ".cal-scroll")
    browser.execute_script("arguments[0].focus()", region)
    ActionChains(browser).send_keys(Keys.TAB).perform()
    focused = browser.switch_to.active_element
    assert {"cal-free", "cal-block"} & set(focused.get_attribute("class").split())

    # 1. A free cell two hours after the appointment already there; 2. the customer; 3. Book.
    later = sol_day.appointment.starts_at.astimezone(company.tz) + timedelta(hours=2)
    cell = free_cell(browser, professional.pk, after=f"{later:%H:%M}")
    at = cell.get_attribute("data-time")
    enter(browser, cell, "#cal-book-form")
    assert browser.find_element(By.ID, "id_at").get_attribute("value") == at
    choose_customer_by_keyboard(browser, "Ana", str(sol_day.contact))
    assert_accessible(browser, axe)
    shot(browser, "calendar-book")
    enter(browser, browser.find_element(By.ID, "cal-book-submit"), "ul.messagelist li.success")
    booked = Appointment.objects.exclude(pk=sol_day.appointment.pk).get(contact=sol_day.contact)
    assert f"{booked.starts_at.astimezone(company.tz):%H:%M}" == at
    assert booked.contact == sol_day.contact and booked.created_via == "staff"
    wait_for(browser, f'a.cal-block.booked[data-reference="{booked.reference}"]')

    # Over another appointment: the free quarter before it takes a 30-minute service, so it
    # is refused in the grid, with the nearest free slots, and nobody is created.
    before = booked.starts_at.astimezone(company.tz) - timedelta(minutes=15)
    cell = browser.find_element(
        By.CSS_SELECTOR,
        f'a.cal-free[data-professional="{professional.pk}"][data-time="{before:%H:%M}"]',
    )
    enter(browser, cell, "#cal-book-form")
    browser.find_element(By.ID, "id_first_name").send_keys("Íñigo")
    browser.find_element(By.ID, "id_phone").send_keys("600 555 777")
    enter(browser, browser.find_element(By.ID, "cal-book-submit"), "#cal-book-refused")
    assert "Esa franja ya está ocupada." in page_text(browser)
    assert not Contact.objects.filter(first_name="Íñigo").exists()
    nearest = browser.find_elements(By.CSS_SELECTOR, "#cal-nearest a")
    assert nearest
    assert_accessible(browser, axe)
    shot(browser, "calendar-refused")

    # A new customer in four steps: a nearest slot (what was typed comes along), Book.
    enter(browser, nearest[0], "#cal-book-form")
    assert browser.find_element(By.ID, "id_first_name").get_attribute("value") == "Íñigo"
    enter(browser, browser.find_element(By.ID, "cal-book-submit"), "ul.messagelist li.success")
    newcomer = Appointment.objects.get(contact__first_name="Íñigo")
    assert newcomer.contact.phone == "+34600555777"

    # Move: the block, "Move", a free slot of its service, the move form's button.
    block = browser.find_element(
        By.CSS_SELECTOR, f'a.cal-block[data-reference="{booked.reference}"]'
    )
    enter(browser, block, "#cal-details")
    assert_accessible(browser, axe)
    shot(browser, "calendar-appointment")
    enter(browser, browser.find_element(By.ID, "cal-move"), "#cal-moving")
    assert_accessible(browser, axe)
    shot(browser, "calendar-moving")
    target = browser.find_elements(By.CSS_SELECTOR, "a.cal-free")[-1]
    to = target.get_attribute("data-time")
    enter(browser, target, "#id_at")
    assert browser.find_element(By.ID, "id_at").get_attribute("value") == to
    enter(
        browser,
        browser.find_element(By.CSS_SELECTOR, '#content-main input[type="submit"]'),
        "ul.messagelist li.success",
    )
    booked.refresh_from_db()
    assert f"{booked.starts_at.astimezone(company.tz):%H:%M}" == to
    wait_for(browser, "#cal-grid")

    # Cancel: the block, "Cancel", the confirmation page with its reason, "Yes".
    block = browser.find_element(
        By.CSS_SELECTOR, f'a.cal-block[data-reference="{booked.reference}"]'
    )
    enter(browser, block, "#cal-details")
    enter(browser, browser.find_element(By.ID, "cal-cancel"), CONFIRMATION_PAGE)
    assert_accessible(browser, axe)
    browser.find_element(By.CSS_SELECTOR, 'input[name="reason"][value="customer_asked"]').send_keys(
        Keys.SPACE
    )
    enter(
        browser,
        browser.find_element(By.CSS_SELECTOR, 'input[name="_confirm"]'),
        "ul.messagelist li.success",
    )
    booked.refresh_from_db()
    assert booked.state == Appointment.State.CANCELLED
    assert browser.current_url.startswith(f"{live_server.url}{CALENDAR}")
    assert not browser.find_elements(
        By.CSS_SELECTOR, f'a.cal-block[data-reference="{booked.reference}"]'
    )

    # The week, Monday first, with the same keyboard.
    enter(browser, browser.find_element(By.ID, "cal-week-view"), ".cal-day")
    heads = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".cal-head.cal-day")]
    assert len(heads) == 7 and heads[0].startswith("lunes")
    assert_accessible(browser, axe)
    shot(browser, "calendar-week")

    # Later, the appointment has passed: read-only, neither Move nor Cancel.
    real_now = clock.now
    monkeypatch.setattr(clock, "now", lambda: real_now() + timedelta(days=1))
    browser.get(f"{live_server.url}/admin/agenda/calendar/appointment/{sol_day.appointment.pk}/")
    wait_for(browser, "#cal-read-only")
    assert not browser.find_elements(By.ID, "cal-move")
    assert not browser.find_elements(By.ID, "cal-cancel")


def test_the_calendar_works_at_phone_width(phone_browser, live_server, sol_day, agent, axe):
    log_in(phone_browser, live_server.url, agent.username)
    phone_browser.get(f"{live_server.url}{CALENDAR}")
    wait_for(phone_browser, "#cal-grid")

    width = phone_browser.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]"
    )
    assert width[0] <= width[1], width  # the grid scrolls inside its box, not the page
    assert sol_day.appointment.reference in page_text(phone_browser)
    assert_accessible(phone_browser, axe)
    shot(phone_browser, "calendar-phone")

    cell = phone_browser.find_elements(By.CSS_SELECTOR, "a.cal-free")[-1]
    enter(phone_browser, cell, "#cal-book-form")
    width = phone_browser.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]"
    )
    assert width[0] <= width[1], width
    assert_accessible(phone_browser, axe)
    shot(phone_browser, "calendar-book-phone")


def test_a_teams_week_fits_at_1440_wide_with_the_sidebar_open(
    chromium, live_server, sol_day, agent
):
    """Two professionals' week (14 columns) beside the admin's open sidebar: the last day is
    on screen, the grid never scrolls sideways."""
    from tests.browser import _driver

    team_day(sol_day)
    driver = _driver(chromium, (1440, 900), mobile=False)
    try:
        log_in(driver, live_server.url, agent.username)
        driver.get(f"{live_server.url}{CALENDAR}?view=week")
        wait_for(driver, "#cal-grid")
        sidebar = driver.find_element(By.ID, "nav-sidebar")
        assert sidebar.is_displayed() and sidebar.size["width"] > 0  # the sidebar is open

        sizes = driver.execute_script(
            "const box = document.getElementById('cal-grid').parentElement;"
            "const grid = document.getElementById('cal-grid');"
            "const heads = document.querySelectorAll('.cal-head.cal-day');"
            "const last = heads[heads.length - 1].getBoundingClientRect();"
            "return {grid: grid.scrollWidth, box: box.clientWidth, page: "
            "document.documentElement.scrollWidth, window: window.innerWidth, "
            "days: heads.length, lastRight: last.right};"
        )
        assert sizes["days"] == 7, sizes
        assert sizes["grid"] <= sizes["box"], sizes  # no horizontal overflow of the grid
        assert sizes["page"] <= sizes["window"], sizes
        assert sizes["lastRight"] <= sizes["window"], sizes  # the last day is in view
    finally:
        driver.quit()
