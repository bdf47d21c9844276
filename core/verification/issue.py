"""Issuing a code to a contact's own channel or to a new one, within the send limits; revoking
one.

The challenge is committed first, in a transaction of its own (core.durable), and its delivery
task published right after that commit, so a broker that cannot be reached is known to the
caller.
"""

import logging
import secrets
from datetime import datetime, timedelta

import kombu.exceptions
import redis.exceptions
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.durable import decided_once, durably
from core.errors import PermissionRefused, SystemUnavailable, ValidationFailed
from core.jobs import task_named
from core.metrics import CODES_ISSUED
from core.models import Contact, Conversation, VerificationChallenge
from core.normalize import mask_email, mask_phone
from core.verification.budget import wrong_codes_retry_after
from core.verification.check import verification_locked
from core.verification.codes import CODE_DIGITS, MODULUS, code_hmac, seal_code

logger = logging.getLogger("garante.verification")

Channel = VerificationChallenge.Channel
Purpose = VerificationChallenge.Purpose
Status = VerificationChallenge.Status
Delivery = VerificationChallenge.Delivery

# Errors of the broker connection when publishing: the code cannot be on its way.
BROKER_ERRORS = (kombu.exceptions.OperationalError, redis.exceptions.ConnectionError)


class _BrokerUnreachable(Exception):
    pass


def _destination(contact: Contact, channel: str) -> str:
    return contact.phone if channel == Channel.SMS else contact.email


def _mask(channel: str, destination: str, language: str) -> str:
    if channel == Channel.SMS:
        return mask_phone(destination, language)
    return mask_email(destination)


def _send_limit_retry_after(queryset, limit: int, period: timedelta, now: datetime) -> int | None:
    # A code revoked before it left (the broker unreachable, staff) does not count; one
    # superseded before its worker sent it does: requests sent at once each supersede the
    # last, and would otherwise each make room for another past the limit.
    recent = list(
        queryset.filter(created_at__gt=now - period)
        .exclude(status=Status.REVOKED, delivery_status=Delivery.NOT_SENT)
        .order_by("-created_at")
        .values_list("created_at", flat=True)[:limit]
    )
    if len(recent) < limit:
        return None
    return max(1, int((recent[-1] + period - now).total_seconds()) + 1)


def _check_send_limits(
    conversation: Conversation | None, contact: Contact, now: datetime, *, by_staff: bool
) -> None:
    challenges = VerificationChallenge.objects.all()
    if not by_staff:
        limit, period = settings.GARANTE_VERIFICATION_LOCKS_PER_CONTACT
        locked = challenges.filter(contact=contact, status=Status.LOCKED)
        retry_after = _send_limit_retry_after(locked, limit, period, now)
        if retry_after is None:
            retry_after = wrong_codes_retry_after(contact.pk, now)
        if retry_after is not None:
            raise verification_locked(retry_after_seconds=retry_after)
    checks = [(challenges.filter(contact=contact), settings.GARANTE_VERIFICATION_SENDS_PER_CONTACT)]
    if conversation is not None:
        checks.append(
            (
                challenges.filter(conversation=conversation),
                settings.GARANTE_VERIFICATION_SENDS_PER_CONVERSATION,
            )
        )
    for queryset, (limit, period) in checks:
        retry_after = _send_limit_retry_after(queryset, limit, period, now)
        if retry_after is not None:
            raise PermissionRefused(
                _(
                    "Ya le enviamos varios códigos hace poco. Por seguridad, espere unos "
                    "minutos antes de pedir otro."
                ),
                code="too_many_codes",
                retry_after_seconds=retry_after,
            )


def _committed(conversation: Conversation | None) -> Conversation | None:
    """The conversation as a committed row. A challenge is written first, apart from the call
    that asks for it (core.durable), and that call may be the one inserting its conversation:
    its rolled-back insert is made here for good (a conversation row records only that the
    conversation was seen)."""
    if conversation is None:
        return None
    committed, _ = Conversation.objects.get_or_create(
        company_id=conversation.company_id, external_id=conversation.external_id
    )
    return committed


def _publish(challenge_id: int, sealed: str) -> None:
    try:
        task_named("core.challenge_deliver").apply_async(
            args=[challenge_id, sealed], queue=settings.GARANTE_VERIFICATION_QUEUE
        )
    except BROKER_ERRORS as exc:
        raise _BrokerUnreachable(type(exc).__name__) from None


def challenge_issue(
    *,
    contact: Contact,
    channel: str,
    conversation: Conversation | None = None,
    issued_by=None,
) -> VerificationChallenge:
    """Create a code for `contact` and hand it to the delivery task, on the contact's own
    registered phone or email (never a channel given in the conversation).

    The challenge is committed first, in a transaction of its own, and published right after
    that commit, inside this call, so a broker that cannot be reached is known here: the
    challenge is then marked not sent (a late worker will not deliver it) and SystemUnavailable
    is raised.
    Earlier active codes of the same conversation stop working.
    """
    if channel not in Channel.values:
        raise ValidationFailed(_("Puedo enviar el código por SMS o por correo."), code="channel")
    destination = _destination(contact, channel)
    if not destination:
        raise ValidationFailed(
            _("No tenemos ese canal registrado para usted. Probemos con el otro."),
            code="channel_unavailable",
        )
    return _issue(
        contact=contact,
        channel=channel,
        destination=destination,
        purpose=Purpose.STEP_UP,
        conversation=conversation,
        issued_by=issued_by,
    )


