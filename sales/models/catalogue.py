"""What is sold: products and their stock, price lists and their prices; the money field and
currency rule every sales model shares."""

from decimal import Decimal

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Upper
from django.utils.translation import gettext_lazy as _

from core.models import Company
from sales import money


def money_field(verbose_name: str, **kwargs) -> models.DecimalField:
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


def currency_clean(currency: str | None) -> str:
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
        self.currency = currency_clean(self.currency)
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
    unit_price = money_field(_("unit price"))

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
