"""The support admin: a scoped case queue whose buttons and comments go through the services."""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django_fsm_log.models import StateLog

from support.models import Case, CaseComment
from tests.admin_pages import (
    change_form_data,
    change_url,
    confirmation_data,
    transition_buttons,
)

pytestmark = pytest.mark.django_db
S = Case.State


@pytest.fixture
def agent(make_staff):
    user = make_staff("marta", email="marta@sol.example", first_name="Marta")
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="support"))
    return user


@pytest.fixture
def agent_client(client, agent):
    client.force_login(agent)
    return client


def with_new_comment(data: dict, body: str, *, public: bool) -> dict:
    index = int(data["comments-INITIAL_FORMS"])
    data[f"comments-{index}-body"] = body
    if public:
        data[f"comments-{index}-public"] = "True"
    return data


def test_the_queue_shows_only_the_staff_members_companies(
    agent_client, make_case, other_company, make_staff
):
    from core.services import contact_create
    from support.services import case_open

    mine = make_case(S.OPEN, subject="Mi caso")
    stranger = contact_create(company=other_company, first_name="Eva", email="e@example.com")
    theirs = case_open(company=other_company, contact=stranger, subject="Ajeno", description="x")

    response = agent_client.get(reverse("admin:support_case_changelist"))

    assert mine.reference in response.content.decode()
    assert theirs.reference not in response.content.decode()
    assert agent_client.get(change_url(theirs)).status_code == 302


def test_the_queue_filters_by_state_priority_and_assignee(agent_client, agent, make_case):
    from support.services import case_update

    waiting = make_case(S.WAITING_CUSTOMER, subject="Esperando")
    urgent = make_case(S.OPEN, subject="Urgente")
    case_update(case=urgent, priority="urgent", assignee=agent, internal_notes="")
    url = reverse("admin:support_case_changelist")

    def shown(query: str) -> set[str]:
        response = agent_client.get(f"{url}?{query}")
        return {case.reference for case in response.context["cl"].result_list}

    assert shown("state__exact=waiting_customer") == {waiting.reference}
    assert shown("priority__exact=urgent") == {urgent.reference}
    assert shown("assignee=me") == {urgent.reference}
    assert shown("assignee=none") == {waiting.reference}


def test_the_change_page_offers_only_the_transitions_allowed_now(agent_client, make_case):
    case = make_case(S.IN_PROGRESS)

    response = agent_client.get(change_url(case))

    assert transition_buttons(response) == {"wait_for_customer", "resolve"}


def test_a_transition_button_goes_through_the_service_and_records_who(
    agent_client, agent, make_case
):
    case = make_case(S.OPEN)

    response = agent_client.post(
        change_url(case), change_form_data(agent_client, case, _fsm_transition_to="start")
    )

    assert response.status_code == 302
    case.refresh_from_db()
    assert case.state == S.IN_PROGRESS
    assert StateLog.objects.for_(case).get().by == agent


def test_a_forbidden_transition_posted_anyway_changes_nothing(agent_client, make_case):
    case = make_case(S.OPEN)

    response = agent_client.post(
        change_url(case),
        change_form_data(agent_client, case, _fsm_transition_to="close"),
        follow=True,
    )

    case.refresh_from_db()
    assert case.state == S.OPEN
    # Closing asks for a confirmation first: the button leads to its page, which refuses.
    assert [str(m) for m in response.context["messages"]] == [
        f"{case} está Abierto: ahora no se le puede aplicar «Cerrar»."
    ]


def test_staff_add_internal_and_public_comments_from_the_case_page(agent_client, agent, make_case):
    case = make_case(S.IN_PROGRESS)

    for body, public in [("Revisar garantía", False), ("Le llamamos mañana", True)]:
        data = with_new_comment(change_form_data(agent_client, case), body, public=public)
        assert agent_client.post(change_url(case), data).status_code == 302

    comments = list(CaseComment.objects.filter(case=case).values_list("body", "public"))
    assert comments == [("Revisar garantía", False), ("Le llamamos mañana", True)]
    assert CaseComment.objects.filter(author_user=agent).count() == 2


def test_a_closed_case_page_takes_no_new_comments(agent_client, make_case):
    case = make_case(S.CLOSED)

    response = agent_client.get(change_url(case))

    comments_inline = next(
        i for i in response.context["inline_admin_formsets"] if i.formset.model is CaseComment
    )
    assert comments_inline.formset.extra_forms == []
    assert transition_buttons(response) == set()


def test_triage_edits_go_through_the_service(agent_client, agent, make_case):
    case = make_case(S.OPEN)

    agent_client.post(
        change_url(case),
        change_form_data(
            agent_client, case, priority="high", assignee=agent.pk, internal_notes="VIP"
        ),
    )

    case.refresh_from_db()
    assert (case.priority, case.assignee, case.internal_notes) == ("high", agent, "VIP")


def test_an_assignee_from_another_company_is_a_form_error(
    agent_client, make_case, make_staff, other_company
):
    case = make_case(S.OPEN)
    outsider = make_staff("pedro", other_company)

    response = agent_client.post(
        change_url(case), change_form_data(agent_client, case, assignee=outsider.pk)
    )

    assert response.status_code == 200
    case.refresh_from_db()
    assert case.assignee is None


