"""The customer's file on a contact's admin page: a smart button per kind of record with its
count and the filtered admin list, the latest records each linking to its page, and the
actions that start from the customer (book, new quote, new case), each the add form with the
contact preselected.

The sections come from the apps (core.contact_file); this module decides who sees what: a
section only for staff whose role in the contact's company may view its model (that model's
admin says so, as it does on its own pages), a list or an action only when its admin is there
and allows it. Reads are the sections' selectors: a few queries per kind, however long the
customer's history.
"""

from typing import Any
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.admin.exceptions import NotRegistered
from django.db.models import Model
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from core.contact_file import FILE_ROWS, FileSection, sections_in_order
from core.models import Contact


def _model_admin(site: admin.AdminSite, model: type[Model]) -> admin.ModelAdmin | None:
    try:
        return site.get_model_admin(model)
    except NotRegistered:
        return None


def _in_company(model_admin: admin.ModelAdmin, request: HttpRequest, company_id: int, *actions):
    """Whether the staff member's role in the company grants one of `actions` on the admin's
    model (a company-scoped admin; any other admin's own permission is all there is)."""
    allowed_company_ids = getattr(model_admin, "allowed_company_ids", None)
    if allowed_company_ids is None:
        return True
    allowed = allowed_company_ids(request, *actions)
    return allowed is None or company_id in allowed


def may_view(site: admin.AdminSite, request: HttpRequest, model: type[Model], company_id: int):
    model_admin = _model_admin(site, model)
    return (
        model_admin is not None
        and model_admin.has_view_permission(request)
        and _in_company(model_admin, request, company_id, "view", "change")
    )


def may_add(site: admin.AdminSite, request: HttpRequest, model: type[Model], company_id: int):
    model_admin = _model_admin(site, model)
    return (
        model_admin is not None
        and model_admin.has_add_permission(request)
        and _in_company(model_admin, request, company_id, "add")
    )


def _url(model: type[Model], view: str, *args: Any, query: dict[str, Any] | None = None) -> str:
    opts = model._meta
    try:
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_{view}", args=args)
    except NoReverseMatch:
        return ""
    return f"{url}?{urlencode(query)}" if query else url


def _section_shown(
    site: admin.AdminSite, request: HttpRequest, contact: Contact, section: FileSection
) -> dict[str, Any]:
    company_id = contact.company_id
    viewable: dict[type[Model], bool] = {}

    def record_url(record: Model) -> str:
        model = type(record)
        if model not in viewable:
            viewable[model] = may_view(site, request, model, company_id)
        return _url(model, "change", record.pk) if viewable[model] else ""

    list_url = ""
    if section.list_model is not None and may_view(site, request, section.list_model, company_id):
        list_url = _url(section.list_model, "changelist", query=section.list_query)
    add_url = ""
    if section.add_model is not None and may_add(site, request, section.add_model, company_id):
        # Django's add form takes its initial values from the query string.
        add_url = _url(
            section.add_model, "add", query={"company": company_id, "contact": contact.pk}
        )
    return {
        "key": section.key,
        "title": section.title,
        "total": section.total,
        "note": section.note,
        "columns": section.columns,
        "rows": [
            {"url": record_url(row.record), "cells": row.cells, "group": row.group}
            for row in section.rows
        ],
        "more": section.total > len(section.rows),
        "empty": section.empty,
        "list_url": list_url,
        "add_url": add_url,
        "add_label": section.add_label,
    }


def contact_file(site: admin.AdminSite, request: HttpRequest, contact: Contact) -> dict[str, Any]:
    """The file's context: the sections the staff member may see, in order, and the actions
    they may start."""
    now = timezone.now()
    found = (
        function(contact, now, FILE_ROWS)
        for visible_with, function in sections_in_order()
        if may_view(site, request, visible_with, contact.company_id)
    )
    sections = [_section_shown(site, request, contact, s) for s in found if s is not None]
    actions = [{"url": s["add_url"], "label": s["add_label"]} for s in sections if s["add_url"]]
    return {"contact_file": sections, "contact_file_actions": actions}


class ContactFileAdmin:
    """Shows the customer's file on the contact's change page. Place before the ModelAdmin
    base; the admin's model is Contact."""

    change_form_template = "admin/core/contact/change_form.html"

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Contact | None = None,
    ) -> TemplateResponse:
        # Not in a popup (the pencil beside an autocomplete): its links would lead the popup
        # away from the form it was opened for.
        if obj is not None and obj.pk is not None and not context.get("is_popup"):
            context.update(contact_file(self.admin_site, request, obj))
        return super().render_change_form(request, context, add, change, form_url, obj)
