"""Fixtures of the support tests: customers and staff of a company, and cases in any state."""

import contextlib
import email
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from aiosmtpd.controller import Controller
from django.contrib.auth import get_user_model

from core.models import Company, Contact, StaffMembership
from core.services import contact_create
from support import services
from support.models import Case
from tests.servers import free_port

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


@dataclass
class RefusingSmtp:
    """A mail server answering recipients with `reply` (the first `times` of them; all, if
    None), the others accepted (all, with no `reply`); it keeps each message it accepts with
    its envelope recipients."""

    reply: str | None = None
    times: int | None = None
    rcpt_attempts: int = 0
    messages: list[tuple[list[str], email.message.Message]] = field(default_factory=list)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        self.rcpt_attempts += 1
        if self.reply and (self.times is None or self.rcpt_attempts <= self.times):
            return self.reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        message = email.message_from_bytes(envelope.content)
        self.messages.append((list(envelope.rcpt_tos), message))
        return "250 Message accepted"


@contextlib.contextmanager
def refusing_smtp(
    reply: str | None, times: int | None = None
) -> Iterator[tuple[str, int, RefusingSmtp]]:
    handler = RefusingSmtp(reply, times)
    controller = Controller(handler, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        yield controller.hostname, controller.port, handler
    finally:
        controller.stop()


@pytest.fixture
def smtp_refusing(settings) -> Iterator[Callable[..., RefusingSmtp]]:
    """Start a `RefusingSmtp` and send this process's email to it."""
    with contextlib.ExitStack() as stack:

        def start(reply: str | None = None, times: int | None = None) -> RefusingSmtp:
            host, port, handler = stack.enter_context(refusing_smtp(reply, times))
            settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
            settings.EMAIL_HOST, settings.EMAIL_PORT = host, port
            return handler

        yield start
