"""Quotes with their lines and the stock an accepted one holds.

State fields are protected django-fsm-2 fields: only the transition methods change them, and
only the services in sales.services call those, under a row lock.
"""

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal

from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy
from django_fsm import FSMField, FSMModelMixin, transition
from django_fsm_log.decorators import fsm_log_by, fsm_log_description

from core.models import Company, Contact, Conversation
from sales.models.catalogue import PriceList, Product, money_field
from sales.models.opportunities import Opportunity


class QuoteQuerySet(models.QuerySet):
    """Quotes by the state a customer would be told at an instant: the rule of
    `Quote.effective_state`, in SQL (an open quote past its validity is expired then, whether
    or not the expiry sweep has recorded it)."""

    def lapsed(self, now: datetime) -> "QuoteQuerySet":
        """Open quotes past their validity at `now`: expired then, not yet recorded so
        (`Quote.is_lapsed`)."""
        return self.filter(state__in=Quote.OPEN_STATES, valid_until__lte=now)

    def in_effective_state(self, state: str, now: datetime) -> "QuoteQuerySet":
        """The quotes whose `effective_state(now)` is `state`."""
        if state == Quote.State.EXPIRED:
            return self.filter(
                Q(state=Quote.State.EXPIRED) | Q(state__in=Quote.OPEN_STATES, valid_until__lte=now)
            )
        if state in Quote.OPEN_STATES:
            return self.filter(state=state, valid_until__gt=now)
        return self.filter(state=state)


class Quote(FSMModelMixin, models.Model):
    """A priced offer to one contact. Its lines snapshot prices and taxes at creation."""

    class State(models.TextChoices):
        DRAFT = "draft", _("Draft")
        # A quote (la cotización) is feminine in Spanish, beside "Aceptada" and "Vencida".
        SENT = "sent", pgettext_lazy("quote state", "Sent")
        ACCEPTED = "accepted", _("Accepted")
        REJECTED = "rejected", _("Rejected")
        EXPIRED = "expired", _("Expired")
        SUPERSEDED = "superseded", _("Superseded")
        DELIVERED = "delivered", _("Delivered")
        CANCELLED = "cancelled", _("Cancelled")

    OPEN_STATES = (State.DRAFT, State.SENT)
    # An accepted quote is an order: its stock stays reserved until it is delivered (consumed)
    # or cancelled (released). No other state holds a reservation.
    RESERVING_STATES = (State.ACCEPTED,)

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="quotes", verbose_name=_("company")
    )
    reference = models.CharField(_("reference"), max_length=16, unique=True, editable=False)
    contact = models.ForeignKey(
        Contact, on_delete=models.PROTECT, related_name="quotes", verbose_name=_("contact")
    )
    price_list = models.ForeignKey(
        PriceList, on_delete=models.PROTECT, related_name="quotes", verbose_name=_("price list")
    )
    currency = models.CharField(_("currency"), max_length=3)
    subtotal = money_field(_("subtotal"), default=Decimal(0))
    tax_total = money_field(_("tax"), default=Decimal(0))
    total = money_field(_("total"), default=Decimal(0))
    valid_until = models.DateTimeField(_("valid until"))
    opportunity = models.ForeignKey(
        Opportunity,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="quotes",
        verbose_name=_("opportunity"),
    )
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("conversation"),
    )
    state = FSMField(_("state"), default=State.DRAFT, choices=State.choices, protected=True)
    rejection_reason = models.CharField(_("rejection reason"), max_length=300, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    sent_at = models.DateTimeField(_("sent"), null=True, blank=True, editable=False)
    resolved_at = models.DateTimeField(_("resolved"), null=True, blank=True, editable=False)
    # When the order (an accepted quote) was delivered or cancelled.
    delivered_at = models.DateTimeField(_("delivered"), null=True, blank=True, editable=False)
    cancelled_at = models.DateTimeField(_("cancelled"), null=True, blank=True, editable=False)
    emailed_at = models.DateTimeField(_("emailed"), null=True, blank=True, editable=False)
    # Why the mail server refused the email for good (550 no such mailbox): it is not sent
    # again, and staff see why the customer has no email.
    email_error = models.CharField(_("email error"), max_length=200, blank=True, editable=False)
    # The key of the quote page's link in its email (sales.quote_pages), drawn with the email.
    page_key = models.CharField(
        _("page link key"), max_length=32, unique=True, null=True, blank=True, editable=False
    )

    objects = QuoteQuerySet.as_manager()
    # The lines quote_create has just inserted, in order, kept on the instance it returns: no
    # field, and None on every quote read from the database (`lines_shown`).
    inserted_lines: "list[QuoteLine] | None" = None

    class Meta:
        verbose_name = _("quote")
        verbose_name_plural = _("quotes")
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(fields=["company", "contact", "state"]),
            models.Index(fields=["state", "valid_until"]),
        ]

    def __str__(self) -> str:
        return self.reference

    def lines_shown(self) -> "Iterable[QuoteLine]":
        """Its lines in order: those its creation just inserted, so that showing a new quote
        reads nothing again; else the related manager's (prefetched where the caller did)."""
        return self.inserted_lines if self.inserted_lines is not None else self.lines.all()

    def is_lapsed(self, now: datetime) -> bool:
        """Open but past its validity at `now` (`QuoteQuerySet.lapsed` in SQL)."""
        return self.state in self.OPEN_STATES and self.valid_until <= now

    def effective_state(self, now: datetime) -> str:
        """The state a customer should be told: an open quote past its validity is expired
        at that instant, even before the beat task records it (`QuoteQuerySet.in_effective_state`
        in SQL)."""
        if self.is_lapsed(now):
            return self.State.EXPIRED.value
        return str(self.state)

    @fsm_log_by
    @transition(field=state, source=State.DRAFT, target=State.SENT, custom={"label": _("Send")})
    def send(self, by=None) -> None:
        pass

    @fsm_log_by
    @transition(
        field=state, source=State.SENT, target=State.ACCEPTED, custom={"label": _("Accept")}
    )
    def accept(self, by=None) -> None:
        pass

    @fsm_log_by
    @fsm_log_description
    @transition(
        field=state, source=State.SENT, target=State.REJECTED, custom={"label": _("Reject")}
    )
    def reject(self, by=None, description=None) -> None:
        pass

    @fsm_log_by
    @fsm_log_description
    @transition(
        field=state, source=OPEN_STATES, target=State.EXPIRED, custom={"label": _("Expire")}
    )
    def expire(self, by=None, description=None) -> None:
        pass

    @fsm_log_by
    @transition(
        field=state,
        source=OPEN_STATES,
        target=State.SUPERSEDED,
        # Applied by winning the opportunity (quotes_supersede), never by a button of its own.
        custom={"label": _("Supersede"), "system_only": True},
    )
    def supersede(self, by=None) -> None:
        """Another quote of the same opportunity was accepted (or staff won it): this one is
        settled, never acceptable again."""

    @fsm_log_by
    @transition(
        field=state,
        source=State.ACCEPTED,
        target=State.DELIVERED,
        custom={
            "label": _("Mark delivered"),
            "help_text": _("The order was handed over: its reserved stock leaves the shelf."),
        },
    )
    def deliver(self, by=None) -> None:
        pass

    @fsm_log_by
    @fsm_log_description
    @transition(
        field=state,
        source=State.ACCEPTED,
        target=State.CANCELLED,
        custom={
            "label": _("Cancel order"),
            "help_text": _("The order will not be delivered: its reserved stock is released."),
        },
    )
    def cancel(self, by=None, description=None) -> None:
        pass


