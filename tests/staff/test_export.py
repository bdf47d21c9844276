"""CSV export from the admin lists: the staff member's companies only, within the row limit,
and customers' personal data masked for agents."""

import csv
import io

import pytest

from tests.factories import ANA_DOCUMENT, ANA_PHONE

pytestmark = pytest.mark.django_db(transaction=True)


def export(client, path: str, pks: list[int]):
    return client.post(
        f"/admin/{path}/", {"action": "export_csv", "_selected_action": pks}, follow=True
    )


def rows_of(response) -> list[list[str]]:
    body = b"".join(response.streaming_content).decode()
    return list(csv.reader(io.StringIO(body)))


def test_a_supervisor_exports_appointments_with_the_customers_details_in_local_time(
    client, sol_day, supervisor
):
    client.force_login(supervisor)

    response = export(client, "agenda/appointment", [sol_day.appointment.pk])

    header, *rows = rows_of(response)
    assert response["Content-Type"].startswith("text/csv")
    assert header[:4] == ["referencia", "empieza", "termina", "estado"]
    [row] = rows
    local = sol_day.appointment.starts_at.astimezone(sol_day.company.tz)
    assert row[0] == sol_day.appointment.reference
    assert row[1] == f"{local:%d/%m/%Y %H:%M} {local.tzname()}"
    assert ANA_PHONE in row


def test_an_agents_export_masks_phones_emails_and_documents(client, sol_day, agent):
    client.force_login(agent)

    response = export(client, "core/contact", [sol_day.contact.pk])

    _header, row = rows_of(response)
    assert ANA_PHONE not in row and ANA_DOCUMENT not in row
    assert "teléfono terminado en 22" in row
    assert "***78Z" in row


def test_another_companys_rows_never_reach_an_export(client, sol_day, luna_day, luna_agent):
    client.force_login(luna_agent)

    response = export(client, "support/case", [sol_day.case.pk, luna_day.case.pk])

    _header, *rows = rows_of(response)
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

    response = export(client, "sales/quote", [sol_day.quote.pk, second.pk])

    assert not response.streaming  # the list again, not a file
    messages = [str(m) for m in response.context["messages"]]
    assert messages == [
        "Una exportación tiene como máximo 1 filas y esta tiene 2: acote la lista con sus "
        "filtros o con la búsqueda."
    ]
