"""Agenda models: services, professionals, their schedules, and appointments with guarded states."""

from collections.abc import Iterable
from datetime import time, timedelta
from typing import Any

from django.contrib.postgres.constraints import ExclusionConstraint
from django.contrib.postgres.fields import DateTimeRangeField, RangeBoundary, RangeOperators
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models, router, transaction
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy
from django_fsm import FSMField, FSMModelMixin, transition
from django_fsm_log.decorators import fsm_log_by, fsm_log_description

from core.l10n import datetime_shown
from core.models import BearerCredential, Company, Contact, Conversation
from core.models.messages import CustomerMessage

# Upper bounds that keep one appointment (duration plus buffers) well under a day, so a window
# query can bound its index range scan (MAX_BLOCKED_SPAN).
MAX_DURATION_MINUTES = 720
MAX_BUFFER_MINUTES = 240
# Longer than any appointment's blocked range can be (checked by Service's constraints), so
# "blocked_from >= window start - MAX_BLOCKED_SPAN" bounds the index scan from below.
MAX_BLOCKED_SPAN = timedelta(minutes=MAX_DURATION_MINUTES + 2 * MAX_BUFFER_MINUTES)
# How far ahead of an appointment its reminder may be set (AgendaSettings.reminder_hours_before).
MAX_REMINDER_HOURS = 720
# An appointment's staff notes, at most (Appointment.notes).
NOTES_MAX_LENGTH = 2000


class Service(models.Model):
    """Something a customer can book: a duration plus buffers kept free around it."""

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="services", verbose_name=_("company")
    )
    name = models.CharField(_("name"), max_length=150)
    description = models.CharField(_("description"), max_length=300, blank=True)
    duration_minutes = models.PositiveSmallIntegerField(_("duration (minutes)"), default=30)
    buffer_before_minutes = models.PositiveSmallIntegerField(
        _("buffer before (minutes)"), default=0
    )
    buffer_after_minutes = models.PositiveSmallIntegerField(_("buffer after (minutes)"), default=0)
    active = models.BooleanField(_("active"), default=True)

    class Meta:
        verbose_name = _("service")
        verbose_name_plural = _("services")
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["company", "name"], name="unique_service_name"),
            models.CheckConstraint(
                condition=Q(duration_minutes__gte=5, duration_minutes__lte=MAX_DURATION_MINUTES),
                name="service_duration_range",
                violation_error_message=_("The duration must be between 5 and 720 minutes."),
            ),
            models.CheckConstraint(
                condition=Q(
                    buffer_before_minutes__lte=MAX_BUFFER_MINUTES,
                    buffer_after_minutes__lte=MAX_BUFFER_MINUTES,
                ),
                name="service_buffer_range",
                violation_error_message=_("Buffers are at most 240 minutes."),
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Professional(models.Model):
    """Someone who gives services; customers see only `display_name`."""

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="professionals", verbose_name=_("company")
    )
    display_name = models.CharField(
        _("name shown to customers"), max_length=100, help_text=_("For example: Ana, Dr. Ruiz.")
    )
    services = models.ManyToManyField(
        Service, related_name="professionals", blank=True, verbose_name=_("services given")
    )
    active = models.BooleanField(_("active"), default=True)

    class Meta:
        verbose_name = _("professional")
        verbose_name_plural = _("professionals")
        ordering = ["display_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["company", "display_name"], name="unique_professional_name"
            ),
        ]

    def __str__(self) -> str:
        return self.display_name


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


