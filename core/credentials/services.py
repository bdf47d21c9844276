"""Writes of bearer credentials of any kind: issue, rotate, revoke."""

from typing import Any, TypeVar

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.errors import Conflict
from core.models import BearerCredential, Company

Credential = TypeVar("Credential", bound=BearerCredential)

# The part of a token kept in clear to tell credentials apart in the admin (e.g. "gt_Xy3kQ9f").
_SHOWN_PREFIX = 10


def credential_issue(
    kind: type[Credential], *, company: Company, name: str, **issued_with: Any
) -> tuple[Credential, str]:
    """Create a credential of `kind`; return it with its clear token, which is never stored.
    `issued_with` holds the kind's ISSUE_FIELDS (an integration credential's scope)."""
    unknown = set(issued_with) - set(kind.ISSUE_FIELDS)
    if unknown:
        raise TypeError(f"{kind.__name__} is not issued with {', '.join(sorted(unknown))}")
    token = kind.new_token()
    credential = kind.objects.create(
        company=company,
        name=name.strip(),
        token_prefix=token[:_SHOWN_PREFIX],
        token_hash=kind.hash_token(token),
        **issued_with,
    )
    return credential, token


@transaction.atomic
def credential_revoke(*, credential: Credential) -> Credential:
    """Revoke a credential for good: its token stops authenticating at once (a kind that caches
    authentications forgets them on the save's signal). Revoking it again keeps the first
    revocation's time."""
    if credential.revoked_at is None:
        stored = _locked(credential)
        credential.revoked_at = stored.revoked_at or timezone.now()
        if stored.revoked_at is None:
            credential.save(update_fields=["revoked_at"])
    return credential


@transaction.atomic
def credential_rotate(*, credential: Credential) -> tuple[Credential, str]:
    """Issue a credential with the same company, name and ISSUE_FIELDS and revoke this one,
    in one transaction: the old token stops working as the new one starts. Return the new
    credential with its clear token. A revoked credential is not rotated (issue a new one):
    who revoked it meant its holder to stop."""
    stored = _locked(credential)
    if stored.revoked_at is not None:
        credential.revoked_at = stored.revoked_at
        raise Conflict(
            _("Esa credencial ya está revocada; emita una nueva."), code="credential_revoked"
        )
    replacement = credential_issue(
        type(credential),
        company=credential.company,
        name=stored.name,
        **{field: getattr(stored, field) for field in stored.ISSUE_FIELDS},
    )
    credential_revoke(credential=credential)
    return replacement


def _locked(credential: Credential) -> Credential:
    """The credential as stored, its row locked until the transaction ends."""
    return type(credential).objects.select_for_update().get(pk=credential.pk)
