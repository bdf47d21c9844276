"""Availability: free slots per local day in the company's timezone, and the instant-level check.

Slots are generated per *local* day from the weekly working hours, turned into UTC instants,
and stepped in absolute time, so a day with 23 or 25 hours (DST) neither loses nor duplicates
an hour. A slot is free when its blocked range (the service plus its buffers) overlaps no
scheduled appointment's blocked range and no time off. Reads are bounded to the searched window.
"""

import bisect
import functools
import hashlib
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Exists, Field, Model, QuerySet
from django.utils import formats
from django.utils.translation import gettext as _g
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from agenda.models import (
    MAX_BLOCKED_SPAN,
    AgendaSettings,
    Appointment,
    Professional,
    Service,
    TimeOff,
    WorkingHours,
    lock_schedules,
)
from agenda.selectors import agenda_settings_for, fold_text, professional_pick
from core.errors import ValidationFailed
from core.models import Company
from core.references import ALPHABET as REFERENCE_ALPHABET
from core.references import LENGTH as REFERENCE_LENGTH
from core.sql import RowReader

MAX_SEARCH_DAYS = 31
DEFAULT_SEARCH_DAYS = 14
NEAREST_COUNT = 3
NEAREST_SEARCH_DAYS = 7


@dataclass(frozen=True)
class Slot:
    professional: Professional
    starts_at: datetime  # aware, UTC
    ends_at: datetime

    def local(self, tz: ZoneInfo) -> datetime:
        return self.starts_at.astimezone(tz)

    def label(self, tz: ZoneInfo) -> str:
        """The loose human key of a slot: local "YYYY-MM-DD HH:MM"."""
        return local_label(self.starts_at, tz)


def slot_reference(company: Company, professional_id: int, starts_at: datetime) -> str:
    """A short public code for a slot, stable across searches (the same slot keeps its code,
    so repeated searches do not flood the ledger). It reveals nothing: a digest, not an id."""
    seed = f"{company.pk}:{professional_id}:{int(starts_at.timestamp())}".encode()
    number = int.from_bytes(hashlib.sha256(seed).digest()[:8], "big")
    code = []
    for _i in range(REFERENCE_LENGTH):
        number, digit = divmod(number, len(REFERENCE_ALPHABET))
        code.append(REFERENCE_ALPHABET[digit])
    return "SL-" + "".join(code)


def slot_ledger_data(slot: "Slot") -> dict[str, object]:
    """What the exposure ledger keeps about a slot (server-side only, never shown)."""
    return {"professional": slot.professional.pk, "start": slot.starts_at.isoformat()}


def slot_from_ledger(*, company: Company, data: dict | None) -> tuple[Professional, datetime]:
    """The professional and start instant of a slot the conversation was shown."""
    data = data or {}
    professional = Professional.objects.filter(company=company, pk=data.get("professional")).first()
    try:
        starts_at = datetime.fromisoformat(str(data.get("start")))
    except ValueError:
        starts_at = None
    if professional is None or starts_at is None:
        raise ValidationFailed(
            _("Esa franja ya no está disponible. Consulte de nuevo la disponibilidad."),
            code="slot_unavailable",
        )
    return professional, starts_at


def local_label(instant: datetime, tz: ZoneInfo) -> str:
    return instant.astimezone(tz).strftime("%Y-%m-%d %H:%M")


def describe_instant(instant: datetime, tz: ZoneInfo) -> dict[str, str]:
    """Local date, weekday name (in the active language) and time: computed here, so the agent
    never does calendar arithmetic itself."""
    return describe_instants([instant], tz)[0]


def describe_instants(instants: Iterable[datetime], tz: ZoneInfo) -> list[dict[str, str]]:
    """`describe_instant` of each instant, each weekday named once (formatting the name through
    the active language's translations costs more than the rest of a description)."""
    weekdays: dict[int, str] = {}
    described = []
    for instant in instants:
        local = instant.astimezone(tz)
        weekday = local.weekday()
        if weekday not in weekdays:
            weekdays[weekday] = formats.date_format(local, "l")
        described.append(
            {
                "date": local.strftime("%Y-%m-%d"),
                "weekday": weekdays[weekday],
                "time": local.strftime("%H:%M"),
            }
        )
    return described


