"""Writes of the agenda: professionals and schedules, and every appointment transition.

Each appointment write runs in a transaction, locks the row it changes, re-checks ownership,
state and availability at that instant, and only then calls the model's FSM transition. A
booking, a move and a cancellation also write, in that transaction, the messages they owe the
customer (agenda.appointment_messages: a confirmation, a reminder), sent by Celery once it commits.
"""

from collections.abc import Callable, Iterable
from datetime import UTC, datetime, time, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils.translation import gettext as _g
from django.utils.translation import gettext_lazy as _

from agenda import clock
from agenda.appointment_messages import appointment_messages_after
from agenda.availability.busy import blocked_range
from agenda.availability.check import slot_lock_and_check, slot_taken_error
from agenda.availability.slots import Move
from agenda.guards import (
    appointment_check_cutoff,
    appointment_check_owner,
    appointment_check_scheduled,
    appointment_check_started,
    appointment_lock,
)
from agenda.models import (
    NOTES_MAX_LENGTH,
    AgendaSettings,
    Appointment,
    AppointmentMessage,
    Professional,
    Service,
    TimeOff,
    WorkingHours,
)
from agenda.selectors import (
    appointment_get_for_contact,
    appointment_standing,
    fold_text,
)
from core.errors import NotInCompany, ValidationFailed
from core.idempotency import Done, Intent, once_per_intent
from core.models import Company, Contact, Conversation
from core.reasons import reason_checked
from core.references import insert_with_fresh_reference, normalize_reference, reference_taken
from core.sql import insert_unless_conflict
from core.sweeps import sweep
from core.transactions import joined

_OVERLAP_CONSTRAINT = "appointment_no_overlap"


# --- Professionals and schedules ---------------------------------------------------------------


@transaction.atomic
def professional_create(
    *,
    company: Company,
    display_name: str,
    services: Iterable[Service] = (),
    weekly_hours: Iterable[tuple[int, time, time]] = (),
    active: bool = True,
) -> Professional:
    """Create a professional, the services they give and their weekly hours
    (weekday 0 = Monday, local times)."""
    services = list(services)
    for service in services:
        NotInCompany.check(
            service.company_id, company.pk, _("No encontré ese servicio."), code="service_not_found"
        )
    professional = Professional.objects.create(
        company=company, display_name=display_name.strip(), active=active
    )
    professional.services.set(services)
    WorkingHours.objects.bulk_create(
        WorkingHours(professional=professional, weekday=day, start_time=start, end_time=end)
        for day, start, end in weekly_hours
    )
    return professional


@transaction.atomic
def time_off_add(
    *, professional: Professional, starts_at: datetime, ends_at: datetime, reason: str = ""
) -> TimeOff:
    if ends_at <= starts_at:
        raise ValidationFailed(
            _("El periodo de ausencia debe terminar después de empezar."), code="invalid_period"
        )
    return TimeOff.objects.create(
        professional=professional, starts_at=starts_at, ends_at=ends_at, reason=reason
    )


# --- Appointments ------------------------------------------------------------------------------


def _violated_constraint(error: IntegrityError) -> str | None:
    cause = error.__cause__
    diag = getattr(cause, "diag", None)
    return getattr(diag, "constraint_name", None)


def appointment_to_move(
    *, company: Company, contact: Contact, reference: str, service_name: str
) -> Appointment:
    """The appointment `contact` wants to move, as a search for slots to move it to names it:
    theirs (NotFound; PermissionRefused for another's) and of the service the search is for.
    A move keeps its service (appointment_reschedule keeps it): another service is
    VALIDATION `service_mismatch`, so the customer books it instead. Reads only."""
    appointment = appointment_get_for_contact(company=company, contact=contact, reference=reference)
    if fold_text(service_name) not in fold_text(appointment.service.name):
        raise ValidationFailed(
            _(
                "Una cita cambia de hora, no de servicio. Para otro servicio, reserve una "
                "cita nueva."
            ),
            code="service_mismatch",
        )
    return appointment


def _write_times(
    write: Callable[[], None],
    appointment: Appointment,
    *,
    company: Company,
    now: datetime,
    move: Move | None,
) -> None:
    """Run `write` (which saves the appointment's times) in a savepoint; on PostgreSQL the
    exclusion constraint is the last word on overlaps (a concurrent booking that committed
    first makes this one fail), and the savepoint undoes the write and leaves the transaction
    usable to look for the nearest free slots."""
    try:
        with transaction.atomic():
            write()
    except IntegrityError as error:
        if _violated_constraint(error) != _OVERLAP_CONSTRAINT:
            raise
        raise _overlap_refused(appointment, company=company, now=now, move=move) from None


