"""Django's PostgreSQL backend, with a cheaper health check of kept connections.

With CONN_HEALTH_CHECKS, Django sends `SELECT 1` before the first query of every request on a
kept connection: a round trip on every call that uses the database, about a tenth of a
replay's CPU (docs/performance.md). A connection the server has closed while it sat idle
(a restart, a shutdown, an idle timeout, a terminated backend) always has something to read:
the server's farewell message or the end of the stream. A healthy idle connection has
nothing, because the server only speaks when asked. So the socket is polled first, which
costs no round trip, and Django's full check runs only when there is input. A server that
vanished without closing the connection (a partition) is found by neither check until the
first query times out, as before.
"""

import select

from django.db.backends.postgresql import base


class DatabaseWrapper(base.DatabaseWrapper):
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