def local_instant(day: date, at: time, tz: ZoneInfo) -> datetime:
    """The UTC instant of a local wall-clock time. A time that does not exist (inside the gap
    of a spring-forward day) is the first real instant after the gap, the change itself: hours
    from 02:30 start, and hours until 02:30 end, when the clock jumps from 02:00 to 03:00.
    (Read with the offset before the change, PEP 495's fold=0, 02:30 would be 03:30.) A
    repeated time (an autumn day) is its first occurrence."""
    naive = datetime.combine(day, at)
    instant = naive.replace(tzinfo=tz).astimezone(UTC)
    if instant.astimezone(tz).replace(tzinfo=None) == naive:
        return instant
    # In the gap: read with the offset after the change (fold=1) the same wall time is an
    # instant before the change, and with the one before it (fold=0) one after; the change,
    # on a whole second, lies between them.
    before, after = naive.replace(tzinfo=tz, fold=1).astimezone(UTC), instant
    new_offset = after.astimezone(tz).utcoffset()
    while after - before > timedelta(seconds=1):
        middle = before + (after - before) / 2
        if middle.astimezone(tz).utcoffset() == new_offset:
            after = middle
        else:
            before = middle
    return after.replace(microsecond=0)


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
    excluding = exclude_appointment_id is not None
    window = [
        _prepared(Appointment, "blocked_from", start - MAX_BLOCKED_SPAN),
        _prepared(Appointment, "blocked_from", end),
        _prepared(Appointment, "blocked_until", start),
    ]
    params = [
        *professional_ids,
        _prepared(Appointment, "state", Appointment.State.SCHEDULED),
        *window,
        *([exclude_appointment_id] if excluding else []),
        *professional_ids,
        _prepared(TimeOff, "ends_at", start),
        _prepared(TimeOff, "starts_at", end),
    ]
    ranges: dict[int, list[tuple[datetime, datetime]]] = defaultdict(list)
    for pk, busy_from, busy_until in _select_rows(
        _busy_sql(len(professional_ids), excluding), params, _BUSY_ROWS
    ):
        ranges[pk].append((busy_from, busy_until))
    return BusyTimes(ranges)


def working_intervals(
    weekly: dict[int, list[tuple[time, time]]], day: date, tz: ZoneInfo
) -> list[tuple[datetime, datetime]]:
    """The professional's working intervals on one local day, as UTC instants; overlapping
    or touching intervals (09-13 and 12-14) merge, so no slot is offered twice."""
    intervals = [
        (local_instant(day, start, tz), local_instant(day, end, tz))
        for start, end in weekly.get(day.weekday(), [])
    ]
    return _merge((start, end) for start, end in intervals if end > start)


def blocked_range(service: Service, starts_at: datetime) -> tuple[datetime, datetime]:
    """The professional's time a booking takes: the service plus its buffers."""
    return (
        starts_at - timedelta(minutes=service.buffer_before_minutes),
        starts_at + timedelta(minutes=service.duration_minutes + service.buffer_after_minutes),
    )


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


_SETTINGS_FIELDS = [f.attname for f in AgendaSettings._meta.concrete_fields]


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
    params = [company.pk, service.pk]
    if professional is not None:
        params.append(professional.pk)
    found: dict[int, Bookable] = {}
    settings: AgendaSettings | None = None
    rows = _select_rows(_roster_sql(professional is not None), params, _ROSTER_ROWS)
    for pk, display_name, weekday, start, end, *settings_values in rows:
        bookable = found.get(pk)
        if bookable is None:
            # Built as the ORM would load them (every field, saved state), without more reads.
            values = {"id": pk, "company_id": company.pk, "display_name": display_name}
            instance = _loaded(Professional, values | {"active": True})
            instance.company = company
            bookable = found[pk] = Bookable(instance, defaultdict(list))
        if weekday is not None:
            bookable.weekly[weekday].append((start, end))
        if settings is None and settings_values[0] is not None:
            settings = _loaded(
                AgendaSettings, dict(zip(_SETTINGS_FIELDS, settings_values, strict=True))
            )
            settings.company = company
    if settings is None:  # no professional gives it, or the settings row is still to be created
        settings = agenda_settings_for(company=company)
    bookable_list = list(found.values())
    if named is not None:
        chosen = professional_pick([b.professional for b in bookable_list], named)
        bookable_list = [b for b in bookable_list if b.professional is chosen]
    return Roster(settings, bookable_list)


