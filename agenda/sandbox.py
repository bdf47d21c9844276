"""Agenda data for the declared sandbox (see core's seed_sandbox command).

Services, two professionals with weekly hours, and for every sandbox contact one attended
(past) and one cancelled (upcoming) appointment, so certification can show the terminal-state
guards. Everything is created through the services, and only when missing.
"""

from datetime import datetime, time, timedelta

from agenda import clock
from agenda.availability.search import slots_available
from agenda.models import Appointment, Professional, Service, WorkingHours
from agenda.selectors import agenda_settings_for
from agenda.services import (
    appointment_book,
    appointment_cancel,
    appointment_mark_attended,
    professional_create,
)
from core.models import Company, Contact

SERVICES = [
    {"name": "Corte de pelo", "duration_minutes": 30, "buffer_after_minutes": 10},
    {"name": "Tinte", "duration_minutes": 90, "buffer_after_minutes": 15},
    {"name": "Consulta de asesoría", "duration_minutes": 45},
]
PROFESSIONALS = [
    {
        "display_name": "Marta",
        "services": ["Corte de pelo", "Tinte"],
        "weekly_hours": [(d, time(9), time(14)) for d in range(5)]
        + [(d, time(16), time(20)) for d in range(5)],
    },
    {
        "display_name": "Luis",
        "services": ["Corte de pelo", "Consulta de asesoría"],
        "weekly_hours": [(d, time(10), time(14)) for d in range(1, 6)]
        + [(d, time(15), time(19)) for d in range(1, 6)],
    },
]


def _professional(company: Company, data: dict) -> Professional:
    services = Service.objects.filter(company=company, name__in=data["services"])
    professional = Professional.objects.filter(
        company=company, display_name=data["display_name"]
    ).first()
    if professional is None:
        return professional_create(
            company=company,
            display_name=data["display_name"],
            services=services,
            weekly_hours=data["weekly_hours"],
        )
    if not professional.working_hours.exists():
        WorkingHours.objects.bulk_create(
            WorkingHours(professional=professional, weekday=d, start_time=s, end_time=e)
            for d, s, e in data["weekly_hours"]
        )
    professional.services.add(*services)
    return professional


def _book_first_free(
    company: Company, contact: Contact, service: Service, *, search_from: datetime, now: datetime
) -> Appointment:
    """Book the first free slot from `search_from`, as of `now` (a past `now` for history)."""
    [slot] = slots_available(
        company=company,
        service=service,
        starts_at=search_from,
        ends_at=search_from + timedelta(days=14),
        now=now,
        limit=1,
    )
    return appointment_book(
        company=company,
        contact=contact,
        service=service,
        professional=slot.professional,
        starts_at=slot.starts_at,
        created_via=Appointment.Via.STAFF,
        now=now,
    )


def seed(company: Company) -> None:
    for data in SERVICES:
        Service.objects.get_or_create(company=company, name=data["name"], defaults=data)
    agenda_settings_for(company=company)
    for data in PROFESSIONALS:
        _professional(company, data)
    haircut = Service.objects.get(company=company, name="Corte de pelo")
    now = clock.now()
    for offset, contact in enumerate(company.contacts.order_by("pk")):
        mine = Appointment.objects.filter(company=company, contact=contact)
        if not mine.filter(state=Appointment.State.ATTENDED).exists():
            # Booked three weeks ago for a day in the past week, then attended.
            past = _book_first_free(
                company,
                contact,
                haircut,
                search_from=now - timedelta(days=10 - offset),
                now=now - timedelta(days=21),
            )
            appointment_mark_attended(company=company, reference=past.reference, now=now)
        if not mine.filter(state=Appointment.State.CANCELLED).exists():
            upcoming = _book_first_free(
                company,
                contact,
                haircut,
                search_from=now + timedelta(days=7 + offset),
                now=now,
            )
            appointment_cancel(
                company=company, reference=upcoming.reference, now=now, enforce_cutoff=False
            )
