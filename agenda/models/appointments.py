"""Appointments with guarded states, and the team calendar's proxy of them."""

from typing import Any

from django.contrib.postgres.constraints import ExclusionConstraint
from django.contrib.postgres.fields import DateTimeRangeField, RangeBoundary, RangeOperators
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _
from django_fsm import FSMField, FSMModelMixin, transition
from django_fsm_log.decorators import fsm_log_by, fsm_log_description

from agenda.models.catalogue import NOTES_MAX_LENGTH, Professional, Service
from core.models import Company, Contact, Conversation

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
