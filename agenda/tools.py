"""Agenda tools for the Gateway: thin wrappers over agenda selectors and services.

Each handler resolves what it is given (identity, references the conversation saw), makes one
service or selector call, and shapes a minimal answer: public references, names customers see,
local date and time, state. Never primary keys, never other customers' data.
"""

from datetime import timedelta
from typing import Any

from django.utils.translation import gettext as _
from pydantic import Field

from agenda import clock
from agenda.availability.dates import search_window
from agenda.availability.local_time import describe_instant, local_label
from agenda.availability.search import search_roster, slots_available
from agenda.availability.slots import (
    Move,
    describe_slots,
    slot_from_ledger,
    slot_ledger_data,
    slot_reference,
)
from agenda.models import CUSTOMER_STATE_LABELS, Appointment
from agenda.selectors import (
    appointment_list_for_contact,
    appointment_owner_id,
    service_catalogue,
    service_resolve,
    service_resolve_cached,
)
from agenda.services import (
    appointment_book_once,
    appointment_cancel,
    appointment_reschedule_once,
    appointment_to_move,
)
from core.identity import identified_contact
from core.l10n import day_shown, time_shown
from core.models import Contact
from core.states import state_filter, state_shown
from tooling.toolkit import (
    CONFIRMATION_HELP,
    ConfirmationCode,
    Cursor,
    Identifier,
    LedgerEntry,
    LedgerKind,
    ListOutput,
    PagedListOutput,
    ToolContext,
    ToolInput,
    ToolOutput,
    listing,
    page,
    tool,
)

APPOINTMENT_HELP = (
    "An appointment reference shown in this conversation (e.g. AP-7K2F9Q), its last "
    "characters, or its date and time as shown ('YYYY-MM-DD HH:MM')."
)
SLOT_HELP = (
    "A slot reference returned by find_available_slots in this conversation (e.g. SL-3NQ8RT), "
    "or its date and time as shown ('YYYY-MM-DD HH:MM')."
)


class LocalTimeOut(ToolOutput):
    date: str = Field(description="Local date, YYYY-MM-DD, in the company's time zone.")
    weekday: str = Field(description="The date's weekday, named in the company's language.")
    time: str = Field(description="Local time, HH:MM.")


class AppointmentOut(LocalTimeOut):
    appointment: str = Field(description="The appointment's reference.")
    service: str
    professional: str
    state: str = Field(description="Machine state: scheduled, cancelled, attended, no_show.")
    state_label: str = Field(description="The state as the customer is told it.")


class AppointmentDoneOut(AppointmentOut):
    already_done: bool = Field(
        description="True when this customer already had exactly this (an earlier call, with "
        "another key, did it): nothing was done twice and no message sent again. Tell the "
        "customer it is done; do not call again."
    )


class ServiceOut(ToolOutput):
    name: str
    description: str
    duration_minutes: int


class ServicesOut(PagedListOutput):
    items: list[ServiceOut]


class SlotOut(LocalTimeOut):
    slot: str = Field(description="The slot's reference, to book it in this conversation.")
    professional: str


class SlotsOut(ListOutput):
    items: list[SlotOut]
    service: str = Field(description="The service searched, as named in the catalogue.")
    searched_until: str | None = Field(
        default=None,
        description="Present when the range asked for was longer than searched: the last day "
        "searched (YYYY-MM-DD); search again from the day after it for more.",
    )


class AppointmentsOut(PagedListOutput):
    items: list[AppointmentOut]


def _seen_appointment(ctx: ToolContext, contact: Contact, given: str) -> LedgerEntry:
    """An appointment this conversation saw; another customer's exact reference is PERMISSION."""
    return ctx.seen(
        LedgerKind.APPOINTMENT,
        given,
        owner=lambda reference: appointment_owner_id(company=ctx.company, reference=reference),
        contact=contact,
    )


def _appointment_to_move(ctx: ToolContext, given: str, service_name: str) -> Appointment:
    """The appointment a slot search is for: one this conversation saw, for the customer it
    identified (the search takes no identifier, so it passes that one); whose it is and that
    it is of the named service, appointment_to_move checks."""
    contact = identified_contact(ctx.conversation)
    target = _seen_appointment(ctx, contact, given)
    return appointment_to_move(
        company=ctx.company, contact=contact, reference=target.reference, service_name=service_name
    )


def _appointment_out(ctx: ToolContext, appointment: Appointment) -> dict[str, Any]:
    return {
        "appointment": appointment.reference,
        "service": appointment.service.name,
        "professional": appointment.professional.display_name,
        **describe_instant(appointment.starts_at, ctx.company.tz),
        **state_shown(appointment.state, CUSTOMER_STATE_LABELS),
    }


def _show_appointments(ctx: ToolContext, appointments: list[Appointment]) -> None:
    tz = ctx.company.tz
    ctx.show(
        LedgerKind.APPOINTMENT,
        [LedgerEntry(a.reference, local_label(a.starts_at, tz)) for a in appointments],
    )


