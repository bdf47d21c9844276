"""Django's yes/no icons name themselves in the page's language for a screen reader: their
server-side alt text is the Python value ("True"), and core/static/core/admin_names.js names
them with the words templates/admin/base_site.html gives."""

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser import log_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]


def test_the_yes_no_icons_of_a_list_are_named_in_spanish(browser, live_server, sol_day, supervisor):
    log_in(browser, live_server.url, supervisor.username)
    browser.get(f"{live_server.url}/admin/agenda/service/")

    def alts(driver) -> list[str]:
        icons = driver.find_elements(By.CSS_SELECTOR, 'img[src$="/icon-yes.svg"]')
        return [icon.get_attribute("alt") for icon in icons]

    named = WebDriverWait(browser, 20).until(lambda d: alts(d) if "True" not in alts(d) else None)
    assert named and set(named) == {"Sí"}
