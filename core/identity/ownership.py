"""Whether the caller is who a call acts for: the identified contact, and what is theirs."""

from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.errors import PermissionRefused
from core.identity.identifiers import CONTACT_FIELD, contact_matching, identifier_readings
from core.identity.limits import Attempt, failure_record, refuse_when_too_many_failures
from core.identity.step_up import verification_drop, verification_voided_when_limited
from core.models import Contact, Conversation, SecurityEvent


def identification_required() -> PermissionRefused:
    return PermissionRefused(
        _("Antes necesito identificarle con su documento, teléfono o correo."),
        code="identification_required",
    )


def identity_changed() -> PermissionRefused:
    """The refusal of a conversation identified as one customer naming another."""
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
        raise identification_required()
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
    if any(getattr(contact, CONTACT_FIELD[r.kind]) == r.value for r in readings):
        return contact
    now = timezone.now()
    attempt = Attempt.of(conversation, [r.value for r in readings])
    with verification_voided_when_limited(conversation):
        refuse_when_too_many_failures(attempt, now)
        claimed = (
            Contact.objects.filter(company_id=conversation.company_id)
            .filter(contact_matching(readings))
            .first()
        )
        failure_record(
            attempt,
            now,
            kind=SecurityEvent.Kind.IDENTITY_SWITCH
            if claimed
            else SecurityEvent.Kind.IDENTIFIER_MISMATCH,
            contact=contact,
            claimed_contact=claimed,
            detail={"read_as": sorted({r.kind for r in readings})},
        )
    verification_drop(conversation)
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
