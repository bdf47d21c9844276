"""The one way a new record gets a public reference: drawn at random, the unique index
decides, and only a collision with a taken reference is drawn again."""

from collections.abc import Iterator

import pytest
from django.db import IntegrityError, transaction

from core import references
from core.models import Company
from core.references import (
    insert_unless_reference_taken,
    insert_with_fresh_reference,
    reference_unique_fields,
)
from core.services import contact_create
from support.models import Case
from tests.testapp.models import Reservation

pytestmark = pytest.mark.django_db


def _draws(monkeypatch: pytest.MonkeyPatch, *codes: str) -> Iterator[str]:
    """Make the draws return these codes, in order; the iterator tells what was left undrawn."""
    draws = iter(codes)
    monkeypatch.setattr(references, "new_reference", lambda prefix: next(draws))
    return draws


def _case(company: Company, contact) -> Case:
    return Case(company=company, contact=contact, subject="Pedido", description="No llegó")


def test_a_collision_is_drawn_again_and_the_callers_transaction_stays_usable(company, monkeypatch):
    """In the caller's transaction, a taken reference is undone by its savepoint and drawn
    again; the caller goes on writing afterwards."""
    Reservation.objects.create(company=company, owner="a", reference="RS-TAKEN2")
    draws = _draws(monkeypatch, "RS-TAKEN2", "RS-FRESH3")

    with transaction.atomic():
        reservation = insert_with_fresh_reference(
            Reservation(company=company, owner="b"), prefix="RS"
        )
        Reservation.objects.create(company=company, owner="c", reference="RS-AFTER4")

    assert reservation.reference == "RS-FRESH3"
    assert list(draws) == []
    assert set(Reservation.objects.values_list("reference", "owner")) == {
        ("RS-TAKEN2", "a"),
        ("RS-FRESH3", "b"),
        ("RS-AFTER4", "c"),
    }


def test_another_integrity_error_is_raised_as_it_comes_without_drawing_again(company, monkeypatch):
    """A refusal that is not the reference's (here a missing owner) is not a collision."""
    draws = _draws(monkeypatch, "RS-FIRST2", "RS-OTHER3")

    with pytest.raises(IntegrityError):
        insert_with_fresh_reference(Reservation(company=company, owner=None), prefix="RS")

    assert list(draws) == ["RS-OTHER3"]
    assert not Reservation.objects.exists()


def test_it_gives_up_after_a_bounded_number_of_draws(company, monkeypatch):
    Reservation.objects.create(company=company, owner="a", reference="RS-TAKEN2")
    monkeypatch.setattr(references, "new_reference", lambda prefix: "RS-TAKEN2")

    with pytest.raises(IntegrityError, match=r"no free testapp\.Reservation reference in 8 draws"):
        insert_with_fresh_reference(Reservation(company=company, owner="b"), prefix="RS")

    assert Reservation.objects.count() == 1


def test_a_reference_unique_per_company_collides_only_within_the_company(
    company, other_company, ana, monkeypatch
):
    """Without a savepoint (ON CONFLICT DO NOTHING on PostgreSQL), a code taken in the same
    company is drawn again; the same code in another company is no collision."""
    stranger = contact_create(company=other_company, first_name="Eva", phone="+34600999888")
    theirs = insert_with_fresh_reference(
        _case(other_company, stranger), prefix="CS", insert=insert_unless_reference_taken
    )
    ours = insert_with_fresh_reference(
        _case(company, ana), prefix="CS", insert=insert_unless_reference_taken
    )
    draws = _draws(monkeypatch, ours.reference, theirs.reference)

    again = insert_with_fresh_reference(
        _case(company, ana), prefix="CS", insert=insert_unless_reference_taken
    )

    assert again.reference == theirs.reference
    assert list(draws) == []
    assert Case.objects.filter(reference=theirs.reference).count() == 2


def test_the_unique_fields_of_a_reference_are_read_from_the_model():
    assert reference_unique_fields(Reservation) == ("reference",)
    assert reference_unique_fields(Case) == ("company", "reference")
