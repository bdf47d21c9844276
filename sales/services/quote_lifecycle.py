"""A quote's life: created priced by the system, sent, then accepted, rejected, expired or
superseded; an accepted quote is an order, delivered or cancelled.

Lock order, everywhere, to keep concurrent writers free of deadlocks: the opportunity, then
its quotes by ascending primary key, then their products by ascending primary key
(sales.services.quote_guards).

Stock: acceptance reserves it; delivery consumes the reservation, cancellation releases it.
Only an accepted quote holds a reservation (a quote that expires, is rejected, is superseded
or loses its opportunity was never accepted, so it holds none); stock_settle ends them.
"""

from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django_fsm import can_proceed

from core.errors import NotInCompany, ValidationFailed
from core.idempotency import Done, Intent, intent_since, once_per_intent
from core.identity import check_owner
from core.jobs import task_named
from core.models import Company, Contact, Conversation
from core.reasons import reason_checked
from core.references import insert_unless_reference_taken, insert_with_fresh_reference
from core.sweeps import sweep
from core.transactions import joined
from sales.models import Opportunity, PriceList, Quote, QuoteLine, QuoteMessage
from sales.quote_messages import quote_message_after
from sales.selectors import price_list_current, quote_standing
from sales.services.catalog import insufficient_stock, stock_reserve, stock_settle
from sales.services.opportunities import quotes_supersede
from sales.services.opportunity_guards import opportunity_state_error
from sales.services.quote_guards import (
    quote_guard,
    quote_lock,
    quote_opportunity_locked,
    quote_state_error,
)
from sales.services.quote_pricing import (
    QuoteItem,
    check_expected_total,
    quote_total_compute,
    require_price_list,
)

QUOTE_VALIDITY = timedelta(days=15)


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

    with joined():
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
                raise opportunity_state_error(locked_opportunity)
        price_list = require_price_list(company, now)
        totals = quote_total_compute(company=company, price_list=price_list, items=items)
        check_expected_total(expected_total, totals.total, totals.currency)
        for line in totals.lines:
            if line.product.track_stock and line.product.quantity_available < line.quantity:
                raise insufficient_stock(line.product)
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
        insert_with_fresh_reference(quote, prefix="QT", insert=insert_unless_reference_taken)
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
        quote.inserted_lines = lines  # shown without reading them again (Quote.lines_shown)
        if send:
            # The row was inserted by this transaction: no other one sees it, nothing to lock.
            _quote_send_locked(quote, by=by, now=now)
        return quote


def quote_create_once(
    *,
    company: Company,
    contact: Contact,
    items: Iterable[QuoteItem],
    expected_total: Decimal | str | None = None,
    conversation: Conversation | None = None,
    new_quote: bool = False,
    now: datetime | None = None,
) -> Done[Quote]:
    """`quote_create` (sent) for a customer, once per intent: the customer and the same
    products and quantities (repeats of a SKU added up, order not counting), within the
    company's window. A quote of that intent still sent is answered, `already_done`, and
    nothing is created or emailed again; other lines are another intent. `new_quote` (the
    customer asked for a second identical quote) or no window (0) creates one every time."""
    now = now or timezone.now()
    items = list(items)
    since = intent_since(company, "create_quote", now)
    if since is None or new_quote:
        return Done(
            quote_create(
                company=company,
                contact=contact,
                items=items,
                expected_total=expected_total,
                conversation=conversation,
                now=now,
            ),
            already_done=False,
        )
    lines: dict[str, int] = {}
    for item in items:
        sku = item.sku.strip().upper()
        lines[sku] = lines.get(sku, 0) + item.quantity
    intent = Intent.of(
        "create_quote", company=company, contact=contact, lines=sorted(lines.items())
    )
    done = once_per_intent(
        intent,
        find=lambda: quote_standing(
            company=company, contact=contact, lines=lines, since=since, now=now
        ),
        make=lambda: quote_create(
            company=company,
            contact=contact,
            items=items,
            expected_total=expected_total,
            conversation=conversation,
            now=now,
        ),
    )
    if done.already_done:
        # A total the model told the customer is held to the quote answered, as to a new one.
        check_expected_total(expected_total, done.record.total, done.record.currency)
    return done


def quote_send(*, quote: Quote, by: Any = None, now: datetime | None = None) -> Quote:
    """Send a draft quote: it becomes answerable, and it is emailed after commit.

    A draft goes out only at the prices the company quotes at `now`: one priced from a list
    that has closed or been replaced as the current one is refused (staff draft it again),
    and so is one whose opportunity is already closed.
    """
    now = now or timezone.now()

    with transaction.atomic():
        locked = quote_lock(quote, with_opportunity=True)
        quote_guard(locked, locked.send, now)
        _check_draft_still_quotable(locked, now)
        _quote_send_locked(locked, by=by, now=now)
        return locked


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
    opportunity = quote_opportunity_locked(quote)
    if opportunity is not None and opportunity.is_closed:
        raise opportunity_state_error(opportunity)


