"""Writes of the core app: companies' contacts and gateway credentials."""

from django.db import transaction
from django.utils import timezone

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
