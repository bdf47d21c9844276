"""Messages leaving for customers: the SMS the hourly budget counts, and a sandbox's outbox
(core.sms_policy, core.outbound)."""

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.l10n import datetime_shown
from core.models.tenancy import Company


class SmsSend(models.Model):
    """One SMS handed to its channel (the provider, or a sandbox's outbox): what the hourly
    budget counts (core.sms_policy). Rows older than the window are deleted as new ones come."""

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="+", verbose_name=_("company")
    )
    created_at = models.DateTimeField(_("sent"))

    class Meta:
        verbose_name = _("SMS sent")
        verbose_name_plural = _("SMS sent")
        indexes = [models.Index(fields=["company", "created_at"], name="sms_send_window")]

    def __str__(self) -> str:
        return f"{self.company_id} @ {datetime_shown(self.created_at)}"


class OutboxMessage(models.Model):
    """A message to a customer of a sandbox company, kept here instead of being sent: a
    sandbox never reaches a real phone or mailbox, whatever backends are configured
    (core.outbound). Staff read it in the admin; nothing edits it."""

    class Channel(models.TextChoices):
        SMS = "sms", _("SMS")
        EMAIL = "email", _("Email")

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="outbox", verbose_name=_("company")
    )
    channel = models.CharField(_("channel"), max_length=8, choices=Channel.choices)
    destination = models.CharField(_("to"), max_length=254)
    subject = models.CharField(_("subject"), max_length=300, blank=True)
    body = models.TextField(_("text"))
    created_at = models.DateTimeField(_("created"), default=timezone.now)

    class Meta:
        verbose_name = _("sandbox outbox message")
        verbose_name_plural = _("sandbox outbox")
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["company", "-created_at"], name="outbox_company_recent")]

    def __str__(self) -> str:
        return f"{self.get_channel_display()} → {self.destination}"
