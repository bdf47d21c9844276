"""Writes of sales. Every business rule lives here: totals recomputed from the catalog and the
price list, stock reserved under row locks at acceptance, and the guarded state transitions.

Lock order, everywhere, to keep concurrent writers free of deadlocks: quote, then its
opportunity, then its products by ascending primary key.
"""

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Case, F, IntegerField, OuterRef, Subquery, Sum, Value, When
from django.template.loader import render_to_string
from django.utils import formats, timezone, translation
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django_fsm import can_proceed

from core.errors import NotFound, NotInCompany, ValidationFailed
from core.jobs import task_named
from core.mail import smtp_error_is_transient, smtp_error_summary
from core.models import Company, Contact, Conversation
from core.references import insert_with_fresh_reference
from core.states import state_shown
from core.transactions import one_at_a_time, without_savepoint
from sales import money
from sales.models import Opportunity, PriceList, PriceListItem, Product, Quote, QuoteLine
from sales.selectors import price_list_current, products_priced

logger = logging.getLogger("garante.sales")

QUOTE_VALIDITY = timedelta(days=15)
MAX_QUOTE_LINES = 50
MAX_LINE_QUANTITY = 10_000


# --- Catalog and stock -------------------------------------------------------------------------


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


# --- Quotes --------------------------------------------------------------------------------------


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


# How a state reads to the customer (Spanish source text, translated per company); the admin
# keeps the model's choice labels.
QUOTE_STATE_LABELS: dict[str, Promise] = {
    Quote.State.DRAFT: _("borrador"),
    Quote.State.SENT: _("enviada"),
    Quote.State.ACCEPTED: _("aceptada"),
    Quote.State.REJECTED: _("rechazada"),
    Quote.State.EXPIRED: _("vencida"),
}
OPPORTUNITY_STATE_LABELS: dict[str, Promise] = {
    Opportunity.State.NEW: _("nueva"),
    Opportunity.State.QUALIFIED: _("calificada"),
    Opportunity.State.PROPOSAL: _("en propuesta"),
    Opportunity.State.NEGOTIATION: _("en negociación"),
    Opportunity.State.WON: _("ganada"),
    Opportunity.State.LOST: _("perdida"),
}

QUOTE_STATE_MESSAGES: dict[str, Promise] = {
    Quote.State.DRAFT: _("Esa cotización todavía no se ha enviado."),
    Quote.State.SENT: _("Esa cotización ya se envió y está pendiente de respuesta."),
    Quote.State.ACCEPTED: _("Esa cotización ya fue aceptada."),
    Quote.State.REJECTED: _("Esa cotización ya fue rechazada."),
    Quote.State.EXPIRED: _("Esa cotización está vencida. Puedo prepararle una nueva."),
}


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


