"""Staff at work in the admin: transition buttons through the services, their history, and the
conversation trace ("why did the assistant say that?")."""

import re

import pytest
from django_fsm_log.models import StateLog

from core.models import Conversation
from sales.models import Quote
from tests.admin_pages import change_url, confirm
from tests.factories import ANA_DOCUMENT
from tests.staff.trace_calls import call
from tooling.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)


def history(obj) -> list[tuple[str, str, str]]:
    return [
        (log.transition, log.state, log.by.username if log.by else "")
        for log in StateLog.objects.for_(obj).order_by("timestamp")
    ]


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def _bound(form, data: dict) -> None:
    for name in form.fields:
        value = form[name].value()
        if value is None or value is False:
            continue  # what a browser leaves out: nothing, or an unticked box
        data[form.add_prefix(name)] = value


def press(client, obj, transition: str, **follow):
    """Press a transition button as a browser does: the whole change form, plus the button."""
    page = client.get(change_url(obj))
    data = {}
    _bound(page.context["adminform"].form, data)
    for inline in page.context["inline_admin_formsets"]:
        formset = inline.formset
        _bound(formset.management_form, data)
        for form in formset.initial_forms:
            _bound(form, data)
    data["_fsm_transition_to"] = transition
    return client.post(change_url(obj), data, **follow)


def has_button(page: str, transition: str) -> bool:
    return re.search(rf'name="_fsm_transition_to"\s+value="{transition}"', page) is not None


def test_an_agent_cancels_an_appointment_with_the_button_and_sees_it_in_the_history(
    client, sol_day, agent
):
    appointment = sol_day.appointment
    client.force_login(agent)
    page = client.get(change_url(appointment)).content.decode()
    assert has_button(page, "cancel")

    # The button opens the confirmation page; its "Yes", with a reason, cancels.
    response = confirm(client, appointment, "cancel", "customer_asked")

    appointment.refresh_from_db()
    assert appointment.state == "cancelled"
    assert history(appointment) == [("cancel", "cancelled", "agente.sol")]
    shown = response.content.decode()
    assert "agente.sol" in shown  # the history inline on the same page
    assert "A petición del cliente" in shown  # with the reason as its note
    assert not has_button(shown, "cancel")  # a terminal state offers no more buttons


def test_a_second_cancel_from_a_stale_tab_is_refused_with_the_state(client, sol_day, agent):
    appointment = sol_day.appointment
    client.force_login(agent)
    cancel_page = client.get(change_url(appointment))
    confirm(client, appointment, "cancel", "duplicate")

    # A second tab still showing the button: refused with the state it is in now, and its
    # confirmation page never opens.
    data = {"_fsm_transition_to": "cancel"}
    _bound(cancel_page.context["adminform"].form, data)
    for inline in cancel_page.context["inline_admin_formsets"]:
        _bound(inline.formset.management_form, data)
    again = client.post(change_url(appointment), data, follow=True)

    assert len(history(appointment)) == 1
    assert again.request["PATH_INFO"] == change_url(appointment)
    assert messages_of(again) == [f"{appointment.reference} está Cancelada: ya no puede cambiar."]


def test_an_agent_moves_a_case_with_the_buttons(client, sol_day, agent):
    case = sol_day.case
    client.force_login(agent)

    press(client, case, "start")
    confirm(client, case, "resolve", "")  # it tells the customer: its confirmation page

    case.refresh_from_db()
    assert case.state == "resolved"
    assert history(case) == [
        ("start", "in_progress", "agente.sol"),
        ("resolve", "resolved", "agente.sol"),
    ]
    assert "agente.sol" in client.get(change_url(case)).content.decode()


def test_an_agent_sees_no_quote_buttons_and_cannot_use_the_transition_form(client, sol_day, agent):
    quote = sol_day.quote
    client.force_login(agent)

    page = client.get(change_url(quote)).content.decode()
    by_form = client.post(f"/admin/sales/quote/{quote.pk}/transition/reject/", {"reason": "caro"})

    assert "_fsm_transition_to" not in page
    assert by_form.status_code == 403
    quote.refresh_from_db()
    assert quote.state == Quote.State.SENT


def test_a_supervisor_rejects_a_quote_through_its_confirmation_and_the_history_keeps_it(
    client, sol_day, supervisor
):
    quote = sol_day.quote
    client.force_login(supervisor)

    response = client.post(
        f"/admin/sales/quote/{quote.pk}/transition/reject/",
        {
            "reason": "too_expensive",
            "details": "pidió un 10 % menos",
            f"confirmed_against_{quote.pk}": "state=sent",
        },
    )

    assert response.status_code == 302
    quote.refresh_from_db()
    assert (quote.state, quote.rejection_reason) == (
        "rejected",
        "Demasiado caro: pidió un 10 % menos",
    )
    assert history(quote)[-1] == ("reject", "rejected", "supervisora.sol")


def test_staff_of_another_company_cannot_transition_by_url(client, sol_day, luna_agent):
    appointment = sol_day.appointment
    client.force_login(luna_agent)

    client.post(change_url(appointment), {"_fsm_transition_to": "cancel"})
    client.post(
        f"/admin/agenda/appointment/{appointment.pk}/transition/reschedule/",
        {"professional": sol_day.professional.pk, "day": "2030-01-01", "at": "10:00"},
    )

    appointment.refresh_from_db()
    assert appointment.state == "scheduled"
    assert history(appointment) == []


def test_the_conversation_page_lists_its_tool_calls_in_order_with_masked_arguments(
    client, sol_day, agent
):
    conversation = Conversation.objects.create(company=sol_day.company, external_id="conv-why")
    call(
        sol_day.company,
        "identify_contact",
        {"document": ANA_DOCUMENT},
        conversation_id="conv-why",
        idempotency_key="k-1",
    )
    call(
        sol_day.company,
        "list_my_appointments",
        {"identifier": ANA_DOCUMENT},
        conversation_id="conv-why",
    )
    call(
        sol_day.company,
        "cancel_appointment",
        {"identifier": ANA_DOCUMENT, "appointment": "AP-NOTSEEN"},
        conversation_id="conv-why",
        idempotency_key="k-2",
    )
    call(sol_day.company, "list_services", {}, conversation_id="conv-other")
    client.force_login(agent)

    page = client.get(change_url(conversation)).content.decode()

    table = page[page.index("garante-trace") :]
    tools = re.findall(
        r"<td>(identify_contact|list_my_appointments|cancel_appointment|list_services)</td>", table
    )
    assert tools == ["identify_contact", "list_my_appointments", "cancel_appointment"]
    assert "[document •••8Z]" in table
    assert ANA_DOCUMENT not in page
    assert "reference_not_seen" in table  # the code the assistant was answered with


def test_the_tool_call_list_is_read_only_and_scoped(client, sol_day, luna_day, agent):
    call(sol_day.company, "list_services", {}, conversation_id="conv-sol")
    call(luna_day.company, "list_services", {}, conversation_id="conv-luna")
    mine = ToolCall.objects.get(company=sol_day.company)
    theirs = ToolCall.objects.get(company=luna_day.company)
    client.force_login(agent)

    listing = client.get("/admin/tooling/toolcall/").content.decode()
    changed = client.post(change_url(mine), {"tool": "something_else"})

    assert "conv-sol" in listing
    assert "conv-luna" not in listing
    assert client.get(change_url(theirs)).status_code == 302
    assert client.get("/admin/tooling/toolcall/add/").status_code == 403
    assert changed.status_code == 403
    mine.refresh_from_db()
    assert mine.tool == "list_services"
