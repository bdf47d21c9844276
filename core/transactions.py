"""Transaction helpers of the services: running one piece of work at a time per record."""

import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, models, transaction


@contextmanager
def one_at_a_time(model: type[models.Model], pk: int) -> Iterator[None]:
    """A transaction in which no other `one_at_a_time` of the same record runs: a second one
    waits at the start until the first has committed or rolled back, then reads what it left.

    For work outside the database that must not be done twice at once, such as an email and
    the column that records it was sent: without it, two deliveries of one notice (a task
    published again by a sweep while the first still waited in the queue) both read "not sent"
    and both send. The lock is PostgreSQL's transaction-scoped advisory lock, not the row's,
    so staff and tool calls writing the record meanwhile are not held up by a slow mail
    server. Other databases (SQLite, for the demo) get the transaction only.
    """
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", advisory_keys(model, pk))
        yield


def advisory_keys(model: type[models.Model], pk: int) -> tuple[int, int]:
    """The two 32-bit keys of a record's advisory lock (`one_at_a_time`): the table, and the
    id (wrapped; a collision only serialises two pieces of work that need not be)."""
    return int32(zlib.crc32(model._meta.db_table.encode())), int32(pk)


def int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value
