"""Above the key: one effect per intent, whatever the idempotency keys.

A key makes a *retry* safe. A model that *re-plans* (after a timeout, a lost answer, a restart)
calls the same tool again with a new key, or other MCP clients mint a key per call, so the key
engine sees a new request. Each write tool therefore declares its *intent*: the structured
fields that make two calls the same request (for a booking: the customer and the slot), never
free text. The intent always holds the company and the customer: two customers who ask for the
same thing are two requests (seed 1 §1).

`once_per_intent` is the one mechanism. Inside the call's transaction, the calls of one intent
run one at a time, and each looks for what the intent already made (`find`, the domain's
selector) and answers it, `already_done`; only when there is none does it `make`. Two things
make that hold, and neither needs a statement of its own where the call already sends one
that can carry it:

- **A lock every call of the intent takes, held until its transaction ends**: by default
  PostgreSQL's transaction-scoped advisory lock on the intent's key (`intent_lock`, one
  statement; its wait bounded like the key's, CONFLICT request_in_progress past it). It can
  ride on the statement that reads the customer (`intent_lock_columns`: the tool API's read
  of the conversation, for a tool whose intent is its customer alone), or be a row lock the
  write takes anyway (a booking locks the customer's row before its check): the caller then
  says the intent is `held`.
- **A look that starts after that lock**: in READ COMMITTED each statement sees what was
  committed before it began, so the first call's record, committed before the lock is
  granted to the next call, is visible to the next call's look only when the look is a later
  statement than the lock. By default the look is `find`, before `make`. A `make` may look
  itself, in the statement that writes (`make_looks`: an INSERT ... WHERE NOT EXISTS, a
  booking's check): it then makes nothing and returns None when the intent's record stands,
  and `find` reads that record only then. So a first write pays for the intent with no
  statement of its own.

On SQLite (the demo) write transactions are serialised at BEGIN IMMEDIATE, which does the
same as the lock.

The windows a company sets (how long a quote, a sales request or a case stands as "the same
request") are columns of core.models.Company, read by `intent_since`. docs/tools.md, "Above the
key", lists each tool's intent and window.
"""

import contextlib
import hashlib
import unicodedata
from collections.abc import Callable, Iterator
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
    def lock_base(self) -> int:
        """The intent without its customer, as 64 signed bits: the first eight bytes of the
        SHA-256 of the operation, the company and the fields in canonical JSON (RFC 8785, as
        the key's fingerprint)."""
        return lock_base(self.operation, self.company_id, self.fields)

    @property
    def lock_key(self) -> int:
        """The advisory lock's 64-bit key: `lock_base` XOR the customer's id, so that a
        statement that reads the customer's id computes it too (`intent_lock_columns`), and
        two customers' keys for one request always differ. Two intents sharing a key only
        wait for each other; neither answers the other's record (`find` reads the intent's
        own fields)."""
        return self.lock_base ^ self.contact_id


def lock_base(operation: str, company_id: int, fields: dict[str, Any]) -> int:
    """`Intent.lock_base` of an intent of `operation` at `company_id` with `fields`, whoever
    its customer."""
    digest = hashlib.sha256(
        canonical_json({"operation": operation, "company": company_id, "fields": fields})
    ).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


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


# The bound on a wait for an intent's lock: a FROM item of the statement that takes it, so that
# it is set before the select list waits, and reset (NULL is DEFAULT) by the select list after.
INTENT_BOUND = "(SELECT set_config('lock_timeout', %s, true)) AS intent_bound"


def intent_lock_columns(contact_column: str) -> str:
    """Select-list items that take the lock of an intent for the customer whose id
    `contact_column` reads (nothing where it is NULL), in a statement with `INTENT_BOUND` in
    its FROM; then reset the bound. Parameters: the intent's `lock_base`, then
    `intent_wait_bound()` for INTENT_BOUND. Call the statement in `intent_wait()`."""
    return (
        f"pg_advisory_xact_lock(%s::bigint # {contact_column}), "
        "set_config('lock_timeout', NULL, true)"
    )


def intent_wait_bound() -> str:
    """INTENT_BOUND's parameter: the key engine's lock timeout."""
    return f"{int(settings.GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS)}ms"


@contextlib.contextmanager
def intent_wait() -> Iterator[None]:
    """Around a statement that waits for an intent's lock: past the bound, CONFLICT
    request_in_progress (retryable), the transaction marked for rollback."""
    try:
        yield
    except OperationalError as exc:
        transaction.set_rollback(True)
        if getattr(exc.__cause__, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
            raise in_progress() from exc
        raise


def intent_lock(intent: Intent) -> None:
    """Hold `intent`'s lock until the current transaction ends: a concurrent call of the same
    intent waits here, bounded by the key engine's lock timeout (CONFLICT request_in_progress
    past it, the transaction marked for rollback). One statement: the bound is set before the
    wait and reset after it. Nothing on databases other than PostgreSQL."""
    if connection.vendor != "postgresql":
        return
    if transaction.get_autocommit():
        raise RuntimeError("an intent's lock is taken inside a transaction")
    with intent_wait(), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {intent_lock_columns('%s::bigint')} FROM {INTENT_BOUND}",
            [intent.lock_base, intent.contact_id, intent_wait_bound()],
        )


def once_per_intent(
    intent: Intent,
    *,
    find: Callable[[], T | None],
    make: Callable[[], T | None],
    held: bool = False,
    make_looks: bool = False,
) -> Done[T]:
    """The record `intent` stands for: the one `find` reads (made by an earlier call, with
    whatever key), or the one `make` makes now. One at a time per intent, in the caller's
    transaction (or one of its own), so 20 calls of one intent at once make one record and
    every one of them answers it.

    The lock is `intent_lock`'s, unless `held`: every call of the intent already takes,
    before its look, a lock that makes them run one at a time (the intent's own, taken by the
    statement that read the customer, `intent_lock_columns`; or a row lock `make` takes
    before it looks, as a booking locks the customer's row). The look is `find`, before
    `make`, unless `make_looks`: `make` looks itself in a statement after the lock, and
    returns None, having made nothing, when the intent's record stands; `find` then reads it."""
    with joined():
        if not held:
            intent_lock(intent)
        if not make_looks:
            found = find()
            if found is not None:
                return Done(found, already_done=True)
            return Done(_made(intent, make), already_done=False)
        # A record `make` saw may be gone by `find` (staff cancelled or resolved it in
        # between: they do not take the intent's lock); the intent then stands no more.
        for _attempt in range(2):
            made = make()
            if made is not None:
                return Done(made, already_done=False)
            found = find()
            if found is not None:
                return Done(found, already_done=True)
        raise RuntimeError(f"{intent.operation}: make sees the intent's record, find does not")


def _made(intent: Intent, make: Callable[[], T | None]) -> T:
    made = make()
    if made is None:
        raise RuntimeError(f"{intent.operation}: make made nothing without make_looks")
    return made