def _quote_send_locked(quote: Quote, *, by: Any, now: datetime) -> None:
    """Call while holding the quote's row lock (or having inserted it in this transaction),
    with `quote.price_list` current at `now`."""
    quote_guard(quote, quote.send, now)
    # The customer gets the whole validity from the day it is sent, not what is left of a
    # draft's (a draft kept for two weeks would give them a day); the price list may end first.
    valid_until = _validity_end(quote.price_list, now)
    if valid_until <= now:  # never email an offer that is already over
        raise quote_state_error(Quote.State.EXPIRED)
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
    contact: Contact | None = None,
    by: Any = None,
    now: datetime | None = None,
    locked: bool = False,
) -> Quote:
    """Accept a sent, still valid quote: reserve its stock, win its opportunity and settle
    the opportunity's other open quotes (superseded), all in one transaction.

    `contact`: the customer accepting it, who must own it (PermissionRefused otherwise,
    before any other check); staff pass none.

    `authorize`, if given, runs after the state, validity and total checks and before any
    effect (the tool's step-up check): a quote that cannot be accepted anyway says why
    without asking the customer for a code first. `locked`: the caller read `quote` under
    its row lock in the current transaction (quote_get(for_update=True, with_opportunity=True),
    which locks its opportunity first), so it is not read again.

    Stock is checked and reserved here, under row locks on the products taken in primary-key
    order, so concurrent acceptances serialise per product and never oversell. Acceptances of
    quotes of one opportunity serialise on the opportunity: the first wins it, the others find
    their quote superseded. Every check comes before the first write.
    """
    now = now or timezone.now()

    with joined():
        current = quote if locked else quote_lock(quote, with_opportunity=True)
        _check_owner(contact, current)
        quote_guard(current, current.accept, now)
        check_expected_total(expected_total, current.total, current.currency)
        if authorize is not None:
            authorize()
        opportunity = quote_opportunity_locked(current)
        if opportunity is not None and opportunity.state == Opportunity.State.LOST:
            raise ValidationFailed(
                _("Esta cotización ya no se puede aceptar; le pondremos en contacto con ventas."),
                code="opportunity_lost",
            )
        if opportunity is not None and opportunity.state == Opportunity.State.WON:
            # Winning settles the other open quotes; one still open here predates that rule.
            raise quote_state_error(Quote.State.SUPERSEDED)
        stock_reserve(current)
        current.accept(by=by)
        current.resolved_at = now
        current.save(update_fields=["state", "resolved_at"])
        if opportunity is not None:
            opportunity.amount = current.total
            opportunity.currency = current.currency
            opportunity.win(by=by)
            opportunity.closed_at = now
            opportunity.save(update_fields=["amount", "currency", "state", "closed_at"])
            quotes_supersede(opportunity, by=by, now=now)
        return current


def quote_reject(
    *,
    quote: Quote,
    reason: str = "",
    contact: Contact | None = None,
    by: Any = None,
    now: datetime | None = None,
    locked: bool = False,
    authorize: Callable[[], None] | None = None,
) -> Quote:
    """Reject a sent, still valid quote. `contact`, `locked` and `authorize` (the customer's
    confirmation, asked once the quote can be rejected) as in quote_accept. The
    `reason` (plain text, core.reasons) is kept on the quote and in its history. Staff
    recording the customer's rejection (no `contact`) tell the customer, with the reason
    (sales.quote_messages); the customer rejecting it themselves is told nothing more."""
    now = now or timezone.now()
    reason = reason_checked(reason)

    with joined():
        current = quote if locked else quote_lock(quote)
        _check_owner(contact, current)
        quote_guard(current, current.reject, now)
        if authorize is not None:
            authorize()
        current.reject(by=by, description=reason or None)
        current.rejection_reason = reason
        current.resolved_at = now
        current.save(update_fields=["state", "rejection_reason", "resolved_at"])
        if contact is None:
            quote_message_after(current, QuoteMessage.Kind.QUOTE_REJECTED, reason=reason, now=now)
        return current


def _check_owner(contact: Contact | None, quote: Quote) -> None:
    """Customers act only on their own quotes; staff (contact=None) on any."""
    if contact is not None:
        check_owner(contact=contact, owner_id=quote.contact_id)


def quote_deliver(
    *,
    quote: Quote,
    items: Iterable[QuoteItem] | None = None,
    by: Any = None,
    now: datetime | None = None,
) -> Quote:
    """Mark an accepted quote's order delivered: the stock it reserved leaves the shelf (its
    reservations are consumed: on hand and reserved both drop by them).

    `items`, if given, is what was handed over, checked against the order before anything
    changes: a SKU the order lacks, more units than it reserved, or fewer (orders are
    delivered whole) are refused, naming the SKU. Delivering a delivered order again changes
    nothing and answers the same (a retry without its idempotency key, a second click).
    """
    now = now or timezone.now()

    with transaction.atomic():
        current = quote_lock(quote)
        if items is not None:
            _check_delivered_items(current, items)
        if current.state == Quote.State.DELIVERED:
            return current
        if not can_proceed(current.deliver):
            raise quote_state_error(current.state)
        stock_settle(current, consume=True, now=now)
        current.deliver(by=by)
        current.delivered_at = now
        current.save(update_fields=["state", "delivered_at"])
        return current


