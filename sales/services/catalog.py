"""Catalog writes: products, their stock (and what an accepted quote reserves), price lists.

A product's `quantity_reserved` is the sum of its live StockReservations. Both change only
here, together, under the product's row lock (products locked in primary-key order), so
concurrent acceptances, deliveries and cancellations serialise per product and the counter
never drifts from the rows it sums.
"""

from datetime import datetime
from decimal import Decimal

from django.db import transaction
from django.db.models import Case, F, IntegerField, OuterRef, Subquery, Sum, Value, When
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.errors import ValidationFailed
from core.models import Company
from sales.models import PriceList, PriceListItem, Product, Quote, QuoteLine, StockReservation


@transaction.atomic
def product_create(
    *,
    company: Company,
    sku: str,
    name: str,
    description: str = "",
    unit: str = "unidad",
    tax_rate: Decimal = Decimal("21.00"),
    track_stock: bool = True,
    quantity_on_hand: int = 0,
    active: bool = True,
) -> Product:
    product = Product(
        company=company,
        sku=sku.strip(),
        name=name.strip(),
        description=description,
        unit=unit,
        tax_rate=Decimal(tax_rate),
        track_stock=track_stock,
        quantity_on_hand=quantity_on_hand,
        active=active,
    )
    product.full_clean()
    product.save()
    return product


@transaction.atomic
def product_stock_set(*, product: Product, quantity_on_hand: int) -> Product:
    """Set the counted stock of a product; it may not drop below what is already reserved."""
    product = Product.objects.select_for_update().get(pk=product.pk)
    if quantity_on_hand < product.quantity_reserved:
        raise ValidationFailed(
            _("Las existencias no pueden quedar por debajo de lo ya reservado (%(n)d).")
            % {"n": product.quantity_reserved},
            code="stock_below_reserved",
        )
    product.quantity_on_hand = quantity_on_hand
    product.save(update_fields=["quantity_on_hand"])
    return product


@transaction.atomic
def product_tracking_set(*, product: Product, track_stock: bool) -> Product:
    """Turn stock tracking on or off.

    Turning it off is refused while accepted orders hold live reservations of the product:
    they were promised units on the shelf, and an untracked product's count means nothing,
    so staff deliver or cancel those orders first. Turning it on needs nothing: an untracked
    product never holds reservations, and the orders accepted while it was untracked reserved
    nothing, so they deliver without taking units the count has not seen.
    """
    product = Product.objects.select_for_update().get(pk=product.pk)
    if product.track_stock == track_stock:
        return product
    if not track_stock and product.quantity_reserved:
        orders = (
            StockReservation.objects.filter(product=product, state=StockReservation.State.LIVE)
            .order_by("quote__reference")
            .values_list("quote__reference", flat=True)
        )
        references = list(orders[:5])
        raise ValidationFailed(
            _(
                "%(n)d unidades de %(name)s están reservadas por pedidos aceptados "
                "(%(orders)s); entréguelos o cancélelos antes de dejar de controlar sus "
                "existencias."
            )
            % {
                "n": product.quantity_reserved,
                "name": product.name,
                "orders": ", ".join(references),
            },
            code="stock_reserved",
            reserved=product.quantity_reserved,
            orders=references,
        )
    product.track_stock = track_stock
    product.save(update_fields=["track_stock"])
    return product


@transaction.atomic
def price_list_create(
    *,
    company: Company,
    name: str,
    currency: str | None = None,
    is_default: bool = False,
    valid_from: datetime | None = None,
    valid_until: datetime | None = None,
) -> PriceList:
    price_list = PriceList(
        company=company,
        name=name,
        currency=(currency or company.currency).upper(),
        is_default=is_default,
        valid_from=valid_from,
        valid_until=valid_until,
    )
    price_list.full_clean(exclude=["is_default"])
    return price_list_save(price_list=price_list)