def _loaded(model: type[Model], values: dict[str, object]) -> Model:
    """An instance as the ORM loads one from a row holding every concrete field."""
    names = [f.attname for f in model._meta.concrete_fields]
    return model.from_db(DEFAULT_DB_ALIAS, names, [values[name] for name in names])


# --- The search's two statements, written once from the models' metadata ---------------------
# Both run on every slot search, in a fixed shape: compiling them with the ORM each time cost
# more CPU than the rest of the search together (docs/performance.md). Their values are
# prepared and their rows converted as the ORM does (`_prepared`, `_select_rows`).


def _field(model: type[Model], name: str) -> Field:
    return model._meta.get_field(name)


def _table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _qualified(model: type[Model], name: str) -> str:
    """The quoted table.column of a model's field."""
    return f"{_table(model)}.{connection.ops.quote_name(_field(model, name).column)}"


def _prepared(model: type[Model], name: str, value: object) -> object:
    """A lookup's value as the ORM sends it for this field."""
    return _field(model, name).get_db_prep_value(value, connection)


def _one_line(sql: str) -> str:
    return " ".join(sql.split())


_GIVES = _field(Professional, "services")  # the many-to-many to the services given


def _reader(fields: Iterable[Field]) -> RowReader:
    """The column expressions the ORM selects for these fields, and how to read them back."""
    return RowReader([field.cached_col for field in fields])


_ROSTER_ROWS = _reader(
    [
        _field(Professional, "id"),
        _field(Professional, "display_name"),
        *(_field(WorkingHours, name) for name in ("weekday", "start_time", "end_time")),
        *AgendaSettings._meta.concrete_fields,
    ]
)
_BUSY_ROWS = _reader(
    _field(Appointment, name) for name in ("professional", "blocked_from", "blocked_until")
)


@functools.cache
def _roster_sql(one_professional: bool) -> str:
    """Params: the company's id, the service's id (and the professional's id)."""
    q, gives = _qualified, _GIVES.remote_field.through
    columns = ", ".join(q(col.target.model, col.target.name) for col in _ROSTER_ROWS.columns)
    return _one_line(f"""
        SELECT {columns}
        FROM {_table(Professional)}
        INNER JOIN {_table(gives)}
            ON {q(gives, _GIVES.m2m_field_name())} = {q(Professional, "id")}
        LEFT OUTER JOIN {_table(WorkingHours)}
            ON {q(WorkingHours, "professional")} = {q(Professional, "id")}
        LEFT OUTER JOIN {_table(AgendaSettings)}
            ON {q(AgendaSettings, "company")} = {q(Professional, "company")}
        WHERE {q(Professional, "company")} = %s AND {q(Professional, "active")}
            AND {q(gives, _GIVES.m2m_reverse_field_name())} = %s
            {f"AND {q(Professional, 'id')} = %s" if one_professional else ""}
        ORDER BY {q(Professional, "display_name")}, {q(Professional, "id")}
    """)