class AgendaSettings(models.Model):
    """A company's booking rules; created with these defaults the first time they are needed."""

    company = models.OneToOneField(
        Company, on_delete=models.CASCADE, related_name="agenda_settings", verbose_name=_("company")
    )
    minimum_notice_minutes = models.PositiveIntegerField(
        _("minimum notice (minutes)"),
        default=60,
        help_text=_("Customers cannot book a slot starting sooner than this."),
    )
    booking_horizon_days = models.PositiveSmallIntegerField(
        _("booking horizon (days)"),
        default=60,
        help_text=_("Customers cannot book further ahead than this."),
    )
    slot_step_minutes = models.PositiveSmallIntegerField(
        _("slot step (minutes)"), default=15, help_text=_("Distance between offered start times.")
    )
    cancellation_cutoff_minutes = models.PositiveIntegerField(
        _("cancellation cut-off (minutes)"),
        default=120,
        help_text=_(
            "Customers cannot cancel or reschedule through the agent later than this before "
            "the start. Staff can."
        ),
    )
    auto_no_show = models.BooleanField(
        _("mark no-shows automatically"),
        default=False,
        help_text=_("Appointments still scheduled after their end plus the grace become no-show."),
    )
    no_show_grace_minutes = models.PositiveIntegerField(_("no-show grace (minutes)"), default=60)
    reminder_hours_before = models.IntegerField(
        _("reminder (hours before)"),
        default=24,
        validators=[
            MinValueValidator(
                1, message=_("The reminder must be at least one hour before the appointment.")
            ),
            MaxValueValidator(
                MAX_REMINDER_HOURS,
                message=_("The reminder must be at most 720 hours (30 days) before."),
            ),
        ],
        help_text=_(
            "Customers get a reminder this many hours before their appointment (1 to 720). "
            "An appointment booked later than that gets only its confirmation."
        ),
    )
    # A feed's URL ends up in calendar apps and on phones that others may see; customers'
    # contact details leave Garante through it only when the company says so.
    feed_shows_contact_details = models.BooleanField(
        _("calendar feeds show customers' phone and email"),
        default=False,
        help_text=_(
            "Off: a calendar feed's events name the customer by first name only. On: they "
            "also carry the customer's phone and email."
        ),
    )

    class Meta:
        verbose_name = _("agenda settings")
        verbose_name_plural = _("agenda settings")
        constraints = [
            models.CheckConstraint(
                condition=Q(slot_step_minutes__gte=5, slot_step_minutes__lte=240),
                name="agenda_slot_step_range",
                violation_error_message=_("The slot step must be between 5 and 240 minutes."),
            ),
            models.CheckConstraint(
                condition=Q(booking_horizon_days__gte=1, booking_horizon_days__lte=730),
                name="agenda_horizon_range",
                violation_error_message=_("The horizon must be between 1 and 730 days."),
            ),
            # Zero or less would remind at or after the start: refused here too, for any
            # write that skips the form's validators.
            models.CheckConstraint(
                condition=Q(reminder_hours_before__gte=1)
                & Q(reminder_hours_before__lte=MAX_REMINDER_HOURS),
                name="agenda_reminder_hours_range",
                violation_error_code="reminder_hours_range",
                violation_error_message=_(
                    "The reminder must be between 1 and 720 hours before the appointment."
                ),
            ),
        ]

    def __str__(self) -> str:
        return str(self.company)


# How a state reads to a customer (Spanish source strings, like every user_message).
CUSTOMER_STATE_LABELS = {
    "scheduled": _("agendada"),
    "cancelled": _("cancelada"),
    "attended": _("atendida"),
    "no_show": _("no asistida"),
}


class TsTzRange(models.Func):
    """PostgreSQL's tstzrange(lower, upper, bounds) as an expression."""

    function = "TSTZRANGE"
    output_field = DateTimeRangeField()


class PostgresExclusionConstraint(ExclusionConstraint):
    """An exclusion constraint that exists only on PostgreSQL.

    SQLite (the one-command demo) has no GiST; there the booking transaction, which begins
    IMMEDIATE, serialises writers instead. Returning no SQL makes the schema editor skip it.
    """

    def constraint_sql(self, model: Any, schema_editor: Any) -> Any:
        if schema_editor.connection.vendor != "postgresql":
            return None
        return super().constraint_sql(model, schema_editor)

    def create_sql(self, model: Any, schema_editor: Any) -> Any:
        if schema_editor.connection.vendor != "postgresql":
            return None
        return super().create_sql(model, schema_editor)

    def remove_sql(self, model: Any, schema_editor: Any) -> Any:
        if schema_editor.connection.vendor != "postgresql":
            return None
        return super().remove_sql(model, schema_editor)

    def validate(self, model: Any, instance: Any, exclude: Any = None, using: str = "default"):
        from django.db import connections

        if connections[using].vendor != "postgresql":
            return
        super().validate(model, instance, exclude=exclude, using=using)


