"""The slot search: free slots per local day in the company's timezone, and the nearest ones.

Slots are generated per *local* day from the weekly working hours, turned into UTC instants,
and stepped in absolute time, so a day with 23 or 25 hours (DST) neither loses nor duplicates
an hour. A slot is free when its blocked range (the service plus its buffers) overlaps no
scheduled appointment's blocked range and no time off. Reads are bounded to the searched window.
"""

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.utils.translation import ngettext

from agenda.availability.busy import busy_times, working_intervals
from agenda.availability.local_time import describe_instant, in_words
from agenda.availability.queries import SETTINGS_FIELDS, loaded, roster_rows
from agenda.availability.slots import Move, Slot
from agenda.models import AgendaSettings, Professional, Service
from agenda.selectors import agenda_settings_for, professional_pick
from core.errors import ValidationFailed
from core.models import Company

NEAREST_COUNT = 3
NEAREST_SEARCH_DAYS = 7


@dataclass(frozen=True)
class Bookable:
    """A professional who gives the searched service, with their weekly working hours."""

    professional: Professional
    weekly: dict[int, list[tuple[time, time]]]


@dataclass(frozen=True)
class Roster:
    """What a slot search reads before the busy times: the company's booking rules and the
    active professionals giving the service (display-name order) with their weekly hours."""

    settings: AgendaSettings
    bookable: list[Bookable]


def search_roster(
    company: Company,
    service: Service,
    professional: Professional | None = None,
    *,
    named: str | None = None,
) -> Roster:
    """The roster of a slot search in one statement (the professionals LEFT JOIN their hours
    and the company's agenda settings), so its cost does not grow with the professionals; the
    statement is written once from the models' metadata. `professional` narrows it to that
    one; `named` to the one a customer named (NotFound or Ambiguous, as
    `professional_resolve`)."""
    found: dict[int, Bookable] = {}
    settings: AgendaSettings | None = None
    for pk, display_name, weekday, start, end, *settings_values in roster_rows(
        company, service, professional
    ):
        bookable = found.get(pk)
        if bookable is None:
            # Built as the ORM would load them (every field, saved state), without more reads.
            values = {"id": pk, "company_id": company.pk, "display_name": display_name}
            instance = loaded(Professional, values | {"active": True})
            instance.company = company
            bookable = found[pk] = Bookable(instance, defaultdict(list))
        if weekday is not None:
            bookable.weekly[weekday].append((start, end))
        if settings is None and settings_values[0] is not None:
            settings = loaded(
                AgendaSettings, dict(zip(SETTINGS_FIELDS, settings_values, strict=True))
            )
            settings.company = company
    if settings is None:  # no professional gives it, or the settings row is still to be created
        settings = agenda_settings_for(company=company)
    bookable_list = list(found.values())
    if named is not None:
        chosen = professional_pick([b.professional for b in bookable_list], named)
        bookable_list = [b for b in bookable_list if b.professional is chosen]
    return Roster(settings, bookable_list)


def customer_limits(settings: AgendaSettings, now: datetime) -> tuple[datetime, datetime]:
    """Earliest and latest start a customer may book at `now`."""
    return (
        now + timedelta(minutes=settings.minimum_notice_minutes),
        now + timedelta(days=settings.booking_horizon_days),
    )


def beyond_horizon_error(settings: AgendaSettings, now: datetime, tz: ZoneInfo) -> ValidationFailed:
    """What a customer is told when a search starts past the booking horizon: the last date
    and time that can be booked, in the company's time zone."""
    horizon = customer_limits(settings, now)[1]
    last = describe_instant(horizon, tz)
    days = settings.booking_horizon_days
    return ValidationFailed(
        ngettext(
            "Solo se puede reservar con hasta %(days)d día de antelación: el último momento "
            "reservable es el %(weekday)s %(date)s a las %(time)s. Busque en fechas "
            "anteriores.",
            "Solo se puede reservar con hasta %(days)d días de antelación: el último momento "
            "reservable es el %(weekday)s %(date)s a las %(time)s. Busque en fechas "
            "anteriores.",
            days,
        )
        % {"days": days, **in_words(last)},
        code="slot_beyond_horizon",
        last_bookable=last,
    )


