"""Calendar feeds (agenda.feeds): each feed parses with icalendar, carries RFC 5545's required
properties, holds its professional's (or company's) appointments of its window and nobody
else's, shows cancellations and moves, names customers by first name only unless the company
says otherwise, and refuses revoked, regenerated and forged addresses."""

from datetime import timedelta

import pytest
from icalendar import Calendar

from agenda.feeds import (
    PRODID,
    calendar_feed_issue,
    calendar_feed_regenerate,
    calendar_feed_revoke,
)
from agenda.models import Appointment
from agenda.selectors import agenda_settings_for
from agenda.services import appointment_book, appointment_cancel, appointment_reschedule
from core.errors import NotInCompany
from tests import factories
from tests.factories import ANA_EMAIL, ANA_PHONE, local

pytestmark = pytest.mark.django_db


def book(company, contact, service, professional, starts_at) -> Appointment:
    return appointment_book(
        company=company,
        contact=contact,
        service=service,
        professional=professional,
        starts_at=starts_at,
        created_via=Appointment.Via.STAFF,
        enforce_customer_rules=False,
    )


def fetch(client, token: str):
    return client.get(f"/calendar/{token}.ics")


def parsed(response) -> Calendar:
    """The feed as a calendar client reads it, checked against RFC 5545's required
    properties: VERSION and PRODID once in the calendar; UID, DTSTAMP and DTSTART once in each
    event (3.6.1), DTEND after DTSTART; DTSTART and DTEND in the company's zone by a TZID that
    a VTIMEZONE of the calendar defines (3.2.19, 3.6.5), DTSTAMP in UTC (3.8.7.2)."""
    assert response.status_code == 200
    assert response["Content-Type"] == "text/calendar; charset=utf-8"
    calendar = Calendar.from_ical(response.content)
    assert calendar.name == "VCALENDAR"
    assert str(calendar["VERSION"]) == "2.0"
    assert str(calendar["PRODID"]) == PRODID
    zones = {str(zone["TZID"]): zone for zone in calendar.walk("VTIMEZONE")}
    for zone in zones.values():
        assert zone.walk("STANDARD") or zone.walk("DAYLIGHT")  # one rule at least
    for event in calendar.walk("VEVENT"):
        for required in ("UID", "DTSTAMP", "DTSTART"):
            assert required in event, required
            assert not isinstance(event[required], list), f"{required} appears twice"
        start, end = event.decoded("DTSTART"), event.decoded("DTEND")
        assert end > start
        for name in ("DTSTART", "DTEND"):
            assert event[name].params["TZID"] == str(calendar["X-WR-TIMEZONE"])
            assert event[name].params["TZID"] in zones
        assert event.decoded("DTSTAMP").utcoffset() == timedelta(0)
    return calendar


def events_by_uid(calendar: Calendar) -> dict[str, object]:
    return {str(event["UID"]): event for event in calendar.walk("VEVENT")}


def uid(appointment: Appointment) -> str:
    return f"{appointment.reference}.{appointment.company.slug}@garante"


@pytest.fixture
def luis(company, service):
    from agenda.services import professional_create

    return professional_create(
        company=company,
        display_name="Luis",
        services=[service],
        weekly_hours=factories.split_shift(factories.WEEKDAYS),
    )


@pytest.fixture
def monday(frozen_clock, company, service, marta, luis, ana, bruno):
    """Ana with Marta at 10:00 and Bruno with Luis at 11:00, Monday 7 December."""
    return {
        "ana": book(company, ana, service, marta, local(2026, 12, 7, 10)),
        "bruno": book(company, bruno, service, luis, local(2026, 12, 7, 11)),
    }


def test_a_professionals_feed_holds_their_appointments_with_first_names_only(
    client, company, marta, monday
):
    _feed, token = calendar_feed_issue(company=company, professional=marta)

    response = fetch(client, token)

    calendar = parsed(response)
    events = events_by_uid(calendar)
    assert list(events) == [uid(monday["ana"])]
    event = events[uid(monday["ana"])]
    assert event.decoded("DTSTART") == monday["ana"].starts_at
    assert event.decoded("DTEND") == monday["ana"].ends_at
    # The company's wall clock, with its zone: 10:00 in Madrid, wherever it is read.
    assert "DTSTART;TZID=Europe/Madrid:20261207T100000" in response.content.decode()
    assert str(event["SUMMARY"]) == "Corte de pelo · Ana"
    assert str(event["STATUS"]) == "CONFIRMED"
    assert event.decoded("SEQUENCE") == 0
    description = str(event["DESCRIPTION"])
    assert "Estado: agendada" in description  # the company's language
    for private in ("García", ANA_PHONE, ANA_EMAIL):
        assert private not in response.content.decode()
    assert "Marta" in str(calendar["X-WR-CALNAME"])


