"""The admin's transition buttons, wired once (core.admin.ServiceTransitionsAdmin): every
model with transitions uses it, a button is offered only when the state allows it now and a
service applies it, and a posted name that is no such button changes nothing."""

import pytest
from django.contrib import admin
from django.urls import reverse
from django_fsm import FSMFieldMixin
from django_fsm_log.models import StateLog

from core.admin import ServiceTransitionsAdmin
from support import services
from support.models import Case
from tests.admin_pages import change_form_data, change_url, transition_buttons

pytestmark = pytest.mark.django_db


def _models_with_transitions() -> list[type]:
    # A proxy (the team's calendar, agenda.Calendar) is another page of its model, whose
    # transitions it leaves to that model's admin.
    return [
        model
        for model in admin.site._registry
        if any(isinstance(field, FSMFieldMixin) for field in model._meta.fields)
        and not model._meta.proxy
    ]


def test_every_model_with_transitions_wires_each_of_them_to_a_service_through_the_mixin():
    models = _models_with_transitions()
    assert {m._meta.label for m in models} >= {
        "agenda.Appointment",
        "sales.Quote",
        "sales.Opportunity",
        "support.Case",
    }
    for model in models:
        model_admin = admin.site._registry[model]
        assert isinstance(model_admin, ServiceTransitionsAdmin), model._meta.label
        transitions = [
            transition
            for field_name in model_admin.fsm_fields
            for transition in model._meta.get_field(field_name).get_all_transitions(model)
        ]
        # A transition marked system_only is a consequence of another (a quote superseded when
        # its opportunity is won), applied by that one's service: no button of its own.
        names = {t.name for t in transitions if not t.custom.get("system_only")}
        assert set(model_admin.fsm_services) == names, model._meta.label


@pytest.fixture
def case(company, ana) -> Case:
    return services.case_open(company=company, contact=ana, subject="Pedido", description="x")


def test_the_buttons_are_the_transitions_the_state_allows_now(admin_client, case):
    """Open, a case can only be started; in progress, it can wait for the customer or be
    resolved (the state machine's table, support.models.Case)."""
    offered_open = transition_buttons(admin_client.get(change_url(case)))
    services.case_start(case=case)
    offered_in_progress = transition_buttons(admin_client.get(change_url(case)))

    assert offered_open == {"start"}
    assert offered_in_progress == {"wait_for_customer", "resolve"}


def test_a_transition_without_a_service_is_neither_offered_nor_applied(
    admin_client, case, monkeypatch
):
    """Never the bare model method: a transition the state allows but no service applies is
    not a button, and posted anyway it changes nothing."""
    services.case_start(case=case)
    case_admin = admin.site._registry[Case]
    wired = {k: v for k, v in case_admin.fsm_services.items() if k != "resolve"}
    monkeypatch.setattr(case_admin, "fsm_services", wired)

    offered = transition_buttons(admin_client.get(change_url(case)))
    data = change_form_data(admin_client, case, _fsm_transition_to="resolve")
    admin_client.post(change_url(case), data)

    assert offered == {"wait_for_customer"}
    case.refresh_from_db()
    assert case.state == Case.State.IN_PROGRESS


def test_a_button_goes_through_the_service_which_logs_who_pressed_it(
    admin_client, admin_user, case
):
    response = admin_client.post(
        change_url(case), change_form_data(admin_client, case, _fsm_transition_to="start")
    )

    assert response.status_code == 302
    case.refresh_from_db()
    assert case.state == Case.State.IN_PROGRESS
    assert StateLog.objects.for_(case).get().by == admin_user


@pytest.mark.parametrize("name", ["delete", "save", "get_state_display"])
def test_a_posted_name_that_is_no_button_is_refused_and_changes_nothing(admin_client, case, name):
    data = change_form_data(admin_client, case, _fsm_transition_to=name)

    response = admin_client.post(change_url(case), data, follow=True)

    assert response.status_code == 200
    assert "Transición desconocida." in [str(m) for m in response.context["messages"]]
    case.refresh_from_db()
    assert case.state == Case.State.OPEN
    assert not StateLog.objects.for_(case).exists()


@pytest.mark.parametrize("method", ["get", "post"])
def test_a_transition_without_a_form_typed_as_a_url_leads_to_its_record_and_changes_nothing(
    admin_client, case, method
):
    url = reverse("admin:support_case_transition", args=[case.pk, "start"])

    response = getattr(admin_client, method)(url, follow=True)

    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == change_url(case)
    assert "Esta acción se realiza con su botón en la ficha del registro." in [
        str(m) for m in response.context["messages"]
    ]
    case.refresh_from_db()
    assert case.state == Case.State.OPEN
