"""Django's PostgreSQL backend, with a cheaper health check of kept connections and a bound on
how long the web server waits for the database's answers.

Health check. With CONN_HEALTH_CHECKS, Django sends `SELECT 1` before the first query of every
request on a kept connection: a round trip on every call that uses the database, about a tenth
of a replay's CPU (docs/performance.md). A connection the server has closed while it sat idle
(a restart, a shutdown, an idle timeout, a terminated backend) always has something to read:
the server's farewell message or the end of the stream. A healthy idle connection has
nothing, because the server only speaks when asked. So the socket is polled first, which
costs no round trip, and Django's full check runs only when there is input.

Answer deadline. A server that stopped answering without closing its connections (frozen,
its storage hung, a network partition) is found by no check, and neither TCP nor the server's
own timeouts end a wait for it: each request would hang, holding a thread, until the server
came back, and the Gateway would get no answer at all. In the web server's processes
(`bound_this_process`, called by config.wsgi) each exchange with the server — connecting, a
statement, a commit — must end within `settings.GARANTE_DB_ANSWER_SECONDS`, in every thread
(requests, the deferred writer, durable writes, Django's checks between requests); past it the
connection is closed, never reused, and the call fails as a database outage does (SYSTEM). A
transaction left open on the server is rolled back there once it sees the connection gone.
Celery workers are bound alike (config.celery; the hourly purge sets a longer bound of its own);
management commands (a migration building an index) are not. `answers_within(seconds)` sets
another bound (or none) for a block of code. A tool call has one deadline besides
(`call_within`, set by tooling.middleware): each exchange waits at most what is left of it, so
however many exchanges and lock waits a call makes, and however long it queued for a thread,
its answer comes by then.
"""

import contextlib
import select
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import psycopg
from django.db.backends.postgresql import base
from psycopg.connection import _WAIT_INTERVAL
from psycopg.errors import _WaitTimeout

_deadline: ContextVar[float | None] = ContextVar("garante_db_answer_deadline", default=None)
_process_deadline: float | None = None
# When the call being served must have its answer (time.monotonic()), if it has a deadline.
_call_ends: ContextVar[float | None] = ContextVar("garante_db_call_ends", default=None)
# What an exchange may still wait once its call's deadline has passed: it fails at once.
_SPENT = 0.001
# The shortest wait libpq's connect_timeout allows.
_CONNECT_SECONDS = 2


def bound_this_process(seconds: float | None) -> None:
    """Bound each exchange with the server made by this process, in any thread, to `seconds`
    (None or 0: no bound), wherever `answers_within` does not say otherwise."""
    global _process_deadline
    _process_deadline = seconds or None


@contextlib.contextmanager
def answers_within(seconds: float | None) -> Iterator[None]:
    """Bound each exchange with the server made in this context to `seconds` (None or 0: no
    bound, even in a bounded process)."""
    token = _deadline.set(seconds or None)
    try:
        yield
    finally:
        _deadline.reset(token)


@contextlib.contextmanager
def call_within(seconds: float | None, *, started: float | None = None) -> Iterator[None]:
    """In a bounded process (`bound_this_process`), every exchange made in this context ends
    by `started + seconds` (time.monotonic(); `started` defaults to now) as well as within its
    own bound: a call's database work, its lock waits and the time it queued before it was
    served share one deadline, past which the call fails as a database outage (SYSTEM)."""
    ends = None
    if seconds and _process_deadline is not None:
        ends = (time.monotonic() if started is None else started) + seconds
    token = _call_ends.set(ends)
    try:
        yield
    finally:
        _call_ends.reset(token)


def _call_left() -> float | None:
    """What is left of the call's deadline in a bounded process, or None."""
    ends = _call_ends.get()
    return None if ends is None else ends - time.monotonic()


def current_deadline() -> float | None:
    """The bound of this context: its `answers_within`, else the process's; no later than what
    is left of the call's deadline (`call_within`)."""
    bound = _deadline.get(_process_deadline)
    ends = _call_ends.get()
    if ends is None or bound is None:
        return bound
    return min(bound, max(ends - time.monotonic(), _SPENT))


class DatabaseAnswerTimeout(psycopg.OperationalError):
    """The server did not answer within the deadline; the connection has been closed."""


class BoundedConnection(psycopg.Connection):
    """A psycopg connection whose waits for the server end at `current_deadline()`."""

    def wait(self, gen: Any, interval: float = _WAIT_INTERVAL, timeout: float | None = None) -> Any:
        deadline = current_deadline()
        if deadline is None or timeout is not None:
            return super().wait(gen, interval, timeout)
        left = _call_left()
        if left is not None and left <= 0:
            # The call's deadline has passed (it queued for a thread past it): nothing is
            # sent, and the connection goes with the failed call.
            self.close()
            raise DatabaseAnswerTimeout("the database did not answer within the call's deadline")
        try:
            return super().wait(gen, interval, deadline)
        except _WaitTimeout:
            # The answer may still come: the connection's state is unknown, so it goes.
            self.close()
            raise DatabaseAnswerTimeout(
                f"the database did not answer within {deadline:g} s"
            ) from None


class _Driver:
    """psycopg as Django's backend sees it, connecting `BoundedConnection`s."""

    def __getattr__(self, name: str) -> Any:
        return getattr(psycopg, name)

    @staticmethod
    def connect(*args: Any, **kwargs: Any) -> BoundedConnection:
        return BoundedConnection.connect(*args, **kwargs)


class DatabaseWrapper(base.DatabaseWrapper):
    Database = _Driver()

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        left = _call_left()
        if left is not None and left < _CONNECT_SECONDS:
            # libpq waits whole seconds, 2 at least, for a server that accepts and never
            # answers: a call without that much left (one that queued for a thread past its
            # deadline) fails now rather than past it.
            raise DatabaseAnswerTimeout(
                f"the call's deadline leaves {max(left, 0):.1f} s, too little to connect"
            )
        deadline = current_deadline()
        if deadline is not None:
            # libpq's connect_timeout counts whole seconds, 2 at least.
            bound = max(_CONNECT_SECONDS, int(deadline))
            configured = conn_params.get("connect_timeout")
            if configured is None or int(configured) <= 0 or int(configured) > bound:
                conn_params = {**conn_params, "connect_timeout": bound}
        return super().get_new_connection(conn_params)

    def close_if_health_check_failed(self) -> None:
        if (
            self.connection is None
            or not self.health_check_enabled
            or self.health_check_done
            or self.pool
            or _has_input(self.connection)
        ):
            super().close_if_health_check_failed()
            return
        self.health_check_done = True


def _has_input(connection) -> bool:
    """Whether an idle connection has anything to read (or is already known closed)."""
    if connection.closed:
        return True
    poller = select.poll()
    poller.register(connection.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))
