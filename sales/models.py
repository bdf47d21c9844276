"""Sales models: catalog and stock, price lists, quotes with their lines, and opportunities.

State fields are protected django-fsm-2 fields: only the transition methods change them, and
only the services in sales.services call those, under a row lock.
"""

from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Upper
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy
from django_fsm import FSMField, FSMModelMixin, transition
from django_fsm_log.decorators import fsm_log_by, fsm_log_description

from core.models import Company, Contact, Conversation
from core.models.messages import CustomerMessage
from sales import money


def _money_field(verbose_name: str, **kwargs) -> models.DecimalField:
    return models.DecimalField(
        verbose_name,
        max_digits=money.STORED_MAX_DIGITS,
        decimal_places=money.STORED_DECIMAL_PLACES,
        validators=[MinValueValidator(Decimal(0))],
        **kwargs,
    )


class Product(models.Model):
    """Something a company sells. Stock is tracked only when `track_stock` is set.

    Available stock is `quantity_on_hand - quantity_reserved`, where `quantity_reserved` is the
    sum of the product's live StockReservations (accepted quotes not yet delivered or
    cancelled), kept in the same transaction under the product's row lock. A database
    constraint keeps the reservation within what is on hand, so availability is never negative.
    """

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="products", verbose_name=_("company")
    )
    sku = models.CharField(_("SKU"), max_length=64)
    name = models.CharField(_("name"), max_length=200)
    description = models.TextField(_("description"), blank=True)
    unit = models.CharField(_("unit"), max_length=20, default="unidad")
    tax_rate = models.DecimalField(
        _("tax rate (%)"),
        max_digits=5,
        decimal_places=2,
        default=Decimal("21.00"),
        validators=[MinValueValidator(Decimal(0)), MaxValueValidator(Decimal(100))],
    )
    active = models.BooleanField(_("active"), default=True)
    track_stock = models.BooleanField(_("stock tracked"), default=True)
    quantity_on_hand = models.PositiveIntegerField(_("quantity on hand"), default=0)
    quantity_reserved = models.PositiveIntegerField(
        _("quantity reserved"),
        default=0,
        help_text=_("Reserved by accepted quotes not yet delivered or cancelled."),
    )

    class Meta:
        verbose_name = _("product")
        verbose_name_plural = _("products")
        ordering = ["name"]
        constraints = [
            # SKUs are matched case-insensitively, so they must be unique that way too.
            models.UniqueConstraint("company", Upper("sku"), name="unique_product_sku"),
            models.CheckConstraint(
                condition=Q(quantity_reserved__lte=F("quantity_on_hand")),
                name="product_reserved_within_on_hand",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.sku})"

    @property
    def quantity_available(self) -> int:
        return self.quantity_on_hand - self.quantity_reserved

    def in_stock(self) -> bool:
        return not self.track_stock or self.quantity_available > 0


def _currency_clean(currency: str | None) -> str:
    """The currency in upper case if it has the shape of an ISO 4217 code; a ValidationError
    on the `currency` field otherwise (price lists and opportunities share it)."""
    currency = (currency or "").upper()
    if not money.is_currency_code(currency):
        raise ValidationError({"currency": _("Use a three-letter ISO 4217 code.")})
    return currency


class PriceList(models.Model):
    """Prices in one currency, valid within an optional window; one default per company."""

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="price_lists", verbose_name=_("company")
    )
    name = models.CharField(_("name"), max_length=100)
    currency = models.CharField(_("currency"), max_length=3, help_text=_("ISO 4217 code"))
    valid_from = models.DateTimeField(_("valid from"), null=True, blank=True)
    valid_until = models.DateTimeField(_("valid until"), null=True, blank=True)
    is_default = models.BooleanField(_("default"), default=False)

    class Meta:
        verbose_name = _("price list")
        verbose_name_plural = _("price lists")
        ordering = ["-is_default", "name"]
        constraints = [
            models.UniqueConstraint(fields=["company", "name"], name="unique_price_list_name"),
            models.UniqueConstraint(
                fields=["company"], condition=Q(is_default=True), name="one_default_price_list"
            ),
            models.CheckConstraint(
                condition=Q(valid_from__isnull=True)
                | Q(valid_until__isnull=True)
                | Q(valid_from__lt=F("valid_until")),
                name="price_list_window_ordered",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.currency})"

    def clean(self) -> None:
        self.currency = _currency_clean(self.currency)
        if self.valid_from and self.valid_until and self.valid_from >= self.valid_until:
            raise ValidationError({"valid_until": _("The window must end after it starts.")})

    def validate_constraints(self, exclude=None) -> None:
        # Making this list the default takes the mark from the current one (price_list_save),
        # so "another list is the default" is never an error to show; the database still
        # holds one default per company.
        super().validate_constraints(exclude={*(exclude or ()), "is_default"})


