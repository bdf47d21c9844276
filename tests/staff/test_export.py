"""Exports from the admin lists, to Excel and to CSV: the staff member's companies only, within
the row limit, customers' personal data masked for agents, and every file opening right in a
spreadsheet of the company's language (typed cells, unique headers, BOM and separator)."""

import csv
import io
from datetime import datetime
from decimal import Decimal

import pytest
from openpyxl import load_workbook

from core.services import contact_create
from sales.services.opportunities import opportunity_create
from tests.factories import ANA_DOCUMENT, ANA_PHONE

pytestmark = pytest.mark.django_db(transaction=True)

BOM = "\ufeff"


def export(client, path: str, pks: list[int], action: str = "export_xlsx"):
    return client.post(f"/admin/{path}/", {"action": action, "_selected_action": pks}, follow=True)


def body_of(response) -> bytes:
    return b"".join(response.streaming_content)


def sheet_of(response) -> list[tuple]:
    """The rows of the XLSX's one sheet as openpyxl reads them (typed values)."""
    assert response["Content-Type"] == (
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    )
    assert response["Content-Disposition"].endswith('.xlsx"')
    workbook = load_workbook(io.BytesIO(body_of(response)))
    [sheet] = workbook.worksheets
    return [tuple(cell for cell in row) for row in sheet.iter_rows()]


def values_of(rows: list[tuple]) -> list[tuple]:
    return [tuple(cell.value for cell in row) for row in rows]


def csv_of(response) -> tuple[str, list[list[str]]]:
    """The CSV's text (BOM included) and its rows read with the separator it declares."""
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    text = body_of(response).decode("utf-8")
    delimiter = ";" if ";" in text.splitlines()[0] else ","
    return text, list(csv.reader(io.StringIO(text.removeprefix(BOM)), delimiter=delimiter))


def test_appointments_open_in_excel_with_local_datetimes_and_spanish_headers(
    client, sol_day, supervisor
):
    client.force_login(supervisor)

    response = export(client, "agenda/appointment", [sol_day.appointment.pk])

    header, row = sheet_of(response)
    headers = [cell.value for cell in header]
    zone = sol_day.company.timezone
    assert headers[:4] == ["referencia", f"empieza ({zone})", f"termina ({zone})", "estado"]
    assert len(set(headers)) == len(headers)
    assert "nombre (servicio)" in headers and "nombre de pila" not in headers
    by_header = dict(zip(headers, row, strict=True))
    starts = by_header[f"empieza ({zone})"]
    local = sol_day.appointment.starts_at.astimezone(sol_day.company.tz)
    assert isinstance(starts.value, datetime)
    assert starts.value == local.replace(tzinfo=None)
    assert starts.number_format == "dd/mm/yyyy hh:mm"
    assert by_header["referencia"].value == sol_day.appointment.reference
    assert by_header["estado"].value == "Agendada"
    assert ANA_PHONE in [cell.value for cell in row]


def test_quote_amounts_are_numbers_in_the_currencys_format(client, sol_day, supervisor):
    client.force_login(supervisor)
    quote = sol_day.quote

    header, row = sheet_of(export(client, "sales/quote", [quote.pk]))

    by_header = dict(zip([cell.value for cell in header], row, strict=True))
    total = by_header["total"]
    assert isinstance(total.value, int | float) and Decimal(str(total.value)) == quote.total
    assert total.number_format == '#,##0.00 "€"'
    assert isinstance(by_header["subtotal"].value, int | float)
    valid_until = next(c for h, c in by_header.items() if h.startswith("válida hasta"))
    assert isinstance(valid_until.value, datetime)


def test_every_exporting_admin_opens_with_unique_typed_columns(client, sol_day, supervisor):
    client.force_login(supervisor)
    opportunity = opportunity_create(
        company=sol_day.company,
        contact=sol_day.contact,
        title="Tratamiento anual",
        amount=Decimal("1077.23"),
    )
    exports = {
        "agenda/appointment": sol_day.appointment.pk,
        "sales/quote": sol_day.quote.pk,
        "sales/opportunity": opportunity.pk,
        "support/case": sol_day.case.pk,
        "core/contact": sol_day.contact.pk,
    }

    for path, pk in exports.items():
        header, row = sheet_of(export(client, path, [pk]))
        headers = [cell.value for cell in header]
        assert len(set(headers)) == len(headers), path
        when = "empieza" if path == "agenda/appointment" else "creado"
        created = dict(zip(headers, row, strict=True))[f"{when} ({sol_day.company.timezone})"]
        assert isinstance(created.value, datetime), path
        assert created.number_format == "dd/mm/yyyy hh:mm"
        if path == "sales/opportunity":
            amount = dict(zip(headers, row, strict=True))["importe"]
            assert amount.value == pytest.approx(1077.23)
            assert amount.number_format == '#,##0.00 "€"'


