"""Pieces of statements built from a model's metadata, for the few the ORM cannot express in
one statement (ON CONFLICT ... DO NOTHING, RETURNING beside a function call) and the
fixed-shape reads and writes that run on nearly every tool call, where compiling the query costs
more CPU than running it (core.idempotency, core.identity, core.references, tooling.context,
tooling.ledger, agenda.availability). Public APIs only: names quoted by psycopg.sql (double
quotes, which PostgreSQL and SQLite both read), values prepared by the fields' own
`pre_save`/`get_db_prep_save` and read back by `from_db_value`/`to_python`."""

import contextlib
import functools
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC
from decimal import Decimal
from typing import Any

from django.db import DatabaseError, connection
from django.db.models import DateTimeField, DecimalField, Field, Model
from django.utils import timezone
from psycopg import sql as psycopg_sql


@dataclass(frozen=True)
class Statement:
    """A write built, not yet sent: a caller may send it with a write of its own in one round
    trip (`execute_all`, `send_or_keep`; the idempotency engine's stored answer)."""

    sql: str
    params: list[Any]


def execute_all(statements: Sequence[Statement]) -> None:
    """Send these writes, independent of each other, in one round trip where the database
    can: on PostgreSQL all but the last become data-modifying WITHs of the last, each run once
    and to completion whether or not the last reads it, a failure of any failing them all (as
    separate statements of one transaction would). They share one snapshot and their order is
    not defined, so none may touch what another writes or read what another wrote. Each is a
    single INSERT, UPDATE or DELETE. SQLite has no such WITH: they go one after the other."""
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql" or len(statements) == 1:
            for statement in statements:
                cursor.execute(statement.sql, statement.params)
            return
        *firsts, last = statements
        ctes = ", ".join(f"write_{i} AS ({first.sql})" for i, first in enumerate(firsts))
        params = [param for statement in statements for param in statement.params]
        cursor.execute(f"WITH {ctes} {last.sql}", params)


# The writes waiting for the write that ends the block they were made in (`writes_kept`).
_kept: ContextVar[list[Statement] | None] = ContextVar("garante_writes_kept", default=None)


@contextlib.contextmanager
def writes_kept() -> Iterator[list[Statement]]:
    """A block whose `send_or_keep` writes are kept, not sent: the caller sends them with its
    own last write (`execute_all`), one round trip for all. Outside such a block they are sent
    at once, so code that calls a service without it (a test, another engine) loses nothing."""
    kept: list[Statement] = []
    token = _kept.set(kept)
    try:
        yield kept
    finally:
        _kept.reset(token)


def send_or_keep(statement: Statement) -> None:
    """Send a write now, or keep it for the block's last write (`writes_kept`). Only for a
    write that nothing in the block reads afterwards."""
    kept = _kept.get()
    if kept is None:
        execute_all([statement])
    else:
        kept.append(statement)


@dataclass(frozen=True)
class InsertParts:
    table: str  # quoted
    columns: str  # "(a, b, ...)": every concrete field but the primary key
    row: str  # "%s, %s, ...": the placeholders of one row
    params: list[Any]  # every row's values, in order

    def values(self, rows: int) -> str:
        """The VALUES list of `rows` rows."""
        return "VALUES " + ", ".join([f"({self.row})"] * rows)


def insert_parts(instances: Sequence[Model]) -> InsertParts:
    """The parts of an INSERT of these new instances (all of one model): auto_now fields are
    filled and values converted as save() does."""
    opts = instances[0]._meta
    fields = [field for field in opts.concrete_fields if not field.primary_key]
    return InsertParts(
        table=quoted(opts.db_table),
        columns=f"({', '.join(quoted(field.column) for field in fields)})",
        row=", ".join(["%s"] * len(fields)),
        params=[
            field.get_db_prep_save(field.pre_save(instance, True), connection)
            for instance in instances
            for field in fields
        ],
    )


@functools.cache
def quoted(name: str) -> str:
    """A table's or column's name quoted as an SQL identifier (kept: the names are few, and
    statements built on every call quote theirs again)."""
    return psycopg_sql.Identifier(name).as_string()


def table(model: type[Model]) -> str:
    """The quoted table of a model."""
    return quoted(model._meta.db_table)


def column(model: type[Model], name: str) -> str:
    """The quoted column of a model's field."""
    return quoted(model._meta.get_field(name).column)


def qualified(model: type[Model], name: str) -> str:
    """The quoted table.column of a model's field."""
    return f"{table(model)}.{column(model, name)}"


