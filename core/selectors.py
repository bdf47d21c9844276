"""Reads of the core app."""

from dataclasses import dataclass
from datetime import datetime

from django.db import DEFAULT_DB_ALIAS

from core.credentials.selectors import credential_find, credential_touch
from core.models import (
    Company,
    Contact,
    Conversation,
    GatewayCredential,
    OutboxMessage,
    SecurityEvent,
    VerificationChallenge,
)
from core.process_cache import ProcessCache

_COMPANY_FIELDS = tuple(f.attname for f in Company._meta.concrete_fields)


@dataclass
class _Authenticated:
    credential_id: int
    company_values: tuple
    last_used_at: datetime | None


# token hash -> what the database said about it a moment ago; tagged with the company id.
authentications = ProcessCache("gateway authentications")


def gateway_company_authenticate(token: str) -> Company | None:
    """The company a bearer token belongs to, or None if unknown or revoked; the instance
    knows which credential authenticated it (`Company.gateway_credential_id`).

    Every tool call starts here, so a valid token's answer is kept in the process cache
    (core.process_cache): revoking a credential or saving a company takes effect at once in the
    process that does it (core.signals), and in the others within the cache's lifetime.
    Unknown tokens are never kept.
    """
    if not token:
        return None
    token_hash = GatewayCredential.hash_token(token)
    entry = authentications.get(token_hash, lambda: _authenticate_in_database(token_hash))
    if entry is None:
        return None
    credential_touch(GatewayCredential, entry.credential_id, entry)
    # A fresh instance per request: nothing a request caches on it leaks into the next one.
    company = Company.from_db(DEFAULT_DB_ALIAS, _COMPANY_FIELDS, entry.company_values)
    # For the identification limits per credential (core.identity).
    company.gateway_credential_id = entry.credential_id
    return company


def _authenticate_in_database(token_hash: str) -> tuple[int, _Authenticated] | None:
    credential = credential_find(GatewayCredential, token_hash)
    if credential is None:
        return None
    company = credential.company
    return company.pk, _Authenticated(
        credential_id=credential.pk,
        company_values=tuple(getattr(company, name) for name in _COMPANY_FIELDS),
        last_used_at=credential.last_used_at,
    )


# The customer's file (core.contact_file): each kind's count in one query, and its latest rows.


def contact_conversations_file(*, contact: Contact, limit: int) -> tuple[int, list[Conversation]]:
    """How many conversations the contact identified in, and the `limit` last seen."""
    conversations = Conversation.objects.filter(company_id=contact.company_id, contact=contact)
    return conversations.count(), list(conversations.order_by("-last_seen_at", "-pk")[:limit])


def contact_codes_file(*, contact: Contact, limit: int) -> tuple[int, list[VerificationChallenge]]:
    """How many verification codes were issued to the contact, and the `limit` newest."""
    codes = VerificationChallenge.objects.filter(company_id=contact.company_id, contact=contact)
    return codes.count(), list(codes.order_by("-created_at", "-pk")[:limit])


def contact_security_events_file(
    *, contact: Contact, limit: int
) -> tuple[int, list[SecurityEvent]]:
    """How many security events name the contact as the conversation's identified contact,
    and the `limit` newest."""
    events = SecurityEvent.objects.filter(company_id=contact.company_id, contact=contact)
    return events.count(), list(events.order_by("-created_at", "-pk")[:limit])


def contact_outbox_file(*, contact: Contact, limit: int) -> tuple[int, list[OutboxMessage]]:
    """What a sandbox company kept in its outbox for the contact's phone or email (every
    message to a customer of a sandbox lands there, core.outbound): how many, the `limit`
    newest."""
    destinations = [d for d in (contact.phone, contact.email) if d]
    kept = OutboxMessage.objects.filter(company_id=contact.company_id, destination__in=destinations)
    return kept.count(), list(kept.order_by("-created_at", "-pk")[:limit])
