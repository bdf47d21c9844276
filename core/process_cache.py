"""Read-mostly values kept in this process for a few seconds.

Some reads are made by nearly every tool call and change only when staff change something
(the company a gateway token belongs to, the service catalogue). Each costs a query of ORM CPU
per call; kept here, a warm call costs a dictionary lookup. The price is staleness in the
*other* processes: whoever changes the source calls `forget` (models' signals do it), which
takes effect at once in its own process, and everywhere else within
`GARANTE_PROCESS_CACHE_SECONDS` (0 disables every cache of this kind).

Entries carry a tag (the company they belong to), so a change forgets a whole company at once.
"""

import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.conf import settings
from django.db import transaction

# Only values that exist are kept, so a cache is bounded by its source; this cap only guards
# against a pathological number of them.
MAX_ENTRIES = 10_000

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
        loaded = load()
        if loaded is None:
            self._entries.pop(key, None)
            return None
        tag, value = loaded
        seconds = settings.GARANTE_PROCESS_CACHE_SECONDS
        if seconds > 0:
            with self._lock:
                if len(self._entries) >= MAX_ENTRIES:
                    self._entries.clear()
                self._entries[key] = (tag, value, now + seconds)
        return value

    def forget_changed(self, *, tag: Hashable) -> None:
        """Forget a tag whose source is being changed: now, and again once the change
        commits, so a request that read the old rows in between does not keep them."""
        self.forget(tag=tag)
        transaction.on_commit(lambda: self.forget(tag=tag))

    def forget(self, *, tag: Hashable | None = None) -> None:
        """Drop the entries of one tag, or all of them."""
        with self._lock:
            if tag is None:
                self._entries.clear()
                return
            for key in [k for k, entry in self._entries.items() if entry[0] == tag]:
                del self._entries[key]


def process_caches_forget() -> None:
    """Empty every process cache of this process (after a bulk change made with SQL)."""
    for cache in _caches:
        cache.forget()
