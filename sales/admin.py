"""Staff admin for sales: catalog and stock, price lists, quotes and the opportunity pipeline.

Every transition button, stock count and quote goes through sales.services; no admin form
writes a state, a reservation or a total by itself.
"""

from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from core.admin import (
    CompanyScopedAdmin,
    CsvExportAdmin,
    ServiceTransitionsAdmin,
    TransitionHistoryInline,
)
from core.errors import GaranteError
from core.models import Contact
from core.roles import staff_company_ids
from sales import money
from sales.models import Opportunity, PriceList, PriceListItem, Product, Quote, QuoteLine
from sales.services.catalog import price_list_save, product_stock_set, product_tracking_set
from sales.services.opportunities import (
    CLOSED_READ_ONLY,
    opportunity_create,
    opportunity_details_set,
    opportunity_lose,
    opportunity_negotiate,
    opportunity_propose,
    opportunity_qualify,
    opportunity_win,
)
from sales.services.quote_lifecycle import (
    quote_accept,
    quote_cancel,
    quote_create,
    quote_deliver,
    quote_expire,
    quote_reject,
    quote_send,
)
from sales.services.quote_pricing import QuoteItem


def _company_filter(request: HttpRequest, queryset: Any, path: str = "company") -> Any:
    ids = staff_company_ids(request)
    return queryset if ids is None else queryset.filter(**{f"{path}__in": ids})


# --- Catalog -------------------------------------------------------------------------------------


