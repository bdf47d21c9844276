"""Nothing that cannot be undone, or that tells the customer, happens in the admin on one click:
the button (or the list action) opens a confirmation page that says what will happen and asks
for a reason; its "Yes" applies the transition through the service with that reason, kept in
the history and told to the customer where they are told (core.admin.confirmation)."""

import re
from datetime import time, timedelta

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone
from django_fsm_log.models import StateLog

from agenda import clock
from agenda.models import Appointment, AppointmentMessage, Service
from agenda.services import (
    appointment_book,
    appointment_cancel,
    appointment_reschedule,
    professional_create,
)
from core.admin import confirmation
from core.models import Contact
from core.reasons import REASON_MAX_LENGTH
from core.services import contact_create
from sales.models import Opportunity, Quote
from sales.services import QuoteItem, opportunity_create, quote_accept, quote_create
from support.models import Case
from support.services import case_resolve, case_start
from tests.admin_pages import change_form_data, change_url, confirm, confirmation_data
from tests.factories import ANA_PHONE
from tests.staff.conftest import midday_timezone

pytestmark = pytest.mark.django_db(transaction=True)


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def notes(obj) -> list[tuple[str, str]]:
    return [(log.transition, log.description) for log in StateLog.objects.for_(obj)]


def cancellation_sms(sms_outbox) -> list[str]:
    return [sms.body for sms in sms_outbox if "cancelada" in sms.body]


def opened(client, obj, transition: str):
    """Press the button; the confirmation page it leads to."""
    pressed = client.post(
        change_url(obj), change_form_data(client, obj, _fsm_transition_to=transition)
    )
    assert pressed.status_code == 302
    return pressed["Location"], client.get(pressed["Location"])


def book_another(day, hours_ahead: int = 3, contact: Contact | None = None) -> Appointment:
    starts = day.appointment.starts_at + timedelta(hours=hours_ahead)
    return appointment_book(
        company=day.company,
        contact=contact or day.contact,
        service=day.service,
        professional=day.professional,
        starts_at=starts,
        created_via=Appointment.Via.STAFF,
        enforce_customer_rules=False,
    )


# One appointment ---------------------------------------------------------------------------------


def test_the_cancel_button_opens_a_page_saying_what_happens_and_does_nothing_yet(
    client, sol_day, agent, sms_outbox
):
    appointment = sol_day.appointment
    client.force_login(agent)

    url, page = opened(client, appointment, "cancel")

    assert url == f"/admin/agenda/appointment/{appointment.pk}/transition/cancel/"
    shown = page.content.decode()
    assert "Ana recibirá un SMS con el motivo." in shown
    assert "La cita se cancela y su hora queda libre." in shown
    assert "A petición del cliente" in shown  # the action's short list
    assert 'name="details"' in shown  # or the staff member's own words
    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.SCHEDULED
    assert cancellation_sms(sms_outbox) == []


def test_confirming_cancels_keeps_the_reason_and_texts_it_to_the_customer(
    client, sol_day, agent, sms_outbox
):
    appointment = sol_day.appointment
    client.force_login(agent)

    response = confirm(client, appointment, "cancel", "professional_unavailable")

    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.CANCELLED
    assert notes(appointment) == [("cancel", "El profesional no está disponible")]
    (sms,) = cancellation_sms(sms_outbox)
    assert "Motivo: El profesional no está disponible." in sms
    assert response.request["PATH_INFO"] == change_url(appointment)
    assert messages_of(response)[0].startswith(f"La cita {appointment.reference} está ahora")
    # The history on the appointment's page shows the reason as its note.
    assert "no está disponible" in response.content.decode()


def test_a_reason_in_the_staff_members_own_words_is_stored_and_sent_as_typed(
    client, sol_day, agent, sms_outbox
):
    client.force_login(agent)

    confirm(client, sol_day.appointment, "cancel", "other", "  La clínica cierra   por obras ")

    assert notes(sol_day.appointment) == [("cancel", "La clínica cierra por obras")]
    (sms,) = cancellation_sms(sms_outbox)
    assert "ha quedado cancelada. Motivo: La clínica cierra por obras." in sms


