"""Answering a confirmation page (core.admin.confirmation) in the browser, as staff do: choose
the reason, type the words, press "Yes". Shared by the browser tests that act through one."""

from selenium import webdriver
from selenium.webdriver.common.by import By

from tests.browser import click_and_load, wait_for

CONFIRMATION_PAGE = "body.garante-confirmation"


def answer_confirmation(driver: webdriver.Chrome, reason: str | None, details: str = "") -> None:
    """On an open confirmation page: pick `reason` (None: none, where it is optional), type
    `details`, press its "Yes"; waits for the page that follows (the record or the list, with
    its messages, or this page again with the form's errors)."""
    wait_for(driver, CONFIRMATION_PAGE)
    if reason is not None:
        driver.find_element(By.CSS_SELECTOR, f'input[name="reason"][value="{reason}"]').click()
    boxes = driver.find_elements(By.NAME, "details")  # none where no reason is asked
    if boxes:
        boxes[0].clear()
        if details:
            boxes[0].send_keys(details)
    click_and_load(
        driver,
        driver.find_element(By.CSS_SELECTOR, 'input[name="_confirm"]'),
        "ul.messagelist li, ul.errorlist",
    )
