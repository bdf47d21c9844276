"""What every quote transition checks first: its row lock, its state and validity."""

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django_fsm import can_proceed

from core.errors import ValidationFailed
from core.states import state_shown
from sales.models import QUOTE_STATE_LABELS, Quote

QUOTE_STATE_MESSAGES: dict[str, Promise] = {
    Quote.State.DRAFT: _("Esa cotización todavía no se ha enviado."),
    Quote.State.SENT: _("Esa cotización ya se envió y está pendiente de respuesta."),
    Quote.State.ACCEPTED: _("Esa cotización ya fue aceptada."),
    Quote.State.REJECTED: _("Esa cotización ya fue rechazada."),
    Quote.State.EXPIRED: _("Esa cotización está vencida. Puedo prepararle una nueva."),
}


def quote_lock(quote: Quote) -> Quote:
    """The quote's row, read again under lock (with the company the caller had in memory)."""
    locked = Quote.objects.select_for_update().get(pk=quote.pk)
    if Quote.company.is_cached(quote):
        locked.company = quote.company
    return locked


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
