"""The one idempotency engine, shared by the MCP endpoint, the REST tool mirror and the DRF API
(through the package's front door, core.idempotency).

Order (seed 1 §1): the key is looked up before any guard; a stored success is replayed as it
was; another request under the same key is a conflict. Otherwise the record is inserted and
the effect runs in one transaction, so they commit together or not at all, and only successes
are ever stored. A concurrent duplicate blocks on the unique index until the first commits,
then replays its answer; the wait is bounded (CONFLICT request_in_progress past it).
"""

import contextlib
import dataclasses
import functools
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import rfc8785
from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import DatabaseError, IntegrityError, OperationalError, connection
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.deferred import DeferredQueue
from core.durable import keeping_evidence
from core.errors import Conflict, ValidationFailed
from core.metrics import (
    IDEMPOTENCY_CONFLICT,
    IDEMPOTENCY_EXECUTED,
    IDEMPOTENCY_EXPIRED,
    IDEMPOTENCY_IN_PROGRESS,
    IDEMPOTENCY_JOINED,
    IDEMPOTENCY_REPLAYED,
)
from core.models import Company, IdempotencyRecord
from core.sql import Statement, column, execute_all, insert_parts, table, writes_kept

HTTP_KEY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
MAX_KEY_LENGTH = 255
_LOCK_NOT_AVAILABLE = "55P03"


@dataclass(frozen=True)
class IdempotentResult:
    """A success, first-hand or replayed. `text` is the exact JSON text stored for replays."""

    body: dict[str, Any]
    status: int
    replayed: bool
    text: str


class _AlreadyRecorded(Exception):
    """Another transaction committed the same key while we waited on the unique index."""


# RFC 8785 numbers are IEEE-754 doubles: integers beyond this have no canonical form.
_SAFE_INTEGER = 2**53 - 1


def _written_alike(value: Any) -> bool:
    """Whether json.dumps (sorted keys, compact, UTF-8 kept) writes `value` as RFC 8785 does.

    It does for null, booleans, strings (both escape exactly `"`, `\\` and the control
    characters, with the same short forms and lower-case \\u00xx), integers RFC 8785 accepts,
    and arrays and objects of those whose keys are ASCII. It does not for floats (1e16 is
    "1e+16" in Python, "10000000000000000" in RFC 8785), nor for keys beyond ASCII, which
    RFC 8785 sorts by UTF-16 code units and Python by code points. Exact types only, so a
    subclass with its own notion of JSON goes the reference way.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return -_SAFE_INTEGER <= value <= _SAFE_INTEGER
    if kind is dict:
        return all(
            type(key) is str and key.isascii() and _written_alike(item)
            for key, item in value.items()
        )
    if kind is list:
        return all(_written_alike(item) for item in value)
    return False


def canonical_json(value: Any) -> bytes:
    """RFC 8785 (JCS) canonical JSON: sorted keys, no whitespace, canonical numbers.

    Tool requests are mostly strings, integers and flags, which the standard library's C
    encoder writes byte for byte as RFC 8785 does at a fraction of the pure-Python reference's
    CPU; anything else (floats, non-ASCII keys, a lone surrogate, which UTF-8 cannot encode)
    goes to the reference implementation.
    """
    if _written_alike(value):
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        with contextlib.suppress(UnicodeEncodeError):
            return text.encode()
    try:
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, UnicodeEncodeError) as exc:
        # Integers beyond IEEE-754 doubles, NaN, non-JSON values or a key with a lone
        # surrogate (which UTF-16 ordering cannot sort) have no canonical form.
        raise ValidationFailed(
            _("Falta algún dato o alguno no es válido."), code="invalid_arguments"
        ) from exc


def request_fingerprint(operation: str, request: Any) -> str:
    """SHA-256 of the canonical JSON of the operation and its request: key order and spacing
    do not count; values, array order and null-versus-omitted do."""
    return hashlib.sha256(canonical_json({"operation": operation, "request": request})).hexdigest()


def check_http_key(key: str | None) -> str:
    """Validate an Idempotency-Key header value (seed 2): 422 invalid_idempotency_key."""
    if key is None:
        raise ValidationFailed(
            _("Falta la clave de idempotencia de esta operación."),
            code="missing_idempotency_key",
        )
    if not HTTP_KEY_PATTERN.fullmatch(key):  # `$` alone would let a final newline through
        raise ValidationFailed(
            _("La clave de idempotencia no tiene un formato válido."),
            code="invalid_idempotency_key",
        )
    return key


def check_gateway_key(key: Any) -> str:
    """Validate the Gateway's com.asixto/idempotencyKey: a non-empty string, used as given."""
    if key is None:
        raise ValidationFailed(
            _("Falta la clave de idempotencia de esta operación."),
            code="missing_idempotency_key",
        )
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_LENGTH or "\x00" in key:
        raise ValidationFailed(
            _("La clave de idempotencia no tiene un formato válido."),
            code="invalid_idempotency_key",
        )
    return key


