"""Loose date inputs and the window a slot search covers, decided here, not by the agent."""

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.utils.translation import gettext as _g
from django.utils.translation import gettext_lazy as _

from agenda.availability.local_time import local_instant
from agenda.selectors import fold_text
from core.errors import ValidationFailed
from core.models import Company

MAX_SEARCH_DAYS = 31
DEFAULT_SEARCH_DAYS = 14

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
