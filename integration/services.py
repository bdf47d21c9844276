"""Writes of the integration app: credentials, and public references for entities without one."""

from collections.abc import Iterable

from core.credentials.services import credential_issue, credential_revoke
from core.models import Company
from core.references import new_reference
from integration.models import (
    ContactReference,
    IntegrationCredential,
    ProfessionalReference,
    PublicReference,
    ServiceReference,
)

# kind -> (reference model, its one-to-one field, reference prefix)
REFERENCE_KINDS: dict[str, tuple[type[PublicReference], str, str]] = {
    "contact": (ContactReference, "contact", "CT"),
    "service": (ServiceReference, "service", "SV"),
    "professional": (ProfessionalReference, "professional", "PR"),
}
_ASSIGN_ROUNDS = 5


def integration_credential_issue(
    *, company: Company, name: str, scope: str = IntegrationCredential.Scope.READ
) -> tuple[IntegrationCredential, str]:
    """Create a credential; return it with its clear token, which is never stored
    (core.credentials' lifecycle, as every kind of credential)."""
    if scope not in IntegrationCredential.Scope.values:
        raise ValueError(f"unknown scope {scope!r}")
    return credential_issue(IntegrationCredential, company=company, name=name, scope=scope)


def integration_credential_revoke(*, credential: IntegrationCredential) -> IntegrationCredential:
    """Revoke a credential for good: its token stops authenticating at once."""
    return credential_revoke(credential=credential)


def public_references_assign(*, company: Company, kind: str, ids: Iterable[int]) -> dict[int, str]:
    """The public reference of each of the company's `kind` entities, drawing one for those
    that have none yet. Safe under concurrency: a twin request assigning the same entity, or
    a drawn code already taken, is skipped by ON CONFLICT DO NOTHING and read back."""
    model, field, prefix = REFERENCE_KINDS[kind]
    wanted = set(ids)
    known: dict[int, str] = {}
    for _round in range(_ASSIGN_ROUNDS):
        known.update(
            model.objects.filter(
                company=company, **{f"{field}_id__in": wanted - known.keys()}
            ).values_list(f"{field}_id", "reference")
        )
        missing = wanted - known.keys()
        if not missing:
            return known
        target = model._meta.get_field(field).related_model
        # Only the company's own entities: a stray id must never get this company's code.
        missing = set(
            target._default_manager.filter(company=company, pk__in=missing).values_list(
                "pk", flat=True
            )
        )
        wanted = known.keys() | missing
        model.objects.bulk_create(
            [
                model(company=company, reference=new_reference(prefix), **{f"{field}_id": pk})
                for pk in sorted(missing)
            ],
            ignore_conflicts=True,
        )
    raise RuntimeError(f"could not assign {kind} references")
