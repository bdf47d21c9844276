"""Staff admin for the agenda: catalogue, professionals with their hours and time off, the agenda
pages, and appointments whose transition buttons go through agenda.services.

Django's autodiscovery imports this package: importing the modules below registers their admins.
"""

from agenda.admin.appointments import AppointmentAdmin
from agenda.admin.calendar import CalendarAdmin
from agenda.admin.catalog import AgendaSettingsAdmin, ProfessionalAdmin, ServiceAdmin, TimeOffAdmin
from agenda.admin.feeds import CalendarFeedAdmin

__all__ = [
    "AgendaSettingsAdmin",
    "AppointmentAdmin",
    "CalendarAdmin",
    "CalendarFeedAdmin",
    "ProfessionalAdmin",
    "ServiceAdmin",
    "TimeOffAdmin",
]
