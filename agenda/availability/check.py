"""The instant-level check of one slot, inside the booking transaction, under a lock."""

import functools
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

from django.db import connection
from django.db.models import DateTimeField, Exists, IntegerField, Subquery, Value
from django.utils.translation import gettext as _g
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from agenda.availability.busy import blocked_range, scheduled_in_window, working_intervals
from agenda.availability.local_time import describe_instant, in_words
from agenda.availability.queries import SETTINGS_FIELDS, loaded
from agenda.availability.search import customer_limits, nearest_free_slots
from agenda.availability.slots import Move, describe_slots
from agenda.models import (
    MAX_DURATION_MINUTES,
    AgendaSettings,
    Appointment,
    Professional,
    Service,
    TimeOff,
    lock_schedules,
)
from agenda.selectors import agenda_settings_for
from core.errors import ValidationFailed
from core.models import Company, Contact
from core.sql import qualified, table


def lock_booking(professional_id: int, contact_id: int) -> None:
    """Lock a professional's row and a customer's (FOR NO KEY UPDATE) until the transaction
    ends, in one statement: every booking and move takes the professional's lock, then the
    customer's (the rows are locked in the order of the FROM list), so one professional's
    bookings check and write one at a time (`lock_schedules`) and so do one customer's with
    two professionals (a customer is in one place at a time; the exclusion constraint is per
    professional). Read what the locks guard in a statement of its own after this one: a
    statement that waited for a lock still reads the snapshot of its start.
    On SQLite, whose write transactions run one at a time, nothing is sent. Call inside a
    transaction."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(_lock_booking_statement(), [professional_id, contact_id])


@functools.cache
def _lock_booking_statement() -> str:
    professional, contact = qualified(Professional, "id"), qualified(Contact, "id")
    return (
        f"SELECT {professional} FROM {table(Professional)}, {table(Contact)} "
        f"WHERE {professional} = %s AND {contact} = %s FOR NO KEY UPDATE"
    )


def _unavailable(
    message: str,
    code: str,
    *,
    company: Company,
    service: Service,
    professional: Professional,
    starts_at: datetime,
    now: datetime,
    move: Move | None,
) -> ValidationFailed:
    nearest = nearest_free_slots(
        company=company,
        service=service,
        around=starts_at,
        now=now,
        prefer=professional,
        move=move,
    )
    described = describe_slots(nearest, company.tz)
    if described:
        options = "; ".join(
            _g("%(weekday)s %(date)s a las %(time)s con %(professional)s") % in_words(d)
            for d in described
        )
        message = _g(
            "%(problem)s Las franjas libres más cercanas son: %(options)s. "
            "Consulte la disponibilidad para reservar una de ellas."
        ) % {"problem": message, "options": options}
    else:
        message = _g("%(problem)s No hay franjas libres cerca de esa fecha.") % {"problem": message}
    return ValidationFailed(message, code=code, nearest_free_slots=described)


def slot_taken_error(
    *,
    company: Company,
    service: Service,
    professional: Professional,
    starts_at: datetime,
    now: datetime,
    move: Move | None = None,
) -> ValidationFailed:
    return _unavailable(
        _g("Esa franja ya está ocupada."),
        "slot_taken",
        company=company,
        service=service,
        professional=professional,
        starts_at=starts_at,
        now=now,
        move=move,
    )


@dataclass(frozen=True)
class SlotFacts:
    """Everything `slot_facts_check` decides on for one professional at one start, read
    together: the company's booking rules, whether the professional is an active one of the
    company who gives the service, their weekly hours, and whether time off or another scheduled
    appointment touches the blocked range (the service plus its buffers)."""

    company: Company
    service: Service
    professional: Professional
    starts_at: datetime
    move: Move | None
    settings: AgendaSettings
    bookable: bool
    weekly: dict[int, list[tuple[time, time]]]
    time_off: bool
    taken: bool
    # The start of the customer's earliest other scheduled appointment overlapping the
    # service's time, if any (None when no customer was named).
    customer_busy_at: datetime | None = None
    # The customer's own scheduled appointment of this very slot (service, professional,
    # start), when asked (`own_booking`): what a booking of that intent already made.
    own_booking_id: int | None = None


def slot_facts(
    *,
    company: Company,
    service: Service,
    professional: Professional,
    starts_at: datetime,
    move: Move | None = None,
    contact_id: int | None = None,
    own_booking: bool = False,
) -> SlotFacts:
    """The facts of a slot in one statement (after the lock): the professional's row LEFT JOIN
    their hours and the company's agenda settings, with three EXISTS (gives the service; time
    off; another scheduled appointment, but the one `move` moves) on the same bounded index
    scans as a slot search and, for a customer (`contact_id`), the start of their earliest
    other scheduled appointment overlapping the service's time and, with `own_booking`, their
    own scheduled appointment of this very slot. One snapshot, so the check sees one instant.
    `professional` is refreshed from that row (its name, whether active), so it may come
    unread.

    First, in a statement of its own, the professional's row (and the customer's, with
    `contact_id`: `lock_booking`) is locked until the transaction ends. The customer's, so
    that two bookings of one customer with two professionals check and write one at a time.
    The professional's for two reasons. The bookings of one professional check and write
    one at a time: without it, two inserts that overlap can each find the other's uncommitted
    row in the exclusion constraint's check and wait for each other, a deadlock PostgreSQL
    breaks by failing one of them (a SYSTEM answer instead of "taken"), and fifty customers
    racing for a slot on a busy machine could make a chain of them. And a change of the
    professional's schedule in flight (time off, hours, services, which take the same lock)
    commits before the facts are read: the facts' statement, started after the lock is held,
    sees it (a statement that waited for the lock itself would still read the schedule of
    its start). Call inside a transaction.
    """
    block_from, block_until = blocked_range(service, starts_at)
    appointments = scheduled_in_window([professional.pk], block_from, block_until)
    if move is not None:
        appointments = appointments.exclude(pk=move.appointment_id)
    time_off = TimeOff.objects.filter(
        professional_id=professional.pk, ends_at__gt=block_from, starts_at__lt=block_until
    )
    gives = Professional.services.through.objects.filter(
        professional_id=professional.pk, service_id=service.pk
    )
    ends_at = starts_at + timedelta(minutes=service.duration_minutes)
    customer: Any = Value(None, output_field=DateTimeField())
    if contact_id is None:
        lock_schedules([professional.pk])
    else:
        lock_booking(professional.pk, contact_id)
        overlapping = Appointment.objects.filter(
            contact_id=contact_id,
            state=Appointment.State.SCHEDULED,
            # Bounded below too, so the (contact, starts_at) index scan reads only the window.
            starts_at__gt=starts_at - timedelta(minutes=MAX_DURATION_MINUTES),
            starts_at__lt=ends_at,
            ends_at__gt=starts_at,
        )
        if move is not None:
            overlapping = overlapping.exclude(pk=move.appointment_id)
        customer = Subquery(overlapping.order_by("starts_at").values("starts_at")[:1])
    own: Any = Value(None, output_field=IntegerField())
    if own_booking:
        if contact_id is None:
            raise ValueError("a customer's own booking is looked for with their contact_id")
        # On the (contact, starts_at) index, as the overlap's look.
        mine = Appointment.objects.filter(
            contact_id=contact_id,
            state=Appointment.State.SCHEDULED,
            starts_at=starts_at,
            professional_id=professional.pk,
            service_id=service.pk,
        )
        own = Subquery(mine.values("pk")[:1])
    rows = (
        Professional.objects.filter(company=company, pk=professional.pk)
        .order_by()
        .annotate(
            gives=Exists(gives),
            off=Exists(time_off),
            taken=Exists(appointments),
            customer_busy_at=customer,
            own_booking_id=own,
        )
        .values_list(
            "active",
            "display_name",
            "gives",
            "off",
            "taken",
            "customer_busy_at",
            "own_booking_id",
            "working_hours__weekday",
            "working_hours__start_time",
            "working_hours__end_time",
            *[f"company__agenda_settings__{name}" for name in SETTINGS_FIELDS],
        )
    )
    weekly: dict[int, list[tuple[time, time]]] = defaultdict(list)
    settings: AgendaSettings | None = None
    bookable = in_time_off = taken = False  # no row: not a professional of this company
    customer_busy_at = own_booking_id = None
    for row in rows:
        active, name, gives_service, off, busy, customer_busy_at, own_booking_id = row[:7]
        weekday, start, end = row[7:10]
        settings_values = row[10:]
        professional.active, professional.display_name = active, name
        bookable, in_time_off, taken = active and gives_service, off, busy
        if weekday is not None:
            weekly[weekday].append((start, end))
        if settings is None and settings_values[0] is not None:
            settings = loaded(
                AgendaSettings, dict(zip(SETTINGS_FIELDS, settings_values, strict=True))
            )
            settings.company = company
    if settings is None:  # the settings row is still to be created (or no such professional)
        settings = agenda_settings_for(company=company)
    return SlotFacts(
        company=company,
        service=service,
        professional=professional,
        starts_at=starts_at,
        move=move,
        settings=settings,
        bookable=bookable,
        weekly=weekly,
        time_off=in_time_off,
        taken=taken,
        customer_busy_at=customer_busy_at,
        own_booking_id=own_booking_id,
    )


def on_grid(weekly: dict[int, list[tuple[time, time]]], starts_at: datetime, tz, step: int) -> bool:
    """Whether `starts_at` is one of the starts a slot search offers: a whole number of steps
    (the company's slot step, in minutes) after the start of a working interval of its day."""
    day = starts_at.astimezone(tz).date()
    return any(
        open_at <= starts_at < close_at
        and (starts_at - open_at) % timedelta(minutes=step) == timedelta(0)
        for open_at, close_at in working_intervals(weekly, day, tz)
    )


def slot_facts_check(
    facts: SlotFacts,
    *,
    now: datetime,
    enforce_customer_rules: bool = True,
    grid: bool = False,
) -> None:
    """Decide on a slot from its facts, read at the instant (`slot_facts`).

    Raises ValidationFailed: past, too soon (customer rules) or too far, service or
    professional not bookable (a withdrawn service only for a new booking, not for a move),
    outside working hours or in time off, with `grid` off the slot grid (`on_grid`), or
    overlapping another scheduled appointment (then with the nearest free slots).
    """
    company, service, starts_at = facts.company, facts.service, facts.starts_at
    if starts_at <= now:
        raise ValidationFailed(
            _("Esa franja ya pasó. Elija una hora posterior a la actual."), code="slot_in_past"
        )
    settings = facts.settings
    earliest, horizon = customer_limits(settings, now)
    if enforce_customer_rules and starts_at < earliest:
        raise ValidationFailed(
            ngettext(
                "Esa franja empieza demasiado pronto: las reservas se hacen con al menos "
                "%(minutes)d minuto de antelación.",
                "Esa franja empieza demasiado pronto: las reservas se hacen con al menos "
                "%(minutes)d minutos de antelación.",
                settings.minimum_notice_minutes,
            )
            % {"minutes": settings.minimum_notice_minutes},
            code="slot_too_soon",
        )
    # Staff may book inside the notice (a customer at the desk), never past the horizon: the
    # agenda is open that far for everybody.
    if starts_at > horizon:
        raise ValidationFailed(
            _g("Solo se puede reservar con hasta %(days)d días de antelación.")
            % {"days": settings.booking_horizon_days},
            code="slot_beyond_horizon",
        )
    # A withdrawn service takes no new bookings, but the appointments already booked keep it
    # and can still be moved (`move`: the appointment being moved).
    moving = facts.move is not None
    if service.company_id != company.pk or not (service.active or moving):
        raise ValidationFailed(_("Ese servicio ya no se ofrece."), code="service_inactive")
    if not facts.bookable:
        raise ValidationFailed(
            _("Ese profesional no ofrece ese servicio."), code="professional_unavailable"
        )
    context = {
        "company": company,
        "service": service,
        "professional": facts.professional,
        "starts_at": starts_at,
        "now": now,
        "move": facts.move,
    }
    tz = company.tz
    ends_at = starts_at + timedelta(minutes=service.duration_minutes)
    day = starts_at.astimezone(tz).date()
    if not any(
        open_at <= starts_at and ends_at <= close_at
        for open_at, close_at in working_intervals(facts.weekly, day, tz)
    ):
        raise _unavailable(
            _g("Ese horario está fuera del horario de atención."), "slot_unavailable", **context
        )
    if facts.time_off:
        raise _unavailable(
            _g("Ese profesional no atiende en ese horario."), "slot_unavailable", **context
        )
    if facts.taken:
        raise slot_taken_error(**context)
    if grid and not on_grid(facts.weekly, starts_at, tz, facts.settings.slot_step_minutes):
        raise _unavailable(
            ngettext(
                "Esa hora no está en la cuadrícula de reservas (cada %(step)d minuto desde el "
                "inicio del horario).",
                "Esa hora no está en la cuadrícula de reservas (cada %(step)d minutos desde el "
                "inicio del horario).",
                facts.settings.slot_step_minutes,
            )
            % {"step": facts.settings.slot_step_minutes},
            "slot_off_grid",
            **context,
        )
    if facts.customer_busy_at is not None:
        described = describe_instant(facts.customer_busy_at, tz)
        raise ValidationFailed(
            _g(
                "Ya tiene otra cita el %(weekday)s %(date)s a las %(time)s que coincide con "
                "ese horario. Elija otra hora o cambie aquella cita."
            )
            % in_words(described),
            code="appointment_overlap",
            overlapping_appointment=described,
        )


def slot_lock_and_check(
    *,
    company: Company,
    service: Service,
    professional: Professional,
    starts_at: datetime,
    now: datetime,
    enforce_customer_rules: bool = True,
    move: Move | None = None,
    contact_id: int | None = None,
    grid: bool = False,
    own_booking: bool = False,
) -> SlotFacts:
    """Check, at the instant, that this professional can take this service at `starts_at`
    (`slot_facts_check` on `slot_facts`: the lock and one statement, and more only to refuse). Call
    inside the booking transaction, right before writing: it locks the professional's row
    (and the customer's, `contact_id`, whose other appointments must not overlap the new
    one) until that transaction ends (`slot_facts`). With `grid`, a start off the slot grid is
    refused too (staff's bookings, unless they override it on purpose). Returns the facts as
    that statement read them (the company's agenda settings among them), for the rest of the
    write. With `own_booking`, the same statement looks for the customer's own scheduled
    appointment of this very slot (`SlotFacts.own_booking_id`): when there is one, nothing is
    checked, and the caller answers it (agenda.services.appointment_book_once)."""
    facts = slot_facts(
        company=company,
        service=service,
        professional=professional,
        starts_at=starts_at,
        move=move,
        contact_id=contact_id,
        own_booking=own_booking,
    )
    if facts.own_booking_id is None:
        slot_facts_check(facts, now=now, enforce_customer_rules=enforce_customer_rules, grid=grid)
    return facts
