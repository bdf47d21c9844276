"""The staff landing page: a panel per kind of work (today's appointments, open cases, quotes
awaiting an answer, recent security events) for the companies a staff member may see, in
company local time.

Each app contributes its panels from its own `dashboard` module (found by autodiscovery,
core.apps) with `@dashboard_panel(position)`; this module holds the page's frame, the helpers
the panels share, and core's own panel.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, Model, Q, QuerySet
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from core.l10n import datetime_shown, time_shown
from core.models import Company, GatewayCredential, SecurityEvent, VerificationChallenge

PANEL_ROWS = 10


@dataclass
class Panel:
    """One panel. Each row is a dict: `cells`, `company`, `url` (the second cell links to it)
    and, for a row that needs someone now (a lead nobody took in time, a burst on a credential
    still active), `highlight: True`. An `alert` panel stands out whole, at the top."""

    key: str
    title: str
    columns: list[str]
    rows: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    more_url: str = ""
    empty: str = ""
    alert: bool = False


# A panel: given the request, the companies shown (None: all) and the instant, a Panel, or None
# when the staff member may not see that kind of work.
PanelFunction = Callable[[HttpRequest, list[int] | None, datetime], Panel | None]
_PANELS: dict[str, tuple[int, PanelFunction]] = {}


def dashboard_panel(position: int) -> Callable[[PanelFunction], PanelFunction]:
    """Show the decorated panel on the landing page, lower positions first."""

    def register(panel: PanelFunction) -> PanelFunction:
        _PANELS[f"{panel.__module__}.{panel.__qualname__}"] = (position, panel)
        return panel

    return register


def panels_in_order() -> list[PanelFunction]:
    return [panel for _position, panel in sorted(_PANELS.values(), key=lambda p: p[0])]


def scoped(queryset: QuerySet, company_ids: list[int] | None) -> QuerySet:
    return queryset if company_ids is None else queryset.filter(company_id__in=company_ids)


def change_url(obj: Model) -> str:
    opts = obj._meta
    try:
        return reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
    except NoReverseMatch:
        return ""


def changelist_url(model: type[Model], query: str = "") -> str:
    opts = model._meta
    try:
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    except NoReverseMatch:
        return ""
    return f"{url}?{query}" if query else url


def local_datetime(instant: datetime | None, company: Company) -> str:
    if instant is None:
        return "—"
    return datetime_shown(instant, company.tz)


def local_time(instant: datetime, company: Company) -> str:
    return time_shown(instant, company.tz)


def age_shown(age: timedelta) -> str:
    """How long something has waited, as a queue reads it: days, hours on its first day,
    minutes in its first hour."""
    if age >= timedelta(days=1):
        return ngettext("%(n)d day", "%(n)d days", age.days) % {"n": age.days}
    if age >= timedelta(hours=1):
        hours = int(age.total_seconds() // 3600)
        return ngettext("%(n)d hour", "%(n)d hours", hours) % {"n": hours}
    minutes = max(0, int(age.total_seconds() // 60))
    return ngettext("%(n)d minute", "%(n)d minutes", minutes) % {"n": minutes}


def can_view(request: HttpRequest, model: type[Model]) -> bool:
    opts = model._meta
    return request.user.has_perm(f"{opts.app_label}.view_{opts.model_name}")


@dashboard_panel(position=90)
def recent_security_events(request: HttpRequest, company_ids: list[int] | None, now: datetime):
    if not can_view(request, SecurityEvent):
        return None
    queryset = scoped(SecurityEvent.objects.all(), company_ids).filter(
        created_at__gte=now - timedelta(days=7)
    )
    panel = Panel(
        key="security",
        title=_("Security events (last 7 days)"),
        columns=[_("when"), _("kind"), _("conversation"), _("contact")],
        total=queryset.count(),
        more_url=changelist_url(SecurityEvent),
        empty=_("No security events in the last 7 days."),
    )
    for e in queryset.select_related("company", "contact").order_by("-created_at")[:PANEL_ROWS]:
        panel.rows.append(
            {
                "url": change_url(e),
                "company": e.company.name,
                "highlight": e.kind == SecurityEvent.Kind.IDENTIFICATION_BURST,
                "cells": [
                    local_datetime(e.created_at, e.company),
                    e.get_kind_display(),
                    e.conversation_key[:40],
                    str(e.contact) if e.contact_id else "—",
                ],
            }
        )
    return panel


@dashboard_panel(position=5)
def security_alerts(request: HttpRequest, company_ids: list[int] | None, now: datetime):
    """Bursts of failed identifications in the last 7 days on gateway credentials still
    active: someone may be enumerating customers through them, and only revoking the
    credential stops it. Shown at the top, and only while there is one."""
    if not can_view(request, SecurityEvent):
        return None
    active = scoped(GatewayCredential.objects.all(), company_ids).filter(revoked_at__isnull=True)
    queryset = scoped(SecurityEvent.objects.all(), company_ids).filter(
        kind=SecurityEvent.Kind.IDENTIFICATION_BURST,
        created_at__gte=now - timedelta(days=7),
        credential__in=active,
    )
    events = list(queryset.select_related("company", "credential").order_by("-created_at"))
    if not events:
        return None
    may_see_credentials = can_view(request, GatewayCredential)
    panel = Panel(
        key="security_alerts",
        title=_("Security alerts: credentials under a burst of failed identifications"),
        columns=[_("when"), _("credential"), _("failures"), _("what to do")],
        total=len(events),
        more_url=changelist_url(SecurityEvent, "kind__exact=identification_burst"),
        alert=True,
    )
    for e in events[:PANEL_ROWS]:
        detail = e.detail if isinstance(e.detail, dict) else {}
        panel.rows.append(
            {
                # Those who may revoke land on the credential, the others on the event.
                "url": change_url(e.credential) if may_see_credentials else change_url(e),
                "company": e.company.name,
                "highlight": True,
                "cells": [
                    local_datetime(e.created_at, e.company),
                    str(e.credential),
                    _("%(failures)s in %(minutes)s min")
                    % {
                        "failures": detail.get("failures", "?"),
                        "minutes": detail.get("window_minutes", "?"),
                    },
                    _("Revoke it if the traffic is not yours")
                    if may_see_credentials
                    else _("Tell an administrator"),
                ],
            }
        )
    return panel


@dashboard_panel(position=80)
def codes_locked(request: HttpRequest, company_ids: list[int] | None, now: datetime):
    """Codes locked by too many wrong attempts in the last day: a customer stuck, or someone
    guessing."""
    if not can_view(request, VerificationChallenge):
        return None
    since = now - timedelta(days=1)
    queryset = scoped(VerificationChallenge.objects.all(), company_ids).filter(
        status=VerificationChallenge.Status.LOCKED, created_at__gte=since
    )
    panel = Panel(
        key="codes",
        title=_("Codes locked in the last day"),
        columns=[_("issued"), _("contact"), _("channel"), _("sent to")],
        total=queryset.count(),
        more_url=changelist_url(
            VerificationChallenge,
            f"status__exact=locked&created_at__gte={since.date().isoformat()}",
        ),
        empty=_("No codes were locked in the last day."),
    )
    rows = queryset.select_related("company", "contact").order_by("-created_at")[:PANEL_ROWS]
    for c in rows:
        panel.rows.append(
            {
                "url": change_url(c),
                "company": c.company.name,
                "cells": [
                    local_datetime(c.created_at, c.company),
                    str(c.contact) if c.contact_id else "—",
                    c.get_channel_display(),
                    c.masked_destination,
                ],
            }
        )
    return panel


@dashboard_panel(position=85)
def verified_mode_codes(request: HttpRequest, company_ids: list[int] | None, now: datetime):
    """What identification in verified mode cost in the last hour, per gateway credential,
    against the company's budgets: codes sent (of the credential's hourly budget), codes
    withheld past a budget or limit, and the most codes one customer received (of the
    customer's hourly limit); and whether the credential is in verified mode now."""
    if not can_view(request, VerificationChallenge):
        return None
    Delivery = VerificationChallenge.Delivery
    hour_ago = now - timedelta(hours=1)
    unsent = [Delivery.QUEUED, Delivery.NOT_SENT]
    identifications = scoped(VerificationChallenge.objects.all(), company_ids).filter(
        purpose=VerificationChallenge.Purpose.IDENTIFICATION,
        created_at__gte=hour_ago,
        credential__isnull=False,
    )
    per_credential = {
        row["credential"]: row
        for row in identifications.values("credential").annotate(
            asked=Count("pk"),
            sent=Count("pk", filter=~Q(delivery_status__in=unsent)),
            withheld=Count(
                "pk", filter=Q(delivery_status=Delivery.NOT_SENT, contact__isnull=False)
            ),
        )
    }
    most_to_one: dict[int, int] = {}
    for row in (
        identifications.exclude(delivery_status__in=unsent)
        .values("credential", "contact")
        .annotate(sent=Count("pk"))
    ):
        most_to_one[row["credential"]] = max(most_to_one.get(row["credential"], 0), row["sent"])
    credentials = scoped(GatewayCredential.objects.all(), company_ids).select_related("company")
    # Those with failures lately are checked one by one, each against its company's window.
    failing = scoped(SecurityEvent.objects.all(), company_ids).filter(
        kind__in=SecurityEvent.IDENTIFICATION_FAILURES,
        created_at__gt=now - timedelta(days=1),
        credential__isnull=False,
    )
    candidates = credentials.filter(
        revoked_at__isnull=True, pk__in=failing.values("credential").distinct()
    )
    limited = [c for c in candidates if _in_verified_mode(c, now)]
    shown = {c.pk: c for c in credentials.filter(pk__in=list(per_credential))}
    shown.update({c.pk: c for c in limited})
    panel = Panel(
        key="verified_mode",
        title=_("Codes of identifications in verified mode (last hour)"),
        columns=[
            _("verified mode now"),
            _("credential"),
            _("codes sent / budget"),
            _("withheld"),
            _("most to one customer / limit"),
        ],
        total=sum(row["sent"] for row in per_credential.values()),
        more_url=changelist_url(VerificationChallenge, "purpose__exact=identification"),
        empty=_(
            "No gateway credential is in verified mode, and none sent a code in the last hour."
        ),
    )
    for credential in sorted(shown.values(), key=lambda c: (c.company.name, c.name))[:PANEL_ROWS]:
        company, row = credential.company, per_credential.get(credential.pk, {})
        panel.rows.append(
            {
                "url": change_url(credential),
                "company": company.name,
                "cells": [
                    _("yes") if credential in limited else _("no"),
                    str(credential),
                    f"{row.get('sent', 0)} / {company.verified_mode_codes_per_credential_per_hour}",
                    row.get("withheld", 0),
                    f"{most_to_one.get(credential.pk, 0)} / "
                    f"{company.verification_codes_per_contact_per_hour}",
                ],
            }
        )
    return panel


def _in_verified_mode(credential: GatewayCredential, now: datetime) -> bool:
    """Whether the credential's failed identifications in its window reach its limit."""
    company = credential.company
    failures = SecurityEvent.objects.filter(
        credential=credential,
        kind__in=SecurityEvent.IDENTIFICATION_FAILURES,
        created_at__gt=now - timedelta(minutes=company.identify_credential_window_minutes),
    )
    return failures[: company.identify_failures_per_credential].count() >= (
        company.identify_failures_per_credential
    )


def staff_dashboard(request: HttpRequest, company_ids: list[int] | None) -> dict[str, Any]:
    """The landing page's context: one panel per kind of work the staff member may see."""
    now = timezone.now()
    shown_panels = (panel(request, company_ids, now) for panel in panels_in_order())
    panels = [p for p in shown_panels if p is not None]
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
