"""Writes of the core app: companies' contacts and gateway credentials."""

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.errors import ValidationFailed
from core.models import Company, Contact, GatewayCredential
from core.normalize import normalize_document, normalize_email, normalize_phone


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
    """Create a contact with its identifiers normalised (ValidationFailed if one is invalid)."""
    return Contact.objects.create(
        company=company,
        first_name=first_name.strip(),
        last_name=last_name.strip(),
        document_number=normalize_document(document_number, company.country)
        if document_number
        else "",
        phone=normalize_phone(phone, company.country) if phone else "",
        email=normalize_email(email) if email else "",
    )


@transaction.atomic
def contact_update_details(
    *, contact: Contact, phone: str | None = None, email: str | None = None
) -> Contact:
    """Change a contact's phone and/or email (normalised). Another contact of the company
    already holding the new value is VALIDATION, without saying whose it is."""
    contact = Contact.objects.select_for_update().get(pk=contact.pk)
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
    contact.save(update_fields=list(changes))
    return contact


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