class PriceListItem(models.Model):
    """The unit price of one product in one price list (before tax)."""

    price_list = models.ForeignKey(
        PriceList, on_delete=models.CASCADE, related_name="items", verbose_name=_("price list")
    )
    product = models.ForeignKey(
        Product, on_delete=models.CASCADE, related_name="prices", verbose_name=_("product")
    )
    unit_price = _money_field(_("unit price"))

    class Meta:
        verbose_name = _("price list item")
        verbose_name_plural = _("price list items")
        constraints = [
            models.UniqueConstraint(
                fields=["price_list", "product"], name="unique_price_list_product"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.product} @ {money.shown(self.unit_price, self.price_list.currency)}"

    def clean(self) -> None:
        # The list object, not its id: a list being created with its prices has no id yet.
        known = self.price_list_id is not None or PriceListItem.price_list.is_cached(self)
        price_list = self.price_list if known else None
        if self.product_id and price_list is not None:
            if self.product.company_id != price_list.company_id:
                raise ValidationError({"product": _("The product belongs to another company.")})
            currency = price_list.currency
            if self.unit_price is not None and not money.is_exact(self.unit_price, currency):
                raise ValidationError(
                    {
                        "unit_price": _("%(currency)s has %(n)d decimals.")
                        % {"currency": currency, "n": money.minor_units(currency)}
                    }
                )


class Opportunity(FSMModelMixin, models.Model):
    """A potential sale the sales team follows, from first contact to won or lost."""

    class State(models.TextChoices):
        NEW = "new", _("New")
        QUALIFIED = "qualified", _("Qualified")
        PROPOSAL = "proposal", _("Proposal")
        NEGOTIATION = "negotiation", _("Negotiation")
        WON = "won", _("Won")
        LOST = "lost", _("Lost")

    OPEN_STATES = (State.NEW, State.QUALIFIED, State.PROPOSAL, State.NEGOTIATION)
    CLOSED_STATES = (State.WON, State.LOST)

    company = models.ForeignKey(
        Company, on_delete=models.CASCADE, related_name="opportunities", verbose_name=_("company")
    )
    reference = models.CharField(_("reference"), max_length=16, unique=True, editable=False)
    contact = models.ForeignKey(
        Contact, on_delete=models.PROTECT, related_name="opportunities", verbose_name=_("contact")
    )
    title = models.CharField(_("title"), max_length=200)
    notes = models.TextField(_("notes"), blank=True, help_text=_("What the customer asked for."))
    amount = _money_field(_("amount"), default=Decimal(0))
    currency = models.CharField(_("currency"), max_length=3)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="sales_opportunities",
        verbose_name=_("owner"),
    )
    # When the current owner took it (a lead waits, highlighted past the company's pickup
    # time, until someone does: sales.selectors.leads_waiting).
    assigned_at = models.DateTimeField(_("assigned"), null=True, blank=True, editable=False)
    lost_reason = models.CharField(_("lost reason"), max_length=300, blank=True)
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("conversation"),
    )
    state = FSMField(_("stage"), default=State.NEW, choices=State.choices, protected=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    closed_at = models.DateTimeField(_("closed"), null=True, blank=True, editable=False)
    # The sales staff's email about the new opportunity (sales.services.lead_notice): sent
    # once after commit, or refused for good with the reason kept; the sweep resends the rest.
    team_notified_at = models.DateTimeField(
        _("sales staff notified"), null=True, blank=True, editable=False
    )
    team_notice_error = models.CharField(
        _("sales staff email error"), max_length=200, blank=True, editable=False
    )
    # The email to the salesperson it was assigned to (sales.services.lead_notice): once per
    # assignment (assigning it again clears both), or refused for good with the reason kept.
    owner_notified_at = models.DateTimeField(
        _("owner notified"), null=True, blank=True, editable=False
    )
    owner_notice_error = models.CharField(
        _("owner email error"), max_length=200, blank=True, editable=False
    )

    class Meta:
        verbose_name = _("opportunity")
        verbose_name_plural = _("opportunities")
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["company", "state"])]

    def __str__(self) -> str:
        return f"{self.reference} · {self.title}"

    def clean(self) -> None:
        self.currency = _currency_clean(self.currency)

    @property
    def is_closed(self) -> bool:
        return self.state in self.CLOSED_STATES

    @fsm_log_by
    @transition(
        field=state, source=State.NEW, target=State.QUALIFIED, custom={"label": _("Qualify")}
    )
    def qualify(self, by=None) -> None:
        pass

    @fsm_log_by
    @transition(
        field=state,
        source=State.QUALIFIED,
        target=State.PROPOSAL,
        custom={"label": _("Move to proposal")},
    )
    def propose(self, by=None) -> None:
        pass

    @fsm_log_by
    @transition(
        field=state,
        source=State.PROPOSAL,
        target=State.NEGOTIATION,
        custom={"label": _("Move to negotiation")},
    )
    def negotiate(self, by=None) -> None:
        pass

    @fsm_log_by
    @transition(field=state, source=OPEN_STATES, target=State.WON, custom={"label": _("Win")})
    def win(self, by=None) -> None:
        pass

    @fsm_log_by
    @fsm_log_description
    @transition(
        field=state, source=OPEN_STATES, target=State.LOST, custom={"label": _("Mark lost")}
    )
    def lose(self, by=None, description=None) -> None:
        pass