def _check_delivered_items(quote: Quote, items: Iterable[QuoteItem]) -> None:
    """Refuse a delivery note that is not exactly the order: VALIDATION naming the SKU."""
    ordered = {line.sku.upper(): line for line in QuoteLine.objects.filter(quote=quote)}
    given: dict[str, int] = {}
    shown: dict[str, str] = {}
    for item in items:
        key = item.sku.strip().upper()
        given[key] = given.get(key, 0) + item.quantity
        shown.setdefault(key, item.sku.strip())
    for key, quantity in given.items():
        line = ordered.get(key)
        if line is None:
            raise ValidationFailed(
                _("Ese pedido no incluye %(sku)s.") % {"sku": shown[key]},
                code="product_not_in_order",
                sku=shown[key],
            )
        if quantity > line.quantity:
            raise ValidationFailed(
                _("Ese pedido reservó %(n)d unidades de %(sku)s; no se pueden entregar más.")
                % {"n": line.quantity, "sku": line.sku},
                code="delivery_exceeds_reserved",
                sku=line.sku,
                reserved=line.quantity,
            )
    for key, line in ordered.items():
        if given.get(key, 0) < line.quantity:
            raise ValidationFailed(
                _("Ese pedido se entrega completo: faltan unidades de %(sku)s (%(n)d pedidas).")
                % {"sku": line.sku, "n": line.quantity},
                code="delivery_incomplete",
                sku=line.sku,
                ordered=line.quantity,
            )


def quote_cancel(
    *, quote: Quote, by: Any = None, now: datetime | None = None, reason: str = ""
) -> Quote:
    """Cancel an accepted quote's order: the stock it reserved is available again. Cancelling
    a cancelled order again changes nothing and answers the same (and sends nothing again); a
    delivered one is refused. Staff's `reason` (plain text, core.reasons) is kept in the
    history and told to the customer (sales.quote_messages)."""
    now = now or timezone.now()
    reason = reason_checked(reason)

    with transaction.atomic():
        current = quote_lock(quote)
        if current.state == Quote.State.CANCELLED:
            return current
        if not can_proceed(current.cancel):
            raise quote_state_error(current.state)
        stock_settle(current, consume=False, now=now)
        current.cancel(by=by, description=reason or None)
        current.cancelled_at = now
        current.save(update_fields=["state", "cancelled_at"])
        quote_message_after(current, QuoteMessage.Kind.ORDER_CANCELLED, reason=reason, now=now)
        return current


@transaction.atomic
def quote_expire(
    *,
    quote: Quote,
    by: Any = None,
    now: datetime | None = None,
    reason: str = "",
    tell_customer: bool = True,
) -> Quote:
    """Withdraw an open quote: staff mark it expired, with a `reason` (plain text,
    core.reasons, kept in the history). A quote the customer received (sent) is withdrawn
    from them: they are told, with the reason (sales.quote_messages); a draft never reached
    them. `tell_customer=False` only for data that stands for the past (the sandbox's seed).
    The beat task's expiry past validity is quote_expire_if_lapsed, which tells nobody."""
    now = now or timezone.now()
    reason = reason_checked(reason)
    quote = quote_lock(quote)
    if not can_proceed(quote.expire):
        raise quote_state_error(quote.state)
    quote.expire(by=by, description=reason or None)
    quote.resolved_at = now
    quote.save(update_fields=["state", "resolved_at"])
    if tell_customer and quote.sent_at is not None:
        quote_message_after(quote, QuoteMessage.Kind.QUOTE_WITHDRAWN, reason=reason, now=now)
    return quote


def quotes_expire_due(*, now: datetime | None = None, batch: int = 500) -> int:
    """Expire open quotes past their validity; return how many. Each in its own transaction
    (core.sweeps: one that fails leaves the others expired)."""
    now = now or timezone.now()
    due = list(
        Quote.objects.lapsed(now).order_by("valid_until").values_list("pk", flat=True)[:batch]
    )
    return sweep("sales.quotes_expire", due, lambda pk: quote_expire_if_lapsed(pk, now=now)).done


@transaction.atomic
def quote_expire_if_lapsed(pk: int, *, now: datetime) -> bool:
    """Expire one open quote past its validity, skipping it while another transaction holds it
    (an acceptance checks the instant itself); whether it expired. Nobody is told: the quote's
    email said until when it held (docs/sales.md)."""
    quote = Quote.objects.select_for_update(skip_locked=True).lapsed(now).filter(pk=pk).first()
    if quote is None:
        return False
    quote.expire()
    quote.resolved_at = now
    quote.save(update_fields=["state", "resolved_at"])
    return True
