"""Reads of bearer credentials of any kind: the active credential a token's hash names, and
the bookkeeping its authentication does (when it was last used: a write, but part of the read
that authenticates, as a session's last login is)."""

import hmac
from datetime import datetime, timedelta
from typing import Protocol, TypeVar

from django.utils import timezone

from core.models import BearerCredential

Credential = TypeVar("Credential", bound=BearerCredential)

# last_used_at is bookkeeping; refreshing it on every call would add a write to each request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class LastUse(Protocol):
    last_used_at: datetime | None


def credential_find(kind: type[Credential], token_hash: str) -> Credential | None:
    """The active credential of `kind` whose token has this hash (core.models.BearerCredential.
    hash_token), with its company; None if unknown or revoked."""
    credential = (
        kind.objects.select_related("company")
        .filter(token_hash=token_hash, revoked_at__isnull=True)
        .first()
    )
    if credential is None or not hmac.compare_digest(credential.token_hash, token_hash):
        return None
    return credential


def credential_touch(kind: type[BearerCredential], credential_id: int, seen: LastUse) -> None:
    """Write that a credential was just used, unless the last use `seen` knows of (the
    credential itself, or a cached copy of what was read of it) is recent enough. `seen` is
    updated first, so concurrent requests holding the same copy do not write it again."""
    now = timezone.now()
    if seen.last_used_at is not None and now - seen.last_used_at <= LAST_USED_RESOLUTION:
        return
    seen.last_used_at = now
    kind.objects.filter(pk=credential_id).update(last_used_at=now)
