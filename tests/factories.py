"""The cast of the tests, built through the services as the application would build them.

Plain builder functions (no factory library): each takes the company it belongs to and
keyword overrides, and returns a saved object. tests/conftest.py turns the usual members into
fixtures (`company`, `other_company`, `ana`, `bruno`, `agenda_settings`, `service`, `marta`,
`catalog`, `staff`, `make_staff`; the agenda's `frozen_clock` at MONDAY_8AM; conversations
identified as a contact: `make_identified`, `ana_conv`, `ana_client`); app conftests add only
what is theirs. Tests name the cast's identifiers by the constants below (ANA_DOCUMENT,
ANA_PHONE, ANA_EMAIL, and Bruno's), never written out: they are also the identifiers of
`seed_sandbox`'s customers, which the tests against a seeded sandbox use.

- companies: `company()` — a production company with a unique name and slug
  (`environment=Company.Environment.SANDBOX` for a sandbox: its messages to customers are
  kept in its outbox, never sent, core.outbound);
- customers: `ana(company)` (Ana García: ANA_DOCUMENT, a DNI, ANA_PHONE, ANA_EMAIL) and
  `bruno(company)` (Bruno López: BRUNO_DOCUMENT, a NIE, BRUNO_PHONE, BRUNO_EMAIL); a test
  that needs one identifier absent says so (`ana(company, email="")`);
- the salon: `service(company)` ("Corte de pelo", 30 minutes and 10 of buffer) and
  `marta(company, service)`, who works 09:00-13:00 and 15:00-19:00 on weekdays
  (`days=EVERY_DAY` for every day);
- staff: `staff_member(username, company, role)`;
- sales: `catalog(company)`, a default price list and five products (`Catalog`), and
  `quote_in(state, company, contact)`, a quote brought to a state through the services.
"""

import itertools
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, time
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Permission

from agenda.models import Professional, Service
from agenda.services import professional_create
from core.models import Company, Contact, StaffMembership
from core.roles import staff_membership_set
from core.services import contact_create
from sales.models import PriceList, Product, Quote
from sales.services.catalog import price_list_create, price_list_item_set, product_create
from sales.services.opportunities import opportunity_create, opportunity_win
from sales.services.quote_lifecycle import (
    quote_accept,
    quote_cancel,
    quote_create,
    quote_deliver,
    quote_expire,
    quote_reject,
)
from sales.services.quote_pricing import QuoteItem

MADRID = ZoneInfo("Europe/Madrid")
WEEKDAYS = range(5)
EVERY_DAY = range(7)
PASSWORD = "pw-staff-2026!"

ANA_DOCUMENT = "12345678Z"
ANA_PHONE = "+34600111222"
ANA_PHONE_NATIONAL = "600111222"  # ANA_PHONE as a customer in Spain types it
ANA_EMAIL = "ana@example.com"
BRUNO_DOCUMENT = "X1234567L"
BRUNO_PHONE = "+34600333444"
BRUNO_EMAIL = "bruno@example.com"


