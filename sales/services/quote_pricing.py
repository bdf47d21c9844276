"""Quote pricing: what a customer asks for, priced from the catalog and the current price list."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.utils import formats
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

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


@dataclass(frozen=True)
class LinePreview:
    """One row of a quote as staff type it, priced as the quote would price it."""

    sku: str
    quantity: int | None
    product: Product | None
    unit_price: Decimal | None
    # What may still be promised: None when the product's stock is not tracked.
    available: int | None
    total: Decimal | None
    problems: tuple[str, ...]


@dataclass(frozen=True)
class QuotePreview:
    """A draft quote's rows, totals and every problem at once, in staff's words: what the
    quote form shows while staff type (sales.admin.quote_entry) and refuses on saving."""

    lines: list[LinePreview]
    currency: str
    subtotal: Decimal
    tax: Decimal
    total: Decimal
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems and not any(line.problems for line in self.lines)


def quote_preview(
    *, company: Company, rows: Iterable[tuple[str, int | None]], at: datetime
) -> QuotePreview:
    """Price `rows` (SKU and quantity as typed; a quantity None could not be read) from the
    price list of `at`, and find every problem quote_create would refuse the first of: an
    unknown or unpriced product, a quantity out of bounds, not enough stock (saying how many
    are left), too many products, an amount too large to store. Reads only; one statement
    for the price list and one for the products."""
    rows = [(sku.strip(), quantity) for sku, quantity in rows if sku.strip()]
    price_list = price_list_current(company=company, at=at)
    currency = price_list.currency if price_list is not None else company.currency
    problems: list[str] = []
    if price_list is None:
        problems.append(str(_("There is no price list in force to quote from.")))
    if not rows:
        problems.append(str(_("Add at least one product.")))
    products: dict[str, Product] = {}
    if price_list is not None and rows:
        products = {
            p.sku.upper(): p
            for p in products_priced(
                company=company, price_list=price_list, skus={sku for sku, _q in rows}
            )
        }
    # Repeated SKUs are one line of the quote: their quantities add up against the stock.
    wanted: dict[str, int] = {}
    for sku, quantity in rows:
        wanted[sku.upper()] = wanted.get(sku.upper(), 0) + (quantity or 0)
    if len(wanted) > MAX_QUOTE_LINES:
        problems.append(
            str(_("A quote takes at most %(n)d different products.") % {"n": MAX_QUOTE_LINES})
        )
    lines: list[LinePreview] = []
    seen: set[str] = set()
    for sku, quantity in rows:
        key = sku.upper()
        product = products.get(key)
        line_problems: list[str] = []
        if quantity is None or quantity < 1 or wanted[key] > MAX_LINE_QUANTITY:
            line_problems.append(
                str(
                    _("The quantity must be between 1 and %(max)s.")
                    % {"max": formats.number_format(MAX_LINE_QUANTITY, force_grouping=True)}
                )
            )
        unit_price = total = None
        available = None
        if price_list is None:
            pass
        elif product is None:
            line_problems.append(str(_("No active product has the SKU “%(sku)s”.") % {"sku": sku}))
        elif product.unit_price is None:
            line_problems.append(
                str(_("“%(name)s” is not on the price list in force.") % {"name": product.name})
            )
        else:
            unit_price = money.quantize(product.unit_price, currency)
            if quantity is not None and quantity > 0:
                subtotal = money.quantize(unit_price * quantity, currency)
                total = subtotal + money.quantize(subtotal * product.tax_rate / 100, currency)
        if product is not None and product.track_stock:
            available = max(product.quantity_available, 0)
            if key not in seen and wanted[key] > 0 and available < wanted[key]:
                line_problems.append(_stock_problem(product.name, available, wanted[key]))
        seen.add(key)
        lines.append(
            LinePreview(
                sku=sku,
                quantity=quantity,
                product=product,
                unit_price=unit_price,
                available=available,
                total=total,
                problems=tuple(line_problems),
            )
        )
    subtotal = tax = Decimal(0)
    # Totals only for rows quote_create would take as they are: each priced, and no product
    # asked for past the most units (repeats add up; that is said on their rows already).
    priced = bool(lines) and all(line.total is not None for line in lines)
    countable = priced and max(wanted.values()) <= MAX_LINE_QUANTITY
    if price_list is not None and countable and not problems:
        merged = [QuoteItem(sku=sku, quantity=quantity) for sku, quantity in wanted.items()]
        try:
            totals = quote_total_compute(company=company, price_list=price_list, items=merged)
        except ValidationFailed as error:
            # The one rule left once every row is priced and within bounds; any other refusal
            # here would be a row's problem this function failed to find, a bug to surface.
            if error.code != "amount_too_large":
                raise
            problems.append(
                str(_("The amount is above what a quote can hold: split it into several quotes."))
            )
        else:
            subtotal, tax = totals.subtotal, totals.tax
    return QuotePreview(
        lines=lines,
        currency=currency,
        subtotal=subtotal,
        tax=tax,
        total=subtotal + tax,
        problems=tuple(problems),
    )


def _stock_problem(name: str, available: int, wanted: int) -> str:
    if available == 0:
        return str(_("“%(name)s” is out of stock.") % {"name": name})
    # Written as the language groups its numbers (1.234 in Spanish), as the most units are.
    return str(
        ngettext(
            "Only %(available)s of “%(name)s” is in stock (%(wanted)s asked).",
            "Only %(available)s of “%(name)s” are in stock (%(wanted)s asked).",
            available,
        )
        % {
            "available": formats.number_format(available, force_grouping=True),
            "name": name,
            "wanted": formats.number_format(wanted, force_grouping=True),
        }
    )
