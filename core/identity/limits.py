"""The limits on failed identifications: counted, checked and recorded in the database.

Each limit (Company's identify_* fields) is a sliding window, counted in the database so that
every process of every node sees the same counts: per conversation, per gateway credential
and per identifier value. The conversation's limit refuses that conversation; the
credential's and the identifier's put identification in verified mode instead (a code to the
customer's registered channel binds the conversation: core.identity.binding), so that nobody's
failures lock a customer out. A burst on one credential raises a security event.
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
from core.models import (
    Company,
    Contact,
    Conversation,
    GatewayCredential,
    SecurityEvent,
    VerificationChallenge,
)
from core.security import security_event_notify_on_commit
from core.sql import column, selected
from core.transactions import advisory_keys, int32

# Events that count towards the identification rate limits: a refused switch also tells the
# caller that the identifier exists, so it is an enumeration attempt as much as a miss.
_IDENTIFICATION_FAILURES = SecurityEvent.IDENTIFICATION_FAILURES

# The scopes a failure counts in, one limit each; and the conversation's identifications in
# verified mode, which count towards its own limit with its failures (each is a guess too).
_CONVERSATION, _CREDENTIAL, _IDENTIFIER, _PENDING = 1, 2, 3, 4


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


@dataclass(frozen=True)
class Standing:
    """The limits an attempt meets: the seconds until the conversation's own limit lets it
    try again, and until the credential's or the identifier value's does (None: not
    reached)."""

    conversation_wait: int | None
    shared_wait: int | None

    @property
    def verified_mode(self) -> bool:
        """Identification goes on by code only: a limit shared with other conversations
        stands (the credential's or the identifier's), not the conversation's own."""
        return self.conversation_wait is None and self.shared_wait is not None

    @property
    def longest_wait(self) -> int | None:
        return max((w for w in (self.conversation_wait, self.shared_wait) if w), default=None)


def _standing(
    recent: dict[int, list[datetime]], limits: dict[int, _Limit], now: datetime
) -> Standing:
    """The limits reached by these recent failures (`_recent_failures`), each with its wait."""
    waits: dict[int, int] = {}
    for scope, failures in recent.items():
        limit = limits[scope]
        if len(failures) >= limit.failures:
            # The oldest of the last `limit` failures must leave the window first.
            waits[scope] = max(1, int((failures[-1] + limit.window - now).total_seconds()) + 1)
    shared = [waits[s] for s in (_CREDENTIAL, _IDENTIFIER) if s in waits]
    return Standing(waits.get(_CONVERSATION), max(shared, default=None))


@dataclass
class Beside:
    """A read of at most one row sent in the statement of the limits (`attempt_standing`), so
    that what an identification looks up costs no statement of its own, and is read the same
    way whether the limits refuse it or not. `row` is its row (None: no row) once `read`; on
    the call's later runs, which reuse the limits decided on its first (core.durable), it is
    not read."""

    sql: str
    params: list[Any]
    read: bool = False
    row: tuple | None = None


def attempt_standing(attempt: Attempt, now: datetime, *, beside: Beside | None = None) -> Standing:
    """Which limits this attempt meets, read in one statement (with `beside`, if given).
    Decided once per call: the call's runs after its failure is recorded (core.durable) must
    not count that failure against the attempt that made it."""
    limits = _limits(attempt.conversation.company)

    def decide() -> Standing:
        return _standing(_recent_failures(attempt, limits, now, beside=beside), limits, now)

    return decided_once(decide)


class TooManyAttempts(PermissionRefused):
    """A limit on failed identifications stands: PERMISSION too_many_attempts."""


def too_many_attempts(retry_after: int) -> TooManyAttempts:
    """The refusal at a limit: one answer for every limit, whether the identifier exists or
    not, so that it tells nothing."""
    return TooManyAttempts(
        _(
            "Hubo demasiados intentos de identificación. Por seguridad, espere un poco antes "
            "de volver a intentarlo."
        ),
        code="too_many_attempts",
        retry_after_seconds=retry_after,
    )


