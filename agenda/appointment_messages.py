"""Messages to customers about their appointments: confirmations and reminders.

agenda.services calls `appointment_messages_after` in the transaction of every booking, move
and cancellation, whoever makes it (the agent's tools, staff in the admin, the integration
API): the confirmation (and, for a booking or a move, the reminder) is written there as an
`AppointmentMessage`, and the confirmation's task is published once that transaction commits.
A move or a cancellation drops, in the same transaction, whatever of the appointment's
earlier messages had not left yet (the reminder for the old time, a confirmation of it).

A reminder waits `scheduled` until `reminder_hours_before` (AgendaSettings) before the start;
the beat sweep (`appointment_messages_sweep`) queues it then, claiming it with a conditional
UPDATE, so a second beat or a restarted one queues nothing more. The send task claims the
message in turn (queued or retrying -> sending) with the appointment's row locked, so a second
worker, or a second copy of the task, sends nothing; and a message whose appointment was
cancelled or moved meanwhile is dropped there, not sent. Messages name the company, the
service, the professional and the local date and time, in the company's language: nothing
else about the customer. A customer who opted out of a channel (Contact.sms_opt_out,
email_opt_out) gets nothing on it: the other channel is used if they have it, and the opt-out
is read again when the message is sent. Each message ends with the link that opts its
customer out of its channel (agenda.opt_out), when the site's public address is configured.
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import translation
from django.utils.translation import gettext as _g
from django.utils.translation import gettext_lazy as _

from agenda import clock
from agenda.manage_links import manage_key_new, manage_link_url
from agenda.models import Appointment, AppointmentMessage
from agenda.opt_out import opt_out_key_new, opt_out_link
from core import customer_messages
from core.customer_messages import MessagesSweepResult
from core.jobs import task_named
from core.l10n import date_shown, time_shown, weekday_shown
from core.models import Company, Contact

logger = logging.getLogger("garante.agenda.messages")

Kind = AppointmentMessage.Kind
Channel = AppointmentMessage.Channel
Status = AppointmentMessage.Status
SEND_TASK = "agenda.appointment_message_send"

# --- Written with the change (agenda.services) -----------------------------------------------


# Why a message was not sent, as stored (English, for logs), and as staff read it.
REASONS_SHOWN = {
    "opted out": _("the customer opted out of messages"),
    "no phone or email": _("the customer has no phone or email"),
    "no phone": _("the customer no longer has a phone"),
    "no email": _("the customer no longer has an email"),
    "appointment cancelled": _("the appointment was cancelled"),
    "appointment moved": _("the appointment was moved"),
    "appointment not cancelled": _("the appointment is no longer cancelled"),
    "appointment already started": _("the appointment had already started"),
    "time limit reached while sending": _("the time limit was reached while sending"),
    "stopped while sending": _("sending stopped before it finished"),
}


def reason_shown(error: str) -> str:
    """Why a message was not sent, in the staff member's language when it is one of ours (a
    provider's own detail is shown as it came)."""
    return str(REASONS_SHOWN.get(error, error))


def _channel_for(contact: Contact) -> tuple[str, str]:
    """The contact's channel for appointment messages, and why there is none: SMS to their
    phone, else email, each unless they opted out of it."""
    return customer_messages.channel_for(contact, first=Channel.SMS)


def message_channel(contact: Contact) -> tuple[str, str]:
    """The channel an appointment message to `contact` goes by now, and why there is none:
    what the admin's confirmation page tells staff before a cancellation."""
    return _channel_for(contact)


def _message(
    appointment: Appointment, kind: str, due_at: datetime, channel: str, why: str, reason: str = ""
):
    if why:
        status = Status.NOT_SENT
    else:
        status = Status.SCHEDULED if kind == Kind.REMINDER else Status.QUEUED
    return AppointmentMessage(
        company_id=appointment.company_id,
        appointment=appointment,
        kind=kind,
        channel=channel,
        starts_at=appointment.starts_at,
        due_at=due_at,
        status=status,
        error=why,
        queued_at=due_at if status == Status.QUEUED else None,
        reason=reason,
    )


