"""Instants in a company's local time: labels, descriptions, and local wall-clock times."""

from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.utils import formats

from core.l10n import date_shown


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


def in_words(described: dict) -> dict:
    """A description (`describe_instant`) as a sentence to a customer writes it: its ISO date,
    for the machine, in the language's one date shape (core.l10n: "08/12/2026")."""
    return {**described, "date": date_shown(date.fromisoformat(described["date"]))}


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
