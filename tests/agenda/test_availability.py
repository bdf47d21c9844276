"""Free slots: working hours, notice, horizon, buffers, time off, busy times and DST days."""

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from agenda.availability.dates import parse_date_bound, search_window
from agenda.availability.local_time import local_instant
from agenda.availability.search import slots_available
from agenda.models import Service
from agenda.services import appointment_book, professional_create, time_off_add
from core.errors import ValidationFailed
from tests.factories import MADRID, MONDAY_8AM, local

pytestmark = pytest.mark.django_db


def starts(slots) -> list[str]:
    return [s.starts_at.astimezone(MADRID).strftime("%H:%M") for s in slots]


def day_slots(company, service, day: datetime, now=MONDAY_8AM, **kwargs):
    return slots_available(
        company=company,
        service=service,
        starts_at=day,
        ends_at=day + timedelta(days=1),
        now=now,
        **kwargs,
    )


def test_it_offers_every_step_inside_the_working_hours(company, service, marta):
    slots = day_slots(company, service, local(2026, 12, 8))

    assert starts(slots)[:8] == [
        "09:00", "09:30", "10:00", "10:30", "11:00", "11:30", "12:00", "12:30",
    ]  # fmt: skip
    assert starts(slots)[8:] == [
        "15:00", "15:30", "16:00", "16:30", "17:00", "17:30", "18:00", "18:30",
    ]  # fmt: skip
    assert all(s.ends_at - s.starts_at == timedelta(minutes=30) for s in slots)


def test_it_offers_nothing_on_a_day_off(company, service, marta):
    assert day_slots(company, service, local(2026, 12, 12)) == []  # a Saturday


def test_a_slot_of_today_before_now_plus_notice_is_not_offered(company, service, marta):
    now = local(2026, 12, 7, 10, 10)  # one hour notice: earliest start 11:10

    slots = day_slots(company, service, local(2026, 12, 7), now=now)

    assert starts(slots)[0] == "11:30"


def test_nothing_beyond_the_horizon_is_offered(company, service, marta, agenda_settings):
    agenda_settings.booking_horizon_days = 2
    agenda_settings.save()

    slots = slots_available(
        company=company,
        service=service,
        starts_at=local(2026, 12, 7),
        ends_at=local(2026, 12, 20),
        now=MONDAY_8AM,
    )

    # Two days from Monday 08:00 is Wednesday 08:00, before Marta opens that day.
    assert slots[-1].label(MADRID) == "2026-12-08 18:30"


def test_a_booked_appointment_and_its_buffer_block_the_slots_they_touch(
    company, service, marta, ana
):
    # 10:00-10:30 plus a 10-minute buffer after: 10:30 would start inside the buffer.
    appointment_book(
        company=company,
        contact=ana,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 8, 10),
        created_via="staff",
        now=MONDAY_8AM,
    )

    slots = starts(day_slots(company, service, local(2026, 12, 8)))

    assert "09:00" in slots
    assert "09:30" not in slots  # its own buffer would run into 10:00
    assert "10:00" not in slots
    assert "10:30" not in slots  # starts inside the 10:30-10:40 buffer
    assert "11:00" in slots


def test_time_off_removes_the_slots_it_covers(company, service, marta):
    time_off_add(
        professional=marta, starts_at=local(2026, 12, 8, 9), ends_at=local(2026, 12, 8, 12)
    )

    assert starts(day_slots(company, service, local(2026, 12, 8)))[:2] == ["12:00", "12:30"]


def test_it_searches_only_the_chosen_professional(company, service, marta):
    luis = professional_create(
        company=company,
        display_name="Luis",
        services=[service],
        weekly_hours=[(1, time(7), time(8))],
    )

    slots = day_slots(company, service, local(2026, 12, 8), professional=luis)

    assert starts(slots) == ["07:00", "07:30"]
    assert {s.professional for s in slots} == {luis}


def test_overlapping_working_hours_do_not_offer_a_slot_twice(company, service):
    professional_create(
        company=company,
        display_name="Luis",
        services=[service],
        weekly_hours=[(1, time(9), time(11)), (1, time(10), time(12))],
    )

    assert starts(day_slots(company, service, local(2026, 12, 8))) == [
        "09:00", "09:30", "10:00", "10:30", "11:00", "11:30",
    ]  # fmt: skip


def test_a_professional_who_does_not_give_the_service_is_not_offered(company, service, marta):
    colour = Service.objects.create(company=company, name="Tinte", duration_minutes=90)

    assert day_slots(company, colour, local(2026, 12, 8)) == []


