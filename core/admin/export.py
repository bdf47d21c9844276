"""CSV export of an admin list (the rows selected, or every row of the filtered list with
"select all"): the admin's `export_fields` only, each date-time in its row's company zone,
within a row limit, and personal data masked for roles that handle customers one at a time.
"""

import csv
from collections.abc import Iterator
from datetime import datetime
from typing import Any, ClassVar

from django.conf import settings
from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest, StreamingHttpResponse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.admin.localtime import local_datetime_shown
from core.models import StaffMembership
from core.normalize import mask_email, mask_phone

# Roles that may take customers' personal data out of Garante in bulk; agents' exports mask it.
PERSONAL_DATA_ROLES = frozenset({StaffMembership.Role.SUPERVISOR, StaffMembership.Role.ADMIN})
PERSONAL_FIELDS = frozenset({"phone", "email", "document_number"})


def export_row_limit() -> int:
    return int(getattr(settings, "GARANTE_ADMIN_EXPORT_ROWS", 5000))


def mask_personal(name: str, value: str, language: str) -> str:
    if not value:
        return ""
    if name == "phone":
        return mask_phone(value, language)
    if name == "email":
        return mask_email(value)
    return f"***{value[-3:]}"


class _Echo:
    def write(self, value: str) -> str:
        return value


class CsvExportAdmin:
    """Adds the "Export to CSV" action. `export_fields` are paths on the row ("reference",
    "contact__phone"); a row's company is `company`. Place before the ModelAdmin base."""

    export_fields: ClassVar[list[str]] = []

    def get_actions(self, request: HttpRequest) -> dict:
        actions = super().get_actions(request)
        if self.export_fields:
            func = self._scoped_action(type(self).export_csv)
            actions["export_csv"] = (func, "export_csv", type(self).export_csv.short_description)
        return actions

    @admin.action(description=_("Export to CSV"), permissions=["view"])
    def export_csv(self, request: HttpRequest, queryset: QuerySet) -> Any:
        limit = export_row_limit()
        count = queryset.count()
        if count > limit:
            self.message_user(
                request,
                _(
                    "An export holds at most %(limit)d rows and this one has %(count)d: "
                    "narrow the list with its filters or search."
                )
                % {"limit": limit, "count": count},
                messages.ERROR,
            )
            return None
        full = self._personal_data_companies(request)
        related = {"company"}
        for path in self.export_fields:
            hops = path.split("__")
            for n in range(1, len(hops) + 1):
                field = self._field(hops[:n])
                if field is not None and field.many_to_one:
                    related.add("__".join(hops[:n]))
        rows = self._rows(queryset.select_related(*related), full)
        writer = csv.writer(_Echo())
        response = StreamingHttpResponse(
            (writer.writerow(row) for row in rows), content_type="text/csv; charset=utf-8"
        )
        stamp = timezone.now().strftime("%Y%m%d-%H%M")
        response["Content-Disposition"] = (
            f'attachment; filename="{self.opts.model_name}-{stamp}.csv"'
        )
        return response

    def _personal_data_companies(self, request: HttpRequest) -> set[int] | None:
        """Companies whose customers' personal data this staff member exports unmasked."""
        if request.user.is_superuser:
            return None
        return set(
            StaffMembership.objects.filter(
                user=request.user, role__in=PERSONAL_DATA_ROLES
            ).values_list("company_id", flat=True)
        )

    def _field(self, hops: list[str]) -> Any:
        model, field = self.model, None
        for hop in hops:
            if model is None:
                return None
            field = model._meta.get_field(hop)
            model = field.related_model
        return field

    def _header(self) -> list[str]:
        header = []
        for path in self.export_fields:
            model, name = self.model, path
            for hop in path.split("__")[:-1]:
                model = model._meta.get_field(hop).related_model
                name = path.split("__")[-1]
            header.append(str(model._meta.get_field(name).verbose_name))
        return header

    def _rows(self, queryset: QuerySet, full: set[int] | None) -> Iterator[list[str]]:
        yield self._header()
        for obj in queryset.iterator(chunk_size=500):
            company = obj.company
            unmasked = full is None or company.pk in full
            yield [self._cell(obj, path, company, unmasked) for path in self.export_fields]

    def _cell(self, obj: Model, path: str, company: Any, unmasked: bool) -> str:
        *hops, name = path.split("__")
        for hop in hops:
            obj = getattr(obj, hop, None)
            if obj is None:
                return ""
        display = getattr(obj, f"get_{name}_display", None)
        value = display() if display is not None else getattr(obj, name, "")
        if isinstance(value, datetime):
            return local_datetime_shown(value, company.tz)
        text = "" if value is None else str(value)
        if name in PERSONAL_FIELDS and not unmasked:
            return mask_personal(name, text, company.language)
        return text