def _overlap_refused(
    appointment: Appointment, *, company: Company, now: datetime, move: Move | None
) -> ValidationFailed:
    """The exclusion constraint's verdict on the appointment's times, with the nearest free
    slots: read in the transaction, which must still be usable."""
    return slot_taken_error(
        company=company,
        service=appointment.service,
        professional=appointment.professional,
        starts_at=appointment.starts_at,
        now=now,
        move=move,
    )


def _insert(appointment: Appointment, *, company: Company, now: datetime) -> None:
    """Insert the appointment under a fresh reference, without a savepoint on PostgreSQL: the
    INSERT yields to any constraint (ON CONFLICT DO NOTHING), so a taken reference is drawn
    again and an overlap the exclusion constraint refuses (a writer that skipped the
    professional's lock; it is a backstop under it) is VALIDATION with the nearest free slots,
    the transaction still usable to look for them. Elsewhere a savepoint (`_write_times`)."""

    def write(appointment: Appointment) -> bool:
        if connection.vendor != "postgresql":
            _write_times(appointment.save, appointment, company=company, now=now, move=None)
            return True
        if insert_unless_conflict(appointment):
            return True
        if reference_taken(appointment):
            return False
        raise _overlap_refused(appointment, company=company, now=now, move=None)

    insert_with_fresh_reference(appointment, prefix="AP", insert=write)


def appointment_book(
    *,
    company: Company,
    contact: Contact,
    service: Service,
    professional: Professional,
    starts_at: datetime,
    created_via: str,
    conversation: Conversation | None = None,
    now: datetime | None = None,
    enforce_customer_rules: bool = True,
    grid: bool = False,
    notes: str = "",
) -> Appointment:
    """Book `service` with `professional` at `starts_at` for `contact`.

    Availability is re-validated here, at the instant, inside the transaction (on the SQLite
    demo, whose write transactions are serialised, that is what keeps a slot single). Staff
    pass enforce_customer_rules=False to skip the minimum notice (never the past, the horizon
    or a busy slot). With `grid` (staff's bookings unless they override it on purpose) the
    start must be one a slot search offers (`on_grid`), else VALIDATION `slot_off_grid` with
    the nearest free slots. `notes` are staff's, kept on the appointment (never sent).
    The professional's and the customer's rows are locked, then every check reads one
    snapshot (`slot_lock_and_check`), before the writes: the INSERT (`_insert`: the exclusion
    constraint's verdict becomes VALIDATION, a reference collision is drawn again) and the
    customer's messages. A refusal leaves a caller's transaction usable (`joined`).
    """
    appointment = _book(
        company=company,
        contact=contact,
        service=service,
        professional=professional,
        starts_at=starts_at,
        created_via=created_via,
        conversation=conversation,
        now=now,
        enforce_customer_rules=enforce_customer_rules,
        grid=grid,
        notes=notes,
    )
    assert appointment is not None  # nothing stands in its way without `unless_booked`
    return appointment


def _book(
    *,
    company: Company,
    contact: Contact,
    service: Service,
    professional: Professional,
    starts_at: datetime,
    created_via: str,
    conversation: Conversation | None = None,
    now: datetime | None = None,
    enforce_customer_rules: bool = True,
    grid: bool = False,
    notes: str = "",
    unless_booked: bool = False,
) -> Appointment | None:
    """`appointment_book`; with `unless_booked`, None, having checked, booked and sent
    nothing, when the customer already has this very booking (service, professional, start),
    which the check's statement looks for after the customer's row is locked."""
    now = now or clock.now()
    NotInCompany.check(
        contact.company_id, company.pk, _("No encontré ese contacto."), code="contact_not_found"
    )

    with joined():
        facts = slot_lock_and_check(
            company=company,
            service=service,
            professional=professional,
            starts_at=starts_at,
            now=now,
            enforce_customer_rules=enforce_customer_rules,
            contact_id=contact.pk,
            grid=grid,
            own_booking=unless_booked,
        )
        if facts.own_booking_id is not None:
            return None
        ends_at = starts_at + timedelta(minutes=service.duration_minutes)
        block_from, block_until = blocked_range(service, starts_at)
        appointment = Appointment(
            company=company,
            contact=contact,
            service=service,
            professional=professional,
            starts_at=starts_at,
            ends_at=ends_at,
            blocked_from=block_from,
            blocked_until=block_until,
            created_via=created_via,
            conversation=conversation,
            notes=notes_checked(notes),
        )
        _insert(appointment, company=company, now=now)
        appointment_messages_after(
            appointment,
            AppointmentMessage.Kind.BOOKED,
            now=now,
            reminder_hours=facts.settings.reminder_hours_before,
        )
        return appointment


