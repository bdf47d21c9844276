"""Exports of an admin list (the rows selected, or every row of the filtered list with "select
all") to Excel (XLSX) or CSV: the admin's `export_fields` only, within a row limit, personal
data masked for roles that handle customers one at a time, and every cell the way a
spreadsheet in the company's language reads it.

XLSX (written with openpyxl) has typed cells: a date-time is a real date-time in the company's
zone (Excel has no zones: the local wall time, naive, with a date format; the zone is named in
the column's header), an amount a number with its currency's decimals and symbol as the
company's locale writes them, a yes/no a boolean, text always text (a name starting with "="
is never a formula). It is written in openpyxl's write-only mode, row by row through a
temporary file, then sent from that file: memory stays bounded whatever the number of rows.

CSV, for the tools that want it, starts with a UTF-8 byte order mark (or Excel reads "Íñigo"
as Latin-1), separates with ";" where the locale's decimal mark is a comma (as Spanish Excel
expects) and writes amounts with that mark and no grouping, so they open as numbers; it is
streamed row by row. Text a spreadsheet would run as a formula is prefixed with an apostrophe
(OWASP's CSV injection advice).

Headers are the fields' names in the company's language, made unique by naming the record a
related field belongs to ("nombre (servicio)") where two would read the same. An export of
one company's rows is in its language and zone; one spanning several companies (a superuser's)
is in the staff member's language, with a column naming each row's zone.
"""

import csv
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from functools import cache
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

from babel import Locale
from babel.core import UnknownLocaleError
from babel.numbers import get_currency_precision, get_currency_symbol, get_decimal_symbol
from django.conf import settings
from django.contrib import admin, messages
from django.db import models
from django.db.models import Model, QuerySet
from django.http import FileResponse, HttpRequest, StreamingHttpResponse
from django.utils import timezone, translation
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from openpyxl import Workbook
from openpyxl.cell import WriteOnlyCell
from openpyxl.styles import Font
from openpyxl.utils import get_column_letter

from core.l10n import date_shown, datetime_shown
from core.models import Company, StaffMembership
from core.normalize import mask_email, mask_phone

# Roles that may take customers' personal data out of Garante in bulk; agents' exports mask it.
PERSONAL_DATA_ROLES = frozenset({StaffMembership.Role.SUPERVISOR, StaffMembership.Role.ADMIN})
PERSONAL_FIELDS = frozenset({"phone", "email", "document_number"})

XLSX_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
# A file this large stays in memory; past it, on disk (the XLSX is built before it is sent).
_SPOOL_BYTES = 4 * 1024 * 1024
# What a spreadsheet runs as a formula when a cell's text starts with it.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def export_row_limit() -> int:
    return int(getattr(settings, "GARANTE_ADMIN_EXPORT_ROWS", 100_000))


def mask_personal(name: str, value: str, language: str) -> str:
    if not value:
        return ""
    if name == "phone":
        return mask_phone(value, language)
    if name == "email":
        return mask_email(value)
    return f"***{value[-3:]}"


@dataclass(frozen=True)
class Column:
    """One exported field: its path on the row, its header and what kind of value it holds."""

    path: str
    header: str
    kind: str  # "text", "datetime", "date", "money", "number", "integer", "bool"


@dataclass(frozen=True)
class ExportLocale:
    """How an export writes its cells: the language's formats, and the one zone of its rows
    (None: rows of several companies, each in its own zone, named in a column)."""

    language: str
    tz: ZoneInfo | None

    @property
    def babel(self) -> Locale:
        return _babel_locale(self.language)

    @property
    def decimal_mark(self) -> str:
        return get_decimal_symbol(self.babel)

    @property
    def csv_delimiter(self) -> str:
        # Where the decimal mark is a comma, Excel's list separator is ";".
        return ";" if self.decimal_mark == "," else ","

    @property
    def day_first(self) -> bool:
        return self.language != "en"

    def excel_datetime_format(self) -> str:
        return "dd/mm/yyyy hh:mm" if self.day_first else "yyyy-mm-dd hh:mm"

    def excel_date_format(self) -> str:
        return "dd/mm/yyyy" if self.day_first else "yyyy-mm-dd"

    # CSV's text: core.l10n's one date and date-time shape of the language (the XLSX formats
    # above are Excel's spelling of the same shapes).
    def text_datetime(self, local: datetime) -> str:
        with translation.override(self.language):
            return datetime_shown(local, local.tzinfo)

    def text_date(self, day: date) -> str:
        with translation.override(self.language):
            return date_shown(day)

    def excel_money_format(self, currency: str) -> str:
        return _money_format(self.language, currency.upper())

    def text_number(self, number: Decimal | float | int) -> str:
        return str(number).replace(".", self.decimal_mark)


@cache
def _babel_locale(language: str) -> Locale:
    try:
        return Locale.parse(translation.to_locale(language))
    except (UnknownLocaleError, ValueError):
        return Locale.parse("en")


