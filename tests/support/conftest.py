"""Fixtures of the support tests: customers and staff of a company, and cases in any state."""

from collections.abc import Callable

import pytest
from django.contrib.auth import get_user_model

from core.models import Company, Contact, StaffMembership
from core.services import contact_create
from support import services
from support.models import Case

# How to reach each state from a new case, through the staff services.
PATH_TO_STATE: dict[str, list[str]] = {
    Case.State.OPEN: [],
    Case.State.IN_PROGRESS: ["start"],
    Case.State.WAITING_CUSTOMER: ["start", "wait_for_customer"],
    Case.State.RESOLVED: ["start", "resolve"],
    Case.State.CLOSED: ["start", "resolve", "close"],
}


@pytest.fixture
def contact(company: Company) -> Contact:
    return contact_create(
        company=company,
        first_name="Ana",
        last_name="García",
        document_number="12345678Z",
        phone="+34600111222",
        email="ana@example.com",
    )


@pytest.fixture
def other_contact(company: Company) -> Contact:
    return contact_create(
        company=company,
        first_name="Bruno",
        last_name="López",
        document_number="X1234567L",
        phone="+34600333444",
        email="bruno@example.com",
    )


@pytest.fixture
def make_staff(company: Company) -> Callable[..., object]:
    def make(username: str, *, email: str = "", first_name: str = "", of: Company = company):
        user = get_user_model().objects.create_user(
            username=username, email=email, first_name=first_name, is_staff=True
        )
        StaffMembership.objects.create(user=user, company=of)
        return user

    return make


@pytest.fixture
def make_case(company: Company, contact: Contact) -> Callable[..., Case]:
    """A case of `contact` (or another) in the given state, built through the services."""

    def make(state: str = Case.State.OPEN, *, for_contact: Contact | None = None, **fields) -> Case:
        fields.setdefault("subject", "La lavadora no centrifuga")
        fields.setdefault("description", "Desde el lunes hace ruido y no centrifuga.")
        case = services.case_open(company=company, contact=for_contact or contact, **fields)
        for step in PATH_TO_STATE[state]:
            case = getattr(services, f"case_{step}")(case=case)
        assert case.state == state
        return case

    return make
