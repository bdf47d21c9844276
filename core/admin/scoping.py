"""Per-company scoping for every admin in Garante (imported by each app's admin module).

Staff see, add, change and act on only their companies' rows, and pick and filter by only
their companies' related rows.
"""

import functools
from collections.abc import Callable, Iterable
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import NotRelationField, get_fields_from_path
from django.contrib.auth import get_permission_codename, get_user_model
from django.core.exceptions import FieldDoesNotExist
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from core.admin.localtime import CompanyLocalTimeMixin
from core.admin.transitions import ServiceRefusalsAdmin
from core.models import Company, StaffMembership
from core.roles import staff_company_ids


def _per_company(model: type) -> bool:
    """Whether the model's rows each belong to one company (a `company` field)."""
    return any(f.name == "company" for f in model._meta.fields)


def _anything_editable(context: dict) -> bool:
    """Whether a change page shows a field staff can fill in (in its form or an inline row,
    the blank rows for adding included) or an inline row they can delete."""

    def editable(admin_form: Any) -> bool:
        return any(
            not field.is_readonly and not getattr(field.field, "is_hidden", False)
            for fieldset in admin_form
            for line in fieldset
            for field in line
        )

    adminform = context.get("adminform")
    if adminform is not None and editable(adminform):
        return True
    for inline in context.get("inline_admin_formsets", ()):
        if (
            inline.has_delete_permission
            and inline.formset.can_delete
            and inline.formset.initial_forms
        ):
            return True
        if any(editable(row) for row in inline):
            return True
    return False


def _name_fields(fields: dict[str, forms.Field], *, every: bool) -> None:
    """Give screen readers a name for fields whose <label> cannot point at them: both halves of
    a split date and time (Django labels neither), and with `every` all fields of a tabular
    inline's row, whose only label is its column's header."""
    for name, field in fields.items():
        widget = field.widget
        if widget.is_hidden:
            continue
        label = str(field.label or name)
        inner = getattr(widget, "widget", widget)  # inside RelatedFieldWidgetWrapper
        if isinstance(inner, forms.MultiWidget):
            parts = (
                [_("Date"), _("Time")]
                if isinstance(inner, forms.SplitDateTimeWidget)
                else [str(n + 1) for n in range(len(inner.widgets))]
            )
            for part, sub in zip(parts, inner.widgets, strict=False):
                sub.attrs.setdefault("aria-label", f"{label} ({part})")
        elif every:
            inner.attrs.setdefault("aria-label", label)


def _named_formset(formset: type[forms.BaseFormSet]) -> type[forms.BaseFormSet]:
    """`formset`, whose rows' fields (the delete box included) carry their names."""

    def add_fields(self: forms.BaseFormSet, form: forms.Form, index: int | None) -> None:
        formset.add_fields(self, form, index)
        _name_fields(form.fields, every=True)

    return type(formset)(formset.__name__, (formset,), {"add_fields": add_fields})


def _company_checked_form(
    form: type[forms.ModelForm], model_admin: "CompanyScopedAdmin", request: HttpRequest
) -> type[forms.ModelForm]:
    """`form`, whose validation ends with `model_admin.check_company` on the row it built."""

    def _post_clean(self: forms.ModelForm) -> None:
        form._post_clean(self)
        if not self.errors:
            model_admin.check_company(request, self)

    return type(form)(form.__name__, (form,), {"_post_clean": _post_clean})


