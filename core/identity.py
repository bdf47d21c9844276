"""Who is talking: identification, ownership checks and step-up requirements (seed 1 §2).

The Gateway sends no authenticated end user. A conversation becomes bound to one contact by
`identify_contact`; every sensitive tool then takes that contact's identifier as a parameter
and calls `contact_for_conversation`, then `check_owner` on its target entity, and, when the
company's policy says so, `require_step_up`.
"""

import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone
from django.utils.crypto import salted_hmac
from django.utils.translation import gettext_lazy as _

from core.durable import durably
from core.errors import NotFound, PermissionRefused, ValidationFailed
from core.models import (
    Company,
    Contact,
    Conversation,
    GatewayCredential,
    SecurityEvent,
    StepUpPolicy,
)
from core.normalize import normalize_document, normalize_email, normalize_phone
from core.process_cache import ProcessCache
from core.security import security_event_notify_on_commit
from core.sql import column, selected, update_fields
from core.transactions import advisory_keys, int32, without_savepoint

IDENTIFIER_KINDS = ("document", "phone", "email")
_CONTACT_FIELD = {"document": "document_number", "phone": "phone", "email": "email"}

# Events after which a conversation's earlier verification no longer counts.
VERIFICATION_DROPPING_EVENTS = (
    SecurityEvent.Kind.IDENTITY_SWITCH,
    SecurityEvent.Kind.IDENTIFIER_MISMATCH,
)
# Events that count towards the identification rate limits: a refused switch also tells the
# caller that the identifier exists, so it is an enumeration attempt as much as a miss.
_IDENTIFICATION_FAILURES = SecurityEvent.IDENTIFICATION_FAILURES


# What a conversation knows of its identity, read again under the row lock.
_IDENTITY_FIELDS = (
    "contact_id",
    "identified_via",
    "identified_at",
    "verified_at",
    "verified_until",
)


@dataclass(frozen=True)
class Identifier:
    kind: str
    value: str


def normalize_identifier(kind: str, raw: str, country: str) -> Identifier:
    """One identifier of a known kind in its stored form (ValidationFailed if invalid)."""
    if kind == "document":
        return Identifier(kind, normalize_document(raw, country))
    if kind == "phone":
        return Identifier(kind, normalize_phone(raw, country))
    if kind == "email":
        return Identifier(kind, normalize_email(raw))
    raise ValidationFailed(_("Ese tipo de dato no sirve para identificarle."), code="invalid_kind")


def identifier_readings(raw: str, country: str) -> list[Identifier]:
    """Every way an identifier of unknown kind can be read ("600111222" may be a phone or a
    document number). ValidationFailed if it is none of them."""
    raw = (raw or "").strip()
    if "@" in raw:
        return [normalize_identifier("email", raw, country)]
    readings = []
    for kind in ("document", "phone"):
        try:
            readings.append(normalize_identifier(kind, raw, country))
        except ValidationFailed:
            continue
    if not readings:
        raise ValidationFailed(
            _("Necesito su documento, su teléfono o su correo tal como los tiene registrados."),
            code="invalid_identifier",
        )
    return readings


def _matching(readings: list[Identifier]) -> Q:
    query = Q(pk__in=[])
    for reading in readings:
        query |= Q(**{_CONTACT_FIELD[reading.kind]: reading.value})
    return query


def security_event_record(
    *,
    conversation: Conversation,
    kind: str,
    contact: Contact | None = None,
    claimed_contact: Contact | None = None,
    detail: dict[str, Any] | None = None,
) -> SecurityEvent:
    """Record a security event durably: it survives the rollback of the failing call."""
    return durably(
        lambda: SecurityEvent.objects.create(
            company_id=conversation.company_id,
            conversation_key=conversation.external_id,
            kind=kind,
            contact=contact,
            claimed_contact=claimed_contact,
            detail=detail or {},
        )
    )


def _drop_verification(conversation: Conversation) -> None:
    # The durable event already makes any earlier verification void (see
    # conversation_is_verified); clearing the fields keeps the row honest when this commits.
    Conversation.objects.filter(pk=conversation.pk).update(verified_until=None)
    conversation.verified_until = None


def conversation_is_verified(conversation: Conversation, *, now: datetime | None = None) -> bool:
    """Whether a step-up verification of this conversation holds right now."""
    now = now or timezone.now()
    if conversation.contact_id is None or conversation.verified_until is None:
        return False
    if conversation.verified_until <= now:
        return False
    return not SecurityEvent.objects.filter(
        company_id=conversation.company_id,
        conversation_key=conversation.external_id,
        kind__in=VERIFICATION_DROPPING_EVENTS,
        created_at__gte=conversation.verified_at
        or conversation.verified_until - settings.GARANTE_VERIFICATION_VALID_FOR,
    ).exists()