def _check_expected_total(
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


def _require_price_list(company: Company, at: datetime) -> PriceList:
    price_list = price_list_current(company=company, at=at)
    if price_list is None:
        raise ValidationFailed(
            _("Ahora mismo no tenemos una lista de precios vigente para cotizar."),
            code="no_price_list",
        )
    return price_list


def _insufficient_stock(product: Product) -> ValidationFailed:
    # Quantities are not disclosed to customers; the SKU says which product is short.
    return ValidationFailed(
        _("No hay existencias suficientes de %(name)s para esa cantidad.") % {"name": product.name},
        code="insufficient_stock",
        sku=product.sku,
    )


def quote_create(
    *,
    company: Company,
    contact: Contact,
    items: Iterable[QuoteItem],
    expected_total: Decimal | str | None = None,
    opportunity: Opportunity | None = None,
    conversation: Conversation | None = None,
    send: bool = True,
    by: Any = None,
    now: datetime | None = None,
) -> Quote:
    """Create a quote priced by the system, and (by default) send it to the contact.

    The expected total, when given, must equal the computed one (VALIDATION with the real
    total otherwise). Stock is looked at, not reserved: reservation happens at acceptance.
    Every check comes before the first write; the quote comes back with its lines.
    """
    now = now or timezone.now()
    NotInCompany.check(
        contact.company_id, company.pk, _("No encontré ese contacto."), code="contact_not_found"
    )

    def create() -> Quote:
        locked_opportunity = None
        if opportunity is not None:
            locked_opportunity = Opportunity.objects.select_for_update().get(pk=opportunity.pk)
            NotInCompany.check(
                locked_opportunity.company_id,
                company.pk,
                _("No encontré esa oportunidad."),
                code="opportunity_not_found",
            )
            if locked_opportunity.contact_id != contact.pk:
                raise ValueError("the opportunity belongs to another contact")
            if locked_opportunity.is_closed:
                raise _opportunity_state_error(locked_opportunity)
        price_list = _require_price_list(company, now)
        totals = quote_total_compute(company=company, price_list=price_list, items=items)
        _check_expected_total(expected_total, totals.total, totals.currency)
        for line in totals.lines:
            if line.product.track_stock and line.product.quantity_available < line.quantity:
                raise _insufficient_stock(line.product)
        quote = Quote(
            company=company,
            contact=contact,
            price_list=price_list,
            currency=totals.currency,
            subtotal=totals.subtotal,
            tax_total=totals.tax,
            total=totals.total,
            valid_until=_validity_end(price_list, now),
            opportunity=locked_opportunity,
            conversation=conversation,
        )
        insert_with_fresh_reference(quote, prefix="QT")
        lines = QuoteLine.objects.bulk_create(
            QuoteLine(
                quote=quote,
                position=position,
                product=line.product,
                sku=line.product.sku,
                name=line.product.name,
                quantity=line.quantity,
                unit_price=line.unit_price,
                tax_rate=line.tax_rate,
                subtotal=line.subtotal,
                tax=line.tax,
                total=line.total,
            )
            for position, line in enumerate(totals.lines, start=1)
        )
        _lines_known(quote, lines)
        if send:
            # The row was inserted by this transaction: no other one sees it, nothing to lock.
            _quote_send_locked(quote, by=by, now=now)
        return quote

    return without_savepoint(create)


def _lines_known(quote: Quote, lines: list[QuoteLine]) -> None:
    """Give `quote.lines.all()` the lines just inserted, as prefetch_related would, so showing
    the new quote reads nothing again."""
    known = quote.lines.all()
    known._result_cache = lines
    known._prefetch_done = True
    quote._prefetched_objects_cache = {"lines": known}


def _lock_quote(quote: Quote) -> Quote:
    """The quote's row, read again under lock (with the company the caller had in memory)."""
    locked = Quote.objects.select_for_update().get(pk=quote.pk)
    if Quote.company.is_cached(quote):
        locked.company = quote.company
    return locked


def _guard_quote(quote: Quote, transition: Callable[..., Any], now: datetime) -> None:
    """Refuse a transition the quote's state does not allow, or a sent quote past its validity.

    Call while holding the quote's row lock.
    """
    if not can_proceed(transition):
        raise _quote_state_error(quote.state)
    if quote.is_lapsed(now):
        # Past validity it is expired at this instant, whether or not the beat task ran yet.
        raise _quote_state_error(Quote.State.EXPIRED)


def _quote_state_error(state: str) -> ValidationFailed:
    """VALIDATION naming the quote's state, with its value and the customer's label."""
    return ValidationFailed(
        QUOTE_STATE_MESSAGES[state],
        code="invalid_state",
        **state_shown(state, QUOTE_STATE_LABELS),
    )


def quote_send(*, quote: Quote, by: Any = None, now: datetime | None = None) -> Quote:
    """Send a draft quote: it becomes answerable, and it is emailed after commit.

    A draft goes out only at the prices the company quotes at `now`: one priced from a list
    that has closed or been replaced as the current one is refused (staff draft it again),
    and so is one whose opportunity is already closed.
    """
    now = now or timezone.now()

    def send() -> Quote:
        locked = _lock_quote(quote)
        _guard_quote(locked, locked.send, now)
        _check_draft_still_quotable(locked, now)
        _quote_send_locked(locked, by=by, now=now)
        return locked

    return without_savepoint(send)


def _check_draft_still_quotable(quote: Quote, now: datetime) -> None:
    """Refuse to send a draft whose prices or opportunity no longer hold at `now`. Call while
    holding the quote's row lock (lock order: the quote, then its opportunity)."""
    current = price_list_current(company=quote.company, at=now)
    if current is None or current.pk != quote.price_list_id:
        raise ValidationFailed(
            _(
                "Este borrador se preparó con una lista de precios que ya no está vigente; "
                "prepare una cotización nueva."
            ),
            code="price_list_outdated",
        )
    quote.price_list = current  # the same list, as it is now: its window bounds the validity
    if quote.opportunity_id is not None:
        opportunity = Opportunity.objects.select_for_update().get(pk=quote.opportunity_id)
        if opportunity.is_closed:
            raise _opportunity_state_error(opportunity)


def _quote_send_locked(quote: Quote, *, by: Any, now: datetime) -> None:
    """Call while holding the quote's row lock (or having inserted it in this transaction),
    with `quote.price_list` current at `now`."""
    _guard_quote(quote, quote.send, now)
    # The customer gets the whole validity from the day it is sent, not what is left of a
    # draft's (a draft kept for two weeks would give them a day); the price list may end first.
    valid_until = _validity_end(quote.price_list, now)
    if valid_until <= now:  # never email an offer that is already over
        raise _quote_state_error(Quote.State.EXPIRED)
    quote.send(by=by)
    quote.sent_at = now
    quote.valid_until = valid_until
    quote.save(update_fields=["state", "sent_at", "valid_until"])
    quote_id = quote.pk  # a plain closure: Django's robust on_commit logs the callable's name
    transaction.on_commit(lambda: _enqueue_quote_email(quote_id), robust=True)


def _validity_end(price_list: PriceList, now: datetime) -> datetime:
    """Until when a quote priced from `price_list` and sent at `now` may be accepted."""
    valid_until = now + QUOTE_VALIDITY
    if price_list.valid_until is not None:
        valid_until = min(valid_until, price_list.valid_until)
    return valid_until


def _enqueue_quote_email(quote_id: int) -> None:
    """Publish the email task (after commit). If the broker is down this raises, on_commit
    (robust) logs it, and the quote stays sent: quote_emails_pending picks it up later."""
    task_named("sales.tasks.quote_email_send").delay(quote_id)


def quote_accept(
    *,
    quote: Quote,
    expected_total: Decimal | str | None = None,
    authorize: Callable[[], None] | None = None,
    by: Any = None,
    now: datetime | None = None,
    locked: bool = False,
) -> Quote:
    """Accept a sent, still valid quote: reserve its stock and win its opportunity.

    `authorize`, if given, runs after the state, validity and total checks and before any
    effect (the tool's step-up check): a quote that cannot be accepted anyway says why
    without asking the customer for a code first. `locked`: the caller read `quote` under
    its row lock in the current transaction (quote_get(for_update=True)), so it is not read
    again.

    Stock is checked and reserved here, under row locks on the products taken in primary-key
    order, so concurrent acceptances serialise per product and never oversell. Every check
    comes before the first write.
    """
    now = now or timezone.now()

    def accept() -> Quote:
        current = quote if locked else _lock_quote(quote)
        _guard_quote(current, current.accept, now)
        _check_expected_total(expected_total, current.total, current.currency)
        if authorize is not None:
            authorize()
        opportunity = None
        if current.opportunity_id is not None:
            opportunity = Opportunity.objects.select_for_update().get(pk=current.opportunity_id)
            if opportunity.state == Opportunity.State.LOST:
                raise ValidationFailed(
                    _(
                        "Esta cotización ya no se puede aceptar; le pondremos en contacto con "
                        "ventas."
                    ),
                    code="opportunity_lost",
                )
        _stock_reserve(current)
        current.accept(by=by)
        current.resolved_at = now
        current.save(update_fields=["state", "resolved_at"])
        if opportunity is not None and not opportunity.is_closed:
            opportunity.amount = current.total
            opportunity.currency = current.currency
            opportunity.win(by=by)
            opportunity.closed_at = now
            opportunity.save(update_fields=["amount", "currency", "state", "closed_at"])
        return current

    return without_savepoint(accept)


def _stock_reserve(quote: Quote) -> None:
    """Reserve every tracked product of the quote, or nothing; refuse before writing anything.
    Call inside a transaction.

    One statement locks the quote's products in primary-key order, each read with the
    quantity the quote needs; one UPDATE reserves them all.
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
            raise _insufficient_stock(product)
    if tracked:
        Product.objects.filter(pk__in=[product.pk for product in tracked]).update(
            quantity_reserved=F("quantity_reserved")
            + Case(
                *(When(pk=product.pk, then=Value(product.needed)) for product in tracked),
                default=Value(0),
                output_field=IntegerField(),
            )
        )


def quote_reject(
    *,
    quote: Quote,
    reason: str = "",
    by: Any = None,
    now: datetime | None = None,
    locked: bool = False,
) -> Quote:
    """Reject a sent, still valid quote. `locked` as in quote_accept."""
    now = now or timezone.now()

    def reject() -> Quote:
        current = quote if locked else _lock_quote(quote)
        _guard_quote(current, current.reject, now)
        current.reject(by=by)
        current.rejection_reason = reason.strip()[:300]
        current.resolved_at = now
        current.save(update_fields=["state", "rejection_reason", "resolved_at"])
        return current

    return without_savepoint(reject)


@transaction.atomic
def quote_expire(*, quote: Quote, by: Any = None, now: datetime | None = None) -> Quote:
    """Mark an open quote expired (the beat task does it past validity; staff may withdraw)."""
    now = now or timezone.now()
    quote = _lock_quote(quote)
    if not can_proceed(quote.expire):
        raise _quote_state_error(quote.state)
    quote.expire(by=by)
    quote.resolved_at = now
    quote.save(update_fields=["state", "resolved_at"])
    return quote


def quotes_expire_due(*, now: datetime | None = None, batch: int = 500) -> int:
    """Expire open quotes past their validity; return how many. Each in its own transaction,
    skipping quotes another transaction holds (an acceptance checks the instant itself)."""
    now = now or timezone.now()
    due = list(
        Quote.objects.lapsed(now).order_by("valid_until").values_list("pk", flat=True)[:batch]
    )
    expired = 0
    for pk in due:
        with transaction.atomic():
            quote = (
                Quote.objects.select_for_update(skip_locked=True).lapsed(now).filter(pk=pk).first()
            )
            if quote is None:
                continue
            quote.expire()
            quote.resolved_at = now
            quote.save(update_fields=["state", "resolved_at"])
            expired += 1
    return expired


def quote_email_deliver(*, quote_id: int) -> bool:
    """Email a sent quote to its contact's own registered address; True if an email went out.
    A quote accepted, rejected or expired before its email left is emailed too, saying so.

    Runs in a Celery worker. Safe to repeat, and to run twice at once: a quote already emailed
    is not emailed again, and a second delivery waits for the first (only a crash between the
    send and its commit sends it twice).
    """
    with one_at_a_time(Quote, quote_id):
        return _quote_email_send(quote_id=quote_id)


def _quote_email_send(*, quote_id: int) -> bool:
    quote = (
        Quote.objects.select_related("contact", "company")
        .prefetch_related("lines")
        .filter(pk=quote_id)
        .first()
    )
    # A quote once sent is emailed whatever it became since: the customer was told it would
    # be, and may have accepted or rejected it in the conversation before the worker ran.
    if quote is None or quote.emailed_at is not None or quote.sent_at is None:
        return False
    if not quote.contact.email:
        return False
    with translation.override(quote.company.language), timezone.override(quote.company.tz):
        subject, body = _quote_email(quote)
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [quote.contact.email])
    except OSError as exc:  # SMTPException is one
        if smtp_error_is_transient(exc):
            raise  # the task retries it; past its retries, the sweep enqueues it again
        # Refused for good (550 no such mailbox): sending it again cannot help. Recorded, so
        # the sweep skips it and staff see why the customer has no email.
        error = smtp_error_summary(exc)
        logger.error("quote %s: email refused for good (%s); not retried", quote.reference, error)
        Quote.objects.filter(pk=quote.pk, emailed_at__isnull=True).update(email_error=error)
        return False
    Quote.objects.filter(pk=quote.pk, emailed_at__isnull=True).update(emailed_at=timezone.now())
    return True


def _quote_email(quote: Quote) -> tuple[str, str]:
    """The quote's email, subject and body, in the active language (amounts formatted in it
    too): call in the company's language and timezone."""
    state = quote.effective_state(timezone.now())
    context = {
        "quote": quote,
        "contact": quote.contact,
        "company": quote.company,
        "lines": [
            {
                "name": line.name,
                "sku": line.sku,
                "quantity": line.quantity,
                "unit_price": money.spoken(line.unit_price, quote.currency),
                # Before tax, as the unit price beside it: the lines add up to the Subtotal.
                "subtotal": money.spoken(line.subtotal, quote.currency),
            }
            for line in quote.lines.all()
        ],
        "subtotal": money.spoken(quote.subtotal, quote.currency),
        "tax": money.spoken(quote.tax_total, quote.currency),
        "total": money.spoken(quote.total, quote.currency),
        "validity": _validity_sentence(quote.valid_until),
        # As the customer would find it now: one past its validity is expired, whether or not
        # the expiry sweep has run, and no longer invites an answer.
        "is_open": state == Quote.State.SENT,
        "state_label": QUOTE_STATE_LABELS[state],
    }
    subject = render_to_string("sales/quote_email_subject.txt", context).strip()
    return subject, render_to_string("sales/quote_email.txt", context)


