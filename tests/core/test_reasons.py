"""A transition's reason is plain text of a bounded length, checked by the services whoever
calls them (core.reasons): refused with a stable code, never cleaned silently."""

import pytest
from django.utils import translation
from django_fsm_log.models import StateLog

from agenda.models import Appointment
from agenda.services import appointment_book, appointment_cancel
from core.errors import ValidationFailed
from core.reasons import REASON_MAX_LENGTH, reason_checked, reason_problem
from sales.models import Opportunity, Quote
from sales.services import opportunity_create, opportunity_lose, quote_create, quote_reject
from sales.services.quote_pricing import QuoteItem
from support.services import case_close, case_open, case_resolve, case_start
from tests.factories import MONDAY_8AM, local


@pytest.mark.parametrize(
    "text",
    [
        "La clienta llamó",
        "Precio <3 competencia",  # a lone "<" is plain text
        "Smith & Co no paga",  # and so is a lone "&"
        "a > b",
        "x" * REASON_MAX_LENGTH,
        "",
    ],
)
def test_plain_text_within_the_bound_is_a_reason(text):
    assert reason_problem(text) is None
    assert reason_checked(text) == text


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("x" * (REASON_MAX_LENGTH + 1), "reason_too_long"),
        ("<b>cerrado</b>", "reason_markup"),
        ("cerrado </p>", "reason_markup"),
        ("<!-- nota -->", "reason_markup"),
        ("<img src=x onerror=alert(1)>", "reason_markup"),
        ("cerrado &amp; sin luz", "reason_markup"),
        ("cerrado &#60;b&#62;", "reason_markup"),
        ("cerrado &#x3c;", "reason_markup"),
        ("cerrado\x00", "reason_control_characters"),
    ],
)
def test_markup_control_characters_and_length_are_refused_with_their_code(text, code):
    with pytest.raises(ValidationFailed) as refused:
        reason_checked(text)

    assert refused.value.code == code
    with translation.override("es"):
        assert str(refused.value.user_message).startswith("El motivo")


def test_white_space_is_one_space_and_the_bound_counts_what_is_stored():
    assert reason_checked("  cierra \n por\tobras  ") == "cierra por obras"
    assert reason_checked(" " + "x" * REASON_MAX_LENGTH + "   ") == "x" * REASON_MAX_LENGTH


@pytest.mark.django_db
def test_a_service_refuses_a_reason_with_markup_before_changing_anything(
    company, service, marta, ana
):
    appointment = appointment_book(
        company=company,
        contact=ana,
        service=service,
        professional=marta,
        starts_at=local(2026, 12, 8, 10),
        created_via="staff",
        now=MONDAY_8AM,
    )

    with pytest.raises(ValidationFailed) as refused:
        appointment_cancel(
            company=company,
            reference=appointment.reference,
            enforce_cutoff=False,
            now=MONDAY_8AM,
            reason="<script>x</script>",
        )

    assert refused.value.code == "reason_markup"
    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.SCHEDULED
    assert not StateLog.objects.for_(appointment).exists()


@pytest.mark.django_db
def test_each_service_keeps_the_reason_as_the_transitions_note(company, ana, catalog):
    quote = quote_create(company=company, contact=ana, items=[QuoteItem("TAZ-002", 1)])
    opportunity = opportunity_create(company=company, contact=ana, title="Tazas")
    case = case_open(company=company, contact=ana, subject="Taza rota", description="Llegó rota.")
    case_start(case=case)
    case_resolve(case=case)

    quote_reject(quote=quote, reason="  Demasiado   caro ")
    opportunity_lose(opportunity=opportunity, reason="Sin presupuesto")
    case_close(case=case, reason="Resuelto, confirmado por el cliente")

    assert Quote.objects.get(pk=quote.pk).rejection_reason == "Demasiado caro"
    assert Opportunity.objects.get(pk=opportunity.pk).lost_reason == "Sin presupuesto"
    assert [
        (log.transition, log.description)
        for obj in (quote, opportunity, case)
        for log in StateLog.objects.for_(obj).order_by("pk")
        if log.transition in ("reject", "lose", "close")
    ] == [
        ("reject", "Demasiado caro"),
        ("lose", "Sin presupuesto"),
        ("close", "Resuelto, confirmado por el cliente"),
    ]
