"""Sales tools for the Gateway: thin wrappers over sales selectors and services.

Every tool that touches a customer's quotes takes their identifier (checked by the platform
against the conversation's identified contact) and passes that contact to the selector or
service, which checks the quote is theirs; mutations act only on quotes this conversation has
seen.
Amounts travel as strings in the currency's minor units, never as floats.
"""

from datetime import datetime

from django.utils import timezone
from django.utils.translation import gettext as _
from pydantic import Field

from core.errors import ValidationFailed
from core.models import Company
from core.normalize import mask_email
from core.references import normalize_reference
from core.states import state_filter, state_shown
from sales import money
from sales.models import OPPORTUNITY_STATE_LABELS, QUOTE_STATE_LABELS, Quote
from sales.selectors import (
    price_list_current,
    product_search,
    quote_get,
    quote_list,
    quote_owner_id,
)
from sales.services.opportunities import opportunity_request_once
from sales.services.quote_lifecycle import quote_accept, quote_create_once, quote_reject
from sales.services.quote_pricing import QuoteItem
from tooling.toolkit import (
    CONFIRMATION_HELP,
    ConfirmationCode,
    Cursor,
    Identifier,
    LedgerEntry,
    LedgerKind,
    PagedListOutput,
    ToolContext,
    ToolInput,
    ToolOutput,
    dumps,
    listing,
    page,
    tool,
)

# A quote's detail stays well inside the central 3,000-character cap; past this its lines are
# summarised, so a write never loses its answer (the reference) to truncation.
_DETAIL_BUDGET = 2600

QuoteReference = Field(
    min_length=2,
    max_length=64,
    description="The quote's reference as shown to the customer (e.g. QT-7K2F9Q), or its end.",
)
ExpectedTotal = Field(
    default=None,
    description='The total (tax included) you told the customer, as a string like "53.33". '
    "If it differs from the real total the call fails and states the real one.",
)


class StateOut(ToolOutput):
    state: str = Field(description="Machine state.")
    state_label: str = Field(description="The state as the customer is told it.")


class QuoteSummaryOut(StateOut):
    reference: str = Field(description="The quote's reference.")
    total: str = Field(description="Total, tax included, in the currency's units (e.g. 53.33).")
    currency: str = Field(description="ISO 4217 code.")
    valid_until: str = Field(description="Local date and time the quote expires (ISO 8601).")
    created: str = Field(description="Local date it was created (YYYY-MM-DD).")


class QuoteLineOut(ToolOutput):
    """A line's amounts, named as the integration API's quote lines name them."""

    sku: str
    name: str
    quantity: int
    unit_price_excl_tax: str = Field(description="Unit price, tax excluded.")
    tax_rate: str = Field(description="Tax rate in percent (21.00).")
    subtotal_excl_tax: str = Field(description="Quantity times unit price, tax excluded.")
    tax: str = Field(description="The line's tax.")
    total_incl_tax: str = Field(description="The line's amount, tax included.")


class QuoteDetailOut(QuoteSummaryOut):
    lines: list[QuoteLineOut] | None = Field(
        default=None, description="The lines; absent (see line_count) when too many to show."
    )
    line_count: int | None = Field(
        default=None, description="Present instead of lines when the lines do not fit."
    )
    subtotal: str = Field(description="Sum of the lines before tax.")
    tax: str = Field(description="Total tax.")
    emailed_to: str | None = Field(
        default=None, description="Masked email the new quote was sent to (create_quote)."
    )


ALREADY_DONE = Field(
    description="True when this customer already had exactly this request open (an earlier "
    "call, with another key, made it): this is that one, nothing was made or sent twice. Tell "
    "the customer it is done; do not call again."
)


class CreatedQuoteOut(QuoteDetailOut):
    already_done: bool = ALREADY_DONE


class ProductOut(ToolOutput):
    sku: str
    name: str
    unit: str
    unit_price: str = Field(description="Current unit price before tax.")
    in_stock: bool


class ProductsOut(PagedListOutput):
    items: list[ProductOut]
    currency: str | None = Field(
        default=None, description="ISO 4217 code of the prices (absent without a price list)."
    )