def appointment_messages_after(
    appointment: Appointment,
    kind: str,
    *,
    now: datetime,
    reminder_hours: int | None = None,
    reason: str = "",
) -> None:
    """Write the messages a booking, move or cancellation (`kind`) of `appointment` owes its
    customer, in the caller's transaction, and publish the confirmation once it commits. A
    booking or a move passes the company's `reminder_hours_before` (AgendaSettings), as the
    booking's check read it.

    A move or a cancellation first drops the appointment's messages that have not left (a
    reminder for the old time, a confirmation not yet sent): what is being sent now is
    finished by its worker. A reminder is written only while it can still come before the
    start (an appointment booked closer than that gets its confirmation alone). `reason`, the
    one staff gave (plain text, core.reasons), is told in the confirmation."""
    if kind != Kind.BOOKED:
        AppointmentMessage.objects.filter(
            appointment=appointment, status__in=[Status.SCHEDULED, Status.QUEUED, Status.RETRYING]
        ).update(
            status=Status.NOT_SENT,
            error="appointment cancelled" if kind == Kind.CANCELLED else "appointment moved",
        )
    contact = appointment.contact
    channel, why = _channel_for(contact)
    messages = [_message(appointment, kind, now, channel, why, reason)]
    if kind != Kind.CANCELLED and reminder_hours is not None:
        remind_at = appointment.starts_at - timedelta(hours=reminder_hours)
        if remind_at > now:
            messages.append(_message(appointment, Kind.REMINDER, remind_at, channel, why))
    confirmation, *_reminder = AppointmentMessage.objects.bulk_create(messages)
    if confirmation.status == Status.QUEUED:
        message_id = confirmation.pk
        # robust: a broker that is down must not turn the committed change into an error; the
        # message stays queued and the sweep publishes it again (LOST_AFTER).
        transaction.on_commit(lambda: publish(message_id), robust=True)


def publish(message_id: int) -> None:
    task_named(SEND_TASK).apply_async(
        args=[message_id], queue=settings.GARANTE_AGENDA_MESSAGES_QUEUE
    )


# --- Sent by the task --------------------------------------------------------------------------


def _local(instant: datetime, company: Company) -> dict[str, str]:
    tz = company.tz
    return {
        "weekday": weekday_shown(instant, tz),
        "date": date_shown(instant, tz),
        "time": time_shown(instant, tz),
    }


def message_text(
    message: AppointmentMessage, opt_out_url: str = "", manage_url: str = ""
) -> tuple[str, str]:
    """The subject (for email) and the text of a message, in the company's language: the
    company, the service, the professional, and the date and time in the company's zone; the
    reason staff gave, if any; the link to see, move or cancel it (agenda.manage_links) and the
    one that opts out of its channel, if there are."""
    appointment = message.appointment
    company = message.company
    with translation.override(company.language):
        values = {
            "company": company.name,
            "service": appointment.service.name,
            "professional": appointment.professional.display_name,
            **_local(message.starts_at, company),
        }
        subject, body = {
            Kind.BOOKED: (
                _g("%(company)s: cita reservada"),
                _g(
                    "%(company)s: su cita de %(service)s con %(professional)s queda reservada "
                    "para el %(weekday)s %(date)s a las %(time)s."
                ),
            ),
            Kind.MOVED: (
                _g("%(company)s: cita cambiada"),
                _g(
                    "%(company)s: su cita de %(service)s con %(professional)s se ha cambiado "
                    "al %(weekday)s %(date)s a las %(time)s."
                ),
            ),
            Kind.CANCELLED: (
                _g("%(company)s: cita cancelada"),
                _g(
                    "%(company)s: su cita de %(service)s con %(professional)s del %(weekday)s "
                    "%(date)s a las %(time)s ha quedado cancelada."
                ),
            ),
            Kind.REMINDER: (
                _g("%(company)s: recordatorio de su cita"),
                _g(
                    "%(company)s: le recordamos su cita de %(service)s con %(professional)s el "
                    "%(weekday)s %(date)s a las %(time)s."
                ),
            ),
        }[message.kind]
        body %= values
        if message.reason:
            body += " " + _g("Motivo: %(reason)s") % {"reason": message.reason.rstrip(".")} + "."
        if manage_url:
            body += " " + _g("Para ver, cambiar o cancelar su cita: %(url)s") % {"url": manage_url}
        if opt_out_url:
            body += " " + _g("Para no recibir más avisos: %(url)s") % {"url": opt_out_url}
    return subject % values, body


