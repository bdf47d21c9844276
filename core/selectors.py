"""Reads of the core app."""

import hmac
from datetime import timedelta

from django.utils import timezone

from core.models import Company, GatewayCredential

# last_used_at is bookkeeping; refreshing it on every call would add a write to each request.
_LAST_USED_RESOLUTION = timedelta(minutes=1)


def gateway_company_authenticate(token: str) -> Company | None:
    """The company a bearer token belongs to, or None if unknown or revoked."""
    if not token:
        return None
    token_hash = GatewayCredential.hash_token(token)
    credential = (
        GatewayCredential.objects.select_related("company")
        .filter(token_hash=token_hash, revoked_at__isnull=True)
        .first()
    )
    if credential is None or not hmac.compare_digest(credential.token_hash, token_hash):
        return None
    now = timezone.now()
    if credential.last_used_at is None or now - credential.last_used_at > _LAST_USED_RESOLUTION:
        GatewayCredential.objects.filter(pk=credential.pk).update(last_used_at=now)
    return credential.company
