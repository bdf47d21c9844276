"""Writes of the core app: companies' contacts and gateway credentials."""

import logging

from django.db import transaction
from django.utils import timezone, translation
from django.utils.translation import gettext as _g
from django.utils.translation import gettext_lazy as _

from core.errors import ValidationFailed
from core.jobs import task_named
from core.models import Company, Contact, GatewayCredential
from core.normalize import normalize_document, normalize_email, normalize_phone
from core.outbound import OutboundRefused, message_send
from core.sms_policy import sms_phone_normalize

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


@transaction.atomic
def contact_update_details(
    *, contact: Contact, phone: str | None = None, email: str | None = None
) -> Contact:
    """Change a contact's phone and/or email (normalised). Another contact of the company
    already holding the new value is VALIDATION, without saying whose it is.

    Each channel that changes is told at its old value, once the change commits (an SMS to
    the old phone, an email to the old address, through Celery): a takeover that changes
    them cannot go unnoticed by the customer."""
    contact = Contact.objects.select_for_update().get(pk=contact.pk)
    previous = {"phone": contact.phone, "email": contact.email}
    changes: dict[str, str] = {}
    if phone:
        changes["phone"] = normalize_phone(phone, contact.company.country)
    if email:
        changes["email"] = normalize_email(email)
    if not changes:
        raise ValidationFailed(
            _("Indique el nuevo teléfono o el nuevo correo."), code="nothing_to_change"
        )
    for field, value in changes.items():
        taken = (
            Contact.objects.filter(company_id=contact.company_id, **{field: value})
            .exclude(pk=contact.pk)
            .exists()
        )
        if taken:
            raise ValidationFailed(
                _("Ese dato ya está registrado para otro cliente; no puedo usarlo."),
                code="identifier_taken",
            )
        setattr(contact, field, value)
    changed = sorted(f for f in changes if previous[f] != changes[f])
    contact.save(update_fields=list(changes))
    for field in changed:
        if previous[field]:
            _notify_old_channel_on_commit(
                contact_id=contact.pk,
                channel="sms" if field == "phone" else "email",
                destination=previous[field],
                changed=changed,
            )
    return contact


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
    """Create a gateway credential; return it with its clear token, which is never stored."""
    token = GatewayCredential.new_token()
    credential = GatewayCredential.objects.create(
        company=company,
        name=name,
        token_prefix=token[:10],
        token_hash=GatewayCredential.hash_token(token),
    )
    return credential, token


def gateway_credential_revoke(*, credential: GatewayCredential) -> GatewayCredential:
    if credential.revoked_at is None:
        credential.revoked_at = timezone.now()
        credential.save(update_fields=["revoked_at"])
    return credential
