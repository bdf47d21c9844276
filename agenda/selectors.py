"""Reads of the agenda: catalogue, professionals, settings, a customer's appointments and a
calendar feed's."""

import hmac
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Case, Count, F, Q, QuerySet, When
from django.utils.translation import gettext_lazy as _

from agenda import clock
from agenda.models import (
    MAX_BLOCKED_SPAN,
    AgendaSettings,
    Appointment,
    AppointmentMessage,
    CalendarFeed,
    Professional,
    Service,
    TimeOff,
)
from core.errors import Ambiguous, NotFound
from core.identity import check_owner
from core.models import Company, Contact
from core.process_cache import ProcessCache
from core.references import normalize_reference


def fold_text(text: str) -> str:
    """Case-, accent- and spacing-insensitive form of a name, for loose matching."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(plain.casefold().split())


def agenda_settings_for(*, company: Company) -> AgendaSettings:
    """The company's agenda settings; the row is created with defaults the first time."""
    settings, _created = AgendaSettings.objects.get_or_create(company=company)
    return settings


def service_list(*, company: Company, active_only: bool = True) -> QuerySet[Service]:
    services = Service.objects.filter(company=company)
    if active_only:
        services = services.filter(active=True)
    return services.order_by("name", "pk")


@dataclass(frozen=True)
class CatalogueEntry:
    """A bookable service as customers see it in the catalogue."""

    name: str
    description: str
    duration_minutes: int


# company id -> the active services as customers see them, and ("services", company id) -> all
# of them as rows (service_resolve_cached); both tagged with the company, whose entries
# agenda.signals forgets whenever one of its services is saved or deleted.
catalogue = ProcessCache("service catalogue")


def service_catalogue(*, company: Company) -> tuple[CatalogueEntry, ...]:
    """The company's active services in name order, from the process cache
    (core.process_cache): asked for in nearly every conversation, changed rarely; a page of it
    is what list_services shows.

    Only for showing the catalogue: booking resolves and checks services in the database.
    """

    def load() -> tuple[int, tuple[CatalogueEntry, ...]]:
        rows = service_list(company=company).values_list("name", "description", "duration_minutes")
        return company.pk, tuple(CatalogueEntry(*row) for row in rows)

    return catalogue.get(company.pk, load)


def _match_by_name(items: list, name: str, attribute: str) -> list:
    """Exact (loose) name matches if any, else the items whose name contains the text."""
    return _match_folded([(fold_text(getattr(i, attribute)), i) for i in items], name)


def _match_folded(items: Sequence[tuple[str, Any]], name: str) -> list:
    """`_match_by_name` over (folded name, item) pairs."""
    wanted = fold_text(name)
    exact = [item for folded, item in items if folded == wanted]
    if exact or not wanted:
        return exact
    return [item for folded, item in items if wanted in folded]


def _service_matched(matches: list[Service]) -> Service:
    """The one service matched: NotFound, or Ambiguous with the candidates."""
    if not matches:
        raise NotFound(_("No encontré ese servicio."), code="service_not_found")
    if len(matches) > 1:
        raise Ambiguous(
            _("Hay varios servicios con ese nombre. ¿Cuál de ellos?"),
            code="ambiguous_service",
            candidates=[s.name for s in matches[:10]],
        )
    return matches[0]


def service_resolve(*, company: Company, name: str) -> Service:
    """The active service a customer named: NotFound, or Ambiguous with the candidates."""
    return _service_matched(_match_by_name(list(service_list(company=company)), name, "name"))


_SERVICE_FIELDS = tuple(f.attname for f in Service._meta.concrete_fields)


def service_resolve_cached(*, company: Company, name: str) -> Service:
    """`service_resolve` for a read that only shows things (the slot search), among the company's
    active services as the process cache holds them (in `catalogue`, beside the catalogue and
    forgotten with it), so a warm call reads nothing.

    In another process a change shows within the cache's lifetime, as in the catalogue: a search
    may show a just-withdrawn service's slots for a few seconds. Booking still resolves and
    checks the service in the database (`service_resolve`, `slot_lock_and_check`).
    """

    def load() -> tuple[int, tuple[tuple[str, tuple], ...]]:
        rows = service_list(company=company).values_list(*_SERVICE_FIELDS)
        name_at = _SERVICE_FIELDS.index("name")
        return company.pk, tuple((fold_text(row[name_at]), row) for row in rows)

    services = catalogue.get(("services", company.pk), load)
    matches = _match_folded(services, name)
    # Fresh instances per call, as the ORM loads them, so nothing a request sets on one is
    # kept; at most the ten an Ambiguous names.
    return _service_matched(
        [Service.from_db(DEFAULT_DB_ALIAS, _SERVICE_FIELDS, row) for row in matches[:10]]
    )