def slots_available(
    *,
    company: Company,
    service: Service,
    starts_at: datetime,
    ends_at: datetime,
    now: datetime,
    professional: Professional | None = None,
    roster: Roster | None = None,
    limit: int | None = None,
    move: Move | None = None,
    explain_horizon: bool = False,
) -> list[Slot]:
    """Free slots starting in [starts_at, ends_at), in time order (then by professional).
    With `move`, the slots to move that appointment (of this service) to: its own time counts
    as free, but its current slot is never offered, and the service may have been withdrawn
    since it was booked.

    Searches `roster` when the caller has read it with `search_roster`, else reads it here
    (only `professional`, if given). Honours minimum notice and horizon as of `now`. With
    `limit`, stops after the local day on which the limit is reached. Two statements (the
    roster, the busy times) whatever the number of professionals or days.

    With `explain_horizon` (a customer's search), a window that starts past the booking horizon
    is VALIDATION naming the last bookable date instead of an empty list, which would read as
    "nothing free"; the nearest free slots of a refusal keep their empty list.
    """
    if roster is None:
        roster = search_roster(company, service, professional)
    settings, bookable = roster.settings, roster.bookable
    moving = move is not None
    tz = company.tz
    earliest, horizon = customer_limits(settings, now)
    if explain_horizon and starts_at > horizon:
        raise beyond_horizon_error(settings, now, tz)
    first = max(starts_at, earliest)
    last = min(ends_at, horizon + timedelta(microseconds=1))
    # A withdrawn service is searched only to move an appointment of it (as `slot_facts_check`).
    if first >= last or not (service.active or moving) or not bookable:
        return []
    # A slot starting at `start` blocks [start - before, start + after) (`blocked_range`).
    before = timedelta(minutes=service.buffer_before_minutes)
    after = timedelta(minutes=service.duration_minutes + service.buffer_after_minutes)
    ids = [b.professional.pk for b in bookable]
    busy = busy_times(
        ids,
        first - before,
        last + after,
        exclude_appointment_id=move.appointment_id if move is not None else None,
    )
    step = timedelta(minutes=settings.slot_step_minutes)
    duration = timedelta(minutes=service.duration_minutes)
    slots: list[Slot] = []
    day = first.astimezone(tz).date()
    last_day = last.astimezone(tz).date()
    while day <= last_day:
        day_slots: list[Slot] = []
        for candidate in bookable:
            prof = candidate.professional
            for open_at, close_at in working_intervals(candidate.weekly, day, tz):
                start = open_at
                if start < first:
                    start = open_at + step * math.ceil((first - open_at) / step)
                while start + duration <= close_at and start < last:
                    if not busy.overlaps(prof.pk, start - before, start + after) and not (
                        move is not None and move.is_current(prof.pk, start)
                    ):
                        day_slots.append(Slot(prof, start, start + duration))
                    start += step
        day_slots.sort(key=lambda s: (s.starts_at, s.professional.display_name))
        slots.extend(day_slots)
        if limit is not None and len(slots) >= limit:
            return slots[:limit]
        day += timedelta(days=1)
    return slots


def nearest_free_slots(
    *,
    company: Company,
    service: Service,
    around: datetime,
    now: datetime,
    prefer: Professional | None = None,
    count: int = NEAREST_COUNT,
    move: Move | None = None,
) -> list[Slot]:
    """The free slots closest in time to `around` (any professional giving the service; on a
    tie the preferred one first), returned in time order."""
    candidates = slots_available(
        company=company,
        service=service,
        starts_at=around - timedelta(days=1),
        ends_at=around + timedelta(days=NEAREST_SEARCH_DAYS),
        now=now,
        move=move,
    )
    prefer_id = prefer.pk if prefer else None
    candidates.sort(
        key=lambda s: (abs(s.starts_at - around), s.professional.pk != prefer_id, s.starts_at)
    )
    return sorted(candidates[:count], key=lambda s: (s.starts_at, s.professional.display_name))
