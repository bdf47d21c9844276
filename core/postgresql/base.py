"""Django's PostgreSQL backend with a bound on how long a process waits for the database's
answers, built on public APIs only (psycopg's cursor factories and `Connection.fileno()`,
libpq's `connect_timeout`, Django's backend methods). Kept connections are health-checked by
Django itself, as CONN_HEALTH_CHECKS configures, through `is_usable()`, which polls the socket
before it pays Django's `SELECT 1` round trip.

Answer deadline. A server that stopped answering without closing its connections (frozen,
its storage hung, a network partition) is found by no check, and neither TCP nor the server's
own timeouts end a wait for it: its host's kernel still acknowledges what is sent, so libpq's
`keepalives` and `tcp_user_timeout` see a live peer, and a stopped server runs none of its own
timers (`statement_timeout`, `lock_timeout`). Each request would hang, holding a thread, until
the server came back, and the Gateway would get no answer at all. So the client keeps time: in
the web server's processes (`bound_this_process`, called by config.wsgi) each exchange with
the server — connecting, a statement, a fetch of a server-side cursor, a COPY, a commit or a
rollback — must end within `settings.GARANTE_DB_ANSWER_SECONDS`, in every thread (requests,
the deferred writer, durable writes, Django's health check between requests). Past it a
watchdog thread shuts the connection's socket down, which wakes the waiting thread at once
with a closed connection: it is never reused, and the call fails as a database outage does
(SYSTEM). A transaction left open on the server is rolled back there once it sees the
connection gone. Connecting is bounded by libpq's own `connect_timeout`. The watch costs no
statement and no round trip: about ten microseconds of bookkeeping per exchange, and it ends
an exchange at most a watchdog tick (50 ms) past its deadline.

Celery workers are bound alike (config.celery; the hourly purge sets a longer bound of its
own); management commands (a migration building an index) are not. `answers_within(seconds)`
sets another bound (or none) for a block of code. A tool call has one deadline besides
(`call_within`, set by tooling.middleware): each exchange waits at most what is left of it, so
however many exchanges and lock waits a call makes, and however long it queued for a thread,
its answer comes by then; a call past its deadline sends nothing, and one with less left than
libpq's shortest connect timeout does not connect.

Setting `statement_timeout` to what is left of a call instead would cost a statement per
transaction (`SET LOCAL`; a plain `SET` outlives the transaction behind PgBouncer's transaction
pooling), and a constant one in the connection's startup `options` is refused by PgBouncer as
an unknown startup parameter; neither bounds a frozen server.
"""

import contextlib
import functools
import itertools
import os
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import psycopg
from django.db import OperationalError
from django.db.backends.postgresql import base

_deadline: ContextVar[float | None] = ContextVar("garante_db_answer_deadline", default=None)
_process_deadline: float | None = None
# When the call being served must have its answer (time.monotonic()), if it has a deadline.
_call_ends: ContextVar[float | None] = ContextVar("garante_db_call_ends", default=None)
# What an exchange may still wait once its call's deadline has passed: it fails at once.
_SPENT = 0.001
# The shortest wait libpq's connect_timeout allows.
_CONNECT_SECONDS = 2
# How late past its deadline an exchange may be ended, at most; and how many such ticks with
# nothing watched before the watchdog sleeps until the next watch.
_WATCH_TICK = 0.05
_QUIET_TICKS = 20


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


class _Watchdog:
    """One thread per process that ends the exchanges still waiting at their deadline, by
    shutting their connection's socket down (the waiting thread then reads the end of the
    stream, and psycopg fails the exchange at once).

    A watched socket is held by a descriptor of its own until the exchange ends, so that a
    descriptor libpq closes meanwhile (a connection the server dropped) and the system hands
    to another connection is never the one shut down."""

    def __init__(self) -> None:
        self._start_afresh()
        # A forked child (a gunicorn or Celery worker) has no watchdog thread until it needs one.
        os.register_at_fork(after_in_child=self._start_afresh)

    def _start_afresh(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._watched: dict[int, tuple[float, int]] = {}  # token: (ends, descriptor)
        self._tokens = itertools.count()
        self._asleep = True  # until woken by a watch: nothing to look at
        self._thread: threading.Thread | None = None

    def watch(self, fileno: int, ends: float) -> int:
        """Watch an exchange on the socket `fileno` until `ends` (time.monotonic())."""
        descriptor = os.dup(fileno)
        with self._lock:
            token = next(self._tokens)
            self._watched[token] = (ends, descriptor)
            if self._asleep:
                # Only the first watch after a quiet spell wakes the thread: waking it (a
                # thread switch) on every statement would cost more than the watch itself.
                self._asleep = False
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="garante-db-deadline", daemon=True
                    )
                    self._thread.start()
                else:
                    self._wake.notify()
        return token

    def forget(self, token: int) -> bool:
        """End the watch of an exchange; whether its deadline had passed (its socket shut)."""
        with self._lock:
            watched = self._watched.pop(token, None)
        if watched is None:
            return True
        os.close(watched[1])
        return False

    def _run(self) -> None:
        quiet = 0  # looks in a row that found nothing watched
        with self._lock:
            while True:
                now = time.monotonic()
                for token, (ends, descriptor) in list(self._watched.items()):
                    if ends <= now:
                        del self._watched[token]
                        _shut_down(descriptor)
                if self._watched:
                    quiet = 0
                    earliest = min(ends for ends, _ in self._watched.values())
                    # A watch made meanwhile may end sooner: look again within a tick.
                    self._wake.wait(min(_WATCH_TICK, earliest - now))
                elif quiet < _QUIET_TICKS:
                    quiet += 1
                    self._wake.wait(_WATCH_TICK)
                else:
                    self._asleep = True
                    self._wake.wait()


