"""Staff fixtures: two companies with a day of work each, and staff members by role.

Each company's timezone is chosen so that its local time is around midday when the test runs:
an appointment two hours ahead is then "today" there, whatever the hour of the test machine.
"""

import uuid
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from agenda.models import Appointment, Professional, Service
from agenda.services import appointment_book, professional_create
from core.models import Company, Contact, Conversation, SecurityEvent
from core.services import contact_create
from sales.models import Quote
from sales.services.catalog import price_list_create, price_list_item_set, product_create
from sales.services.quote_lifecycle import quote_create
from sales.services.quote_pricing import QuoteItem
from support.models import Case
from support.services import case_open
from tests.factories import ANA_DOCUMENT, ANA_PHONE


def midday_timezone(offset_from_noon: int = 0) -> str:
    """An Etc/GMT zone whose local hour is now 12 (+ offset_from_noon)."""
    utc_hour = timezone.now().hour
    offset = 12 + offset_from_noon - utc_hour  # local = UTC + offset
    offset = max(-12, min(14, offset))
    # POSIX-style names: Etc/GMT-3 is UTC+3.
    return "Etc/GMT" if offset == 0 else f"Etc/GMT{'-' if offset > 0 else '+'}{abs(offset)}"


@dataclass
class Day:
    """One company's day: who works, who comes, and what is waiting for staff."""

    company: Company
    service: Service
    professional: Professional
    contact: Contact
    appointment: Appointment
    case: Case
    quote: Quote
    event: SecurityEvent


def build_day(company: Company, *, customer: str, document: str, phone: str) -> Day:
    service = Service.objects.create(company=company, name="Consulta", duration_minutes=30)
    professional = professional_create(
        company=company,
        display_name=f"Dra. {customer[::-1].capitalize()}",
        services=[service],
        weekly_hours=[(d, time(0), time(23, 59)) for d in range(7)],
    )
    contact = contact_create(
        company=company, first_name=customer, document_number=document, phone=phone
    )
    local_now = timezone.now().astimezone(company.tz)
    starts = (local_now + timedelta(hours=2)).replace(minute=0, second=0, microsecond=0)
    appointment = appointment_book(
        company=company,
        contact=contact,
        service=service,
        professional=professional,
        starts_at=starts,
        created_via=Appointment.Via.STAFF,
        enforce_customer_rules=False,
    )
    case = case_open(
        company=company,
        contact=contact,
        subject=f"La factura de {customer} no llega",
        description="No he recibido la factura de noviembre.",
    )
    product = product_create(
        company=company, sku=f"SKU-{customer[:3].upper()}", name="Crema", track_stock=False
    )
    price_list = price_list_create(company=company, name="Tarifa", is_default=True)
    price_list_item_set(price_list=price_list, product=product, unit_price=Decimal("12.50"))
    quote = quote_create(company=company, contact=contact, items=[QuoteItem(product.sku, 2)])
    conversation = Conversation.objects.create(
        company=company, external_id=f"conv-{customer.lower()}-{uuid.uuid4().hex[:6]}"
    )
    event = SecurityEvent.objects.create(
        company=company,
        conversation_key=conversation.external_id,
        kind=SecurityEvent.Kind.IDENTITY_SWITCH,
        contact=contact,
    )
    return Day(company, service, professional, contact, appointment, case, quote, event)


@pytest.fixture
def sol(make_company) -> Company:
    return make_company(name="Peluquería Sol", timezone=midday_timezone())


@pytest.fixture
def luna(make_company) -> Company:
    return make_company(name="Clínica Luna", timezone=midday_timezone(1))


@pytest.fixture
def sol_day(sol) -> Day:
    return build_day(sol, customer="Ana", document=ANA_DOCUMENT, phone=ANA_PHONE)


@pytest.fixture
def luna_day(luna) -> Day:
    return build_day(luna, customer="Zoe", document="X1234567L", phone="+34600333444")


@pytest.fixture
def agent(make_staff, sol) -> User:
    return make_staff("agente.sol", sol, "agent", first_name="Alba")


@pytest.fixture
def supervisor(make_staff, sol) -> User:
    return make_staff("supervisora.sol", sol, "supervisor")


@pytest.fixture
def sol_admin(make_staff, sol) -> User:
    return make_staff("admin.sol", sol, "admin")


@pytest.fixture
def luna_agent(make_staff, luna) -> User:
    return make_staff("agente.luna", luna, "agent", first_name="Leo")


def local_clock(instant: datetime, company: Company) -> str:
    return instant.astimezone(company.tz).strftime("%H:%M")
