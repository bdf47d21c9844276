"""Step-up: whether a conversation's verification holds, and which actions need one.

A verification is voided by the security events of an identity alarm; which tools need one
is the company's StepUpPolicy (core.step_up_choices lists the tools that can ask for a code).
"""

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.durable import durably
from core.errors import PermissionRefused
from core.identity.limits import TooManyAttempts
from core.models import Contact, Conversation, SecurityEvent, StepUpPolicy, VerificationChallenge
from core.process_cache import ProcessCache
from core.verification.check import step_up_pending


def security_event_record(
    *,
    conversation: Conversation,
    kind: str,
    contact: Contact | None = None,
    claimed_contact: Contact | None = None,
    detail: dict[str, Any] | None = None,
) -> SecurityEvent:
    """Record a security event durably: it survives the rollback of the failing call."""
    return durably(
        lambda: SecurityEvent.objects.create(
            company_id=conversation.company_id,
            conversation_key=conversation.external_id,
            kind=kind,
            contact=contact,
            claimed_contact=claimed_contact,
            detail=detail or {},
        )
    )


def verification_drop(conversation: Conversation) -> None:
    """Void the conversation's verification, after an identity alarm.

    The alarm's durable event is what voids it, and the codes sent to the conversation before
    it (conversation_is_verified; core.verification.check refuses such a code, `code_revoked`):
    the refusal that follows the alarm rolls the call's own writes back."""
    Conversation.objects.filter(pk=conversation.pk).update(verified_until=None)
    conversation.verified_until = None


@contextmanager
def verification_voided_when_limited(conversation: Conversation) -> Iterator[None]:
    """Around a conversation naming an identifier that is not its customer's: should a limit
    on failed identifications refuse it, void the conversation's verification, and the code
    it is waiting for, durably.

    Under the limits the failure's own event (an identity switch or a mismatch) voids it. At a
    limit the refusal answers before the identifier is looked up, so that it tells nothing,
    and records no failure; without this event the alarm would keep the verification. The
    event counts towards no limit: the limit refused the guess, it made none.
    """
    try:
        yield
    except TooManyAttempts:
        identified = conversation.contact_id is not None
        if identified and (conversation_is_verified(conversation) or _code_pending(conversation)):
            security_event_record(
                conversation=conversation,
                kind=SecurityEvent.Kind.VERIFICATION_VOIDED,
                contact=conversation.contact,
                detail={"refused": "too_many_attempts"},
            )
            verification_drop(conversation)
        raise


def _code_pending(conversation: Conversation) -> bool:
    """Whether a code sent to the conversation may still be typed."""
    return VerificationChallenge.objects.filter(
        conversation_id=conversation.pk,
        status=VerificationChallenge.Status.ACTIVE,
        expires_at__gt=timezone.now(),
    ).exists()


def conversation_is_verified(conversation: Conversation, *, now: datetime | None = None) -> bool:
    """Whether a step-up verification of this conversation holds right now."""
    now = now or timezone.now()
    if conversation.contact_id is None or conversation.verified_until is None:
        return False
    if conversation.verified_until <= now:
        return False
    return not SecurityEvent.objects.filter(
        company_id=conversation.company_id,
        conversation_key=conversation.external_id,
        kind__in=SecurityEvent.VERIFICATION_DROPPING,
        created_at__gte=conversation.verified_at
        or conversation.verified_until - settings.GARANTE_VERIFICATION_VALID_FOR,
    ).exists()


@dataclass(frozen=True)
class VerificationStatus:
    verified: bool
    valid_for_minutes: int | None  # while verified, rounded up
    awaiting: str | None  # what the pending challenge was sent as (code, link, both), if any


def conversation_verification_status(
    *, conversation: Conversation, contact: Contact
) -> VerificationStatus:
    """Whether the conversation is verified now, and what the customer still may answer:
    what the agent reads after asking the customer to tap a link, with no secret in it."""
    now = timezone.now()
    conversation.refresh_from_db(fields=["verified_at", "verified_until"])
    verified = conversation_is_verified(conversation, now=now)
    minutes = None
    if verified:
        minutes = max(1, math.ceil((conversation.verified_until - now).total_seconds() / 60))
    pending = step_up_pending(conversation, contact)
    return VerificationStatus(verified, minutes, pending.sent_as if pending else None)


# company id -> its StepUpPolicy row's (step-up actions, confirmed actions), or None when it
# has none (then the settings' defaults apply, read at each call). Tagged with the company id:
# core.signals forgets a company's entry whenever its policy is saved or deleted.
step_up_policies = ProcessCache("step-up policies")

_Policy = tuple[tuple[str, ...], tuple[str, ...]]


def _policy(company_id: int) -> _Policy | None:
    """Read by every sensitive write and changed rarely, by staff, so kept in the process
    cache (core.process_cache) like the company of a gateway token: a change takes effect at
    once in the process that makes it, and in the others within GARANTE_PROCESS_CACHE_SECONDS.
    One read gives both lists, so a call asking both costs one query at most."""
    return step_up_policies.get(company_id, lambda: _step_up_policy_read(company_id))


def step_up_actions(*, company_id: int) -> list[str]:
    """The tools this company protects with a verified conversation."""
    policy = _policy(company_id)
    if policy is None:
        return list(settings.GARANTE_STEP_UP_DEFAULT_ACTIONS)
    return list(policy[0])


def confirm_actions(*, company_id: int) -> list[str]:
    """The tools whose every effect this company has its customer confirm with a code of
    their own, bound to that very action (core.verification.confirmation)."""
    policy = _policy(company_id)
    if policy is None:
        return list(settings.GARANTE_CONFIRM_DEFAULT_ACTIONS)
    return list(policy[1])


def _step_up_policy_read(company_id: int) -> tuple[int, _Policy | None]:
    policy = StepUpPolicy.objects.filter(company_id=company_id).first()
    if policy is None:
        return company_id, None
    return company_id, (tuple(policy.actions or []), tuple(policy.confirm_actions or []))


def require_step_up(*, conversation: Conversation, action: str) -> None:
    """PermissionRefused("verification_required") when the company's policy lists `action`
    (a tool name) and the conversation is not verified right now."""
    if action not in step_up_actions(company_id=conversation.company_id):
        return
    if conversation_is_verified(conversation):
        return
    raise PermissionRefused(
        _(
            "Para esta operación necesito confirmar su identidad con un código que le "
            "enviaré a su teléfono o correo registrados."
        ),
        code="verification_required",
        action=action,
    )
