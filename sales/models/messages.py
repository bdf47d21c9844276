"""The messages that tell a customer of their quote or order when staff settle it."""

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from core.models import Company
from core.models.messages import CustomerMessage


class QuoteMessage(CustomerMessage):
    """One message to the customer about their quote or order when staff settle it: the order
    cancelled, the quote recorded as rejected, or withdrawn (sales.quote_messages), with the
    reason staff gave.

    Written by sales.services in the transaction of the change, and sent by a Celery task
    after that commit, as the case and appointment messages are: `queued` -> `sending` ->
    `sent`, or `retrying` in between, or `failed`; `not_sent` (with the reason) when the
    customer has no channel left for it; `unknown` when its worker stopped while sending. One
    per quote and kind: each is a change the quote makes once.
    """

    class Kind(models.TextChoices):
        ORDER_CANCELLED = "order_cancelled", _("Order cancelled")
        QUOTE_REJECTED = "quote_rejected", _("Quote rejected")
        QUOTE_WITHDRAWN = "quote_withdrawn", _("Quote withdrawn")

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="quote_messages", verbose_name=_("company")
    )
    quote = models.ForeignKey(
        "Quote", on_delete=models.CASCADE, related_name="messages", verbose_name=_("quote")
    )
    kind = models.CharField(_("message"), max_length=20, choices=Kind.choices)

    class Meta:
        verbose_name = _("message to the customer")
        verbose_name_plural = _("messages to the customer")
        ordering = ["created_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["quote", "kind"], name="quote_message_once"),
        ]
        indexes = [
            models.Index(
                fields=["queued_at"],
                name="quote_message_open",
                condition=Q(status__in=["queued", "retrying", "sending"]),
            ),
        ]