def appointment_book_once(
    *,
    company: Company,
    contact: Contact,
    service: Service,
    professional: Professional,
    starts_at: datetime,
    created_via: str,
    conversation: Conversation | None = None,
    now: datetime | None = None,
) -> Done[Appointment]:
    """`appointment_book`, once per intent: the customer and the slot (service, professional,
    start). A call that finds that customer already booked there (a model that re-planned with
    a new key) answers that appointment, `already_done`, and books and sends nothing. Another
    customer, or another professional at the same time, is another intent.

    The intent costs a first booking no statement (core.idempotency.once_per_intent, `held`
    and `make_looks`): every booking of a customer locks the customer's row before its check
    (agenda.availability.check.lock_booking), so the calls of one intent run one at a time,
    and the check's statement, which starts after that lock, also looks for the customer's
    own appointment of the slot (`slot_lock_and_check`'s `own_booking`)."""
    intent = Intent.of(
        "book_appointment",
        company=company,
        contact=contact,
        service=service.pk,
        professional=professional.pk,
        start=starts_at.astimezone(UTC).isoformat(),
    )
    return once_per_intent(
        intent,
        find=lambda: appointment_standing(
            company=company,
            contact=contact,
            starts_at=starts_at,
            professional=professional,
            service=service,
        ),
        make=lambda: _book(
            company=company,
            contact=contact,
            service=service,
            professional=professional,
            starts_at=starts_at,
            created_via=created_via,
            conversation=conversation,
            now=now,
            unless_booked=True,
        ),
        held=True,
        make_looks=True,
    )


def appointment_reschedule_once(
    *,
    company: Company,
    contact: Contact,
    reference: str,
    starts_at: datetime,
    professional: Professional,
    now: datetime | None = None,
    authorize: Callable[[], None] | None = None,
) -> Done[Appointment]:
    """`appointment_reschedule` for a customer, once per intent: the appointment and its new
    start (and professional). An appointment already there (moved by an earlier call with
    another key) is answered as it stands, `already_done`, with no second "moved" message
    (and `authorize` is not asked: nothing is done)."""
    intent = Intent.of(
        "reschedule_appointment",
        company=company,
        contact=contact,
        appointment=normalize_reference(reference),
        professional=professional.pk,
        start=starts_at.astimezone(UTC).isoformat(),
    )
    return once_per_intent(
        intent,
        find=lambda: appointment_standing(
            company=company,
            contact=contact,
            starts_at=starts_at,
            professional=professional,
            reference=reference,
        ),
        make=lambda: appointment_reschedule(
            company=company,
            reference=reference,
            contact=contact,
            professional=professional,
            starts_at=starts_at,
            now=now,
            authorize=authorize,
        ),
    )


def appointment_reschedule(
    *,
    company: Company,
    reference: str,
    starts_at: datetime,
    professional: Professional | None = None,
    contact: Contact | None = None,
    now: datetime | None = None,
    enforce_customer_rules: bool = True,
    by: Any = None,
    description: str | None = None,
    grid: bool = False,
    authorize: Callable[[], None] | None = None,
) -> Appointment:
    """Move a scheduled appointment to a new start (and optionally professional).

    Customers (`contact` given) only move their own, and not after the cut-off. `description`
    goes to the state history beside `by` (who acted when no staff member did). `authorize`,
    if given, runs once the appointment and the new slot passed every check, before the move
    (the customer's confirmation: a move refused anyway asks none).
    """
    now = now or clock.now()

    with joined():
        appointment = appointment_lock(company, reference, with_cutoff=enforce_customer_rules)
        appointment_check_owner(contact, appointment)
        appointment_check_scheduled(appointment)
        if enforce_customer_rules:
            appointment_check_cutoff(appointment, now, "reschedule")
        moved_to = professional or appointment.professional
        move = Move.of(appointment)  # as it stands, before the transition changes its times
        service = appointment.service
        facts = slot_lock_and_check(
            company=company,
            service=service,
            professional=moved_to,
            starts_at=starts_at,
            now=now,
            enforce_customer_rules=enforce_customer_rules,
            move=move,
            contact_id=appointment.contact_id,
            grid=grid,
        )
        if authorize is not None:
            authorize()
        ends_at = starts_at + timedelta(minutes=service.duration_minutes)
        block_from, block_until = blocked_range(service, starts_at)

        def write() -> None:
            # In the savepoint with the UPDATE, so the transition's log goes if it fails.
            appointment.reschedule(
                professional=moved_to,
                starts_at=starts_at,
                ends_at=ends_at,
                blocked_from=block_from,
                blocked_until=block_until,
                by=by,
                description=description,
            )
            appointment.save()

        _write_times(write, appointment, company=company, now=now, move=move)
        appointment_messages_after(
            appointment,
            AppointmentMessage.Kind.MOVED,
            now=now,
            reminder_hours=facts.settings.reminder_hours_before,
        )
        return appointment


