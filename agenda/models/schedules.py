"""A professional's weekly working hours and time off, and the lock every schedule change takes."""

from collections.abc import Iterable
from datetime import time
from typing import Any

from django.db import models, router, transaction
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy

from agenda.models.catalogue import Professional
from core.l10n import datetime_shown


class Weekday(models.IntegerChoices):
    """Python's numbering (date.weekday()): Monday is 0."""

    MONDAY = 0, _("Monday")
    TUESDAY = 1, _("Tuesday")
    WEDNESDAY = 2, _("Wednesday")
    THURSDAY = 3, _("Thursday")
    FRIDAY = 4, _("Friday")
    SATURDAY = 5, _("Saturday")
    SUNDAY = 6, _("Sunday")


def lock_schedules(professional_ids: Iterable[int], *, using: str = "default") -> None:
    """Lock these professionals' rows (FOR NO KEY UPDATE, which foreign keys to them do not wait
    for) until the transaction ends, in the order of their keys.

    A professional's schedule (weekly hours, time off, the services given) and their bookings
    meet here: every change to a schedule takes this lock before it writes, and a booking
    takes it before it reads the schedule (`availability.check.slot_facts`), so a booking
    decides on the schedule as it is once any change in flight has committed, never on the one
    before it.
    On SQLite, whose write transactions run one at a time, the lock is a no-op and not needed.
    Call inside a transaction."""
    ids = sorted(set(professional_ids))
    if ids:
        locked = Professional.objects.using(using).select_for_update(no_key=True)
        list(locked.filter(pk__in=ids).order_by("pk").values_list("pk", flat=True))


class ScheduleEntry(models.Model):
    """A row of a professional's schedule: saving or deleting one locks the professional first,
    in the same transaction (`lock_schedules`). Bulk writes (`QuerySet.update`,
    `bulk_create`, `QuerySet.delete`) bypass it, as they bypass every `save`: the admin's forms
    and the services save rows one by one (the admin's bulk delete of time off only frees
    time, which no booking can be wrong about)."""

    professional_id: int

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        using = kwargs.get("using") or router.db_for_write(type(self), instance=self)
        with transaction.atomic(using=using, savepoint=False):
            lock_schedules([self.professional_id], using=using)
            super().save(*args, **kwargs)

    def delete(self, using: str | None = None, keep_parents: bool = False) -> tuple[int, dict]:
        using = using or router.db_for_write(type(self), instance=self)
        with transaction.atomic(using=using, savepoint=False):
            lock_schedules([self.professional_id], using=using)
            return super().delete(using=using, keep_parents=keep_parents)


# An interval's end at 00:00 is the end of its day, 24:00: a TimeField cannot hold 24:00, and
# an interval ending at the start of its own day would be empty, so the value is free to mean
# it. Every reader turns it into the next day's midnight (`availability.busy.working_intervals`).
END_OF_DAY = time(0)


class WorkingHours(ScheduleEntry):
    """One weekly working interval, in the company's local time (several per day allowed). It
    may end at 24:00, stored as 00:00 (`END_OF_DAY`)."""

    professional = models.ForeignKey(
        Professional,
        on_delete=models.CASCADE,
        related_name="working_hours",
        verbose_name=_("professional"),
    )
    weekday = models.PositiveSmallIntegerField(_("weekday"), choices=Weekday.choices)
    start_time = models.TimeField(_("from"))
    end_time = models.TimeField(_("until"), help_text=_("00:00 is the end of the day (24:00)."))

    class Meta:
        verbose_name = _("working hours")
        verbose_name_plural = _("working hours")
        ordering = ["weekday", "start_time"]
        constraints = [
            models.CheckConstraint(
                condition=Q(end_time__gt=models.F("start_time")) | Q(end_time=END_OF_DAY),
                name="working_hours_end_after_start",
                violation_error_message=_("The interval must end after it starts."),
            ),
            models.CheckConstraint(condition=Q(weekday__lte=6), name="working_hours_weekday_range"),
        ]

    def __str__(self) -> str:
        end = "24:00" if self.end_time == END_OF_DAY else f"{self.end_time:%H:%M}"
        return f"{self.get_weekday_display()} {self.start_time:%H:%M}-{end}"


class TimeOff(ScheduleEntry):
    """A period a professional is not available (holidays, sick leave, a meeting)."""

    professional = models.ForeignKey(
        Professional,
        on_delete=models.CASCADE,
        related_name="time_off",
        verbose_name=_("professional"),
    )
    starts_at = models.DateTimeField(_("from"))
    ends_at = models.DateTimeField(_("until"))
    reason = models.CharField(_("reason"), max_length=200, blank=True)

    class Meta:
        verbose_name = _("time off")
        # The same English words name one and several, so the plural has a context of its own
        # for languages that tell them apart ("Ausencias").
        verbose_name_plural = pgettext_lazy("plural", "time off")
        ordering = ["starts_at"]
        indexes = [models.Index(fields=["professional", "ends_at"], name="timeoff_prof_end")]
        constraints = [
            models.CheckConstraint(
                condition=Q(ends_at__gt=models.F("starts_at")),
                name="time_off_end_after_start",
                violation_error_message=_("Time off must end after it starts."),
            ),
        ]

    def __str__(self) -> str:
        tz = self.professional.company.tz
        starts, ends = datetime_shown(self.starts_at, tz), datetime_shown(self.ends_at, tz)
        return f"{self.professional}: {starts} - {ends}"
