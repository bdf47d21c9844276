"""ledger_resolve_owned: unseen references are refused, another customer's is PERMISSION."""

import pytest

from core.errors import PermissionRefused, ValidationFailed
from core.services import contact_create
from tests.factories import BRUNO_EMAIL
from tooling.context import CallMeta, ToolContext
from tooling.ledger import LedgerEntry, ledger_record, ledger_resolve_owned

pytestmark = pytest.mark.django_db

OWNERS: dict[str, int] = {}


@pytest.fixture
def ctx(company):
    return ToolContext(company=company, meta=CallMeta(conversation_id="conv-owned"))


def owner_of(reference: str) -> int | None:
    return OWNERS.get(reference)


def test_a_seen_reference_resolves(ctx, ana):
    ledger_record(ctx, "case", [LedgerEntry("CS-AAAAAA")])

    entry = ledger_resolve_owned(ctx, "case", "cs-aaaaaa", contact=ana, owner_of=owner_of)

    assert entry.reference == "CS-AAAAAA"


def test_an_unseen_reference_of_nobody_or_of_the_speaker_is_not_seen(ctx, ana):
    OWNERS["CS-OWNED2"] = ana.pk

    for given in ("CS-NOBODY", "CS-OWNED2"):
        with pytest.raises(ValidationFailed) as raised:
            ledger_resolve_owned(ctx, "case", given, contact=ana, owner_of=owner_of)
        assert raised.value.code == "reference_not_seen"


def test_an_unseen_reference_of_another_customer_is_permission(ctx, ana, company):
    bruno = contact_create(company=company, first_name="Bruno", email=BRUNO_EMAIL)
    OWNERS["CS-BRUNO2"] = bruno.pk

    with pytest.raises(PermissionRefused) as raised:
        ledger_resolve_owned(ctx, "case", " cs-bruno2 ", contact=ana, owner_of=owner_of)

    assert raised.value.code == "not_owner"
