"""Reads of sales: the current price list, the catalog search, a contact's quotes, the
company's sales staff and the leads waiting for one of them."""

import operator
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from functools import reduce

from django.db.models import (
    BooleanField,
    Case,
    Count,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.errors import NotFound
from core.idempotency import intent_text
from core.identity import check_owner
from core.models import Company, Contact
from core.references import normalize_reference
from core.roles import staff_with_permission
from sales.models import (
    Opportunity,
    PriceList,
    PriceListItem,
    Product,
    Quote,
    QuoteMessage,
    SalesSettings,
)

# Who the company's sales staff are: those who may run its pipeline (change opportunities:
# by role, supervisors and administrators, sales/roles.py; agents only see it).
SALES_STAFF_PERMISSION = "sales.change_opportunity"


def price_list_current(*, company: Company, at: datetime | None = None) -> PriceList | None:
    """The company's default price list if it is valid at `at` (now by default), else None."""
    at = at or timezone.now()
    return (
        PriceList.objects.filter(company=company, is_default=True)
        .filter(Q(valid_from__isnull=True) | Q(valid_from__lte=at))
        .filter(Q(valid_until__isnull=True) | Q(valid_until__gt=at))
        .first()
    )


def product_search(*, company: Company, price_list: PriceList, query: str = "") -> QuerySet:
    """Active products priced in `price_list` whose name, SKU or description match every word
    of `query`, each annotated with `unit_price`. Stock is read, never reserved, here."""
    price = PriceListItem.objects.filter(price_list=price_list, product=OuterRef("pk"))
    products = (
        Product.objects.filter(company=company, active=True, prices__price_list=price_list)
        .annotate(unit_price=Subquery(price.values("unit_price")[:1]))
        .order_by("name", "pk")
    )
    for word in query.split():
        products = products.filter(
            Q(name__icontains=word) | Q(sku__icontains=word) | Q(description__icontains=word)
        )
    return products


def products_priced(*, company: Company, price_list: PriceList, skus: Iterable[str]) -> QuerySet:
    """The company's active products with one of these SKUs (any case), each annotated with
    `unit_price` in `price_list` (None when the list does not price it): one statement."""
    price = PriceListItem.objects.filter(price_list=price_list, product=OuterRef("pk"))
    return (
        Product.objects.filter(company=company, active=True)
        .filter(reduce(operator.or_, (Q(sku__iexact=sku) for sku in skus)))
        .annotate(unit_price=Subquery(price.values("unit_price")[:1]))
    )


def _sent(quotes: QuerySet[Quote]) -> QuerySet[Quote]:
    """Only the quotes that were sent to their customer. Their state is not enough: a draft
    withdrawn by staff or expired by the sweep is `expired` without ever having been sent."""
    return quotes.filter(sent_at__isnull=False)


def quote_list(
    *, contact: Contact, state: str | None = None, now: datetime | None = None
) -> QuerySet[Quote]:
    """A contact's quotes that were sent to them, newest first. A quote never sent (a draft,
    or one staff withdrew or the sweep expired before sending) is not the customer's to see.

    `state` filters by the state the customer would be told: an open quote past its validity
    counts as expired even before the beat task marks it.
    """
    now = now or timezone.now()
    quotes = _sent(Quote.objects.filter(company_id=contact.company_id, contact=contact))
    if state:
        quotes = quotes.in_effective_state(state, now)
    return quotes.order_by("-created_at", "-pk")


def quote_standing(
    *, company: Company, contact: Contact, lines: dict[str, int], since: datetime, now: datetime
) -> Quote | None:
    """The contact's latest quote created since `since`, still sent and valid at `now`, whose
    lines are exactly `lines` (SKU in upper case -> quantity), with its lines: what a quote of
    that intent already made (core.idempotency.intent), or None."""
    candidates = (
        Quote.objects.filter(
            company=company,
            contact=contact,
            state=Quote.State.SENT,
            created_at__gte=since,
            valid_until__gt=now,
        )
        .order_by("-created_at", "-pk")
        .prefetch_related("lines")
    )
    for quote in candidates:
        quoted: dict[str, int] = defaultdict(int)
        for line in quote.lines.all():
            quoted[line.sku.upper()] += line.quantity
        if quoted == lines:
            quote.company = company
            return quote
    return None


def opportunity_standing(
    *, company: Company, contact: Contact, topic: str, since: datetime
) -> Opportunity | None:
    """The contact's latest open opportunity created since `since` whose title is `topic` as
    an intent compares texts (core.idempotency.intent_text), or None."""
    candidates = Opportunity.objects.filter(
        company=company,
        contact=contact,
        state__in=Opportunity.OPEN_STATES,
        created_at__gte=since,
    ).order_by("-created_at", "-pk")
    return next((o for o in candidates if intent_text(o.title) == topic), None)


def quote_get(
    *,
    company: Company,
    reference: str,
    contact: Contact | None = None,
    for_update: bool = False,
    with_opportunity: bool = False,
) -> Quote:
    """The company's quote with this public reference, with its lines, if it was sent;
    NotFound otherwise. A quote never sent is staff work (even once expired), not found here.
    With `contact`, a customer's read: PermissionRefused when the quote is another's.

    With `for_update` the quote's row is locked until the transaction ends, and its lines are
    not read (a transition needs the quote alone); `with_opportunity` locks its opportunity
    before it, for acceptance (the lock order of sales.services.quote_guards.quote_lock)."""
    quotes = _sent(Quote.objects.filter(company=company, reference=normalize_reference(reference)))
    opportunity = None
    if for_update and with_opportunity:
        opportunity = (
            Opportunity.objects.select_for_update()
            .filter(pk__in=quotes.values("opportunity_id"))
            .first()
        )
    quotes = quotes.select_for_update() if for_update else quotes.prefetch_related("lines")
    quote = quotes.first()
    if quote is None:
        raise NotFound(_("No encontré esa cotización."), code="quote_not_found")
    if contact is not None:
        check_owner(contact=contact, owner_id=quote.contact_id)
    quote.company = company  # the caller's, already in memory
    if opportunity is not None and quote.opportunity_id == opportunity.pk:
        quote.opportunity = opportunity  # locked above: the transition reads it no more
    return quote


def quote_owner_id(*, company: Company, reference: str) -> int | None:
    """The contact id of the company's sent quote with exactly this reference, if there is one
    (a quote never sent has no owner to tell the customer about)."""
    return (
        _sent(Quote.objects.filter(company=company, reference=normalize_reference(reference)))
        .values_list("contact_id", flat=True)
        .first()
    )


def opportunity_get(*, company: Company, reference: str) -> Opportunity:
    opportunity = Opportunity.objects.filter(
        company=company, reference=normalize_reference(reference)
    ).first()
    if opportunity is None:
        raise NotFound(_("No encontré esa oportunidad."), code="opportunity_not_found")
    return opportunity


def opportunity_pipeline(*, company: Company) -> QuerySet[Opportunity]:
    """The company's open opportunities, oldest first: the sales team's work queue."""
    return Opportunity.objects.filter(company=company, state__in=Opportunity.OPEN_STATES).order_by(
        "created_at", "pk"
    )


# The customer's file (core.contact_file): each kind's counts in one query, and its latest rows.
# An accepted quote is an order (docs/sales.md): the file shows orders apart from quotes.
ORDER_STATES = (Quote.State.ACCEPTED, Quote.State.DELIVERED, Quote.State.CANCELLED)


def contact_quotes_file(
    *, contact: Contact, now: datetime, limit: int, orders: bool
) -> tuple[int, int, list[Quote]]:
    """The contact's quotes (`orders=False`: never accepted, sent or not) or orders (accepted,
    delivered or cancelled after acceptance): how many, and how many are still open (a quote
    that can still be answered at `now`, an order not yet delivered or cancelled), and the
    `limit` newest."""
    quotes = Quote.objects.filter(company_id=contact.company_id, contact=contact)
    if orders:
        quotes = quotes.filter(state__in=ORDER_STATES)
        open_ = Q(state=Quote.State.ACCEPTED)
    else:
        quotes = quotes.exclude(state__in=ORDER_STATES)
        open_ = Q(state__in=Quote.OPEN_STATES, valid_until__gt=now)
    counts = quotes.aggregate(total=Count("pk"), open=Count("pk", filter=open_))
    latest = list(quotes.order_by("-created_at", "-pk")[:limit])
    return counts["total"], counts["open"], latest


def contact_quote_emails_file(*, contact: Contact, limit: int) -> tuple[int, list[Quote]]:
    """The contact's quotes that were emailed to them: how many, and the `limit` last emailed."""
    emailed = Quote.objects.filter(
        company_id=contact.company_id, contact=contact, emailed_at__isnull=False
    )
    return emailed.count(), list(emailed.order_by("-emailed_at", "-pk")[:limit])


def contact_opportunities_file(
    *, contact: Contact, limit: int
) -> tuple[int, int, list[Opportunity]]:
    """The contact's opportunities: how many, how many are open, and the `limit` newest."""
    opportunities = Opportunity.objects.filter(company_id=contact.company_id, contact=contact)
    counts = opportunities.aggregate(
        total=Count("pk"), open=Count("pk", filter=Q(state__in=Opportunity.OPEN_STATES))
    )
    latest = list(opportunities.order_by("-created_at", "-pk")[:limit])
    return counts["total"], counts["open"], latest


def sales_staff(*, company_ids: Iterable[int] | None) -> QuerySet:
    """The active sales staff (users) of the companies (None: of any), by username: whom
    their leads are for, and whom they may be assigned to."""
    return staff_with_permission(
        permission=SALES_STAFF_PERMISSION, company_ids=company_ids
    ).order_by("username")


def sales_settings_for(*, company: Company) -> SalesSettings:
    """The company's sales settings; the row is created with defaults the first time."""
    settings, _created = SalesSettings.objects.get_or_create(company=company)
    return settings


# A lead waits while it is new and nobody owns it.
LEAD_WAITING = Q(state=Opportunity.State.NEW, owner__isnull=True)


def lead_overdue_filter(*, now: datetime) -> Q:
    """The leads nobody took within their company's pickup time (SalesSettings, or its
    default for a company that never set one), as a filter. Grouped by pickup time, of which
    companies use few, so the filter stays a handful of ranges on the created_at column."""
    default = SalesSettings.DEFAULT_LEAD_PICKUP_HOURS
    custom = defaultdict(list)
    for company_id, hours in SalesSettings.objects.exclude(lead_pickup_hours=default).values_list(
        "company_id", "lead_pickup_hours"
    ):
        custom[hours].append(company_id)
    customised = [company_id for ids in custom.values() for company_id in ids]
    late = Q(created_at__lte=now - timedelta(hours=default)) & ~Q(company_id__in=customised)
    for hours, company_ids in custom.items():
        late |= Q(company_id__in=company_ids, created_at__lte=now - timedelta(hours=hours))
    return LEAD_WAITING & late


def opportunities_with_lead_overdue(queryset: QuerySet, *, now: datetime) -> QuerySet:
    """`queryset` with `lead_overdue`: whether each is a lead nobody took in time."""
    return queryset.annotate(
        lead_overdue=Case(
            When(lead_overdue_filter(now=now), then=Value(True)),
            default=Value(False),
            output_field=BooleanField(),
        )
    )


def contact_quote_messages_file(*, contact: Contact, limit: int) -> tuple[int, list[QuoteMessage]]:
    """How many messages the contact was sent (or is to be sent) about their settled quotes
    and orders, and the `limit` newest, with their quote."""
    messages = QuoteMessage.objects.filter(company_id=contact.company_id, quote__contact=contact)
    latest = messages.select_related("quote").order_by("-created_at", "-pk")[:limit]
    return messages.count(), list(latest)