def test_a_choice_with_details_keeps_both(client, sol_day, agent, sms_outbox):
    client.force_login(agent)

    confirm(client, sol_day.appointment, "cancel", "customer_asked", "llamó por teléfono")

    assert notes(sol_day.appointment) == [("cancel", "A petición del cliente: llamó por teléfono")]


def test_the_reason_reaches_a_customer_without_a_phone_by_email(client, sol_day, agent, sms_outbox):
    Contact.objects.filter(pk=sol_day.contact.pk).update(phone="", email="ana@example.com")
    client.force_login(agent)

    _url, page = opened(client, sol_day.appointment, "cancel")
    confirm(client, sol_day.appointment, "cancel", "duplicate")

    assert "Ana recibirá un correo con el motivo." in page.content.decode()
    (email,) = [m for m in mail.outbox if "cancelada" in m.subject]
    assert email.to == ["ana@example.com"]
    assert "Motivo: Reserva duplicada." in email.body
    assert cancellation_sms(sms_outbox) == []


def test_the_page_says_nothing_is_sent_to_a_customer_who_opted_out_and_nothing_is(
    client, sol_day, agent, sms_outbox
):
    Contact.objects.filter(pk=sol_day.contact.pk).update(sms_opt_out=True)
    client.force_login(agent)

    _url, page = opened(client, sol_day.appointment, "cancel")
    confirm(client, sol_day.appointment, "cancel", "duplicate")

    assert "No se envía nada a Ana: pidió no recibir mensajes." in page.content.decode()
    assert cancellation_sms(sms_outbox) == []
    message = AppointmentMessage.objects.get(appointment=sol_day.appointment, kind="cancelled")
    assert message.status == AppointmentMessage.Status.NOT_SENT


@pytest.mark.parametrize(
    ("details", "error"),
    [
        ("x" * (REASON_MAX_LENGTH + 1), "El motivo es demasiado largo"),
        ("<b>cerrado</b>", "Escriba el motivo como texto sin formato"),
        ("cerrado &amp; sin luz", "Escriba el motivo como texto sin formato"),
        ("", "Con «Otro», escriba el motivo con sus palabras."),
    ],
)
def test_a_reason_too_long_or_with_markup_is_a_form_error_and_nothing_happens(
    client, sol_day, agent, sms_outbox, details, error
):
    appointment = sol_day.appointment
    client.force_login(agent)
    url, page = opened(client, appointment, "cancel")

    response = client.post(url, confirmation_data(page, "other", details))

    assert response.status_code == 200  # the page again, with the error
    assert error in response.content.decode()
    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.SCHEDULED
    assert not StateLog.objects.for_(appointment).exists()
    assert cancellation_sms(sms_outbox) == []


def test_a_confirmation_whose_appointment_was_cancelled_meanwhile_is_refused_alone(
    client, sol_day, agent, sms_outbox, django_capture_on_commit_callbacks
):
    appointment = sol_day.appointment
    client.force_login(agent)
    url, page = opened(client, appointment, "cancel")
    appointment_cancel(  # the customer, through the agent, while the page is open
        company=sol_day.company, reference=appointment.reference, enforce_cutoff=False
    )

    response = client.post(url, confirmation_data(page, "duplicate"), follow=True)

    assert messages_of(response) == [
        f"{appointment.reference} está Cancelada: ya no puede cambiar."
    ]
    assert notes(appointment) == [("cancel", None)]  # the customer's cancellation alone
    assert len(cancellation_sms(sms_outbox)) == 1  # theirs, not a second


def test_a_confirmation_whose_appointment_moved_meanwhile_is_refused_and_nothing_is_sent(
    client, sol_day, agent, sms_outbox
):
    appointment = sol_day.appointment
    client.force_login(agent)
    url, page = opened(client, appointment, "cancel")
    appointment_reschedule(  # a colleague moves it: same state, another time
        company=sol_day.company,
        reference=appointment.reference,
        starts_at=appointment.starts_at + timedelta(hours=1),
        enforce_customer_rules=False,
    )

    response = client.post(url, confirmation_data(page, "duplicate"), follow=True)

    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.SCHEDULED
    (message,) = messages_of(response)
    assert message.startswith(f"{appointment.reference} cambió mientras")
    assert "no se hizo nada ni se envió nada" in message
    assert cancellation_sms(sms_outbox) == []


