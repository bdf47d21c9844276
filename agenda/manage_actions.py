"""The changes a manage-my-booking link's page makes (agenda.manage_links), once per form.

Moving and cancelling go through the agent's services, `appointment_reschedule` and
`appointment_cancel`, as the customer (`contact`): ownership, terminal states, the cut-off,
the slot and the customer's other appointments are checked there, and they write the usual
confirmation. Each submitted form runs under the idempotency engine with its form token as the
key, so a second submit of it answers the first's result and changes nothing; the state
history records the change as the customer's, from the link.
"""

from datetime import datetime
from typing import Any

from agenda.availability.slots import slot_from_ledger
from agenda.manage_links import ManageTarget
from agenda.services import appointment_cancel, appointment_reschedule
from core.customer_links import form_idempotency_key, link_digest
from core.idempotency import idempotent_execute

# What the state history says of a change made from a link (its `by` is no staff member).
HISTORY_NOTE = "by the customer, from the link in their appointment message"
MAX_REASON = 300


def _note(reason: str = "") -> str:
    reason = " ".join(reason.split())[:MAX_REASON]
    return f"{HISTORY_NOTE}: {reason}" if reason else HISTORY_NOTE


def manage_cancel(target: ManageTarget, *, nonce: str, reason: str) -> dict[str, Any]:
    """Cancel the link's appointment as its customer, once per form (`nonce`): a second
    submit of the same form answers the first's result and changes nothing."""
    appointment = target.appointment
    company = appointment.company
    reason = " ".join(reason.split())[:MAX_REASON]

    def effect() -> tuple[dict[str, Any], int]:
        appointment_cancel(
            company=company,
            reference=appointment.reference,
            contact=appointment.contact,
            description=_note(reason),
        )
        return {"done": "cancelled"}, 200

    return idempotent_execute(
        company=company,
        key=form_idempotency_key(nonce),
        operation="agenda.link.cancel",
        request={"link": link_digest(target.key), "reason": reason},
        effect=effect,
    ).body


def manage_move(target: ManageTarget, *, nonce: str, slot: dict[str, Any]) -> dict[str, Any]:
    """Move the link's appointment, as its customer, to a slot its page offered (`chosen_slot`),
    once per form (`nonce`). The slot is checked again at this instant by the service
    (taken meanwhile, past, within the cut-off: VALIDATION, nothing changed)."""
    appointment = target.appointment
    company = appointment.company

    def effect() -> tuple[dict[str, Any], int]:
        professional, starts_at = slot_from_ledger(company=company, data=slot)
        moved = appointment_reschedule(
            company=company,
            reference=appointment.reference,
            starts_at=starts_at,
            professional=professional,
            contact=appointment.contact,
            description=_note(),
        )
        return {"done": "moved", "starts_at": moved.starts_at.isoformat()}, 200

    return idempotent_execute(
        company=company,
        key=form_idempotency_key(nonce),
        operation="agenda.link.move",
        request={"link": link_digest(target.key), "slot": slot},
        effect=effect,
    ).body


def slot_data_start(slot: dict[str, Any]) -> datetime | None:
    try:
        return datetime.fromisoformat(str(slot.get("start")))
    except ValueError:
        return None
