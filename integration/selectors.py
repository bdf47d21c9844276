"""Reads of the integration API: every query is scoped to one company, entities are found by
their public reference (never a primary key), and a reference of another company is simply
not found."""

from datetime import date, datetime, time, timedelta

from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from agenda.models import Appointment, Professional, Service
from core.credentials.selectors import credential_find, credential_touch
from core.errors import NotFound
from core.models import Company, Contact
from core.references import normalize_reference
from integration.models import IntegrationCredential
from sales.models import Opportunity, PriceListItem, Product, Quote
from sales.selectors import price_list_current
from support.models import Case
from support.selectors import case_list as support_case_list


def integration_credential_authenticate(token: str) -> IntegrationCredential | None:
    """The active credential a bearer token belongs to (with its company), or None."""
    if not token:
        return None
    credential = credential_find(IntegrationCredential, IntegrationCredential.hash_token(token))
    if credential is not None:
        credential_touch(IntegrationCredential, credential.pk, credential)
    return credential


def _local_days(company: Company, field: str, date_from: date | None, date_to: date | None) -> Q:
    """Rows whose `field` falls within these local days of the company (both inclusive)."""
    query = Q()
    if date_from is not None:
        query &= Q(**{f"{field}__gte": datetime.combine(date_from, time.min, tzinfo=company.tz)})
    if date_to is not None:
        end = datetime.combine(date_to + timedelta(days=1), time.min, tzinfo=company.tz)
        query &= Q(**{f"{field}__lt": end})
    return query


def _referenced(relation: str, reference: str) -> Q:
    """Rows whose `relation` (a contact, service or professional) has this public reference."""
    return Q(**{f"{relation}__integration_reference__reference": normalize_reference(reference)})


def _by_reference(queryset: QuerySet, lookup: str, reference: str, error: NotFound):
    found = queryset.filter(**{lookup: normalize_reference(reference)}).first()
    if found is None:
        raise error
    return found


# --- Contacts, services, professionals (references kept by integration.models) --------------


def contact_list(
    *,
    company: Company,
    search: str | None = None,
    email: str | None = None,
    phone: str | None = None,
    document_number: str | None = None,
    date_from: date | None = None,
    date_to: date | None = None,
) -> QuerySet[Contact]:
    """The company's contacts; identifiers are compared in their stored (normalised) form."""
    contacts = Contact.objects.filter(company=company).filter(
        _local_days(company, "created_at", date_from, date_to)
    )
    for word in (search or "").split():
        contacts = contacts.filter(Q(first_name__icontains=word) | Q(last_name__icontains=word))
    if email is not None:
        contacts = contacts.filter(email=email)
    if phone is not None:
        contacts = contacts.filter(phone=phone)
    if document_number is not None:
        contacts = contacts.filter(document_number=document_number)
    return contacts


def contact_get(*, company: Company, reference: str) -> Contact:
    return _by_reference(
        Contact.objects.filter(company=company),
        "integration_reference__reference",
        reference,
        NotFound(_("No encontré ese contacto."), code="contact_not_found"),
    )


def service_list(*, company: Company, active: bool | None = None) -> QuerySet[Service]:
    services = Service.objects.filter(company=company)
    if active is not None:
        services = services.filter(active=active)
    return services


def service_get(*, company: Company, reference: str) -> Service:
    return _by_reference(
        Service.objects.filter(company=company),
        "integration_reference__reference",
        reference,
        NotFound(_("No encontré ese servicio."), code="service_not_found"),
    )


def professional_list(
    *, company: Company, active: bool | None = None, service: str | None = None
) -> QuerySet[Professional]:
    """The company's professionals; `service` is a service reference they give."""
    professionals = Professional.objects.filter(company=company).prefetch_related("services")
    if active is not None:
        professionals = professionals.filter(active=active)
    if service is not None:
        professionals = professionals.filter(_referenced("services", service))
    return professionals


def professional_get(*, company: Company, reference: str) -> Professional:
    return _by_reference(
        Professional.objects.filter(company=company),
        "integration_reference__reference",
        reference,
        NotFound(_("No encontré ese profesional."), code="professional_not_found"),
    )


# --- Catalog -------------------------------------------------------------------------------


