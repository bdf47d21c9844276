"""Every transition of both state machines, allowed and forbidden, through the services."""

from collections.abc import Callable

import pytest
from django.utils import translation

from core.errors import ValidationFailed
from sales.models import Opportunity, Quote
from sales.services.opportunities import (
    opportunity_create,
    opportunity_lose,
    opportunity_negotiate,
    opportunity_propose,
    opportunity_qualify,
    opportunity_win,
)
from sales.services.quote_lifecycle import (
    quote_accept,
    quote_cancel,
    quote_deliver,
    quote_expire,
    quote_reject,
    quote_send,
)
from tests.factories import quote_in

pytestmark = pytest.mark.django_db

QUOTE_ACTIONS: dict[str, Callable[[Quote], Quote]] = {
    "send": lambda q: quote_send(quote=q),
    "accept": lambda q: quote_accept(quote=q),
    "reject": lambda q: quote_reject(quote=q, reason="No lo necesito"),
    "expire": lambda q: quote_expire(quote=q),
    "deliver": lambda q: quote_deliver(quote=q),
    "cancel": lambda q: quote_cancel(quote=q),
}

# (state, action) -> resulting state, or None when the action must be refused.
QUOTE_TABLE = {
    ("draft", "send"): "sent",
    ("draft", "accept"): None,
    ("draft", "reject"): None,
    ("draft", "expire"): "expired",
    ("sent", "send"): None,  # no resending
    ("sent", "accept"): "accepted",
    ("sent", "reject"): "rejected",
    ("sent", "expire"): "expired",
    ("draft", "deliver"): None,
    ("draft", "cancel"): None,
    ("sent", "deliver"): None,
    ("sent", "cancel"): None,
    # An accepted quote is an order: only delivered or cancelled from there.
    **{("accepted", action): None for action in ("send", "accept", "reject", "expire")},
    ("accepted", "deliver"): "delivered",
    ("accepted", "cancel"): "cancelled",
    **{
        (terminal, action): None
        for terminal in ("rejected", "expired", "superseded", "delivered", "cancelled")
        for action in QUOTE_ACTIONS
    },
    # Repeating the order's last step changes nothing and answers the same.
    ("delivered", "deliver"): "delivered",
    ("cancelled", "cancel"): "cancelled",
}


# What the customer is told each state is called.
QUOTE_LABELS = {
    "draft": "borrador",
    "sent": "enviada",
    "accepted": "aceptada",
    "rejected": "rechazada",
    "expired": "vencida",
    "superseded": "sin efecto",
    "delivered": "entregada",
    "cancelled": "cancelada",
}
OPPORTUNITY_LABELS = {
    "new": "nueva",
    "qualified": "calificada",
    "proposal": "en propuesta",
    "negotiation": "en negociación",
    "won": "ganada",
    "lost": "perdida",
}


@pytest.mark.parametrize(("state", "action"), list(QUOTE_TABLE))
def test_quote_transition_table(company, ana, catalog, state, action):
    quote = quote_in(state, company, ana)
    target = QUOTE_TABLE[(state, action)]

    if target is None:
        with pytest.raises(ValidationFailed) as caught:
            QUOTE_ACTIONS[action](quote)
        assert caught.value.error_type == "VALIDATION"
        assert caught.value.extras == {"state": state, "state_label": QUOTE_LABELS[state]}
        quote.refresh_from_db()
        assert quote.state == state
    else:
        assert QUOTE_ACTIONS[action](quote).state == target
        quote.refresh_from_db()
        assert quote.state == target


def test_the_quote_table_covers_every_state_and_action():
    assert {s for s, _ in QUOTE_TABLE} == set(Quote.State.values)
    assert len(QUOTE_TABLE) == len(Quote.State.values) * len(QUOTE_ACTIONS)


OPPORTUNITY_ACTIONS: dict[str, Callable[[Opportunity], Opportunity]] = {
    "qualify": lambda o: opportunity_qualify(opportunity=o),
    "propose": lambda o: opportunity_propose(opportunity=o),
    "negotiate": lambda o: opportunity_negotiate(opportunity=o),
    "win": lambda o: opportunity_win(opportunity=o),
    "lose": lambda o: opportunity_lose(opportunity=o, reason="Sin presupuesto"),
}

OPPORTUNITY_TABLE = {
    ("new", "qualify"): "qualified",
    ("new", "propose"): None,
    ("new", "negotiate"): None,
    ("new", "win"): "won",
    ("new", "lose"): "lost",
    ("qualified", "qualify"): None,
    ("qualified", "propose"): "proposal",
    ("qualified", "negotiate"): None,
    ("qualified", "win"): "won",
    ("qualified", "lose"): "lost",
    ("proposal", "qualify"): None,
    ("proposal", "propose"): None,
    ("proposal", "negotiate"): "negotiation",
    ("proposal", "win"): "won",
    ("proposal", "lose"): "lost",
    ("negotiation", "qualify"): None,
    ("negotiation", "propose"): None,
    ("negotiation", "negotiate"): None,
    ("negotiation", "win"): "won",
    ("negotiation", "lose"): "lost",
    # Closed opportunities neither move stage nor reopen.
    **{(closed, action): None for closed in ("won", "lost") for action in OPPORTUNITY_ACTIONS},
}

