"""What every appointment transition checks first: its row lock, its owner, its state, and the
customer's cut-off or the start an attendance waits for.

Each check raises the refusal the customer or staff are told, and none writes: a transition
(agenda.services) calls them, in this order, holding the row lock, before it changes anything.
"""

from datetime import datetime, timedelta

from django.db.models import Subquery
from django.utils.functional import Promise
from django.utils.translation import gettext as _g
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from agenda.models import CUSTOMER_STATE_LABELS, AgendaSettings, Appointment
from agenda.selectors import agenda_settings_for
from core.errors import NotFound, ValidationFailed
from core.identity import check_owner
from core.models import Company, Contact
from core.references import normalize_reference
from core.states import state_shown

APPOINTMENT_TERMINAL_MESSAGES: dict[str, Promise] = {
    Appointment.State.CANCELLED: _("Esa cita ya está cancelada."),
    Appointment.State.ATTENDED: _("Esa cita ya fue atendida."),
    Appointment.State.NO_SHOW: _("Esa cita ya pasó y quedó registrada como no asistida."),
}


def appointment_lock(company: Company, reference: str, *, with_cutoff: bool = False) -> Appointment:
    """The company's appointment with this reference, row-locked until the transaction ends,
    read with its service, professional and contact (only the appointment's row is locked) and, with
    `with_cutoff`, the company's cancellation cut-off (as `cutoff_minutes`)."""
    appointments = (
        Appointment.objects.select_for_update(of=("self",))
        .select_related("service", "professional", "contact")
        .filter(company=company, reference=normalize_reference(reference))
    )
    if with_cutoff:
        cutoff = AgendaSettings.objects.filter(company=company).values(
            "cancellation_cutoff_minutes"
        )
        appointments = appointments.annotate(cutoff_minutes=Subquery(cutoff[:1]))
    appointment = appointments.first()
    if appointment is None:
        # Waiting for the lock of a row a concurrent move gave another professional, the
        # statement rechecks the new row against the professional it joined before the wait
        # (READ COMMITTED rereads only the locked rows), and drops it. A second read, after
        # that move committed, joins the appointment as it stands.
        appointment = appointments.first()
    if appointment is None:
        raise NotFound(_("No encontré esa cita."), code="appointment_not_found")
    appointment.company = company
    return appointment


def appointment_check_owner(contact: Contact | None, appointment: Appointment) -> None:
    """Customers act only on their own appointments; staff (contact=None) on any."""
    if contact is not None:
        check_owner(contact=contact, owner_id=appointment.contact_id)


def appointment_check_scheduled(appointment: Appointment) -> None:
    """A terminal appointment accepts no transition: VALIDATION carrying its state (the
    machine value and the customer's label)."""
    if appointment.is_terminal:
        raise ValidationFailed(
            APPOINTMENT_TERMINAL_MESSAGES[appointment.state],
            code="invalid_transition",
            **state_shown(appointment.state, CUSTOMER_STATE_LABELS),
        )


def appointment_check_cutoff(appointment: Appointment, now: datetime, action: str) -> None:
    """Call with an appointment read by `appointment_lock(..., with_cutoff=True)`."""
    cutoff_minutes = appointment.cutoff_minutes
    if cutoff_minutes is None:  # the settings row is still to be created
        settings = agenda_settings_for(company=appointment.company)
        cutoff_minutes = settings.cancellation_cutoff_minutes
    cutoff = timedelta(minutes=cutoff_minutes)
    if now >= appointment.starts_at - cutoff:
        hours, minutes = divmod(int(cutoff.total_seconds()) // 60, 60)
        span = (
            _g("%(h)d h %(m)02d min") % {"h": hours, "m": minutes}
            if hours
            else ngettext("%(m)d minuto", "%(m)d minutos", minutes) % {"m": minutes}
        )
        message = {
            "cancel": _g(
                "Ya no es posible cancelar esta cita por este medio: debe hacerse con al menos "
                "%(span)s de antelación. Comuníquese con nosotros directamente."
            ),
            "reschedule": _g(
                "Ya no es posible cambiar esta cita por este medio: debe hacerse con al menos "
                "%(span)s de antelación. Comuníquese con nosotros directamente."
            ),
        }[action] % {"span": span}
        raise ValidationFailed(message, code="cutoff_passed")


def appointment_check_started(appointment: Appointment, now: datetime) -> None:
    """Attendance (or its absence) is recorded only once the appointment has started."""
    if now < appointment.starts_at:
        raise ValidationFailed(
            _("Esa cita todavía no ha comenzado."), code="appointment_not_started"
        )