class QuotesOut(PagedListOutput):
    items: list[QuoteSummaryOut]


class OpportunityOut(StateOut):
    reference: str = Field(description="The sales request's reference.")
    already_done: bool = ALREADY_DONE


def _when(moment: datetime, company: Company) -> str:
    return timezone.localtime(moment, company.tz).isoformat(timespec="minutes")


def _quote_summary(quote: Quote, now: datetime) -> dict:
    return {
        "reference": quote.reference,
        **state_shown(quote.effective_state(now), QUOTE_STATE_LABELS),
        "total": money.to_wire(quote.total, quote.currency),
        "currency": quote.currency,
        "valid_until": _when(quote.valid_until, quote.company),
        "created": timezone.localtime(quote.created_at, quote.company.tz).date().isoformat(),
    }


def _quote_detail(quote: Quote, now: datetime, **extra: object) -> dict:
    currency = quote.currency
    detail = {
        **_quote_summary(quote, now),
        "lines": [
            {
                "sku": line.sku,
                "name": line.name,
                "quantity": line.quantity,
                "unit_price_excl_tax": money.to_wire(line.unit_price, currency),
                "tax_rate": str(line.tax_rate),
                # Tax excluded, as the email shows it: the lines add up to `subtotal`; their
                # amounts tax included add up to `total`.
                "subtotal_excl_tax": money.to_wire(line.subtotal, currency),
                "tax": money.to_wire(line.tax, currency),
                "total_incl_tax": money.to_wire(line.total, currency),
            }
            for line in quote.lines_shown()
        ],
        "subtotal": money.to_wire(quote.subtotal, currency),
        "tax": money.to_wire(quote.tax_total, currency),
        **extra,
    }
    if len(dumps(detail)) > _DETAIL_BUDGET:
        detail["line_count"] = len(detail.pop("lines"))
    return detail


def _ledger_entry(quote: Quote) -> LedgerEntry:
    # The creation date is the loose key a customer is likely to use ("la del 3 de marzo").
    created = timezone.localtime(quote.created_at, quote.company.tz).date().isoformat()
    return LedgerEntry(reference=quote.reference, label=created)


def _quote_seen(ctx: ToolContext, given: str, *, with_opportunity: bool = False) -> Quote:
    """The quote `given` designates among those this conversation saw, row-locked until the
    call's transaction ends (the transition reads it no more); whose it is, the transition
    checks (given `contact`).

    A reference the conversation never saw is refused; when it names another customer's
    quote the refusal is PERMISSION, so the agent escalates instead of asking again.
    """
    entry = ctx.seen(
        LedgerKind.QUOTE,
        given,
        owner=lambda reference: quote_owner_id(company=ctx.company, reference=reference),
    )
    return quote_get(
        company=ctx.company,
        reference=entry.reference,
        for_update=True,
        with_opportunity=with_opportunity,
    )


# --- search_products ----------------------------------------------------------------------------


class SearchProductsIn(ToolInput):
    query: str = Field(
        default="", max_length=100, description="Words of the product's name or its SKU."
    )
    limit: int = Field(default=10, ge=1, le=25, description="Maximum number of products.")
    cursor: str | None = Cursor


@tool(
    name="search_products",
    title="Search the product catalog",
    description=(
        "Finds products by name or SKU with their current unit price (before tax) and whether "
        "they are in stock. Availability is confirmed only when a quote is accepted."
    ),
    input=SearchProductsIn,
    output=ProductsOut,
)
def search_products(ctx: ToolContext, params: SearchProductsIn) -> dict:
    price_list = price_list_current(company=ctx.company)
    if price_list is None:
        return listing([], has_more=False, start=0)
    rows = product_search(company=ctx.company, price_list=price_list, query=params.query)
    products = page(rows, params.limit, params.cursor)
    items = [
        {
            "sku": p.sku,
            "name": p.name,
            "unit": p.unit,
            "unit_price": money.to_wire(p.unit_price, price_list.currency),
            "in_stock": p.in_stock(),
        }
        for p in products.rows
    ]
    return listing(
        items, has_more=products.has_more, start=products.start, currency=price_list.currency
    )


