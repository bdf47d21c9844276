"""The agenda conversations: checks 1, 2, 3, 4 and 5 on bookings, cancellations and moves."""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from core.errors import ErrorType
from tooling.certification.answers import find, in_state, invented_reference, items
from tooling.certification.exchange import IDEMPOTENCY_KEY, Blocked, Contact
from tooling.certification.scenario import Scenario
from tooling.certification.verdicts import (
    verdict_error,
    verdict_foreign,
    verdict_once,
    verdict_refused_without_effect,
    verdict_terminal,
)

APPOINTMENTS = "list_my_appointments"


@dataclass(frozen=True)
class Slots:
    """Two free slots of one service as the first customer was shown them, the search that
    showed them, and what the same search showed the second customer."""

    search: dict[str, Any]
    slot: dict[str, Any]
    other: dict[str, Any]
    seen_by_bruno: list[dict[str, Any]]

    @property
    def service(self) -> str:
        return self.search["service"]


async def agenda(s: Scenario) -> None:
    slots = await two_free_slots(s)
    await book_twice(s, slots)
    await book_a_busy_slot(s, slots)
    await cancel_unseen_appointment(s)
    await book_unseen_slot(s, slots)
    await cancel_reference_that_exists_nowhere(s)
    await cancel_with_switched_identity(s)
    await read_with_switched_identity(s)
    await cancel_another_customers_appointment(s)
    await cancel_twice(s)
    await cancel_cancelled_appointment(s)
    await reschedule_attended_appointment(s, slots)


# --- reads that count effects --------------------------------------------------------------


async def scheduled_at(
    s: Scenario, conversation: str, contact: Contact, slot: dict[str, Any]
) -> list[dict[str, Any]]:
    """The contact's scheduled appointments at the slot's local date and time."""
    return [
        i
        for i in await s.mine(conversation, APPOINTMENTS, contact, "scheduled")
        if in_state(i, "scheduled")
        and i.get("date") == slot["date"]
        and i.get("time") == slot["time"]
        and i.get("professional") == slot.get("professional")
    ]


async def cancelled_count(s: Scenario, reference: str) -> int:
    """How many of the first customer's cancelled appointments carry this reference."""
    cancelled = await s.mine(s.a1, APPOINTMENTS, s.ana, "cancelled")
    mine = (i for i in cancelled if i.get("appointment") == reference)
    return sum(1 for i in mine if in_state(i, "cancelled"))


async def appointment_shown(s: Scenario, reference: str) -> dict[str, Any] | None:
    return find(await s.mine(s.a1, APPOINTMENTS, s.ana), "appointment", reference)


# --- the steps, in the order they run ------------------------------------------------------


async def two_free_slots(s: Scenario) -> Slots:
    """The first service with two free slots between 7 and 20 days from today."""
    services = items(
        await s.gw.call(s.a1, "list_services", s.most("list_services")), "list_services"
    )
    window = {
        "from": (s.today + timedelta(days=7)).isoformat(),
        "to": (s.today + timedelta(days=20)).isoformat(),
        "limit": 3,
    }
    for service in services:
        search = {"service": service["name"], **window}
        found = items(await s.gw.call(s.a1, "find_available_slots", search), "find_available_slots")
        if len(found) >= 2:
            break
    else:
        raise Blocked("no service has two free slots between 7 and 20 days from today")
    # The largest page of slots too, so check 6 measures the longest answer there is.
    await s.gw.call(s.a1, "find_available_slots", {**search, **s.most("find_available_slots")})
    # Bruno looks at the same slots before Ana books one (for the busy-slot check).
    seen_by_bruno = items(
        await s.gw.call(s.b1, "find_available_slots", search), "find_available_slots"
    )
    return Slots(search, found[0], found[1], seen_by_bruno)


async def book_twice(s: Scenario, slots: Slots) -> None:
    with s.probe(
        1,
        "same key twice: book_appointment",
        "a repeated booking returns the first answer and books once (counted by a read)",
    ) as row:
        book = {
            "identifier": s.ana.identifier,
            "service": slots.service,
            "slot": slots.slot["slot"],
        }
        before = len(await scheduled_at(s, s.a1, s.ana, slots.slot))
        first = await s.gw.call(s.a1, "book_appointment", book)
        second = await s.gw.call(s.a1, "book_appointment", book)
        after = len(await scheduled_at(s, s.a1, s.ana, slots.slot))
        s.judge(
            row,
            verdict_once(first, second, before, after),
            sent=f"{first.sent()} twice with the same {IDEMPOTENCY_KEY}",
        )
        if not first.is_error:
            s.state["appointment"] = first.body.get("appointment")


async def book_a_busy_slot(s: Scenario, slots: Slots) -> None:
    with s.probe(
        5,
        "busy slot: book_appointment",
        "a slot taken since it was shown is refused, not double-booked",
    ) as row:
        if find(slots.seen_by_bruno, "slot", slots.slot["slot"]) is None:
            raise Blocked("Bruno's search did not show the slot Ana booked")
        s.need("appointment")
        busy = await s.gw.call(
            s.b1,
            "book_appointment",
            {
                "identifier": s.bruno.identifier,
                "service": slots.service,
                "slot": slots.slot["slot"],
            },
        )
        unchanged = (
            not await scheduled_at(s, s.b1, s.bruno, slots.slot)
            and len(await scheduled_at(s, s.a1, s.ana, slots.slot)) == 1
        )
        s.judge(row, verdict_refused_without_effect(busy, unchanged, ErrorType.VALIDATION), busy)


