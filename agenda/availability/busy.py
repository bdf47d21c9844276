"""When professionals are busy or working: busy ranges, working intervals, blocked ranges."""

import bisect
from collections import defaultdict
from collections.abc import Iterable
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.db.models import QuerySet

from agenda.availability.local_time import local_instant
from agenda.availability.queries import busy_rows
from agenda.models import END_OF_DAY, MAX_BLOCKED_SPAN, Appointment, Service


def _merge(ranges: Iterable[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    merged: list[tuple[datetime, datetime]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


class BusyTimes:
    """The merged busy ranges of each professional over a window ('[)' semantics)."""

    def __init__(self, ranges: dict[int, list[tuple[datetime, datetime]]]) -> None:
        self._ranges = {pk: _merge(r) for pk, r in ranges.items()}
        self._ends = {pk: [end for _, end in r] for pk, r in self._ranges.items()}

    def overlaps(self, professional_id: int, start: datetime, end: datetime) -> bool:
        ranges = self._ranges.get(professional_id)
        if not ranges:
            return False
        # The first range ending after `start` is the only one that can overlap first.
        i = bisect.bisect_right(self._ends[professional_id], start)
        return i < len(ranges) and ranges[i][0] < end


def scheduled_in_window(
    professional_ids: list[int], start: datetime, end: datetime
) -> QuerySet[Appointment]:
    """Scheduled appointments whose blocked range touches [start, end): a range scan of the
    (professional, blocked_from) index bounded on both sides, so its cost follows the
    appointments in the window, not the table."""
    return Appointment.objects.filter(
        professional_id__in=professional_ids,
        state=Appointment.State.SCHEDULED,
        blocked_from__gte=start - MAX_BLOCKED_SPAN,
        blocked_from__lt=end,
        blocked_until__gt=start,
    ).order_by()  # callers merge the ranges themselves; no need to sort in the database


def busy_times(
    professional_ids: list[int],
    start: datetime,
    end: datetime,
    *,
    exclude_appointment_id: int | None = None,
) -> BusyTimes:
    """Scheduled appointments and time off of these professionals that touch [start, end),
    read in one statement (UNION ALL of the two bounded index scans: `scheduled_in_window`'s
    and the time off's), written once from the models' metadata instead of compiled by the ORM
    on every search."""
    if not professional_ids:
        return BusyTimes({})
    ranges: dict[int, list[tuple[datetime, datetime]]] = defaultdict(list)
    for pk, busy_from, busy_until in busy_rows(
        professional_ids, start, end, exclude_appointment_id=exclude_appointment_id
    ):
        ranges[pk].append((busy_from, busy_until))
    return BusyTimes(ranges)


def working_intervals(
    weekly: dict[int, list[tuple[time, time]]], day: date, tz: ZoneInfo
) -> list[tuple[datetime, datetime]]:
    """The professional's working intervals on one local day, as UTC instants; overlapping
    or touching intervals (09-13 and 12-14) merge, so no slot is offered twice. An end at
    00:00 is the end of the day (`END_OF_DAY`): the next day's local midnight, however long
    the day is."""
    next_day = day + timedelta(days=1)
    intervals = [
        (
            local_instant(day, start, tz),
            local_instant(next_day, end, tz) if end == END_OF_DAY else local_instant(day, end, tz),
        )
        for start, end in weekly.get(day.weekday(), [])
    ]
    return _merge((start, end) for start, end in intervals if end > start)


def blocked_range(service: Service, starts_at: datetime) -> tuple[datetime, datetime]:
    """The professional's time a booking takes: the service plus its buffers."""
    return (
        starts_at - timedelta(minutes=service.buffer_before_minutes),
        starts_at + timedelta(minutes=service.duration_minutes + service.buffer_after_minutes),
    )