def _shut_down(descriptor: int) -> None:
    """Shut a socket down for both directions and close this descriptor of it (never raises:
    the watchdog thread must outlive any one socket)."""
    try:
        sock = socket.socket(fileno=descriptor)
    except OSError:
        with contextlib.suppress(OSError):
            os.close(descriptor)
        return
    with sock, contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


_watchdog = _Watchdog()


class _answered_in_time:
    """Bound one exchange on `connection` by `current_deadline()`; past it the connection is
    closed (its state is unknown: the answer may still come) and `error` is raised.

    A class rather than a generator: it runs around every statement."""

    __slots__ = ("bound", "connection", "error", "token")

    def __init__(
        self,
        connection: psycopg.Connection | None,
        error: type[Exception] = DatabaseAnswerTimeout,
    ) -> None:
        self.connection = connection
        self.error = error
        self.token: int | None = None

    def __enter__(self) -> None:
        connection = self.connection
        self.bound = bound = current_deadline()
        if bound is None or connection is None or connection.closed:
            return  # unbounded; a closed connection fails by itself, at once
        left = _call_left()
        if left is not None and left <= 0:
            # The call's deadline has passed (it queued for a thread past it): nothing is
            # sent, and the connection goes with the failed call.
            connection.close()
            raise self.error("the database did not answer within the call's deadline")
        self.token = _watchdog.watch(connection.fileno(), time.monotonic() + bound)

    def __exit__(self, kind: type[BaseException] | None, *_: Any) -> None:
        if self.token is None or not _watchdog.forget(self.token):
            return
        # The deadline passed: the socket was shut, so the connection goes. An answer that
        # came as it passed stands; a wait it ended fails as an outage.
        self.connection.close()
        if kind is not None:
            raise self.error(f"the database did not answer within {self.bound:g} s") from None


class _BoundedCursor:
    """Mixed into the connection's cursor class: each of its exchanges is bounded."""

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        with _answered_in_time(self.connection):
            return super().execute(*args, **kwargs)

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        with _answered_in_time(self.connection):
            return super().executemany(*args, **kwargs)

    @contextlib.contextmanager
    def copy(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        # A COPY's exchanges, from its start to its end, share one bound.
        with _answered_in_time(self.connection), super().copy(*args, **kwargs) as copy:
            yield copy


class _BoundedServerCursor(_BoundedCursor):
    """A server-side cursor (`.iterator()`): its fetches are exchanges too."""

    def fetchone(self) -> Any:
        with _answered_in_time(self.connection):
            return super().fetchone()

    def fetchmany(self, *args: Any, **kwargs: Any) -> Any:
        with _answered_in_time(self.connection):
            return super().fetchmany(*args, **kwargs)

    def fetchall(self) -> Any:
        with _answered_in_time(self.connection):
            return super().fetchall()

    def __next__(self) -> Any:
        with _answered_in_time(self.connection):
            return super().__next__()

    def scroll(self, *args: Any, **kwargs: Any) -> Any:
        with _answered_in_time(self.connection):
            return super().scroll(*args, **kwargs)

    def close(self) -> None:
        with _answered_in_time(self.connection):
            super().close()


@functools.cache
def _bounded(cursor_class: type, mixin: type) -> type:
    """`cursor_class` (psycopg's, or Django's subclass of it) with its exchanges bounded."""
    return type(f"Bounded{cursor_class.__name__}", (mixin, cursor_class), {})


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self) -> dict[str, Any]:
        params = super().get_connection_params()
        params["cursor_factory"] = _bounded(params["cursor_factory"], _BoundedCursor)
        return params

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
        connection = super().get_new_connection(conn_params)
        # Django opens its named cursors (`.iterator()`) through this factory when parameters
        # are bound by the server, as config.settings has them.
        connection.server_cursor_factory = _bounded(
            connection.server_cursor_factory, _BoundedServerCursor
        )
        return connection

    def is_usable(self) -> bool:
        """Django's check of a kept connection (CONN_HEALTH_CHECKS, before a request's first
        query; after an error), without its `SELECT 1` round trip for a healthy connection.
        A connection the server has closed while it sat idle (a restart, a shutdown, an idle
        timeout, a terminated backend, PgBouncer gone) always has something to read: the
        server's farewell or the end of the stream. A healthy idle one has nothing, since the
        server only speaks when asked. So the socket is polled first, without waiting, and
        Django's `SELECT 1` runs only when there is input. A server frozen with the connection
        open passes both checks alike: the answer deadline is what finds it."""
        connection = self.connection
        if connection is None or connection.closed or connection.broken:
            return False
        if _has_input(connection):
            return super().is_usable()
        return True

    # A commit or a rollback is an exchange of the connection itself, not of a cursor; Django
    # has already turned psycopg's error into its own when it reaches here.
    def commit(self) -> None:
        with _answered_in_time(self.connection, OperationalError):
            super().commit()

    def rollback(self) -> None:
        with _answered_in_time(self.connection, OperationalError):
            super().rollback()


def _has_input(connection: Any) -> bool:
    """Whether the server has sent anything (or closed the stream) since the last exchange."""
    poller = select.poll()
    poller.register(connection.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
    return bool(poller.poll(0))
