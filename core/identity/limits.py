"""The limits on failed identifications: counted, checked and recorded in the database.

Each limit (Company's identify_* fields) is a sliding window, counted in the database so that
every process of every node sees the same counts: per conversation, per gateway credential
and per identifier value. A burst on one credential raises a security event.
"""

import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from django.db import connection
from django.utils.crypto import salted_hmac
from django.utils.translation import gettext_lazy as _

from core.durable import decided_once, durably
from core.errors import PermissionRefused
from core.models import Company, Contact, Conversation, GatewayCredential, SecurityEvent
from core.security import security_event_notify_on_commit
from core.sql import column, selected
from core.transactions import advisory_keys, int32

# Events that count towards the identification rate limits: a refused switch also tells the
# caller that the identifier exists, so it is an enumeration attempt as much as a miss.
_IDENTIFICATION_FAILURES = SecurityEvent.IDENTIFICATION_FAILURES

# The scopes a failure counts in, one limit each.
_CONVERSATION, _CREDENTIAL, _IDENTIFIER = 1, 2, 3


@dataclass(frozen=True)
class _Limit:
    failures: int
    window: timedelta


def _limits(company: Company) -> dict[int, _Limit]:
    return {
        _CONVERSATION: _Limit(
            company.identify_failures_per_conversation,
            timedelta(minutes=company.identify_conversation_window_minutes),
        ),
        _CREDENTIAL: _Limit(
            company.identify_failures_per_credential,
            timedelta(minutes=company.identify_credential_window_minutes),
        ),
        _IDENTIFIER: _Limit(
            company.identify_failures_per_identifier,
            timedelta(minutes=company.identify_identifier_window_minutes),
        ),
    }


def identifier_digest(*, company_id: int, value: str) -> str:
    """What a failure records of the identifier tried: an HMAC (keyed from SECRET_KEY) of its
    normalised value, enough to count the failures per value and never readable back."""
    return salted_hmac(
        "garante.identity.identifier", f"{company_id}:{value}", algorithm="sha256"
    ).hexdigest()


@dataclass(frozen=True)
class Attempt:
    """Who tries an identification, for the limits: the conversation, the gateway credential
    that authenticated the call (None outside the tool API), the identifier values tried."""

    conversation: Conversation
    credential_id: int | None
    digests: tuple[str, ...]

    @classmethod
    def of(cls, conversation: Conversation, values: list[str]) -> "Attempt":
        company = conversation.company
        digests = tuple(sorted({identifier_digest(company_id=company.pk, value=v) for v in values}))
        return cls(conversation, company.gateway_credential_id, digests)


def _retry_after(attempt: Attempt, now: datetime) -> int | None:
    """Seconds until this attempt may be made, or None if it may be made now: the longest
    wait of the limits (conversation, credential, identifier) it has reached."""
    limits = _limits(attempt.conversation.company)
    waits = []
    for scope, failures in _recent_failures(attempt, limits, now).items():
        limit = limits[scope]
        if len(failures) >= limit.failures:
            # The oldest of the last `limit` failures must leave the window first.
            waits.append(max(1, int((failures[-1] + limit.window - now).total_seconds()) + 1))
    return max(waits, default=None)


class TooManyAttempts(PermissionRefused):
    """A limit on failed identifications stands: PERMISSION too_many_attempts."""


def _too_many_attempts(retry_after: int) -> TooManyAttempts:
    # One answer for every limit, whether the identifier exists or not: it tells nothing.
    return TooManyAttempts(
        _(
            "Hubo demasiados intentos de identificación. Por seguridad, espere un poco antes "
            "de volver a intentarlo."
        ),
        code="too_many_attempts",
        retry_after_seconds=retry_after,
    )


def refuse_when_too_many_failures(attempt: Attempt, now: datetime) -> None:
    # Decided before the failure is recorded, once: the call's run after that record (see
    # core.durable) must not count its own failure against it.
    retry_after = decided_once(lambda: _retry_after(attempt, now))
    if retry_after is not None:
        raise _too_many_attempts(retry_after)


def _recent_failures(
    attempt: Attempt, limits: dict[int, _Limit], now: datetime
) -> dict[int, list[datetime]]:
    """When the attempt's latest failures happened, per limit, newest first, at most as many
    as each limit allows: the conversation's, the credential's and the identifier values'.

    One statement for the three, as every identification asks: SQL built from the model's
    metadata (core.sql), the ORM's compilation of it costing several times the query.
    """
    conversation = attempt.conversation
    created_at = selected(SecurityEvent, ["created_at"])
    (field,) = created_at.fields

    def since(scope: int) -> Any:
        # As the ORM sends it (text on SQLite).
        return field.get_db_prep_value(now - limits[scope].window, connection)

    params: list[Any] = [
        conversation.company_id,
        conversation.external_id,
        since(_CONVERSATION),
        limits[_CONVERSATION].failures,
    ]
    if attempt.credential_id is not None:
        params += [attempt.credential_id, since(_CREDENTIAL), limits[_CREDENTIAL].failures]
    if attempt.digests:
        params += [
            conversation.company_id,
            *attempt.digests,
            since(_IDENTIFIER),
            limits[_IDENTIFIER].failures,
        ]
    sql = _recent_failures_sql(
        connection.vendor, attempt.credential_id is not None, len(attempt.digests)
    )
    found: dict[int, list[datetime]] = {_CONVERSATION: [], _CREDENTIAL: [], _IDENTIFIER: []}
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for scope, *row in cursor.fetchall():
            found[scope].append(created_at.values(row)[0])
    for failures in found.values():
        failures.sort(reverse=True)
    return found


