"""Pieces of statements built from a model's metadata, for the few the ORM cannot express in
one statement (ON CONFLICT ... DO NOTHING / DO UPDATE, RETURNING beside a function call) and the
fixed-shape reads and writes that run on nearly every tool call, where compiling the query costs
more CPU than running it (core.idempotency, core.identity, core.references, tooling.context,
tooling.ledger, agenda.availability). Values are prepared and converted exactly as the ORM would."""

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, connection
from django.db.models import Field, Model
from django.db.models.expressions import Col


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
    quote = connection.ops.quote_name
    return InsertParts(
        table=quote(opts.db_table),
        columns=f"({', '.join(quote(field.column) for field in fields)})",
        row=", ".join(["%s"] * len(fields)),
        params=[
            field.get_db_prep_save(field.pre_save(instance, True), connection)
            for instance in instances
            for field in fields
        ],
    )


def table(model: type[Model]) -> str:
    """The quoted table of a model."""
    return connection.ops.quote_name(model._meta.db_table)


def column(model: type[Model], name: str) -> str:
    """The quoted column of a model's field."""
    return connection.ops.quote_name(model._meta.get_field(name).column)


def qualified(model: type[Model], name: str) -> str:
    """The quoted table.column of a model's field."""
    return f"{table(model)}.{column(model, name)}"


def insert_unless_conflict(instance: Model, *, unique: Sequence[str]) -> bool:
    """INSERT a new instance unless a row with its values of the `unique` fields (a unique
    constraint's) exists: True with the instance saved (its primary key set), or False with
    nothing written.

    A conflict is an empty result instead of an error, so the enclosing transaction stays
    usable without a savepoint; a concurrent twin's uncommitted row is waited for, as a plain
    INSERT waits for it on the unique index.
    """
    model = type(instance)
    insert = insert_parts([instance])
    target = ", ".join(column(model, name) for name in unique)
    sql = (
        f"INSERT INTO {insert.table} {insert.columns} {insert.values(1)} "
        f"ON CONFLICT ({target}) DO NOTHING RETURNING {column(model, model._meta.pk.name)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, insert.params)
        row = cursor.fetchone()
    if row is None:
        return False
    instance.pk = row[0]
    instance._state.adding = False
    instance._state.db = connection.alias
    return True


def update_fields(instance: Model, names: Sequence[str]) -> None:
    """UPDATE these fields of a saved instance by its primary key, the values prepared as
    save(update_fields=names) prepares them (an auto_now field among them is refreshed), without
    save()'s signals. DatabaseError, as save() raises it, when the row is gone."""
    model = type(instance)
    fields = [model._meta.get_field(name) for name in names]
    quote = connection.ops.quote_name
    assignments = ", ".join(f"{quote(field.column)} = %s" for field in fields)
    sql = (
        f"UPDATE {quote(model._meta.db_table)} SET {assignments} "
        f"WHERE {quote(model._meta.pk.column)} = %s"
    )
    params = [
        field.get_db_prep_save(field.pre_save(instance, False), connection) for field in fields
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, instance.pk])
        if cursor.rowcount == 0:
            raise DatabaseError("Save with update_fields did not affect any rows.")


class RowReader:
    """Rows of these columns' values, each converted as the ORM converts that field's value when
    it reads it (SQLCompiler.get_converters), so SQL written here reads what a queryset would:
    on PostgreSQL the common types need nothing, on SQLite datetimes, times, decimals and
    booleans do. Which columns need it is looked up once per database vendor."""

    def __init__(self, columns: Sequence[Col]) -> None:
        self.columns = tuple(columns)
        self._converted: dict[str, tuple[tuple[int, Col], ...]] = {}

    def rows(self, rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
        converted = self._converted.get(connection.vendor)
        if converted is None:
            converted = self._converted[connection.vendor] = tuple(
                (index, col) for index, col in enumerate(self.columns) if _converters(col)
            )
        if not converted:
            return [tuple(row) for row in rows]
        result = []
        for row in rows:
            values = list(row)
            for index, col in converted:
                for convert in _converters(col):
                    values[index] = convert(values[index], col, connection)
            result.append(tuple(values))
        return result

    def row(self, row: Sequence[Any]) -> tuple[Any, ...]:
        return self.rows([row])[0]


def _converters(col: Col) -> list[Any]:
    return connection.ops.get_db_converters(col) + col.get_db_converters(connection)


@dataclass(frozen=True)
class Selected:
    """Concrete fields of a model as the columns of a SELECT, each qualified with the model's
    table, and the way back from a row's values to Python, converted as the ORM converts them."""

    model: type[Model]
    fields: tuple[Field, ...]

    @functools.cached_property
    def columns(self) -> str:
        quote = connection.ops.quote_name
        table = quote(self.model._meta.db_table)
        return ", ".join(f"{table}.{quote(field.column)}" for field in self.fields)

    @functools.cached_property
    def reader(self) -> RowReader:
        return RowReader([field.cached_col for field in self.fields])

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
