"""Sales models: catalog and stock, price lists, quotes with their lines, and opportunities.
One module per topic; every model is importable from here.

State fields are protected django-fsm-2 fields: only the transition methods change them, and
only the services in sales.services call those, under a row lock.
"""

from sales.models.catalogue import PriceList, PriceListItem, Product
from sales.models.messages import QuoteMessage
from sales.models.opportunities import OPPORTUNITY_STATE_LABELS, Opportunity
from sales.models.preferences import SalesSettings
from sales.models.quotes import (
    QUOTE_STATE_LABELS,
    Quote,
    QuoteLine,
    QuoteQuerySet,
    StockReservation,
)

__all__ = [
    "OPPORTUNITY_STATE_LABELS",
    "QUOTE_STATE_LABELS",
    "Opportunity",
    "PriceList",
    "PriceListItem",
    "Product",
    "Quote",
    "QuoteLine",
    "QuoteMessage",
    "QuoteQuerySet",
    "SalesSettings",
    "StockReservation",
]