class CompanyScopedAdmin(ServiceRefusalsAdmin, CompanyLocalTimeMixin, admin.ModelAdmin):
    """Shows staff only their companies' rows and offers only their companies' related rows,
    and lets them act on a row only as their role in its company allows.

    `company_path` is the lookup from the model to its Company ("company", "quote__company",
    "pk" for the company itself). Per row, the view, change and delete permissions are those
    of the staff member's role in the row's company (`staff_company_ids`); a new row may be
    added only to a company whose role grants the add permission. A saved form is checked
    too: a row never moves to another company, and what it refers to (a contact, a service, a
    staff member) belongs to the row's own company. Actions run only on the selected rows of
    companies whose role grants the action's permissions (`action_permissions` maps an
    action's custom permission to the one it needs). Its pages are in the row's company's
    time zone (CompanyLocalTimeMixin), and a service refusing the save undoes all of it
    (ServiceRefusalsAdmin).
    """

    company_path = "company"
    action_permissions: dict[str, str] = {}

    def company_permission(self, action: str) -> str:
        """The permission ("app_label.codename") an action needs on this admin's model."""
        if action in self.action_permissions:
            return self.action_permissions[action]
        if action not in ("view", "add", "change", "delete"):
            action = "change"
        return f"{self.opts.app_label}.{get_permission_codename(action, self.opts)}"

    def allowed_company_ids(self, request: HttpRequest, *actions: str) -> set[int] | None:
        """The companies where the staff member may do any of `actions` on this model; None
        means all (superusers)."""
        allowed: set[int] = set()
        for action in actions:
            ids = staff_company_ids(request, self.company_permission(action))
            if ids is None:
                return None
            allowed.update(ids)
        return allowed

    def company_id_of(self, obj: Any) -> int | None:
        """The id of the company `obj` belongs to, following `company_path`."""
        *hops, last = self.company_path.split("__")
        for hop in hops:
            obj = getattr(obj, hop, None)
            if obj is None:
                return None
        return obj.pk if last == "pk" else getattr(obj, f"{last}_id", None)

    def _may(self, request: HttpRequest, obj: Any, *actions: str) -> bool:
        if obj is None:
            return True
        allowed = self.allowed_company_ids(request, *actions)
        return allowed is None or self.company_id_of(obj) in allowed

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request)
        ids = self.allowed_company_ids(request, "view", "change")
        if ids is None:
            return queryset
        return queryset.filter(**{f"{self.company_path}__in": ids})

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_view_permission(request, obj) and self._may(
            request, obj, "view", "change"
        )

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_change_permission(request, obj) and self._may(request, obj, "change")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_delete_permission(request, obj) and self._may(request, obj, "delete")

    def has_add_permission(self, request: HttpRequest) -> bool:
        allowed = self.allowed_company_ids(request, "add")
        return super().has_add_permission(request) and (allowed is None or bool(allowed))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        readonly = super().get_readonly_fields(request, obj)
        if obj is not None and _per_company(self.model) and "company" not in readonly:
            return (*readonly, "company")
        return readonly

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs):
        form = _company_checked_form(
            super().get_form(request, obj, change=change, **kwargs), self, request
        )
        _name_fields(form.base_fields, every=False)
        allowed = self.allowed_company_ids(request, "add")
        company = form.base_fields.get("company")  # the subclass's own fields, built anew
        if obj is None and allowed is not None and company is not None:
            company.queryset = company.queryset.filter(pk__in=allowed)
        return form

    def get_changeform_initial_data(self, request: HttpRequest) -> dict:
        """A new row's company is chosen already for staff who may add it in one company
        only (a receptionist of one salon picks nothing); a company in the address wins."""
        initial = super().get_changeform_initial_data(request)
        if self.company_path == "company" and "company" not in initial:
            allowed = self.allowed_company_ids(request, "add")
            if allowed is not None and len(allowed) == 1:
                initial["company"] = next(iter(allowed))
        return initial

    def get_formsets_with_inlines(self, request: HttpRequest, obj: Any = None):
        for formset, inline in super().get_formsets_with_inlines(request, obj):
            yield _named_formset(formset), inline

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        """No Save on a page where nothing can be typed or chosen: every field read-only and
        no inline row to edit, add or delete (say, a record whose fields were all fixed when it
        was made); Django would still offer Save to anyone holding the change permission. The
        page's transition buttons and actions stay."""
        if change and not _anything_editable(context):
            context.update(
                show_save=False, show_save_and_continue=False, show_save_and_add_another=False
            )
        return super().render_change_form(request, context, add, change, form_url, obj)

    def get_actions(self, request: HttpRequest) -> dict:
        return {
            name: (self._scoped_action(func), name, description)
            for name, (func, name, description) in super().get_actions(request).items()
        }

    def _scoped_action(self, func: Callable) -> Callable:
        actions = getattr(func, "allowed_permissions", None) or ("change",)

        @functools.wraps(func)
        def scoped(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet):
            for action in actions:
                ids = self.allowed_company_ids(request, action)
                if ids is not None:
                    queryset = queryset.filter(**{f"{self.company_path}__in": ids})
            return func(modeladmin, request, queryset)

        return scoped

    def check_company(self, request: HttpRequest, form: forms.ModelForm) -> None:
        """Add to `form` the errors of a row that would leave its company, belong to one where
        the staff member may not add or change it, or refer to another company's things."""
        instance = form.instance
        company_id = self.company_id_of(instance)
        if company_id is None:
            return  # the form's own errors say what is missing
        if instance.pk is not None:
            stored = (
                type(instance)
                ._default_manager.filter(pk=instance.pk)
                .values_list(self.company_path, flat=True)
                .first()
            )
            if stored is not None and stored != company_id:
                form.add_error(None, _("A record cannot move to another company."))
                return
        allowed = self.allowed_company_ids(request, "change" if instance.pk else "add")
        if allowed is not None and company_id not in allowed:
            form.add_error(None, _("Your role in this company does not allow this."))
            return
        for name, value in list(form.cleaned_data.items()):
            try:
                field = instance._meta.get_field(name)
            except FieldDoesNotExist:
                continue
            if not field.is_relation or value is None:
                continue
            related = field.related_model
            values = list(value) if field.many_to_many else [value]
            if related is get_user_model() and instance._meta.model is not StaffMembership:
                users = [u.pk for u in values]
                staff = StaffMembership.objects.filter(user__in=users, company_id=company_id)
                if staff.count() != len(set(users)):
                    form.add_error(name, _("Choose a staff member of this record's company."))
            elif _per_company(related) and any(v.company_id != company_id for v in values):
                form.add_error(name, _("Choose one of this record's company."))

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        ids = staff_company_ids(request)
        if ids is not None:
            related = db_field.related_model
            if related is Company:
                kwargs["queryset"] = Company.objects.filter(pk__in=ids)
            elif _per_company(related):
                kwargs["queryset"] = related._default_manager.filter(company__in=ids)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        ids = staff_company_ids(request)
        related = db_field.related_model
        if ids is not None and _per_company(related):
            kwargs["queryset"] = related._default_manager.filter(company__in=ids)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def get_list_filter(self, request: HttpRequest) -> list:
        """A filter on a related field offers only what the staff member's own rows refer to,
        so the sidebar never lists other companies, their professionals or their staff."""
        filters = list(super().get_list_filter(request))
        if staff_company_ids(request) is None:
            return filters
        return [_related_only(self.model, spec) for spec in filters]


