"""Manage-my-booking links: the customer sees, moves or cancels an appointment from its message.

Every confirmation of a booking or a move, and every reminder, carries a link (when the site's
public address is set) to a small page about its appointment (agenda.manage_views). The link
holds the message's `manage_key` (drawn with its opt-out key when the message is first claimed
for sending; a retry sends the same link) with its tag (core.customer_links): no row id, and
nothing another customer's link could reach. It works until the appointment ends, as it
stands then (a move carries its links along); past that, or for an altered link, the page
says so and changes nothing.

This module finds what a link names and what its page offers; agenda.manage_actions makes
the changes, through the agent's services.
"""

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.urls import reverse
from django.utils.crypto import salted_hmac

from agenda import clock
from agenda.availability.search import nearest_free_slots, slots_available
from agenda.availability.slots import Move, Slot
from agenda.models import Appointment, AppointmentMessage, Professional
from agenda.selectors import agenda_settings_for
from core.customer_links import (
    link_key_new,
    link_token,
    signed_choice,
    signed_choice_value,
)

PURPOSE = "manage"
# The days of free slots one page of the move form shows, and at most how many slots.
MOVE_PAGE_DAYS = 7
MOVE_PAGE_SLOTS = 40


def manage_key_new() -> str:
    """A fresh key for a message's manage link."""
    return link_key_new()


def manage_link_url(message: AppointmentMessage) -> str:
    """The message's manage link, or "" without a public address, a key (a message never
    claimed for sending) or anything to manage (a cancellation's confirmation)."""
    base = settings.GARANTE_PUBLIC_URL
    if not base or not message.manage_key or message.kind == AppointmentMessage.Kind.CANCELLED:
        return ""
    return base + reverse("appointment_manage", args=[link_token(message.manage_key, PURPOSE)])


@dataclass(frozen=True)
class ManageTarget:
    key: str
    appointment: Appointment  # with its company, service, professional and contact
    # Past the appointment's end: the page says so and nothing changes.
    expired: bool


def manage_target(key: str, *, now: datetime | None = None) -> ManageTarget | None:
    """The appointment a link's key names (expired or not), or None when no message has that
    key (a key of a message deleted since)."""
    message = (
        AppointmentMessage.objects.select_related(
            "appointment__company",
            "appointment__service",
            "appointment__professional",
            "appointment__contact",
        )
        .filter(manage_key=key)
        .first()
    )
    if message is None:
        return None
    appointment = message.appointment
    return ManageTarget(key, appointment, appointment.ends_at <= (now or clock.now()))


def cutoff_passed(appointment: Appointment, now: datetime) -> bool:
    """Whether the company's cut-off before the start has passed (customers then call): the
    page says so at once instead of offering buttons the services would refuse."""
    cutoff = agenda_settings_for(company=appointment.company).cancellation_cutoff_minutes
    return now >= appointment.starts_at - timedelta(minutes=cutoff)


# --- Moving: the free slots offered, and the one chosen -------------------------------------


@dataclass(frozen=True)
class SlotChoice:
    value: str  # signed for the link: the form gets back only what it offered
    starts_at: datetime
    professional: str


@dataclass(frozen=True)
class MoveOptions:
    first_day: date
    choices: list[SlotChoice]
    next_day: date | None  # the first day of the next page, when more may be free
    previous_day: date | None


def _professional_tag(key: str, professional_id: int) -> str:
    """Names a professional in a slot's value without their row id, for this link only."""
    return salted_hmac("garante.links.professional", f"{key}:{professional_id}").hexdigest()[:12]


def _choices(slots: list[Slot], key: str) -> list[SlotChoice]:
    return [
        SlotChoice(
            signed_choice(
                f"{slot.starts_at.isoformat()}|{_professional_tag(key, slot.professional.pk)}",
                key,
            ),
            slot.starts_at,
            slot.professional.display_name,
        )
        for slot in slots
    ]


def _local_midnight(day: date, tz: Any) -> datetime:
    return datetime.combine(day, datetime.min.time(), tzinfo=tz)


def move_options(target: ManageTarget, *, first_day: date | None, now: datetime) -> MoveOptions:
    """Free slots of the appointment's service from `first_day` (local; today when None or
    past), whole days only, at most MOVE_PAGE_SLOTS of them (more when one day alone has
    more) within MOVE_PAGE_DAYS days, as the agent's slot search offers them for a move: its
    own time counts as free, its current slot is not offered. A day past the booking horizon
    is VALIDATION naming the last bookable date."""
    appointment = target.appointment
    company = appointment.company
    tz = company.tz
    today = now.astimezone(tz).date()
    # Past the horizon the search says which is the last bookable day; bounded, so that a
    # typed year 9999 is that answer too, not an overflow.
    first_day = min(max(first_day or today, today), today + timedelta(days=3660))

    def search(first: date, days: int, limit: int | None) -> list[Slot]:
        return slots_available(
            company=company,
            service=appointment.service,
            starts_at=_local_midnight(first, tz),
            ends_at=_local_midnight(first + timedelta(days=days), tz),
            now=now,
            limit=limit,
            move=Move.of(appointment),
            explain_horizon=True,
        )

    found = search(first_day, MOVE_PAGE_DAYS, MOVE_PAGE_SLOTS + 1)
    if len(found) <= MOVE_PAGE_SLOTS:
        shown, next_day = found, first_day + timedelta(days=MOVE_PAGE_DAYS)
    else:
        # Whole days: the day the page would cut starts the next page.
        next_day = found[MOVE_PAGE_SLOTS].starts_at.astimezone(tz).date()
        shown = [s for s in found if s.starts_at.astimezone(tz).date() < next_day]
        if not shown:  # one day alone has more than a page: all of that day
            shown = search(next_day, 1, None)
            next_day += timedelta(days=1)
    previous = max(first_day - timedelta(days=MOVE_PAGE_DAYS), today)
    return MoveOptions(
        first_day,
        _choices(shown, target.key),
        next_day,
        previous if first_day > today else None,
    )


def nearest_choices(target: ManageTarget, around: datetime, now: datetime) -> list[SlotChoice]:
    """The free slots nearest a refused one, to offer on the refusal's page."""
    appointment = target.appointment
    slots = nearest_free_slots(
        company=appointment.company,
        service=appointment.service,
        around=around,
        now=now,
        prefer=appointment.professional,
        move=Move.of(appointment),
    )
    return _choices(slots, target.key)


def chosen_slot(target: ManageTarget, value: str) -> dict[str, Any] | None:
    """What a move form's chosen slot names, as the exposure ledger keeps a slot (the
    professional's id and the start: agenda.availability.slots.slot_from_ledger), or None
    for a value this link's page did not offer. The professional is one of the company's who
    gives the service; whether they still may take it, the move checks under its lock."""
    plain = signed_choice_value(value, target.key)
    if plain is None:
        return None
    start, _sep, tag = plain.partition("|")
    appointment = target.appointment
    candidates = Professional.objects.filter(
        company=appointment.company, services=appointment.service
    ).values_list("pk", flat=True)
    for professional_id in candidates:
        if _professional_tag(target.key, professional_id) == tag:
            return {"professional": professional_id, "start": start}
    return None