def test_a_confirmation_that_does_not_say_what_it_confirmed_is_refused(
    client, sol_day, agent, sms_outbox
):
    appointment = sol_day.appointment
    client.force_login(agent)
    url, page = opened(client, appointment, "cancel")
    data = confirmation_data(page, "duplicate")
    del data[f"confirmed_against_{appointment.pk}"]

    client.post(url, data)

    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.SCHEDULED


def test_a_no_show_is_confirmed_with_its_reason_and_sends_nothing(
    client, sol_day, agent, sms_outbox, monkeypatch
):
    appointment = sol_day.appointment
    monkeypatch.setattr(clock, "now", lambda: appointment.starts_at + timedelta(minutes=20))
    client.force_login(agent)

    _url, page = opened(client, appointment, "mark_no_show")
    sent_before = len(sms_outbox)
    confirm(client, appointment, "mark_no_show", "did_not_come")

    assert "No se envía nada a Ana." in page.content.decode()
    appointment.refresh_from_db()
    assert appointment.state == Appointment.State.NO_SHOW
    assert notes(appointment) == [("mark_no_show", "El cliente no vino ni avisó")]
    assert len(sms_outbox) == sent_before


# Several appointments at once --------------------------------------------------------------------


def bulk(client, model_admin_url: str, action: str, objects):
    """Choose the list action for `objects`; the confirmation page it opens."""
    return client.post(
        model_admin_url,
        {"action": action, "_selected_action": [o.pk for o in objects], "index": "0"},
    )


def test_the_list_action_confirms_several_appointments_each_told_with_the_reason(
    client, sol_day, agent, sms_outbox
):
    first, second = sol_day.appointment, book_another(sol_day)
    already = book_another(sol_day, hours_ahead=5)
    appointment_cancel(company=sol_day.company, reference=already.reference, enforce_cutoff=False)
    listing = reverse("admin:agenda_appointment_changelist")
    client.force_login(agent)

    page = bulk(client, listing, "confirm_cancel", [first, second, already])

    shown = page.content.decode()
    assert shown.count("Ana recibirá un SMS con el motivo.") == 2
    assert "Se quedan como están" in shown and already.reference in shown
    response = client.post(
        listing, confirmation_data(page, "professional_unavailable"), follow=True
    )

    for appointment in (first, second):
        appointment.refresh_from_db()
        assert appointment.state == Appointment.State.CANCELLED
    cancellations = cancellation_sms(sms_outbox)
    assert len(cancellations) == 3  # the two confirmed, and the one cancelled before
    assert sum("Motivo: El profesional no está disponible." in s for s in cancellations) == 2
    assert messages_of(response) == ["Cancelar: 2 registros hechos."]


def test_the_list_action_refuses_one_changed_meanwhile_and_does_the_others(
    client, sol_day, agent, sms_outbox
):
    first, second = sol_day.appointment, book_another(sol_day)
    listing = reverse("admin:agenda_appointment_changelist")
    client.force_login(agent)
    page = bulk(client, listing, "confirm_cancel", [first, second])
    appointment_reschedule(
        company=sol_day.company,
        reference=second.reference,
        starts_at=second.starts_at + timedelta(hours=2),
        enforce_customer_rules=False,
    )

    response = client.post(listing, confirmation_data(page, "duplicate"), follow=True)

    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.state, second.state) == ("cancelled", "scheduled")
    shown = messages_of(response)
    assert shown[0].startswith(f"{second.reference}: {second.reference} cambió mientras")
    assert shown[1] == "Cancelar: 1 registro hecho."


def test_the_list_action_with_a_bad_reason_shows_the_page_again_and_does_nothing(
    client, sol_day, agent
):
    listing = reverse("admin:agenda_appointment_changelist")
    client.force_login(agent)
    page = bulk(client, listing, "confirm_cancel", [sol_day.appointment])

    response = client.post(listing, confirmation_data(page, "other", "<script>x</script>"))

    assert response.status_code == 200
    assert "Escriba el motivo como texto sin formato" in response.content.decode()
    sol_day.appointment.refresh_from_db()
    assert sol_day.appointment.state == Appointment.State.SCHEDULED