def test_the_company_feed_holds_every_professional_and_no_other_company(
    client, company, other_company, monday
):
    other_service = factories.service(other_company, name="Consulta")
    other_pro = factories.marta(other_company, other_service)
    other_customer = factories.contact(other_company, first_name="Zoe", last_name="Ruiz")
    theirs = book(other_company, other_customer, other_service, other_pro, local(2026, 12, 7, 10))
    _feed, token = calendar_feed_issue(company=company)
    _other_feed, other_token = calendar_feed_issue(company=other_company)

    ours = events_by_uid(parsed(fetch(client, token)))
    their_feed = events_by_uid(parsed(fetch(client, other_token)))

    assert set(ours) == {uid(monday["ana"]), uid(monday["bruno"])}
    assert str(ours[uid(monday["bruno"])]["SUMMARY"]) == "Corte de pelo · Bruno (Luis)"
    assert set(their_feed) == {uid(theirs)}
    assert "Ana" not in fetch(client, other_token).content.decode()


def test_a_feed_is_never_issued_for_another_companys_professional(company, other_company):
    other_service = factories.service(other_company)
    stranger = factories.marta(other_company, other_service)

    with pytest.raises(NotInCompany):
        calendar_feed_issue(company=company, professional=stranger)


def test_a_cancelled_appointment_stays_as_cancelled_and_a_move_raises_its_sequence(
    client, company, marta, monday
):
    _feed, token = calendar_feed_issue(company=company, professional=marta)
    moved = appointment_reschedule(
        company=company,
        reference=monday["ana"].reference,
        starts_at=local(2026, 12, 8, 12),
        enforce_customer_rules=False,
    )
    before = events_by_uid(parsed(fetch(client, token)))[uid(moved)]
    appointment_cancel(company=company, reference=moved.reference, enforce_cutoff=False)

    after = events_by_uid(parsed(fetch(client, token)))[uid(moved)]

    assert before.decoded("SEQUENCE") == 1
    assert before.decoded("DTSTART") == local(2026, 12, 8, 12)
    assert str(before["STATUS"]) == "CONFIRMED"
    assert after.decoded("SEQUENCE") == 2
    assert str(after["STATUS"]) == "CANCELLED"
    assert str(after["TRANSP"]) == "TRANSPARENT"
    assert "[cancelada]" in str(after["SUMMARY"])


def test_the_company_may_turn_on_the_customers_phone_and_email(client, company, marta, monday):
    settings = agenda_settings_for(company=company)
    settings.feed_shows_contact_details = True
    settings.save()
    _feed, token = calendar_feed_issue(company=company, professional=marta)

    [event] = parsed(fetch(client, token)).walk("VEVENT")

    description = str(event["DESCRIPTION"])
    assert ANA_PHONE in description and ANA_EMAIL in description


def test_the_feed_covers_a_month_back_and_a_year_ahead(
    client, frozen_clock, company, service, marta, ana
):
    now = frozen_clock["now"]

    def stored(offset: timedelta) -> Appointment:
        # Written directly: past and far-future times are refused by booking, rightly.
        starts = now + offset
        return Appointment.objects.create(
            company=company,
            reference=f"AP-W{abs(offset.days):05d}{'P' if offset < timedelta(0) else 'F'}",
            contact=ana,
            service=service,
            professional=marta,
            starts_at=starts,
            ends_at=starts + timedelta(minutes=30),
            blocked_from=starts,
            blocked_until=starts + timedelta(minutes=40),
            created_via="staff",
        )

    inside = [stored(timedelta(days=-29)), stored(timedelta(days=300))]
    outside = [stored(timedelta(days=-31)), stored(timedelta(days=400))]
    _feed, token = calendar_feed_issue(company=company, professional=marta)

    uids = set(events_by_uid(parsed(fetch(client, token))))

    assert uids == {uid(a) for a in inside}
    assert not uids & {uid(a) for a in outside}


