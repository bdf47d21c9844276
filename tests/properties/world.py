"""The world a property run plays in: two sandbox companies, each with its customers, its
agenda and its catalogue, built through the services as the application builds them.

Each run (each Hypothesis example) builds a world of its own, with fresh companies, so what an
earlier example left in the database is another tenant's data: invisible, and a test of that.
"""

import itertools
import uuid
from dataclasses import dataclass, field
from datetime import time
from decimal import Decimal

from agenda.models import AgendaSettings
from agenda.services import professional_create
from core.models import Company, Contact, StepUpPolicy
from core.services import gateway_credential_issue
from tests import factories

# Long enough that the next spring-forward of Europe/Madrid (last Sunday of March) is bookable.
HORIZON_DAYS = 150
# The catalogue's prices and stock (tests.factories.catalog), as the oracle computes with them.
PRICES = {
    "CAF-001": (Decimal("12.50"), Decimal("10.00")),
    "TAZ-002": (Decimal("4.99"), Decimal("21.00")),
    "MOL-003": (Decimal("35.00"), Decimal("21.00")),
}
STOCK = {"CAF-001": 10, "TAZ-002": 3}  # MOL-003 is not tracked
UNSELLABLE = ("DES-004", "FIL-005", "NOPE-999")  # inactive, unpriced, unknown
SERVICE = "Corte de pelo"
# Step-up policies: A keeps the settings' default, B also protects opening a case.
POLICIES = {"A": None, "B": ["accept_quote", "update_contact_details", "open_case"]}

_phones = itertools.count(1)


def fresh_phone() -> str:
    """A Spanish mobile number nobody in any world holds (the update_contact_details rule)."""
    return f"+3461{uuid.uuid4().int % 10**4:04d}{next(_phones) % 10**3:03d}"


@dataclass
class Customer:
    tenant: str
    contact_id: int
    first_name: str
    last_name: str
    document: str
    phone: str
    email: str
    # Identifiers this customer held before a change (update_contact_details).
    former: set[str] = field(default_factory=set)

    @property
    def label(self) -> str:
        return f"{self.first_name}@{self.tenant}"

    def identifiers(self) -> list[str]:
        return [x for x in (self.document, self.phone, self.email) if x]

    def private(self) -> list[str]:
        """What another customer must never read of this one."""
        values = [self.document, self.phone, self.email, f"{self.first_name} {self.last_name}"]
        if self.phone.startswith("+34"):
            values.append(self.phone[3:])
        return [v for v in values if v]


@dataclass
class Tenant:
    key: str
    company: Company
    token: str
    customers: list[Customer]
    step_up: list[str]


@dataclass
class World:
    tenants: dict[str, Tenant]

    def customers(self) -> list[Customer]:
        return [c for t in self.tenants.values() for c in t.customers]


def _customer(tenant: str, contact: Contact) -> Customer:
    return Customer(
        tenant=tenant,
        contact_id=contact.pk,
        first_name=contact.first_name,
        last_name=contact.last_name,
        document=contact.document_number,
        phone=contact.phone,
        email=contact.email,
    )


INTENT_WINDOW_MINUTES = 7 * 24 * 60


def build_world() -> World:
    tenants = {}
    for key in ("A", "B"):
        company = factories.company(
            name=f"Props {key} {uuid.uuid4().hex[:6]}",
            # The machine plays many unknown identifiers across its conversations; the
            # per-conversation limit stays as shipped, the token-wide one is raised so one
            # run's guesses do not lock every conversation of the run.
            identify_failures_per_credential=10_000,
            identify_failures_per_identifier=10_000,
            # Sandboxes, as the fault switch needs, so their codes are kept in their outbox;
            # with room for a soak's many codes in an hour.
            environment=Company.Environment.SANDBOX,
            sms_hourly_budget=100_000,
            # The intents' windows (core.idempotency.intent) outlast any run, soaks included,
            # so that the oracle knows without a clock which records stand for an intent.
            quote_intent_window_minutes=INTENT_WINDOW_MINUTES,
            sales_contact_intent_window_minutes=INTENT_WINDOW_MINUTES,
            case_intent_window_minutes=INTENT_WINDOW_MINUTES,
        )
        AgendaSettings.objects.update_or_create(
            company=company, defaults={"booking_horizon_days": HORIZON_DAYS}
        )
        service = factories.service(company, name=SERVICE)
        factories.marta(company, service, days=factories.EVERY_DAY)
        # Works the small hours of Sundays, across the spring-forward gap (02:00-03:00).
        professional_create(
            company=company,
            display_name="Nora",
            services=[service],
            weekly_hours=[(6, time(1), time(4))],
        )
        factories.catalog(company)
        customers = [
            _customer(key, factories.ana(company)),
            _customer(key, factories.bruno(company)),
        ]
        actions = POLICIES[key]
        if actions is not None:
            StepUpPolicy.objects.update_or_create(company=company, defaults={"actions": actions})
        token = gateway_credential_issue(company=company, name="props")[1]
        tenants[key] = Tenant(
            key=key,
            company=company,
            token=token,
            customers=customers,
            step_up=actions if actions is not None else ["accept_quote", "update_contact_details"],
        )
    return World(tenants)
