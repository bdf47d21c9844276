"""Writes of the core app: contacts, changes of their phone or email, gateway credentials."""

import logging

from django.db import IntegrityError, transaction
from django.utils import translation
from django.utils.translation import gettext as _g
from django.utils.translation import gettext_lazy as _

from core.credentials.services import credential_issue, credential_revoke
from core.durable import keeps_evidence
from core.errors import ValidationFailed
from core.identity.step_up import security_event_record
from core.jobs import task_named
from core.models import (
    Company,
    Contact,
    Conversation,
    GatewayCredential,
    SecurityEvent,
    VerificationChallenge,
)
from core.normalize import normalize_document, normalize_email
from core.outbound import OutboundRefused, message_send
from core.sms_policy import sms_phone_normalize
from core.verification.check import (
    contact_change_code_check,
    contact_change_code_spend,
    contact_change_code_use,
)
from core.verification.issue import contact_change_challenge_issue

logger = logging.getLogger("garante.contacts")


@transaction.atomic
def contact_create(
    *,
    company: Company,
    first_name: str,
    last_name: str = "",
    document_number: str = "",
    phone: str = "",
    email: str = "",
) -> Contact:
    """Create a contact with its identifiers normalised (ValidationFailed if one is invalid,
    or if its phone is not one the company may text: core.sms_policy)."""
    return Contact.objects.create(
        company=company,
        first_name=first_name.strip(),
        last_name=last_name.strip(),
        document_number=normalize_document(document_number, company.country)
        if document_number
        else "",
        phone=sms_phone_normalize(company=company, raw=phone) if phone else "",
        email=normalize_email(email) if email else "",
    )


# The Contact field a change of each channel writes, and back.
_FIELD_OF_CHANNEL = {"sms": "phone", "email": "email"}
_CHANNEL_OF_FIELD = {"phone": "sms", "email": "email"}


def contact_change_destination(*, company: Company, field: str, raw: str) -> str:
    """The new phone (E.164) or email a contact asked to change to, as a code may be sent to
    it; ValidationFailed (invalid_phone, phone_country_not_served, phone_not_mobile,
    invalid_email) otherwise.

    The one place that decides where a code for a typed destination may go: the address is
    the caller's, so whatever a company refuses to send to (countries it does not serve,
    premium-rate numbers) is refused here, before any message. It depends on the value alone,
    never on who holds it: its answer must tell nothing about other customers."""
    if field == "phone":
        return sms_phone_normalize(company=company, raw=raw)
    return normalize_email(raw)


def contact_change_request(
    *,
    conversation: Conversation,
    contact: Contact,
    phone: str | None = None,
    email: str | None = None,
) -> VerificationChallenge:
    """Ask to change the contact's phone or email (one at a time): a code goes to the NEW
    value, and nothing changes until that code comes back (`contact_change_confirm`).

    The answer is the same whoever holds the new value, another customer or nobody: looking
    it up here made this a customer oracle that also texted any number at once. Whether it is
    taken is told only to whoever proved they receive at it. ValidationFailed for nothing to
    change, both at once, an invalid value (`contact_change_destination`) or the contact's
    current one; the code's send limits and delivery are those of every code
    (core.verification)."""
    given = {f: v for f, v in (("phone", phone), ("email", email)) if v}
    if not given:
        raise ValidationFailed(
            _("Indique el nuevo teléfono o el nuevo correo."), code="nothing_to_change"
        )
    if len(given) > 1:
        raise ValidationFailed(
            _("Cambiemos un dato cada vez: primero el teléfono o el correo, y después el otro."),
            code="one_change_at_a_time",
        )
    ((field, raw),) = given.items()
    destination = contact_change_destination(company=contact.company, field=field, raw=raw)
    if getattr(contact, field) == destination:
        raise ValidationFailed(
            _("Ese ya es el dato que tenemos registrado; no hay nada que cambiar."),
            code="already_current",
        )
    return contact_change_challenge_issue(
        contact=contact,
        channel=_CHANNEL_OF_FIELD[field],
        destination=destination,
        conversation=conversation,
    )