def professional_resolve(*, company: Company, service: Service, name: str) -> Professional:
    """An active professional giving `service`, by the name customers see."""
    professionals = list(
        Professional.objects.filter(company=company, active=True, services=service).order_by(
            "display_name"
        )
    )
    return professional_pick(professionals, name)


def professional_pick(professionals: list[Professional], name: str) -> Professional:
    """The one of `professionals` (already read) a customer named: NotFound, or Ambiguous with
    the candidates in the given order."""
    matches = _match_by_name(professionals, name, "display_name")
    if not matches:
        raise NotFound(
            _("No encontré a ese profesional para ese servicio."), code="professional_not_found"
        )
    if len(matches) > 1:
        raise Ambiguous(
            _("Hay varios profesionales con ese nombre. ¿Cuál de ellos?"),
            code="ambiguous_professional",
            candidates=[p.display_name for p in matches[:10]],
        )
    return matches[0]


def appointment_list_for_contact(
    *, contact: Contact, state: str | None = None, now: datetime | None = None
) -> QuerySet[Appointment]:
    """A contact's appointments, in one order a cursor can page through (pk breaks ties).

    Scheduled ones (`state="scheduled"`): those not yet over at `now` (default: the agenda's
    clock), soonest first, then those past their end that staff never closed, most recent
    first, so "my next appointment" is never one of last month's. Otherwise newest first.
    """
    appointments = Appointment.objects.filter(
        company_id=contact.company_id, contact=contact
    ).select_related("service", "professional")
    if state is not None:
        appointments = appointments.filter(state=state)
    if state != Appointment.State.SCHEDULED:
        return appointments.order_by("-starts_at", "-pk")
    over = Q(ends_at__lte=now or clock.now())
    # Each start is in one of the two keys, the other null: the upcoming ones sort first.
    return appointments.annotate(
        upcoming_start=Case(When(~over, then=F("starts_at"))),
        overdue_start=Case(When(over, then=F("starts_at"))),
    ).order_by(
        F("upcoming_start").asc(nulls_last=True),
        F("overdue_start").desc(nulls_last=True),
        "pk",
    )


def appointment_get_for_contact(
    *, company: Company, contact: Contact, reference: str
) -> Appointment:
    """The company's appointment with exactly this reference, with its service and
    professional, if it is the contact's: NotFound, or PermissionRefused for another's."""
    appointment = (
        Appointment.objects.select_related("service", "professional")
        .filter(company=company, reference=normalize_reference(reference))
        .first()
    )
    if appointment is None:
        raise NotFound(_("No encontré esa cita."), code="appointment_not_found")
    check_owner(contact=contact, owner_id=appointment.contact_id)
    return appointment


def appointment_standing(
    *,
    company: Company,
    contact: Contact,
    starts_at: datetime,
    professional: Professional,
    service: Service | None = None,
    reference: str | None = None,
) -> Appointment | None:
    """The contact's scheduled appointment at `starts_at` with `professional` (of `service`,
    or with `reference`), with its service and professional: what a booking or a move of that
    intent already made (core.idempotency.intent), or None."""
    found = Appointment.objects.select_related("service", "professional").filter(
        company=company,
        contact=contact,
        state=Appointment.State.SCHEDULED,
        starts_at=starts_at,
        professional=professional,
    )
    if service is not None:
        found = found.filter(service=service)
    if reference is not None:
        found = found.filter(reference=normalize_reference(reference))
    return found.first()


def appointment_owner_id(*, company: Company, reference: str) -> int | None:
    """The contact id of the company's appointment with exactly this reference, if any."""
    return (
        Appointment.objects.filter(company=company, reference=normalize_reference(reference))
        .values_list("contact_id", flat=True)
        .first()
    )


def appointments_for_day(*, professional: Professional, day: date) -> QuerySet[Appointment]:
    """A professional's appointments starting on a local day (any state), for the day view."""
    tz = professional.company.tz
    start = datetime.combine(day, time.min, tzinfo=tz)
    end = datetime.combine(day + timedelta(days=1), time.min, tzinfo=tz)
    return (
        Appointment.objects.filter(
            professional=professional, blocked_from__gte=start - timedelta(days=1)
        )
        .filter(starts_at__gte=start, starts_at__lt=end)
        .select_related("contact", "service")
        .order_by("starts_at")
    )


