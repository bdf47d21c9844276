"""Garante's admin site: the staff landing page, and the staff roles kept in step on migrate.

Installed in place of "django.contrib.admin" (INSTALLED_APPS lists GaranteAdminConfig), the
documented way to replace the default site; every `@admin.register` lands here.
"""

from typing import Any

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.db.models.signals import post_migrate
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.translation import gettext_lazy as _


class GaranteAdminSite(admin.AdminSite):
    site_header = _("Garante administration")
    site_title = _("Garante")
    index_title = _("Today at a glance")
    index_template = "admin/garante_index.html"

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None):
        # Imported here: this module is loaded while the app registry is still being filled.
        from core.admin import staff_company_ids
        from core.dashboard import staff_dashboard

        context = {**staff_dashboard(request, staff_company_ids(request)), **(extra_context or {})}
        response: TemplateResponse = super().index(request, context)
        return response


class GaranteAdminConfig(AdminConfig):
    default_site = "core.admin_site.GaranteAdminSite"

    def ready(self) -> None:
        super().ready()
        from core.roles import role_groups_sync_after_migrate

        post_migrate.connect(role_groups_sync_after_migrate, dispatch_uid="garante_role_groups")
