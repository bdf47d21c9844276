"""The team's calendar (agenda.admin.calendar): a day or a week of every professional of a
company side by side on a time grid, one row per slot step. Each appointment is a block with
its customer, phone, service and state; the free time is one cell per step, a link that opens
the booking page at that time (or, when an appointment is being moved, the free slots of its
service, each opening its move form). Reads only: every booking and move goes through
agenda.services from the pages the cells open, with the same checks as any other path.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

from babel import Locale, UnknownLocaleError
from django.urls import reverse

from agenda.availability.busy import busy_times, working_intervals
from agenda.availability.search import slots_available
from agenda.availability.slots import Move
from agenda.models import Appointment, Professional, Service, TimeOff
from agenda.selectors import agenda_settings_for
from core.models import Company

DAY, WEEK = "day", "week"
WEEK_DAYS = 7
# ISO 8601 weeks, as Spanish and most European calendars: Monday first (date.weekday() 0).
# A company whose country's calendars start on another day gets that one (`first_weekday`).
FIRST_WEEKDAY = 0
# The hours shown when nobody works on the days shown.
DEFAULT_HOURS = (time(9), time(19))


def first_weekday(company: Company) -> int:
    """The company's first day of the week (0 = Monday), as calendars of its language and
    country print it (CLDR, through Babel): Monday in Spain or the United Kingdom, Sunday in
    the United States; Monday when Babel knows no such locale."""
    try:
        return Locale(company.language, company.country.upper()).first_week_day
    except (UnknownLocaleError, ValueError, TypeError):
        return FIRST_WEEKDAY


def week_start(day: date, first: int = FIRST_WEEKDAY) -> date:
    """The first day of the week `day` is in, weeks starting on weekday `first`."""
    return day - timedelta(days=(day.weekday() - first) % WEEK_DAYS)


def days_shown(view: str, day: date, first: int = FIRST_WEEKDAY) -> list[date]:
    if view == WEEK:
        first = week_start(day, first)
        return [first + timedelta(days=n) for n in range(WEEK_DAYS)]
    return [day]


def step_to(view: str, day: date, steps: int) -> date:
    """The day `steps` days (or weeks) away: what "previous" and "next" show."""
    return day + timedelta(days=steps * (WEEK_DAYS if view == WEEK else 1))


@dataclass
class Block:
    """An appointment on the grid."""

    appointment: Appointment
    row: int
    span: int
    time: str
    past: bool
    url: str
    style: str = ""


@dataclass
class FreeCell:
    """A free step of a professional's working time (or, moving, a slot it can move to)."""

    row: int
    time: str
    url: str
    style: str = ""


@dataclass
class Column:
    professional: Professional
    day: date
    index: int
    working: list[tuple[int, int]] = field(default_factory=list)  # row ranges [from, to)
    blocks: list[Block] = field(default_factory=list)
    free: list[FreeCell] = field(default_factory=list)
    working_styles: list[str] = field(default_factory=list)
    head_style: str = ""
    # The professional's time off on this day: (first row, rows, reason, style).
    time_off: list[tuple[int, int, str, str]] = field(default_factory=list)


