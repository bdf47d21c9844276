"""Read-mostly values kept in this process for a few seconds.

Some reads are made by nearly every tool call and change only when staff change something
(the company a gateway token belongs to, the service catalogue). Each costs a query of ORM CPU
per call; kept here, a warm call costs a dictionary lookup. The price is staleness in the
*other* processes: whoever changes the source calls `forget` (models' signals do it), which
takes effect at once in its own process, and everywhere else within
`GARANTE_PROCESS_CACHE_SECONDS` (0 disables every cache of this kind).

Entries carry a tag (the company they belong to), so a change forgets a whole company at once.

Several processes, several web nodes (docs/scaling.md): where the processes share a Redis,
`forget` after a commit is also published on a Redis channel, and every process listens to it in
a thread of its own and forgets the same tag when told, milliseconds later: a gateway token
revoked in one process is refused by every other from its next request. The Redis is
`GARANTE_REDIS_URL`, or else the Celery broker's (`CELERY_BROKER_URL`), which every deployment
that runs a worker already has (`broadcast_url`); only where tasks run in the web process
(`CELERY_TASK_ALWAYS_EAGER`: the demo, one process) is there none, and none is needed. A process
keeps entries only while it is subscribed: before its subscription is confirmed, and from the
moment it is lost until it is confirmed again (every entry forgotten then, since messages may
have been missed), each read goes to the database. A change that sends no signal (an UPDATE in
SQL, a process without Redis) is still seen within `GARANTE_PROCESS_CACHE_SECONDS` (1 s).
"""

import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

# Only values that exist are kept, so a cache is bounded by its source; this cap only guards
# against a pathological number of them.
MAX_ENTRIES = 10_000

logger = logging.getLogger("garante.process_cache")

_clock = time.monotonic
_caches: list["ProcessCache"] = []
_bypassed: ContextVar[bool] = ContextVar("process_cache_bypassed", default=False)


@contextmanager
def process_caches_bypassed() -> Iterator[None]:
    """Within the block every cache reads its source, as a process that just started would
    (the sandbox's simulated database outage: the cold case is what it must provoke)."""
    token = _bypassed.set(True)
    try:
        yield
    finally:
        _bypassed.reset(token)