@functools.lru_cache(maxsize=64)
def _busy_sql(professionals: int, excluding: bool) -> str:
    """Params: the professional ids, the scheduled state, the appointments' window (three
    bounds, as `scheduled_in_window`), the excluded appointment's id if `excluding`, the
    professional ids again, and the time off's window (two bounds)."""
    q = _qualified
    ids = ", ".join(["%s"] * professionals)
    return _one_line(f"""
        SELECT {q(Appointment, "professional")}, {q(Appointment, "blocked_from")},
            {q(Appointment, "blocked_until")}
        FROM {_table(Appointment)}
        WHERE {q(Appointment, "professional")} IN ({ids}) AND {q(Appointment, "state")} = %s
            AND {q(Appointment, "blocked_from")} >= %s AND {q(Appointment, "blocked_from")} < %s
            AND {q(Appointment, "blocked_until")} > %s
            {f"AND {q(Appointment, 'id')} <> %s" if excluding else ""}
        UNION ALL
        SELECT {q(TimeOff, "professional")}, {q(TimeOff, "starts_at")}, {q(TimeOff, "ends_at")}
        FROM {_table(TimeOff)}
        WHERE {q(TimeOff, "professional")} IN ({ids})
            AND {q(TimeOff, "ends_at")} > %s AND {q(TimeOff, "starts_at")} < %s
    """)