# The limits on failed identifications (Company's identify_* fields): each is a sliding window,
# counted in the database so that every process of every node sees the same counts.
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
class _Attempt:
    """Who tries an identification, for the limits: the conversation, the gateway credential
    that authenticated the call (None outside the tool API), the identifier values tried."""

    conversation: Conversation
    credential_id: int | None
    digests: tuple[str, ...]

    @classmethod
    def of(cls, conversation: Conversation, values: list[str]) -> "_Attempt":
        company = conversation.company
        digests = tuple(sorted({identifier_digest(company_id=company.pk, value=v) for v in values}))
        return cls(conversation, company.gateway_credential_id, digests)


def _retry_after(attempt: _Attempt, now: datetime) -> int | None:
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


def _too_many_attempts(retry_after: int) -> PermissionRefused:
    # One answer for every limit, whether the identifier exists or not: it tells nothing.
    return PermissionRefused(
        _(
            "Hubo demasiados intentos de identificación. Por seguridad, espere un poco antes "
            "de volver a intentarlo."
        ),
        code="too_many_attempts",
        retry_after_seconds=retry_after,
    )


def _refuse_when_too_many_failures(attempt: _Attempt, now: datetime) -> None:
    retry_after = _retry_after(attempt, now)
    if retry_after is not None:
        raise _too_many_attempts(retry_after)