def _validity_sentence(valid_until: datetime) -> str:
    """The email's validity sentence in the active language and timezone, ending in one full
    stop even when the date itself ends in one (English times end in "a.m.")."""
    until = formats.date_format(timezone.localtime(valid_until), "DATETIME_FORMAT")
    sentence = _("Válida hasta el %(until)s.") % {"until": until}
    return sentence[:-1] if sentence.endswith("..") else sentence


def quote_emails_pending(*, now: datetime | None = None) -> list[int]:
    """Sent quotes (whatever their state since) whose email has not gone out a while after
    sending (e.g. the broker was down at commit): the beat task enqueues them again."""
    now = now or timezone.now()
    return list(
        Quote.objects.filter(
            emailed_at__isnull=True,
            email_error="",
            sent_at__lte=now - timedelta(minutes=15),
            sent_at__gte=now - timedelta(days=1),
        )
        .exclude(contact__email="")
        .values_list("pk", flat=True)[:200]
    )


# --- Opportunities -------------------------------------------------------------------------------


OPPORTUNITY_STATE_MESSAGES: dict[str, Promise] = {
    Opportunity.State.WON: _("Esa oportunidad ya está cerrada como ganada."),
    Opportunity.State.LOST: _("Esa oportunidad ya está cerrada como perdida."),
}


