"""Identification in verified mode: past a limit shared with other conversations, a code to the
customer's registered channel, and the conversation bound only when it is typed back.

The credential's and the identifier's limits on failed identifications are reached by anyone
who types enough numbers, customers' or not; refusing identification there locked every
customer out. Instead `identify_contact` answers every well-formed identifier alike and,
through core.verification, sends a code to the registered phone or email of the customer
who has it (if anyone does, within the send limits and budgets); `verify_code` with that
code binds the conversation (`identification_confirm`).
"""

from datetime import datetime

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.durable import decided_once, keeps_evidence
from core.errors import PermissionRefused
from core.identity.identifiers import Identifier, identifier_readings
from core.identity.limits import Attempt, identifier_digest
from core.identity.ownership import identification_required, identity_changed
from core.models import Contact, Conversation
from core.verification.check import (
    code_well_formed,
    identification_challenge_verify,
    pending_identification_challenge,
)
from core.verification.issue import identification_challenge_issue


def identification_code_send(
    *,
    conversation: Conversation,
    attempt: Attempt,
    identifier: Identifier,
    contact: Contact | None,
    now: datetime,
) -> None:
    """Issue the code of an identification in verified mode: to `contact`'s own channel, or,
    when the identifier is nobody's, one that goes nowhere, by the same statements."""
    identification_challenge_issue(
        conversation=conversation,
        contact=contact,
        identifier_kind=identifier.kind,
        identifier_digest=attempt.digests[0],
        credential_id=attempt.credential_id,
        now=now,
    )


def _not_the_identifier_given() -> PermissionRefused:
    return PermissionRefused(
        _(
            "Ese dato no es el que me dio para identificarse. Dígame el mismo documento, "
            "teléfono o correo, y el código que recibió."
        ),
        code="identity_mismatch",
    )


@keeps_evidence
def identification_confirm(*, conversation: Conversation, identifier: str, code: str) -> Contact:
    """verify_code in a conversation not identified yet: bind it to the customer whose
    registered channel received the code of its identification in verified mode, and mark
    it verified (the code proves that channel, as a step-up code does).

    `identifier` must be the one typed to identify_contact (compared by its HMAC, so the
    comparison reads nothing); every code of an identifier that is nobody's, or whose code
    was withheld, is wrong, attempts and lock alike. PermissionRefused
    `identification_required` when the conversation has no such code (nothing is written);
    the typed refusals of core.verification otherwise (a code in another conversation than
    the one it was sent for is one of these: it is compared with this conversation's code
    only)."""
    code = code_well_formed(code)
    company = conversation.company
    readings = identifier_readings(identifier, company.country)
    # As the call first found it: its later runs (core.durable) see its attempt taken.
    challenge = decided_once(lambda: pending_identification_challenge(conversation))
    if challenge is None:
        raise identification_required()
    digests = {identifier_digest(company_id=company.pk, value=r.value) for r in readings}
    if challenge.identifier_digest not in digests:
        raise _not_the_identifier_given()
    identification_challenge_verify(conversation=conversation, challenge=challenge, code=code)
    now = timezone.now()
    fields = {
        "contact_id": challenge.contact_id,
        "identified_via": challenge.identifier_kind,
        "identified_at": now,
        "verified_at": now,
        "verified_until": now + settings.GARANTE_VERIFICATION_VALID_FOR,
    }
    bound = Conversation.objects.filter(pk=conversation.pk, contact__isnull=True).update(**fields)
    if not bound:
        # Identified meanwhile, by a twin of this call or by the conversation's own
        # identification: only as this same customer may it go on.
        current = Conversation.objects.get(pk=conversation.pk)
        if current.contact_id != challenge.contact_id:
            raise identity_changed()
    for name, value in fields.items():
        setattr(conversation, name, value)
    return Contact.objects.get(pk=challenge.contact_id)
