"""Writes of the test app, written like the domain services: guards inside, after a row lock."""

import os
import time
from pathlib import Path

from django.db import transaction
from django.db.models import F
from django.utils.translation import gettext_lazy as _

from core.errors import NotFound, PermissionRefused, ValidationFailed
from core.models import Company
from core.references import new_reference
from tests.testapp.models import Counter, Reservation


@transaction.atomic
def reservation_create(*, company: Company, owner: str, reference: str = "") -> Reservation:
    return Reservation.objects.create(
        company=company, owner=owner, reference=reference or new_reference("RS")
    )


@transaction.atomic
def reservation_cancel(*, company: Company, reference: str, requested_by: str) -> Reservation:
    """Cancel a scheduled reservation of `requested_by`: ownership, then the terminal state."""
    reservation = (
        Reservation.objects.select_for_update().filter(company=company, reference=reference).first()
    )
    if reservation is None:
        raise NotFound(_("No encontré esa reserva."), code="reservation_not_found")
    if reservation.owner != requested_by:
        raise PermissionRefused(_("Esa reserva no está a nombre de quien me habla."))
    if reservation.state != Reservation.State.SCHEDULED:
        raise ValidationFailed(
            _("Esa reserva ya está cancelada."), code="invalid_state", state=reservation.state
        )
    reservation.state = Reservation.State.CANCELLED
    reservation.cancellations = F("cancellations") + 1
    reservation.save(update_fields=["state", "cancellations"])
    reservation.refresh_from_db()
    return reservation


@transaction.atomic
def counter_increment(*, company: Company, name: str, by: int = 1, hold_ms: int = 0) -> Counter:
    """Add `by` to a counter; `hold_ms` keeps the transaction open (a slow effect)."""
    counter, _created = Counter.objects.select_for_update().get_or_create(
        company=company, name=name
    )
    counter.value = F("value") + by
    counter.save(update_fields=["value"])
    counter.refresh_from_db()
    if hold_ms:
        # A test in another process starts its twin once this file exists, instead of guessing
        # how long the first call takes to get here.
        if marker := os.environ.get("GARANTE_TESTAPP_HOLD_MARKER"):
            Path(marker).touch()
        time.sleep(hold_ms / 1000)
    return counter
