"""The staff landing page's reads: today's appointments, open cases, quotes awaiting an answer
and recent security events, for the companies a staff member may see, in company local time.

The admin site is the project's composition root (like core.urls), so this is the one core
module that reads the domain apps' models; it does so through the app registry by name and
skips a panel whose app is not installed, so core still imports no domain app.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.apps import apps
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils import formats, timezone
from django.utils.translation import gettext_lazy as _

from core.models import Company, SecurityEvent

PANEL_ROWS = 10
# Wide enough to hold "today" in every timezone (UTC-12 to UTC+14) around the current instant.
_TODAY_WINDOW = timedelta(hours=38)


@dataclass
class Panel:
    key: str
    title: str
    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    more_url: str = ""
    empty: str = ""


def _model(label: str) -> type[Model] | None:
    try:
        return apps.get_model(label)
    except LookupError:
        return None


def _scoped(queryset: QuerySet, company_ids: list[int] | None) -> QuerySet:
    return queryset if company_ids is None else queryset.filter(company_id__in=company_ids)


def _change_url(obj: Model) -> str:
    opts = obj._meta
    try:
        return reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
    except NoReverseMatch:
        return ""


def _changelist_url(model: type[Model], query: str = "") -> str:
    opts = model._meta
    try:
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    except NoReverseMatch:
        return ""
    return f"{url}?{query}" if query else url


def local_datetime(instant: datetime | None, company: Company) -> str:
    if instant is None:
        return "—"
    return formats.date_format(instant.astimezone(company.tz), "SHORT_DATETIME_FORMAT")


def local_time(instant: datetime, company: Company) -> str:
    return formats.time_format(instant.astimezone(company.tz), "TIME_FORMAT")


def _can_view(request: HttpRequest, model: type[Model]) -> bool:
    opts = model._meta
    return request.user.has_perm(f"{opts.app_label}.view_{opts.model_name}")


def todays_appointments(request: HttpRequest, company_ids: list[int] | None, now: datetime):
    Appointment = _model("agenda.Appointment")
    if Appointment is None or not _can_view(request, Appointment):
        return None
    candidates = (
        _scoped(Appointment.objects.all(), company_ids)
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
        more_url=_changelist_url(Appointment),
        empty=_("No appointments today."),
    )
    for a in todays[:PANEL_ROWS]:
        panel.rows.append(
            {
                "url": _change_url(a),
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


def open_cases(request: HttpRequest, company_ids: list[int] | None, now: datetime):
    Case = _model("support.Case")
    if Case is None or not _can_view(request, Case):
        return None
    queryset = _scoped(Case.objects.all(), company_ids).filter(
        state__in=["open", "in_progress", "waiting_customer"]
    )
    panel = Panel(
        key="cases",
        title=_("Open cases"),
        columns=[
            _("opened"),
            _("reference"),
            _("subject"),
            _("contact"),
            _("priority"),
            _("state"),
        ],
        total=queryset.count(),
        more_url=_changelist_url(Case),
        empty=_("No open cases."),
    )
    for c in queryset.select_related("company", "contact").order_by("created_at")[:PANEL_ROWS]:
        panel.rows.append(
            {
                "url": _change_url(c),
                "company": c.company.name,
                "cells": [
                    local_datetime(c.created_at, c.company),
                    c.reference,
                    c.subject,
                    str(c.contact),
                    c.get_priority_display(),
                    c.get_state_display(),
                ],
            }
        )
    return panel


def quotes_awaiting_answer(request: HttpRequest, company_ids: list[int] | None, now: datetime):
    Quote = _model("sales.Quote")
    if Quote is None or not _can_view(request, Quote):
        return None
    # Sent and still answerable at this instant: one past its validity is expired already.
    queryset = _scoped(Quote.objects.in_effective_state(Quote.State.SENT, now), company_ids)
    panel = Panel(
        key="quotes",
        title=_("Quotes awaiting an answer"),
        columns=[_("valid until"), _("reference"), _("contact"), _("total")],
        total=queryset.count(),
        more_url=_changelist_url(Quote, "state__exact=sent"),
        empty=_("No quotes are waiting for an answer."),
    )
    for q in queryset.select_related("company", "contact").order_by("valid_until")[:PANEL_ROWS]:
        panel.rows.append(
            {
                "url": _change_url(q),
                "company": q.company.name,
                "cells": [
                    local_datetime(q.valid_until, q.company),
                    q.reference,
                    str(q.contact),
                    f"{formats.number_format(q.total, 2, use_l10n=True)} {q.currency}",
                ],
            }
        )
    return panel


def recent_security_events(request: HttpRequest, company_ids: list[int] | None, now: datetime):
    if not _can_view(request, SecurityEvent):
        return None
    queryset = _scoped(SecurityEvent.objects.all(), company_ids).filter(
        created_at__gte=now - timedelta(days=7)
    )
    panel = Panel(
        key="security",
        title=_("Security events (last 7 days)"),
        columns=[_("when"), _("kind"), _("conversation"), _("contact")],
        total=queryset.count(),
        more_url=_changelist_url(SecurityEvent),
        empty=_("No security events in the last 7 days."),
    )
    for e in queryset.select_related("company", "contact").order_by("-created_at")[:PANEL_ROWS]:
        panel.rows.append(
            {
                "url": _change_url(e),
                "company": e.company.name,
                "cells": [
                    local_datetime(e.created_at, e.company),
                    e.get_kind_display(),
                    e.conversation_key[:40],
                    str(e.contact) if e.contact_id else "—",
                ],
            }
        )
    return panel


PANELS = [todays_appointments, open_cases, quotes_awaiting_answer, recent_security_events]


def staff_dashboard(request: HttpRequest, company_ids: list[int] | None) -> dict[str, Any]:
    """The landing page's context: one panel per kind of work the staff member may see."""
    now = timezone.now()
    panels = [p for p in (panel(request, company_ids, now) for panel in PANELS) if p is not None]
    companies = Company.objects.all()
    if company_ids is not None:
        companies = companies.filter(pk__in=company_ids)
    shown = list(companies.order_by("name")[:6])
    return {
        "dashboard_panels": panels,
        "dashboard_companies": [
            {"name": c.name, "now": local_datetime(now, c), "timezone": c.timezone} for c in shown
        ],
        "dashboard_many_companies": company_ids is None or len(company_ids) > 1,
    }