def _recent_failures(
    attempt: _Attempt, limits: dict[int, _Limit], now: datetime
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


def _failure_record(
    attempt: _Attempt,
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


def _serialise_failures(attempt: _Attempt) -> None:
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


def _burst_record(attempt: _Attempt, limit: _Limit, now: datetime) -> None:
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


def _contact_with(*, company_id: int, identifier: Identifier) -> Contact | None:
    """The company's contact with this identifier: at most one, an identifier being unique in
    a company. SQL built from the model's metadata (core.sql), as every identification asks."""
    with connection.cursor() as cursor:
        cursor.execute(
            _contact_with_sql(connection.vendor, identifier.kind), [company_id, identifier.value]
        )
        row = cursor.fetchone()
    return None if row is None else selected(Contact).instance(row)


@cache
def _contact_with_sql(vendor: str, kind: str) -> str:
    """The SQL of _contact_with for one kind of identifier, built once per process."""
    table = connection.ops.quote_name(Contact._meta.db_table)
    return (
        f"SELECT {selected(Contact).columns} FROM {table} "
        f"WHERE {column(Contact, 'company')} = %s "
        f"AND {column(Contact, _CONTACT_FIELD[kind])} = %s LIMIT 1"
    )


def identify_contact(
    *, conversation: Conversation, kind: str, value: str, new_conversation: bool = False
) -> Contact:
    """Bind the conversation to the company's contact with this document, phone or email.

    NotFound if nobody has it; PermissionRefused if the conversation already identified as
    someone else (a SecurityEvent, and any verification is dropped) or, `too_many_attempts`
    with `retry_after_seconds`, if a limit on failed identifications stands: the
    conversation's, its gateway credential's (all its conversations) or the identifier
    value's (all conversations of the company), each a sliding window set per company.
    Failures are counted in the database, durably, so every app node sees them and the
    call's rollback does not erase them. A conversation naming its own identified customer
    again is never refused.

    `new_conversation`: the caller inserted the conversation in the transaction this runs in
    (ToolContext.conversation_is_new). Its row is then this transaction's until it ends and
    holds what was inserted, so it is not locked and read again.
    """
    # The one write a refusal follows, dropping the verification on an identity switch, is
    # meant to stand anyway.
    return without_savepoint(
        lambda: _identify_locked(
            conversation=conversation, kind=kind, value=value, new=new_conversation
        )
    )


def _identify_locked(*, conversation: Conversation, kind: str, value: str, new: bool) -> Contact:
    now = timezone.now()
    if not new:
        # Serialise identifications of one conversation so concurrent guesses are counted in
        # turn (a twin of a new one waits on its insert instead). FOR NO KEY UPDATE leaves
        # durable inserts referring to this row free to proceed.
        locked = Conversation.objects.select_for_update(no_key=True).get(pk=conversation.pk)
        for name in _IDENTITY_FIELDS:
            setattr(conversation, name, getattr(locked, name))
    identifier = normalize_identifier(kind, value, conversation.company.country)
    if conversation.contact_id is not None:
        own = conversation.contact
        if own is not None and getattr(own, _CONTACT_FIELD[kind]) == identifier.value:
            # The conversation's own customer again: no guess, so no limit stands in the way
            # (a credential at its limit never locks out conversations already identified).
            return own
    attempt = _Attempt.of(conversation, [identifier.value])
    # Checked before the lookup, so a refusal is the same, statement for statement, whether
    # the identifier exists or not.
    _refuse_when_too_many_failures(attempt, now)
    contact = _contact_with(company_id=conversation.company_id, identifier=identifier)
    if contact is None:
        _failure_record(
            attempt,
            now,
            kind=SecurityEvent.Kind.IDENTIFICATION_FAILED,
            contact=conversation.contact,
            detail={"via": kind},
        )
        raise NotFound(
            _("No encontré ningún cliente con ese dato. ¿Puede comprobarlo?"),
            code="contact_not_found",
        )
    if conversation.contact_id is not None and conversation.contact_id != contact.pk:
        _failure_record(
            attempt,
            now,
            kind=SecurityEvent.Kind.IDENTITY_SWITCH,
            contact=conversation.contact,
            claimed_contact=contact,
            detail={"via": kind, "during": "identify_contact"},
        )
        _drop_verification(conversation)
        raise _identity_changed()
    if conversation.contact_id is None:
        conversation.contact = contact
        conversation.identified_via = kind
        conversation.identified_at = now
        # A verification belongs to whom it verified: a conversation bound again (its contact
        # erased by staff) starts without one.
        conversation.verified_at = conversation.verified_until = None
        update_fields(
            conversation,
            ["contact", "identified_via", "identified_at", "verified_at", "verified_until"],
        )
    return contact


def _identity_changed() -> PermissionRefused:
    return PermissionRefused(
        _(
            "En esta conversación ya se identificó otra persona. Por seguridad no puedo "
            "cambiar de cliente; le paso con una persona del equipo."
        ),
        code="identity_switch",
    )


def identified_contact(conversation: Conversation) -> Contact:
    """The contact this conversation identified as; PermissionRefused if it has not yet."""
    if conversation.contact_id is None:
        raise PermissionRefused(
            _("Antes necesito identificarle con su documento, teléfono o correo."),
            code="identification_required",
        )
    return conversation.contact


def contact_for_conversation(*, conversation: Conversation, identifier: str) -> Contact:
    """The contact this conversation identified as, if `identifier` is one of theirs.

    PermissionRefused when the conversation has not identified yet, or when the identifier is
    not the identified contact's (then a SecurityEvent is recorded and any verification of
    the conversation is dropped: an identifier changing mid-conversation is an alarm). The
    refusal is the same whether the identifier is another customer's or nobody's, and counts
    as an identification failure (too many, and the conversation waits): answered apart, and
    without a limit, every tool taking an identifier told which ones exist. The
    SecurityEvent tells staff which it was.
    """
    contact = identified_contact(conversation)
    readings = identifier_readings(identifier, conversation.company.country)
    if any(getattr(contact, _CONTACT_FIELD[r.kind]) == r.value for r in readings):
        return contact
    now = timezone.now()
    attempt = _Attempt.of(conversation, [r.value for r in readings])
    _refuse_when_too_many_failures(attempt, now)
    claimed = (
        Contact.objects.filter(company_id=conversation.company_id)
        .filter(_matching(readings))
        .first()
    )
    _failure_record(
        attempt,
        now,
        kind=SecurityEvent.Kind.IDENTITY_SWITCH
        if claimed
        else SecurityEvent.Kind.IDENTIFIER_MISMATCH,
        contact=contact,
        claimed_contact=claimed,
        detail={"read_as": sorted({r.kind for r in readings})},
    )
    _drop_verification(conversation)
    raise PermissionRefused(
        _("Ese dato no corresponde a la persona identificada en esta conversación."),
        code="identity_mismatch",
    )


def check_owner(*, contact: Contact, owner_id: int | None) -> None:
    """PermissionRefused unless the entity (its `contact_id` given) belongs to `contact`."""
    if owner_id is None or owner_id != contact.pk:
        raise PermissionRefused(
            _("Eso no está a nombre de la persona que me habla."), code="not_owner"
        )


# company id -> the tool names of its StepUpPolicy row, or None when it has none (then the
# settings' defaults apply, read at each call). Tagged with the company id: core.signals
# forgets a company's entry whenever its policy is saved or deleted.
step_up_policies = ProcessCache("step-up policies")


def step_up_actions(*, company_id: int) -> list[str]:
    """The tools this company protects with a verification code.

    Read by every sensitive write and changed rarely, by staff, so kept in the process cache
    (core.process_cache) like the company of a gateway token: a change takes effect at once in
    the process that makes it, and in the others within GARANTE_PROCESS_CACHE_SECONDS.
    """
    actions = step_up_policies.get(company_id, lambda: _step_up_policy_read(company_id))
    if actions is None:
        return list(settings.GARANTE_STEP_UP_DEFAULT_ACTIONS)
    return list(actions)


def _step_up_policy_read(company_id: int) -> tuple[int, tuple[str, ...] | None]:
    policy = StepUpPolicy.objects.filter(company_id=company_id).first()
    return company_id, None if policy is None else tuple(policy.actions or [])


def require_step_up(*, conversation: Conversation, action: str) -> None:
    """PermissionRefused("verification_required") when the company's policy lists `action`
    (a tool name) and the conversation is not verified right now."""
    if action not in step_up_actions(company_id=conversation.company_id):
        return
    if conversation_is_verified(conversation):
        return
    raise PermissionRefused(
        _(
            "Para esta operación necesito confirmar su identidad con un código que le "
            "enviaré a su teléfono o correo registrados."
        ),
        code="verification_required",
        action=action,
    )