async def cancel_unseen_appointment(s: Scenario) -> None:
    with s.probe(
        4,
        "unseen reference: cancel_appointment",
        "a mutation on the customer's own appointment, never shown in this conversation, "
        "is refused",
    ) as row:
        reference = s.need("appointment")
        attempt = await s.gw.call(
            s.blind,
            "cancel_appointment",
            {"identifier": s.ana.identifier, "appointment": reference},
        )
        unchanged = in_state(await appointment_shown(s, reference), "scheduled")
        s.judge(
            row,
            verdict_refused_without_effect(attempt, unchanged, ErrorType.VALIDATION),
            attempt,
        )


async def book_unseen_slot(s: Scenario, slots: Slots) -> None:
    with s.probe(
        4,
        "unseen slot: book_appointment",
        "a slot shown only in another conversation cannot be booked here",
    ) as row:
        attempt = await s.gw.call(
            s.blind,
            "book_appointment",
            {"identifier": s.ana.identifier, "service": slots.service, "slot": slots.other["slot"]},
        )
        unchanged = not await scheduled_at(s, s.a1, s.ana, slots.other)
        s.judge(
            row,
            verdict_refused_without_effect(attempt, unchanged, ErrorType.VALIDATION),
            attempt,
        )


async def cancel_reference_that_exists_nowhere(s: Scenario) -> None:
    with s.probe(
        4,
        "reference that exists nowhere: cancel_appointment",
        "an invented reference does not resolve: VALIDATION, never an action",
    ) as row:
        attempt = await s.gw.call(
            s.blind,
            "cancel_appointment",
            {"identifier": s.ana.identifier, "appointment": invented_reference("AP")},
        )
        s.judge(row, verdict_error(attempt, ErrorType.VALIDATION), attempt)


async def cancel_with_switched_identity(s: Scenario) -> None:
    with s.probe(
        2,
        "identity switch: cancel_appointment",
        "a conversation identified as one customer cannot act with another's identifier",
    ) as row:
        reference = s.need("appointment")
        if find(await s.mine(s.switch, APPOINTMENTS, s.ana), "appointment", reference) is None:
            raise Blocked("the booked appointment is not in the customer's list")
        attempt = await s.gw.call(
            s.switch,
            "cancel_appointment",
            {"identifier": s.bruno.identifier, "appointment": reference},
        )
        unchanged = in_state(await appointment_shown(s, reference), "scheduled")
        s.judge(
            row,
            verdict_refused_without_effect(attempt, unchanged, ErrorType.PERMISSION),
            attempt,
        )


async def read_with_switched_identity(s: Scenario) -> None:
    with s.probe(
        2,
        "identity switch on a read: list_my_appointments",
        "another customer's identifier does not open their data to this conversation",
    ) as row:
        attempt = await s.list_mine(s.switch, APPOINTMENTS, s.bruno)
        s.judge(row, verdict_error(attempt, ErrorType.PERMISSION), attempt)


async def cancel_another_customers_appointment(s: Scenario) -> None:
    with s.probe(
        2,
        "another customer's appointment: cancel_appointment",
        "a customer cannot cancel an appointment that is not theirs",
    ) as row:
        reference = s.need("appointment")
        attempt = await s.gw.call(
            s.b1,
            "cancel_appointment",
            {"identifier": s.bruno.identifier, "appointment": reference},
        )
        unchanged = in_state(await appointment_shown(s, reference), "scheduled")
        s.judge(row, verdict_foreign(attempt, unchanged), attempt)


async def cancel_twice(s: Scenario) -> None:
    with s.probe(
        1,
        "same key twice: cancel_appointment",
        "the key is looked up before the terminal-state guard: the retry of a cancellation "
        "that worked answers the same success, not 'already cancelled'",
    ) as row:
        reference = s.need("appointment")
        cancel = {"identifier": s.ana.identifier, "appointment": reference}
        before = await cancelled_count(s, reference)
        first = await s.gw.call(s.a1, "cancel_appointment", cancel)
        second = await s.gw.call(s.a1, "cancel_appointment", cancel)
        after = await cancelled_count(s, reference)
        s.judge(
            row,
            verdict_once(first, second, before, after),
            sent=f"{first.sent()} twice with the same {IDEMPOTENCY_KEY}",
        )
        if after:
            s.state["cancelled"] = reference


async def cancel_cancelled_appointment(s: Scenario) -> None:
    with s.probe(
        3,
        "cancelled appointment: cancel_appointment",
        "cancelling again is VALIDATION with the state the customer was shown",
    ) as row:
        reference = s.need("cancelled")
        cancelled = await s.mine(s.terminal, APPOINTMENTS, s.ana, "cancelled")
        shown = find(cancelled, "appointment", reference)
        if shown is None:
            raise Blocked("the cancelled appointment is not in the customer's list")
        attempt = await s.gw.call(
            s.terminal,
            "cancel_appointment",
            {"identifier": s.ana.identifier, "appointment": reference},
        )
        s.judge(row, verdict_terminal(attempt, shown), attempt)


async def reschedule_attended_appointment(s: Scenario, slots: Slots) -> None:
    with s.probe(
        3,
        "attended appointment: reschedule_appointment",
        "an attended appointment cannot be moved: VALIDATION with its state",
    ) as row:
        listed = await s.mine(s.terminal, APPOINTMENTS, s.ana, "attended")
        attended = [i for i in listed if in_state(i, "attended")]
        if not attended:
            raise Blocked("the sandbox has no attended appointment for the first contact")
        free = items(await s.gw.call(s.terminal, "find_available_slots", slots.search), "slots")
        if not free:
            raise Blocked("no free slot to reschedule to")
        attempt = await s.gw.call(
            s.terminal,
            "reschedule_appointment",
            {
                "identifier": s.ana.identifier,
                "appointment": attended[0]["appointment"],
                "slot": free[0]["slot"],
            },
        )
        s.judge(row, verdict_terminal(attempt, attended[0]), attempt)
