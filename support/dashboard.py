"""Support's panel on the staff landing page (core.dashboard): the open cases."""

from datetime import datetime

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
    scoped,
)
from support.models import Case


@dashboard_panel(position=20)
def open_cases(request: HttpRequest, company_ids: list[int] | None, now: datetime):
    if not can_view(request, Case):
        return None
    queryset = scoped(Case.objects.all(), company_ids).filter(
        state__in=["open", "in_progress", "waiting_customer"]
    )
    panel = Panel(
        key="cases",
        title=_("Open cases"),
        columns=[
            _("age"),
            _("reference"),
            _("subject"),
            _("contact"),
            _("priority"),
            _("state"),
        ],
        total=queryset.count(),
        more_url=changelist_url(Case, "state__in=open,in_progress,waiting_customer"),
        empty=_("No open cases."),
    )
    for c in queryset.select_related("company", "contact").order_by("created_at")[:PANEL_ROWS]:
        panel.rows.append(
            {
                "url": change_url(c),
                "company": c.company.name,
                "cells": [
                    age_shown(now - c.created_at),
                    c.reference,
                    c.subject,
                    str(c.contact),
                    c.get_priority_display(),
                    c.get_state_display(),
                ],
            }
        )
    return panel
