"""The sales pipeline: opportunities opened, moved through their stages, won or lost."""

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.errors import NotInCompany, ValidationFailed
from core.idempotency import Done, Intent, intent_since, intent_text, once_per_intent
from core.models import Company, Contact, Conversation
from core.reasons import reason_checked
from core.references import insert_unless_reference_taken, insert_with_fresh_reference
from core.states import state_shown
from sales import money
from sales.models import OPPORTUNITY_STATE_LABELS, Opportunity, Quote
from sales.selectors import opportunity_standing, sales_staff
from sales.services.lead_notice import (
    OWNER_NOTICE_FIELDS,
    opportunity_owner_assigned,
    opportunity_team_notify_on_commit,
)
from sales.services.opportunity_guards import opportunity_guard, opportunity_lock


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
    by: Any = None,
) -> Opportunity:
    """Open an opportunity for the sales team (state new); its sales staff are emailed about
    it once the caller's transaction commits (sales.services.lead_notice). With an `owner`
    (staff, `by`, opening one for a colleague or themselves), it is assigned from the start,
    and a colleague is emailed that it is theirs."""
    NotInCompany.check(
        contact.company_id, company.pk, _("No encontré ese contacto."), code="contact_not_found"
    )
    title = title.strip()
    if not title:  # refused before any transaction: nothing to leave usable
        raise ValidationFailed(_("Indique de qué se trata."), code="title_required")
    if owner is not None:
        _check_salesperson(company.pk, owner)
    currency = (currency or company.currency).upper()
    now = timezone.now()
    opportunity = Opportunity(
        company=company,
        contact=contact,
        title=title[:200],
        notes=notes.strip(),
        amount=money.quantize(Decimal(amount), currency),
        currency=currency,
        owner=owner,
        assigned_at=now if owner is not None else None,
        conversation=conversation,
    )
    took_it = owner is None or (by is not None and owner.pk == by.pk)
    opportunity.owner_notified_at = now if took_it else None
    # No transaction of its own: the one INSERT is atomic by itself, and a reference
    # collision writes nothing and is drawn again, with no savepoint.
    insert_with_fresh_reference(opportunity, prefix="OP", insert=insert_unless_reference_taken)
    opportunity_team_notify_on_commit(opportunity_id=opportunity.pk)
    if not took_it:
        opportunity_owner_assigned(opportunity, by=by, now=now)
    return opportunity


def opportunity_request_once(
    *,
    company: Company,
    contact: Contact,
    topic: str,
    notes: str = "",
    conversation: Conversation | None = None,
    new_request: bool = False,
    now: datetime | None = None,
) -> Done[Opportunity]:
    """A customer's request for the sales team (`opportunity_create`), once per intent: the
    customer and the topic (case, accents and spacing aside), within the company's window.
    An open request of that intent is answered, `already_done`, and the team is not told
    again. `new_request` (the customer asked for a second one on the same topic) or no window
    (0) opens one every time."""
    now = now or timezone.now()
    since = intent_since(company, "request_sales_contact", now)

    def make() -> Opportunity:
        return opportunity_create(
            company=company, contact=contact, title=topic, notes=notes, conversation=conversation
        )

    if since is None or new_request:
        return Done(make(), already_done=False)
    folded = intent_text(topic)
    return once_per_intent(
        Intent.of("request_sales_contact", company=company, contact=contact, topic=folded),
        find=lambda: opportunity_standing(
            company=company, contact=contact, topic=folded, since=since
        ),
        make=make,
    )


def _check_salesperson(company_id: int, owner: Any) -> None:
    """Refuse an owner who is not one of the company's sales staff (sales.selectors)."""
    if not sales_staff(company_ids=[company_id]).filter(pk=owner.pk).exists():
        raise ValidationFailed(
            _("Choose one of the company's sales staff."), code="owner_not_sales_staff"
        )


@transaction.atomic
def opportunity_assign(
    *, opportunity: Opportunity, owner: Any, by: Any = None, now: datetime | None = None
) -> Opportunity:
    """Give the opportunity to one of its company's sales staff (None: to nobody, a lead
    waiting again), read under its row lock. The time they took it is kept; assigning it
    to its owner again changes nothing. An owner given it by someone else (`by`, the staff
    member assigning) is emailed once, with a link to it (sales.services.lead_notice)."""
    locked = Opportunity.objects.select_for_update().get(pk=opportunity.pk)
    if locked.owner_id == (owner.pk if owner is not None else None):
        return locked
    if owner is not None:
        _check_salesperson(locked.company_id, owner)
    now = now or timezone.now()
    locked.owner = owner
    locked.assigned_at = now if owner is not None else None
    opportunity_owner_assigned(locked, by=by, now=now)
    locked.save(update_fields=["owner", "assigned_at", *OWNER_NOTICE_FIELDS])
    return locked