class ProductForm(forms.ModelForm):
    class Meta:
        model = Product
        fields = [
            "company",
            "sku",
            "name",
            "description",
            "unit",
            "tax_rate",
            "active",
            "track_stock",
            "quantity_on_hand",
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        company = data.get("company") or (self.instance.company if self.instance.pk else None)
        sku = (data.get("sku") or "").strip()
        if company is not None and sku:
            clash = Product.objects.filter(company=company, sku__iexact=sku)
            if clash.exclude(pk=self.instance.pk).exists():
                self.add_error("sku", _("Another product of this company has that SKU."))
        return data

    def clean_quantity_on_hand(self) -> int:
        # The service re-checks under a row lock; this turns the usual case into a form error.
        counted = self.cleaned_data["quantity_on_hand"]
        if self.instance.pk and counted < self.instance.quantity_reserved:
            raise forms.ValidationError(
                _("%(n)d units are reserved by accepted quotes; stock cannot go below that.")
                % {"n": self.instance.quantity_reserved}
            )
        return counted

    def clean_track_stock(self) -> bool:
        # The service re-checks under a row lock (product_tracking_set says why it refuses).
        track = self.cleaned_data["track_stock"]
        if self.instance.pk and not track and self.instance.quantity_reserved:
            raise forms.ValidationError(
                _(
                    "%(n)d units are reserved by accepted orders; deliver or cancel them "
                    "before turning stock tracking off."
                )
                % {"n": self.instance.quantity_reserved}
            )
        return track


@admin.register(Product)
class ProductAdmin(CompanyScopedAdmin):
    form = ProductForm
    list_display = [
        "sku",
        "name",
        "company",
        "active",
        "track_stock",
        "quantity_on_hand",
        "quantity_reserved",
        "available",
    ]
    list_filter = ["active", "track_stock", "company"]
    search_fields = ["sku", "name"]
    readonly_fields = ["quantity_reserved"]

    @admin.display(description=_("available"))
    def available(self, product: Product) -> int | str:
        return product.quantity_available if product.track_stock else "—"

    def get_readonly_fields(self, request: HttpRequest, obj: Product | None = None) -> list:
        return ["company", "quantity_reserved"] if obj is not None else ["quantity_reserved"]

    def save_model(self, request: HttpRequest, obj: Product, form: Any, change: bool) -> None:
        if not change:
            super().save_model(request, obj, form, change)
            return
        # Save only what the form changed: a full save would write back a stale reservation.
        # Stock and its tracking go through their services, which check the reservations.
        services = {"quantity_on_hand", "track_stock"}
        plain = [f for f in form.changed_data if f not in services]
        if plain:
            obj.save(update_fields=plain)
        try:
            if "track_stock" in form.changed_data:
                product_tracking_set(product=obj, track_stock=obj.track_stock)
            if "quantity_on_hand" in form.changed_data:
                product_stock_set(product=obj, quantity_on_hand=obj.quantity_on_hand)
        except GaranteError as error:
            messages.error(request, str(error.user_message))


class ScopedProductInline(admin.TabularInline):
    autocomplete_fields = ["product"]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "product":
            kwargs["queryset"] = _company_filter(request, Product.objects.filter(active=True))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class PriceListItemForm(forms.ModelForm):
    class Meta:
        model = PriceListItem
        fields = ["product", "unit_price"]


class PriceListItemFormSet(forms.BaseInlineFormSet):
    def _construct_form(self, i: int, **kwargs: Any) -> forms.ModelForm:
        form = super()._construct_form(i, **kwargs)
        # Each price checks its decimals against its list's currency; a list being created
        # has no id yet, so each price gets the list itself (as saving will give it).
        form.instance.price_list = self.instance
        return form


class PriceListItemInline(ScopedProductInline):
    model = PriceListItem
    form = PriceListItemForm
    formset = PriceListItemFormSet
    extra = 1

    def get_formset(self, request: HttpRequest, obj: PriceList | None = None, **kwargs: Any):
        formset = super().get_formset(request, obj, **kwargs)
        if obj is not None and obj.pk is not None:
            # New prices are for active products, but a product retired since keeps its row:
            # otherwise the list could not be saved again without deleting its price.
            product = formset.form.base_fields["product"]
            priced_here = PriceListItem.objects.filter(price_list=obj).values("product_id")
            product.queryset = _company_filter(
                request, Product.objects.filter(Q(active=True) | Q(pk__in=priced_here))
            )
        return formset


class PriceListForm(forms.ModelForm):
    class Meta:
        model = PriceList
        fields = ["company", "name", "currency", "valid_from", "valid_until", "is_default"]

    def _get_validation_exclusions(self) -> set[str]:
        # Making this list the default takes it from the current one (price_list_save), so
        # "another list is the default" is not an error here.
        return {*super()._get_validation_exclusions(), "is_default"}


@admin.register(PriceList)
class PriceListAdmin(CompanyScopedAdmin):
    form = PriceListForm
    list_display = ["name", "company", "currency", "is_default", "valid_from", "valid_until"]
    list_filter = ["is_default", "currency", "company"]
    search_fields = ["name"]
    inlines = [PriceListItemInline]

    def save_model(self, request: HttpRequest, obj: PriceList, form: Any, change: bool) -> None:
        price_list_save(price_list=obj)


# --- Quotes --------------------------------------------------------------------------------------


class QuoteCreateForm(forms.ModelForm):
    """Staff create a draft quote: who, and which SKUs. Prices come from the price list."""

    items = forms.CharField(
        label=_("items"),
        widget=forms.Textarea(attrs={"rows": 5}),
        help_text=_('One per line: "SKU quantity", e.g. "CAF-001 3".'),
    )

    class Meta:
        model = Quote
        fields = ["company", "contact", "opportunity"]

    def clean_items(self) -> list[QuoteItem]:
        items = []
        for number, line in enumerate(self.cleaned_data["items"].splitlines(), start=1):
            if not line.strip():
                continue
            sku, _sep, quantity = line.strip().rpartition(" ")
            unsigned = quantity.removeprefix("-")
            # ASCII only: str.isdigit() also takes "²" or "①", which int() refuses.
            if not sku or not (unsigned.isascii() and unsigned.isdigit()):
                raise forms.ValidationError(_("Line %(n)d is not 'SKU quantity'.") % {"n": number})
            if quantity.startswith("-") or int(quantity) == 0:
                raise forms.ValidationError(
                    _("Line %(n)d: the quantity must be a whole number above zero.") % {"n": number}
                )
            items.append(QuoteItem(sku=sku.strip(), quantity=int(quantity)))
        return items

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        company, contact = data.get("company"), data.get("contact")
        if company and contact and contact.company_id != company.pk:
            self.add_error("contact", _("That contact belongs to another company."))
        opportunity = data.get("opportunity")
        if opportunity and contact and opportunity.contact_id != contact.pk:
            self.add_error("opportunity", _("That opportunity is of another contact."))
        if not self.errors and data.get("items"):
            self._dry_run(data)
        return data

    def _dry_run(self, data: dict[str, Any]) -> None:
        """Run the real service and roll it back, so every rule shows as a form error."""
        try:
            with transaction.atomic():
                quote_create(
                    company=data["company"],
                    contact=data["contact"],
                    items=data["items"],
                    opportunity=data.get("opportunity"),
                    send=False,
                )
                raise _DryRunDone
        except _DryRunDone:
            pass
        except GaranteError as error:
            self.add_error(None, str(error.user_message))


class _DryRunDone(Exception):
    pass


class RejectQuoteForm(forms.Form):
    reason = forms.CharField(label=_("reason"), max_length=300, required=False)


class LoseOpportunityForm(forms.Form):
    reason = forms.CharField(label=_("lost reason"), max_length=300)


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
        "send": lambda q, user: quote_send(quote=q, by=user),
        "accept": lambda q, user: quote_accept(quote=q, by=user),
        "reject": lambda q, user, reason="": quote_reject(quote=q, reason=reason, by=user),
        "expire": lambda q, user: quote_expire(quote=q, by=user),
        "deliver": lambda q, user: quote_deliver(quote=q, by=user),
        "cancel": lambda q, user: quote_cancel(quote=q, by=user),
    }
    fsm_forms = {"reject": RejectQuoteForm}
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
    search_fields = [
        "reference",
        "contact__first_name",
        "contact__last_name",
        "contact__document_number",
        "contact__phone",
        "contact__email",
    ]
    date_hierarchy = "created_at"
    inlines = [QuoteLineInline, TransitionHistoryInline]
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
            return ["company", "contact", "opportunity", "items"]
        return self.change_fields

    def get_readonly_fields(self, request: HttpRequest, obj: Quote | None = None) -> Any:
        # A quote's content is decided by the service at creation; staff only move its state.
        return self.change_fields if obj is not None else []

    def get_inlines(self, request: HttpRequest, obj: Quote | None) -> list:
        return self.inlines if obj is not None else []

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "opportunity":
            kwargs["queryset"] = _company_filter(
                request, Opportunity.objects.filter(state__in=Opportunity.OPEN_STATES)
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Quote, form: Any, change: bool) -> None:
        if change:
            return  # nothing is editable; transitions go through their services
        data = form.cleaned_data
        quote = quote_create(
            company=data["company"],
            contact=data["contact"],
            items=data["items"],
            opportunity=data.get("opportunity"),
            send=False,
            by=request.user,
        )
        obj.pk, obj.reference = quote.pk, quote.reference
        obj._state.adding = False

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        if change:
            super().save_related(request, form, formsets, change)