def test_staff_open_a_case_from_the_admin_through_the_service(agent_client, company, ana):
    response = agent_client.post(
        reverse("admin:support_case_add"),
        {
            "company": company.pk,
            "contact": ana.pk,
            "subject": "Llamó por teléfono",
            "description": "La factura está duplicada.",
            "channel": "phone",
            "priority": "normal",
            "internal_notes": "",
        },
    )

    assert response.status_code == 302
    case = Case.objects.get()
    assert case.reference.startswith("CS-")
    assert (case.channel, case.state) == ("phone", S.OPEN)


def messages_of(response) -> list[tuple[str, str]]:
    return [(m.level_tag, str(m)) for m in response.context["messages"]]


def test_a_new_comment_is_an_internal_note_unless_staff_choose_a_public_reply(
    agent_client, make_case
):
    case = make_case(S.IN_PROGRESS)

    response = agent_client.get(change_url(case))

    comments = next(
        i for i in response.context["inline_admin_formsets"] if i.formset.model is CaseComment
    )
    (new,) = comments.formset.extra_forms
    assert new["public"].value() is False
    page = response.content.decode()
    assert 'type="radio"' in page
    assert "Nota interna (solo el personal)" in page
    assert "Respuesta pública (se envía al cliente por correo o SMS)" in page


def test_a_public_reply_from_the_case_page_is_emailed_and_logged(
    agent_client, make_case, django_capture_on_commit_callbacks, sms_outbox
):
    from django.core import mail

    from support.models import CaseMessage

    case = make_case(S.IN_PROGRESS)
    data = with_new_comment(change_form_data(agent_client, case), "Ya está pedido.", public=True)

    with django_capture_on_commit_callbacks(execute=True):
        response = agent_client.post(change_url(case), data, follow=True)

    assert ("info", "La respuesta se está enviando a Ana por correo electrónico.") in messages_of(
        response
    )
    (email,) = mail.outbox
    assert "Ya está pedido." in email.body and email.to == ["ana@example.com"]
    page = agent_client.get(change_url(case)).content.decode()
    assert "Mensajes al cliente" in page and "Enviado" in page  # the message log
    assert "Pública: la lee el cliente" in page  # the thread says it was public
    assert CaseMessage.objects.get().status == CaseMessage.Status.SENT


def test_a_reply_to_a_contact_without_email_or_phone_is_kept_and_staff_are_warned(
    agent_client, make_case, company, django_capture_on_commit_callbacks
):
    from support.models import CaseMessage
    from tests import factories

    walk_in = factories.contact(company, first_name="Pedro")
    case = make_case(S.IN_PROGRESS, for_contact=walk_in)
    data = with_new_comment(change_form_data(agent_client, case), "Pase por tienda.", public=True)

    with django_capture_on_commit_callbacks(execute=True):
        response = agent_client.post(change_url(case), data, follow=True)

    assert (
        "warning",
        "La respuesta se ha guardado, pero no se ha podido enviar a Pedro: el cliente no "
        "tiene teléfono ni correo.",
    ) in messages_of(response)
    assert CaseComment.objects.filter(case=case, body="Pase por tienda.", public=True).exists()
    message = CaseMessage.objects.get()
    assert message.status == CaseMessage.Status.NOT_SENT
    page = agent_client.get(change_url(case)).content.decode()
    assert "No enviado" in page and "el cliente no tiene teléfono ni correo" in page


def test_a_reply_posted_from_a_page_opened_before_the_case_closed_is_refused_with_the_state(
    agent_client, make_case
):
    from support.models import CaseMessage
    from support.services import case_close

    case = make_case(S.RESOLVED)
    data = with_new_comment(change_form_data(agent_client, case), "¿Algo más?", public=True)
    case_close(case=case)  # a colleague closed it meanwhile

    response = agent_client.post(change_url(case), data, follow=True)

    assert messages_of(response) == [
        ("error", f"{case.reference} · {case.subject} está Cerrado: ya no puede cambiar.")
    ]
    assert not CaseComment.objects.filter(case=case).exists()
    assert not CaseMessage.objects.filter(kind=CaseMessage.Kind.REPLY).exists()


def test_resolving_from_the_case_page_is_confirmed_and_tells_the_customer_the_note(
    agent_client, make_case, django_capture_on_commit_callbacks
):
    from django.core import mail

    case = make_case(S.IN_PROGRESS)

    pressed = agent_client.post(
        change_url(case), change_form_data(agent_client, case, _fsm_transition_to="resolve")
    )
    page = agent_client.get(pressed["Location"])
    case.refresh_from_db()
    assert case.state == S.IN_PROGRESS  # the button alone does nothing
    assert "recibirá un correo" in page.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = agent_client.post(
            pressed["Location"],
            confirmation_data(page, "", "Le hemos abonado la factura"),
            follow=True,
        )

    assert (
        "info",
        "Se está avisando a Ana por correo electrónico de que el caso está resuelto.",
    ) in messages_of(response)
    (email,) = mail.outbox
    assert f"su caso {case.reference} está resuelto" in email.subject
    assert "Resolución: Le hemos abonado la factura." in email.body