@cache
def _money_format(language: str, currency: str) -> str:
    """Excel's number format for an amount in `currency` as the language writes it: the
    locale's currency pattern (CLDR, through Babel: "#,##0.00 ¤" in Spanish, "¤#,##0.00" in
    English) with the currency's own decimals and its symbol. Excel shows the grouping and
    decimal marks of the reader's own settings."""
    locale = _babel_locale(language)
    places = get_currency_precision(currency)
    symbol = get_currency_symbol(currency, locale).replace('"', "")
    pattern = locale.currency_formats["standard"].pattern.split(";")[0]
    digits = "#,##0" + ("." + "0" * places if places else "")
    number_part = pattern.replace("¤", "").replace("\xa0", "").strip()
    return pattern.replace(number_part, digits).replace("¤", f'"{symbol}"').replace("\xa0", " ")


def _quantized(amount: Decimal, currency: str) -> Decimal:
    return amount.quantize(Decimal(1).scaleb(-get_currency_precision(currency.upper())))


def _kind_of(model: type[Model], field: models.Field) -> str:
    if field.choices:
        return "text"
    if isinstance(field, models.DateTimeField):
        return "datetime"
    if isinstance(field, models.DateField):
        return "date"
    if isinstance(field, models.BooleanField):
        return "bool"
    if isinstance(field, models.DecimalField):
        # An amount is a decimal beside the currency it is in (quotes, opportunities).
        names = {f.name for f in model._meta.get_fields()}
        return "money" if "currency" in names else "number"
    if isinstance(field, models.FloatField):
        return "number"
    if isinstance(field, models.IntegerField):
        return "integer"
    return "text"


class CsvExportAdmin:
    """Adds the "Export to Excel" and "Export to CSV" actions. `export_fields` are paths on the
    row ("reference", "contact__phone"); a row's company is `company`. Place before the
    ModelAdmin base."""

    export_fields: ClassVar[list[str]] = []

    def get_actions(self, request: HttpRequest) -> dict:
        actions = super().get_actions(request)
        if self.export_fields:
            for name in ("export_xlsx", "export_csv"):
                method = getattr(type(self), name)
                actions[name] = (self._scoped_action(method), name, method.short_description)
        return actions

    @admin.action(description=_("Export to Excel"), permissions=["view"])
    def export_xlsx(self, request: HttpRequest, queryset: QuerySet) -> Any:
        prepared = self._export_prepared(request, queryset)
        if prepared is None:
            return None
        columns, rows, locale = prepared
        workbook = Workbook(write_only=True)
        sheet = workbook.create_sheet(title=str(self.opts.verbose_name_plural)[:31])
        for index, column in enumerate(columns, start=1):
            sheet.column_dimensions[get_column_letter(index)].width = _WIDTHS.get(column.kind, 22)
        sheet.freeze_panes = "A2"
        bold = Font(bold=True)
        header = []
        for column in columns:
            cell = WriteOnlyCell(sheet, value=column.header)
            cell.data_type = "s"
            cell.font = bold
            header.append(cell)
        sheet.append(header)
        for values in rows:
            sheet.append([_xlsx_cell(sheet, locale, kind, v) for kind, v in values])
        # FileResponse closes it once sent.
        target = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115
        workbook.save(target)
        target.seek(0)
        return FileResponse(
            target,
            as_attachment=True,
            filename=self._export_filename("xlsx"),
            content_type=XLSX_CONTENT_TYPE,
        )

    @admin.action(description=_("Export to CSV"), permissions=["view"])
    def export_csv(self, request: HttpRequest, queryset: QuerySet) -> Any:
        prepared = self._export_prepared(request, queryset)
        if prepared is None:
            return None
        columns, rows, locale = prepared
        writer = csv.writer(_Echo(), delimiter=locale.csv_delimiter)

        def lines() -> Iterator[str]:
            yield "\ufeff" + writer.writerow([column.header for column in columns])
            for values in rows:
                yield writer.writerow([_csv_text(locale, kind, v) for kind, v in values])

        response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{self._export_filename("csv")}"'
        return response

    def _export_filename(self, extension: str) -> str:
        stamp = timezone.now().strftime("%Y%m%d-%H%M")
        return f"{self.opts.model_name}-{stamp}.{extension}"

    def _export_prepared(
        self, request: HttpRequest, queryset: QuerySet
    ) -> tuple[list[Column], Iterator[list[tuple[str, Any]]], ExportLocale] | None:
        """The columns, the rows (read lazily, in chunks) and the locale of an export, or None
        with a message when it is over the row limit."""
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
        locale = self._export_locale(queryset)
        with translation.override(locale.language):
            columns = self._columns(locale)
        full = self._personal_data_companies(request)
        related = {"company"}
        for path in self.export_fields:
            hops = path.split("__")
            for n in range(1, len(hops) + 1):
                field = self._field(hops[:n])
                if field is not None and field.many_to_one:
                    related.add("__".join(hops[:n]))
        rows = self._rows(queryset.select_related(*related), columns, locale, full)
        return columns, rows, locale

    def _export_locale(self, queryset: QuerySet) -> ExportLocale:
        companies = list(queryset.order_by().values_list("company_id", flat=True).distinct()[:2])
        if len(companies) == 1:
            company = Company.objects.only("language", "timezone").get(pk=companies[0])
            return ExportLocale(company.language, company.tz)
        return ExportLocale(translation.get_language() or settings.LANGUAGE_CODE, None)

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

    def _columns(self, locale: ExportLocale) -> list[Column]:
        """The export's columns with their headers in the active language, unique."""
        found = []
        for path in self.export_fields:
            *hops, name = path.split("__")
            model, owner = self.model, None
            for hop in hops:
                owner = model._meta.get_field(hop)
                model = owner.related_model
            field = model._meta.get_field(name)
            found.append((path, str(field.verbose_name), owner, _kind_of(model, field)))
        counts: dict[str, int] = {}
        for _path, header, _owner, _kind in found:
            counts[header] = counts.get(header, 0) + 1
        columns, taken = [], set()
        for path, header, owner, kind in found:
            if counts[header] > 1 and owner is not None:
                header = f"{header} ({owner.verbose_name})"
            if kind == "datetime" and locale.tz is not None:
                # Excel's date-times have no zone: the header says which one they are in.
                header = f"{header} ({locale.tz.key})"
            unique, n = header, 2
            while unique in taken:
                unique, n = f"{header} {n}", n + 1
            taken.add(unique)
            columns.append(Column(path, unique, kind))
        if locale.tz is None:
            columns.append(
                Column("", str(Company._meta.get_field("timezone").verbose_name), "zone")
            )
        return columns

    def _rows(
        self,
        queryset: QuerySet,
        columns: list[Column],
        locale: ExportLocale,
        full: set[int] | None,
    ) -> Iterator[list[tuple[str, Any]]]:
        """Each row as (kind, value) pairs: date-times already local and naive, amounts as
        (amount, currency), personal data masked where the staff member's role says so."""
        with translation.override(locale.language):
            for obj in queryset.iterator(chunk_size=500):
                company = obj.company
                unmasked = full is None or company.pk in full
                tz = locale.tz or company.tz
                yield [
                    ("text", company.timezone)
                    if column.kind == "zone"
                    else (column.kind, self._value(obj, column, company, tz, unmasked))
                    for column in columns
                ]

    def _value(self, obj: Model, column: Column, company: Any, tz: ZoneInfo, unmasked: bool):
        *hops, name = column.path.split("__")
        for hop in hops:
            obj = getattr(obj, hop, None)
            if obj is None:
                return None
        display = getattr(obj, f"get_{name}_display", None)
        value = display() if display is not None else getattr(obj, name, None)
        if value is None:
            return None
        if column.kind == "datetime":
            return value.astimezone(tz).replace(tzinfo=None)
        if column.kind == "money":
            return (value, obj.currency)
        if column.kind in ("number", "integer", "bool", "date"):
            return value
        text = str(value)
        if name in PERSONAL_FIELDS and not unmasked:
            return mask_personal(name, text, company.language)
        return text


