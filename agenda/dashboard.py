"""Agenda's panel on the staff landing page (core.dashboard): today's appointments."""

from datetime import datetime, timedelta

from django.http import HttpRequest
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from agenda.models import Appointment
from core.dashboard import (
    PANEL_ROWS,
    Panel,
    can_view,
    change_url,
    dashboard_panel,
    local_time,
    scoped,
)


def _agenda_url(company_ids: list[int] | None) -> str:
    """The team's calendar (every professional side by side, today), of the only company
    shown."""
    url = reverse("admin:agenda_calendar_changelist")
    return f"{url}?company={company_ids[0]}" if company_ids and len(company_ids) == 1 else url


# Wide enough to hold "today" in every timezone (UTC-12 to UTC+14) around the current instant.
_TODAY_WINDOW = timedelta(hours=38)


@dashboard_panel(position=10)
def todays_appointments(request: HttpRequest, company_ids: list[int] | None, now: datetime):
    if not can_view(request, Appointment):
        return None
    candidates = (
        scoped(Appointment.objects.all(), company_ids)
        .filter(starts_at__gte=now - _TODAY_WINDOW, starts_at__lt=now + _TODAY_WINDOW)
        .select_related("company", "contact", "service", "professional")
        .order_by("starts_at")
    )
    # "Today" is each company's own local day.
    todays = [
        a
        for a in candidates
        if a.starts_at.astimezone(a.company.tz).date() == now.astimezone(a.company.tz).date()
    ]
    panel = Panel(
        key="appointments",
        title=_("Today's appointments"),
        columns=[
            _("time"),
            _("reference"),
            _("contact"),
            _("service"),
            _("professional"),
            _("state"),
        ],
        total=len(todays),
        more_url=_agenda_url(company_ids),
        empty=_("No appointments today."),
    )
    for a in todays[:PANEL_ROWS]:
        panel.rows.append(
            {
                "url": change_url(a),
                "company": a.company.name,
                "cells": [
                    local_time(a.starts_at, a.company),
                    a.reference,
                    str(a.contact),
                    a.service.name,
                    a.professional.display_name if a.professional_id else "—",
                    a.get_state_display(),
                ],
            }
        )
    return panel
