"""Whose a record is, the services and selectors decide: each one given a customer's `contact`
refuses another customer's record with the one canonical refusal (PERMISSION `not_owner`, the
same words whatever the record), changes nothing, and the tools only pass the contact
(the last test holds every tools.py to that)."""

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

from agenda.models import Appointment
from agenda.selectors import agenda_settings_for, appointment_get_for_contact
from agenda.services import (
    appointment_book,
    appointment_cancel,
    appointment_reschedule,
    appointment_to_move,
)
from core.errors import NotFound, PermissionRefused, ValidationFailed
from core.identity import check_owner
from sales.models import Quote
from sales.selectors import quote_get
from sales.services.quote_lifecycle import quote_accept, quote_create, quote_reject
from sales.services.quote_pricing import QuoteItem
from support import services as support
from support.models import Case, CaseComment
from support.selectors import case_get
from tests import factories
from tests.factories import MONDAY_8AM, local

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parent.parent.parent
TUESDAY_10 = local(2026, 12, 8, 10)
TUESDAY_12 = local(2026, 12, 8, 12)


@pytest.fixture
def refusal(ana, bruno) -> PermissionRefused:
    """The canonical refusal, as core.identity.check_owner words it."""
    with pytest.raises(PermissionRefused) as raised:
        check_owner(contact=ana, owner_id=bruno.pk)
    return raised.value


def refused_alike(calls: dict[str, Callable[[], object]], refusal: PermissionRefused) -> None:
    for name, call in calls.items():
        with pytest.raises(PermissionRefused) as raised:
            call()
        error = raised.value
        assert error.code == refusal.code == "not_owner", name
        assert str(error.user_message) == str(refusal.user_message), name
        assert error.extras == {}, name  # nothing of the record in the refusal


# --- agenda -----------------------------------------------------------------------------------


@pytest.fixture
def brunos_appointment(company, bruno) -> Appointment:
    settings = agenda_settings_for(company=company)
    settings.minimum_notice_minutes = 60
    settings.cancellation_cutoff_minutes = 120
    settings.save()
    service = factories.service(company)
    return appointment_book(
        company=company,
        contact=bruno,
        service=service,
        professional=factories.marta(company, service),
        starts_at=TUESDAY_10,
        created_via=Appointment.Via.GATEWAY,
        now=MONDAY_8AM,
    )


def test_the_agenda_refuses_another_customers_appointment_alike(
    company, ana, brunos_appointment, refusal
):
    reference = brunos_appointment.reference
    calls = {
        "appointment_cancel": lambda: appointment_cancel(
            company=company, reference=reference, contact=ana, now=MONDAY_8AM
        ),
        "appointment_reschedule": lambda: appointment_reschedule(
            company=company, reference=reference, starts_at=TUESDAY_12, contact=ana, now=MONDAY_8AM
        ),
        "appointment_to_move": lambda: appointment_to_move(
            company=company, contact=ana, reference=reference, service_name="Corte de pelo"
        ),
        "appointment_get_for_contact": lambda: appointment_get_for_contact(
            company=company, contact=ana, reference=reference
        ),
    }
    refused_alike(calls, refusal)

    brunos_appointment.refresh_from_db()
    assert brunos_appointment.state == Appointment.State.SCHEDULED
    assert brunos_appointment.starts_at == TUESDAY_10


def test_the_agenda_lets_the_owner_and_staff_through(company, bruno, brunos_appointment):
    reference = brunos_appointment.reference
    assert appointment_to_move(
        company=company, contact=bruno, reference=reference, service_name="corte"
    ) == (brunos_appointment)
    moved = appointment_reschedule(
        company=company, reference=reference, starts_at=TUESDAY_12, contact=bruno, now=MONDAY_8AM
    )
    assert moved.starts_at == TUESDAY_12
    # Staff act on anyone's (no contact given).
    cancelled = appointment_cancel(company=company, reference=reference, now=MONDAY_8AM)
    assert cancelled.state == Appointment.State.CANCELLED


def test_a_move_keeps_its_service_in_the_service_layer(company, bruno, brunos_appointment):
    with pytest.raises(ValidationFailed) as raised:
        appointment_to_move(
            company=company,
            contact=bruno,
            reference=brunos_appointment.reference,
            service_name="Manicura",
        )

    assert raised.value.code == "service_mismatch"


def test_an_appointment_nobody_has_is_not_found_not_someone_elses(company, ana):
    with pytest.raises(NotFound) as raised:
        appointment_to_move(
            company=company, contact=ana, reference="AP-ZZZZZZ", service_name="Corte de pelo"
        )

    assert raised.value.code == "appointment_not_found"


