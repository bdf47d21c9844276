"""The admin's agenda page: a day or a week of one professional, or a day of every professional
of a company side by side, with the appointments in their state and the free slots the tools
would offer (agenda.availability's own slot search, never a copy). A free slot links to the
staff booking form, prefilled; the booking itself goes through agenda.services. A scheduled
appointment offers to move it: the company's day then shows the slots it can move to (its own
time counted free, as the tools' search for a move counts it), each linking to its reschedule
form, prefilled.
"""

from collections import defaultdict
from datetime import date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from agenda import clock
from agenda.availability.busy import working_intervals
from agenda.availability.search import slots_available
from agenda.availability.slots import Move
from agenda.models import Appointment, Professional, Service
from core.models import Company

WEEK_DAYS = 7


def day_start(day: date, company: Company) -> datetime:
    return datetime.combine(day, time.min, tzinfo=company.tz)


def service_for(company: Company, professional: Professional | None, chosen: str) -> Service | None:
    """The service whose free slots are shown, if one was chosen (of those the professional,
    or the company, gives). None: each professional's free slots of every service they give,
    as the team's calendar shows every professional's free time by default, never one
    service picked for all (a column would say "no free slots" on a day its professional has
    room for their own services)."""
    if not chosen.isdigit():
        return None
    return next((s for s in services_offered(company, professional) if s.pk == int(chosen)), None)


def services_offered(company: Company, professional: Professional | None) -> list[Service]:
    services = Service.objects.filter(company=company, active=True).order_by("name")
    if professional is not None:
        services = services.filter(professionals=professional)
    return list(services)


def _hhmm(instant: datetime, company: Company) -> str:
    return instant.astimezone(company.tz).strftime("%H:%M")


def _booking_url(company: Company, service: Service, professional_id: int, start: datetime) -> str:
    local = start.astimezone(company.tz)
    query = {
        "company": company.pk,
        "service": service.pk,
        "professional": professional_id,
        "day": local.date().isoformat(),
        "at": local.strftime("%H:%M"),
    }
    return f"{reverse('admin:agenda_appointment_add')}?{urlencode(query)}"


def _move_url(appointment: Appointment, company: Company, professional_id: int, start: datetime):
    local = start.astimezone(company.tz)
    query = {
        "professional": professional_id,
        "day": local.date().isoformat(),
        "at": local.strftime("%H:%M"),
    }
    url = reverse("admin:agenda_appointment_move", args=[appointment.pk])
    return f"{url}?{urlencode(query)}"


def day_url(company: Company, instant: datetime, **query: Any) -> str:
    """The company's agenda of the local day of `instant`."""
    day = instant.astimezone(company.tz).date().isoformat()
    query = {"company": company.pk, "date": day, **query}
    return f"{reverse('admin:agenda_company_day')}?{urlencode(query)}"


def moving_url(appointment: Appointment, company: Company) -> str:
    """The company's day of the appointment, showing the slots it can move to."""
    return day_url(company, appointment.starts_at, move=appointment.pk)


def _intervals(professional: Professional, day: date, company: Company) -> list[str]:
    weekly: dict[int, list] = defaultdict(list)
    for hours in professional.working_hours.all():
        weekly[hours.weekday].append((hours.start_time, hours.end_time))
    return [
        # An interval until the end of the day ends at the next day's midnight: 24:00.
        f"{_hhmm(start, company)}-"
        + ("24:00" if end.astimezone(company.tz).date() > day else _hhmm(end, company))
        for start, end in working_intervals(weekly, day, company.tz)
    ]


def columns(
    company: Company,
    professionals: list[Professional],
    days: list[date],
    service: Service | None,
    moving: Appointment | None = None,
) -> list[dict[str, Any]]:
    """One column per (professional, day): working hours, appointments and free slots; with
    `moving`, the slots that appointment can move to (of its service), linking to its move."""
    first, last = day_start(days[0], company), day_start(days[-1] + timedelta(days=1), company)
    ids = [p.pk for p in professionals]
    booked: dict[tuple[int, date], list] = defaultdict(list)
    appointments = (
        Appointment.objects.filter(
            company=company, professional_id__in=ids, starts_at__gte=first, starts_at__lt=last
        )
        .select_related("contact", "service")
        .order_by("starts_at")
    )
    for a in appointments:
        booked[(a.professional_id, a.starts_at.astimezone(company.tz).date())].append(a)
    free: dict[tuple[int, date], list] = defaultdict(list)
    now = clock.now()
    one = professionals[0] if len(professionals) == 1 else None
    if moving is not None:
        searched = [moving.service]
    elif service is not None:
        searched = [service]
    else:
        # Every service the professionals shown give, each searched once: a professional's
        # slots come only for the services they give (the search's own rule).
        searched = list(
            Service.objects.filter(company=company, active=True, professionals__in=ids)
            .distinct()
            .order_by("name")
        )
    for each in searched:
        for slot in slots_available(
            company=company,
            service=each,
            starts_at=first,
            ends_at=last,
            now=now,
            professional=one,
            move=None if moving is None else Move.of(moving),
        ):
            key = (slot.professional.pk, slot.starts_at.astimezone(company.tz).date())
            if moving is None:
                url = _booking_url(company, each, slot.professional.pk, slot.starts_at)
            else:
                url = _move_url(moving, company, slot.professional.pk, slot.starts_at)
            free[key].append(
                {"time": _hhmm(slot.starts_at, company), "url": url, "service": each.name}
            )
    result = []
    for professional in professionals:
        for day in days:
            result.append(
                {
                    "professional": professional,
                    "day": day,
                    "intervals": _intervals(professional, day, company),
                    "appointments": [
                        {
                            "reference": a.reference,
                            "url": reverse("admin:agenda_appointment_change", args=[a.pk]),
                            "time": f"{_hhmm(a.starts_at, company)}-{_hhmm(a.ends_at, company)}",
                            "service": a.service.name,
                            "contact": str(a.contact),
                            "state": a.state,
                            "state_shown": a.get_state_display(),
                            # A past appointment is read-only: no "Move".
                            "move_url": moving_url(a, company)
                            if a.state == Appointment.State.SCHEDULED and a.starts_at > now
                            else "",
                            "moving": moving is not None and a.pk == moving.pk,
                        }
                        for a in booked[(professional.pk, day)]
                    ],
                    "free": free[(professional.pk, day)],
                }
            )
    return result