OPPORTUNITY_PATHS = {
    "new": [],
    "qualified": ["qualify"],
    "proposal": ["qualify", "propose"],
    "negotiation": ["qualify", "propose", "negotiate"],
    "won": ["win"],
    "lost": ["lose"],
}


@pytest.mark.parametrize(("state", "action"), list(OPPORTUNITY_TABLE))
def test_opportunity_transition_table(company, ana, state, action):
    opportunity = opportunity_create(company=company, contact=ana, title="Cafetería")
    for step in OPPORTUNITY_PATHS[state]:
        opportunity = OPPORTUNITY_ACTIONS[step](opportunity)
    assert opportunity.state == state
    target = OPPORTUNITY_TABLE[(state, action)]

    if target is None:
        with pytest.raises(ValidationFailed) as caught:
            OPPORTUNITY_ACTIONS[action](opportunity)
        label = OPPORTUNITY_LABELS[state]
        assert (caught.value.error_type, caught.value.code) == ("VALIDATION", "invalid_state")
        assert caught.value.extras == {"state": state, "state_label": label}
        assert label in str(caught.value.user_message)
        opportunity.refresh_from_db()
        assert opportunity.state == state
    else:
        moved = OPPORTUNITY_ACTIONS[action](opportunity)
        assert moved.state == target
        assert (moved.closed_at is not None) == (target in ("won", "lost"))


def test_the_opportunity_table_covers_every_state_and_action():
    assert {s for s, _ in OPPORTUNITY_TABLE} == set(Opportunity.State.values)
    assert len(OPPORTUNITY_TABLE) == len(Opportunity.State.values) * len(OPPORTUNITY_ACTIONS)


# A move each open stage refuses (the table's None), to hear the refusal in both languages.
OPEN_REFUSALS = {
    "new": "propose",
    "qualified": "qualify",
    "proposal": "propose",
    "negotiation": "negotiate",
}


@pytest.mark.parametrize(("state", "action"), OPEN_REFUSALS.items())
def test_an_open_opportunity_refuses_a_move_naming_its_stage_in_the_language_in_use(
    company, ana, state, action
):
    """The refusal of an open stage is a sentence of the catalogue around the stage's label,
    translated: the English and Spanish answers differ beyond the label itself."""
    opportunity = opportunity_create(company=company, contact=ana, title="Tostadora")
    for step in OPPORTUNITY_PATHS[state]:
        opportunity = OPPORTUNITY_ACTIONS[step](opportunity)

    sentences = {}
    for language in ("es", "en"):
        with translation.override(language), pytest.raises(ValidationFailed) as caught:
            OPPORTUNITY_ACTIONS[action](opportunity)
        assert (caught.value.code, caught.value.extras["state"]) == ("invalid_state", state)
        label = caught.value.extras["state_label"]
        message = str(caught.value.user_message)
        assert label in message
        sentences[language] = message.replace(label, "{}")

    assert sentences["es"] != sentences["en"]
    opportunity.refresh_from_db()
    assert (opportunity.state, opportunity.closed_at) == (state, None)


def refusal_sentence(opportunity: Opportunity, action: str) -> str:
    """The refusal's message with the stage's label taken out: the sentence around it."""
    with pytest.raises(ValidationFailed) as caught:
        OPPORTUNITY_ACTIONS[action](opportunity)
    label = caught.value.extras["state_label"]
    return str(caught.value.user_message).replace(label, "{}")


@pytest.mark.parametrize("state", ["won", "lost"])
def test_a_closed_opportunity_says_it_is_closed_not_just_which_stage_it_is_in(company, ana, state):
    """Won and lost have refusals of their own (it is closed), not the open stages' sentence."""
    still_open = opportunity_create(company=company, contact=ana, title="Tetera")
    closed = opportunity_create(company=company, contact=ana, title="Molinillo")
    for step in OPPORTUNITY_PATHS[state]:
        closed = OPPORTUNITY_ACTIONS[step](closed)

    closed_sentences = {refusal_sentence(closed, action) for action in OPPORTUNITY_ACTIONS}

    assert len(closed_sentences) == 1  # whatever was asked, the same answer: it is closed
    assert closed_sentences != {refusal_sentence(still_open, "propose")}
    closed.refresh_from_db()
    assert closed.state == state