def test_a_selection_larger_than_a_page_can_list_is_refused(client, sol_day, agent, monkeypatch):
    monkeypatch.setattr(confirmation, "BULK_LIMIT", 1)
    listing = reverse("admin:agenda_appointment_changelist")
    client.force_login(agent)

    response = client.post(
        listing,
        {
            "action": "confirm_cancel",
            "_selected_action": [sol_day.appointment.pk, book_another(sol_day).pk],
            "index": "0",
        },
        follow=True,
    )

    assert messages_of(response) == [
        "Elija como máximo 1 registros a la vez: cada uno se lista para leerlo."
    ]
    assert not Appointment.objects.filter(state=Appointment.State.CANCELLED).exists()


def test_staff_of_another_company_cannot_confirm_by_url(client, sol_day, luna_agent):
    client.force_login(luna_agent)
    url = f"/admin/agenda/appointment/{sol_day.appointment.pk}/transition/cancel/"

    client.post(url, {"reason": "duplicate", f"confirmed_against_{sol_day.appointment.pk}": ""})

    sol_day.appointment.refresh_from_db()
    assert sol_day.appointment.state == Appointment.State.SCHEDULED


# Quotes, orders, opportunities and cases -------------------------------------------------------


def accepted_order(day) -> Quote:
    return quote_accept(quote=day.quote)


def lose_ready(day) -> Opportunity:
    opportunity = opportunity_create(company=day.company, contact=day.contact, title="Tintes")
    quote = quote_create(
        company=day.company,
        contact=day.contact,
        items=_items_of(day.quote),
        opportunity=opportunity,
    )
    assert quote.state == Quote.State.SENT
    return opportunity


def _items_of(quote: Quote) -> list[QuoteItem]:
    return [QuoteItem(line.sku, line.quantity) for line in quote.lines.all()]


def resolved_case(day) -> Case:
    case_start(case=day.case)
    return case_resolve(case=day.case)


SALES_AND_SUPPORT = [
    # (what to act on, the transition, the reason chosen, the state reached, the note kept,
    # whether Ana, who has only a phone, is texted it)
    (lambda d: d.quote, "reject", "too_expensive", "rejected", "Demasiado caro", True),
    (lambda d: d.quote, "expire", "no_answer", "expired", "Sin respuesta del cliente", True),
    (accepted_order, "cancel", "cannot_supply", "cancelled", "No se puede suministrar", True),
    (lose_ready, "lose", "competitor", "lost", "Se fue con la competencia", False),
    (resolved_case, "close", "no_answer", "closed", "Sin respuesta del cliente", True),
]
TOLD_BY_SMS = "Ana recibirá un SMS con el motivo."
NOTHING_SENT = "No se envía nada a Ana."
PARAMETERS = ("build", "transition", "reason", "state", "stored", "told")


@pytest.mark.parametrize(PARAMETERS, SALES_AND_SUPPORT)
def test_each_other_action_is_confirmed_with_its_reason_one_at_a_time(
    client, sol_day, supervisor, sms_outbox, build, transition, reason, state, stored, told
):
    obj = build(sol_day)
    client.force_login(supervisor)
    texts_before = len(sms_outbox)
    emails_before = len(mail.outbox)

    _url, page = opened(client, obj, transition)
    assert (len(sms_outbox), len(mail.outbox)) == (texts_before, emails_before)
    response = confirm(client, obj, transition, reason)

    assert (TOLD_BY_SMS if told else NOTHING_SENT) in page.content.decode()
    obj.refresh_from_db()
    assert obj.state == state
    assert notes(obj)[-1] == (transition, stored)
    assert len(mail.outbox) == emails_before
    texts = sms_outbox[texts_before:]
    if told:
        (sms,) = texts
        assert sms.to == ANA_PHONE and obj.reference in sms.body
        assert f"Motivo: {stored}." in sms.body
    else:
        assert texts == []
    assert response.request["PATH_INFO"] == change_url(obj)


