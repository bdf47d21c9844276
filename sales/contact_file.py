"""Sales' sections of the customer's file (core.contact_file): their quotes, their orders (the
quotes they accepted), their opportunities, and the quotes emailed to them."""

from datetime import datetime

from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext, npgettext

from core.contact_file import FileRow, FileSection, by_contact, contact_file_section, shown_at
from core.models import Contact
from sales import money
from sales.models import Opportunity, Quote
from sales.selectors import (
    ORDER_STATES,
    contact_opportunities_file,
    contact_quote_emails_file,
    contact_quote_messages_file,
    contact_quotes_file,
)


def _quote_row(quote: Quote, contact: Contact, now: datetime) -> FileRow:
    # The state the customer would be told: an open quote past its validity is expired.
    state = Quote.State(quote.effective_state(now)).label
    return FileRow(
        quote,
        [
            quote.reference,
            shown_at(quote.created_at, contact),
            money.shown(quote.total, quote.currency),
            state,
        ],
    )


_QUOTE_COLUMNS = [_("reference"), _("created"), _("total"), _("state")]


@contact_file_section(position=20, visible_with=Quote)
def quotes(contact: Contact, now: datetime, limit: int) -> FileSection:
    total, open_, latest = contact_quotes_file(contact=contact, now=now, limit=limit, orders=False)
    others = [s for s in Quote.State.values if s not in ORDER_STATES]
    return FileSection(
        key="quotes",
        title=_("Quotes"),
        total=total,
        note=npgettext("quotes", "%(n)d open", "%(n)d open", open_) % {"n": open_},
        columns=_QUOTE_COLUMNS,
        rows=[_quote_row(q, contact, now) for q in latest],
        empty=_("No quotes yet."),
        list_model=Quote,
        list_query={**by_contact(contact), "state__in": ",".join(others)},
        add_model=Quote,
        add_label=_("New quote"),
    )


@contact_file_section(position=30, visible_with=Quote)
def orders(contact: Contact, now: datetime, limit: int) -> FileSection:
    total, open_, latest = contact_quotes_file(contact=contact, now=now, limit=limit, orders=True)
    return FileSection(
        key="orders",
        title=_("Orders"),
        total=total,
        note=ngettext("%(n)d to deliver", "%(n)d to deliver", open_) % {"n": open_},
        columns=_QUOTE_COLUMNS,
        rows=[_quote_row(q, contact, now) for q in latest],
        empty=_("No orders yet: a quote the customer accepts becomes an order."),
        list_model=Quote,
        list_query={**by_contact(contact), "state__in": ",".join(ORDER_STATES)},
    )


@contact_file_section(position=50, visible_with=Opportunity)
def opportunities(contact: Contact, now: datetime, limit: int) -> FileSection:
    total, open_, latest = contact_opportunities_file(contact=contact, limit=limit)
    return FileSection(
        key="opportunities",
        title=_("Opportunities"),
        total=total,
        note=npgettext("opportunities", "%(n)d open", "%(n)d open", open_) % {"n": open_},
        columns=[_("reference"), _("title"), _("amount"), _("stage"), _("created")],
        rows=[
            FileRow(
                o,
                [
                    o.reference,
                    o.title,
                    money.shown(o.amount, o.currency),
                    o.get_state_display(),
                    shown_at(o.created_at, contact),
                ],
            )
            for o in latest
        ],
        empty=_("No opportunities yet."),
        list_model=Opportunity,
        list_query=by_contact(contact),
        add_model=Opportunity,
        add_label=_("New opportunity"),
    )


@contact_file_section(position=75, visible_with=Quote)
def quote_emails(contact: Contact, now: datetime, limit: int) -> FileSection:
    total, latest = contact_quote_emails_file(contact=contact, limit=limit)
    return FileSection(
        key="quote_emails",
        title=_("Quote emails"),
        total=total,
        columns=[_("quote"), _("emailed"), _("total")],
        rows=[
            FileRow(
                q,
                [q.reference, shown_at(q.emailed_at, contact), money.shown(q.total, q.currency)],
            )
            for q in latest
        ],
        empty=_("No quote was emailed to this contact."),
        list_model=Quote,
        list_query={**by_contact(contact), "emailed_at__isnull": "False"},
    )


@contact_file_section(position=76, visible_with=Quote)
def quote_messages(contact: Contact, now: datetime, limit: int) -> FileSection:
    """What the customer was sent when staff settled their quotes and orders (as on the
    quote's own page); each row links to its quote."""
    total, latest = contact_quote_messages_file(contact=contact, limit=limit)
    return FileSection(
        key="quote_messages",
        title=_("Quote and order messages"),
        total=total,
        columns=[_("quote"), _("message"), _("sent to"), _("status"), _("sent")],
        rows=[
            FileRow(
                m.quote,
                [
                    m.quote.reference,
                    m.get_kind_display(),
                    f"{m.get_channel_display()} {m.masked_destination}".strip(),
                    m.get_status_display(),
                    shown_at(m.sent_at, contact),
                ],
            )
            for m in latest
        ],
        empty=_("No message about a quote or order was sent to this contact."),
    )
