"""The one way money, dates and times are written for people, in the active language: the
admin, the dashboard, customers' messages (SMS and email), the customer pages and the tools'
messages all call these, so one total or one day reads the same everywhere.

Money is Babel's (CLDR's currency pattern for the language: "1077,23 €" in Spanish, "€1,077.23"
in English). Dates and times are Django's, from the formats of config/formats/<language>, which
also write the admin's form widgets: "05/12/2026", "05/12/2026 22:54", "22:54" in Spanish;
"2026-12-05", "2026-12-05 22:54", "22:54" in English. Exports write typed cells instead
(core.admin.export); the tools' structured output keeps ISO 8601 for the machine.
"""

from datetime import date, datetime, time
from decimal import Decimal
from zoneinfo import ZoneInfo

from babel.core import UnknownLocaleError
from babel.numbers import format_currency
from django.conf import settings
from django.utils import formats, timezone, translation

EMPTY = "—"


def _babel_locale(language: str | None = None) -> str:
    return translation.to_locale(language or translation.get_language() or settings.LANGUAGE_CODE)


def money_shown(amount: Decimal | int | None, currency: str, language: str | None = None) -> str:
    """`amount` of `currency` as the language writes it, with the currency's own decimals
    (callers round first: sales.money.quantize). None is a dash."""
    if amount is None:
        return EMPTY
    code = currency.upper()
    try:
        return format_currency(Decimal(amount), code, locale=_babel_locale(language))
    except (UnknownLocaleError, ValueError):
        return f"{Decimal(amount)} {code}"


def _local(instant: datetime, tz: ZoneInfo | None) -> datetime:
    if timezone.is_naive(instant):
        return instant
    return instant.astimezone(tz) if tz is not None else timezone.localtime(instant)


def date_shown(day: date | datetime | None, tz: ZoneInfo | None = None) -> str:
    """The day ("05/12/2026"); an instant's day in `tz` (else the current zone)."""
    if day is None:
        return EMPTY
    if isinstance(day, datetime):
        day = _local(day, tz).date()
    return formats.date_format(day, "SHORT_DATE_FORMAT")


def time_shown(moment: time | datetime | None, tz: ZoneInfo | None = None) -> str:
    """The time of day ("22:54"); an instant's in `tz` (else the current zone)."""
    if moment is None:
        return EMPTY
    if isinstance(moment, datetime):
        moment = _local(moment, tz)
    return formats.time_format(moment, "TIME_FORMAT")


def datetime_shown(
    instant: datetime | None,
    tz: ZoneInfo | None = None,
    zone: bool = False,
    seconds: bool = False,
) -> str:
    """The instant in `tz` (else the current zone): "05/12/2026 22:54"; with `zone` the
    zone's abbreviation after it, for a page whose rows are in several zones; with `seconds`
    the seconds too ("22:54:07"), for logs read to the second."""
    if instant is None:
        return EMPTY
    local = _local(instant, tz)
    shown = formats.date_format(local, "SHORT_DATETIME_FORMAT")
    if seconds:
        shown = shown.replace(formats.time_format(local, "TIME_FORMAT"), f"{local:%H:%M:%S}", 1)
    return f"{shown} {local.tzname()}" if zone and local.tzinfo is not None else shown


def weekday_shown(day: date | datetime, tz: ZoneInfo | None = None) -> str:
    """The weekday's name ("sábado"), for a day a person is to come or be called."""
    if isinstance(day, datetime):
        day = _local(day, tz).date()
    return formats.date_format(day, "l")


def day_shown(day: date | datetime, tz: ZoneInfo | None = None) -> str:
    """The weekday and the date ("sábado 05/12/2026")."""
    return f"{weekday_shown(day, tz)} {date_shown(day, tz)}"
