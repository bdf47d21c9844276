"""The link in a quote's email to its page (sales.quote_pages, sales.quote_views).

The link holds the quote's `page_key` (drawn when its email is first written; a retried email
keeps it) with its tag (core.customer_links): no reference or row id. It works until
LINK_DAYS_AFTER_VALIDITY after the quote's validity, then shows the "expired link" page; a
decided or expired quote's page shows its state.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from core.customer_links import link_key_new, link_token
from sales.models import Quote

PURPOSE = "quote"
LINK_DAYS_AFTER_VALIDITY = 30


def quote_page_url(quote: Quote) -> str:
    """The quote page's link, or "" without a public address or a key."""
    base = settings.GARANTE_PUBLIC_URL
    if not base or not quote.page_key:
        return ""
    return base + reverse("quote_page", args=[link_token(quote.page_key, PURPOSE)])


def quote_page_key_ensure(quote: Quote) -> Quote:
    """Give the quote its page key, once (a retried email keeps the first one's link)."""
    if quote.page_key is None:
        Quote.objects.filter(pk=quote.pk, page_key__isnull=True).update(page_key=link_key_new())
        quote.page_key = Quote.objects.filter(pk=quote.pk).values_list("page_key", flat=True)[0]
    return quote


@dataclass(frozen=True)
class QuoteTarget:
    key: str
    quote: Quote  # with its company, contact and lines
    expired: bool


def quote_target(key: str, *, now: datetime | None = None) -> QuoteTarget | None:
    """The quote a link's key names (expired or not), or None."""
    quote = (
        Quote.objects.select_related("company", "contact")
        .prefetch_related("lines")
        .filter(page_key=key)
        .first()
    )
    if quote is None:
        return None
    ends = quote.valid_until + timedelta(days=LINK_DAYS_AFTER_VALIDITY)
    return QuoteTarget(key, quote, ends <= (now or timezone.now()))