def staff_scoped(request: HttpRequest, queryset: QuerySet, path: str = "company") -> QuerySet:
    """`queryset` narrowed to the companies the staff member works for (all for a superuser);
    `path` leads from its rows to their company."""
    ids = staff_company_ids(request)
    return queryset if ids is None else queryset.filter(**{f"{path}__in": ids})


def values_filter(
    field: str, title: object, values: Callable[[], Iterable[tuple[str, object]]]
) -> type[admin.SimpleListFilter]:
    """A list filter on `field` offering a set of values known to the code (`values()`: pairs
    of value and label). Django's own filter of a field without choices reads the distinct
    values from the table on every page: a scan of every row, seconds on a log of millions."""

    class ValuesFilter(admin.SimpleListFilter):
        parameter_name = field

        def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
            return list(values())

        def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
            value = self.value()
            return queryset if value is None else queryset.filter(**{field: value})

    ValuesFilter.title = title
    return ValuesFilter


class _OwnCompaniesRelatedFilter(admin.RelatedFieldListFilter):
    """A filter on a company, or on a per-company model (a professional, a service), offering
    the staff member's companies' own: what their rows can refer to, read from that small
    table instead of from the distinct values of every row listed (a scan of the whole log)."""

    def field_choices(self, field, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        related = field.related_model
        ids = staff_company_ids(request) or []
        rows = related._default_manager.filter(
            **{"pk__in" if related is Company else "company__in": ids}
        )
        ordering = self.field_admin_ordering(field, request, model_admin)
        return [(row.pk, str(row)) for row in rows.order_by(*ordering)]


def _related_only(model: type, spec: object) -> object:
    if not isinstance(spec, str):
        return spec
    try:
        field = get_fields_from_path(model, spec)[-1]
    except (FieldDoesNotExist, NotRelationField):
        return spec
    if not field.is_relation:
        return spec
    related = field.related_model
    if related is Company or _per_company(related):
        return (spec, _OwnCompaniesRelatedFilter)
    return (spec, admin.RelatedOnlyFieldListFilter)
