"""Garante's admin site: the staff landing page, each role's menu, and the staff roles kept in
step on migrate.

Installed in place of "django.contrib.admin" (INSTALLED_APPS lists GaranteAdminConfig), the
documented way to replace the default site; every `@admin.register` lands here.
"""

import zoneinfo
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.db.models.signals import post_migrate
from django.http import HttpRequest, HttpResponse
from django.template.response import SimpleTemplateResponse, TemplateResponse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class GaranteAdminSite(admin.AdminSite):
    site_header = _("Garante administration")
    site_title = _("Garante")
    index_title = _("Today at a glance")
    index_template = "admin/garante_index.html"
    # Garante has no public site to "view": the header's link would lead to a 404.
    site_url = None

    def admin_view(self, view: Callable, cacheable: bool = False) -> Callable:
        """Every admin page in the staff member's company time, rendered inside it (a
        TemplateResponse renders after the view returns, so the zone must still be on)."""
        inner = super().admin_view(view, cacheable)

        @wraps(inner)
        def in_company_time(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            zone = staff_timezone(request)
            if zone is None:
                return inner(request, *args, **kwargs)
            with timezone.override(zone):
                response = inner(request, *args, **kwargs)
                if isinstance(response, SimpleTemplateResponse) and not response.is_rendered:
                    response.render()
                return response

        return in_company_time

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None):
        # Imported here: this module is loaded while the app registry is still being filled.
        from core.dashboard import staff_dashboard
        from core.roles import staff_company_ids

        context = {**staff_dashboard(request, staff_company_ids(request)), **(extra_context or {})}
        response: TemplateResponse = super().index(request, context)
        return response

    def get_app_list(self, request: HttpRequest, app_label: str | None = None) -> list[dict]:
        """The menu: what the staff member may open (Django's rule), less the records their
        roles keep off it (core.roles.role_off_menu: a receptionist works with appointments
        and contacts, and opens the tool calls of a conversation from the conversation). An
        app's own page (`app_label`) still lists all it may open."""
        app_list = super().get_app_list(request, app_label)
        if app_label is not None:
            return app_list
        from core.roles import staff_off_menu

        hidden = staff_off_menu(request)
        if not hidden:
            return app_list
        shown = []
        for app in app_list:
            models = [
                model
                for model in app["models"]
                if (app["app_label"], model["object_name"].lower()) not in hidden
            ]
            if models:
                shown.append({**app, "models": models})
        return shown


def staff_timezone(request: HttpRequest) -> zoneinfo.ZoneInfo | None:
    """The zone of a staff member's only company; None for superusers and multi-company staff
    (pages that show one company's object convert to its zone themselves)."""
    from core.models import Company
    from core.roles import staff_company_ids

    if not getattr(request.user, "is_staff", False):
        return None
    ids = staff_company_ids(request)
    if ids is None or len(ids) != 1:
        return None
    name = Company.objects.filter(pk=ids[0]).values_list("timezone", flat=True).first()
    return zoneinfo.ZoneInfo(name) if name else None


class GaranteAdminConfig(AdminConfig):
    default_site = "config.admin_site.GaranteAdminSite"

    def ready(self) -> None:
        super().ready()
        from core.roles import role_groups_sync_after_migrate

        post_migrate.connect(role_groups_sync_after_migrate, dispatch_uid="garante_role_groups")
        import config.checks  # noqa: F401  (registers the project's deployment checks)