class Appointment(FSMModelMixin, models.Model):
    """A booked service. Its state changes only through the transitions below, called by
    agenda.services inside a transaction after locking the row."""

    class State(models.TextChoices):
        SCHEDULED = "scheduled", _("Scheduled")
        CANCELLED = "cancelled", _("Cancelled")
        ATTENDED = "attended", _("Attended")
        NO_SHOW = "no_show", _("No-show")

    class Via(models.TextChoices):
        GATEWAY = "gateway", _("Conversational agent")
        STAFF = "staff", _("Staff")
        INTEGRATION = "integration", _("Integration")

    TERMINAL_STATES = frozenset({State.CANCELLED, State.ATTENDED, State.NO_SHOW})

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="appointments", verbose_name=_("company")
    )
    reference = models.CharField(_("reference"), max_length=16, editable=False)
    contact = models.ForeignKey(
        Contact, on_delete=models.PROTECT, related_name="appointments", verbose_name=_("contact")
    )
    service = models.ForeignKey(
        Service, on_delete=models.PROTECT, related_name="appointments", verbose_name=_("service")
    )
    professional = models.ForeignKey(
        Professional,
        on_delete=models.PROTECT,
        related_name="appointments",
        verbose_name=_("professional"),
    )
    starts_at = models.DateTimeField(_("starts at"))
    ends_at = models.DateTimeField(_("ends at"))
    # The professional's time this appointment takes, buffers included: what overlaps forbid.
    blocked_from = models.DateTimeField(_("blocked from"), editable=False)
    blocked_until = models.DateTimeField(_("blocked until"), editable=False)
    state = FSMField(_("state"), default=State.SCHEDULED, choices=State.choices, protected=True)
    created_via = models.CharField(_("created via"), max_length=16, choices=Via.choices)
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="appointments",
        verbose_name=_("conversation"),
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)
    # Calendar clients replace a subscribed event only when its SEQUENCE grows (RFC 5545
    # 3.8.7.4): the transitions that move or cancel it bump this.
    sequence = models.PositiveIntegerField(_("revision"), default=0, editable=False)
    # Staff's own words about the appointment: never shown or sent to the customer.
    notes = models.TextField(
        _("notes"),
        blank=True,
        max_length=NOTES_MAX_LENGTH,
        help_text=_("For staff only: the customer never sees them."),
    )

    class Meta:
        verbose_name = _("appointment")
        verbose_name_plural = _("appointments")
        ordering = ["starts_at"]
        indexes = [
            # Slot searches read one professional's window: a range scan on this index.
            models.Index(fields=["professional", "blocked_from"], name="appt_prof_blocked_from"),
            models.Index(fields=["contact", "starts_at"], name="appt_contact_start"),
            models.Index(fields=["state", "ends_at"], name="appt_state_end"),
            # The staff's list, newest first, and its date hierarchy's first and last day.
            models.Index(fields=["starts_at"], name="appt_start"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["company", "reference"], name="unique_appointment_ref"),
            models.CheckConstraint(
                condition=Q(ends_at__gt=models.F("starts_at")), name="appointment_end_after_start"
            ),
            PostgresExclusionConstraint(
                name="appointment_no_overlap",
                expressions=[
                    (
                        TsTzRange("blocked_from", "blocked_until", RangeBoundary()),
                        RangeOperators.OVERLAPS,
                    ),
                    ("professional", RangeOperators.EQUAL),
                ],
                condition=Q(state="scheduled"),
            ),
        ]

    def __str__(self) -> str:
        return self.reference

    @property
    def is_terminal(self) -> bool:
        return self.state in self.TERMINAL_STATES

    # Transitions: only agenda.services calls them. `by` and `description` feed the
    # django-fsm-log history.

    @fsm_log_by
    @fsm_log_description
    @transition(
        field=state,
        source=State.SCHEDULED,
        target=State.CANCELLED,
        custom={"label": _("Cancel")},
    )
    def cancel(self, *, by: Any = None, description: str | None = None) -> None:
        self.sequence += 1

    @fsm_log_by
    @fsm_log_description
    @transition(
        field=state,
        source=State.SCHEDULED,
        target=State.ATTENDED,
        custom={"label": _("Mark attended")},
    )
    def mark_attended(self, *, by: Any = None, description: str | None = None) -> None:
        pass

    @fsm_log_by
    @fsm_log_description
    @transition(
        field=state,
        source=State.SCHEDULED,
        target=State.NO_SHOW,
        custom={"label": _("Mark no-show")},
    )
    def mark_no_show(self, *, by: Any = None, description: str | None = None) -> None:
        pass

    @fsm_log_by
    @fsm_log_description
    @transition(
        field=state,
        source=State.SCHEDULED,
        target=State.SCHEDULED,
        custom={"label": _("Reschedule")},
    )
    def reschedule(
        self,
        *,
        professional: Professional,
        starts_at: Any,
        ends_at: Any,
        blocked_from: Any,
        blocked_until: Any,
        by: Any = None,
        description: str | None = None,
    ) -> None:
        self.professional = professional
        self.starts_at = starts_at
        self.ends_at = ends_at
        self.blocked_from = blocked_from
        self.blocked_until = blocked_until
        self.sequence += 1


class Calendar(Appointment):
    """The team's calendar in the admin's menu (agenda.admin.calendar): a proxy of the
    appointments, so that the admin lists it beside them and its pages live under
    /admin/agenda/calendar/; it has no rows or rules of its own."""

    class Meta:
        proxy = True
        verbose_name = _("calendar")
        verbose_name_plural = _("calendar")