# --- sales ------------------------------------------------------------------------------------


@pytest.fixture
def brunos_quote(company, bruno, catalog) -> Quote:
    return quote_create(company=company, contact=bruno, items=[QuoteItem("CAF-001", 1)])


def test_sales_refuses_another_customers_quote_alike(company, ana, brunos_quote, refusal):
    calls = {
        "quote_accept": lambda: quote_accept(quote=brunos_quote, contact=ana),
        "quote_reject": lambda: quote_reject(quote=brunos_quote, contact=ana),
        "quote_get": lambda: quote_get(
            company=company, reference=brunos_quote.reference, contact=ana
        ),
    }
    refused_alike(calls, refusal)

    brunos_quote.refresh_from_db()
    assert brunos_quote.state == Quote.State.SENT


def test_the_owner_is_refused_before_the_quotes_state_is_told(company, ana, bruno, catalog):
    """Another customer's quote that could not be accepted anyway says nothing of its state:
    ownership comes first."""
    quote = quote_create(company=company, contact=bruno, items=[QuoteItem("CAF-001", 1)])
    quote_reject(quote=quote, contact=bruno)

    with pytest.raises(PermissionRefused):
        quote_accept(quote=quote, contact=ana, expected_total="0.01")


def test_sales_lets_the_owner_and_staff_through(company, bruno, brunos_quote):
    assert quote_get(company=company, reference=brunos_quote.reference, contact=bruno) == (
        brunos_quote
    )
    assert quote_accept(quote=brunos_quote, contact=bruno).state == Quote.State.ACCEPTED
    other = quote_create(company=company, contact=bruno, items=[QuoteItem("CAF-001", 1)])
    assert quote_reject(quote=other).state == Quote.State.REJECTED  # staff: no contact


# --- support ----------------------------------------------------------------------------------


@pytest.fixture
def brunos_case(company, bruno) -> Case:
    case = support.case_open(
        company=company, contact=bruno, subject="No enciende", description="Desde ayer."
    )
    return support.case_resolve(case=support.case_start(case=case))


def test_support_refuses_another_customers_case_alike(company, ana, brunos_case, refusal):
    calls = {
        "case_comment_add": lambda: support.case_comment_add(
            case=brunos_case, body="Hola", author_contact=ana
        ),
        "case_close": lambda: support.case_close(case=brunos_case, contact=ana),
        "case_reopen": lambda: support.case_reopen(case=brunos_case, contact=ana, message="x"),
        "case_open": lambda: support.case_open(
            company=company,
            contact=ana,
            subject="Sigue igual",
            description="Otra vez.",
            related_case=brunos_case,
        ),
        "case_get": lambda: case_get(company=company, reference=brunos_case.reference, contact=ana),
    }
    refused_alike(calls, refusal)

    brunos_case.refresh_from_db()
    assert brunos_case.state == Case.State.RESOLVED
    assert not CaseComment.objects.exists()
    assert Case.objects.count() == 1


def test_support_lets_the_owner_and_staff_through(company, bruno, brunos_case):
    assert case_get(company=company, reference=brunos_case.reference, contact=bruno) == (
        brunos_case
    )
    support.case_comment_add(case=brunos_case, body="Gracias", author_contact=bruno)
    assert support.case_close(case=brunos_case, contact=bruno).state == Case.State.CLOSED
    follow_up = support.case_open(
        company=company,
        contact=bruno,
        subject="Sigue igual",
        description="Otra vez.",
        related_case=brunos_case,
    )
    assert follow_up.related_case == brunos_case


# --- the tools --------------------------------------------------------------------------------


def test_no_tool_checks_ownership_itself():
    """The tools pass the identified contact; check_owner is called by services and
    selectors (and the ledger, for a reference never seen), never in a tools.py."""
    offenders = []
    for path in sorted(ROOT.glob("*/tools.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = []
            if isinstance(node, ast.ImportFrom):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.Attribute):
                names = [node.attr]
            if "check_owner" in names:
                offenders.append(str(path.relative_to(ROOT)))
    assert sorted(set(offenders)) == []
    assert {p.parent.name for p in ROOT.glob("*/tools.py")} >= {"agenda", "sales", "support"}


def test_the_service_mismatch_rule_lives_in_the_service():
    tools = (ROOT / "agenda" / "tools.py").read_text()
    services = (ROOT / "agenda" / "services.py").read_text()
    assert '"service_mismatch"' not in tools
    assert '"service_mismatch"' in services
