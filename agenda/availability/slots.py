"""A free slot: its public reference, what the exposure ledger keeps, how customers read it."""

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.utils.translation import gettext_lazy as _

from agenda.availability.local_time import describe_instants, local_label
from agenda.models import Professional
from core.errors import ValidationFailed
from core.models import Company
from core.references import ALPHABET as REFERENCE_ALPHABET
from core.references import LENGTH as REFERENCE_LENGTH


@dataclass(frozen=True)
class Move:
    """An appointment being moved, as it stands before the move. Its own blocked time counts
    as free for the move (its neighbouring starts are offered), but its current slot, the same
    professional at the same start, is no move at all: no search for the move offers it."""

    appointment_id: int
    professional_id: int
    starts_at: datetime  # aware, UTC

    @classmethod
    def of(cls, appointment: Any) -> "Move":
        """Call before the appointment's times change (its reschedule transition)."""
        return cls(appointment.pk, appointment.professional_id, appointment.starts_at)

    def is_current(self, professional_id: int, starts_at: datetime) -> bool:
        return professional_id == self.professional_id and starts_at == self.starts_at


@dataclass(frozen=True)
class Slot:
    professional: Professional
    starts_at: datetime  # aware, UTC
    ends_at: datetime

    def local(self, tz: ZoneInfo) -> datetime:
        return self.starts_at.astimezone(tz)

    def label(self, tz: ZoneInfo) -> str:
        """The loose human key of a slot: local "YYYY-MM-DD HH:MM"."""
        return local_label(self.starts_at, tz)


def slot_reference(company: Company, professional_id: int, starts_at: datetime) -> str:
    """A short public code for a slot, stable across searches (the same slot keeps its code,
    so repeated searches do not flood the ledger). It reveals nothing: a digest, not an id."""
    seed = f"{company.pk}:{professional_id}:{int(starts_at.timestamp())}".encode()
    number = int.from_bytes(hashlib.sha256(seed).digest()[:8], "big")
    code = []
    for _i in range(REFERENCE_LENGTH):
        number, digit = divmod(number, len(REFERENCE_ALPHABET))
        code.append(REFERENCE_ALPHABET[digit])
    return "SL-" + "".join(code)


def slot_ledger_data(slot: "Slot") -> dict[str, object]:
    """What the exposure ledger keeps about a slot (server-side only, never shown)."""
    return {"professional": slot.professional.pk, "start": slot.starts_at.isoformat()}


def slot_from_ledger(*, company: Company, data: dict | None) -> tuple[Professional, datetime]:
    """The professional and start instant of a slot the conversation was shown.

    The professional is not read here: the booking or move reads and checks it, under its
    lock, in the one statement of the slot's facts (`check.slot_facts`, which refuses one
    no longer of the company, active or giving the service)."""
    data = data or {}
    professional_id = data.get("professional")
    try:
        starts_at = datetime.fromisoformat(str(data.get("start")))
    except ValueError:
        starts_at = None
    if not isinstance(professional_id, int) or starts_at is None:
        raise ValidationFailed(
            _("Esa franja ya no está disponible. Consulte de nuevo la disponibilidad."),
            code="slot_unavailable",
        )
    return Professional(pk=professional_id, company=company), starts_at


def describe_slots(slots: list[Slot], tz: ZoneInfo) -> list[dict[str, str]]:
    """What customers are told of each slot: local date, weekday and time, and who."""
    described = describe_instants([s.starts_at for s in slots], tz)
    return [
        {**d, "professional": s.professional.display_name}
        for s, d in zip(slots, described, strict=True)
    ]
