"""Pieces of INSERT statements built from a model's metadata, for the few writes the ORM
cannot express in one statement (ON CONFLICT ... DO NOTHING / DO UPDATE, RETURNING beside a
function call): the tool path's hottest writes (tooling.idempotency, tooling.context,
tooling.ledger, support.services). Values are prepared exactly as save() would prepare them."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Model


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


def column(model: type[Model], name: str) -> str:
    """The quoted column of a model's field."""
    return connection.ops.quote_name(model._meta.get_field(name).column)


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