@pytest.mark.parametrize(PARAMETERS, SALES_AND_SUPPORT)
def test_each_other_action_is_a_list_action_with_the_same_page(
    client, sol_day, supervisor, sms_outbox, build, transition, reason, state, stored, told
):
    obj = build(sol_day)
    listing = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_changelist")
    client.force_login(supervisor)
    texts_before = len(sms_outbox)

    page = bulk(client, listing, f"confirm_{transition}", [obj])
    assert page.status_code == 200
    assert (TOLD_BY_SMS if told else NOTHING_SENT) in page.content.decode()
    client.post(listing, confirmation_data(page, reason), follow=True)

    obj.refresh_from_db()
    assert obj.state == state
    assert notes(obj)[-1] == (transition, stored)
    assert len(sms_outbox) - texts_before == (1 if told else 0)


def test_losing_an_opportunity_says_which_open_quotes_expire_with_it(client, sol_day, supervisor):
    opportunity = lose_ready(sol_day)
    quote = Quote.objects.get(opportunity=opportunity)
    client.force_login(supervisor)

    _url, page = opened(client, opportunity, "lose")

    assert f"Su cotización abierta {quote.reference} vence con ella." in page.content.decode()
    confirm(client, opportunity, "lose", "no_budget")
    quote.refresh_from_db()
    assert (quote.state, notes(quote)[-1]) == ("expired", ("expire", "Sin presupuesto"))


def test_a_stale_quote_confirmation_is_refused_after_the_customer_accepted(
    client, sol_day, supervisor
):
    quote = sol_day.quote
    client.force_login(supervisor)
    url, page = opened(client, quote, "expire")
    quote_accept(quote=quote)  # the customer accepts while the page is open

    response = client.post(url, confirmation_data(page, "no_answer"), follow=True)

    quote.refresh_from_db()
    assert quote.state == Quote.State.ACCEPTED
    (message,) = messages_of(response)
    assert re.match(
        rf"{quote.reference} está Aceptada: ahora no se le puede aplicar «Vencer»", message
    )


def test_an_agent_gets_no_quote_actions_and_cannot_confirm_one(client, sol_day, agent):
    quote = sol_day.quote
    client.force_login(agent)

    listing = client.get(reverse("admin:sales_quote_changelist")).content.decode()
    refused = client.post(
        f"/admin/sales/quote/{quote.pk}/transition/reject/",
        {"reason": "too_expensive", f"confirmed_against_{quote.pk}": "state=sent"},
    )

    assert "confirm_reject" not in listing
    assert refused.status_code == 403
    quote.refresh_from_db()
    assert quote.state == Quote.State.SENT


def test_a_reason_from_the_list_is_told_in_the_companys_language_not_the_staff_members(
    client, make_company, make_staff, sms_outbox, settings
):
    sun = make_company(name="Sun Salon", timezone=midday_timezone(), language="en")
    service = Service.objects.create(company=sun, name="Haircut", duration_minutes=30)
    professional = professional_create(
        company=sun,
        display_name="Marta",
        services=[service],
        weekly_hours=[(d, time(0), time(23, 59)) for d in range(7)],
    )
    ana = contact_create(company=sun, first_name="Ana", phone=ANA_PHONE)
    starts = (timezone.now() + timedelta(hours=3)).replace(minute=0, second=0, microsecond=0)
    appointment = appointment_book(
        company=sun,
        contact=ana,
        service=service,
        professional=professional,
        starts_at=starts,
        created_via=Appointment.Via.STAFF,
        enforce_customer_rules=False,
    )
    client.force_login(make_staff("agent.sun", sun, "agent"))
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "es"  # who chose to read Spanish

    _url, page = opened(client, appointment, "cancel")  # the staff member reads Spanish
    confirm(client, appointment, "cancel", "customer_asked")

    assert "A petición del cliente" in page.content.decode()
    assert notes(appointment) == [("cancel", "At the customer's request")]
    (sms,) = [s.body for s in sms_outbox if "cancelled" in s.body]
    assert "Reason: At the customer's request." in sms


# Resolving a case and sending a quote tell the customer: confirmed too (issue 43) ----------------