# --- Opportunities -------------------------------------------------------------------------------


class OpportunityForm(forms.ModelForm):
    class Meta:
        model = Opportunity
        fields = ["company", "contact", "title", "notes", "amount", "currency", "owner"]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        company, contact = data.get("company"), data.get("contact")
        if company and contact and contact.company_id != company.pk:
            self.add_error("contact", _("That contact belongs to another company."))
        if not data.get("currency") and company is not None:
            data["currency"] = company.currency  # blank means the company's currency
        data["currency"] = currency = (data.get("currency") or "").upper()
        amount = data.get("amount")
        if amount is not None and currency and not money.is_exact(Decimal(amount), currency):
            self.add_error("amount", _("Too many decimals for %(c)s.") % {"c": currency})
        return data


@admin.register(Opportunity)
class OpportunityAdmin(CsvExportAdmin, ServiceTransitionsAdmin, CompanyScopedAdmin):
    export_fields = [
        "reference",
        "title",
        "state",
        "contact__first_name",
        "contact__last_name",
        "contact__email",
        "amount",
        "currency",
        "owner__username",
        "created_at",
        "closed_at",
    ]
    autocomplete_fields = ["contact"]
    """The pipeline: filter by stage, move with the buttons, close as won or lost."""

    form = OpportunityForm
    fsm_services = {
        "qualify": lambda o, user: opportunity_qualify(opportunity=o, by=user),
        "propose": lambda o, user: opportunity_propose(opportunity=o, by=user),
        "negotiate": lambda o, user: opportunity_negotiate(opportunity=o, by=user),
        "win": lambda o, user: opportunity_win(opportunity=o, by=user),
        "lose": lambda o, user, reason: opportunity_lose(opportunity=o, reason=reason, by=user),
    }
    fsm_forms = {"lose": LoseOpportunityForm}
    list_display = [
        "reference",
        "title",
        "contact",
        "state",
        "amount_shown",
        "owner",
        "created_at",
    ]
    list_filter = ["state", "owner", "company"]
    list_select_related = ["contact", "owner"]
    search_fields = [
        "reference",
        "title",
        "contact__first_name",
        "contact__last_name",
        "contact__document_number",
        "contact__phone",
        "contact__email",
    ]
    date_hierarchy = "created_at"
    inlines = [TransitionHistoryInline]
    readonly_on_change = [
        "reference",
        "company",
        "contact",
        "lost_reason",
        "conversation",
        "created_at",
        "closed_at",
    ]

    def settled(self, opportunity: Opportunity) -> bool:
        # A closed opportunity keeps its title and notes editable (its amount and stage do
        # not change, readonly_on_change); it is never deleted.
        return False

    def deletable(self, opportunity: Opportunity) -> bool:
        return opportunity.state not in Opportunity.CLOSED_STATES

    @admin.display(description=_("amount"), ordering="amount")
    def amount_shown(self, opportunity: Opportunity) -> str:
        return money.shown(opportunity.amount, opportunity.currency)

    def get_fields(self, request: HttpRequest, obj: Opportunity | None = None) -> list[str]:
        fields = ["company", "contact", "title", "notes", "amount", "currency", "owner"]
        if obj is None:
            return fields
        return ["reference", "state", *fields, "lost_reason", "conversation", "created_at"]

    def get_inlines(self, request: HttpRequest, obj: Opportunity | None) -> list:
        return self.inlines if obj is not None else []  # no history before it exists

    def get_readonly_fields(self, request: HttpRequest, obj: Opportunity | None = None) -> Any:
        readonly = super().get_readonly_fields(request, obj)
        if obj is None:
            return readonly
        closed = CLOSED_READ_ONLY if obj.is_closed else ()  # what it closed at
        return (*readonly, *self.readonly_on_change, *closed)

    def get_form(self, request: HttpRequest, obj: Opportunity | None = None, **kwargs: Any):
        form = super().get_form(request, obj, **kwargs)
        if "currency" in form.base_fields:
            form.base_fields["currency"].required = False
        return form

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "owner":
            users = get_user_model().objects.filter(is_staff=True, memberships__isnull=False)
            kwargs["queryset"] = (
                _company_filter(request, users, "memberships__company")
                .distinct()
                .order_by("username")
            )
        if db_field.name == "contact":
            kwargs["queryset"] = _company_filter(request, Contact.objects.all())
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Opportunity, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            # Only what the form changed: a full save would write back a stale stage. The
            # service refuses an amount changed after the opportunity closed (in another tab).
            try:
                opportunity_details_set(
                    opportunity=obj,
                    changes={field: getattr(obj, field) for field in form.changed_data},
                )
            except GaranteError as error:
                messages.error(request, str(error.user_message))
            return
        opportunity = opportunity_create(
            company=data["company"],
            contact=data["contact"],
            title=data["title"],
            notes=data.get("notes", ""),
            amount=data.get("amount") or Decimal(0),
            currency=data.get("currency") or None,
            owner=data.get("owner"),
        )
        obj.pk, obj.reference = opportunity.pk, opportunity.reference
        obj._state.adding = False
