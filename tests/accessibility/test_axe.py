"""The accessibility check itself: axe-core, injected by tests/accessibility/axe.py, finds the
violations a page has, so that an empty list on the customer pages means something."""

import pytest

pytestmark = pytest.mark.timeout(300)

BROKEN = (
    "data:text/html;charset=utf-8,"
    "<!doctype html><html><head><title>x</title></head><body>"
    "<img src='x.png'><form><input type='text' name='code'></form>"
    "<p style='color:%23bbb;background:%23fff'>Texto con poco contraste</p></body></html>"
)


def test_axe_reports_the_serious_and_critical_violations_of_a_broken_page(phone_browser, axe):
    phone_browser.get(BROKEN)

    found = {v["id"]: v["impact"] for v in axe(phone_browser)}

    assert found["image-alt"] == "critical"  # an image without a text alternative
    assert found["label"] == "critical"  # a field without a label
    assert found["html-has-lang"] == "serious"  # no language for screen readers
    assert found["color-contrast"] == "serious"  # grey on white
