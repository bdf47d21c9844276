"""Above the key: one effect per intent, whatever the idempotency keys.

A key makes a *retry* safe. A model that *re-plans* (after a timeout, a lost answer, a restart)
calls the same tool again with a new key, or other MCP clients mint a key per call, so the key
engine sees a new request. Each write tool therefore declares its *intent*: the structured
fields that make two calls the same request (for a booking: the customer and the slot), never
free text. The intent always holds the company and the customer: two customers who ask for the
same thing are two requests (seed 1 §1).

`once_per_intent` is the one mechanism: inside the call's transaction it takes the intent's
lock (PostgreSQL's transaction-scoped advisory lock on the intent's hash, so that concurrent
calls of one intent run one after the other), then looks for what the intent already made
(`find`, the domain's selector) and answers it, `already_done`; only when there is none does it
run `make`. The lock is held until the transaction ends, so the first call's record is
committed, and visible to the next one's `find` (READ COMMITTED: each statement sees what was
committed before it began), before the next one looks. The wait is bounded like the key's
(CONFLICT request_in_progress past it). On SQLite (the demo) write transactions are serialised
at BEGIN IMMEDIATE, which does the same.

The windows a company sets (how long a quote, a sales request or a case stands as "the same
request") are columns of core.models.Company, read by `intent_since`. docs/tools.md, "Above the
key", lists each tool's intent and window.
"""

import hashlib
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.db import OperationalError, connection, transaction

from core.idempotency.engine import canonical_json, in_progress
from core.models import Company, Contact
from core.transactions import joined

T = TypeVar("T")

_LOCK_NOT_AVAILABLE = "55P03"

# The company's window per intent that has one (core.models.Company), in minutes; 0 turns it off.
WINDOW_FIELDS = {
    "create_quote": "quote_intent_window_minutes",
    "request_sales_contact": "sales_contact_intent_window_minutes",
    "open_case": "case_intent_window_minutes",
}


@dataclass(frozen=True)
class Intent:
    """What makes two calls of `operation` the same request: the company, the customer and
    the structured `fields` (JSON values; their order does not count, their values do)."""

    operation: str
    company_id: int
    contact_id: int
    fields: dict[str, Any]

    @classmethod
    def of(cls, operation: str, *, company: Company, contact: Contact, **fields: Any) -> "Intent":
        return cls(operation, company.pk, contact.pk, fields)

    @property
    def digest(self) -> bytes:
        """SHA-256 of the intent's canonical JSON (RFC 8785, as the key's fingerprint)."""
        return hashlib.sha256(
            canonical_json(
                {
                    "operation": self.operation,
                    "company": self.company_id,
                    "contact": self.contact_id,
                    "fields": self.fields,
                }
            )
        ).digest()

    @property
    def lock_key(self) -> int:
        """The advisory lock's 64-bit key: the digest's first eight bytes, signed. Two intents
        sharing it only wait for each other; neither answers the other's record (`find` reads
        the intent's own fields)."""
        return int.from_bytes(self.digest[:8], "big", signed=True)


@dataclass(frozen=True)
class Done(Generic[T]):
    """The record an intent stands for, and whether an earlier call had already made it."""

    record: T
    already_done: bool


def intent_text(text: str) -> str:
    """A short structured text (a topic) as an intent compares it: case, accents, spacing and
    surrounding punctuation do not count."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(plain.casefold().split()).strip(" .,;:!?¡¿-")


def intent_since(company: Company, operation: str, now: datetime) -> datetime | None:
    """The start of `operation`'s window for `company` (records created since then stand for
    the intent), or None when the company turned that window off (0 minutes)."""
    minutes = getattr(company, WINDOW_FIELDS[operation])
    if not minutes:
        return None
    return now - timedelta(minutes=minutes)


def intent_lock(intent: Intent) -> None:
    """Hold `intent`'s lock until the current transaction ends: a concurrent call of the same
    intent waits here, bounded by the key engine's lock timeout (CONFLICT request_in_progress
    past it, the transaction marked for rollback). One statement: the bound is set before the
    wait and reset after it. Nothing on databases other than PostgreSQL."""
    if connection.vendor != "postgresql":
        return
    if transaction.get_autocommit():
        raise RuntimeError("an intent's lock is taken inside a transaction")
    timeout = f"{int(settings.GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS)}ms"
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(%s), set_config('lock_timeout', NULL, true) "
                "FROM (SELECT set_config('lock_timeout', %s, true)) AS bound",
                [intent.lock_key, timeout],
            )
    except OperationalError as exc:
        transaction.set_rollback(True)
        if getattr(exc.__cause__, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
            raise in_progress() from exc
        raise


def once_per_intent(
    intent: Intent, *, find: Callable[[], T | None], make: Callable[[], T]
) -> Done[T]:
    """The record `intent` stands for: the one `find` reads (made by an earlier call, with
    whatever key), or the one `make` makes now. One at a time per intent (`intent_lock`), in
    the caller's transaction (or one of its own), so 20 calls of one intent at once make one
    record and every one of them answers it."""
    with joined():
        intent_lock(intent)
        found = find()
        if found is not None:
            return Done(found, already_done=True)
        return Done(make(), already_done=False)
