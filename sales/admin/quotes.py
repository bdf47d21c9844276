"""Staff admin for quotes: created as drafts from the price list, moved only by sales.services."""

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.utils.translation import gettext_lazy as _

from core.admin import (
    CompanyScopedAdmin,
    CsvExportAdmin,
    ServiceTransitionsAdmin,
    TransitionHistoryInline,
    contact_search_fields,
    staff_scoped,
)
from core.admin.confirmation import Confirmation, customer_told, nothing_sent
from core.admin.localtime import local_datetime_shown
from sales import money
from sales.admin.quote_entry import QuoteCreateForm, QuoteEntryInline, preview_response
from sales.models import Opportunity, Quote, QuoteLine, QuoteMessage
from sales.quote_messages import channel_for, reason_shown
from sales.services.quote_lifecycle import (
    quote_accept,
    quote_cancel,
    quote_create,
    quote_deliver,
    quote_expire,
    quote_reject,
    quote_send,
)


class QuoteLineInline(admin.TabularInline):
    model = QuoteLine
    extra = 0
    can_delete = False
    fields = [
        "sku",
        "name",
        "quantity",
        "unit_price_shown",
        "tax_rate",
        "subtotal_shown",
        "tax_shown",
        "total_shown",
    ]
    readonly_fields = fields

    @admin.display(description=_("unit price"))
    def unit_price_shown(self, line: QuoteLine) -> str:
        return money.shown(line.unit_price, line.quote.currency)

    @admin.display(description=_("subtotal"))
    def subtotal_shown(self, line: QuoteLine) -> str:
        return money.shown(line.subtotal, line.quote.currency)

    @admin.display(description=_("tax"))
    def tax_shown(self, line: QuoteLine) -> str:
        return money.shown(line.tax, line.quote.currency)

    @admin.display(description=_("total"))
    def total_shown(self, line: QuoteLine) -> str:
        return money.shown(line.total, line.quote.currency)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _quote_effect(outcome: str) -> Any:
    """What settling a quote does, and whether the customer is told: by the channel its
    message would take now (sales.quote_messages); a draft never reached them."""

    def effect(quote: Quote) -> list[str]:
        described = _("%(contact)s · %(total)s") % {
            "contact": quote.contact,
            "total": money.shown(quote.total, quote.currency),
        }
        name = str(quote.contact)
        if quote.sent_at is None:
            return [described, outcome, nothing_sent(name)]
        channel, why = channel_for(quote.contact)
        told = customer_told(name, channel) if channel else nothing_sent(name, why)
        return [described, outcome, told]

    return effect


def _send_effect(quote: Quote) -> list[str]:
    """Sending emails the quote to the customer's own address, if they have one."""
    described = _("%(contact)s · %(total)s") % {
        "contact": quote.contact,
        "total": money.shown(quote.total, quote.currency),
    }
    name = str(quote.contact)
    if quote.contact.email:
        told = _(
            "%(name)s will receive the quote by email, with its link to accept or reject it."
        ) % {"name": name}
    else:
        told = _(
            "%(name)s has no email: nothing is sent; they can answer the quote through the agent."
        ) % {"name": name}
    return [described, _("The quote becomes valid for the customer to accept."), told]


class QuoteMessageInline(admin.TabularInline):
    """What the customer was sent when staff settled the quote or order
    (sales.quote_messages), each with its delivery state: read-only."""

    model = QuoteMessage
    extra = 0
    can_delete = False
    fields = ["kind", "reason", "channel", "masked_destination", "status", "sent", "why"]
    readonly_fields = fields
    verbose_name = _("message to the customer")
    verbose_name_plural = _("messages to the customer")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return True  # whoever may see the quote may see what its customer was sent

    @admin.display(description=_("sent"))
    def sent(self, message: QuoteMessage) -> str:
        if message.sent_at is None:
            return "—"
        return local_datetime_shown(message.sent_at, message.quote.company.tz)

    @admin.display(description=_("why not sent / error"))
    def why(self, message: QuoteMessage) -> str:
        return reason_shown(message.error) if message.error else "—"