# --- create_quote -------------------------------------------------------------------------------


class QuoteItemIn(ToolInput):
    sku: str = Field(min_length=1, max_length=64, description="The product's SKU.")
    quantity: int = Field(ge=1, le=10_000)


class CreateQuoteIn(ToolInput):
    identifier: Identifier
    items: list[QuoteItemIn] = Field(min_length=1, max_length=20)
    expected_total: money.Amount | None = ExpectedTotal
    new_quote: bool = Field(
        default=False,
        description="Only when the customer explicitly wants a second quote identical to one "
        "they already have: without it, the same products and quantities asked again soon "
        "answer the existing quote (already_done).",
    )


@tool(
    name="create_quote",
    title="Create and send a quote",
    description=(
        "Prices the products from the catalog and the current price list, creates the quote "
        "and emails it to the customer's registered email. Totals are always computed here. "
        "The same products and quantities asked again soon by the same customer answer the "
        "quote already sent, with already_done: true (new_quote: true makes a second one)."
    ),
    input=CreateQuoteIn,
    output=CreatedQuoteOut,
    write=True,
    identified=True,
    step_up=True,
)
def create_quote(ctx: ToolContext, params: CreateQuoteIn) -> dict:
    done = quote_create_once(
        company=ctx.company,
        contact=ctx.contact,
        items=[QuoteItem(sku=i.sku, quantity=i.quantity) for i in params.items],
        expected_total=params.expected_total,
        conversation=ctx.conversation,
        new_quote=params.new_quote,
    )
    quote = done.record
    ctx.show(LedgerKind.QUOTE, [_ledger_entry(quote)])
    return _quote_detail(
        quote,
        timezone.now(),
        emailed_to=mask_email(ctx.contact.email) or None,
        already_done=done.already_done,
    )


# --- list_my_quotes / get_quote -----------------------------------------------------------------


# Drafts are staff work in progress, never listed to the customer: not a filter value.
QuoteStateFilter = state_filter(
    QUOTE_STATE_LABELS,
    [
        Quote.State.SENT,
        Quote.State.ACCEPTED,
        Quote.State.REJECTED,
        Quote.State.EXPIRED,
        Quote.State.SUPERSEDED,
        Quote.State.DELIVERED,
        Quote.State.CANCELLED,
    ],
)


class ListMyQuotesIn(ToolInput):
    identifier: Identifier
    state: QuoteStateFilter | None = Field(
        default=None, description="Only quotes in this state (Spanish labels accepted too)."
    )
    limit: int = Field(default=10, ge=1, le=20)
    cursor: str | None = Cursor


@tool(
    name="list_my_quotes",
    title="List the customer's quotes",
    description=(
        "Lists the identified customer's quotes, newest first, with state, state_label (what "
        "to tell the customer) and total."
    ),
    input=ListMyQuotesIn,
    output=QuotesOut,
    identified=True,
    step_up=True,
)
def list_my_quotes(ctx: ToolContext, params: ListMyQuotesIn) -> dict:
    now = timezone.now()
    rows = quote_list(contact=ctx.contact, state=params.state, now=now).select_related("company")
    quotes = page(rows, params.limit, params.cursor)
    ctx.show(LedgerKind.QUOTE, [_ledger_entry(q) for q in quotes.rows])
    return listing(
        [_quote_summary(q, now) for q in quotes.rows], has_more=quotes.has_more, start=quotes.start
    )


class GetQuoteIn(ToolInput):
    identifier: Identifier
    quote: str = QuoteReference


@tool(
    name="get_quote",
    title="Show one of the customer's quotes",
    description=(
        "Shows a quote of the identified customer: lines (amounts tax excluded and tax "
        "included), taxes, total and validity."
    ),
    input=GetQuoteIn,
    output=QuoteDetailOut,
    identified=True,
    step_up=True,
)
def get_quote(ctx: ToolContext, params: GetQuoteIn) -> dict:
    try:
        reference = ctx.seen(LedgerKind.QUOTE, params.quote).reference
    except ValidationFailed as error:
        if error.code != "reference_not_seen":
            raise
        reference = normalize_reference(params.quote)  # e.g. read from the quote's email
    quote = quote_get(company=ctx.company, reference=reference, contact=ctx.contact)
    ctx.show(LedgerKind.QUOTE, [_ledger_entry(quote)])
    return _quote_detail(quote, timezone.now())