def _opportunity_state_error(opportunity: Opportunity) -> ValidationFailed:
    """VALIDATION naming the opportunity's stage, with its value and the customer's label."""
    shown = state_shown(opportunity.state, OPPORTUNITY_STATE_LABELS)
    message = OPPORTUNITY_STATE_MESSAGES.get(opportunity.state) or _(
        "Esa oportunidad está %(state)s y no admite ese cambio."
    ) % {"state": shown["state_label"]}
    return ValidationFailed(message, code="invalid_state", **shown)


def opportunity_create(
    *,
    company: Company,
    contact: Contact,
    title: str,
    notes: str = "",
    amount: Decimal = Decimal(0),
    currency: str | None = None,
    owner: Any = None,
    conversation: Conversation | None = None,
) -> Opportunity:
    """Open an opportunity for the sales team (state new)."""
    NotInCompany.check(
        contact.company_id, company.pk, _("No encontré ese contacto."), code="contact_not_found"
    )
    title = title.strip()
    if not title:  # refused before any transaction: nothing to leave usable
        raise ValidationFailed(_("Indique de qué se trata."), code="title_required")
    currency = (currency or company.currency).upper()
    opportunity = Opportunity(
        company=company,
        contact=contact,
        title=title[:200],
        notes=notes.strip(),
        amount=money.quantize(Decimal(amount), currency),
        currency=currency,
        owner=owner,
        conversation=conversation,
    )
    # No transaction of its own: the one INSERT has its savepoint (a reference collision is
    # drawn again), and it is atomic by itself.
    insert_with_fresh_reference(opportunity, prefix="OP")
    return opportunity


