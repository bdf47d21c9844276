"""Calendar feeds in the admin: a supervisor issues one and sees its address once; regenerating
and revoking each ask first (a GET changes nothing) and kill the old address; agents and other
companies' staff cannot reach a feed."""

import re

import pytest

from agenda.models import CalendarFeed

pytestmark = pytest.mark.django_db


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def address_in(messages: list[str]) -> str:
    [url] = [
        m for text in messages for m in re.findall(r"http://testserver/calendar/\S+\.ics", text)
    ]
    return url.removeprefix("http://testserver")


@pytest.fixture
def issued(client, supervisor, sol_day):
    """A feed of Sol's professional, issued by its supervisor in the admin: (feed, its path)."""
    client.force_login(supervisor)
    response = client.post(
        "/admin/agenda/calendarfeed/add/",
        {"company": sol_day.company.pk, "professional": sol_day.professional.pk, "name": ""},
        follow=True,
    )
    assert response.status_code == 200
    feed = CalendarFeed.objects.get()
    return feed, address_in(messages_of(response))


def test_a_supervisor_issues_a_feed_and_sees_its_address_once(client, sol_day, issued):
    feed, path = issued

    assert feed.name == sol_day.professional.display_name
    calendar = client.get(path)
    assert calendar.status_code == 200
    assert sol_day.appointment.reference in calendar.content.decode()
    page = client.get(f"/admin/agenda/calendarfeed/{feed.pk}/change/").content.decode()
    assert path not in page  # never shown again: only its hash is stored
    assert "Regenerar dirección" in page and "Revocar dirección" in page


def test_regenerating_asks_first_then_replaces_the_address(client, issued):
    feed, old_path = issued
    url = f"/admin/agenda/calendarfeed/{feed.pk}/regenerate/"

    asked = client.get(url)

    assert "¿Regenerar la dirección de" in asked.content.decode()
    assert client.get(old_path).status_code == 200  # asking changed nothing

    done = client.post(url, follow=True)

    new_path = address_in(messages_of(done))
    assert new_path != old_path
    assert client.get(old_path).status_code == 410
    assert client.get(new_path).status_code == 200


def test_revoking_asks_first_then_the_address_answers_gone(client, issued):
    feed, path = issued
    url = f"/admin/agenda/calendarfeed/{feed.pk}/revoke/"

    assert "¿Revocar la dirección de" in client.get(url).content.decode()
    assert client.get(path).status_code == 200

    done = client.post(url, follow=True)

    assert any("Se revocó" in m for m in messages_of(done))
    gone = client.get(path)
    assert gone.status_code == 410
    assert "revocado" in gone.content.decode()
    again = client.post(url, follow=True)
    assert any("ya está revocada" in m for m in messages_of(again))


def test_an_agent_cannot_see_or_regenerate_feeds(client, issued, agent):
    feed, path = issued
    client.force_login(agent)

    assert client.get("/admin/agenda/calendarfeed/").status_code == 403
    assert client.post(f"/admin/agenda/calendarfeed/{feed.pk}/regenerate/").status_code in (
        403,
        404,
    )
    assert client.get(path).status_code == 200  # still the same address


def test_another_companys_supervisor_cannot_touch_the_feed(
    client, issued, make_staff, luna, luna_day
):
    feed, path = issued
    client.force_login(make_staff("supervisora.luna", luna, "supervisor"))

    for action in ("regenerate", "revoke"):
        response = client.post(f"/admin/agenda/calendarfeed/{feed.pk}/{action}/")
        assert response.status_code == 404
    listed = client.get("/admin/agenda/calendarfeed/").content.decode()
    assert feed.name not in listed
    assert client.get(path).status_code == 200


def test_a_feed_for_another_companys_professional_is_refused(client, supervisor, sol, luna_day):
    client.force_login(supervisor)

    response = client.post(
        "/admin/agenda/calendarfeed/add/",
        {"company": sol.pk, "professional": luna_day.professional.pk, "name": "x"},
    )

    assert response.status_code == 200  # the form again, with its error
    assert not CalendarFeed.objects.exists()