def _no_longer_applies(message: AppointmentMessage, appointment: Appointment, now: datetime) -> str:
    """Why a message is not to be sent any more, at the instant of its claim ('' if it is)."""
    contact = appointment.contact
    if message.kind == Kind.CANCELLED:
        if appointment.state != Appointment.State.CANCELLED:
            return "appointment not cancelled"
    elif appointment.state != Appointment.State.SCHEDULED:
        return f"appointment {appointment.state}"
    elif appointment.starts_at != message.starts_at:
        return "appointment moved"
    elif appointment.starts_at <= now:
        return "appointment already started"
    return customer_messages.channel_gone(contact, message.channel)


def _claim(message_id: int, now: datetime) -> AppointmentMessage | None:
    """Take the message for sending (queued or retrying -> sending), once: None if it is not
    claimable (sent, being sent, dropped) or no longer applies (then it is dropped).

    The appointment's row is locked first, as a move or a cancellation locks it before it
    drops the appointment's messages: either the change commits first and the message is
    found dropped (or not applying) here, or the claim does and the change finds it sending."""
    message = (
        AppointmentMessage.objects.filter(pk=message_id).only("appointment_id", "status").first()
    )
    if message is None or message.status not in (Status.QUEUED, Status.RETRYING):
        return None
    with transaction.atomic():
        appointment = (
            Appointment.objects.select_for_update(of=("self",), no_key=True)
            .select_related("contact", "service", "professional", "company")
            .get(pk=message.appointment_id)
        )
        message = (
            AppointmentMessage.objects.select_for_update()
            .filter(pk=message_id, status__in=[Status.QUEUED, Status.RETRYING])
            .first()
        )
        if message is None:
            return None
        why = _no_longer_applies(message, appointment, now)
        if why:
            message.status, message.error = Status.NOT_SENT, why
            message.save(update_fields=["status", "error"])
            logger.info("appointment message %s dropped: %s", message_id, why)
            return None
        message.status, message.claimed_at = Status.SENDING, now
        message.attempts = F("attempts") + 1
        fields = ["status", "claimed_at", "attempts"]
        if message.opt_out_key is None:  # a retry keeps the link its first try drew
            message.opt_out_key, message.opt_out_until = opt_out_key_new(now)
            fields += ["opt_out_key", "opt_out_until"]
        if message.manage_key is None and message.kind != Kind.CANCELLED:
            message.manage_key = manage_key_new()
            fields.append("manage_key")
        message.save(update_fields=fields)
    message.refresh_from_db(fields=["attempts"])
    message.appointment, message.company = appointment, appointment.company
    return message


def appointment_message_deliver(
    *, message_id: int, last_try: bool, now: datetime | None = None
) -> str:
    """Send one appointment message, once (run by its Celery task): its outcome, "sent",
    "failed", "unknown" (core.customer_messages.send_and_record), or "skipped" when there was
    nothing to send."""
    now = now or clock.now()
    message = _claim(message_id, now)
    if message is None:
        return "skipped"
    link = opt_out_link(message)
    subject, body = message_text(message, link.url if link else "", manage_link_url(message))
    to, masked = customer_messages.destination(
        message.appointment.contact, message.channel, message.company.language
    )
    return customer_messages.send_and_record(
        AppointmentMessage,
        message=message,
        company=message.company,
        to=to,
        masked=masked,
        subject=subject,
        body=body,
        headers=link.headers if link else None,
        last_try=last_try,
        logger=logger,
        what="appointment message",
    )


# --- The beat sweep ------------------------------------------------------------------------------


def _due(now: datetime) -> Q:
    """Reminders whose time has come, and messages lost on their way."""
    return Q(status=Status.SCHEDULED, due_at__lte=now) | customer_messages.lost(now)


def appointment_messages_sweep(
    *, now: datetime | None = None, batch: int = 500
) -> MessagesSweepResult:
    """Queue the reminders that are due, publish again the messages lost on their way, and
    settle those whose worker stopped while sending (core.customer_messages.messages_sweep)."""
    return customer_messages.messages_sweep(
        AppointmentMessage,
        names=("agenda.messages_queue", "agenda.messages_settle"),
        publish=publish,
        now=now or clock.now(),
        due=_due,
        order_by=("due_at", "pk"),
        batch=batch,
    )
