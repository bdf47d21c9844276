"""Staff admin for the catalog: products and their stock, price lists and their items."""

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Q
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from core.admin import (
    CompanyScopedAdmin,
    staff_scoped,
)
from sales.models import PriceList, PriceListItem, Product
from sales.services.catalog import price_list_save, product_stock_set, product_tracking_set


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

    def get_search_results(self, request: HttpRequest, queryset: Any, search_term: str) -> Any:
        queryset, may_have_duplicates = super().get_search_results(request, queryset, search_term)
        if request.GET.get("model_name") == "quoteline":
            # The quote form's product picker (sales.admin.quote_entry) offers what can be sold.
            queryset = queryset.filter(active=True)
        return queryset, may_have_duplicates

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
        if "track_stock" in form.changed_data:
            product_tracking_set(product=obj, track_stock=obj.track_stock)
        if "quantity_on_hand" in form.changed_data:
            product_stock_set(product=obj, quantity_on_hand=obj.quantity_on_hand)


class ScopedProductInline(admin.TabularInline):
    autocomplete_fields = ["product"]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "product":
            kwargs["queryset"] = staff_scoped(request, Product.objects.filter(active=True))
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class PriceListItemForm(forms.ModelForm):
    class Meta:
        model = PriceListItem
        fields = ["product", "unit_price"]


class PriceListItemFormSet(forms.BaseInlineFormSet):
    def add_fields(self, form: forms.ModelForm, index: int | None) -> None:
        super().add_fields(form, index)
        # Each price checks its decimals against its list's currency; a list being created
        # has no id yet, so each price gets the list itself (as saving will give it).
        form.instance.price_list = self.instance


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
            product.queryset = staff_scoped(
                request, Product.objects.filter(Q(active=True) | Q(pk__in=priced_here))
            )
        return formset


class PriceListForm(forms.ModelForm):
    class Meta:
        model = PriceList
        fields = ["company", "name", "currency", "valid_from", "valid_until", "is_default"]


@admin.register(PriceList)
class PriceListAdmin(CompanyScopedAdmin):
    form = PriceListForm
    list_display = ["name", "company", "currency", "is_default", "valid_from", "valid_until"]
    list_filter = ["is_default", "currency", "company"]
    search_fields = ["name"]
    inlines = [PriceListItemInline]

    def save_model(self, request: HttpRequest, obj: PriceList, form: Any, change: bool) -> None:
        price_list_save(price_list=obj)