@pytest.mark.parametrize("whole_company", [False, True])
def test_a_feed_costs_a_bounded_number_of_queries_however_many_events(
    client,
    django_assert_max_num_queries,
    frozen_clock,
    company,
    service,
    marta,
    ana,
    bruno,
    whole_company,
):
    for day in range(7, 12):
        for hour in (9, 10, 11, 12, 15, 16):
            contact = ana if hour % 2 else bruno
            book(company, contact, service, marta, local(2026, 12, day, hour))
    _feed, token = calendar_feed_issue(
        company=company, professional=None if whole_company else marta
    )

    # The feed with its company and professional, the agenda settings, the appointments;
    # the last-used stamp at most once a minute.
    with django_assert_max_num_queries(4):
        response = fetch(client, token)

    assert len(parsed(response).walk("VEVENT")) == 30


def test_a_revoked_feed_answers_410_and_says_so(client, company, marta, monday):
    feed, token = calendar_feed_issue(company=company, professional=marta)
    calendar_feed_revoke(feed=feed)

    response = fetch(client, token)

    assert response.status_code == 410
    body = response.content.decode()
    assert "revocado" in body and company.name in body
    assert "Ana" not in body


def test_a_regenerated_feed_has_a_new_address_and_the_old_one_is_dead(
    client, company, marta, monday
):
    feed, old_token = calendar_feed_issue(company=company, professional=marta)

    replacement, new_token = calendar_feed_regenerate(feed=feed)

    assert new_token != old_token
    assert replacement.professional == marta
    assert fetch(client, old_token).status_code == 410
    assert list(events_by_uid(parsed(fetch(client, new_token)))) == [uid(monday["ana"])]


@pytest.mark.parametrize(
    "forged",
    ["cal_" + "A" * 43, "nothing", "cal_", "%00"],
)
def test_a_forged_or_altered_address_is_not_found(client, company, marta, monday, forged):
    _feed, token = calendar_feed_issue(company=company, professional=marta)

    assert fetch(client, forged).status_code == 404
    assert fetch(client, token[:-1] + ("A" if token[-1] != "A" else "B")).status_code == 404


def test_a_feed_answers_only_reads(client, company, marta):
    _feed, token = calendar_feed_issue(company=company, professional=marta)

    assert client.post(f"/calendar/{token}.ics").status_code == 405
    assert client.head(f"/calendar/{token}.ics").status_code == 200


def test_an_unchanged_feed_answers_304_to_its_etag_and_a_changed_one_the_new_calendar(
    client, company, marta, monday
):
    """Calendar apps poll every few minutes: what they hold is not sent again."""
    _feed, token = calendar_feed_issue(company=company, professional=marta)
    first = fetch(client, token)
    etag = first["ETag"]

    unchanged = client.get(f"/calendar/{token}.ics", headers={"if-none-match": etag})
    appointment_reschedule(
        company=company,
        reference=monday["ana"].reference,
        starts_at=local(2026, 12, 7, 12),
        enforce_customer_rules=False,
    )
    changed = client.get(f"/calendar/{token}.ics", headers={"if-none-match": etag})

    assert etag.startswith('"') and "Last-Modified" not in first
    assert unchanged.status_code == 304 and unchanged.content == b""
    assert unchanged["ETag"] == etag
    assert changed["ETag"] != etag
    (event,) = events_by_uid(parsed(changed)).values()
    assert event.decoded("DTSTART") == local(2026, 12, 7, 12)


def test_if_modified_since_alone_gets_the_whole_calendar_and_dead_feeds_ignore_etags(
    client, company, marta, monday
):
    """No timestamp records a renamed customer or service, so the feed claims no
    Last-Modified: a client that asks by date alone always gets the current calendar."""
    feed, token = calendar_feed_issue(company=company, professional=marta)
    etag = fetch(client, token)["ETag"]

    by_date = client.get(
        f"/calendar/{token}.ics", headers={"if-modified-since": "Tue, 01 Jan 2030 00:00:00 GMT"}
    )
    calendar_feed_revoke(feed=feed)
    revoked = client.get(f"/calendar/{token}.ics", headers={"if-none-match": etag})

    assert by_date.status_code == 200 and uid(monday["ana"]) in by_date.content.decode()
    assert revoked.status_code == 410
