"""Celery's Redis transport, keeping one Redis client per channel instead of one per message.

kombu's Redis channel builds a new `redis.Redis` client for every command it sends outside its
polling loop, publishing included (`Channel.conn_or_acquire`). The client holds no connection
of its own (it borrows one from the channel's pool for each command), but building it fills a
table of about 170 response callbacks: about a fifth of the CPU of publishing a task, which a
tool call that queues an email or a code pays on top of its own work (docs/performance.md).
This channel builds the client once and keeps it while its pool lives: kombu
replaces the pool after a fork or when the channel closes, and then the next command gets a
new client on the new pool. Everything else is kombu's own transport.

Selected by `CELERY_BROKER_TRANSPORT` (config.settings) when the broker URL is a Redis one.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kombu.transport import redis


class Channel(redis.Channel):
    _kept_client: Any = None

    @contextmanager
    def conn_or_acquire(self, client: Any = None) -> Iterator[Any]:
        if client:
            yield client
            return
        pool = self.pool
        kept = self._kept_client
        if kept is None or kept.connection_pool is not pool:
            kept = self._kept_client = self._create_client()
        yield kept


class Transport(redis.Transport):
    Channel = Channel
