"""Transaction helpers of the services: running one piece of work at a time per record."""

import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, models, transaction

from core.errors import Ambiguous, Conflict, NotFound, PermissionRefused, ValidationFailed

# What a service refuses with, as opposed to what fails it.
_REFUSALS = (ValidationFailed, NotFound, PermissionRefused, Ambiguous, Conflict)


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


@contextmanager
def joined() -> Iterator[None]:
    """The transaction of a service: the caller's, joined without a savepoint, or one of its
    own when called in autocommit (a task, a shell).

    For a service whose refusals (core.errors) all come before its first write, or after a
    write that wrote nothing: a refusal then leaves the caller's transaction as it was and
    usable, and a savepoint would guard nothing while costing two statements (SAVEPOINT,
    RELEASE) on every call. Any other failure marks the caller's transaction for rollback
    (`transaction.set_rollback`), as `atomic(savepoint=False)` does: what the service wrote
    before it must not be committed.
    """
    if transaction.get_autocommit():
        with transaction.atomic():
            yield
        return
    try:
        yield
    except _REFUSALS:
        raise
    except Exception:
        transaction.set_rollback(True)
        raise


def advisory_keys(model: type[models.Model], pk: int) -> tuple[int, int]:
    """The two 32-bit keys of a record's advisory lock (`one_at_a_time`): the table, and the
    id (wrapped; a collision only serialises two pieces of work that need not be)."""
    return int32(zlib.crc32(model._meta.db_table.encode())), int32(pk)


def int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value
