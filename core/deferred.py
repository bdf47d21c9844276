"""Deferred bookkeeping writes: rows nobody waits for, written in batches off the request path.

The conversation trace and the replay counters of idempotency records are bookkeeping: a call's
answer never depends on them, and losing the last fraction of a second of them when a process
is killed harms nobody (a graceful stop writes them first). Written one by one, they cost every
tool call a statement, a commit and a WAL flush; here a request only appends to a per-process
queue, and one background thread per process writes each queue as one batch every
`GARANTE_DEFERRED_WRITE_SECONDS` (sooner when a queue fills), in its own transaction with
asynchronous commit.

`GARANTE_DEFERRED_WRITE_SECONDS = 0` writes each item at once, in the calling thread (the tests'
setting, where the rows must be visible inside the test's transaction).

A failed batch is logged and dropped: the database being down is already answered SYSTEM by
the calls themselves, and retrying bookkeeping could only delay recovery. A batch the database
or its driver refuses for its data (a value it cannot store or encode) is written again item
by item, so the one bad item is dropped alone, not the hundreds of calls of its batch.
"""

import atexit
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import DataError, connection, transaction

logger = logging.getLogger("garante.deferred")

# A queue reaching this many items is written without waiting for the interval.
BATCH_SIZE = 500
# Beyond this many items waiting (the database is unreachable), new items are dropped.
MAX_PENDING = 50_000


class DeferredQueue:
    """Items of one kind waiting to be written together by `write(items)`."""

    def __init__(self, name: str, write: Callable[[list[Any]], None]) -> None:
        self.name = name
        self._write = write
        self._items: list[Any] = []
        self._dropped = 0
        self._lock = threading.Lock()
        _queues.append(self)

    def add(self, item: Any) -> None:
        """Queue one item; with deferral off, write it now (never raises)."""
        if settings.GARANTE_DEFERRED_WRITE_SECONDS <= 0:
            self._write_logged([item])
            return
        _writer.ensure_running()  # first: in a forked child it resets what it inherited
        with self._lock:
            if len(self._items) >= MAX_PENDING:
                self._dropped += 1
                return
            self._items.append(item)
            full = len(self._items) >= BATCH_SIZE
        if full:
            _writer.wake()

    def flush(self) -> int:
        """Write what is queued now, in the calling thread; return how many items were taken."""
        with self._lock:
            items, self._items = self._items, []
            dropped, self._dropped = self._dropped, 0
        if dropped:
            logger.warning("%s: dropped %d items while the queue was full", self.name, dropped)
        if items:
            self._write_logged(items, batch=True)
        return len(items)

    def pending(self) -> int:
        with self._lock:
            return len(self._items)

    def _reset_after_fork(self) -> None:
        self._lock = threading.Lock()
        self._items = []
        self._dropped = 0

    def _write_logged(self, items: list[Any], *, batch: bool = False) -> None:
        try:
            if not transaction.get_autocommit():
                # Deferral off, inside a caller's transaction (a test, a nested use): a
                # savepoint, so a failure leaves that transaction usable.
                with transaction.atomic():
                    self._write(items)
            elif batch:
                with transaction.atomic():
                    if connection.vendor == "postgresql":
                        with connection.cursor() as cursor:
                            # Bookkeeping: not worth waiting for the WAL flush (module doc).
                            cursor.execute("SET LOCAL synchronous_commit TO OFF")
                    self._write(items)
            else:
                self._write(items)
        except (DataError, connection.Database.DataError, UnicodeError):
            if not batch or len(items) == 1:
                logger.exception("%s: could not write %d items; dropped", self.name, len(items))
                return
            logger.warning("%s: a batch of %d items was refused; one by one", self.name, len(items))
            for item in items:
                self._write_logged([item], batch=True)
        except Exception:
            logger.exception("%s: could not write %d items; dropped", self.name, len(items))


_queues: list[DeferredQueue] = []


def deferred_flush() -> int:
    """Write every queue now (tests, shutdown); return how many items were written."""
    return sum(queue.flush() for queue in _queues)


class _Writer:
    """The per-process background thread that writes the queues."""

    def __init__(self) -> None:
        self._pid = os.getpid()
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._stopping = False
        self._start_lock = threading.Lock()

    def ensure_running(self) -> None:
        if self._pid != os.getpid():
            self._after_fork()
        thread = self._thread
        if thread is None or not thread.is_alive():
            with self._start_lock:
                if self._thread is None or not self._thread.is_alive():
                    self._stopping = False
                    self._thread = threading.Thread(
                        target=self._run, name="garante-deferred-writes", daemon=True
                    )
                    self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        """Stop the thread (it writes what is queued first); the next item starts a new one."""
        with self._start_lock:
            thread, self._thread = self._thread, None
            if thread is None or self._pid != os.getpid():
                return
            self._stopping = True
            self._wake.set()
        thread.join(timeout=30)

    def _after_fork(self) -> None:
        # A forked child inherits the parent's queues and locks but not its thread.
        self._pid = os.getpid()
        self._thread = None
        self._wake = threading.Event()
        self._stopping = False
        self._start_lock = threading.Lock()
        for queue in _queues:
            queue._reset_after_fork()

    def _run(self) -> None:
        while True:
            interval = settings.GARANTE_DEFERRED_WRITE_SECONDS
            self._wake.wait(interval if interval > 0 else 1.0)
            self._wake.clear()
            stopping = self._stopping
            if any(queue.pending() for queue in _queues):
                try:
                    connection.close_if_unusable_or_obsolete()
                    deferred_flush()
                except Exception:
                    logger.exception("deferred writes failed")
                finally:
                    if stopping or not settings.DATABASES["default"].get("CONN_MAX_AGE"):
                        connection.close()
            if stopping:
                return


_writer = _Writer()


def deferred_writer_stop() -> None:
    """Write what is queued and stop this process's writer thread (shutdown, tests)."""
    _writer.stop()
    if _writer._pid == os.getpid() and any(queue.pending() for queue in _queues):
        deferred_flush()


# A graceful stop (gunicorn's worker exit, manage.py, a Celery worker) writes what is queued.
atexit.register(deferred_writer_stop)
