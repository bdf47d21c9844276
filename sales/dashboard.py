"""Sales' panel on the staff landing page (core.dashboard): quotes awaiting an answer."""

from datetime import datetime

from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from core.dashboard import (
    PANEL_ROWS,
    Panel,
    can_view,
    change_url,
    changelist_url,
    dashboard_panel,
    local_datetime,
    scoped,
)
from sales import money
from sales.models import Quote


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