class AppointmentMessage(CustomerMessage):
    """One message to the customer about an appointment: the confirmation of a booking, a
    move or a cancellation, or the reminder before it (agenda.appointment_messages).

    Written by agenda.services in the transaction of the change it tells of, and sent by a
    Celery task after that commit. `status` is the message's life: a reminder waits
    `scheduled` until it is due; then `queued` -> `sending` -> `sent`, or `retrying` in
    between, or `failed`; `not_sent` when it no longer applies (the appointment cancelled or
    moved, the customer opted out of its channel) and `unknown` when its worker stopped while
    sending. A worker claims `queued`/`retrying` with a conditional UPDATE, so no message is
    handed to the provider twice, whatever the number of workers or copies of its task.
    """

    class Kind(models.TextChoices):
        BOOKED = "booked", _("Booking confirmation")
        MOVED = "moved", _("Change confirmation")
        CANCELLED = "cancelled", _("Cancellation confirmation")
        REMINDER = "reminder", _("Reminder")

    class Status(models.TextChoices):
        SCHEDULED = "scheduled", _("Scheduled")
        QUEUED = "queued", _("Queued")
        SENDING = "sending", _("Sending")
        RETRYING = "retrying", _("Retrying")
        SENT = "sent", _("Sent")
        FAILED = "failed", _("Failed")
        NOT_SENT = "not_sent", _("Not sent")
        UNKNOWN = "unknown", _("Unknown (stopped while sending)")

    # Still to be sent or being sent: what the sweep reads.
    OPEN_STATUSES = ("scheduled", "queued", "retrying", "sending")

    company = models.ForeignKey(
        Company,
        on_delete=models.CASCADE,
        related_name="appointment_messages",
        verbose_name=_("company"),
    )
    appointment = models.ForeignKey(
        Appointment,
        on_delete=models.CASCADE,
        related_name="messages",
        verbose_name=_("appointment"),
    )
    kind = models.CharField(_("message"), max_length=16, choices=Kind.choices)
    # The start the message tells of: a reminder or a confirmation is for this time only.
    starts_at = models.DateTimeField(_("for the appointment at"))
    due_at = models.DateTimeField(_("due"))
    status = models.CharField(
        _("status"), max_length=16, choices=Status.choices, default=Status.QUEUED
    )
    # The opaque key of the message's opt-out link (agenda.opt_out), drawn when the message is
    # first claimed for sending, and when the link stops working.
    opt_out_key = models.CharField(
        _("opt-out link key"), max_length=32, unique=True, null=True, blank=True, editable=False
    )
    opt_out_until = models.DateTimeField(_("opt-out link valid until"), null=True, blank=True)
    # The key of its manage-my-booking link (agenda.manage_links), drawn with the opt-out key.
    manage_key = models.CharField(
        _("manage link key"), max_length=32, unique=True, null=True, blank=True, editable=False
    )

    class Meta:
        verbose_name = _("appointment message")
        verbose_name_plural = _("appointment messages")
        ordering = ["created_at", "pk"]
        indexes = [
            # The sweep's: the messages still open, few whatever the table's size.
            models.Index(
                fields=["due_at"],
                name="appt_message_open",
                condition=Q(status__in=["scheduled", "queued", "retrying", "sending"]),
            ),
        ]
        constraints = [
            # One reminder waiting per appointment: a move drops the old one first (one being
            # sent at that instant is left to finish).
            models.UniqueConstraint(
                fields=["appointment"],
                condition=Q(kind="reminder", status__in=["scheduled", "queued", "retrying"]),
                name="one_open_reminder_per_appointment",
            ),
        ]


class CalendarFeed(BearerCredential):
    """A secret calendar (ICS) URL for one professional's appointments, or for the whole
    company's when `professional` is empty (agenda.feeds). Its token is the URL's only
    credential: shown once, stored hashed, regenerated or revoked in the admin through
    core.credentials, like any bearer credential."""

    company = models.ForeignKey(
        Company,
        on_delete=models.CASCADE,
        related_name="calendar_feeds",
        verbose_name=_("company"),
    )
    professional = models.ForeignKey(
        Professional,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="calendar_feeds",
        verbose_name=_("professional"),
        help_text=_("Empty: every professional of the company."),
    )

    TOKEN_PREFIX = "cal_"
    ISSUE_FIELDS = ("professional",)

    class Meta:
        verbose_name = _("calendar feed")
        verbose_name_plural = _("calendar feeds")