def _opportunity_move(
    opportunity: Opportunity, name: str, *, by: Any, now: datetime | None = None, **changes: Any
) -> Opportunity:
    opportunity = Opportunity.objects.select_for_update().get(pk=opportunity.pk)
    method = getattr(opportunity, name)
    if not can_proceed(method):
        raise _opportunity_state_error(opportunity)
    method(by=by)
    fields = ["state", *changes]
    for field, value in changes.items():
        setattr(opportunity, field, value)
    if opportunity.is_closed:
        opportunity.closed_at = now or timezone.now()
        fields.append("closed_at")
    opportunity.save(update_fields=fields)
    return opportunity


@transaction.atomic
def opportunity_qualify(*, opportunity: Opportunity, by: Any = None) -> Opportunity:
    return _opportunity_move(opportunity, "qualify", by=by)


@transaction.atomic
def opportunity_propose(*, opportunity: Opportunity, by: Any = None) -> Opportunity:
    return _opportunity_move(opportunity, "propose", by=by)


@transaction.atomic
def opportunity_negotiate(*, opportunity: Opportunity, by: Any = None) -> Opportunity:
    return _opportunity_move(opportunity, "negotiate", by=by)


@transaction.atomic
def opportunity_win(*, opportunity: Opportunity, by: Any = None) -> Opportunity:
    return _opportunity_move(opportunity, "win", by=by)


