"""The people a company serves, and the conversations of the agent platform they talk in."""

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from core.models.tenancy import Company


class Contact(models.Model):
    """A customer of a company. Identifiers are stored normalised (see core.normalize)."""

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="contacts", verbose_name=_("company")
    )
    first_name = models.CharField(_("first name"), max_length=100)
    last_name = models.CharField(_("last name"), max_length=150, blank=True)
    document_number = models.CharField(_("document number"), max_length=32, blank=True)
    phone = models.CharField(_("phone (E.164)"), max_length=20, blank=True)
    email = models.EmailField(_("email"), blank=True)
    # Appointment confirmations and reminders only: verification codes and notices about the
    # contact's own details still go to the channel they were asked for.
    sms_opt_out = models.BooleanField(
        _("no appointment messages by SMS"),
        default=False,
        help_text=_("The customer asked not to get appointment confirmations or reminders by SMS."),
    )
    email_opt_out = models.BooleanField(
        _("no appointment messages by email"),
        default=False,
        help_text=_(
            "The customer asked not to get appointment confirmations or reminders by email."
        ),
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        verbose_name = _("contact")
        verbose_name_plural = _("contacts")
        ordering = ["first_name", "last_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["company", "document_number"],
                condition=~Q(document_number=""),
                name="unique_contact_document",
            ),
            models.UniqueConstraint(
                fields=["company", "phone"], condition=~Q(phone=""), name="unique_contact_phone"
            ),
            models.UniqueConstraint(
                fields=["company", "email"], condition=~Q(email=""), name="unique_contact_email"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.first_name} {self.last_name}".strip()


class Conversation(models.Model):
    """One conversation of the agent platform (com.asixto/conversationId), per company.

    It remembers whom the customer identified as, and until when a step-up verification holds.
    """

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="conversations", verbose_name=_("company")
    )
    external_id = models.CharField(_("conversation id"), max_length=255)
    contact = models.ForeignKey(
        Contact,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="conversations",
        verbose_name=_("identified contact"),
    )
    identified_via = models.CharField(_("identified via"), max_length=16, blank=True)
    identified_at = models.DateTimeField(_("identified at"), null=True, blank=True)
    verified_until = models.DateTimeField(_("verified until"), null=True, blank=True)
    verified_at = models.DateTimeField(_("verified at"), null=True, blank=True)
    created_at = models.DateTimeField(_("started"), auto_now_add=True)
    last_seen_at = models.DateTimeField(_("last seen"), auto_now=True)

    class Meta:
        verbose_name = _("conversation")
        verbose_name_plural = _("conversations")
        ordering = ["-last_seen_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["company", "external_id"], name="unique_conversation_per_company"
            ),
        ]

    def __str__(self) -> str:
        return self.external_id