# How a state reads to the customer (Spanish source text, translated per company); the admin
# keeps the choice labels above.
QUOTE_STATE_LABELS: dict[str, Promise] = {
    Quote.State.DRAFT: _("borrador"),
    Quote.State.SENT: _("enviada"),
    Quote.State.ACCEPTED: _("aceptada"),
    Quote.State.REJECTED: _("rechazada"),
    Quote.State.EXPIRED: _("vencida"),
    Quote.State.SUPERSEDED: _("sin efecto"),
    Quote.State.DELIVERED: _("entregada"),
    Quote.State.CANCELLED: _("cancelada"),
}


class QuoteLine(models.Model):
    """One product on a quote, with the price and tax it had when the quote was made."""

    quote = models.ForeignKey(
        Quote, on_delete=models.CASCADE, related_name="lines", verbose_name=_("quote")
    )
    position = models.PositiveSmallIntegerField(_("position"))
    product = models.ForeignKey(
        Product, on_delete=models.PROTECT, related_name="quote_lines", verbose_name=_("product")
    )
    sku = models.CharField(_("SKU"), max_length=64)
    name = models.CharField(_("name"), max_length=200)
    quantity = models.PositiveIntegerField(_("quantity"), validators=[MinValueValidator(1)])
    unit_price = money_field(_("unit price"))
    tax_rate = models.DecimalField(_("tax rate (%)"), max_digits=5, decimal_places=2)
    subtotal = money_field(_("subtotal"))
    tax = money_field(_("tax"))
    total = money_field(_("total"))

    class Meta:
        verbose_name = _("quote line")
        verbose_name_plural = _("quote lines")
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["quote", "position"], name="unique_quote_line"),
            models.CheckConstraint(condition=Q(quantity__gte=1), name="quote_line_quantity"),
        ]

    def __str__(self) -> str:
        return f"{self.quantity} x {self.sku}"


class StockReservation(models.Model):
    """What one accepted quote holds of one tracked product, from acceptance until the order
    is delivered (consumed: it leaves the shelf) or cancelled (released: available again).

    Only sales.services.catalog writes these, always with the product's `quantity_reserved`
    in the same transaction under the product's row lock: the live ones add up to it.
    """

    class State(models.TextChoices):
        LIVE = "live", _("Live")
        CONSUMED = "consumed", _("Consumed")
        RELEASED = "released", _("Released")

    quote = models.ForeignKey(
        Quote, on_delete=models.CASCADE, related_name="reservations", verbose_name=_("quote")
    )
    product = models.ForeignKey(
        Product, on_delete=models.PROTECT, related_name="reservations", verbose_name=_("product")
    )
    quantity = models.PositiveIntegerField(_("quantity"))
    state = models.CharField(
        _("state"), max_length=10, choices=State.choices, default=State.LIVE, editable=False
    )
    created_at = models.DateTimeField(_("reserved"), auto_now_add=True)
    settled_at = models.DateTimeField(_("settled"), null=True, blank=True, editable=False)

    class Meta:
        verbose_name = _("stock reservation")
        verbose_name_plural = _("stock reservations")
        ordering = ["quote", "product"]
        constraints = [
            models.UniqueConstraint(fields=["quote", "product"], name="unique_quote_reservation"),
            models.CheckConstraint(condition=Q(quantity__gte=1), name="reservation_quantity"),
        ]
        indexes = [
            models.Index(
                fields=["product"], condition=Q(state="live"), name="live_reservation_product"
            )
        ]

    def __str__(self) -> str:
        return f"{self.quantity} x {self.product_id} ({self.get_state_display()})"