class ProcessCache:
    """A dictionary of (tag, value) whose entries stay fresh for the configured seconds."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._entries: dict[Hashable, tuple[Hashable, Any, float]] = {}
        self._lock = threading.Lock()
        _caches.append(self)

    def get(self, key: Hashable, load: Callable[[], tuple[Hashable, Any] | None]) -> Any:
        """The value under `key`, from `load()` when absent or stale.

        `load` returns (tag, value), or None for "nothing there" (returned, never kept).
        """
        if _bypassed.get():
            loaded = load()
            return None if loaded is None else loaded[1]
        now = _clock()
        entry = self._entries.get(key)
        if entry is not None and entry[2] > now:
            return entry[1]
        seconds = settings.GARANTE_PROCESS_CACHE_SECONDS
        # Kept only if no invalidation arrived while loading: the rows read may predate it.
        generation = _broadcast.keeping() if seconds > 0 else None
        loaded = load()
        if loaded is None:
            self._entries.pop(key, None)
            return None
        tag, value = loaded
        if generation is not None and generation == _broadcast.generation:
            with self._lock:
                if len(self._entries) >= MAX_ENTRIES:
                    self._entries.clear()
                self._entries[key] = (tag, value, now + seconds)
        return value

    def forget_changed(self, *, tag: Hashable) -> None:
        """Forget a tag whose source is being changed: now, and again once the change
        commits, so a request that read the old rows in between does not keep them."""
        self.forget(tag=tag)
        transaction.on_commit(lambda: self.forget_everywhere(tag=tag))

    def forget_everywhere(self, *, tag: Hashable) -> None:
        """Forget a tag here and in every other process listening (module doc)."""
        self.forget(tag=tag)
        _broadcast.publish(self.name, tag)

    def forget(self, *, tag: Hashable | None = None) -> None:
        """Drop the entries of one tag, or all of them."""
        with self._lock:
            if tag is None:
                self._entries.clear()
                return
            for key in [k for k, entry in self._entries.items() if entry[0] == tag]:
                del self._entries[key]


def broadcast_url() -> str:
    """The Redis on which processes tell each other what to forget, or "" for none (module
    doc): GARANTE_REDIS_URL, else the Celery broker when it is a Redis that tasks go through."""
    url = getattr(settings, "GARANTE_REDIS_URL", "")
    if url:
        return url
    broker = getattr(settings, "CELERY_BROKER_URL", "") or ""
    if getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False):
        return ""
    return broker if broker.startswith(("redis://", "rediss://", "unix://")) else ""


def change_seen_everywhere() -> str:
    """When every process sees a change staff made (for the admin's messages), worded in the
    active language: from the next request where changes are broadcast, else within the
    cache's seconds."""
    if _broadcast._url():
        return _("from their next request")
    seconds = math.ceil(settings.GARANTE_PROCESS_CACHE_SECONDS)
    return ngettext("within %(seconds)d second", "within %(seconds)d seconds", seconds) % {
        "seconds": seconds
    }


def process_caches_forget() -> None:
    """Empty every process cache of this process (after a bulk change made with SQL)."""
    for cache in _caches:
        cache.forget()


class _Broadcast:
    """The Redis channel on which processes tell each other what to forget (module doc)."""

    def __init__(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._subscribed = False
        self._publisher: Any = None
        # Invalidations received (and subscriptions made or lost) so far in this process.
        self.generation = 0

    def _url(self) -> str:
        return broadcast_url()

    def _channel(self) -> str:
        # One channel per database: processes of another database (another cluster, another
        # test run on the same Redis) are not told, nor tell.
        return f"garante:process-cache:{settings.DATABASES['default']['NAME']}"

    def keeping(self) -> int | None:
        """The current generation if entries may be kept now, else None."""
        if not self._url():
            return self.generation
        if self._pid != os.getpid():  # a forked child: its own thread and connections
            self.__init__()
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(
                        target=self._listen, name="garante-process-cache", daemon=True
                    )
                    self._thread.start()
        return self.generation if self._subscribed else None

    def publish(self, cache_name: str, tag: Hashable) -> None:
        if not self._url():
            return
        import redis

        try:
            if self._publisher is None or self._pid != os.getpid():
                self._publisher = redis.Redis.from_url(
                    self._url(), socket_timeout=0.5, socket_connect_timeout=0.5
                )
            self._publisher.publish(self._channel(), json.dumps([cache_name, tag]))
        except Exception:
            self._publisher = None
            logger.warning(
                "could not tell the other processes to forget %s of %s: they will within %g s",
                cache_name,
                tag,
                settings.GARANTE_PROCESS_CACHE_SECONDS,
            )

    def _listen(self) -> None:
        import redis

        while True:
            try:
                client = redis.Redis.from_url(
                    self._url(), socket_connect_timeout=1, health_check_interval=5
                )
                pubsub = client.pubsub()
                pubsub.subscribe(self._channel())
                for message in pubsub.listen():
                    if message["type"] == "subscribe":
                        process_caches_forget()
                        self.generation += 1
                        self._subscribed = True
                    elif message["type"] == "message":
                        self._received(message["data"])
            except Exception:
                logger.warning("process cache invalidations: Redis unreachable; not caching")
            finally:
                self._subscribed = False
                self.generation += 1
                process_caches_forget()
            time.sleep(1)

    def _received(self, data: bytes) -> None:
        self.generation += 1
        try:
            name, tag = json.loads(data)
        except ValueError:
            return
        for cache in _caches:
            if cache.name == name:
                cache.forget(tag=tag if not isinstance(tag, list) else tuple(tag))


_broadcast = _Broadcast()