@cache
def _recent_failures_sql(vendor: str, with_credential: bool, digests: int) -> str:
    """The SQL of _recent_failures, built once per process and shape (`vendor` keys the
    quoting): one branch per limit, each its window's newest failures."""
    table = connection.ops.quote_name(SecurityEvent._meta.db_table)
    created_at = column(SecurityEvent, "created_at")
    # Literals, not parameters, so that PostgreSQL can use the partial indexes on these kinds
    # whatever plan it keeps for the prepared statement. Our own constants: no quoting needed.
    assert all(kind.isidentifier() for kind in _IDENTIFICATION_FAILURES)
    kinds = ", ".join(f"'{kind}'" for kind in _IDENTIFICATION_FAILURES)

    def branch(scope: int, where: str) -> str:
        return (
            f"SELECT {scope} AS scope, {selected(SecurityEvent, ['created_at']).columns} "
            f"FROM {table} WHERE {where} AND {column(SecurityEvent, 'kind')} IN ({kinds}) "
            f"AND {created_at} > %s ORDER BY {created_at} DESC LIMIT %s"
        )

    branches = [
        branch(
            _CONVERSATION,
            f"{column(SecurityEvent, 'company')} = %s "
            f"AND {column(SecurityEvent, 'conversation_key')} = %s",
        )
    ]
    if with_credential:
        branches.append(branch(_CREDENTIAL, f"{column(SecurityEvent, 'credential')} = %s"))
    if digests:
        placeholders = ", ".join(["%s"] * digests)
        branches.append(
            branch(
                _IDENTIFIER,
                f"{column(SecurityEvent, 'company')} = %s "
                f"AND {column(SecurityEvent, 'identifier_digest')} IN ({placeholders})",
            )
        )
    if vendor == "postgresql":
        return " UNION ALL ".join(f"({b})" for b in branches)
    # SQLite takes no parenthesised branch: each limited one is a subquery of its own.
    return " UNION ALL ".join(f"SELECT * FROM ({b})" for b in branches)


def failure_record(
    attempt: Attempt,
    now: datetime,
    *,
    kind: str,
    contact: Contact | None = None,
    claimed_contact: Contact | None = None,
    detail: dict[str, Any],
) -> None:
    """Record a failed identification, durably (the call's rollback keeps it), and raise the
    credential's burst event when this failure reaches its limit.

    Checked again and written in one transaction that waits for the others of the same
    credential and identifier values (PostgreSQL's advisory locks; SQLite has one writer), so
    failures arriving at once from many conversations cannot pass a limit together: one that
    finds a limit reached meanwhile is answered as limited (PermissionRefused) and not counted.
    """
    conversation = attempt.conversation
    company = conversation.company
    limits = _limits(company)

    def record() -> int | None:
        _serialise_failures(attempt)
        recent = _recent_failures(attempt, limits, now)
        waits = [
            max(1, int((failures[-1] + limits[scope].window - now).total_seconds()) + 1)
            for scope, failures in recent.items()
            if len(failures) >= limits[scope].failures
        ]
        if waits:
            return max(waits)
        SecurityEvent.objects.create(
            company_id=conversation.company_id,
            conversation_key=conversation.external_id,
            kind=kind,
            contact=contact,
            claimed_contact=claimed_contact,
            credential_id=attempt.credential_id,
            identifier_digest=attempt.digests[0] if attempt.digests else "",
            detail=detail,
        )
        # This failure reaches the credential's limit: a burst.
        reached = len(recent[_CREDENTIAL]) + 1 >= limits[_CREDENTIAL].failures
        if attempt.credential_id is not None and reached:
            _burst_record(attempt, limits[_CREDENTIAL], now)
        return None

    retry_after = durably(record)
    if retry_after is not None:
        raise _too_many_attempts(retry_after)


def _serialise_failures(attempt: Attempt) -> None:
    """Wait for the other failures of this credential and identifier values being recorded
    (PostgreSQL; SQLite runs one writer at a time). Always in the same order, the credential
    first and the values sorted, so two recordings never wait for each other in a circle."""
    if connection.vendor != "postgresql":
        return
    keys: list[int] = []
    if attempt.credential_id is not None:
        keys += advisory_keys(GatewayCredential, attempt.credential_id)
    for digest in attempt.digests:
        keys += _IDENTIFIER_LOCK_SPACE, int32(int(digest[:8], 16))
    if keys:
        locks = ", ".join(["pg_advisory_xact_lock(%s, %s)"] * (len(keys) // 2))
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {locks}", keys)


# The first key of an identifier value's advisory lock (the second is taken from its digest).
_IDENTIFIER_LOCK_SPACE = int32(zlib.crc32(b"garante.identity.identifier"))


def _burst_record(attempt: Attempt, limit: _Limit, now: datetime) -> None:
    """The security event of a burst of failures on one credential, and staff's email: once
    per burst, that is at most once per credential in the limit's window. Called while
    holding the credential's lock (`_serialise_failures`)."""
    already = SecurityEvent.objects.filter(
        credential_id=attempt.credential_id,
        kind=SecurityEvent.Kind.IDENTIFICATION_BURST,
        created_at__gt=now - limit.window,
    ).exists()
    if already:
        return
    event = SecurityEvent.objects.create(
        company_id=attempt.conversation.company_id,
        conversation_key=attempt.conversation.external_id,
        kind=SecurityEvent.Kind.IDENTIFICATION_BURST,
        credential_id=attempt.credential_id,
        detail={
            "failures": limit.failures,
            "window_minutes": int(limit.window.total_seconds() // 60),
        },
    )
    security_event_notify_on_commit(event_id=event.pk)
