"""What every opportunity transition checks first: its row lock and its stage.

A closed opportunity (won or lost) says so in its own words; an open one names its stage. The
refusal carries the stage (the machine value and the customer's label). Neither check writes:
the transitions (sales.services.opportunities) and the quotes that read their opportunity
(sales.services.quote_lifecycle) call them before they change anything.
"""

from collections.abc import Callable
from typing import Any

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django_fsm import can_proceed

from core.errors import ValidationFailed
from core.states import state_shown
from sales.models import OPPORTUNITY_STATE_LABELS, Opportunity

OPPORTUNITY_STATE_MESSAGES: dict[str, Promise] = {
    Opportunity.State.WON: _("Esa oportunidad ya está cerrada como ganada."),
    Opportunity.State.LOST: _("Esa oportunidad ya está cerrada como perdida."),
}


def opportunity_lock(opportunity: Opportunity) -> Opportunity:
    """The opportunity's row, read again under lock."""
    return Opportunity.objects.select_for_update().get(pk=opportunity.pk)


def opportunity_guard(opportunity: Opportunity, transition: Callable[..., Any]) -> None:
    """Refuse a transition the opportunity's stage does not allow.

    Call while holding the opportunity's row lock, with the locked opportunity's bound
    transition.
    """
    if not can_proceed(transition):
        raise opportunity_state_error(opportunity)


def opportunity_state_error(opportunity: Opportunity) -> ValidationFailed:
    """VALIDATION naming the opportunity's stage, with its value and the customer's label."""
    shown = state_shown(opportunity.state, OPPORTUNITY_STATE_LABELS)
    message = OPPORTUNITY_STATE_MESSAGES.get(opportunity.state) or _(
        "Esa oportunidad está %(state)s y no admite ese cambio."
    ) % {"state": shown["state_label"]}
    return ValidationFailed(message, code="invalid_state", **shown)