def insert_unless_conflict(
    instance: Model,
    *,
    unique: Sequence[str] | None = None,
    unless_exists: tuple[str, Sequence[Any]] | None = None,
) -> bool:
    """INSERT a new instance unless a row with its values of the `unique` fields (a unique
    constraint's) exists, or, with `unique` None, unless the row would break any unique or
    exclusion constraint: True with the instance saved (its primary key set), or False with
    nothing written. With `unless_exists` (an SQL condition on the instance's table and its
    parameters), also nothing is written when a row of the table meets it, looked for in the
    INSERT's own statement (its snapshot: what was committed before it began).

    A conflict is an empty result instead of an error, so the enclosing transaction stays
    usable without a savepoint; a concurrent twin's uncommitted row is waited for, as a plain
    INSERT waits for it on the unique index.
    """
    model = type(instance)
    insert = insert_parts([instance])
    target = "" if unique is None else f"({', '.join(column(model, name) for name in unique)})"
    rows, params = insert.values(1), insert.params
    if unless_exists is not None:
        where, where_params = unless_exists
        rows = f"SELECT {insert.row} WHERE NOT EXISTS (SELECT 1 FROM {insert.table} WHERE {where})"
        params = [*params, *where_params]
    sql = (
        f"INSERT INTO {insert.table} {insert.columns} {rows} "
        f"ON CONFLICT {target} DO NOTHING RETURNING {column(model, model._meta.pk.name)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return False
    instance.pk = row[0]
    return True


def update_fields(instance: Model, names: Sequence[str]) -> None:
    """UPDATE these fields of a saved instance by its primary key, the values prepared as
    save(update_fields=names) prepares them (an auto_now field among them is refreshed), without
    save()'s signals. DatabaseError, as save() raises it, when the row is gone."""
    model = type(instance)
    fields = [model._meta.get_field(name) for name in names]
    assignments = ", ".join(f"{quoted(field.column)} = %s" for field in fields)
    sql = f"UPDATE {table(model)} SET {assignments} WHERE {quoted(model._meta.pk.column)} = %s"
    params = [
        field.get_db_prep_save(field.pre_save(instance, False), connection) for field in fields
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, instance.pk])
        if cursor.rowcount == 0:
            raise DatabaseError("Save with update_fields did not affect any rows.")


class RowReader:
    """Rows of these fields' values, each converted as a queryset reads it, so SQL written here
    reads what the ORM would. On PostgreSQL the driver returns the Python types already, and
    only a field with a `from_db_value` (JSON) converts. SQLite returns dates, times and
    datetimes (the types Django registers with its driver) naive, and decimals, booleans and
    UUIDs as stored: `to_python` makes them the field's type, a datetime is made aware in UTC
    (as Django stores it with USE_TZ) and a decimal gets the field's places. Which fields need
    it is decided once per database vendor."""

    def __init__(self, fields: Sequence[Field]) -> None:
        self.fields = tuple(fields)
        self._converted: dict[str, tuple[tuple[int, Field], ...]] = {}

    def rows(self, rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
        vendor = connection.vendor
        converted = self._converted.get(vendor)
        if converted is None:
            converted = self._converted[vendor] = tuple(
                (index, field)
                for index, field in enumerate(self.fields)
                if vendor != "postgresql" or hasattr(field, "from_db_value")
            )
        if not converted:
            return [tuple(row) for row in rows]
        result = []
        for row in rows:
            values = list(row)
            for index, field in converted:
                values[index] = _converted(field, values[index], vendor)
            result.append(tuple(values))
        return result

    def row(self, row: Sequence[Any]) -> tuple[Any, ...]:
        return self.rows([row])[0]


def _converted(field: Field, value: Any, vendor: str) -> Any:
    if hasattr(field, "from_db_value"):
        value = field.from_db_value(value, None, connection)
    if value is None or vendor == "postgresql":
        return value
    value = field.to_python(value)
    if isinstance(field, DateTimeField) and timezone.is_naive(value):
        return timezone.make_aware(value, UTC)
    if isinstance(field, DecimalField):
        return value.quantize(Decimal(1).scaleb(-field.decimal_places))
    return value


@dataclass(frozen=True)
class Selected:
    """Concrete fields of a model as the columns of a SELECT, each qualified with the model's
    table, and the way back from a row's values to Python, converted as the ORM converts them."""

    model: type[Model]
    fields: tuple[Field, ...]

    @functools.cached_property
    def columns(self) -> str:
        return ", ".join(f"{table(self.model)}.{quoted(field.column)}" for field in self.fields)

    @functools.cached_property
    def reader(self) -> RowReader:
        return RowReader(self.fields)

    def values(self, row: Sequence[Any]) -> tuple[Any, ...]:
        return self.reader.row(row)

    def instance(self, row: Sequence[Any]) -> Model:
        """The instance of a row of every concrete field, as a queryset would make it."""
        attnames = [field.attname for field in self.fields]
        return self.model.from_db(connection.alias, attnames, self.values(row))


def selected(model: type[Model], names: Sequence[str] | None = None) -> Selected:
    """These fields of the model (every concrete field by default), to SELECT and read back."""
    return _selected(model, None if names is None else tuple(names))


@functools.cache
def _selected(model: type[Model], names: tuple[str, ...] | None) -> Selected:
    if names is None:
        return Selected(model, tuple(model._meta.concrete_fields))
    return Selected(model, tuple(model._meta.get_field(name) for name in names))
