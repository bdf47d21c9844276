"""The company page: the windows in which the agent's repeated request is answered with what
already exists (core.idempotency.intent) are set there, by the company's staff."""

import pytest

pytestmark = pytest.mark.django_db

WINDOWS = (
    "quote_intent_window_minutes",
    "sales_contact_intent_window_minutes",
    "case_intent_window_minutes",
)


def test_staff_set_the_windows_of_repeated_requests_on_the_company_page(client, staff, company):
    client.force_login(staff)
    page = client.get(f"/admin/core/company/{company.pk}/change/")

    assert page.status_code == 200
    fields = page.context["adminform"].form.fields
    assert all(name in fields and not fields[name].disabled for name in WINDOWS)
    assert "Peticiones repetidas del asistente" in page.content.decode()