def in_progress() -> Conflict:
    return Conflict(
        _("Esa operación todavía se está procesando. Inténtelo de nuevo en unos segundos."),
        code="request_in_progress",
        retry_after_seconds=settings.GARANTE_IDEMPOTENCY_RETRY_AFTER_SECONDS,
    )


def response_text(body: dict[str, Any]) -> str:
    """The JSON text a success is stored and answered as (compact, UTF-8 kept)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), cls=DjangoJSONEncoder)


@dataclass(frozen=True, slots=True)
class _StoredRecord:
    """The columns of a record the engine decides on, in the order the key lookup reads them."""

    id: int
    operation: str
    fingerprint: str
    response: str | None
    status_code: int
    replay_until: datetime
    expires_at: datetime


@functools.cache
def _lookup_statement() -> str:
    """The key lookup's SQL, built once from the model's metadata."""
    columns = ", ".join(
        column(IdempotencyRecord, field.name) for field in dataclasses.fields(_StoredRecord)
    )
    return (
        f"SELECT {columns} FROM {table(IdempotencyRecord)} "
        f"WHERE {column(IdempotencyRecord, 'company')} = %s "
        f"AND {column(IdempotencyRecord, 'key')} = %s"
    )


def _aware(value: datetime) -> datetime:
    """A datetime as the ORM reads it: SQLite's driver gives Django's stored UTC naive."""
    return timezone.make_aware(value, UTC) if timezone.is_naive(value) else value


def _lookup(company: Company, key: str) -> _StoredRecord | None:
    """The record of (company, key). The engine's hottest read, run by every write and every
    replay: one index probe through a plain cursor, for only the columns the engine decides on,
    and no model instance (through a raw queryset, resolving its columns and building the
    instance cost about as much CPU as the statement itself). Its columns are integers, text
    and two datetimes, which only SQLite's need converting."""
    with connection.cursor() as cursor:
        cursor.execute(_lookup_statement(), [company.pk, key])
        row = cursor.fetchone()
    if row is None:
        return None
    pk, operation, fingerprint, response, status, replay_until, expires_at = row
    return _StoredRecord(
        pk, operation, fingerprint, response, status, _aware(replay_until), _aware(expires_at)
    )


def _replay(
    record: _StoredRecord, operation: str, fingerprint: str, now: datetime, *, joined: bool
) -> IdempotentResult:
    """The stored answer of `record`, counted (core.metrics) as a replay, or as a join when
    this request waited for the twin that stored it; or the conflict it is."""
    if record.operation != operation or record.fingerprint != fingerprint:
        IDEMPOTENCY_CONFLICT.inc()
        raise Conflict(
            _("Esa clave ya se usó para otra operación con datos distintos."),
            code="idempotency_conflict",
        )
    if record.response is None or record.replay_until <= now:
        IDEMPOTENCY_EXPIRED.inc()
        raise Conflict(
            _(
                "Esa operación ya se hizo hace tiempo y su resultado ya no está disponible. "
                "Consulte su estado antes de pedirla de nuevo."
            ),
            code="idempotency_expired",
            http_status=410,
        )
    _count_replay(record, now)
    (IDEMPOTENCY_JOINED if joined else IDEMPOTENCY_REPLAYED).inc()
    return IdempotentResult(
        body=json.loads(record.response),
        status=record.status_code,
        replayed=True,
        text=record.response,
    )


