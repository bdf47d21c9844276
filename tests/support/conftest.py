"""Fixtures of the support tests: cases of a customer in any state."""

from collections.abc import Callable

import pytest

from core.models import Company, Contact
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
def make_case(company: Company, ana: Contact) -> Callable[..., Case]:
    """A case of Ana (or `for_contact`) in the given state, built through the services."""

    def make(state: str = Case.State.OPEN, *, for_contact: Contact | None = None, **fields) -> Case:
        fields.setdefault("subject", "La lavadora no centrifuga")
        fields.setdefault("description", "Desde el lunes hace ruido y no centrifuga.")
        case = services.case_open(company=company, contact=for_contact or ana, **fields)
        for step in PATH_TO_STATE[state]:
            case = getattr(services, f"case_{step}")(case=case)
        assert case.state == state
        return case

    return make
