"""What every message owed to a customer records (core.customer_messages sends them): an
appointment's (agenda.AppointmentMessage), a case's (support.CaseMessage), a settled quote's or
order's (sales.QuoteMessage). Each app's model adds its record, its kinds and its reason."""

from django.db import models
from django.utils.translation import gettext_lazy as _


class CustomerMessage(models.Model):
    """Written in the transaction of the change it tells of, and sent by a Celery task after
    that commit: `queued` -> `sending` -> `sent`, or `retrying` in between, or `failed`;
    `not_sent` (with the reason) when the customer has no channel left for it or it no longer
    applies; `unknown` when its worker stopped while sending. A worker claims
    `queued`/`retrying` under the row's lock, so none is handed to the provider twice."""

    class Channel(models.TextChoices):
        SMS = "sms", _("SMS")
        EMAIL = "email", _("Email")

    class Status(models.TextChoices):
        QUEUED = "queued", _("Queued")
        SENDING = "sending", _("Sending")
        RETRYING = "retrying", _("Retrying")
        SENT = "sent", _("Sent")
        FAILED = "failed", _("Failed")
        NOT_SENT = "not_sent", _("Not sent")
        UNKNOWN = "unknown", _("Unknown (stopped while sending)")

    # Still to be sent or being sent: what the sweep reads.
    OPEN_STATUSES = ("queued", "retrying", "sending")

    channel = models.CharField(_("channel"), max_length=8, choices=Channel.choices, blank=True)
    status = models.CharField(
        _("status"), max_length=16, choices=Status.choices, default=Status.QUEUED
    )
    attempts = models.PositiveSmallIntegerField(_("attempts"), default=0)
    error = models.CharField(_("why not sent / error"), max_length=300, blank=True)
    masked_destination = models.CharField(_("sent to"), max_length=254, blank=True)
    provider_message_id = models.CharField(_("provider message id"), max_length=100, blank=True)
    provider_status = models.CharField(_("provider status"), max_length=40, blank=True)
    queued_at = models.DateTimeField(_("queued"), null=True, blank=True)
    claimed_at = models.DateTimeField(_("sending since"), null=True, blank=True)
    sent_at = models.DateTimeField(_("sent"), null=True, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    # What staff gave as the reason for the change, told to the customer in it (core.reasons).
    reason = models.CharField(_("reason"), max_length=300, blank=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.get_kind_display()} · {self.get_status_display()}"