@transaction.atomic
def price_list_save(*, price_list: PriceList) -> PriceList:
    """Save a price list; if it is the default, the company's previous default stops being one
    (a partial unique index allows one default per company)."""
    if price_list.is_default:
        PriceList.objects.filter(company=price_list.company, is_default=True).exclude(
            pk=price_list.pk
        ).update(is_default=False)
    price_list.currency = price_list.currency.upper()
    price_list.save()
    return price_list


@transaction.atomic
def price_list_item_set(
    *, price_list: PriceList, product: Product, unit_price: Decimal | str
) -> PriceListItem:
    """Set (create or change) a product's unit price in a price list."""
    item = PriceListItem.objects.filter(price_list=price_list, product=product).first()
    item = item or PriceListItem(price_list=price_list, product=product)
    item.unit_price = Decimal(unit_price)
    item.full_clean()
    item.save()
    return item


def insufficient_stock(product: Product) -> ValidationFailed:
    """VALIDATION: not enough of this product for what is asked."""
    # Quantities are not disclosed to customers; the SKU says which product is short.
    return ValidationFailed(
        _("No hay existencias suficientes de %(name)s para esa cantidad.") % {"name": product.name},
        code="insufficient_stock",
        sku=product.sku,
    )


def stock_reserve(quote: Quote) -> None:
    """Reserve every tracked product of the quote, or nothing; refuse before writing anything.
    Call inside a transaction, holding the quote's row lock.

    One statement locks the quote's products in primary-key order, each read with the
    quantity the quote needs; one UPDATE reserves them all, one INSERT records what this quote
    holds of each (what delivery consumes and cancellation releases).
    """
    needed = (
        QuoteLine.objects.filter(quote=quote, product=OuterRef("pk"))
        .order_by()
        .values("product")
        .annotate(total=Sum("quantity"))
        .values("total")
    )
    products = list(
        Product.objects.select_for_update()
        .filter(pk__in=QuoteLine.objects.filter(quote=quote).values("product_id"))
        .annotate(needed=Subquery(needed, output_field=IntegerField()))
        .order_by("pk")
    )
    tracked = [product for product in products if product.track_stock]
    for product in tracked:
        if product.quantity_available < product.needed:
            raise insufficient_stock(product)
    if tracked:
        Product.objects.filter(pk__in=[product.pk for product in tracked]).update(
            quantity_reserved=F("quantity_reserved")
            + Case(
                *(When(pk=product.pk, then=Value(product.needed)) for product in tracked),
                default=Value(0),
                output_field=IntegerField(),
            )
        )
        StockReservation.objects.bulk_create(
            StockReservation(quote=quote, product=product, quantity=product.needed)
            for product in tracked
        )


def stock_settle(quote: Quote, *, consume: bool, now: datetime | None = None) -> None:
    """End the quote's live reservations: consumed (the units leave the shelf: on hand and
    reserved both drop) when its order is delivered, released (available again) otherwise.
    Call inside a transaction, holding the quote's row lock.

    Its products are locked in primary-key order, as acceptance locks them. A reservation
    the product's counter does not cover would be a broken invariant, not a customer's error:
    the database's constraints refuse it and the whole transition rolls back.
    """
    live = list(
        StockReservation.objects.filter(quote=quote, state=StockReservation.State.LIVE)
        .select_for_update()
        .order_by("product_id")
    )
    if not live:
        return
    held = {reservation.product_id: reservation.quantity for reservation in live}
    # The products' row locks, in primary-key order, before their counters change.
    list(Product.objects.select_for_update().filter(pk__in=held).order_by("pk").values("pk"))

    def per_product() -> Case:
        return Case(
            *(When(pk=pk, then=Value(n)) for pk, n in held.items()),
            default=Value(0),
            output_field=IntegerField(),
        )

    changes = {"quantity_reserved": F("quantity_reserved") - per_product()}
    if consume:
        changes["quantity_on_hand"] = F("quantity_on_hand") - per_product()
    Product.objects.filter(pk__in=held).update(**changes)
    StockReservation.objects.filter(pk__in=[r.pk for r in live]).update(
        state=StockReservation.State.CONSUMED if consume else StockReservation.State.RELEASED,
        settled_at=now or timezone.now(),
    )
