"""Reads of the core app."""

import hmac
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from core.models import Company, GatewayCredential

# last_used_at is bookkeeping; refreshing it on every call would add a write to each request.
_LAST_USED_RESOLUTION = timedelta(minutes=1)
# Only valid tokens are kept, so the cache is bounded by the credentials that exist; this cap
# only guards against a pathological number of them.
_CACHE_MAX_ENTRIES = 10_000
_COMPANY_FIELDS = tuple(f.attname for f in Company._meta.concrete_fields)
_clock = time.monotonic


@dataclass
class _Authenticated:
    credential_id: int
    company_id: int
    company_values: tuple
    last_used_at: datetime | None
    fresh_until: float  # on _clock()


# token hash -> what the database said about it a moment ago (this process only).
_authenticated: dict[str, _Authenticated] = {}
_authenticated_lock = threading.Lock()


def gateway_company_authenticate(token: str) -> Company | None:
    """The company a bearer token belongs to, or None if unknown or revoked.

    Every tool call starts here, so a valid token's answer is kept in this process for
    `GARANTE_GATEWAY_AUTH_CACHE_SECONDS`: saving or revoking a credential or saving a company
    takes effect at once in the process that does it (signals clear the entries), and in other
    processes within that many seconds. 0 disables the cache. Unknown tokens are never cached.
    """
    if not token:
        return None
    token_hash = GatewayCredential.hash_token(token)
    now = _clock()
    entry = _authenticated.get(token_hash)
    if entry is None or entry.fresh_until <= now:
        entry = _authenticate_in_database(token_hash, now)
        if entry is None:
            return None
    _touch(entry)
    # A fresh instance per request: nothing a request caches on it leaks into the next one.
    return Company.from_db(DEFAULT_DB_ALIAS, _COMPANY_FIELDS, entry.company_values)


def _authenticate_in_database(token_hash: str, now: float) -> _Authenticated | None:
    credential = (
        GatewayCredential.objects.select_related("company")
        .filter(token_hash=token_hash, revoked_at__isnull=True)
        .first()
    )
    if credential is None or not hmac.compare_digest(credential.token_hash, token_hash):
        _authenticated.pop(token_hash, None)
        return None
    company = credential.company
    entry = _Authenticated(
        credential_id=credential.pk,
        company_id=company.pk,
        company_values=tuple(getattr(company, name) for name in _COMPANY_FIELDS),
        last_used_at=credential.last_used_at,
        fresh_until=now + settings.GARANTE_GATEWAY_AUTH_CACHE_SECONDS,
    )
    if settings.GARANTE_GATEWAY_AUTH_CACHE_SECONDS > 0:
        with _authenticated_lock:
            if len(_authenticated) >= _CACHE_MAX_ENTRIES:
                _authenticated.clear()
            _authenticated[token_hash] = entry
    return entry


def _touch(entry: _Authenticated) -> None:
    now = timezone.now()
    if entry.last_used_at is not None and now - entry.last_used_at <= _LAST_USED_RESOLUTION:
        return
    entry.last_used_at = now  # first, so concurrent requests of this process do not repeat it
    GatewayCredential.objects.filter(pk=entry.credential_id).update(last_used_at=now)


def gateway_authentication_forget(*, company_id: int | None = None) -> None:
    """Drop this process's cached authentications (of one company, or all)."""
    with _authenticated_lock:
        if company_id is None:
            _authenticated.clear()
            return
        for token_hash, entry in list(_authenticated.items()):
            if entry.company_id == company_id:
                del _authenticated[token_hash]
