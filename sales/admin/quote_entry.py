"""Typing a quote in the admin: a row per product, found by name or SKU as staff type
(Django admin's own autocomplete), and a quantity. Each row's unit price, stock left and
total, and the quote's totals with tax, show as staff type (`quote_entry.js` posts the form
to the preview view, which prices it as quote_create would, reading only); every problem
comes at once, in staff's words, on the page and again when the form is saved.
"""

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.utils.text import capfirst
from django.utils.translation import gettext_lazy as _

from core.admin import staff_scoped
from core.errors import GaranteError
from core.models import Company
from sales import money
from sales.models import Product, Quote, QuoteLine
from sales.services.quote_lifecycle import quote_create
from sales.services.quote_pricing import (
    MAX_LINE_QUANTITY,
    QuoteItem,
    QuotePreview,
    quote_preview,
)

# The inline formset's prefix: QuoteLine.quote's related name.
PREFIX = "lines"


class QuoteCreateForm(forms.ModelForm):
    """Who the draft is for; its products are the rows below it (QuoteEntryInline)."""

    class Meta:
        model = Quote
        fields = ["company", "contact", "opportunity"]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        company, contact = data.get("company"), data.get("contact")
        if company and contact and contact.company_id != company.pk:
            self.add_error("contact", _("That contact belongs to another company."))
        opportunity = data.get("opportunity")
        if opportunity and contact and opportunity.contact_id != contact.pk:
            self.add_error("opportunity", _("That opportunity is of another contact."))
        return data


class QuoteEntryFormSet(forms.BaseInlineFormSet):
    """The rows, checked together: priced and counted against the stock as the quote would
    be (quote_preview: every problem on its row, at once), then the service itself run and
    rolled back, so that no rule of quote_create is missed or said another way."""

    def clean(self) -> None:
        super().clean()
        quote: Quote = self.instance
        if quote.company_id is None or any(form.errors for form in self.forms):
            return  # the quote's own fields, or a row's, are wrong already: said there
        company = quote.company
        rows: list[tuple[forms.Form, Product, int]] = []
        for form in self.forms:
            product = form.cleaned_data.get("product")
            if product is None or form.cleaned_data.get("DELETE"):
                continue
            if product.company_id != company.pk:
                form.add_error("product", _("That product belongs to another company."))
                continue
            rows.append((form, product, form.cleaned_data["quantity"]))
        if any(form.errors for form in self.forms):
            return
        preview = quote_preview(
            company=company, rows=[(p.sku, q) for _f, p, q in rows], at=timezone.now()
        )
        for (form, _product, _quantity), line in zip(rows, preview.lines, strict=True):
            for problem in line.problems:
                form.add_error(None, problem)
        if preview.problems:
            raise forms.ValidationError(list(preview.problems))
        if not preview.ok:
            return
        self.items = [QuoteItem(sku=p.sku, quantity=q) for _f, p, q in rows]
        try:
            with transaction.atomic():
                quote_create(
                    company=company,
                    contact=quote.contact,
                    items=self.items,
                    opportunity=quote.opportunity,
                    send=False,
                )
                raise _DryRunDone
        except _DryRunDone:
            pass
        except GaranteError as error:
            raise forms.ValidationError(str(error.user_message)) from None


class _DryRunDone(Exception):
    pass


class QuoteEntryInline(admin.TabularInline):
    """The rows of a new quote. Shown only on the add page: a quote's lines, once made, are
    the service's (QuoteLineInline shows them read-only)."""

    model = QuoteLine
    formset = QuoteEntryFormSet
    fields = ["product", "quantity", "unit_price_shown", "available_shown", "total_shown"]
    readonly_fields = ["unit_price_shown", "available_shown", "total_shown"]
    autocomplete_fields = ["product"]
    extra = 3
    min_num = 1
    max_num = 50
    can_delete = False
    verbose_name = _("product")
    verbose_name_plural = _("products")

    class Media:
        js = ["sales/quote_entry.js"]
        css = {"all": ["sales/quote_entry.css"]}

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "product":
            kwargs["queryset"] = staff_scoped(request, Product.objects.filter(active=True))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        if db_field.name == "quantity":
            return forms.IntegerField(
                label=_("quantity"), min_value=1, max_value=MAX_LINE_QUANTITY, initial=1
            )
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "product":
            # A row picks a product: editing the catalogue is another page's work.
            wrapper = field.widget
            wrapper.can_add_related = wrapper.can_change_related = False
            wrapper.can_delete_related = wrapper.can_view_related = False
        return field

    # Filled in as staff type (quote_entry.js); "—" until then, and without JavaScript.
    @admin.display(description=_("unit price before tax"))
    def unit_price_shown(self, line: QuoteLine) -> str:
        return "—"

    @admin.display(description=_("in stock"))
    def available_shown(self, line: QuoteLine) -> str:
        return "—"

    @admin.display(description=_("total with tax"))
    def total_shown(self, line: QuoteLine) -> str:
        return "—"

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None


