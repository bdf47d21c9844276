"""A sent quote's email: delivered by a Celery worker, swept again if it never went out."""

import logging
from datetime import datetime, timedelta

from django.template.loader import render_to_string
from django.utils import timezone, translation
from django.utils.translation import gettext_lazy as _

from core.l10n import datetime_shown
from core.outbound import EMAIL, OutboundRefused, message_send
from core.transactions import one_at_a_time
from sales import money
from sales.models import QUOTE_STATE_LABELS, Quote
from sales.quote_links import quote_page_key_ensure, quote_page_url

logger = logging.getLogger("garante.sales")


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
    quote_page_key_ensure(quote)
    with translation.override(quote.company.language), timezone.override(quote.company.tz):
        subject, body = _quote_email(quote)
    # A transient failure (OutboundTransient) is raised: the task retries it; past its
    # retries, the sweep enqueues it again. A sandbox's email is kept in its outbox.
    try:
        message_send(
            company=quote.company,
            channel=EMAIL,
            to=quote.contact.email,
            subject=subject,
            body=body,
        )
    except OutboundRefused as exc:
        # Refused for good (550 no such mailbox): sending it again cannot help. Recorded, so
        # the sweep skips it and staff see why the customer has no email.
        error = exc.detail
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
        # Its page (sales.quote_pages), when the site's public address is set.
        "page_url": quote_page_url(quote),
    }
    subject = render_to_string("sales/quote_email_subject.txt", context).strip()
    return subject, render_to_string("sales/quote_email.txt", context)


def _validity_sentence(valid_until: datetime) -> str:
    """The email's validity sentence in the active language and timezone, ending in one full
    stop even when the date itself ends in one (English times end in "a.m.")."""
    until = datetime_shown(valid_until)
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
