"""Periodic sweeps that act on many rows, one row at a time.

A sweep (the no-shows, closing silent cases, expiring quotes, resending lost emails) lists the
rows due and acts on each. One row that fails (a constraint it breaks, a bug its data meets, a
lock it cannot get) must not keep the others waiting: its error is logged with its traceback
and counted (`garante_sweep_rows{sweep, outcome}`), and since it is still due, the next run
tries it again. What is not one row's failure stops the sweep: the task's soft time limit, a
broker that refuses messages, and a database that stopped answering (every later row would fail
the same way; the next run starts on a new connection).
"""

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from celery import Task
from celery.exceptions import SoftTimeLimitExceeded
from django.db import connection, transaction
from kombu.exceptions import OperationalError as BrokerUnavailable

from core.metrics import SWEEP_ROWS

logger = logging.getLogger("garante.sweeps")

Row = TypeVar("Row")

# The time limits of a sweep's task (seconds): longer than a single message's (settings), since
# a sweep may act on hundreds of rows; at the soft one it stops after its current row.
SWEEP_TIME_LIMITS = {"soft_time_limit": 5 * 60, "time_limit": 6 * 60}


@dataclass(frozen=True)
class SweepResult:
    done: int  # rows acted on
    skipped: int  # rows no longer due when their turn came (changed meanwhile)
    failed: int  # rows whose handling raised; still due, so the next run tries them again


def sweep(name: str, rows: Iterable[Row], handle: Callable[[Row], bool]) -> SweepResult:
    """Call `handle` on each row in turn; it returns whether it acted (False: no longer due).

    `handle` runs its own transaction, so a row that fails rolls back alone.
    """
    done = skipped = failed = 0
    for row in rows:
        try:
            acted = handle(row)
        except SoftTimeLimitExceeded:
            logger.warning("sweep %s: out of time after %d rows; the next run goes on", name, done)
            raise
        except BrokerUnavailable:
            raise
        except Exception:
            if not _database_answers():
                raise
            failed += 1
            SWEEP_ROWS.labels(name, "failed").inc()
            logger.exception("sweep %s: row %r failed; it stays due for the next run", name, row)
            continue
        if acted:
            done += 1
        else:
            skipped += 1
    if done:
        SWEEP_ROWS.labels(name, "done").inc(done)
    if failed:
        logger.warning("sweep %s: %d done, %d failed", name, done, failed)
    return SweepResult(done=done, skipped=skipped, failed=failed)


def enqueued(task: Task, *args: Any, **kwargs: Any) -> bool:
    """Queue `task` for one row of a resend sweep (a handler that always acts)."""
    task.delay(*args, **kwargs)
    return True


def _database_answers() -> bool:
    """Whether the connection still serves statements after a row failed: a failure of the row
    itself leaves it usable (its transaction rolled back); an outage does not."""
    if connection.connection is None:
        return True  # closed, not broken: the next row connects again
    if not transaction.get_autocommit():
        return True  # the caller's transaction decides; nothing can be asked inside it now
    return connection.is_usable()
