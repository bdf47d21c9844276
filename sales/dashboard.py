"""Sales' panels on the staff landing page (core.dashboard): new leads with their age (those
nobody took within the company's pickup time highlighted), and quotes awaiting an answer."""

from datetime import datetime

from django.db.models import F
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from core.dashboard import (
    PANEL_ROWS,
    Panel,
    age_shown,
    can_view,
    change_url,
    changelist_url,
    dashboard_panel,
    local_datetime,
    scoped,
)
from sales import money
from sales.models import Opportunity, Quote
from sales.selectors import opportunities_with_lead_overdue


@dashboard_panel(position=25)
def new_leads(request: HttpRequest, company_ids: list[int] | None, now: datetime):
    """Opportunities still new: those nobody took first, the longest waiting first; a lead
    nobody took within its company's pickup time (SalesSettings) is highlighted."""
    if not can_view(request, Opportunity):
        return None
    queryset = scoped(Opportunity.objects.filter(state=Opportunity.State.NEW), company_ids)
    panel = Panel(
        key="leads",
        title=_("New leads"),
        columns=[_("waiting"), _("reference"), _("topic"), _("contact"), _("assigned to")],
        total=queryset.count(),
        more_url=changelist_url(Opportunity, "state__exact=new"),
        empty=_("No new leads."),
    )
    rows = (
        opportunities_with_lead_overdue(queryset, now=now)
        .select_related("company", "contact", "owner")
        .order_by("-lead_overdue", F("owner_id").asc(nulls_first=True), "created_at")[:PANEL_ROWS]
    )
    for o in rows:
        panel.rows.append(
            {
                "url": change_url(o),
                "company": o.company.name,
                "highlight": o.lead_overdue,
                "cells": [
                    age_shown(now - o.created_at),
                    o.reference,
                    o.title,
                    str(o.contact),
                    (o.owner.get_full_name() or o.owner.get_username())
                    if o.owner_id
                    else _("nobody yet"),
                ],
            }
        )
    return panel


@dashboard_panel(position=30)
def quotes_awaiting_answer(request: HttpRequest, company_ids: list[int] | None, now: datetime):
    if not can_view(request, Quote):
        return None
    # Sent and still answerable at this instant: one past its validity is expired already.
    queryset = scoped(Quote.objects.in_effective_state(Quote.State.SENT, now), company_ids)
    panel = Panel(
        key="quotes",
        title=_("Quotes awaiting an answer"),
        columns=[_("valid until"), _("reference"), _("contact"), _("total")],
        total=queryset.count(),
        more_url=changelist_url(Quote, "state__exact=sent"),
        empty=_("No quotes are waiting for an answer."),
    )
    for q in queryset.select_related("company", "contact").order_by("valid_until")[:PANEL_ROWS]:
        panel.rows.append(
            {
                "url": change_url(q),
                "company": q.company.name,
                "cells": [
                    local_datetime(q.valid_until, q.company),
                    q.reference,
                    str(q.contact),
                    money.shown(q.total, q.currency),
                ],
            }
        )
    return panel
