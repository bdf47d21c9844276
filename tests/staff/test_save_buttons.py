"""A change page offers Save only when something on it can be edited
(core.admin.CompanyScopedAdmin.render_change_form); its transition buttons stay."""

import pytest

from tests.admin_pages import change_url, transition_buttons

pytestmark = pytest.mark.django_db


def offers_save(response) -> bool:
    return 'name="_save"' in response.content.decode()


def test_a_booked_appointment_saves_only_its_notes_beside_its_buttons(client, agent, sol_day):
    client.force_login(agent)

    page = client.get(change_url(sol_day.appointment))

    assert page.status_code == 200
    assert offers_save(page)  # the staff notes are the one field edited in place
    form = page.context["adminform"].form
    assert [name for name, field in form.fields.items() if not field.disabled] == ["notes"]
    assert "cancel" in transition_buttons(page)


def test_a_contact_staff_may_edit_offers_save(client, agent, sol_day):
    client.force_login(agent)

    assert offers_save(client.get(change_url(sol_day.contact)))


def test_a_view_only_page_offers_no_save(client, agent, sol_day):
    client.force_login(agent)

    page = client.get(change_url(sol_day.service))

    assert page.status_code == 200
    assert not offers_save(page)