def _count_replay(record: _StoredRecord, now: datetime) -> None:
    """Bookkeeping for the admin, written off the request path (core.deferred): a lost
    count after a crash harms nobody, and the replay answers without another statement."""
    _replay_counts.add((record.id, now))


def _write_replay_counts(replays: list[tuple[int, datetime]]) -> None:
    counts: dict[int, tuple[int, datetime]] = {}
    for pk, at in replays:
        seen, last = counts.get(pk, (0, at))
        counts[pk] = (seen + 1, max(last, at))
    for pk, (seen, last) in sorted(counts.items()):  # in key order: no deadlock between batches
        IdempotencyRecord.objects.filter(pk=pk).update(
            replay_count=F("replay_count") + seen, last_replayed_at=last
        )


_replay_counts = DeferredQueue("idempotency replay counts", _write_replay_counts)


def _lock_timeout_value() -> str:
    return f"{int(settings.GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS)}ms"


def _is_lock_wait_exceeded(exc: OperationalError) -> bool:
    if getattr(exc.__cause__, "sqlstate", None) == _LOCK_NOT_AVAILABLE:
        return True
    return connection.vendor == "sqlite" and "database is locked" in str(exc)


def _claim(
    *,
    company: Company,
    key: str,
    operation: str,
    fingerprint: str,
    now: datetime,
    forgotten: _StoredRecord | None,
) -> int:
    """Insert the record in the current transaction and return its id; wait (bounded) for a
    concurrent twin.

    No savepoint: a unique violation (the twin committed) leaves `idempotent_execute`'s atomic
    block, which rolls the whole claim back, to its own savepoint when a caller's transaction
    encloses it; nothing in this transaction is worth keeping once the key is taken.
    """
    if forgotten is not None:
        # Past its tombstone period but not purged yet: the key starts a new operation. A twin
        # may be deleting it too; waiting on its row lock is waiting on the twin, so bounded.
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT set_config('lock_timeout', %s, true)", [_lock_timeout_value()]
                )
        IdempotencyRecord.objects.filter(pk=forgotten.id, expires_at__lte=now).delete()
    replay_until = now + settings.GARANTE_IDEMPOTENCY_REPLAY_WINDOW
    record = IdempotencyRecord(
        company=company,
        key=key,
        operation=operation,
        fingerprint=fingerprint,
        created_at=now,
        replay_until=replay_until,
        expires_at=replay_until + settings.GARANTE_IDEMPOTENCY_TOMBSTONE_PERIOD,
    )
    try:
        if connection.vendor != "postgresql":
            # SQLite serialises writers at BEGIN IMMEDIATE, bounded by its busy timeout.
            record.save(force_insert=True)
            return record.pk
        return _insert_bounded(record)
    except IntegrityError:
        raise _AlreadyRecorded from None


