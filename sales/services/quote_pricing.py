"""Quote pricing: what a customer asks for, priced from the catalog and the current price list."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.utils.translation import gettext_lazy as _

from core.errors import NotFound, ValidationFailed
from core.models import Company
from sales import money
from sales.models import PriceList, Product
from sales.selectors import price_list_current, products_priced

MAX_QUOTE_LINES = 50
MAX_LINE_QUANTITY = 10_000


@dataclass(frozen=True)
class QuoteItem:
    """What a customer asks to be quoted: a SKU and how many."""

    sku: str
    quantity: int


@dataclass(frozen=True)
class PricedLine:
    product: Product
    quantity: int
    unit_price: Decimal
    tax_rate: Decimal
    subtotal: Decimal
    tax: Decimal
    total: Decimal


@dataclass(frozen=True)
class QuoteTotals:
    lines: list[PricedLine]
    currency: str
    subtotal: Decimal
    tax: Decimal
    total: Decimal


def quote_total_compute(
    *, company: Company, price_list: PriceList, items: Iterable[QuoteItem]
) -> QuoteTotals:
    """Price the items from the catalog and the price list; nothing the caller says counts.

    Each line is rounded to the currency's minor units, and the totals are sums of the lines,
    so what the customer reads line by line adds up. Repeated SKUs are merged.
    """
    wanted: dict[str, int] = {}
    # As the customer wrote each SKU: the database compares them in its own upper case, which
    # is not always Python's ("ß" stays "ß" there, Python makes it "SS").
    given: dict[str, str] = {}
    for item in items:
        text = item.sku.strip()
        key = text.upper()
        quantity = wanted.get(key, 0) + item.quantity
        # Checked per line as quoted: repeats of one SKU are one line.
        if item.quantity < 1 or quantity > MAX_LINE_QUANTITY:
            raise ValidationFailed(
                _("Cada cantidad debe estar entre 1 y %(max)d.") % {"max": MAX_LINE_QUANTITY},
                code="invalid_quantity",
            )
        wanted[key] = quantity
        given.setdefault(key, text)
    if not wanted:
        raise ValidationFailed(_("La cotización necesita al menos un producto."), code="no_items")
    if len(wanted) > MAX_QUOTE_LINES:
        raise ValidationFailed(
            _("Una cotización admite como máximo %(n)d productos distintos.")
            % {"n": MAX_QUOTE_LINES},
            code="too_many_items",
        )
    products = {
        p.sku.upper(): p
        for p in products_priced(
            company=company, price_list=price_list, skus={i.sku.strip() for i in items}
        )
    }
    currency = price_list.currency
    lines: list[PricedLine] = []
    for sku, quantity in wanted.items():
        product = products.get(sku)
        if product is None or product.unit_price is None:
            raise NotFound(
                _("No encontré el producto %(sku)s en nuestro catálogo.") % {"sku": given[sku]},
                code="product_not_found",
                sku=given[sku],
            )
        unit_price = money.quantize(product.unit_price, currency)
        subtotal = money.quantize(unit_price * quantity, currency)
        tax = money.quantize(subtotal * product.tax_rate / 100, currency)
        lines.append(
            PricedLine(
                product=product,
                quantity=quantity,
                unit_price=unit_price,
                tax_rate=product.tax_rate,
                subtotal=subtotal,
                tax=tax,
                total=subtotal + tax,
            )
        )
    subtotal = sum((line.subtotal for line in lines), Decimal(0))
    tax = sum((line.tax for line in lines), Decimal(0))
    stored = [subtotal, tax, subtotal + tax]
    stored += [amount for line in lines for amount in (line.subtotal, line.tax, line.total)]
    if max(abs(amount) for amount in stored) >= money.STORED_AMOUNT_LIMIT:
        # Refused as what it is, not left to fail as a database error (an outage to the agent).
        raise ValidationFailed(
            _(
                "El importe supera el máximo que podemos registrar en una cotización. "
                "Pida menos unidades o divida el pedido en varias cotizaciones."
            ),
            code="amount_too_large",
        )
    return QuoteTotals(
        lines=lines, currency=currency, subtotal=subtotal, tax=tax, total=subtotal + tax
    )


def check_expected_total(
    expected_total: Decimal | str | None, total: Decimal, currency: str
) -> None:
    """An amount the agent believes is the total must be ours exactly, or it is refused."""
    if expected_total is None:
        return
    try:
        expected = Decimal(str(expected_total))
    except ArithmeticError:
        expected = None
    if expected is None or not expected.is_finite() or expected != total:
        raise ValidationFailed(
            _("El importe no coincide: el total correcto es %(total)s.")
            % {"total": money.spoken(total, currency)},
            code="total_mismatch",
            total=money.to_wire(total, currency),
            currency=currency,
        )


def require_price_list(company: Company, at: datetime) -> PriceList:
    """The price list to quote from at `at`, or VALIDATION when the company has none."""
    price_list = price_list_current(company=company, at=at)
    if price_list is None:
        raise ValidationFailed(
            _("Ahora mismo no tenemos una lista de precios vigente para cotizar."),
            code="no_price_list",
        )
    return price_list
