"""Reads of the core app."""

import hmac
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from core.models import Company, GatewayCredential
from core.process_cache import ProcessCache

# last_used_at is bookkeeping; refreshing it on every call would add a write to each request.
_LAST_USED_RESOLUTION = timedelta(minutes=1)
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
    _touch(entry)
    # A fresh instance per request: nothing a request caches on it leaks into the next one.
    company = Company.from_db(DEFAULT_DB_ALIAS, _COMPANY_FIELDS, entry.company_values)
    # For the identification limits per credential (core.identity).
    company.gateway_credential_id = entry.credential_id
    return company


def _authenticate_in_database(token_hash: str) -> tuple[int, _Authenticated] | None:
    credential = (
        GatewayCredential.objects.select_related("company")
        .filter(token_hash=token_hash, revoked_at__isnull=True)
        .first()
    )
    if credential is None or not hmac.compare_digest(credential.token_hash, token_hash):
        return None
    company = credential.company
    return company.pk, _Authenticated(
        credential_id=credential.pk,
        company_values=tuple(getattr(company, name) for name in _COMPANY_FIELDS),
        last_used_at=credential.last_used_at,
    )


def _touch(entry: _Authenticated) -> None:
    now = timezone.now()
    if entry.last_used_at is not None and now - entry.last_used_at <= _LAST_USED_RESOLUTION:
        return
    entry.last_used_at = now  # first, so concurrent requests of this process do not repeat it
    GatewayCredential.objects.filter(pk=entry.credential_id).update(last_used_at=now)
