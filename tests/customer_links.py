"""Helpers shared by the tests of the customers' link pages (agenda's manage links, sales'
quote pages): reading a link out of a message, a page's forms and its visible text."""

import re
from html import unescape

PUBLIC_URL = "https://citas.example.com"


def manage_path(text: str) -> str:
    """The path of the manage-my-booking link in a message's text."""
    match = re.search(re.escape(PUBLIC_URL) + r"(/a/[A-Za-z0-9_-]+)", text)
    assert match, text
    return match.group(1)


def quote_path(text: str) -> str:
    """The path of the quote page's link in a quote email."""
    match = re.search(re.escape(PUBLIC_URL) + r"(/q/[A-Za-z0-9_-]+)", text)
    assert match, text
    return match.group(1)


def form_token(html: str) -> str:
    match = re.search(r'name="form_token" value="([^"]+)"', html)
    assert match, html
    return match.group(1)


def slot_values(html: str) -> list[str]:
    return [unescape(v) for v in re.findall(r'name="slot" value="([^"]+)"', html)]


def visible_text(html: str) -> str:
    """The page's text as read, tags and the style sheet dropped, spaces folded."""
    html = re.sub(r"<style.*?</style>", " ", html, flags=re.S)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())
