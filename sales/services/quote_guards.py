"""What every quote transition checks first: its row lock, its state and validity.

Lock order, everywhere a quote and its opportunity are both locked: the opportunity first,
then its quotes by ascending primary key, then their products by ascending primary key.
Nobody waits for an opportunity while holding one of its quotes (a transition that reads
the opportunity locks it first; one that does not, never waits for it), so the transaction
that wins an opportunity can lock and settle every other open quote of it without a deadlock.
"""

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django_fsm import can_proceed

from core.errors import ValidationFailed
from core.states import state_shown
from sales.models import QUOTE_STATE_LABELS, Opportunity, Quote

QUOTE_STATE_MESSAGES: dict[str, Promise] = {
    Quote.State.DRAFT: _("Esa cotización todavía no se ha enviado."),
    Quote.State.SENT: _("Esa cotización ya se envió y está pendiente de respuesta."),
    Quote.State.ACCEPTED: _("Esa cotización ya fue aceptada."),
    Quote.State.REJECTED: _("Esa cotización ya fue rechazada."),
    Quote.State.EXPIRED: _("Esa cotización está vencida. Puedo prepararle una nueva."),
    Quote.State.SUPERSEDED: _(
        "Esa cotización quedó sin efecto porque se aceptó otra de la misma solicitud."
    ),
    Quote.State.DELIVERED: _("Ese pedido ya se entregó."),
    Quote.State.CANCELLED: _("Ese pedido fue cancelado."),
}


def quote_lock(quote: Quote, *, with_opportunity: bool = False) -> Quote:
    """The quote's row, read again under lock (with the company the caller had in memory).

    `with_opportunity`: its opportunity is locked first (the lock order) and cached on it, for
    a transition that reads or changes the opportunity (sending, accepting). The others
    (rejecting, expiring, delivering, cancelling) never wait for the opportunity while holding
    the quote, so they need not lock it."""
    opportunity = None
    if with_opportunity and quote.opportunity_id is not None:
        opportunity = (
            Opportunity.objects.select_for_update().filter(pk=quote.opportunity_id).first()
        )
    locked = Quote.objects.select_for_update().get(pk=quote.pk)
    if Quote.company.is_cached(quote):
        locked.company = quote.company
    opportunity_known(locked, opportunity)
    return locked


def opportunity_known(quote: Quote, opportunity: Opportunity | None) -> None:
    """Cache on `quote` the opportunity row locked before it, if it is still the quote's."""
    if opportunity is not None and quote.opportunity_id == opportunity.pk:
        quote.opportunity = opportunity


def quote_opportunity_locked(quote: Quote) -> Opportunity | None:
    """The quote's opportunity under its row lock: the one locked before the quote (quote_lock,
    quote_get(for_update=True)), else locked now (a caller that locked the quote alone)."""
    if quote.opportunity_id is None:
        return None
    if Quote.opportunity.is_cached(quote):
        return quote.opportunity
    return Opportunity.objects.select_for_update().get(pk=quote.opportunity_id)


def quote_guard(quote: Quote, transition: Callable[..., Any], now: datetime) -> None:
    """Refuse a transition the quote's state does not allow, or a sent quote past its validity.

    Call while holding the quote's row lock.
    """
    if not can_proceed(transition):
        raise quote_state_error(quote.state)
    if quote.is_lapsed(now):
        # Past validity it is expired at this instant, whether or not the beat task ran yet.
        raise quote_state_error(Quote.State.EXPIRED)


def quote_state_error(state: str) -> ValidationFailed:
    """VALIDATION naming the quote's state, with its value and the customer's label."""
    return ValidationFailed(
        QUOTE_STATE_MESSAGES[state],
        code="invalid_state",
        **state_shown(state, QUOTE_STATE_LABELS),
    )
