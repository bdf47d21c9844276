"""The messages that tell a customer of an appointment: confirmations and reminders."""

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from agenda.models.appointments import Appointment
from core.models import Company
from core.models.messages import CustomerMessage


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