def preview_response(request: HttpRequest, allowed_company_ids: set[int] | None) -> JsonResponse:
    """The quote form's rows priced (POST: the add form as it stands), for quote_entry.js.
    Only a company where the staff member may add quotes is priced."""
    if request.method != "POST":
        return JsonResponse({"detail": "POST the quote form"}, status=405)
    company_id = request.POST.get("company", "")
    if not company_id.isascii() or not company_id.isdigit():
        return JsonResponse({"rows": [], "problems": [str(_("Choose the company first."))]})
    if allowed_company_ids is not None and int(company_id) not in allowed_company_ids:
        raise PermissionDenied
    company = Company.objects.filter(pk=int(company_id)).first()
    if company is None:
        raise PermissionDenied
    indexes, product_ids, quantities = _posted_rows(request)
    products = Product.objects.filter(company=company, pk__in=product_ids).in_bulk()
    typed = [
        (index, products.get(product_id), quantity)
        for index, product_id, quantity in zip(indexes, product_ids, quantities, strict=True)
    ]
    priced = [(i, p, q) for i, p, q in typed if p is not None]
    rows: list[dict[str, Any]] = [
        {"index": i, "problems": [str(_("That product belongs to another company."))]}
        for i, p, _q in typed
        if p is None
    ]
    if not priced:
        # Nothing chosen yet: nothing to price, and "add a product" would only be noise.
        return JsonResponse({"rows": rows, "problems": [], **_NO_TOTALS, "labels": _labels()})
    preview = quote_preview(
        company=company, rows=[(p.sku, q) for _i, p, q in priced], at=timezone.now()
    )
    rows += [
        _row_json(index, line, preview)
        for (index, _p, _q), line in zip(priced, preview.lines, strict=True)
    ]
    totals = _NO_TOTALS
    if all(line.total is not None for line in preview.lines) and not preview.problems:
        totals = {
            "subtotal": money.shown(preview.subtotal, preview.currency),
            "tax": money.shown(preview.tax, preview.currency),
            "total": money.shown(preview.total, preview.currency),
        }
    return JsonResponse(
        {"rows": rows, "problems": list(preview.problems), **totals, "labels": _labels()}
    )


_NO_TOTALS = {"subtotal": "—", "tax": "—", "total": "—"}


def _labels() -> dict[str, str]:
    return {key: capfirst(str(label)) for key, label in _LABELS.items()}


_LABELS = {"subtotal": _("subtotal"), "tax": _("tax"), "total": _("total")}


def _posted_rows(request: HttpRequest) -> tuple[list[int], list[int], list[int | None]]:
    """The rows of the posted formset that name a product: their index, product id and the
    quantity typed (None when it is not a whole number)."""
    try:
        total = min(int(request.POST.get(f"{PREFIX}-TOTAL_FORMS", "0")), 200)
    except ValueError:
        total = 0
    indexes, product_ids, quantities = [], [], []
    for index in range(total):
        product = request.POST.get(f"{PREFIX}-{index}-product", "")
        if not (product.isascii() and product.isdigit()):
            continue
        quantity = request.POST.get(f"{PREFIX}-{index}-quantity", "").strip()
        indexes.append(index)
        product_ids.append(int(product))
        whole = quantity.isascii() and quantity.isdigit() and len(quantity) < 9
        quantities.append(int(quantity) if whole else None)
    return indexes, product_ids, quantities


def _row_json(index: int, line: Any, preview: QuotePreview) -> dict[str, Any]:
    def shown(amount: Any) -> str:
        return "—" if amount is None else money.shown(amount, preview.currency)

    return {
        "index": index,
        "unit_price": shown(line.unit_price),
        "available": "—" if line.available is None else line.available,
        "total": shown(line.total),
        "problems": list(line.problems),
    }