def _insert_bounded(record: IdempotencyRecord) -> int:
    """INSERT the record in one statement that bounds only its own wait on the unique index.

    `set_config(..., true)` is SET LOCAL as a function: the subquery sets lock_timeout before
    the row reaches the index (where a twin's uncommitted insert makes us wait), and RETURNING,
    evaluated once the row is in the index, resets it (NULL is DEFAULT), so the effect's own
    locks are not ours to bound. Three round trips (SET, INSERT, SET) become one.
    """
    insert = insert_parts([record])
    sql = (
        f"INSERT INTO {insert.table} {insert.columns} SELECT {insert.row} "
        "FROM (SELECT set_config('lock_timeout', %s, true)) AS bound "
        f"RETURNING {column(IdempotencyRecord, 'id')}, set_config('lock_timeout', NULL, true)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*insert.params, _lock_timeout_value()])
        return cursor.fetchone()[0]


@functools.cache
def _store_statement() -> str:
    """The UPDATE that stores an answer, built once from the model's metadata."""
    return (
        f"UPDATE {table(IdempotencyRecord)} SET {column(IdempotencyRecord, 'response')} = %s, "
        f"{column(IdempotencyRecord, 'status_code')} = %s "
        f"WHERE {column(IdempotencyRecord, 'id')} = %s"
    )


def _store(record_id: int, text: str, status: int, writes: Sequence[Statement] = ()) -> None:
    """Store the answer on the claimed record, in the effect's transaction: the same UPDATE as
    `.filter(pk=...).update(...)`, without compiling it on every first write (the ORM's update
    took about 2.5 times the CPU of this one). Text and an integer, which the driver takes as
    they are. The effect's `writes` go in the same round trip (core.sql.execute_all)."""
    execute_all([*writes, Statement(_store_statement(), [text, status, record_id])])


def idempotent_execute(
    *,
    company: Company,
    key: str,
    operation: str,
    request: Any,
    effect: Callable[[], tuple[dict[str, Any], int]],
) -> IdempotentResult:
    """Run `effect` at most once per (company, key); replay its stored success otherwise.

    `request` is the validated request (JSON-compatible) whose fingerprint guards the key.
    `effect` runs inside this function's transaction, after the record is inserted, and
    returns (body, status); the writes it keeps (core.sql.send_or_keep) go with the stored
    answer, in one round trip. It raises to fail: then nothing is stored, its writes are
    rolled back, and the same key may be retried.
    """
    fingerprint = request_fingerprint(operation, request)
    now = timezone.now()
    record = _lookup(company, key)
    if record is not None and record.expires_at > now:
        return _replay(record, operation, fingerprint, now, joined=False)
    claimed = committing = False

    def execute() -> tuple[str, int]:
        # Run again from the claim when the effect commits evidence first (core.durable).
        nonlocal claimed, committing
        claimed = False
        record_id = _claim(
            company=company,
            key=key,
            operation=operation,
            fingerprint=fingerprint,
            now=now,
            forgotten=record,
        )
        claimed = True
        with writes_kept() as kept:
            body, status = effect()
        text = response_text(body)
        _store(record_id, text, status, kept)
        # Past here only the commit: a failure may come after the effect became durable.
        committing = True
        return text, status

    try:
        text, status = keeping_evidence(execute)
    except _AlreadyRecorded:
        record = _lookup(company, key)
        if record is None:  # purged in between: vanishingly rare; let the caller retry
            IDEMPOTENCY_IN_PROGRESS.inc()
            raise in_progress() from None
        return _replay(record, operation, fingerprint, timezone.now(), joined=True)
    except OperationalError as exc:
        # Waiting for the twin's transaction (PostgreSQL lock_timeout at the insert, SQLite's
        # busy timeout at BEGIN IMMEDIATE) is "still in progress"; later failures are SYSTEM.
        if not claimed and _is_lock_wait_exceeded(exc):
            IDEMPOTENCY_IN_PROGRESS.inc()
            raise in_progress() from exc
        setattr(exc, _COMMITTING, committing)
        raise
    except DatabaseError as exc:
        setattr(exc, _COMMITTING, committing)
        raise
    IDEMPOTENCY_EXECUTED.inc()
    # Answer the stored text's reading, so the first answer and every replay are identical.
    return IdempotentResult(body=json.loads(text), status=status, replayed=False, text=text)


# Set on a database failure out of `idempotent_execute`: whether its transaction was committing.
_COMMITTING = "garante_while_committing"


def effect_may_have_happened(failure: BaseException) -> bool:
    """Whether `failure`, a database error out of `idempotent_execute`, came while the effect's
    transaction was committing, so that the effect may be durable. Either way the same key
    is safe to retry: a committed effect is replayed, a rolled-back one runs."""
    return getattr(failure, _COMMITTING, False)


def idempotency_records_purge(*, now: datetime | None = None) -> tuple[int, int]:
    """Drop responses past their replay window (keeping tombstones) and forget expired keys.

    Returns (tombstoned, deleted).
    """
    now = now or timezone.now()
    tombstoned = IdempotencyRecord.objects.filter(
        replay_until__lte=now, response__isnull=False
    ).update(response=None)
    deleted, _ = IdempotencyRecord.objects.filter(expires_at__lte=now).delete()
    return tombstoned, deleted
