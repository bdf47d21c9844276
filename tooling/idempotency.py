"""The one idempotency engine, shared by the MCP endpoint, the REST tool mirror and the DRF API.

Order (seed 1 §1): the key is looked up before any guard; a stored success is replayed as it
was; another request under the same key is a conflict. Otherwise the record is inserted and
the effect runs in one transaction, so they commit together or not at all, and only successes
are ever stored. A concurrent duplicate blocks on the unique index until the first commits,
then replays its answer; the wait is bounded (CONFLICT request_in_progress past it).
"""

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import rfc8785
from django.conf import settings
from django.db import IntegrityError, OperationalError, connection, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.errors import Conflict, ValidationFailed
from core.models import Company
from tooling.models import IdempotencyRecord

HTTP_KEY_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
MAX_KEY_LENGTH = 255


@dataclass(frozen=True)
class IdempotentResult:
    body: dict[str, Any]
    status: int
    replayed: bool


class _AlreadyRecorded(Exception):
    """Another transaction committed the same key while we waited on the unique index."""


def request_fingerprint(operation: str, request: Any) -> str:
    """SHA-256 of the RFC 8785 canonical JSON: key order and spacing do not count; values,
    array order and null-versus-omitted do."""
    canonical = rfc8785.dumps({"operation": operation, "request": request})
    return hashlib.sha256(canonical).hexdigest()


def check_http_key(key: str | None) -> str:
    """Validate an Idempotency-Key header value (seed 2): 422 invalid_idempotency_key."""
    if key is None or not HTTP_KEY_PATTERN.match(key):
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
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH:
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


def _lookup(company: Company, key: str) -> IdempotencyRecord | None:
    return IdempotencyRecord.objects.filter(company=company, key=key).first()


def _replay(record: IdempotencyRecord, operation: str, fingerprint: str) -> IdempotentResult:
    if record.operation != operation or record.fingerprint != fingerprint:
        raise Conflict(
            _("Esa clave ya se usó para otra operación con datos distintos."),
            code="idempotency_conflict",
        )
    now = timezone.now()
    if record.response is None or record.replay_until <= now:
        raise Conflict(
            _("Esa operación ya se hizo hace tiempo y su resultado ya no está disponible."),
            code="idempotency_expired",
            http_status=410,
        )
    IdempotencyRecord.objects.filter(pk=record.pk).update(
        replay_count=F("replay_count") + 1, last_replayed_at=now
    )
    return IdempotentResult(body=record.response, status=record.status_code, replayed=True)


def _set_lock_timeout(milliseconds: int | None) -> None:
    if connection.vendor != "postgresql":
        return  # SQLite serialises writers at BEGIN IMMEDIATE, bounded by its busy timeout.
    with connection.cursor() as cursor:
        if milliseconds is None:
            cursor.execute("SET LOCAL lock_timeout TO DEFAULT")
        else:
            cursor.execute(f"SET LOCAL lock_timeout = '{int(milliseconds)}ms'")


def _is_lock_wait_exceeded(exc: OperationalError) -> bool:
    cause = exc.__cause__
    if getattr(cause, "sqlstate", None) == "55P03":  # lock_not_available
        return True
    return "database is locked" in str(exc)


def idempotent_execute(
    *,
    company: Company,
    key: str,
    operation: str,
    request: Any,
    effect: Callable[[], tuple[dict[str, Any], int]],
) -> IdempotentResult:
    """Run `effect` at most once per (company, key); replay its stored success otherwise.

    `effect` runs inside this function's transaction and returns (body, status). It raises
    to fail: then nothing is stored and the same key may be retried.
    """
    fingerprint = request_fingerprint(operation, request)
    record = _lookup(company, key)
    if record is not None:
        return _replay(record, operation, fingerprint)
    now = timezone.now()
    replay_until = now + settings.GARANTE_IDEMPOTENCY_REPLAY_WINDOW
    try:
        with transaction.atomic():
            _set_lock_timeout(settings.GARANTE_IDEMPOTENCY_LOCK_TIMEOUT_MS)
            try:
                with transaction.atomic():
                    record = IdempotencyRecord.objects.create(
                        company=company,
                        key=key,
                        operation=operation,
                        fingerprint=fingerprint,
                        created_at=now,
                        replay_until=replay_until,
                        expires_at=replay_until + settings.GARANTE_IDEMPOTENCY_TOMBSTONE_PERIOD,
                    )
            except IntegrityError:
                raise _AlreadyRecorded from None
            _set_lock_timeout(None)
            body, status = effect()
            record.response = body
            record.status_code = status
            record.save(update_fields=["response", "status_code"])
    except _AlreadyRecorded:
        record = _lookup(company, key)
        if record is None:  # purged in between: vanishingly rare; let the caller retry
            raise in_progress() from None
        return _replay(record, operation, fingerprint)
    except OperationalError as exc:
        if _is_lock_wait_exceeded(exc):
            raise in_progress() from exc
        raise
    return IdempotentResult(body=body, status=status, replayed=False)


def idempotency_records_purge(*, now: Any = None) -> tuple[int, int]:
    """Drop responses past their replay window (keeping tombstones) and forget expired keys.

    Returns (tombstoned, deleted).
    """
    now = now or timezone.now()
    tombstoned = IdempotencyRecord.objects.filter(
        replay_until__lte=now, response__isnull=False
    ).update(response=None)
    deleted, _ = IdempotencyRecord.objects.filter(expires_at__lte=now).delete()
    return tombstoned, deleted
