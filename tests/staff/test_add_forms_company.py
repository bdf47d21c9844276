"""Every add form with a company to choose comes with it chosen for staff of one company
(core.admin.CompanyScopedAdmin.get_changeform_initial_data), and leaves the choice to staff
of several."""

import pytest
from django.contrib import admin
from django.urls import NoReverseMatch, reverse

from core.roles import staff_membership_set

pytestmark = pytest.mark.django_db


def add_pages_with_a_company(client) -> dict[str, object]:
    """Each add page the logged-in staff member may open whose form asks for a company: the
    company it shows chosen (None: none)."""
    found = {}
    for model in admin.site._registry:
        opts = model._meta
        try:
            url = reverse(f"admin:{opts.app_label}_{opts.model_name}_add")
        except NoReverseMatch:  # a page of its own with no add form (the team's calendar)
            continue
        response = client.get(url)
        if response.status_code != 200 or "adminform" not in (response.context or {}):
            continue
        form = response.context["adminform"].form
        if "company" in form.fields:
            found[url] = form["company"].value()
    return found


@pytest.mark.parametrize("role", ["agent", "sales", "supervisor", "admin"])
def test_staff_of_one_company_find_it_chosen_on_every_add_form(client, make_staff, sol, role):
    client.force_login(make_staff(f"{role}.one", sol, role))

    pages = add_pages_with_a_company(client)

    assert pages, "no add form with a company for this role"
    assert {url: value for url, value in pages.items() if str(value) != str(sol.pk)} == {}


def test_staff_of_two_companies_choose_it(client, make_staff, sol, luna):
    user = make_staff("admin.two", sol, "admin")
    staff_membership_set(user=user, company=luna, role="admin")
    client.force_login(user)

    pages = add_pages_with_a_company(client)

    assert pages
    assert all(value in (None, "") for value in pages.values())