def appointment_cancel(
    *,
    company: Company,
    reference: str,
    contact: Contact | None = None,
    now: datetime | None = None,
    enforce_cutoff: bool = True,
    by: Any = None,
    reason: str = "",
    description: str | None = None,
    authorize: Callable[[], None] | None = None,
) -> Appointment:
    """Cancel a scheduled appointment. Customers (`contact` given) only cancel their own and
    not after the company's cut-off; staff pass enforce_cutoff=False. `authorize`, if given,
    runs after those checks and before the cancellation (the customer's confirmation).

    `reason` (plain text, core.reasons; staff give one in the admin) is kept in the history
    and told to the customer in the cancellation message. `description`, as for
    appointment_reschedule, is the history's note instead (a customer's own cancellation from
    their link: who did it, and their words), told to nobody."""
    now = now or clock.now()
    reason = reason_checked(reason)

    with joined():
        appointment = appointment_lock(company, reference, with_cutoff=enforce_cutoff)
        appointment_check_owner(contact, appointment)
        appointment_check_scheduled(appointment)
        if enforce_cutoff:
            appointment_check_cutoff(appointment, now, "cancel")
        if authorize is not None:
            authorize()
        appointment.cancel(by=by, description=description or reason or None)
        appointment.save()
        appointment_messages_after(
            appointment, AppointmentMessage.Kind.CANCELLED, now=now, reason=reason
        )
        return appointment


def notes_checked(notes: str) -> str:
    """Staff's notes as stored: stripped, at most NOTES_MAX_LENGTH characters (VALIDATION
    `notes_too_long` past it, never cut silently)."""
    notes = notes.strip()
    if len(notes) > NOTES_MAX_LENGTH:
        raise ValidationFailed(
            _g("Las notas admiten hasta %(max)d caracteres; tienen %(length)d.")
            % {"max": NOTES_MAX_LENGTH, "length": len(notes)},
            code="notes_too_long",
        )
    return notes


@transaction.atomic
def appointment_notes_set(*, company: Company, reference: str, notes: str) -> Appointment:
    """Replace staff's notes on an appointment, in any state (a note may come after it)."""
    appointment = appointment_lock(company, reference)
    appointment.notes = notes_checked(notes)
    appointment.save(update_fields=["notes", "updated_at"])
    return appointment


@transaction.atomic
def appointment_mark_attended(
    *, company: Company, reference: str, now: datetime | None = None, by: Any = None
) -> Appointment:
    """Staff record that the customer came (only once the appointment has started)."""
    now = now or clock.now()
    appointment = appointment_lock(company, reference)
    appointment_check_scheduled(appointment)
    appointment_check_started(appointment, now)
    appointment.mark_attended(by=by)
    appointment.save()
    return appointment


@transaction.atomic
def appointment_mark_no_show(
    *,
    company: Company,
    reference: str,
    now: datetime | None = None,
    by: Any = None,
    description: str | None = None,
    reason: str = "",
) -> Appointment:
    """Record that the customer did not come (only once the appointment has started). Staff's
    `reason` (plain text, core.reasons) is kept in the history; nothing is sent."""
    now = now or clock.now()
    reason = reason_checked(reason)
    appointment = appointment_lock(company, reference)
    appointment_check_scheduled(appointment)
    appointment_check_started(appointment, now)
    appointment.mark_no_show(by=by, description=reason or description)
    appointment.save()
    return appointment


def appointments_mark_no_shows(*, now: datetime | None = None, batch: int = 500) -> int:
    """Mark as no-show the appointments still scheduled past their end plus the grace, for the
    companies that enabled it. One transaction per appointment, so a concurrent staff change
    simply wins, and one that fails leaves the others marked (core.sweeps). Returns how many
    were marked."""
    now = now or clock.now()
    overdue = [
        (settings.company, reference)
        for settings in AgendaSettings.objects.filter(auto_no_show=True).select_related("company")
        for reference in Appointment.objects.filter(
            company=settings.company,
            state=Appointment.State.SCHEDULED,
            ends_at__lte=now - timedelta(minutes=settings.no_show_grace_minutes),
        ).values_list("reference", flat=True)[:batch]
    ]

    def mark(row: tuple[Company, str]) -> bool:
        company, reference = row
        try:
            appointment_mark_no_show(
                company=company,
                reference=reference,
                now=now,
                description="automatic: still scheduled after its end",
            )
        except ValidationFailed:
            return False  # changed by staff meanwhile
        return True

    return sweep("agenda.no_shows", overdue, mark).done
