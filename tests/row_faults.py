"""Updates PostgreSQL refuses: a row's, for the tests of sweeps that must go on past one row,
and a table's first matching one, for the tests of work that must survive a failed record."""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, models


@contextmanager
def update_refused(instance: models.Model) -> Iterator[None]:
    """Every UPDATE of `instance`'s row fails in PostgreSQL (a trigger raising an error), as a
    constraint, a bug meeting its data or a corrupted value would; the other rows update."""
    table = connection.ops.quote_name(instance._meta.db_table)
    name = f"refuse_{instance._meta.db_table}_{instance.pk}"
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"RAISE EXCEPTION 'row % refused by the test', OLD.id; END $$"
        )
        cursor.execute(
            f"CREATE TRIGGER {name} BEFORE UPDATE ON {table} FOR EACH ROW "
            f"WHEN (OLD.id = {int(instance.pk)}) EXECUTE FUNCTION {name}()"
        )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TRIGGER {name} ON {table}")
            cursor.execute(f"DROP FUNCTION {name}()")


@contextmanager
def first_update_refused(model: type[models.Model], when: str) -> Iterator[None]:
    """The first UPDATE of `model`'s table whose new row meets `when` (SQL on NEW) fails, as a
    database that stopped answering at that instant would; every later one goes through."""
    table = connection.ops.quote_name(model._meta.db_table)
    name = f"refuse_once_{model._meta.db_table}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE SEQUENCE {name}")
        cursor.execute(
            f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF ({when}) AND nextval('{name}') = 1 THEN "
            f"RAISE EXCEPTION 'update refused once by the test'; END IF; RETURN NEW; END $$"
        )
        cursor.execute(
            f"CREATE TRIGGER {name} BEFORE UPDATE ON {table} FOR EACH ROW EXECUTE FUNCTION {name}()"
        )
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TRIGGER {name} ON {table}")
            cursor.execute(f"DROP FUNCTION {name}()")
            cursor.execute(f"DROP SEQUENCE {name}")