class VerifiedModeStands(Exception):
    """A limit shared with other conversations was reached while a failure was being recorded
    (failures arriving at once): the caller answers in verified mode. Not counted."""


def refuse_when_too_many_failures(attempt: Attempt, now: datetime) -> None:
    """TooManyAttempts when any limit stands: for guesses that have no verified mode (an
    identifier given to a tool, another customer named by an identified conversation)."""
    retry_after = attempt_standing(attempt, now).longest_wait
    if retry_after is not None:
        raise too_many_attempts(retry_after)


def _recent_failures(
    attempt: Attempt, limits: dict[int, _Limit], now: datetime, *, beside: Beside | None = None
) -> dict[int, list[datetime]]:
    """When the attempt's latest failures happened, per limit, newest first, at most as many
    as each limit allows: the conversation's, the credential's and the identifier values'.

    The conversation's count includes its identifications in verified mode (its codes of
    purpose identification), which are guesses as much as its failures are.

    One statement for them all, as every identification asks: SQL built from the model's
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
        conversation.pk,
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
    found: dict[int, list[datetime]] = {
        _CONVERSATION: [],
        _CREDENTIAL: [],
        _IDENTIFIER: [],
        _PENDING: [],
    }
    if beside is not None:
        # Every failure's row carries the row beside, or one row does with no failure.
        sql = (
            f"SELECT failures.*, beside.* FROM (SELECT 1) AS one "
            f"LEFT JOIN ({sql}) AS failures ON 1 = 1 LEFT JOIN ({beside.sql}) AS beside ON 1 = 1"
        )
        params += beside.params
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    for scope, created, *besides in rows:
        if scope is not None:
            found[scope].append(created_at.values([created])[0])
        if beside is not None:
            beside.read = True
            beside.row = None if besides[0] is None else tuple(besides)
    found[_CONVERSATION] += found.pop(_PENDING)
    for failures in found.values():
        failures.sort(reverse=True)
    del found[_CONVERSATION][limits[_CONVERSATION].failures :]
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

    challenges = connection.ops.quote_name(VerificationChallenge._meta.db_table)
    challenge_created_at = column(VerificationChallenge, "created_at")
    identification = VerificationChallenge.Purpose.IDENTIFICATION
    assert identification.isidentifier()
    branches = [
        branch(
            _CONVERSATION,
            f"{column(SecurityEvent, 'company')} = %s "
            f"AND {column(SecurityEvent, 'conversation_key')} = %s",
        ),
        (
            f"SELECT {_PENDING} AS scope, {challenges}.{challenge_created_at} FROM {challenges} "
            f"WHERE {column(VerificationChallenge, 'conversation')} = %s "
            f"AND {column(VerificationChallenge, 'purpose')} = '{identification}' "
            f"AND {challenge_created_at} > %s ORDER BY {challenge_created_at} DESC LIMIT %s"
        ),
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
    verified_mode: bool = False,
) -> None:
    """Record a failed identification, durably (the call's rollback keeps it), and raise the
    credential's burst event when this failure reaches its limit.

    Checked again and written in one transaction that waits for the others of the same
    credential and identifier values (PostgreSQL's advisory locks; SQLite has one writer), so
    failures arriving at once from many conversations cannot pass a limit together: one that
    finds a limit reached meanwhile is not counted, and is answered as limited
    (TooManyAttempts), or, with `verified_mode` when only a limit shared with other
    conversations stands, raises VerifiedModeStands for the caller to answer in that mode.
    """
    conversation = attempt.conversation
    company = conversation.company
    limits = _limits(company)

    def record() -> Standing | None:
        _serialise_failures(attempt)
        recent = _recent_failures(attempt, limits, now)
        standing = _standing(recent, limits, now)
        if standing.longest_wait is not None:
            return standing
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

    standing = durably(record)
    if standing is None:
        return
    if not verified_mode:
        raise too_many_attempts(standing.longest_wait or 1)
    if standing.conversation_wait is not None:
        raise too_many_attempts(standing.conversation_wait)
    raise VerifiedModeStands()


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