def _opportunity_move(
    opportunity: Opportunity,
    name: str,
    *,
    by: Any,
    now: datetime | None = None,
    description: str | None = None,
    **changes: Any,
) -> Opportunity:
    opportunity = opportunity_lock(opportunity)
    method = getattr(opportunity, name)
    opportunity_guard(opportunity, method)
    method(by=by, **({"description": description} if description else {}))
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
def opportunity_win(
    *, opportunity: Opportunity, by: Any = None, now: datetime | None = None
) -> Opportunity:
    """Close an open opportunity as won (staff, e.g. agreed by phone); its open quotes are
    settled (superseded) with it, so none is left to accept and reserve more stock. Accepting
    one of its quotes wins it too (quote_accept)."""
    now = now or timezone.now()
    won = _opportunity_move(opportunity, "win", by=by, now=now)
    quotes_supersede(won, by=by, now=now)
    return won


@transaction.atomic
def opportunity_lose(
    *, opportunity: Opportunity, reason: str, by: Any = None, now: datetime | None = None
) -> Opportunity:
    """Close an open opportunity as lost; the reason (plain text, core.reasons) is required so
    the team can learn, and kept on it and in its history and its quotes'.

    Its open quotes (drafts and sent ones) expire with it, so none is left looking acceptable.
    None of them holds stock: only an accepted quote does, and accepting one wins the
    opportunity, which then cannot be lost.
    """
    reason = reason_checked(reason)
    if not reason:
        raise ValidationFailed(_("Indique el motivo de la pérdida."), code="lost_reason_required")
    now = now or timezone.now()
    # Lock order: the opportunity, then its quotes. An acceptance under way finishes first
    # (its opportunity is won then, and refuses to be lost); a quote created or sent while this
    # waited was too, holding the opportunity's lock, and is expired here.
    lost = _opportunity_move(
        opportunity, "lose", by=by, now=now, description=reason, lost_reason=reason
    )
    for quote in _open_quotes_lock(lost):
        quote.expire(by=by, description=reason)
        quote.resolved_at = now
        quote.save(update_fields=["state", "resolved_at"])
    return lost


def quotes_supersede(opportunity: Opportunity, *, by: Any = None, now: datetime) -> list[Quote]:
    """Settle every open quote of a won opportunity (superseded: never acceptable again).
    Call in the transaction that won it, holding its row lock."""
    quotes = _open_quotes_lock(opportunity)
    for quote in quotes:
        quote.supersede(by=by)
        quote.resolved_at = now
        quote.save(update_fields=["state", "resolved_at"])
    return quotes


def _open_quotes_lock(opportunity: Opportunity) -> list[Quote]:
    """The opportunity's open quotes, row-locked in primary-key order. Call holding the
    opportunity's row lock (the lock order: the opportunity, then its quotes)."""
    return list(
        Quote.objects.select_for_update()
        .filter(opportunity_id=opportunity.pk, state__in=Quote.OPEN_STATES)
        .order_by("pk")
    )


# What staff may edit on an opportunity besides its stage; amount and currency only while open.
EDITABLE_FIELDS = ("title", "notes", "amount", "currency", "owner")
CLOSED_READ_ONLY = ("amount", "currency")


@transaction.atomic
def opportunity_details_set(
    *, opportunity: Opportunity, changes: dict[str, Any], by: Any = None
) -> Opportunity:
    """Save staff's edits of an opportunity's details, read under its row lock.

    A won or lost opportunity's amount (and currency) is what it closed at (a won one, its
    accepted quote's total): refused once closed, even when the edit began while it was open.
    """
    unknown = set(changes) - set(EDITABLE_FIELDS)
    if unknown:
        raise ValueError(f"not editable here: {sorted(unknown)}")
    changes = dict(changes)
    if "owner" in changes:  # the owner's own rule, and when they took it
        opportunity_assign(opportunity=opportunity, owner=changes.pop("owner"), by=by)
    locked = Opportunity.objects.select_for_update().get(pk=opportunity.pk)
    if locked.is_closed and any(
        getattr(locked, field) != changes[field] for field in CLOSED_READ_ONLY if field in changes
    ):
        raise ValidationFailed(
            _("El importe de una oportunidad cerrada no se puede cambiar."),
            code="opportunity_closed",
            **state_shown(locked.state, OPPORTUNITY_STATE_LABELS),
        )
    for field, value in changes.items():
        setattr(locked, field, value)
    if changes:
        locked.save(update_fields=list(changes))
    return locked