@transaction.atomic
def opportunity_lose(
    *, opportunity: Opportunity, reason: str, by: Any = None, now: datetime | None = None
) -> Opportunity:
    """Close an open opportunity as lost; the reason is required so the team can learn.

    Its open quotes (drafts and sent ones) expire with it, so none is left looking acceptable.
    """
    reason = reason.strip()
    if not reason:
        raise ValidationFailed(_("Indique el motivo de la pérdida."), code="lost_reason_required")
    now = now or timezone.now()
    # Lock order: the quotes, then the opportunity. An acceptance or a send under way finishes
    # first (a won opportunity then refuses to be lost; a quote it sent is expired here).
    quotes = _open_quotes_lock(opportunity)
    lost = _opportunity_move(opportunity, "lose", by=by, now=now, lost_reason=reason[:300])
    # A quote created while this waited for the opportunity's lock (quote_create holds it).
    # Skipping a locked one keeps off a deadlock: whoever holds it finds the opportunity lost.
    quotes += _open_quotes_lock(opportunity, skip_locked=True, exclude=[q.pk for q in quotes])
    for quote in quotes:
        quote.expire(by=by)
        quote.resolved_at = now
        quote.save(update_fields=["state", "resolved_at"])
    return lost


def _open_quotes_lock(
    opportunity: Opportunity, *, skip_locked: bool = False, exclude: Iterable[int] = ()
) -> list[Quote]:
    """The opportunity's open quotes, row-locked in primary-key order."""
    return list(
        Quote.objects.select_for_update(skip_locked=skip_locked)
        .filter(opportunity_id=opportunity.pk, state__in=Quote.OPEN_STATES)
        .exclude(pk__in=list(exclude))
        .order_by("pk")
    )