MESSAGE_OF = {
    "reject": QuoteMessage.Kind.QUOTE_REJECTED,
    "expire": QuoteMessage.Kind.QUOTE_WITHDRAWN,
    "cancel": QuoteMessage.Kind.ORDER_CANCELLED,
}
CHANNEL_WORDS = {QuoteMessage.Channel.EMAIL: _("email"), QuoteMessage.Channel.SMS: _("SMS")}


@admin.register(Quote)
class QuoteAdmin(CsvExportAdmin, ServiceTransitionsAdmin, CompanyScopedAdmin):
    export_fields = [
        "reference",
        "state",
        "contact__first_name",
        "contact__last_name",
        "contact__email",
        "currency",
        "subtotal",
        "tax_total",
        "total",
        "valid_until",
        "created_at",
        "sent_at",
    ]
    autocomplete_fields = ["contact", "opportunity"]
    fsm_services = {
        "send": lambda q, user: quote_send(quote=q, by=user),  # confirmed: it emails the quote
        "accept": lambda q, user: quote_accept(quote=q, by=user),
        "reject": lambda q, user, reason: quote_reject(quote=q, reason=reason, by=user),
        "expire": lambda q, user, reason: quote_expire(quote=q, by=user, reason=reason),
        "deliver": lambda q, user: quote_deliver(quote=q, by=user),
        "cancel": lambda q, user, reason: quote_cancel(quote=q, by=user, reason=reason),
    }
    # The beat task lapses a draft past its validity, but a draft never reached the customer:
    # there is nothing to withdraw from them, so staff are offered "Expire" on a sent quote only.
    fsm_offered_from = {"expire": (Quote.State.SENT,)}
    fsm_confirmations = {
        "send": Confirmation(
            reasons=[],
            effect=_send_effect,
            bulk_label=_("Send the selected quotes"),
            asks_reason=False,
            reversible=True,
        ),
        "reject": Confirmation(
            reasons=[
                ("too_expensive", _("Too expensive")),
                ("other_supplier", _("The customer chose another supplier")),
                ("not_needed", _("No longer needed")),
            ],
            effect=_quote_effect(
                _("The quote is recorded as rejected: it can no longer be accepted.")
            ),
            bulk_label=_("Reject the selected quotes"),
        ),
        "expire": Confirmation(
            reasons=[
                ("conditions_changed", _("Prices or conditions changed")),
                ("no_answer", _("No answer from the customer")),
                ("replaced", _("Replaced by a new quote")),
            ],
            effect=_quote_effect(
                _("The quote is withdrawn: the customer can no longer accept it.")
            ),
            bulk_label=_("Expire the selected quotes"),
        ),
        "cancel": Confirmation(
            reasons=[
                ("customer_asked", _("At the customer's request")),
                ("cannot_supply", _("It cannot be supplied")),
                ("duplicate", _("Duplicate order")),
            ],
            effect=_quote_effect(
                _("The order will not be delivered: its reserved stock is released.")
            ),
            bulk_label=_("Cancel the selected orders"),
        ),
    }
    list_display = [
        "reference",
        "contact",
        "state",
        "amount",
        "valid_until",
        "opportunity",
        "created_at",
    ]
    list_filter = ["state", "currency", "company"]
    list_select_related = ["contact", "opportunity"]
    search_fields = ["reference", *contact_search_fields("contact__")]
    date_hierarchy = "created_at"
    inlines = [QuoteLineInline, QuoteMessageInline, TransitionHistoryInline]
    change_fields = [
        "reference",
        "state",
        "company",
        "contact",
        "opportunity",
        "price_list",
        "currency",
        "subtotal_shown",
        "tax_shown",
        "amount",
        "valid_until",
        "rejection_reason",
        "conversation",
        "created_at",
        "sent_at",
        "resolved_at",
        "delivered_at",
        "cancelled_at",
        "emailed_at",
        "email_error",
    ]

    @admin.display(description=_("total"), ordering="total")
    def amount(self, quote: Quote) -> str:
        return money.shown(quote.total, quote.currency)

    @admin.display(description=_("subtotal"))
    def subtotal_shown(self, quote: Quote) -> str:
        return money.shown(quote.subtotal, quote.currency)

    @admin.display(description=_("tax"))
    def tax_shown(self, quote: Quote) -> str:
        return money.shown(quote.tax_total, quote.currency)

    def fsm_confirmed_done(self, request: HttpRequest, done: Quote, name: str) -> None:
        """Say whether the customer is being told, by which channel, or why they cannot be
        (the change is kept all the same)."""
        kind = MESSAGE_OF.get(name)
        message = (
            None
            if kind is None
            else QuoteMessage.objects.filter(quote=done, kind=kind).select_related("quote").first()
        )
        if message is None:
            return
        name_shown = done.contact.first_name
        if message.status == QuoteMessage.Status.NOT_SENT:
            self.message_user(
                request,
                _("%(reference)s: done, but %(name)s could not be told: %(reason)s.")
                % {
                    "reference": done.reference,
                    "name": name_shown,
                    "reason": reason_shown(message.error),
                },
                messages.WARNING,
            )
            return
        self.message_user(
            request,
            _("%(reference)s: %(name)s is being told by %(channel)s, with the reason.")
            % {
                "reference": done.reference,
                "name": name_shown,
                "channel": CHANNEL_WORDS[message.channel],
            },
            messages.INFO,
        )

    def deletable(self, quote: Quote) -> bool:
        # A quote once sent is the customer's (they hold its reference, an accepted one holds
        # stock): staff expire it instead. Drafts never sent may be deleted, withdrawn or not.
        # The bulk action asks this of every selected quote too.
        return quote.sent_at is None

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        super().delete_queryset(request, queryset.filter(sent_at__isnull=True))

    def get_form(self, request: HttpRequest, obj: Quote | None = None, **kwargs: Any) -> Any:
        if obj is None:
            kwargs["form"] = QuoteCreateForm
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Quote | None = None) -> list[str]:
        if obj is None:
            return ["company", "contact", "opportunity"]
        return self.change_fields

    def get_readonly_fields(self, request: HttpRequest, obj: Quote | None = None) -> Any:
        # A quote's content is decided by the service at creation; staff only move its state.
        return self.change_fields if obj is not None else []

    def get_inlines(self, request: HttpRequest, obj: Quote | None) -> list:
        return self.inlines if obj is not None else [QuoteEntryInline]

    def get_urls(self) -> list:
        return [
            path(
                "add/preview/",
                self.admin_site.admin_view(self.preview_view),
                name="sales_quote_preview",
            ),
            *super().get_urls(),
        ]

    def preview_view(self, request: HttpRequest) -> HttpResponse:
        """The add form's rows priced as staff type them (sales.admin.quote_entry)."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        return preview_response(request, self.allowed_company_ids(request, "add"))

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "opportunity":
            kwargs["queryset"] = staff_scoped(
                request, Opportunity.objects.filter(state__in=Opportunity.OPEN_STATES)
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Quote, form: Any, change: bool) -> None:
        # Nothing is editable once made; a new quote is made with its rows (save_related).
        return

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        if change:
            super().save_related(request, form, formsets, change)
            return
        data = form.cleaned_data
        (rows,) = formsets  # QuoteEntryInline's, checked by its clean
        quote = quote_create(
            company=data["company"],
            contact=data["contact"],
            items=rows.items,
            opportunity=data.get("opportunity"),
            send=False,
            by=request.user,
        )
        obj = form.instance  # what response_add and the history entry name
        obj.pk, obj.reference = quote.pk, quote.reference
        obj._state.adding = False
        # What the history entry lists as added (a formset's documented save() results).
        rows.new_objects = list(quote.lines_shown())
        rows.changed_objects, rows.deleted_objects = [], []