# Column widths (in characters) that show each kind of value whole.
_WIDTHS = {"datetime": 18, "date": 12, "money": 15, "number": 12, "integer": 10, "bool": 8}


def _xlsx_cell(sheet: Any, locale: ExportLocale, kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == "money":
        amount, currency = value
        cell = WriteOnlyCell(sheet, value=_quantized(amount, currency))
        cell.number_format = locale.excel_money_format(currency)
        return cell
    if kind == "datetime":
        cell = WriteOnlyCell(sheet, value=value)
        cell.number_format = locale.excel_datetime_format()
        return cell
    if kind == "date":
        cell = WriteOnlyCell(sheet, value=value)
        cell.number_format = locale.excel_date_format()
        return cell
    if kind in ("number", "integer", "bool"):
        return value
    if value.startswith("="):
        # openpyxl would store it as a formula; a customer's name is text.
        cell = WriteOnlyCell(sheet, value=value)
        cell.data_type = "s"
        return cell
    return value


def _csv_text(locale: ExportLocale, kind: str, value: Any) -> str:
    if value is None:
        return ""
    if kind == "money":
        amount, currency = value
        return locale.text_number(_quantized(amount, currency))
    if kind == "datetime":
        return locale.text_datetime(value)
    if kind == "date":
        return locale.text_date(value)
    if kind in ("number", "integer"):
        return locale.text_number(value)
    if kind == "bool":
        return gettext("yes") if value else gettext("no")
    if value.startswith(_FORMULA_STARTS) and not _is_signed_number(value):
        return "'" + value
    return value


def _is_signed_number(text: str) -> bool:
    """A phone in E.164 ("+34600111222") or a negative number: no formula, left whole."""
    rest = text[1:].replace(" ", "")
    return text[0] in "+-" and rest.isdigit()


class _Echo:
    def write(self, value: str) -> str:
        return value
