"""The public service API of sales: exactly the names imported from outside the app."""

from sales.models import OPPORTUNITY_STATE_LABELS, QUOTE_STATE_LABELS
from sales.services.opportunities import (
    opportunity_create,
    opportunity_details_set,
    opportunity_lose,
    opportunity_negotiate,
    opportunity_propose,
    opportunity_qualify,
    opportunity_win,
)
from sales.services.quote_lifecycle import (
    quote_accept,
    quote_cancel,
    quote_create,
    quote_deliver,
    quote_expire,
    quote_reject,
    quote_send,
)
from sales.services.quote_pricing import MAX_LINE_QUANTITY, MAX_QUOTE_LINES, QuoteItem

__all__ = [
    "MAX_LINE_QUANTITY",
    "MAX_QUOTE_LINES",
    "OPPORTUNITY_STATE_LABELS",
    "QUOTE_STATE_LABELS",
    "QuoteItem",
    "opportunity_create",
    "opportunity_details_set",
    "opportunity_lose",
    "opportunity_negotiate",
    "opportunity_propose",
    "opportunity_qualify",
    "opportunity_win",
    "quote_accept",
    "quote_cancel",
    "quote_create",
    "quote_deliver",
    "quote_expire",
    "quote_reject",
    "quote_send",
]