def _select_rows(sql: str, params: list, reader: RowReader) -> list[tuple]:
    """The rows of a SELECT of the reader's columns, converted as the ORM converts them."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return reader.rows(cursor.fetchall())


def _customer_limits(settings: AgendaSettings, now: datetime) -> tuple[datetime, datetime]:
    """Earliest and latest start a customer may book at `now`."""
    return (
        now + timedelta(minutes=settings.minimum_notice_minutes),
        now + timedelta(days=settings.booking_horizon_days),
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
    exclude_appointment_id: int | None = None,
) -> list[Slot]:
    """Free slots starting in [starts_at, ends_at), in time order (then by professional).
    With `exclude_appointment_id`, the slots to move that appointment (of this service) to:
    its own time counts as free, and the service may have been withdrawn since it was booked.

    Searches `roster` when the caller has read it with `search_roster`, else reads it here
    (only `professional`, if given). Honours minimum notice and horizon as of `now`. With
    `limit`, stops after the local day on which the limit is reached. Two statements (the
    roster, the busy times) whatever the number of professionals or days.
    """
    if roster is None:
        roster = search_roster(company, service, professional)
    settings, bookable = roster.settings, roster.bookable
    moving = exclude_appointment_id is not None
    tz = company.tz
    earliest, horizon = _customer_limits(settings, now)
    first = max(starts_at, earliest)
    last = min(ends_at, horizon + timedelta(microseconds=1))
    # A withdrawn service is searched only to move an appointment of it (as `slot_check`).
    if first >= last or not (service.active or moving) or not bookable:
        return []
    # A slot starting at `start` blocks [start - before, start + after) (`blocked_range`).
    before = timedelta(minutes=service.buffer_before_minutes)
    after = timedelta(minutes=service.duration_minutes + service.buffer_after_minutes)
    ids = [b.professional.pk for b in bookable]
    busy = busy_times(
        ids, first - before, last + after, exclude_appointment_id=exclude_appointment_id
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
                    if not busy.overlaps(prof.pk, start - before, start + after):
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
    exclude_appointment_id: int | None = None,
) -> list[Slot]:
    """The free slots closest in time to `around` (any professional giving the service; on a
    tie the preferred one first), returned in time order."""
    candidates = slots_available(
        company=company,
        service=service,
        starts_at=around - timedelta(days=1),
        ends_at=around + timedelta(days=NEAREST_SEARCH_DAYS),
        now=now,
        exclude_appointment_id=exclude_appointment_id,
    )
    prefer_id = prefer.pk if prefer else None
    candidates.sort(
        key=lambda s: (abs(s.starts_at - around), s.professional.pk != prefer_id, s.starts_at)
    )
    return sorted(candidates[:count], key=lambda s: (s.starts_at, s.professional.display_name))


def describe_slots(slots: list[Slot], tz: ZoneInfo) -> list[dict[str, str]]:
    """What customers are told of each slot: local date, weekday and time, and who."""
    described = describe_instants([s.starts_at for s in slots], tz)
    return [
        {**d, "professional": s.professional.display_name}
        for s, d in zip(slots, described, strict=True)
    ]


def _unavailable(
    message: str,
    code: str,
    *,
    company: Company,
    service: Service,
    professional: Professional,
    starts_at: datetime,
    now: datetime,
    exclude_appointment_id: int | None,
) -> ValidationFailed:
    nearest = nearest_free_slots(
        company=company,
        service=service,
        around=starts_at,
        now=now,
        prefer=professional,
        exclude_appointment_id=exclude_appointment_id,
    )
    described = describe_slots(nearest, company.tz)
    if described:
        options = "; ".join(
            _g("%(weekday)s %(date)s a las %(time)s con %(professional)s") % d for d in described
        )
        message = _g(
            "%(problem)s Las franjas libres más cercanas son: %(options)s. "
            "Consulte la disponibilidad para reservar una de ellas."
        ) % {"problem": message, "options": options}
    else:
        message = _g("%(problem)s No hay franjas libres cerca de esa fecha.") % {"problem": message}
    return ValidationFailed(message, code=code, nearest_free_slots=described)


def slot_taken_error(
    *,
    company: Company,
    service: Service,
    professional: Professional,
    starts_at: datetime,
    now: datetime,
    exclude_appointment_id: int | None = None,
) -> ValidationFailed:
    return _unavailable(
        _g("Esa franja ya está ocupada."),
        "slot_taken",
        company=company,
        service=service,
        professional=professional,
        starts_at=starts_at,
        now=now,
        exclude_appointment_id=exclude_appointment_id,
    )


@dataclass(frozen=True)
class SlotFacts:
    """Everything `slot_check` decides on for one professional at one start, read together:
    the company's booking rules, whether the professional is an active one of the company who
    gives the service, their weekly hours, and whether time off or another scheduled
    appointment touches the blocked range (the service plus its buffers)."""

    company: Company
    service: Service
    professional: Professional
    starts_at: datetime
    exclude_appointment_id: int | None
    settings: AgendaSettings
    bookable: bool
    weekly: dict[int, list[tuple[time, time]]]
    time_off: bool
    taken: bool


def slot_facts(
    *,
    company: Company,
    service: Service,
    professional: Professional,
    starts_at: datetime,
    exclude_appointment_id: int | None = None,
) -> SlotFacts:
    """The facts of a slot in one statement (after the lock): the professional's row LEFT JOIN
    their hours and the company's agenda settings, with three EXISTS (gives the service; time
    off; another scheduled appointment, but `exclude_appointment_id`) on the same bounded index
    scans as a slot search. One snapshot, so the check sees one instant.

    First, in a statement of its own, the professional's row is locked until the transaction
    ends (`lock_schedules`), for two reasons. The bookings of one professional check and write
    one at a time: without it, two inserts that overlap can each find the other's uncommitted
    row in the exclusion constraint's check and wait for each other, a deadlock PostgreSQL
    breaks by failing one of them (a SYSTEM answer instead of "taken"), and fifty customers
    racing for a slot on a busy machine could make a chain of them. And a change of the
    professional's schedule in flight (time off, hours, services, which take the same lock)
    commits before the facts are read: the facts' statement, started after the lock is held,
    sees it (a statement that waited for the lock itself would still read the schedule of
    its start). Call inside a transaction.
    """
    block_from, block_until = blocked_range(service, starts_at)
    appointments = scheduled_in_window([professional.pk], block_from, block_until)
    if exclude_appointment_id is not None:
        appointments = appointments.exclude(pk=exclude_appointment_id)
    time_off = TimeOff.objects.filter(
        professional_id=professional.pk, ends_at__gt=block_from, starts_at__lt=block_until
    )
    gives = Professional.services.through.objects.filter(
        professional_id=professional.pk, service_id=service.pk
    )
    lock_schedules([professional.pk])
    rows = (
        Professional.objects.filter(company=company, pk=professional.pk)
        .order_by()
        .annotate(gives=Exists(gives), off=Exists(time_off), taken=Exists(appointments))
        .values_list(
            "active",
            "gives",
            "off",
            "taken",
            "working_hours__weekday",
            "working_hours__start_time",
            "working_hours__end_time",
            *[f"company__agenda_settings__{name}" for name in _SETTINGS_FIELDS],
        )
    )
    weekly: dict[int, list[tuple[time, time]]] = defaultdict(list)
    settings: AgendaSettings | None = None
    bookable = in_time_off = taken = False  # no row: not a professional of this company
    for active, gives_service, off, busy, weekday, start, end, *settings_values in rows:
        bookable, in_time_off, taken = active and gives_service, off, busy
        if weekday is not None:
            weekly[weekday].append((start, end))
        if settings is None and settings_values[0] is not None:
            settings = _loaded(
                AgendaSettings, dict(zip(_SETTINGS_FIELDS, settings_values, strict=True))
            )
            settings.company = company
    if settings is None:  # the settings row is still to be created (or no such professional)
        settings = agenda_settings_for(company=company)
    return SlotFacts(
        company=company,
        service=service,
        professional=professional,
        starts_at=starts_at,
        exclude_appointment_id=exclude_appointment_id,
        settings=settings,
        bookable=bookable,
        weekly=weekly,
        time_off=in_time_off,
        taken=taken,
    )


def slot_check(facts: SlotFacts, *, now: datetime, enforce_customer_rules: bool = True) -> None:
    """Decide on a slot from its facts, read at the instant (`slot_facts`).

    Raises ValidationFailed: past, too soon or too far (customer rules), service or
    professional not bookable (a withdrawn service only for a new booking, not for a move),
    outside working hours or in time off, or overlapping another scheduled appointment (then
    with the nearest free slots).
    """
    company, service, starts_at = facts.company, facts.service, facts.starts_at
    if starts_at <= now:
        raise ValidationFailed(
            _("Esa franja ya pasó. Elija una hora posterior a la actual."), code="slot_in_past"
        )
    settings = facts.settings
    if enforce_customer_rules:
        earliest, horizon = _customer_limits(settings, now)
        if starts_at < earliest:
            raise ValidationFailed(
                ngettext(
                    "Esa franja empieza demasiado pronto: las reservas se hacen con al menos "
                    "%(minutes)d minuto de antelación.",
                    "Esa franja empieza demasiado pronto: las reservas se hacen con al menos "
                    "%(minutes)d minutos de antelación.",
                    settings.minimum_notice_minutes,
                )
                % {"minutes": settings.minimum_notice_minutes},
                code="slot_too_soon",
            )
        if starts_at > horizon:
            raise ValidationFailed(
                _g("Solo se puede reservar con hasta %(days)d días de antelación.")
                % {"days": settings.booking_horizon_days},
                code="slot_beyond_horizon",
            )
    # A withdrawn service takes no new bookings, but the appointments already booked keep it
    # and can still be moved (`exclude_appointment_id`: the appointment being moved).
    moving = facts.exclude_appointment_id is not None
    if service.company_id != company.pk or not (service.active or moving):
        raise ValidationFailed(_("Ese servicio ya no se ofrece."), code="service_inactive")
    if not facts.bookable:
        raise ValidationFailed(
            _("Ese profesional no ofrece ese servicio."), code="professional_unavailable"
        )
    context = {
        "company": company,
        "service": service,
        "professional": facts.professional,
        "starts_at": starts_at,
        "now": now,
        "exclude_appointment_id": facts.exclude_appointment_id,
    }
    tz = company.tz
    ends_at = starts_at + timedelta(minutes=service.duration_minutes)
    day = starts_at.astimezone(tz).date()
    if not any(
        open_at <= starts_at and ends_at <= close_at
        for open_at, close_at in working_intervals(facts.weekly, day, tz)
    ):
        raise _unavailable(
            _g("Ese horario está fuera del horario de atención."), "slot_unavailable", **context
        )
    if facts.time_off:
        raise _unavailable(
            _g("Ese profesional no atiende en ese horario."), "slot_unavailable", **context
        )
    if facts.taken:
        raise slot_taken_error(**context)


def slot_validate(
    *,
    company: Company,
    service: Service,
    professional: Professional,
    starts_at: datetime,
    now: datetime,
    enforce_customer_rules: bool = True,
    exclude_appointment_id: int | None = None,
) -> None:
    """Check, at the instant, that this professional can take this service at `starts_at`
    (`slot_check` on `slot_facts`: the lock and one statement, and more only to refuse). Call
    inside the booking transaction, right before writing: it locks the professional's row
    until that transaction ends (`slot_facts`)."""
    facts = slot_facts(
        company=company,
        service=service,
        professional=professional,
        starts_at=starts_at,
        exclude_appointment_id=exclude_appointment_id,
    )
    slot_check(facts, now=now, enforce_customer_rules=enforce_customer_rules)


# --- Loose date inputs, decided here rather than trusted from the agent -----------------------

_RELATIVE_DAYS = {
    "hoy": 0,
    "today": 0,
    "manana": 1,
    "tomorrow": 1,
    "pasado manana": 2,
    "day after tomorrow": 2,
}
_DMY = re.compile(r"^(\d{1,2})[/.-](\d{1,2})[/.-](\d{4})$")


def _invalid_date(text: str) -> ValidationFailed:
    return ValidationFailed(
        _g("No entendí la fecha «%(text)s». Use el formato AAAA-MM-DD.") % {"text": text[:40]},
        code="invalid_date",
    )


def parse_date_bound(text: str, *, tz: ZoneInfo, now: datetime, end: bool = False) -> datetime:
    """An instant from a loose date: "2026-12-01", "01/12/2026", "hoy", "mañana", or an ISO
    date-time (naive means company-local). A bare date means the start of that local day, or
    with `end=True` the start of the next one (so a date bound includes the whole day). A date
    at the calendar's edge (year 1, 9999), whose instant Python cannot hold, is not understood
    either."""
    try:
        return _date_bound(text, tz=tz, now=now, end=end)
    except OverflowError:
        raise _invalid_date(text) from None


def _date_bound(text: str, *, tz: ZoneInfo, now: datetime, end: bool) -> datetime:
    folded = fold_text(text)
    today = now.astimezone(tz).date()
    day: date | None = None
    if folded in _RELATIVE_DAYS:
        day = today + timedelta(days=_RELATIVE_DAYS[folded])
    elif match := _DMY.match(folded):
        try:
            day = date(int(match[3]), int(match[2]), int(match[1]))
        except ValueError:
            raise _invalid_date(text) from None
    else:
        try:
            day = date.fromisoformat(folded)
        except ValueError:
            try:
                moment = datetime.fromisoformat(text.strip())
            except ValueError:
                raise _invalid_date(text) from None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=tz)
            return moment.astimezone(UTC)
    if end:
        day += timedelta(days=1)
    return local_instant(day, time.min, tz)


@dataclass(frozen=True)
class SearchWindow:
    """The [start, end) instants to search; `narrowed` when the request asked for more days
    than a search covers, so slots may exist after `end` that this search does not list."""

    start: datetime
    end: datetime
    narrowed: bool = False


def search_window(
    *, company: Company, from_text: str, to_text: str | None, now: datetime
) -> SearchWindow:
    """The window to search, from loose inputs. Without `to`, two weeks; never more than 31
    days (a wider request is narrowed, and the listing then says more may exist). Days are
    counted on the company's calendar (`_days_later`): across a DST change a day is not 24
    hours, and a cap added in absolute time would end an hour into a day it barely searched."""
    tz = company.tz
    start = parse_date_bound(from_text, tz=tz, now=now)
    try:
        widest = _days_later(start, MAX_SEARCH_DAYS, tz)
    except OverflowError:  # a start in the calendar's last month
        raise _invalid_date(from_text) from None
    end = _days_later(start, DEFAULT_SEARCH_DAYS, tz)
    if to_text:
        end = parse_date_bound(to_text, tz=tz, now=now, end=True)
        if end <= start:
            raise ValidationFailed(
                _("La fecha final es anterior a la inicial."), code="invalid_date_range"
            )
    return SearchWindow(start, min(end, widest), narrowed=end > widest)


def _days_later(instant: datetime, days: int, tz: ZoneInfo) -> datetime:
    """The same local wall-clock time `days` calendar days after `instant` (`local_instant`
    reads it: midnight stays midnight across a DST change). OverflowError past year 9999."""
    local = instant.astimezone(tz)
    return local_instant(local.date() + timedelta(days=days), local.time(), tz)