def contact_change_challenge_issue(
    *,
    contact: Contact,
    channel: str,
    destination: str,
    conversation: Conversation | None,
    issued_by=None,
) -> VerificationChallenge:
    """Create a code confirming that `contact` receives at `destination`, the NEW phone (sms)
    or email they asked to change to, and hand it to the delivery task.

    `destination` is typed by whoever talks to us, so it must come validated from
    core.services.contact_change_destination. The code counts towards the same send limits
    as a step-up code (per contact, per conversation): every code is a message we pay for and
    somebody receives. It supersedes the conversation's earlier change codes, not its step-up
    code. Broker failures as challenge_issue.
    """
    return _issue(
        contact=contact,
        channel=channel,
        destination=destination,
        purpose=Purpose.CONTACT_CHANGE,
        conversation=conversation,
        issued_by=issued_by,
    )


def _issue(
    *,
    contact: Contact,
    channel: str,
    destination: str,
    purpose: str,
    conversation: Conversation | None,
    issued_by,
) -> VerificationChallenge:
    now = timezone.now()
    # Drawn once per call: the call runs again once the challenge is committed (core.durable),
    # and what it does then (revoking the challenge the broker never got) needs the same ones.
    code, nonce = decided_once(
        lambda: (f"{secrets.randbelow(MODULUS):0{CODE_DIGITS}d}", secrets.token_hex(16))
    )

    def create() -> VerificationChallenge:
        # One contact's codes are issued one at a time, each counting those before it: checked
        # apart, twelve requests at once all passed a limit of five (twelve texts to the
        # customer, and twelve codes to guess at).
        list(Contact.objects.select_for_update(no_key=True).filter(pk=contact.pk).values("pk"))
        _check_send_limits(conversation, contact, now, by_staff=issued_by is not None)
        earlier = VerificationChallenge.objects.filter(
            contact=contact, status=Status.ACTIVE, purpose=purpose
        )
        if conversation is not None:
            earlier = earlier.filter(conversation=conversation)
        earlier.update(status=Status.SUPERSEDED)
        challenge = VerificationChallenge.objects.create(
            company_id=contact.company_id,
            contact=contact,
            conversation=_committed(conversation),
            purpose=purpose,
            channel=channel,
            destination=destination,
            masked_destination=_mask(channel, destination, contact.company.language),
            nonce=nonce,
            code_hmac=code_hmac(nonce=nonce, contact_id=contact.pk, code=code),
            expires_at=now + settings.GARANTE_VERIFICATION_CODE_TTL,
            issued_by=issued_by,
            created_at=now,
        )
        # Runs once the challenge is committed; a failure surfaces from durably() below.
        transaction.on_commit(lambda: _publish(challenge.pk, seal_code(code, nonce)))
        return challenge

    try:
        challenge = durably(create)
    except _BrokerUnreachable as exc:
        reason = str(exc)
        logger.error("verification code not queued: broker unreachable (%s)", reason)
        durably(
            lambda: VerificationChallenge.objects.filter(nonce=nonce).update(
                status=Status.REVOKED,
                delivery_status=Delivery.NOT_SENT,
                delivery_error=f"broker unreachable: {reason}",
            )
        )
        raise SystemUnavailable(
            _(
                "Ahora mismo no puedo enviarle el código. Por favor, inténtelo de nuevo en "
                "unos minutos."
            ),
            code="delivery_unavailable",
        ) from None
    CODES_ISSUED.inc()
    return challenge


def challenge_revoke(*, challenge: VerificationChallenge) -> bool:
    """Make a code unusable (and unsendable, if it has not left yet). True if it changed."""
    changed = VerificationChallenge.objects.filter(pk=challenge.pk, status=Status.ACTIVE).update(
        status=Status.REVOKED
    )
    VerificationChallenge.objects.filter(
        pk=challenge.pk, delivery_status__in=[Delivery.QUEUED, Delivery.RETRYING]
    ).update(delivery_status=Delivery.NOT_SENT, delivery_error="revoked before delivery")
    return bool(changed)


def challenge_resend(*, challenge: VerificationChallenge, issued_by=None) -> VerificationChallenge:
    """A fresh code to the same contact and channel (the old one cannot be read, and stops
    working); a change's code to the same new phone or email."""
    challenge_revoke(challenge=challenge)
    if challenge.purpose == Purpose.CONTACT_CHANGE:
        return contact_change_challenge_issue(
            contact=challenge.contact,
            channel=challenge.channel,
            destination=challenge.destination,
            conversation=challenge.conversation,
            issued_by=issued_by,
        )
    return challenge_issue(
        contact=challenge.contact,
        channel=challenge.channel,
        conversation=challenge.conversation,
        issued_by=issued_by,
    )