class ListServicesIn(ToolInput):
    limit: int = Field(default=20, ge=1, le=50, description="Maximum number of services.")
    cursor: str | None = Cursor


@tool(
    name="list_services",
    title="List bookable services",
    description=(
        "Lists the services customers can book, with their duration in minutes. "
        "Use the service name with find_available_slots."
    ),
    input=ListServicesIn,
    output=ServicesOut,
)
def list_services(ctx: ToolContext, params: ListServicesIn) -> dict:
    services = page(service_catalogue(company=ctx.company), params.limit, params.cursor)
    items = [
        {"name": s.name, "description": s.description, "duration_minutes": s.duration_minutes}
        for s in services.rows
    ]
    return listing(items, has_more=services.has_more, start=services.start)


class FindAvailableSlotsIn(ToolInput):
    service: str = Field(min_length=1, max_length=150, description="The service name.")
    from_: str = Field(
        alias="from",
        min_length=1,
        max_length=40,
        description=(
            "First day to search, as a date: YYYY-MM-DD (also 'hoy' or 'mañana'). The system "
            "resolves dates in the company's time zone and returns each slot's weekday: do not "
            "compute weekdays yourself."
        ),
    )
    to: str | None = Field(
        default=None,
        max_length=40,
        description=(
            "Last day to search, inclusive (YYYY-MM-DD). Default two weeks; at most 31 days are "
            "searched: a longer range answers searched_until, the last day searched."
        ),
    )
    professional: str | None = Field(
        default=None, max_length=100, description="Only this professional (name as shown)."
    )
    appointment: str | None = Field(
        default=None,
        max_length=60,
        description=(
            "When the customer wants to move an appointment: that appointment, as for "
            "reschedule_appointment (the customer must be identified). Its own time then counts "
            "as free, so the slots shown can be used with reschedule_appointment."
        ),
    )
    # At most 20: twenty slots stay well inside the 3,000-character answer.
    limit: int = Field(default=10, ge=1, le=20, description="Maximum number of slots.")


@tool(
    name="find_available_slots",
    title="Find free appointment slots",
    description=(
        "Free start times for a service, soonest first, each with a slot reference to book it, "
        "its local date, weekday and time, and the professional. Only these references can "
        "be booked in this conversation. To move an appointment, name it in appointment (its "
        "current time is not offered). A search starting past the booking horizon is an error "
        "naming the last bookable date."
    ),
    input=FindAvailableSlotsIn,
    output=SlotsOut,
)
def find_available_slots(ctx: ToolContext, params: FindAvailableSlotsIn) -> dict:
    now, company = clock.now(), ctx.company
    moving = None
    if params.appointment:
        # Its own service, even if withdrawn since: the move keeps it (slot_lock_and_check agrees).
        moving = _appointment_to_move(ctx, params.appointment, params.service)
        service = moving.service
    else:
        # A search only shows: the service comes from the process cache (booking checks it).
        service = service_resolve_cached(company=company, name=params.service)
    # Rules, professionals and their hours in one read; the named professional picked from it.
    roster = search_roster(company, service, named=params.professional or None)
    window = search_window(company=company, from_text=params.from_, to_text=params.to, now=now)
    found = slots_available(
        company=company,
        service=service,
        starts_at=window.start,
        ends_at=window.end,
        now=now,
        roster=roster,
        limit=params.limit + 1,
        move=Move.of(moving) if moving is not None else None,
        explain_horizon=True,
    )
    slots = found[: params.limit]
    has_more = len(found) > params.limit
    entries = [
        LedgerEntry(
            slot_reference(company, s.professional.pk, s.starts_at),
            s.label(company.tz),
            slot_ledger_data(s),
        )
        for s in slots
    ]
    ctx.show(LedgerKind.SLOT, entries)
    items = [
        {"slot": e.reference, **described}
        for e, described in zip(entries, describe_slots(slots, company.tz), strict=True)
    ]
    if not window.narrowed:
        return listing(items, has_more=has_more, service=service.name)
    # Days past the searched month were asked for and not searched: more may exist there.
    last_day = (window.end - timedelta(microseconds=1)).astimezone(company.tz).date()
    return listing(items, has_more=True, service=service.name, searched_until=last_day.isoformat())


class ListMyAppointmentsIn(ToolInput):
    identifier: Identifier
    state: state_filter(CUSTOMER_STATE_LABELS) | None = Field(
        default=None,
        description="Only appointments in this state (the Spanish labels are accepted too).",
    )
    limit: int = Field(default=10, ge=1, le=15, description="Maximum number of appointments.")
    cursor: str | None = Cursor


@tool(
    name="list_my_appointments",
    title="List the customer's appointments",
    description=(
        "The identified customer's appointments with their reference, service, professional, "
        "local date, weekday, time, state and state_label (what to tell the customer). "
        "Scheduled ones: upcoming soonest first, then past ones not yet closed by staff; "
        "otherwise newest first."
    ),
    input=ListMyAppointmentsIn,
    output=AppointmentsOut,
    identified=True,
    step_up=True,
)
def list_my_appointments(ctx: ToolContext, params: ListMyAppointmentsIn) -> dict:
    appointments = page(
        appointment_list_for_contact(contact=ctx.contact, state=params.state, now=clock.now()),
        params.limit,
        params.cursor,
    )
    _show_appointments(ctx, appointments.rows)
    return listing(
        [_appointment_out(ctx, a) for a in appointments.rows],
        has_more=appointments.has_more,
        start=appointments.start,
    )


