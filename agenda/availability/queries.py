"""The slot search's two statements (roster, busy times), built with core.sql's helpers.

Both run on every slot search, in a fixed shape: compiling them with the ORM each time cost more
CPU than the rest of the search together (docs/performance.md). Their values are prepared and
their rows converted as the ORM does (`_prepared`, core.sql's RowReader).
"""

import functools
from datetime import datetime

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import Model

from agenda.models import (
    MAX_BLOCKED_SPAN,
    AgendaSettings,
    Appointment,
    Professional,
    Service,
    TimeOff,
    WorkingHours,
)
from core.models import Company
from core.sql import RowReader, qualified, selected, table

SETTINGS_FIELDS = [f.attname for f in AgendaSettings._meta.concrete_fields]

_GIVES = Professional._meta.get_field("services")  # the many-to-many to the services given

# What the roster reads of each model, in the order of its rows' columns.
_ROSTER = (
    selected(Professional, ["id", "display_name"]),
    selected(WorkingHours, ["weekday", "start_time", "end_time"]),
    selected(AgendaSettings),
)
_ROSTER_ROWS = RowReader([field for part in _ROSTER for field in part.fields])
_BUSY_ROWS = selected(Appointment, ["professional", "blocked_from", "blocked_until"]).reader


def loaded(model: type[Model], values: dict[str, object]) -> Model:
    """An instance as the ORM loads one from a row holding every concrete field, from values
    already converted (core.sql's `Selected.instance` converts them itself)."""
    names = [f.attname for f in model._meta.concrete_fields]
    return model.from_db(DEFAULT_DB_ALIAS, names, [values[name] for name in names])


def roster_rows(
    company: Company, service: Service, professional: Professional | None
) -> list[tuple]:
    """The active professionals of the company giving the service (only `professional`, if
    given), in display-name order, LEFT JOIN their weekly hours and the company's agenda
    settings: rows of (id, display name, weekday, start, end, *the settings' fields)."""
    params = [company.pk, service.pk]
    if professional is not None:
        params.append(professional.pk)
    return _select_rows(_roster_sql(professional is not None), params, _ROSTER_ROWS)


def busy_rows(
    professional_ids: list[int],
    start: datetime,
    end: datetime,
    *,
    exclude_appointment_id: int | None = None,
) -> list[tuple]:
    """(professional id, busy from, busy until) of the scheduled appointments (but
    `exclude_appointment_id`) and the time off of these professionals that touch [start, end)."""
    excluding = exclude_appointment_id is not None
    window = [
        _prepared(Appointment, "blocked_from", start - MAX_BLOCKED_SPAN),
        _prepared(Appointment, "blocked_from", end),
        _prepared(Appointment, "blocked_until", start),
    ]
    params = [
        *professional_ids,
        _prepared(Appointment, "state", Appointment.State.SCHEDULED),
        *window,
        *([exclude_appointment_id] if excluding else []),
        *professional_ids,
        _prepared(TimeOff, "ends_at", start),
        _prepared(TimeOff, "starts_at", end),
    ]
    return _select_rows(_busy_sql(len(professional_ids), excluding), params, _BUSY_ROWS)


def _prepared(model: type[Model], name: str, value: object) -> object:
    """A lookup's value as the ORM sends it for this field."""
    return model._meta.get_field(name).get_db_prep_value(value, connection)


def _one_line(sql: str) -> str:
    return " ".join(sql.split())


@functools.cache
def _roster_sql(one_professional: bool) -> str:
    """Params: the company's id, the service's id (and the professional's id)."""
    q, gives = qualified, _GIVES.remote_field.through
    columns = ", ".join(part.columns for part in _ROSTER)
    return _one_line(f"""
        SELECT {columns}
        FROM {table(Professional)}
        INNER JOIN {table(gives)}
            ON {q(gives, _GIVES.m2m_field_name())} = {q(Professional, "id")}
        LEFT OUTER JOIN {table(WorkingHours)}
            ON {q(WorkingHours, "professional")} = {q(Professional, "id")}
        LEFT OUTER JOIN {table(AgendaSettings)}
            ON {q(AgendaSettings, "company")} = {q(Professional, "company")}
        WHERE {q(Professional, "company")} = %s AND {q(Professional, "active")}
            AND {q(gives, _GIVES.m2m_reverse_field_name())} = %s
            {f"AND {q(Professional, 'id')} = %s" if one_professional else ""}
        ORDER BY {q(Professional, "display_name")}, {q(Professional, "id")}
    """)


@functools.lru_cache(maxsize=64)
def _busy_sql(professionals: int, excluding: bool) -> str:
    """Params: the professional ids, the scheduled state, the appointments' window (three
    bounds, as `busy.scheduled_in_window`), the excluded appointment's id if `excluding`, the
    professional ids again, and the time off's window (two bounds)."""
    q = qualified
    ids = ", ".join(["%s"] * professionals)
    return _one_line(f"""
        SELECT {q(Appointment, "professional")}, {q(Appointment, "blocked_from")},
            {q(Appointment, "blocked_until")}
        FROM {table(Appointment)}
        WHERE {q(Appointment, "professional")} IN ({ids}) AND {q(Appointment, "state")} = %s
            AND {q(Appointment, "blocked_from")} >= %s AND {q(Appointment, "blocked_from")} < %s
            AND {q(Appointment, "blocked_until")} > %s
            {f"AND {q(Appointment, 'id')} <> %s" if excluding else ""}
        UNION ALL
        SELECT {q(TimeOff, "professional")}, {q(TimeOff, "starts_at")}, {q(TimeOff, "ends_at")}
        FROM {table(TimeOff)}
        WHERE {q(TimeOff, "professional")} IN ({ids})
            AND {q(TimeOff, "ends_at")} > %s AND {q(TimeOff, "starts_at")} < %s
    """)


def _select_rows(sql: str, params: list, reader: RowReader) -> list[tuple]:
    """The rows of a SELECT of the reader's columns, converted as the ORM converts them."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return reader.rows(cursor.fetchall())
