"""Every allowed and every forbidden transition of a case, from every state."""

import pytest
from django.utils import timezone, translation
from django_fsm_log.models import StateLog

from core.errors import ValidationFailed
from support import services
from support.models import Case

S = Case.State
TRANSITIONS = ["start", "wait_for_customer", "resume", "resolve", "reopen", "close"]
ALLOWED = {
    (S.OPEN, "start"): S.IN_PROGRESS,
    (S.IN_PROGRESS, "wait_for_customer"): S.WAITING_CUSTOMER,
    (S.IN_PROGRESS, "resolve"): S.RESOLVED,
    (S.WAITING_CUSTOMER, "resume"): S.IN_PROGRESS,
    (S.WAITING_CUSTOMER, "resolve"): S.RESOLVED,
    (S.RESOLVED, "reopen"): S.IN_PROGRESS,
    (S.RESOLVED, "close"): S.CLOSED,
}
TABLE = [(source, name, ALLOWED.get((source, name))) for source in S for name in TRANSITIONS]
# What the customer is told each state is called.
LABELS = {
    S.OPEN: "abierto",
    S.IN_PROGRESS: "en curso",
    S.WAITING_CUSTOMER: "pendiente de su respuesta",
    S.RESOLVED: "resuelto",
    S.CLOSED: "cerrado",
}


@pytest.mark.django_db
@pytest.mark.parametrize(("source", "name", "target"), TABLE)
def test_each_transition_is_allowed_only_from_its_source_states(make_case, source, name, target):
    case = make_case(source)
    service = getattr(services, f"case_{name}")

    if target is None:
        with pytest.raises(ValidationFailed) as failure:
            service(case=case)
        assert failure.value.extras == {"state": source, "state_label": LABELS[source]}
        assert LABELS[source] in str(failure.value.user_message)
        assert failure.value.code == ("case_closed" if source == S.CLOSED else "invalid_transition")
        case.refresh_from_db()
        assert case.state == source
    else:
        assert service(case=case).state == target
        case.refresh_from_db()
        assert case.state == target


def test_the_table_covers_every_state_and_transition():
    assert len(TABLE) == len(S.values) * len(TRANSITIONS)
    assert {source for source, _name in ALLOWED} == set(S) - {S.CLOSED}


@pytest.mark.django_db
def test_a_closed_case_refuses_every_transition_with_a_message_offering_a_new_case(make_case):
    case = make_case(S.CLOSED)

    for name in TRANSITIONS:
        with pytest.raises(ValidationFailed) as failure:
            getattr(services, f"case_{name}")(case=case)
        assert failure.value.extras["state"] == "closed"
        assert "caso nuevo" in str(failure.value.user_message)


@pytest.mark.django_db
def test_the_state_cannot_be_assigned_directly(make_case):
    case = make_case(S.OPEN)

    with pytest.raises(AttributeError):
        case.state = S.CLOSED


@pytest.mark.django_db
def test_each_transition_is_recorded_in_the_history_with_who_did_it(make_case, make_staff):
    agent = make_staff("marta")
    case = make_case(S.OPEN)

    services.case_start(case=case, by=agent)
    services.case_resolve(case=case, by=agent)

    log = StateLog.objects.for_(case).order_by("timestamp")
    assert [(e.source_state, e.state, e.by) for e in log] == [
        ("open", "in_progress", agent),
        ("in_progress", "resolved", agent),
    ]


@pytest.mark.django_db
def test_resolving_stamps_the_time_and_reopening_clears_it(make_case):
    case = make_case(S.IN_PROGRESS)

    before = timezone.now()
    case = services.case_resolve(case=case)
    assert before <= case.resolved_at <= timezone.now()
    case = services.case_reopen(case=case)
    assert case.resolved_at is None
    before = timezone.now()
    case = services.case_close(case=services.case_resolve(case=case))
    assert before <= case.closed_at <= timezone.now()


def refusal_sentence(case: Case, name: str) -> str:
    """The refusal's message with the case's reference and state label taken out (both must
    be in it): the sentence around them."""
    with pytest.raises(ValidationFailed) as failure:
        getattr(services, f"case_{name}")(case=case)
    message = str(failure.value.user_message)
    label = failure.value.extras["state_label"]
    assert case.reference in message and label in message
    return message.replace(case.reference, "{reference}").replace(label, "{state}")


@pytest.mark.django_db
@pytest.mark.parametrize(("source", "name"), [(S.OPEN, "resolve"), (S.CLOSED, "reopen")])
def test_a_refusal_names_the_case_and_its_state_in_the_language_in_use(make_case, source, name):
    """A refused transition (and a closed case's refusal) is a sentence of the catalogue,
    translated: its English and Spanish answers differ beyond the reference and label."""
    case = make_case(source)

    sentences = {}
    for language in ("es", "en"):
        with translation.override(language):
            sentences[language] = refusal_sentence(case, name)

    assert sentences["es"] != sentences["en"]
    case.refresh_from_db()
    assert case.state == source
