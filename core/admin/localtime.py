"""Dates and times in the admin in the company's time zone, saying which.

Every CompanyScopedAdmin page renders inside the zone of the company its row belongs to (a
list inside the staff member's only company's); the page says which zone under its title, and
each date-time column of a list is shown in its own row's company zone with the zone's name,
so a list of several companies' rows is never read in the wrong one.
"""

import contextlib
import contextvars
from collections.abc import Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django import forms
from django.contrib import admin
from django.db import models
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.l10n import datetime_shown
from core.models import Company
from core.roles import staff_company_ids

# The zones of the companies a list shows, loaded once per list (company id -> zone).
_LIST_ZONES: contextvars.ContextVar[dict[int, ZoneInfo] | None] = contextvars.ContextVar(
    "garante_admin_list_zones", default=None
)


def local_datetime_shown(instant: datetime | None, tz: ZoneInfo | None) -> str:
    """`instant` as staff read it: the date and time in `tz` (core.l10n), and the zone's
    abbreviation ("03/12/2026 15:30 CET") only where the page is in another zone (a list of
    several companies' rows); the page names its own zone under its title."""
    zone = tz or ZoneInfo("UTC")
    named = str(timezone.get_current_timezone()) != str(zone)
    return datetime_shown(instant, zone, zone=named)


def _zone_of(company_id: int | None) -> ZoneInfo | None:
    if company_id is None:
        return None
    zones = _LIST_ZONES.get()
    if zones is None:
        zones = {}
        _LIST_ZONES.set(zones)
    if company_id not in zones:
        name = Company.objects.filter(pk=company_id).values_list("timezone", flat=True).first()
        zones[company_id] = ZoneInfo(name or "UTC")
    return zones[company_id]


class CompanyLocalTimeMixin:
    """Shows and reads date-times in the timezone of the company a row belongs to, not the
    server's UTC: a row's company is found through the admin's `company_path` (a time off's
    is its professional's), a new row's through what its posted form names (the company, or
    the professional), and else it is the staff member's only company. For a
    `CompanyScopedAdmin`."""

    def company_timezone(self, request: HttpRequest, obj: Any = None) -> ZoneInfo | None:
        if obj is not None:
            company_id = self.company_id_of(obj)
        else:
            company_id = self._posted_company_id(request)
        if company_id is None:
            ids = staff_company_ids(request)
            if ids is None or len(ids) != 1:
                return None  # several companies and no row to tell which: UTC
            company_id = ids[0]
        company = Company.objects.filter(pk=company_id).first()
        return company.tz if company is not None else None

    def _posted_company_id(self, request: HttpRequest) -> int | None:
        """The company of the row an add form posts, through the first step of `company_path`
        (the company itself, or e.g. the professional), if the staff member may add there."""
        first, *rest = self.company_path.split("__")
        value = request.POST.get(first, "") if request.method == "POST" else ""
        if first == "pk" or not value.isdigit():
            return None
        if rest:
            related = self.model._meta.get_field(first).related_model
            rows = related.objects.filter(pk=int(value)).values_list("__".join(rest), flat=True)
            company_id = rows.first()
        else:
            company_id = int(value)
        allowed = self.allowed_company_ids(request, "add")
        return company_id if allowed is None or company_id in allowed else None

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs):
        return _with_local_initial(super().get_form(request, obj, change=change, **kwargs))

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        obj = self.get_object(request, object_id) if object_id else None
        return _rendered_in(
            self.company_timezone(request, obj),
            lambda: super(CompanyLocalTimeMixin, self).changeform_view(
                request, object_id, form_url, extra_context
            ),
        )

    def changelist_view(self, request, extra_context=None):
        tz = self.company_timezone(request)
        context = {
            # Several companies' rows: each date-time column names its own row's zone.
            "garante_zone_note": None if tz else _("each row in its company's time zone"),
            **(extra_context or {}),
        }
        token = _LIST_ZONES.set({})
        try:
            return _rendered_in(
                tz,
                lambda: super(CompanyLocalTimeMixin, self).changelist_view(request, context),
                always_render=True,
            )
        finally:
            _LIST_ZONES.reset(token)

    def get_list_display(self, request: HttpRequest) -> list:
        return [self._local_column(name) for name in super().get_list_display(request)]

    def _local_column(self, name: Any) -> Any:
        if not isinstance(name, str):
            return name
        try:
            field = self.model._meta.get_field(name)
        except Exception:  # a method or attribute of the admin, not a field
            return name
        if not isinstance(field, models.DateTimeField):
            return name

        @admin.display(description=field.verbose_name, ordering=name)
        def column(obj: Any) -> str:
            return local_datetime_shown(getattr(obj, name), _zone_of(self.company_id_of(obj)))

        column.__name__ = name
        return column


def _rendered_in(
    tz: ZoneInfo | None, view: Callable[[], HttpResponse], always_render: bool = False
) -> HttpResponse:
    """The view's response, with its template rendered while `tz` is the current timezone:
    an admin page is a TemplateResponse, rendered only after the view returns, and its
    date-time widgets show their values in the timezone current then."""
    if tz is None and not always_render:
        return view()
    with timezone.override(tz) if tz else contextlib.nullcontext():
        response = view()
        if isinstance(response, TemplateResponse):
            response.render()
        return response


def _with_local_initial(form_class: type[forms.BaseForm]) -> type[forms.BaseForm]:
    """`form_class`, whose initial date-times (a row's saved values) are in the timezone
    current when the form is built: the company's, in these views."""

    def __init__(self: forms.BaseForm, *args: Any, **kwargs: Any) -> None:
        form_class.__init__(self, *args, **kwargs)
        for name, value in self.initial.items():
            if isinstance(value, datetime) and timezone.is_aware(value):
                self.initial[name] = timezone.localtime(value)

    return type(form_class)(form_class.__name__, (form_class,), {"__init__": __init__})