def test_a_long_service_needs_the_whole_duration_inside_the_hours(company, marta):
    colour = Service.objects.create(company=company, name="Tinte", duration_minutes=90)
    marta.services.add(colour)

    slots = starts(day_slots(company, colour, local(2026, 12, 8)))

    assert slots[:6] == ["09:00", "09:30", "10:00", "10:30", "11:00", "11:30"]
    assert "12:00" not in slots  # would end at 13:30, after the morning closes


# --- DST: Europe/Madrid changes on the last Sunday of March and of October ---------------------


@pytest.fixture
def night_owl(company, service):
    """Works Sundays 00:00-06:00, across the DST change, and Sundays 09:00-10:00."""
    return professional_create(
        company=company,
        display_name="Noé",
        services=[service],
        weekly_hours=[(6, time(0), time(6)), (6, time(9), time(10))],
    )


def test_the_spring_dst_day_has_no_slot_in_the_missing_hour(company, service, night_owl):
    day = local(2026, 3, 29)  # 02:00 CET jumps to 03:00 CEST
    slots = day_slots(company, service, day, now=local(2026, 3, 1), professional=night_owl)

    night = [s for s in slots if s.starts_at.astimezone(MADRID).hour < 9]
    labels = starts(night)
    assert labels == ["00:00", "00:30", "01:00", "01:30", "03:00", "03:30", "04:00", "04:30",
                      "05:00", "05:30"]  # fmt: skip
    # 00:00 CET is 23:00 UTC the day before; 06:00 CEST is 04:00 UTC: five real hours.
    assert night[0].starts_at.astimezone(UTC) == datetime(2026, 3, 28, 23, 0, tzinfo=UTC)
    assert night[-1].ends_at.astimezone(UTC) == datetime(2026, 3, 29, 4, 0, tzinfo=UTC)
    morning = [s.starts_at.astimezone(UTC) for s in slots if s not in night]
    assert morning == [
        datetime(2026, 3, 29, 7, 0, tzinfo=UTC),
        datetime(2026, 3, 29, 7, 30, tzinfo=UTC),
    ]


def test_the_autumn_dst_day_offers_the_repeated_hour_twice_as_distinct_instants(
    company, service, night_owl
):
    day = local(2026, 10, 25)  # 03:00 CEST goes back to 02:00 CET
    slots = day_slots(company, service, day, now=local(2026, 10, 1), professional=night_owl)

    night = [s for s in slots if s.starts_at < datetime(2026, 10, 25, 6, tzinfo=UTC)]
    instants = [s.starts_at for s in night]
    # 00:00 CEST is 22:00 UTC; 06:00 CET is 05:00 UTC: seven real hours, 14 half-hour slots.
    assert len(instants) == 14 == len(set(instants))
    assert instants[0] == datetime(2026, 10, 24, 22, 0, tzinfo=UTC)
    assert night[-1].ends_at == datetime(2026, 10, 25, 5, 0, tzinfo=UTC)
    assert starts(night).count("02:00") == 2
    assert starts(night).count("02:30") == 2
    assert [s.starts_at.astimezone(UTC).hour for s in slots if s not in night] == [8, 8]


@pytest.mark.parametrize(
    ("hours", "expected"),
    [
        ((time(2, 30), time(5)), ["03:00", "03:30", "04:00", "04:30"]),
        ((time(0), time(2, 30)), ["00:00", "00:30", "01:00", "01:30"]),
        ((time(2), time(4)), ["03:00", "03:30"]),
    ],
    ids=["starting in the gap", "ending in the gap", "from the gap's start"],
)
def test_hours_that_start_or_end_in_the_missing_hour_start_or_end_at_the_change(
    company, service, hours, expected
):
    """02:30 does not exist on the spring day: a shift from 02:30 starts when the clock jumps
    to 03:00, and one until 02:30 ends then. Read with the old offset, 02:30 was 03:30: the
    first shift lost its 03:00 slot and the second got one after it had ended."""
    professional = professional_create(
        company=company,
        display_name="Noé",
        services=[service],
        weekly_hours=[(6, *hours)],
    )

    slots = day_slots(
        company, service, local(2026, 3, 29), now=local(2026, 3, 1), professional=professional
    )

    assert starts(slots) == expected
    # The change is 01:00 UTC: 03:00 CEST.
    boundary = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert boundary in {slots[0].starts_at, slots[-1].ends_at}


def test_a_time_in_the_gap_is_the_instant_of_the_change_and_others_are_unchanged():
    gap_day, autumn_day = date(2026, 3, 29), date(2026, 10, 25)
    change = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)

    assert local_instant(gap_day, time(2, 0), MADRID) == change
    assert local_instant(gap_day, time(2, 59, 59), MADRID) == change
    assert local_instant(gap_day, time(3, 0), MADRID) == change
    assert local_instant(gap_day, time(1, 59), MADRID) == datetime(2026, 3, 29, 0, 59, tzinfo=UTC)
    # A repeated time on the autumn day is its first occurrence (CEST, +2).
    assert local_instant(autumn_day, time(2, 30), MADRID) == datetime(
        2026, 10, 25, 0, 30, tzinfo=UTC
    )