@dataclass
class Grid:
    days: list[date]
    columns: list[Column]
    rows: list[str]  # the label of each row ("09:00", "09:15", ...)
    step: int
    first_minute: int  # minutes after local midnight of the first row
    now_style: str = ""  # where the line of the current time is drawn, on today's columns

    @property
    def professionals_per_day(self) -> int:
        return len(self.columns) // len(self.days) if self.days else 0

    @property
    def head_rows(self) -> int:
        """Header rows: the professionals' names, and above them the days in a week."""
        return 2 if len(self.days) > 1 else 1

    def style(self) -> str:
        """The CSS grid: a column of times, then one per professional and day."""
        # A week's columns (7 per professional) share the width left beside the admin's
        # sidebar: 3rem holds a free cell's "09:00", so a team of three fits at 1440 px with
        # the sidebar open; only a larger team scrolls, inside the grid's box.
        minimum = "3rem" if len(self.days) > 1 else "9rem"
        return (
            f"grid-template-columns: 3.25rem repeat({max(1, len(self.columns))}, "
            f"minmax({minimum}, 1fr)); grid-template-rows: repeat({self.head_rows}, auto) "
            f"repeat({len(self.rows)}, 1.75rem);"
        )

    def place(self, row: int, column: int, rows: int = 1, columns: int = 1) -> str:
        """Where an item sits, from a 0-based time row and a 0-based column of `columns`."""
        return (
            f"grid-row: {self.head_rows + 1 + row} / span {max(1, rows)}; "
            f"grid-column: {2 + column} / span {max(1, columns)};"
        )

    def day_heads(self) -> list[tuple[date, str]]:
        """Each day's header over its professionals (a week's)."""
        per_day = self.professionals_per_day
        return [
            (day, f"grid-row: 1; grid-column: {2 + n * per_day} / span {max(1, per_day)};")
            for n, day in enumerate(self.days)
        ]

    def time_labels(self) -> list[tuple[str, str]]:
        """Each hour's label (each row's when the rows are longer than 20 minutes)."""
        every = 1 if self.step > 20 else max(1, 60 // self.step)
        return [
            (label, f"grid-row: {self.head_rows + 1 + n} / span {every}; grid-column: 1;")
            for n, label in enumerate(self.rows)
            if (self.first_minute + n * self.step) % 60 == 0 or every == 1
        ]


def _minute(instant: datetime, day: date, company: Company) -> int:
    """Minutes from the local midnight starting `day` to `instant` (local wall clock)."""
    local = instant.astimezone(company.tz)
    return (local.date() - day).days * 24 * 60 + local.hour * 60 + local.minute


def booking_url(company: Company, professional_id: int, start: datetime, **extra: Any) -> str:
    local = start.astimezone(company.tz)
    query = {
        "company": company.pk,
        "professional": professional_id,
        "day": local.date().isoformat(),
        "at": local.strftime("%H:%M"),
        **{k: v for k, v in extra.items() if v},
    }
    return f"{reverse('admin:agenda_calendar_book')}?{urlencode(query)}"


def move_url(appointment: Appointment, company: Company, professional_id: int, start: datetime):
    local = start.astimezone(company.tz)
    query = {
        "professional": professional_id,
        "day": local.date().isoformat(),
        "at": local.strftime("%H:%M"),
    }
    url = reverse("admin:agenda_appointment_move", args=[appointment.pk])
    return f"{url}?{urlencode(query)}"


def calendar_url(company: Company, day: date, **query: Any) -> str:
    query = {"company": company.pk, "date": day.isoformat(), **{k: v for k, v in query.items()}}
    return f"{reverse('admin:agenda_calendar_changelist')}?{urlencode(query)}"


def professionals_shown(
    company: Company, chosen: list[int], service: Service | None
) -> list[Professional]:
    """The company's active professionals, all by default; those chosen; of a service, those
    who give it."""
    professionals = Professional.objects.filter(company=company, active=True)
    if chosen:
        professionals = professionals.filter(pk__in=chosen)
    if service is not None:
        professionals = professionals.filter(services=service)
    return list(professionals.prefetch_related("working_hours").order_by("display_name"))


def calendar_grid(
    company: Company,
    professionals: list[Professional],
    days: list[date],
    *,
    now: datetime,
    service: Service | None = None,
    moving: Appointment | None = None,
) -> Grid:
    """The grid of `professionals` on `days`: rows of the company's slot step from the
    earliest working hour to the latest (or DEFAULT_HOURS), appointments (not cancelled ones,
    whose time is free again) as blocks, and the free time as cells: each free step of the
    working time still to come (no appointment, buffers or time off on it), or with `service`
    the free slots of that service, or with `moving` the slots that appointment can move to
    (its own service's, as agenda.availability searches them)."""
    tz = company.tz
    step = agenda_settings_for(company=company).slot_step_minutes
    first = datetime.combine(days[0], time.min, tzinfo=tz)
    last = datetime.combine(days[-1] + timedelta(days=1), time.min, tzinfo=tz)
    ids = [p.pk for p in professionals]
    weekly: dict[int, dict[int, list[tuple[time, time]]]] = {}
    for professional in professionals:
        weekly[professional.pk] = defaultdict(list)
        for hours in professional.working_hours.all():
            weekly[professional.pk][hours.weekday].append((hours.start_time, hours.end_time))
    working: dict[tuple[int, date], list[tuple[datetime, datetime]]] = {
        (pk, day): working_intervals(weekly[pk], day, tz) for pk in ids for day in days
    }
    appointments = list(
        Appointment.objects.filter(
            company=company, professional_id__in=ids, starts_at__gte=first, starts_at__lt=last
        )
        .exclude(state=Appointment.State.CANCELLED)
        .select_related("contact", "service")
        .order_by("starts_at")
    )
    # The rows: whole hours around the working time and the appointments of the days shown.
    minutes = [
        _minute(instant, day, company)
        for (pk, day), intervals in working.items()
        for interval in intervals
        for instant in interval
    ]
    for a in appointments:
        day = a.starts_at.astimezone(tz).date()
        minutes += [_minute(a.starts_at, day, company), _minute(a.ends_at, day, company)]
    if minutes:
        top, bottom = min(minutes) // 60 * 60, min(24 * 60, -(-max(minutes) // 60) * 60)
    else:
        top = DEFAULT_HOURS[0].hour * 60
        bottom = DEFAULT_HOURS[1].hour * 60
    rows = [f"{m // 60:02d}:{m % 60:02d}" for m in range(top, bottom, step)]

    def row_of(minute: int) -> int:
        return max(0, min(len(rows), (minute - top) // step))

    columns: dict[tuple[int, date], Column] = {}
    index = 0
    for day in days:
        for professional in professionals:
            column = Column(professional, day, index)
            index += 1
            for start, end in working[(professional.pk, day)]:
                column.working.append(
                    (row_of(_minute(start, day, company)), row_of(_minute(end, day, company)))
                )
            columns[(professional.pk, day)] = column
    for a in appointments:
        day = a.starts_at.astimezone(tz).date()
        column = columns.get((a.professional_id, day))
        if column is None:
            continue
        start_minute = _minute(a.starts_at, day, company)
        row = row_of(start_minute)
        span = max(1, -(-(_minute(a.ends_at, day, company) - top) // step) - row)
        local_start, local_end = a.starts_at.astimezone(tz), a.ends_at.astimezone(tz)
        column.blocks.append(
            Block(
                appointment=a,
                row=row,
                span=span,
                time=f"{local_start:%H:%M}-{local_end:%H:%M}",
                past=a.starts_at <= now,
                url=reverse("admin:agenda_calendar_appointment", args=[a.pk]),
            )
        )
    for off in TimeOff.objects.filter(
        professional_id__in=ids, ends_at__gt=first, starts_at__lt=last
    ).order_by("starts_at"):
        for day in days:
            column = columns[(off.professional_id, day)]
            day_first = datetime.combine(day, time.min, tzinfo=tz)
            day_last = datetime.combine(day + timedelta(days=1), time.min, tzinfo=tz)
            start, end = max(off.starts_at, day_first), min(off.ends_at, day_last)
            if start >= end:
                continue
            row = row_of(_minute(start, day, company))
            end_row = row_of(-(-_minute(end, day, company) // step) * step)
            if end_row > row:
                column.time_off.append((row, end_row - row, off.reason, ""))
    if moving is not None or service is not None:
        for slot in slots_available(
            company=company,
            service=moving.service if moving is not None else service,
            starts_at=first,
            ends_at=last,
            now=now,
            move=None if moving is None else Move.of(moving),
        ):
            day = slot.starts_at.astimezone(tz).date()
            column = columns.get((slot.professional.pk, day))
            if column is None:
                continue
            if moving is not None:
                url = move_url(moving, company, slot.professional.pk, slot.starts_at)
            else:
                url = booking_url(company, slot.professional.pk, slot.starts_at, service=service.pk)
            column.free.append(
                FreeCell(
                    row_of(_minute(slot.starts_at, day, company)), _hhmm(slot.starts_at, tz), url
                )
            )
    else:
        busy = busy_times(ids, first, last)
        for (pk, day), column in columns.items():
            for start, end in working[(pk, day)]:
                cell = start
                while cell < end:
                    cell_end = min(end, cell + timedelta(minutes=step))
                    # Time already past is not free any more: nothing can be booked there.
                    if cell > now and not busy.overlaps(pk, cell, cell_end):
                        column.free.append(
                            FreeCell(
                                row_of(_minute(cell, day, company)),
                                _hhmm(cell, tz),
                                booking_url(company, pk, cell),
                            )
                        )
                    cell = cell_end
    grid = Grid(days, list(columns.values()), rows, step, top)
    local_now = now.astimezone(tz)
    if local_now.date() in days and rows:
        minute = local_now.hour * 60 + local_now.minute - top
        if 0 <= minute < len(rows) * step:
            per_day = grid.professionals_per_day
            first_column = days.index(local_now.date()) * per_day
            grid.now_style = (
                grid.place(minute // step, first_column, 1, per_day)
                + f" margin-top: calc({(minute % step) / step:.3f} * 1.75rem);"
            )
    for column in grid.columns:
        column.head_style = f"grid-row: {grid.head_rows}; grid-column: {2 + column.index};"
        column.working_styles = [
            grid.place(start, column.index, end - start) for start, end in column.working
        ]
        column.time_off = [
            (row, rows, reason, grid.place(row, column.index, rows))
            for row, rows, reason, _style in column.time_off
        ]
        for block in column.blocks:
            block.style = grid.place(block.row, column.index, block.span)
        for cell in column.free:
            cell.style = grid.place(cell.row, column.index)
    return grid


def _hhmm(instant: datetime, tz: Any) -> str:
    return instant.astimezone(tz).strftime("%H:%M")