def product_list(
    *, company: Company, search: str | None = None, active: bool | None = None
) -> QuerySet[Product]:
    """The company's products, each annotated with `unit_price` in the current price list
    (None when it has no price there) and `currency`."""
    price_list = price_list_current(company=company)
    products = Product.objects.filter(company=company)
    if price_list is not None:
        price = PriceListItem.objects.filter(price_list=price_list, product=OuterRef("pk"))
        products = products.annotate(unit_price=Subquery(price.values("unit_price")[:1]))
    if active is not None:
        products = products.filter(active=active)
    for word in (search or "").split():
        products = products.filter(
            Q(name__icontains=word) | Q(sku__icontains=word) | Q(description__icontains=word)
        )
    return products


def product_get(*, company: Company, sku: str) -> Product:
    product = product_list(company=company).filter(sku__iexact=sku.strip()).first()
    if product is None:
        raise NotFound(_("No encontré ese producto."), code="product_not_found")
    return product


def product_currency(*, company: Company) -> str | None:
    price_list = price_list_current(company=company)
    return price_list.currency if price_list is not None else None


# --- Appointments, quotes, opportunities, cases --------------------------------------------


def appointment_list(
    *,
    company: Company,
    state: str | None = None,
    date_from: date | None = None,
    date_to: date | None = None,
    contact: str | None = None,
    service: str | None = None,
    professional: str | None = None,
) -> QuerySet[Appointment]:
    """The company's appointments; dates are the local days they start on, and contact,
    service and professional are public references."""
    appointments = (
        Appointment.objects.filter(company=company)
        .filter(_local_days(company, "starts_at", date_from, date_to))
        .select_related("service", "professional")
    )
    if state is not None:
        appointments = appointments.filter(state=state)
    if contact is not None:
        appointments = appointments.filter(_referenced("contact", contact))
    if service is not None:
        appointments = appointments.filter(_referenced("service", service))
    if professional is not None:
        appointments = appointments.filter(_referenced("professional", professional))
    return appointments


def appointment_get(*, company: Company, reference: str) -> Appointment:
    return _by_reference(
        Appointment.objects.filter(company=company).select_related("service", "professional"),
        "reference",
        reference,
        NotFound(_("No encontré esa cita."), code="appointment_not_found"),
    )


def quote_list(
    *,
    company: Company,
    state: str | None = None,
    date_from: date | None = None,
    date_to: date | None = None,
    contact: str | None = None,
) -> QuerySet[Quote]:
    """The company's quotes, drafts included (the company's own systems may prepare them);
    `state` is the state at this instant (see Quote.effective_state)."""
    quotes = (
        Quote.objects.filter(company=company)
        .filter(_local_days(company, "created_at", date_from, date_to))
        .select_related("opportunity")
        .prefetch_related("lines")
    )
    if state is not None:
        quotes = quotes.in_effective_state(state, timezone.now())
    if contact is not None:
        quotes = quotes.filter(_referenced("contact", contact))
    return quotes


def quote_get(*, company: Company, reference: str) -> Quote:
    return _by_reference(
        Quote.objects.filter(company=company)
        .select_related("opportunity")
        .prefetch_related("lines"),
        "reference",
        reference,
        NotFound(_("No encontré esa cotización."), code="quote_not_found"),
    )


def opportunity_list(
    *,
    company: Company,
    state: str | None = None,
    date_from: date | None = None,
    date_to: date | None = None,
    contact: str | None = None,
) -> QuerySet[Opportunity]:
    opportunities = Opportunity.objects.filter(company=company).filter(
        _local_days(company, "created_at", date_from, date_to)
    )
    if state is not None:
        opportunities = opportunities.filter(state=state)
    if contact is not None:
        opportunities = opportunities.filter(_referenced("contact", contact))
    return opportunities


def case_list(
    *,
    company: Company,
    state: str | None = None,
    date_from: date | None = None,
    date_to: date | None = None,
    contact: str | None = None,
    priority: str | None = None,
) -> QuerySet[Case]:
    cases = support_case_list(company=company, state=state).filter(
        _local_days(company, "created_at", date_from, date_to)
    )
    if contact is not None:
        cases = cases.filter(_referenced("contact", contact))
    if priority is not None:
        cases = cases.filter(priority=priority)
    return cases