def test_a_working_day_after_the_change_keeps_its_local_hours(company, service, marta):
    before = day_slots(company, service, local(2026, 3, 27), now=local(2026, 3, 1))
    after = day_slots(company, service, local(2026, 3, 30), now=local(2026, 3, 1))

    assert starts(before) == starts(after)
    assert before[0].starts_at.astimezone(UTC).hour == 8  # 09:00 CET
    assert after[0].starts_at.astimezone(UTC).hour == 7  # 09:00 CEST


def test_an_appointment_on_the_dst_day_blocks_the_right_instant(company, service, night_owl, ana):
    now = local(2026, 3, 1)
    three_am = local(2026, 3, 29, 3)  # the first instant after the gap: 01:00 UTC
    appointment_book(
        company=company,
        contact=ana,
        service=service,
        professional=night_owl,
        starts_at=three_am,
        created_via="staff",
        now=now,
    )

    labels = starts(day_slots(company, service, local(2026, 3, 29), now=now))

    # Half an hour before 03:00 CEST is 01:30 CET: the gap does not count as time.
    assert "01:00" in labels
    assert "01:30" not in labels  # its buffer would run into 03:00
    assert "03:00" not in labels
    assert "03:30" not in labels  # starts inside the buffer, which ends at 03:40
    assert "04:00" in labels


# --- Loose date inputs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-09", local(2026, 12, 9)),
        ("09/12/2026", local(2026, 12, 9)),
        ("hoy", local(2026, 12, 7)),
        ("Mañana", local(2026, 12, 8)),
        ("tomorrow", local(2026, 12, 8)),
        ("2026-12-09T10:30", local(2026, 12, 9, 10, 30)),
        ("2026-12-09T10:30:00+00:00", local(2026, 12, 9, 11, 30)),
    ],
)
def test_it_reads_loose_dates_in_the_company_timezone(text, expected):
    assert parse_date_bound(text, tz=MADRID, now=MONDAY_8AM) == expected


@pytest.mark.parametrize("text", ["next tuesday", "2026-13-01", "31/02/2026", ""])
def test_it_rejects_dates_it_cannot_read(text):
    with pytest.raises(ValidationFailed) as caught:
        parse_date_bound(text, tz=MADRID, now=MONDAY_8AM)
    assert caught.value.code == "invalid_date"


@pytest.mark.parametrize("text", ["0001-01-01", "01/01/0001", "0001-01-01T00:30:00"])
def test_the_first_day_of_the_calendar_east_of_utc_is_not_understood(text):
    """Its start is an instant before year 1 in UTC, which Python cannot hold."""
    with pytest.raises(ValidationFailed) as caught:
        parse_date_bound(text, tz=ZoneInfo("Asia/Tokyo"), now=MONDAY_8AM)
    assert caught.value.code == "invalid_date"


def test_a_date_as_the_end_includes_that_whole_day(company):
    window = search_window(
        company=company, from_text="2026-12-09", to_text="2026-12-09", now=MONDAY_8AM
    )

    assert (window.start, window.end) == (local(2026, 12, 9), local(2026, 12, 10))
    assert window.narrowed is False


def test_a_search_window_is_at_most_a_month(company):
    window = search_window(
        company=company, from_text="2026-12-09", to_text="2027-06-01", now=MONDAY_8AM
    )

    assert window.end - window.start == timedelta(days=31)
    assert window.narrowed is True


def test_an_end_before_the_start_is_rejected(company):
    with pytest.raises(ValidationFailed) as caught:
        search_window(company=company, from_text="2026-12-09", to_text="2026-12-01", now=MONDAY_8AM)
    assert caught.value.code == "invalid_date_range"


def test_a_month_long_search_across_the_spring_change_ends_at_a_local_midnight(company):
    """Madrid's clocks go forward on 28 March 2027: those 31 days are an hour short of 31 times
    24 hours. Added in absolute time, the cap ended at 01:00 on 5 April, so the answer said
    the search covered a day it had barely looked at."""
    window = search_window(
        company=company, from_text="2027-03-05", to_text="2027-04-30", now=local(2027, 3, 1, 8)
    )

    assert (window.start, window.end) == (local(2027, 3, 5), local(2027, 4, 5))
    assert window.narrowed is True


def test_the_default_two_weeks_across_the_autumn_change_end_at_a_local_midnight(company):
    window = search_window(
        company=company, from_text="2026-10-20", to_text=None, now=local(2026, 10, 19, 8)
    )

    assert (window.start, window.end) == (local(2026, 10, 20), local(2026, 11, 3))
