"""Agenda models: services, professionals, their schedules, and appointments with guarded
states. One module per topic; every model is importable from here."""

from agenda.models.appointments import (
    CUSTOMER_STATE_LABELS,
    Appointment,
    Calendar,
    PostgresExclusionConstraint,
    TsTzRange,
)
from agenda.models.catalogue import (
    MAX_BLOCKED_SPAN,
    MAX_BUFFER_MINUTES,
    MAX_DURATION_MINUTES,
    MAX_REMINDER_HOURS,
    NOTES_MAX_LENGTH,
    Professional,
    Service,
)
from agenda.models.feeds import CalendarFeed
from agenda.models.messages import AppointmentMessage
from agenda.models.preferences import AgendaSettings
from agenda.models.schedules import (
    END_OF_DAY,
    ScheduleEntry,
    TimeOff,
    Weekday,
    WorkingHours,
    lock_schedules,
)

__all__ = [
    "CUSTOMER_STATE_LABELS",
    "END_OF_DAY",
    "MAX_BLOCKED_SPAN",
    "MAX_BUFFER_MINUTES",
    "MAX_DURATION_MINUTES",
    "MAX_REMINDER_HOURS",
    "NOTES_MAX_LENGTH",
    "AgendaSettings",
    "Appointment",
    "AppointmentMessage",
    "Calendar",
    "CalendarFeed",
    "PostgresExclusionConstraint",
    "Professional",
    "ScheduleEntry",
    "Service",
    "TimeOff",
    "TsTzRange",
    "Weekday",
    "WorkingHours",
    "lock_schedules",
]
