"""Binding a conversation to the contact it identifies as, and refusing an identity switch;
past a limit shared with other conversations, identifying in verified mode instead."""

from datetime import datetime
from functools import cache

from django.db import connection
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.durable import keeping_evidence
from core.errors import NotFound
from core.identity.identifiers import CONTACT_FIELD, Identifier, normalize_identifier
from core.identity.limits import (
    Attempt,
    Beside,
    Standing,
    VerifiedModeStands,
    attempt_standing,
    failure_record,
    too_many_attempts,
)
from core.identity.ownership import identity_changed
from core.identity.step_up import verification_drop, verification_voided_when_limited
from core.identity.verified_mode import identification_code_send
from core.models import Contact, Conversation, SecurityEvent
from core.sql import column, selected, update_fields

# What a conversation knows of its identity, read again under the row lock.
_IDENTITY_FIELDS = (
    "contact_id",
    "identified_via",
    "identified_at",
    "verified_at",
    "verified_until",
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
        f"AND {column(Contact, CONTACT_FIELD[kind])} = %s LIMIT 1"
    )


def identify_contact(
    *, conversation: Conversation, kind: str, value: str, held: bool = False
) -> Contact | None:
    """Bind the conversation to the company's contact with this document, phone or email.

    NotFound if nobody has it; PermissionRefused if the conversation already identified as
    someone else (a SecurityEvent, and any verification is dropped) or, `too_many_attempts`
    with `retry_after_seconds`, if the conversation's own limit on failed identifications
    stands (or, for a conversation identified already, any limit). Failures are counted in
    the database, durably, so every app node sees them and the call's rollback does not
    erase them; each limit is a sliding window set per company. A conversation naming its
    own identified customer again is never refused.

    Verified mode: while the limit of the conversation's gateway credential (all its
    conversations) or of the identifier value (all conversations of the company) stands, a
    conversation not identified yet is not bound and None is returned, the same for every
    well-formed identifier: a code goes to the registered channel of the customer with that
    identifier, if any (core.identity.verified_mode), and verify_code binds it.

    `held`: the transaction this runs in holds the conversation's row and read it after
    taking it (ToolContext.conversation_held: it inserted the row, or read it under its row
    lock), so it is not locked and read again.
    """
    return keeping_evidence(
        lambda: _identify_locked(conversation=conversation, kind=kind, value=value, held=held)
    )


def _identify_locked(
    *, conversation: Conversation, kind: str, value: str, held: bool
) -> Contact | None:
    now = timezone.now()
    if not held:
        # Serialise identifications of one conversation so concurrent guesses are counted in
        # turn (a twin of a new one waits on its insert instead). FOR NO KEY UPDATE leaves
        # durable inserts referring to this row free to proceed.
        locked = Conversation.objects.select_for_update(no_key=True).get(pk=conversation.pk)
        for name in _IDENTITY_FIELDS:
            setattr(conversation, name, getattr(locked, name))
    identifier = normalize_identifier(kind, value, conversation.company.country)
    if conversation.contact_id is not None:
        own = conversation.contact
        if own is not None and getattr(own, CONTACT_FIELD[kind]) == identifier.value:
            # The conversation's own customer again: no guess, so no limit stands in the way
            # (a credential at its limit never locks out conversations already identified).
            return own
    attempt = Attempt.of(conversation, [identifier.value])
    with verification_voided_when_limited(conversation):
        # Decided before the lookup, so that a refusal, and the choice of verified mode, are
        # the same, statement for statement, whether the identifier exists or not.
        # The contact is looked up in the limits' statement, beside them (one round trip).
        lookup = Beside(
            _contact_with_sql(connection.vendor, identifier.kind),
            [conversation.company_id, identifier.value],
        )
        verified_mode = _standing_refused_or_not(conversation, attempt, now, lookup).verified_mode
        if lookup.read:
            contact = None if lookup.row is None else selected(Contact).instance(lookup.row)
        else:
            contact = _contact_with(company_id=conversation.company_id, identifier=identifier)
        if not verified_mode:
            try:
                contact = _contact_checked(conversation, attempt, identifier, contact, now)
            except VerifiedModeStands:
                # Failures arriving at once reached a shared limit while this miss was being
                # recorded: it is answered as the next ones will be.
                verified_mode = True
        if verified_mode:
            identification_code_send(
                conversation=conversation,
                attempt=attempt,
                identifier=identifier,
                contact=contact,
                now=now,
            )
            return None
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


def _standing_refused_or_not(
    conversation: Conversation, attempt: Attempt, now: datetime, beside: Beside
) -> Standing:
    """The limits the attempt meets (read with `beside`); TooManyAttempts when they refuse it:
    the conversation's own limit (with its own wait), or, for a conversation identified
    already (which can only be naming somebody else), any limit."""
    standing = attempt_standing(attempt, now, beside=beside)
    identified = conversation.contact_id is not None
    wait = standing.longest_wait if identified else standing.conversation_wait
    if wait is not None:
        raise too_many_attempts(wait)
    return standing


def _contact_checked(
    conversation: Conversation,
    attempt: Attempt,
    identifier: Identifier,
    contact: Contact | None,
    now: datetime,
) -> Contact:
    """The company's contact with the identifier (`contact`, looked up), if the
    conversation may identify as them: NotFound when nobody has it, PermissionRefused when
    the conversation is someone else's or a limit on failed identifications was reached
    meanwhile (each failure recorded durably); VerifiedModeStands when that limit is one
    shared with other conversations and this one is not identified yet."""
    if contact is None:
        failure_record(
            attempt,
            now,
            kind=SecurityEvent.Kind.IDENTIFICATION_FAILED,
            contact=conversation.contact,
            detail={"via": identifier.kind},
            verified_mode=conversation.contact_id is None,
        )
        raise NotFound(
            _("No encontré ningún cliente con ese dato. ¿Puede comprobarlo?"),
            code="contact_not_found",
        )
    if conversation.contact_id is not None and conversation.contact_id != contact.pk:
        failure_record(
            attempt,
            now,
            kind=SecurityEvent.Kind.IDENTITY_SWITCH,
            contact=conversation.contact,
            claimed_contact=contact,
            detail={"via": identifier.kind, "during": "identify_contact"},
        )
        verification_drop(conversation)
        raise identity_changed()
    return contact