def local(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    """An aware instant from Madrid wall-clock time."""
    return datetime(year, month, day, hour, minute, tzinfo=MADRID)


# Monday 7 December 2026, 08:00 in Madrid: the fixed "now" of the agenda's tests.
MONDAY_8AM = local(2026, 12, 7, 8)

_numbers = itertools.count(1)


def company(**fields: Any) -> Company:
    n = next(_numbers)
    fields.setdefault("name", f"Company {n}")
    fields.setdefault("slug", f"company-{n}-{uuid.uuid4().hex[:6]}")
    fields.setdefault("environment", Company.Environment.PRODUCTION)
    return Company.objects.create(**fields)


def contact(company: Company, **fields: str) -> Contact:
    """A contact created by `core.services.contact_create` (identifiers normalised)."""
    fields.setdefault("first_name", "Cliente")
    return contact_create(company=company, **fields)


def ana(company: Company, **overrides: str) -> Contact:
    return contact(
        company,
        **{
            "first_name": "Ana",
            "last_name": "García",
            "document_number": ANA_DOCUMENT,
            "phone": ANA_PHONE,
            "email": ANA_EMAIL,
            **overrides,
        },
    )


def bruno(company: Company, **overrides: str) -> Contact:
    return contact(
        company,
        **{
            "first_name": "Bruno",
            "last_name": "López",
            "document_number": BRUNO_DOCUMENT,
            "phone": BRUNO_PHONE,
            "email": BRUNO_EMAIL,
            **overrides,
        },
    )


def service(company: Company, **fields: Any) -> Service:
    fields.setdefault("name", "Corte de pelo")
    fields.setdefault("duration_minutes", 30)
    fields.setdefault("buffer_after_minutes", 10)
    return Service.objects.create(company=company, **fields)


def split_shift(days: Iterable[int]) -> list[tuple[int, time, time]]:
    """09:00-13:00 and 15:00-19:00 (local) on each of `days` (0 = Monday)."""
    days = list(days)
    return [(d, time(9), time(13)) for d in days] + [(d, time(15), time(19)) for d in days]


def marta(company: Company, service: Service, *, days: Iterable[int] = WEEKDAYS) -> Professional:
    return professional_create(
        company=company, display_name="Marta", services=[service], weekly_hours=split_shift(days)
    )


def staff_member(
    username: str,
    company: Company,
    role: str = "agent",
    *,
    permissions: Iterable[Permission] | None = None,
    password: str = PASSWORD,
    **fields: Any,
) -> AbstractBaseUser:
    """A staff user of `company`.

    Without `permissions` the membership goes through the roles service
    (`staff_membership_set`): the user joins the role's group, as staff do in production.
    With `permissions` the user holds exactly those (a membership of `role` and no role
    group), for tests about one permission.
    """
    users = get_user_model().objects
    if permissions is None:
        user = users.create_user(username, password=password, **fields)
        staff_membership_set(user=user, company=company, role=role)
    else:
        user = users.create_user(username, password=password, is_staff=True, **fields)
        user.user_permissions.set(permissions)
        StaffMembership.objects.create(user=user, company=company, role=role)
    user.refresh_from_db()
    return user


def app_permissions(app_label: str) -> Iterable[Permission]:
    return Permission.objects.filter(content_type__app_label=app_label)


@dataclass
class Catalog:
    price_list: PriceList
    coffee: Product  # 12.50 + 10 % tax, 10 on hand
    mug: Product  # 4.99 + 21 % tax, 3 on hand
    grinder: Product  # 35.00 + 21 % tax, stock not tracked
    retired: Product  # inactive
    unpriced: Product  # active, but not in the price list


def catalog(company: Company) -> Catalog:
    price_list = price_list_create(company=company, name="Tarifa", currency="EUR", is_default=True)
    coffee = product_create(
        company=company,
        sku="CAF-001",
        name="Café en grano 1 kg",
        tax_rate=Decimal("10.00"),
        quantity_on_hand=10,
    )
    mug = product_create(
        company=company, sku="TAZ-002", name="Taza de cerámica", quantity_on_hand=3
    )
    grinder = product_create(
        company=company, sku="MOL-003", name="Molinillo manual", track_stock=False
    )
    retired = product_create(
        company=company, sku="DES-004", name="Descalcificador", active=False, quantity_on_hand=5
    )
    unpriced = product_create(company=company, sku="FIL-005", name="Filtros", quantity_on_hand=5)
    price_list_item_set(price_list=price_list, product=coffee, unit_price="12.50")
    price_list_item_set(price_list=price_list, product=mug, unit_price="4.99")
    price_list_item_set(price_list=price_list, product=grinder, unit_price="35.00")
    price_list_item_set(price_list=price_list, product=retired, unit_price="9.00")
    return Catalog(price_list, coffee, mug, grinder, retired, unpriced)


def quote_in(state: str, company: Company, contact: Contact) -> Quote:
    """A quote of one CAF-001 (the `catalog`'s coffee) brought to `state` the way it happens
    in real life: through the services."""
    opportunity = None
    if state == "superseded":
        opportunity = opportunity_create(company=company, contact=contact, title="Pedido")
    quote = quote_create(
        company=company,
        contact=contact,
        items=[QuoteItem("CAF-001", 1)],
        send=state != "draft",
        opportunity=opportunity,
    )
    if opportunity is not None:
        opportunity_win(opportunity=opportunity)
        quote.refresh_from_db()
    if state in ("accepted", "delivered", "cancelled"):
        quote = quote_accept(quote=quote)
    if state == "rejected":
        quote = quote_reject(quote=quote, reason="No lo necesito")
    elif state == "expired":
        quote = quote_expire(quote=quote)
    elif state == "delivered":
        quote = quote_deliver(quote=quote)
    elif state == "cancelled":
        quote = quote_cancel(quote=quote)
    assert quote.state == state
    return quote