class BookAppointmentIn(ToolInput):
    identifier: Identifier
    service: str = Field(min_length=1, max_length=150, description="The service name.")
    slot: str = Field(min_length=1, max_length=60, description=SLOT_HELP)


@tool(
    name="book_appointment",
    title="Book an appointment",
    description=(
        "Books a slot seen in this conversation for the identified customer. The system "
        "re-checks the slot at this instant: if it was taken or has passed, the error lists "
        "the nearest free times; call find_available_slots again to get their references. If "
        "the customer already has this very booking (same service, professional and time), "
        "the answer is that appointment with already_done: true, and nothing is booked twice."
    ),
    input=BookAppointmentIn,
    output=AppointmentDoneOut,
    write=True,
    identified=True,
    step_up=True,
)
def book_appointment(ctx: ToolContext, params: BookAppointmentIn) -> dict:
    slot = ctx.seen(LedgerKind.SLOT, params.slot)
    service = service_resolve(company=ctx.company, name=params.service)
    professional, starts_at = slot_from_ledger(company=ctx.company, data=slot.data)
    done = appointment_book_once(
        company=ctx.company,
        contact=ctx.contact,
        service=service,
        professional=professional,
        starts_at=starts_at,
        created_via=Appointment.Via.GATEWAY,
        conversation=ctx.conversation,
    )
    _show_appointments(ctx, [done.record])
    return _appointment_out(ctx, done.record) | {"already_done": done.already_done}


class RescheduleAppointmentIn(ToolInput):
    identifier: Identifier
    appointment: str = Field(min_length=1, max_length=60, description=APPOINTMENT_HELP)
    slot: str = Field(min_length=1, max_length=60, description=SLOT_HELP)
    confirmation_code: ConfirmationCode


@tool(
    name="reschedule_appointment",
    title="Move an appointment to another slot",
    description=(
        "Moves one of the identified customer's scheduled appointments to a slot seen in this "
        "conversation (search them with find_available_slots naming the appointment). Not "
        "possible for cancelled or past appointments, nor within the company's cut-off "
        "before the start. If the appointment is already at that slot (an earlier call moved "
        "it), the answer says already_done: true and nothing is moved or sent again. "
        + CONFIRMATION_HELP
    ),
    input=RescheduleAppointmentIn,
    output=AppointmentDoneOut,
    write=True,
    identified=True,
    step_up=True,
    confirmation=True,
)
def reschedule_appointment(ctx: ToolContext, params: RescheduleAppointmentIn) -> dict:
    target = _seen_appointment(ctx, ctx.contact, params.appointment)
    slot = ctx.seen(LedgerKind.SLOT, params.slot)
    professional, starts_at = slot_from_ledger(company=ctx.company, data=slot.data)
    tz = ctx.company.tz
    done = appointment_reschedule_once(
        company=ctx.company,
        contact=ctx.contact,
        reference=target.reference,
        professional=professional,
        starts_at=starts_at,
        # The move confirmed is this appointment to this start with this professional.
        authorize=lambda: ctx.confirm(
            reference=target.reference,
            summary=_("cambiar su cita %(reference)s al %(day)s a las %(time)s")
            % {
                "reference": target.reference,
                "day": day_shown(starts_at, tz),
                "time": time_shown(starts_at, tz),
            },
            professional=professional.pk,
            start=starts_at.isoformat(),
        ),
    )
    _show_appointments(ctx, [done.record])
    return _appointment_out(ctx, done.record) | {"already_done": done.already_done}


class CancelAppointmentIn(ToolInput):
    identifier: Identifier
    appointment: str = Field(min_length=1, max_length=60, description=APPOINTMENT_HELP)
    confirmation_code: ConfirmationCode


@tool(
    name="cancel_appointment",
    title="Cancel an appointment",
    description=(
        "Cancels one of the identified customer's scheduled appointments, if the company's "
        "cut-off before the start has not passed. " + CONFIRMATION_HELP
    ),
    input=CancelAppointmentIn,
    output=AppointmentOut,
    write=True,
    destructive=True,
    identified=True,
    step_up=True,
    confirmation=True,
)
def cancel_appointment(ctx: ToolContext, params: CancelAppointmentIn) -> dict:
    target = _seen_appointment(ctx, ctx.contact, params.appointment)
    appointment = appointment_cancel(
        company=ctx.company,
        reference=target.reference,
        contact=ctx.contact,
        authorize=lambda: ctx.confirm(
            reference=target.reference,
            summary=_("anular su cita %(reference)s") % {"reference": target.reference},
        ),
    )
    return _appointment_out(ctx, appointment)
