"""Who is talking: identification, ownership checks and step-up requirements (seed 1 §2).

The Gateway sends no authenticated end user. A conversation becomes bound to one contact by
`identify_contact`; every sensitive tool then takes that contact's identifier as a parameter
and calls `contact_for_conversation`, then `check_owner` on its target entity, and, when the
company's policy says so, `require_step_up`.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.durable import durably
from core.errors import NotFound, PermissionRefused, ValidationFailed
from core.models import Contact, Conversation, SecurityEvent, StepUpPolicy
from core.normalize import normalize_document, normalize_email, normalize_phone
from core.process_cache import ProcessCache
from core.sql import column, selected, update_fields
from core.transactions import without_savepoint

IDENTIFIER_KINDS = ("document", "phone", "email")
_CONTACT_FIELD = {"document": "document_number", "phone": "phone", "email": "email"}

# Events after which a conversation's earlier verification no longer counts.
VERIFICATION_DROPPING_EVENTS = (
    SecurityEvent.Kind.IDENTITY_SWITCH,
    SecurityEvent.Kind.IDENTIFIER_MISMATCH,
)
# Events that count towards the identification rate limit: a refused switch also tells the
# caller that the identifier exists, so it is an enumeration attempt as much as a miss.
_IDENTIFICATION_FAILURES = (
    SecurityEvent.Kind.IDENTIFICATION_FAILED,
    SecurityEvent.Kind.IDENTITY_SWITCH,
    SecurityEvent.Kind.IDENTIFIER_MISMATCH,
)


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


def _retry_after(conversation: Conversation, now: datetime) -> int | None:
    """Seconds until this conversation may try to identify again, or None if it may now."""
    window: timedelta = settings.GARANTE_IDENTIFY_FAILURE_WINDOW
    limit: int = settings.GARANTE_IDENTIFY_MAX_FAILURES
    recent = _recent_failures(conversation, since=now - window, limit=limit)
    if len(recent) < limit:
        return None
    # The oldest of the last `limit` failures must leave the window before another try.
    return max(1, int((recent[-1] + window - now).total_seconds()) + 1)


def _refuse_when_too_many_failures(conversation: Conversation, now: datetime) -> None:
    retry_after = _retry_after(conversation, now)
    if retry_after is not None:
        raise PermissionRefused(
            _(
                "Hubo demasiados intentos de identificación en esta conversación. "
                "Por seguridad, espere unos minutos antes de volver a intentarlo."
            ),
            code="too_many_attempts",
            retry_after_seconds=retry_after,
        )


def _recent_failures(conversation: Conversation, *, since: datetime, limit: int) -> list[datetime]:
    """When the conversation's latest identification failures after `since` happened, newest
    first, at most `limit` of them.

    Every identification asks, so this is SQL built from the model's metadata (core.sql): the
    ORM's compilation of the same query costs several times the query.
    """
    created_at = selected(SecurityEvent, ["created_at"])
    (field,) = created_at.fields
    params = [
        conversation.company_id,
        conversation.external_id,
        *_IDENTIFICATION_FAILURES,
        field.get_db_prep_value(since, connection),  # as the ORM sends it (text on SQLite)
        limit,
    ]
    with connection.cursor() as cursor:
        cursor.execute(_recent_failures_sql(connection.vendor), params)
        return [created_at.values(row)[0] for row in cursor.fetchall()]


@cache
def _recent_failures_sql(vendor: str) -> str:
    """The SQL of _recent_failures, built once per process (`vendor` keys the quoting)."""
    kinds = ", ".join(["%s"] * len(_IDENTIFICATION_FAILURES))
    table = connection.ops.quote_name(SecurityEvent._meta.db_table)
    created_at = column(SecurityEvent, "created_at")
    return (
        f"SELECT {selected(SecurityEvent, ['created_at']).columns} FROM {table} "
        f"WHERE {column(SecurityEvent, 'company')} = %s "
        f"AND {column(SecurityEvent, 'conversation_key')} = %s "
        f"AND {column(SecurityEvent, 'kind')} IN ({kinds}) AND {created_at} > %s "
        f"ORDER BY {created_at} DESC LIMIT %s"
    )


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
    someone else (a SecurityEvent, and any verification is dropped) or if it failed too often
    recently (`retry_after_seconds`). Failures are counted in the database, durably, so every
    app node sees them and the call's rollback does not erase them.

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
    _refuse_when_too_many_failures(conversation, now)
    identifier = normalize_identifier(kind, value, conversation.company.country)
    contact = _contact_with(company_id=conversation.company_id, identifier=identifier)
    if contact is None:
        security_event_record(
            conversation=conversation,
            kind=SecurityEvent.Kind.IDENTIFICATION_FAILED,
            contact=conversation.contact,
            detail={"via": kind},
        )
        raise NotFound(
            _("No encontré ningún cliente con ese dato. ¿Puede comprobarlo?"),
            code="contact_not_found",
        )
    if conversation.contact_id is not None and conversation.contact_id != contact.pk:
        security_event_record(
            conversation=conversation,
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
    _refuse_when_too_many_failures(conversation, timezone.now())
    claimed = (
        Contact.objects.filter(company_id=conversation.company_id)
        .filter(_matching(readings))
        .first()
    )
    security_event_record(
        conversation=conversation,
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
