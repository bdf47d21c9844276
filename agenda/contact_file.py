"""The agenda's sections of the customer's file (core.contact_file): their appointments, the
next ones first, and the messages they were sent about them."""

from datetime import datetime

from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from agenda.models import Appointment
from agenda.selectors import contact_appointment_messages_file, contact_appointments_file
from core.contact_file import FileRow, FileSection, by_contact, contact_file_section, shown_at
from core.models import Contact


@contact_file_section(position=10, visible_with=Appointment)
def appointments(contact: Contact, now: datetime, limit: int) -> FileSection:
    found = contact_appointments_file(contact=contact, now=now, limit=limit)

    def row(appointment: Appointment, group: str) -> FileRow:
        return FileRow(
            appointment,
            [
                appointment.reference,
                shown_at(appointment.starts_at, contact),
                appointment.service.name,
                appointment.professional.display_name,
                appointment.get_state_display(),
            ],
            group=group,
        )

    upcoming, past = _("Upcoming"), _("Past or cancelled")
    return FileSection(
        key="appointments",
        title=_("Appointments"),
        total=found.total,
        note=ngettext("%(n)d upcoming", "%(n)d upcoming", found.upcoming_total)
        % {"n": found.upcoming_total},
        columns=[_("reference"), _("starts"), _("service"), _("professional"), _("state")],
        rows=[row(a, upcoming) for a in found.upcoming] + [row(a, past) for a in found.past],
        empty=_("No appointments yet."),
        list_model=Appointment,
        list_query=by_contact(contact),
        add_model=Appointment,
        add_label=_("Book"),
    )


@contact_file_section(position=70, visible_with=Appointment)
def appointment_messages(contact: Contact, now: datetime, limit: int) -> FileSection:
    """Whoever may see the appointments may see what their customer was sent about them (as on
    the appointment's own page); they have no list of their own, so each row links to its
    appointment."""
    total, latest = contact_appointment_messages_file(contact=contact, limit=limit)
    return FileSection(
        key="appointment_messages",
        title=_("Appointment messages"),
        total=total,
        columns=[_("appointment"), _("message"), _("sent to"), _("status"), _("sent")],
        rows=[
            FileRow(
                m.appointment,
                [
                    m.appointment.reference,
                    m.get_kind_display(),
                    f"{m.get_channel_display()} {m.masked_destination}".strip(),
                    m.get_status_display(),
                    shown_at(m.sent_at, contact),
                ],
            )
            for m in latest
        ],
        empty=_("No message about an appointment was sent to this contact."),
    )
