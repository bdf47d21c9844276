"""The sales pipeline: opportunities opened, moved through their stages, won or lost."""

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django_fsm import can_proceed

from core.errors import NotInCompany, ValidationFailed
from core.models import Company, Contact, Conversation
from core.references import insert_with_fresh_reference
from core.states import state_shown
from sales import money
from sales.models import OPPORTUNITY_STATE_LABELS, Opportunity, Quote

OPPORTUNITY_STATE_MESSAGES: dict[str, Promise] = {
    Opportunity.State.WON: _("Esa oportunidad ya está cerrada como ganada."),
    Opportunity.State.LOST: _("Esa oportunidad ya está cerrada como perdida."),
}


def opportunity_state_error(opportunity: Opportunity) -> ValidationFailed:
    """VALIDATION naming the opportunity's stage, with its value and the customer's label."""
    shown = state_shown(opportunity.state, OPPORTUNITY_STATE_LABELS)
    message = OPPORTUNITY_STATE_MESSAGES.get(opportunity.state) or _(
        "Esa oportunidad está %(state)s y no admite ese cambio."
    ) % {"state": shown["state_label"]}
    return ValidationFailed(message, code="invalid_state", **shown)


def opportunity_create(
    *,
    company: Company,
    contact: Contact,
    title: str,
    notes: str = "",
    amount: Decimal = Decimal(0),
    currency: str | None = None,
    owner: Any = None,
    conversation: Conversation | None = None,
) -> Opportunity:
    """Open an opportunity for the sales team (state new)."""
    NotInCompany.check(
        contact.company_id, company.pk, _("No encontré ese contacto."), code="contact_not_found"
    )
    title = title.strip()
    if not title:  # refused before any transaction: nothing to leave usable
        raise ValidationFailed(_("Indique de qué se trata."), code="title_required")
    currency = (currency or company.currency).upper()
    opportunity = Opportunity(
        company=company,
        contact=contact,
        title=title[:200],
        notes=notes.strip(),
        amount=money.quantize(Decimal(amount), currency),
        currency=currency,
        owner=owner,
        conversation=conversation,
    )
    # No transaction of its own: the one INSERT has its savepoint (a reference collision is
    # drawn again), and it is atomic by itself.
    insert_with_fresh_reference(opportunity, prefix="OP")
    return opportunity


def _opportunity_move(
    opportunity: Opportunity, name: str, *, by: Any, now: datetime | None = None, **changes: Any
) -> Opportunity:
    opportunity = Opportunity.objects.select_for_update().get(pk=opportunity.pk)
    method = getattr(opportunity, name)
    if not can_proceed(method):
        raise opportunity_state_error(opportunity)
    method(by=by)
    fields = ["state", *changes]
    for field, value in changes.items():
        setattr(opportunity, field, value)
    if opportunity.is_closed:
        opportunity.closed_at = now or timezone.now()
        fields.append("closed_at")
    opportunity.save(update_fields=fields)
    return opportunity


@transaction.atomic
def opportunity_qualify(*, opportunity: Opportunity, by: Any = None) -> Opportunity:
    return _opportunity_move(opportunity, "qualify", by=by)


@transaction.atomic
def opportunity_propose(*, opportunity: Opportunity, by: Any = None) -> Opportunity:
    return _opportunity_move(opportunity, "propose", by=by)


@transaction.atomic
def opportunity_negotiate(*, opportunity: Opportunity, by: Any = None) -> Opportunity:
    return _opportunity_move(opportunity, "negotiate", by=by)


@transaction.atomic
def opportunity_win(*, opportunity: Opportunity, by: Any = None) -> Opportunity:
    return _opportunity_move(opportunity, "win", by=by)


@transaction.atomic
def opportunity_lose(
    *, opportunity: Opportunity, reason: str, by: Any = None, now: datetime | None = None
) -> Opportunity:
    """Close an open opportunity as lost; the reason is required so the team can learn.

    Its open quotes (drafts and sent ones) expire with it, so none is left looking acceptable.
    """
    reason = reason.strip()
    if not reason:
        raise ValidationFailed(_("Indique el motivo de la pérdida."), code="lost_reason_required")
    now = now or timezone.now()
    # Lock order: the quotes, then the opportunity. An acceptance or a send under way finishes
    # first (a won opportunity then refuses to be lost; a quote it sent is expired here).
    quotes = _open_quotes_lock(opportunity)
    lost = _opportunity_move(opportunity, "lose", by=by, now=now, lost_reason=reason[:300])
    # A quote created while this waited for the opportunity's lock (quote_create holds it).
    # Skipping a locked one keeps off a deadlock: whoever holds it finds the opportunity lost.
    quotes += _open_quotes_lock(opportunity, skip_locked=True, exclude=[q.pk for q in quotes])
    for quote in quotes:
        quote.expire(by=by)
        quote.resolved_at = now
        quote.save(update_fields=["state", "resolved_at"])
    return lost


def _open_quotes_lock(
    opportunity: Opportunity, *, skip_locked: bool = False, exclude: Iterable[int] = ()
) -> list[Quote]:
    """The opportunity's open quotes, row-locked in primary-key order."""
    return list(
        Quote.objects.select_for_update(skip_locked=skip_locked)
        .filter(opportunity_id=opportunity.pk, state__in=Quote.OPEN_STATES)
        .exclude(pk__in=list(exclude))
        .order_by("pk")
    )