# How a state reads to the customer (Spanish source text, translated per company); the admin
# keeps the choice labels above.
OPPORTUNITY_STATE_LABELS: dict[str, Promise] = {
    Opportunity.State.NEW: _("nueva"),
    Opportunity.State.QUALIFIED: _("calificada"),
    Opportunity.State.PROPOSAL: _("en propuesta"),
    Opportunity.State.NEGOTIATION: _("en negociación"),
    Opportunity.State.WON: _("ganada"),
    Opportunity.State.LOST: _("perdida"),
}


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
    subtotal = _money_field(_("subtotal"), default=Decimal(0))
    tax_total = _money_field(_("tax"), default=Decimal(0))
    total = _money_field(_("total"), default=Decimal(0))
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
    unit_price = _money_field(_("unit price"))
    tax_rate = models.DecimalField(_("tax rate (%)"), max_digits=5, decimal_places=2)
    subtotal = _money_field(_("subtotal"))
    tax = _money_field(_("tax"))
    total = _money_field(_("total"))

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


class SalesSettings(models.Model):
    """A company's sales rules; created with these defaults the first time they are needed."""

    # A lead that came in this morning should be called back today: half a working day.
    DEFAULT_LEAD_PICKUP_HOURS = 4

    company = models.OneToOneField(
        Company, on_delete=models.CASCADE, related_name="sales_settings", verbose_name=_("company")
    )
    lead_pickup_hours = models.PositiveSmallIntegerField(
        _("lead pickup time (hours)"),
        default=DEFAULT_LEAD_PICKUP_HOURS,
        validators=[MinValueValidator(1), MaxValueValidator(24 * 30)],
        help_text=_(
            "A new lead nobody has taken this many hours after it came in is highlighted on "
            "the dashboard and in the opportunities list."
        ),
    )

    class Meta:
        verbose_name = _("sales settings")
        verbose_name_plural = _("sales settings")

    def __str__(self) -> str:
        return str(self.company)