# --- accept_quote / reject_quote ----------------------------------------------------------------


class AcceptQuoteIn(ToolInput):
    identifier: Identifier
    quote: str = QuoteReference
    expected_total: money.Amount | None = ExpectedTotal


@tool(
    name="accept_quote",
    title="Accept a quote",
    description=(
        "Accepts one of the customer's quotes shown in this conversation; stock is reserved "
        "now. May require a verification code (request_verification_code) first."
    ),
    input=AcceptQuoteIn,
    output=QuoteSummaryOut,
    write=True,
    identified=True,
    step_up=True,
    step_up_deferred=True,
)
def accept_quote(ctx: ToolContext, params: AcceptQuoteIn) -> dict:
    quote = quote_accept(
        # Its opportunity locked first: acceptance wins it and settles its other quotes.
        quote=_quote_seen(ctx, params.quote, with_opportunity=True),
        expected_total=params.expected_total,
        contact=ctx.contact,
        # The step-up comes after the quote's state, validity and total checks (a quote that
        # cannot be accepted anyway says why without asking for a code first), so the tool
        # defers it to the service, which asks it before any effect.
        authorize=ctx.require_step_up,
        locked=True,
    )
    return _quote_summary(quote, timezone.now())


class RejectQuoteIn(ToolInput):
    identifier: Identifier
    quote: str = QuoteReference
    reason: str = Field(default="", max_length=300, description="Why, in the customer's words.")
    confirmation_code: ConfirmationCode


@tool(
    name="reject_quote",
    title="Reject a quote",
    description=(
        "Rejects one of the customer's quotes shown in this conversation. " + CONFIRMATION_HELP
    ),
    input=RejectQuoteIn,
    output=QuoteSummaryOut,
    write=True,
    identified=True,
    step_up=True,
    confirmation=True,
)
def reject_quote(ctx: ToolContext, params: RejectQuoteIn) -> dict:
    quote = _quote_seen(ctx, params.quote)
    quote = quote_reject(
        quote=quote,
        reason=params.reason,
        contact=ctx.contact,
        locked=True,
        # The reason is the customer's words, not what they confirm: the quote is.
        authorize=lambda: ctx.confirm(
            reference=quote.reference,
            summary=_("rechazar su presupuesto %(reference)s") % {"reference": quote.reference},
        ),
    )
    return _quote_summary(quote, timezone.now())


# --- request_sales_contact ----------------------------------------------------------------------


class RequestSalesContactIn(ToolInput):
    identifier: Identifier
    topic: str = Field(min_length=3, max_length=200, description="What the customer wants.")
    notes: str = Field(default="", max_length=1000, description="Details for the sales team.")
    new_request: bool = Field(
        default=False,
        description="Only when the customer explicitly wants a second request on a topic they "
        "already asked about: without it, the same topic asked again within a day answers the "
        "open request (already_done).",
    )


@tool(
    name="request_sales_contact",
    title="Ask the sales team to contact the customer",
    description=(
        "Opens a sales opportunity so the sales team contacts the identified customer. The "
        "same topic asked again by the same customer within the company's window answers the "
        "open one with already_done: true, and the team is not told twice."
    ),
    input=RequestSalesContactIn,
    output=OpportunityOut,
    write=True,
    identified=True,
    step_up=True,
)
def request_sales_contact(ctx: ToolContext, params: RequestSalesContactIn) -> dict:
    done = opportunity_request_once(
        company=ctx.company,
        contact=ctx.contact,
        topic=params.topic,
        notes=params.notes,
        conversation=ctx.conversation,
        new_request=params.new_request,
    )
    opportunity = done.record
    ctx.show(LedgerKind.OPPORTUNITY, [LedgerEntry(opportunity.reference, label=opportunity.title)])
    return {
        "reference": opportunity.reference,
        **state_shown(opportunity.state, OPPORTUNITY_STATE_LABELS),
        "already_done": done.already_done,
    }