def test_names_stay_whole_and_text_never_runs_as_a_formula(client, sol, supervisor):
    client.force_login(supervisor)
    inigo = contact_create(company=sol, first_name="Íñigo", last_name="Muñoz")
    trap = contact_create(company=sol, first_name='=HYPERLINK("http://x")', last_name="-2+3")

    [_header, *rows] = sheet_of(export(client, "core/contact", [inigo.pk, trap.pk]))
    text, [_h, *csv_rows] = csv_of(
        export(client, "core/contact", [inigo.pk, trap.pk], "export_csv")
    )

    by_name = {row[0].value: row for row in rows}
    assert by_name["Íñigo"][1].value == "Muñoz"
    formula = by_name['=HYPERLINK("http://x")'][0]
    assert formula.data_type == "s"  # text, not a formula
    assert "Íñigo" in text
    names = {row[0]: row for row in csv_rows}
    assert '\'=HYPERLINK("http://x")' in names
    assert names['\'=HYPERLINK("http://x")'][1] == "'-2+3"


def test_a_spanish_csv_has_a_bom_semicolons_and_decimal_commas(client, sol_day, supervisor):
    client.force_login(supervisor)
    quote = sol_day.quote

    text, (header, row) = csv_of(export(client, "sales/quote", [quote.pk], "export_csv"))

    assert text.startswith(BOM + "referencia;")
    assert header[0] == "referencia" and len(set(header)) == len(header)
    by_header = dict(zip(header, row, strict=True))
    assert by_header["total"] == f"{quote.total:.2f}".replace(".", ",")
    created = by_header[f"creado ({sol_day.company.timezone})"]
    local = quote.created_at.astimezone(sol_day.company.tz)
    assert created == f"{local:%d/%m/%Y %H:%M}"  # no zone abbreviation: it is in the header


def test_an_english_companys_csv_uses_commas_and_decimal_points(client, make_company, make_staff):
    from tests.staff.conftest import build_day

    london = make_company(name="London Hair", language="en", timezone="Europe/London")
    day = build_day(london, customer="Ian", document="12345678Z", phone="+34600555666")
    client.force_login(make_staff("supervisor.london", london, "supervisor"))

    text, (header, row) = csv_of(export(client, "sales/quote", [day.quote.pk], "export_csv"))
    _xlsx_header, xlsx_row = sheet_of(export(client, "sales/quote", [day.quote.pk]))

    assert text.startswith(BOM + "reference,state,")
    assert dict(zip(header, row, strict=True))["total"] == f"{day.quote.total:.2f}"
    total = [c for c in xlsx_row if c.number_format.startswith('"€"')]
    assert total, "amounts carry the English currency format"


def test_a_supervisor_exports_appointments_with_the_customers_details_in_local_time(
    client, sol_day, supervisor
):
    client.force_login(supervisor)

    _text, (header, row) = csv_of(
        export(client, "agenda/appointment", [sol_day.appointment.pk], "export_csv")
    )

    zone = sol_day.company.timezone
    assert header[:4] == ["referencia", f"empieza ({zone})", f"termina ({zone})", "estado"]
    local = sol_day.appointment.starts_at.astimezone(sol_day.company.tz)
    assert row[0] == sol_day.appointment.reference
    assert row[1] == f"{local:%d/%m/%Y %H:%M}"
    assert ANA_PHONE in row


def test_an_agents_export_masks_phones_emails_and_documents(client, sol_day, agent):
    client.force_login(agent)

    for action in ("export_csv", "export_xlsx"):
        response = export(client, "core/contact", [sol_day.contact.pk], action)
        if action == "export_csv":
            _text, (_header, row) = csv_of(response)
        else:
            [_header, row] = values_of(sheet_of(response))
        assert ANA_PHONE not in row and ANA_DOCUMENT not in row
        assert "teléfono terminado en 22" in row
        assert "***78Z" in row


def test_another_companys_rows_never_reach_an_export(client, sol_day, luna_day, luna_agent):
    client.force_login(luna_agent)

    for action in ("export_csv", "export_xlsx"):
        response = export(client, "support/case", [sol_day.case.pk, luna_day.case.pk], action)
        if action == "export_csv":
            _text, (_header, *rows) = csv_of(response)
        else:
            _header, *rows = values_of(sheet_of(response))
        assert [row[0] for row in rows] == [luna_day.case.reference]


def test_an_export_past_the_row_limit_is_refused_with_the_limit(
    client, sol_day, supervisor, settings
):
    settings.GARANTE_ADMIN_EXPORT_ROWS = 1
    client.force_login(supervisor)
    from sales.services.quote_lifecycle import quote_create
    from sales.services.quote_pricing import QuoteItem

    sku = sol_day.quote.lines.first().sku
    second = quote_create(
        company=sol_day.company, contact=sol_day.contact, items=[QuoteItem(sku, 1)]
    )

    for action in ("export_csv", "export_xlsx"):
        response = export(client, "sales/quote", [sol_day.quote.pk, second.pk], action)

        assert not response.streaming  # the list again, not a file
        messages = [str(m) for m in response.context["messages"]]
        assert messages == [
            "Una exportación tiene como máximo 1 filas y esta tiene 2: acote la lista con sus "
            "filtros o con la búsqueda."
        ]
