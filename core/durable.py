"""Writes that must outlive the caller's transaction: security events and failed attempts.

A tool call runs inside the idempotency transaction, and every error rolls that transaction
back (only successes are stored). The evidence of a failure — a wrong code tried, an
identifier of somebody else, a failed identification counted towards a rate limit — must not
vanish with it, or a brute force could retry for ever. `durably(fn)` runs `fn` on a database
connection of its own, in its own transaction, and commits before returning.

Rules for `fn` (a second connection waits on any row lock the caller holds, so a careless `fn`
would wait on its own caller): insert rows, or update rows the caller has not locked or
written. A bounded lock timeout turns any mistake into an error instead of a hang.

SQLite (the one-command demo) allows one writer at a time, so a second connection would wait
on the caller's own lock: there `fn` runs in the caller's transaction, and runs again right
after should that transaction roll back (core.sqlite3). `fn` must therefore decide afresh
from what it reads, as it does on PostgreSQL: the write then stands either way, as there.
"""

import contextvars
import threading
from collections.abc import Callable
from typing import TypeVar

from django.db import connection, connections, transaction

T = TypeVar("T")

_LOCK_TIMEOUT = "5s"


def durably(fn: Callable[[], T]) -> T:
    """Run `fn` in a transaction that commits now, whatever the caller's transaction does."""
    if not connection.in_atomic_block:
        # In autocommit the write commits by itself.
        with transaction.atomic():
            return fn()
    if connection.vendor != "postgresql":
        # SQLite: in place, and again after a rollback of the caller's transaction.
        with transaction.atomic():
            value = fn()
        connection.on_rollback(fn)
        return value
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(f"SET LOCAL lock_timeout = '{_LOCK_TIMEOUT}'")
                outcome["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc
        finally:
            # This thread's connections die with it.
            connections.close_all()

    # Django's connections are per thread: a short-lived thread has its own, in autocommit.
    # It runs in the caller's context, so a database deadline the caller set bounds it too.
    context = contextvars.copy_context()
    worker = threading.Thread(
        target=context.run, args=(run,), name="garante-durable-write", daemon=True
    )
    worker.start()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