def test_resolving_a_case_is_confirmed_with_an_optional_note_told_to_the_customer(
    client, sol_day, agent, sms_outbox
):
    case = case_start(case=sol_day.case)
    client.force_login(agent)

    _url, page = opened(client, case, "resolve")
    shown = page.content.decode()
    case.refresh_from_db()
    assert case.state == Case.State.IN_PROGRESS and sms_outbox == []
    assert "Ana recibirá un SMS avisando de que el caso está resuelto, con su nota." in shown
    assert "no se puede deshacer" not in shown  # a resolved case reopens
    response = confirm(client, case, "resolve", "", "Le reenviamos la factura por correo postal")

    case.refresh_from_db()
    assert case.state == Case.State.RESOLVED
    assert notes(case)[-1] == ("resolve", "Le reenviamos la factura por correo postal")
    (sms,) = sms_outbox
    assert f"hemos resuelto su caso {case.reference}" in sms.body
    assert "Resolución: Le reenviamos la factura por correo postal." in sms.body
    assert "Se está avisando a Ana por SMS de que el caso está resuelto." in messages_of(response)


def test_resolving_without_a_note_is_fine_and_a_bad_note_is_refused(
    client, sol_day, agent, sms_outbox
):
    case = case_start(case=sol_day.case)
    client.force_login(agent)

    url, page = opened(client, case, "resolve")
    refused = client.post(url, confirmation_data(page, "", "<b>hecho</b>"))
    assert refused.status_code == 200 and "texto sin formato" in refused.content.decode()
    case.refresh_from_db()
    assert case.state == Case.State.IN_PROGRESS and sms_outbox == []

    client.post(url, confirmation_data(page, ""), follow=True)

    case.refresh_from_db()
    assert case.state == Case.State.RESOLVED
    (sms,) = sms_outbox
    assert "Resolución" not in sms.body


def test_the_list_action_resolves_several_cases_each_customer_told(
    client, sol_day, agent, sms_outbox
):
    first = case_start(case=sol_day.case)
    berta = contact_create(company=sol_day.company, first_name="Berta", email="berta@example.com")
    from support.services import case_open

    second = case_start(
        case=case_open(company=sol_day.company, contact=berta, subject="Envío", description="No")
    )
    listing = reverse("admin:support_case_changelist")
    client.force_login(agent)

    page = bulk(client, listing, "confirm_resolve", [first, second])
    shown = page.content.decode()
    assert "Ana recibirá un SMS" in shown and "Berta recibirá un correo" in shown
    client.post(listing, confirmation_data(page, "", "Revisado"), follow=True)

    for case in (first, second):
        case.refresh_from_db()
        assert case.state == Case.State.RESOLVED
    assert len(sms_outbox) == 1
    (email,) = [m for m in mail.outbox if m.to == ["berta@example.com"]]
    assert "Resolución: Revisado." in email.body


def test_closing_a_case_of_a_customer_who_cannot_be_reached_warns_the_staff_member(
    client, sol_day, supervisor
):
    case = resolved_case(sol_day)
    Contact.objects.filter(pk=sol_day.contact.pk).update(sms_opt_out=True)
    client.force_login(supervisor)

    _url, page = opened(client, case, "close")
    response = confirm(client, case, "close", "duplicate")

    assert "No se envía nada a Ana: pidió no recibir mensajes." in page.content.decode()
    case.refresh_from_db()
    assert case.state == Case.State.CLOSED
    assert any("no se ha podido avisar a Ana" in m for m in messages_of(response))


def test_sending_a_quote_is_confirmed_before_it_is_emailed(client, sol_day, supervisor):
    draft = quote_create(
        company=sol_day.company,
        contact=sol_day.contact,
        items=_items_of(sol_day.quote),
        send=False,
    )
    client.force_login(supervisor)

    url, page = opened(client, draft, "send")
    draft.refresh_from_db()
    assert draft.state == Quote.State.DRAFT
    assert "Ana no tiene correo: no se envía nada" in page.content.decode()
    assert 'name="reason"' not in page.content.decode()  # nothing to explain: only "Yes"
    client.post(url, confirmation_data(page, ""), follow=True)

    draft.refresh_from_db()
    assert draft.state == Quote.State.SENT