@keeps_evidence
def contact_change_confirm(*, conversation: Conversation, contact: Contact, code: str) -> Contact:
    """Apply the conversation's pending phone or email change, if `code` is the one sent to
    the new value; the old channel is told once the change commits.

    Errors of the code are those of any code (core.verification.contact_change_code_check):
    none pending in this conversation, wrong (attempts counted), expired, locked, or the code
    of the customer's current channel. Only after the right code, a new value that another
    contact holds is VALIDATION `identifier_taken`: nothing is saved, the code is spent, and
    staff see a security event."""
    challenge = contact_change_code_check(conversation=conversation, contact=contact, code=code)
    field, value = _FIELD_OF_CHANNEL[challenge.channel], challenge.destination
    contact = Contact.objects.select_for_update(no_key=True).get(pk=contact.pk)
    others = Contact.objects.filter(company_id=contact.company_id, **{field: value})
    holder = others.exclude(pk=contact.pk).first()
    if holder is not None:
        contact_change_code_spend(challenge)
        security_event_record(
            conversation=conversation,
            kind=SecurityEvent.Kind.CONTACT_CHANGE_TAKEN,
            contact=contact,
            claimed_contact=holder,
            detail={"field": field},
        )
        raise _identifier_taken()
    contact_change_code_use(challenge)
    previous = getattr(contact, field)
    setattr(contact, field, value)
    try:
        with transaction.atomic():
            contact.save(update_fields=[field])
    except IntegrityError:
        # Taken by another contact since the check above (they hold the unique index now).
        raise _identifier_taken() from None
    if previous and previous != value:
        _notify_old_channel_on_commit(
            contact_id=contact.pk,
            channel=_CHANNEL_OF_FIELD[field],
            destination=previous,
            changed=[field],
        )
    return contact


def _identifier_taken() -> ValidationFailed:
    return ValidationFailed(
        _("Ese dato ya está registrado para otro cliente; no puedo usarlo."),
        code="identifier_taken",
    )


def _notify_old_channel_on_commit(
    *, contact_id: int, channel: str, destination: str, changed: list[str]
) -> None:
    # robust: a broker outage after the commit must not turn the saved change into an error.
    def notify() -> None:
        task_named("core.tasks.contact_change_notify").delay(
            contact_id=contact_id, channel=channel, destination=destination, changed=changed
        )

    transaction.on_commit(notify, robust=True)


def contact_change_notice_send(
    *, contact_id: int, channel: str, destination: str, changed: list[str]
) -> bool:
    """Tell a contact, at their old phone or email, that their contact details changed;
    whether a message left. A transient failure (OutboundTransient) is raised for the task to
    retry; a refusal for good is logged and dropped (retrying cannot change it): a provider's
    or mail server's, or the company's SMS policy's (core.outbound)."""
    contact = Contact.objects.select_related("company").filter(pk=contact_id).first()
    if contact is None:
        return False
    company = contact.company
    with translation.override(company.language):
        what = {
            ("phone",): _g("su teléfono"),
            ("email",): _g("su correo electrónico"),
            ("email", "phone"): _g("su teléfono y su correo electrónico"),
        }[tuple(changed)]
        subject = _g("%(company)s: cambio de sus datos de contacto") % {"company": company.name}
        body = _g(
            "%(company)s: se ha cambiado %(what)s en su ficha de cliente. Si no lo ha pedido "
            "usted, contacte con nosotros cuanto antes."
        ) % {"company": company.name, "what": what}
    try:
        message_send(
            company=company,
            channel=channel,
            to=destination,
            subject=subject,
            body=body,
        )
    except OutboundRefused as exc:
        logger.error("contact %s: change notice refused by %s (%s)", contact_id, channel, exc)
        return False
    return True


def gateway_credential_issue(*, company: Company, name: str) -> tuple[GatewayCredential, str]:
    """Create a gateway credential; return it with its clear token, which is never stored
    (core.credentials' lifecycle, as every kind of credential)."""
    return credential_issue(GatewayCredential, company=company, name=name)


def gateway_credential_revoke(*, credential: GatewayCredential) -> GatewayCredential:
    """Revoke a gateway credential for good (core.credentials' lifecycle); every process
    forgets its cached authentication (core.signals)."""
    return credential_revoke(credential=credential)