def appointments_within_time_off(*, time_off: TimeOff) -> QuerySet[Appointment]:
    """The scheduled appointments of the time off's professional that overlap it, earliest
    first: booked before it was set, they stay booked until staff move or cancel them. Read
    after the time off is saved in the same transaction, this is the whole list: saving it
    locked the professional, so no booking can commit in between (`lock_schedules`)."""
    return (
        Appointment.objects.filter(
            professional_id=time_off.professional_id,
            state=Appointment.State.SCHEDULED,
            blocked_from__lt=time_off.ends_at,
            blocked_from__gte=time_off.starts_at - MAX_BLOCKED_SPAN,
            starts_at__lt=time_off.ends_at,
            ends_at__gt=time_off.starts_at,
        )
        .select_related("contact")
        .order_by("starts_at")
    )


@dataclass(frozen=True)
class ContactAppointments:
    """A contact's appointments for their file: the counts, the next ones and the last ones."""

    total: int
    upcoming_total: int
    upcoming: list[Appointment]
    past: list[Appointment]


def contact_appointments_file(
    *, contact: Contact, now: datetime, limit: int
) -> ContactAppointments:
    """The contact's appointments: how many, and how many are upcoming (scheduled, not yet
    over at `now`) in one query; the `limit` soonest upcoming, and the `limit` latest of the
    rest (past, cancelled, attended, no-show), most recent first."""
    appointments = Appointment.objects.filter(company_id=contact.company_id, contact=contact)
    upcoming = Q(state=Appointment.State.SCHEDULED, ends_at__gt=now)
    counts = appointments.aggregate(total=Count("pk"), upcoming=Count("pk", filter=upcoming))
    shown = appointments.select_related("service", "professional")
    return ContactAppointments(
        total=counts["total"],
        upcoming_total=counts["upcoming"],
        upcoming=list(shown.filter(upcoming).order_by("starts_at", "pk")[:limit]),
        past=list(shown.exclude(upcoming).order_by("-starts_at", "-pk")[:limit]),
    )


def contact_appointment_messages_file(
    *, contact: Contact, limit: int
) -> tuple[int, list[AppointmentMessage]]:
    """How many messages the contact was sent (or is to be sent) about their appointments, and
    the `limit` newest, with their appointment."""
    messages = AppointmentMessage.objects.filter(
        company_id=contact.company_id, appointment__contact=contact
    )
    latest = messages.select_related("appointment").order_by("-created_at", "-pk")[:limit]
    return messages.count(), list(latest)


# A calendar feed shows this much of the past and of the future: enough for a professional to
# look back over the month and plan the year, and a bounded read however old the agenda is.
FEED_PAST = timedelta(days=30)
FEED_AHEAD = timedelta(days=366)
# At most this many events (the earliest of the window): a calendar app polls the feed every
# few minutes to hours, and a company's year beyond this is not one calendar's worth.
FEED_MAX_EVENTS = 5000


def calendar_feed_find(token: str) -> CalendarFeed | None:
    """The calendar feed whose token this is, revoked or not (the page says which), with its
    company and professional; None for a token that was never issued."""
    token_hash = CalendarFeed.hash_token(token)
    feed = (
        CalendarFeed.objects.select_related("company", "professional")
        .filter(token_hash=token_hash)
        .first()
    )
    if feed is None or not hmac.compare_digest(feed.token_hash, token_hash):
        return None
    return feed


def appointments_for_feed(*, feed: CalendarFeed, now: datetime) -> list[Appointment]:
    """The feed's appointments in every state that start within its window around `now`,
    earliest first, at most FEED_MAX_EVENTS: its professional's, or its whole company's. One
    query, whatever the size of the agenda (a range scan of the start index, or of the
    professional's blocked-time index bounded by MAX_BLOCKED_SPAN)."""
    start, end = now - FEED_PAST, now + FEED_AHEAD
    appointments = Appointment.objects.filter(
        company_id=feed.company_id, starts_at__gte=start, starts_at__lt=end
    )
    if feed.professional_id is not None:
        appointments = appointments.filter(
            professional_id=feed.professional_id,
            blocked_from__gte=start - MAX_BLOCKED_SPAN,
            blocked_from__lt=end,
        )
    return list(
        appointments.select_related("service", "professional", "contact")
        .only(
            "reference",
            "starts_at",
            "ends_at",
            "state",
            "sequence",
            "created_at",
            "updated_at",
            "service__name",
            "professional__display_name",
            "contact__first_name",
            "contact__phone",
            "contact__email",
        )
        .order_by("starts_at", "pk")[:FEED_MAX_EVENTS]
    )
