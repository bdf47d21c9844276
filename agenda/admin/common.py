"""What the agenda's admin pages share: local times read and shown in the company's zone."""

from datetime import date, datetime, time
from zoneinfo import ZoneInfo

from django import forms
from django.utils.translation import gettext_lazy as _

from agenda.availability.local_time import local_instant
from core.l10n import date_shown, datetime_shown, time_shown
from core.models import Company


def local_shown(instant: datetime, company: Company) -> str:
    return datetime_shown(instant, company.tz)


def local_start(form: forms.Form, day: date, at: time, tz: ZoneInfo) -> datetime | None:
    """The instant of a local date and time typed by staff, read as every other path reads it
    (`local_instant`); a time that does not exist that day (the spring-forward gap) is a form
    error on `at` rather than silently another hour. A repeated autumn time is its first."""
    starts_at = local_instant(day, at, tz)
    if starts_at.astimezone(tz).replace(tzinfo=None) != datetime.combine(day, at):
        form.add_error(
            "at",
            _(
                "%(time)s does not exist on %(day)s in the company's time zone: the clocks go "
                "forward then. Choose another time."
            )
            % {"time": time_shown(at), "day": date_shown(day)},
        )
        return None
    return starts_at
