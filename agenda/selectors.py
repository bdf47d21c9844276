"""Reads of the agenda: catalogue, professionals, settings and a customer's appointments."""

import unicodedata
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _

from agenda.models import AgendaSettings, Appointment, Professional, Service
from core.errors import Ambiguous, NotFound
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


# company id -> the first CATALOGUE_SIZE active services; agenda.signals forgets a company's
# entry whenever one of its services is saved or deleted.
catalogue = ProcessCache("service catalogue")
CATALOGUE_SIZE = 51  # the longest page customers can ask for (50), and one to tell more exist


def service_catalogue(*, company: Company) -> tuple[CatalogueEntry, ...]:
    """The company's active services in name order, at most CATALOGUE_SIZE, from the process
    cache (core.process_cache): asked for in nearly every conversation, changed rarely.

    Only for showing the catalogue: booking resolves and checks services in the database.
    """

    def load() -> tuple[int, tuple[CatalogueEntry, ...]]:
        rows = service_list(company=company).values_list("name", "description", "duration_minutes")[
            :CATALOGUE_SIZE
        ]
        return company.pk, tuple(CatalogueEntry(*row) for row in rows)

    return catalogue.get(company.pk, load)


def _match_by_name(items: list, name: str, attribute: str) -> list:
    """Exact (loose) name matches if any, else the items whose name contains the text."""
    wanted = fold_text(name)
    exact = [i for i in items if fold_text(getattr(i, attribute)) == wanted]
    if exact or not wanted:
        return exact
    return [i for i in items if wanted in fold_text(getattr(i, attribute))]


def service_resolve(*, company: Company, name: str) -> Service:
    """The active service a customer named: NotFound, or Ambiguous with the candidates."""
    matches = _match_by_name(list(service_list(company=company)), name, "name")
    if not matches:
        raise NotFound(_("No encontré ese servicio."), code="service_not_found")
    if len(matches) > 1:
        raise Ambiguous(
            _("Hay varios servicios con ese nombre. ¿Cuál de ellos?"),
            code="ambiguous_service",
            candidates=[s.name for s in matches[:10]],
        )
    return matches[0]


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
    *, contact: Contact, state: str | None = None
) -> QuerySet[Appointment]:
    """A contact's appointments: upcoming-first for scheduled ones, newest-first otherwise."""
    appointments = Appointment.objects.filter(
        company_id=contact.company_id, contact=contact
    ).select_related("service", "professional")
    if state is not None:
        appointments = appointments.filter(state=state)
    if state == Appointment.State.SCHEDULED:
        return appointments.order_by("starts_at", "pk")
    return appointments.order_by("-starts_at", "-pk")


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
