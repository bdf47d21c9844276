"""Step-up verification codes: sent to a contact's own channel, checked once, never readable.

Codes are six digits from `secrets`, valid for ten minutes, single use, at most five tries.
Only an HMAC of the code (keyed from SECRET_KEY, bound to the challenge's nonce and the
contact) is stored, and compared in constant time. The code travels to the Celery worker
sealed with a one-time pad derived the same way, so neither the broker nor a log line ever
holds it in clear; only the message to the customer does.

Every write that must survive the failing call that caused it (an attempt counted, a lock, a
challenge marked not sent) goes through core.durable.
"""

import hmac
import logging
import secrets
from datetime import datetime, timedelta
from email.utils import make_msgid
from enum import StrEnum

import kombu.exceptions
import redis.exceptions
from django.conf import settings
from django.core.mail import EmailMessage
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone, translation
from django.utils.crypto import salted_hmac
from django.utils.translation import gettext as _g
from django.utils.translation import gettext_lazy as _

from core.durable import durably
from core.errors import PermissionRefused, SystemUnavailable, ValidationFailed
from core.jobs import task_named
from core.mail import smtp_error_is_transient, smtp_error_summary
from core.models import Contact, Conversation, SecurityEvent, VerificationChallenge
from core.normalize import mask_email, mask_phone
from core.sms import SmsPermanentError, SmsTransientError, sms_send

logger = logging.getLogger("garante.verification")

CODE_DIGITS = 6
_MODULUS = 10**CODE_DIGITS
Channel = VerificationChallenge.Channel
Status = VerificationChallenge.Status
Delivery = VerificationChallenge.Delivery

# Errors of the broker connection when publishing: the code cannot be on its way.
BROKER_ERRORS = (kombu.exceptions.OperationalError, redis.exceptions.ConnectionError)


class _BrokerUnreachable(Exception):
    pass


def code_hmac(*, nonce: str, contact_id: int, code: str) -> str:
    """The stored form of a code: an HMAC bound to its challenge and its contact."""
    return salted_hmac(
        "garante.verification.code", f"{nonce}:{contact_id}:{code}", algorithm="sha256"
    ).hexdigest()


def _pad(nonce: str) -> int:
    digest = salted_hmac("garante.verification.seal", nonce, algorithm="sha256").hexdigest()
    return int(digest, 16) % _MODULUS


def seal_code(code: str, nonce: str) -> str:
    """The code under a one-time pad of its challenge: what the task message carries."""
    return f"{(int(code) + _pad(nonce)) % _MODULUS:0{CODE_DIGITS}d}"


def unseal_code(sealed: str, nonce: str) -> str:
    return f"{(int(sealed) - _pad(nonce)) % _MODULUS:0{CODE_DIGITS}d}"


def _destination(contact: Contact, channel: str) -> str:
    return contact.phone if channel == Channel.SMS else contact.email


def _mask(channel: str, destination: str) -> str:
    return mask_phone(destination) if channel == Channel.SMS else mask_email(destination)


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
        if retry_after is not None:
            raise _locked(retry_after_seconds=retry_after)
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

    The challenge is committed on its own connection and published right after that commit,
    inside this call, so a broker that cannot be reached is known here: the challenge is then
    marked not sent (a late worker will not deliver it) and SystemUnavailable is raised.
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
    now = timezone.now()
    code = f"{secrets.randbelow(_MODULUS):0{CODE_DIGITS}d}"
    nonce = secrets.token_hex(16)

    def create() -> VerificationChallenge:
        # One contact's codes are issued one at a time, each counting those before it: checked
        # apart, twelve requests at once all passed a limit of five (twelve texts to the
        # customer, and twelve codes to guess at).
        list(Contact.objects.select_for_update(no_key=True).filter(pk=contact.pk).values("pk"))
        _check_send_limits(conversation, contact, now, by_staff=issued_by is not None)
        earlier = VerificationChallenge.objects.filter(contact=contact, status=Status.ACTIVE)
        if conversation is not None:
            earlier = earlier.filter(conversation=conversation)
        earlier.update(status=Status.SUPERSEDED)
        challenge = VerificationChallenge.objects.create(
            company_id=contact.company_id,
            contact=contact,
            conversation=conversation,
            channel=channel,
            destination=destination,
            masked_destination=_mask(channel, destination),
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
        return durably(create)
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


def _latest_challenge(conversation: Conversation, contact: Contact) -> VerificationChallenge:
    challenge = (
        VerificationChallenge.objects.filter(conversation=conversation, contact=contact)
        .exclude(Q(status=Status.SUPERSEDED) | Q(delivery_status=Delivery.NOT_SENT))
        .order_by("-created_at", "-pk")
        .first()
    )
    if challenge is None:
        raise ValidationFailed(
            _("No hay ningún código pendiente. Primero tengo que enviarle uno."),
            code="no_code_pending",
        )
    return challenge


def _locked(**extras: object) -> PermissionRefused:
    return PermissionRefused(
        _(
            "Se superó el número de intentos con ese código y quedó bloqueado. Por seguridad, "
            "le paso con una persona del equipo."
        ),
        code="verification_locked",
        **extras,
    )


def _take_attempt(challenge: VerificationChallenge, now: datetime) -> tuple[int | None, str]:
    """Take one of the challenge's attempts, durably, before its code is compared: the
    attempts taken so far (this one included) and the challenge's status, or None when it
    takes no more guesses (not active, expired, or out of attempts). Guesses sent in parallel
    wait for each other on the challenge's row here, so however many arrive at once, no more
    codes are compared than the maximum (counting them after the comparison let a burst of
    thirty compare thirty). The call's rollback does not give an attempt back."""
    maximum = settings.GARANTE_VERIFICATION_MAX_ATTEMPTS

    def take() -> tuple[int | None, str]:
        row = (
            VerificationChallenge.objects.select_for_update()
            .only("status", "attempts", "expires_at")
            .get(pk=challenge.pk)
        )
        if row.status != Status.ACTIVE or row.expires_at <= now or row.attempts >= maximum:
            return None, row.status
        VerificationChallenge.objects.filter(pk=row.pk).update(attempts=F("attempts") + 1)
        return row.attempts + 1, row.status

    return durably(take)


def _lock_challenge(challenge: VerificationChallenge, conversation: Conversation) -> bool:
    """Lock the challenge, durably, and record it (its last attempt was wrong); False if it
    was no longer active (a right guess in parallel used it)."""

    def lock() -> bool:
        locked = VerificationChallenge.objects.filter(pk=challenge.pk, status=Status.ACTIVE).update(
            status=Status.LOCKED
        )
        if locked:
            SecurityEvent.objects.create(
                company_id=challenge.company_id,
                conversation_key=conversation.external_id,
                kind=SecurityEvent.Kind.VERIFICATION_LOCKED,
                contact_id=challenge.contact_id,
                detail={
                    "channel": challenge.channel,
                    "attempts": settings.GARANTE_VERIFICATION_MAX_ATTEMPTS,
                },
            )
        return bool(locked)

    return durably(lock)


def _refused(status: str, *, expired: bool) -> Exception:
    """Why a challenge in this state takes no code."""
    if status == Status.LOCKED:
        return _locked()
    if status == Status.VERIFIED:
        return ValidationFailed(
            _("Ese código ya se usó. Si lo necesita, le envío otro."), code="code_used"
        )
    if status == Status.REVOKED:
        return ValidationFailed(
            _("Ese código se anuló. Si lo necesita, le envío otro."), code="code_revoked"
        )
    if expired:
        return ValidationFailed(
            _("Ese código caducó. Si lo necesita, le envío otro."), code="code_expired"
        )
    return _locked()  # active, but out of attempts


@transaction.atomic
def challenge_verify(
    *, conversation: Conversation, contact: Contact, code: str
) -> VerificationChallenge:
    """Check a code against the latest challenge of this conversation for this contact; on
    success mark the conversation verified for settings.GARANTE_VERIFICATION_VALID_FOR.

    Each code compared uses up one of the challenge's attempts first (`_take_attempt`); the
    last one wrong locks the challenge."""
    code = "".join((code or "").split())
    if len(code) != CODE_DIGITS or not code.isdigit():
        raise ValidationFailed(
            _("El código tiene seis cifras. ¿Puede repetirlo?"), code="invalid_code_format"
        )
    challenge = _latest_challenge(conversation, contact)
    now = timezone.now()
    if challenge.status != Status.ACTIVE or challenge.expires_at <= now:
        raise _refused(challenge.status, expired=challenge.expires_at <= now)
    attempts, status = _take_attempt(challenge, now)
    if attempts is None:
        raise _refused(status, expired=challenge.expires_at <= now)
    maximum = settings.GARANTE_VERIFICATION_MAX_ATTEMPTS
    expected = code_hmac(nonce=challenge.nonce, contact_id=contact.pk, code=code)
    if not hmac.compare_digest(expected, challenge.code_hmac):
        if attempts >= maximum and _lock_challenge(challenge, conversation):
            raise _locked()
        raise ValidationFailed(
            _("El código no es correcto."), code="wrong_code", attempts_left=maximum - attempts
        )
    # Conditional: a concurrent last wrong guess may have locked it, or a twin call used it.
    used = VerificationChallenge.objects.filter(
        pk=challenge.pk, status=Status.ACTIVE, expires_at__gt=now
    ).update(status=Status.VERIFIED, verified_at=now)
    if not used:
        raise (
            _locked()
            if VerificationChallenge.objects.filter(pk=challenge.pk, status=Status.LOCKED).exists()
            else ValidationFailed(
                _("Ese código ya no es válido. Si lo necesita, le envío otro."), code="code_used"
            )
        )
    conversation.verified_at = now
    conversation.verified_until = now + settings.GARANTE_VERIFICATION_VALID_FOR
    conversation.save(update_fields=["verified_at", "verified_until"])
    challenge.status, challenge.verified_at = Status.VERIFIED, now
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
    working)."""
    challenge_revoke(challenge=challenge)
    return challenge_issue(
        contact=challenge.contact,
        channel=challenge.channel,
        conversation=challenge.conversation,
        issued_by=issued_by,
    )


# Delivery (run by the Celery task) ------------------------------------------------------


class DeliveryOutcome(StrEnum):
    SENT = "sent"
    RETRY = "retry"
    FAILED = "failed"
    SKIPPED = "skipped"


class _Transient(Exception):
    pass


class _Permanent(Exception):
    pass


def _message_text(challenge: VerificationChallenge, code: str) -> tuple[str, str]:
    minutes = int(settings.GARANTE_VERIFICATION_CODE_TTL.total_seconds() // 60)
    company = challenge.company
    with translation.override(company.language):
        subject = _g("Su código de verificación de %(company)s") % {"company": company.name}
        body = _g(
            "%(company)s: su código de verificación es %(code)s. Caduca en %(minutes)d "
            "minutos. Si no lo ha pedido usted, ignore este mensaje."
        ) % {"company": company.name, "code": code, "minutes": minutes}
    return subject, body


def _send_email(challenge: VerificationChallenge, subject: str, body: str) -> tuple[str, str]:
    message_id = make_msgid(domain="garante.local")
    message = EmailMessage(
        subject=subject,
        body=body,
        to=[challenge.destination],
        headers={"Message-ID": message_id},
    )
    try:
        message.send(fail_silently=False)
    except OSError as exc:  # SMTPException is one
        error = smtp_error_summary(exc)
        raise (_Transient(error) if smtp_error_is_transient(exc) else _Permanent(error)) from None
    return message_id, "accepted"


def _send_sms(challenge: VerificationChallenge, body: str) -> tuple[str, str]:
    try:
        result = sms_send(to=challenge.destination, body=body)
    except SmsTransientError as exc:
        raise _Transient(exc.detail) from None
    except SmsPermanentError as exc:
        raise _Permanent(exc.detail) from None
    return result.message_id, result.status


def challenge_deliver_once(*, challenge_id: int, sealed_code: str, last_try: bool) -> str:
    """Claim the challenge's delivery and hand the message to its channel, once.

    The claim is a conditional UPDATE (queued or retrying -> sending), so a duplicated task
    message or a second worker finds nothing to do. A code that expired, was revoked or was
    superseded before it could leave is not sent.
    """
    now = timezone.now()
    claimable = VerificationChallenge.objects.filter(
        pk=challenge_id, delivery_status__in=[Delivery.QUEUED, Delivery.RETRYING]
    )
    claimed = claimable.filter(status=Status.ACTIVE, expires_at__gt=now).update(
        delivery_status=Delivery.SENDING, delivery_attempts=F("delivery_attempts") + 1
    )
    if not claimed:
        claimable.update(delivery_status=Delivery.NOT_SENT, delivery_error="no longer valid")
        return DeliveryOutcome.SKIPPED
    challenge = VerificationChallenge.objects.select_related("company").get(pk=challenge_id)
    subject, body = _message_text(challenge, unseal_code(sealed_code, challenge.nonce))
    try:
        if challenge.channel == Channel.EMAIL:
            message_id, provider_status = _send_email(challenge, subject, body)
        else:
            message_id, provider_status = _send_sms(challenge, body)
    except _Transient as exc:
        status = Delivery.FAILED if last_try else Delivery.RETRYING
        VerificationChallenge.objects.filter(pk=challenge_id).update(
            delivery_status=status, delivery_error=str(exc)[:300]
        )
        logger.warning("verification code %s: transient delivery error %s", challenge_id, exc)
        return DeliveryOutcome.FAILED if last_try else DeliveryOutcome.RETRY
    except _Permanent as exc:
        VerificationChallenge.objects.filter(pk=challenge_id).update(
            delivery_status=Delivery.FAILED, delivery_error=str(exc)[:300]
        )
        logger.warning("verification code %s: delivery refused %s", challenge_id, exc)
        return DeliveryOutcome.FAILED
    VerificationChallenge.objects.filter(pk=challenge_id).update(
        delivery_status=Delivery.SENT,
        delivery_error="",
        provider_message_id=message_id[:100],
        provider_status=provider_status[:40],
        sent_at=timezone.now(),
    )
    logger.info("verification code %s delivered by %s", challenge_id, challenge.channel)
    return DeliveryOutcome.SENT


# How long after a code expired its delivery is settled: past any retry of its task (a retry
# of an expired code settles it itself) and any send under way at the expiry.
DELIVERY_SETTLE_GRACE = timedelta(minutes=5)


def challenge_deliveries_settle(*, now: datetime | None = None) -> int:
    """Settle the deliveries no worker will finish, once their code expired; how many.

    A task lost on its way (a broker that dropped it, a worker killed before its claim) leaves
    the delivery queued or retrying: nothing was sent, so it is marked not sent. A worker that
    stopped between its claim and its result leaves it sending: the message may or may not
    have left, so it is marked unknown rather than either. Staff reading a customer's codes
    then see what is known, not a delivery that looks under way for ever. A worker finishing
    after all still records its outcome (its last update is unconditional).
    """
    due = VerificationChallenge.objects.filter(
        expires_at__lt=(now or timezone.now()) - DELIVERY_SETTLE_GRACE
    )
    unsent = due.filter(delivery_status__in=[Delivery.QUEUED, Delivery.RETRYING]).update(
        delivery_status=Delivery.NOT_SENT, delivery_error="expired before delivery"
    )
    unknown = due.filter(delivery_status=Delivery.SENDING).update(
        delivery_status=Delivery.UNKNOWN,
        delivery_error="the worker stopped while sending; it may have left",
    )
    if unsent or unknown:
        logger.warning(
            "verification codes settled: %d never sent, %d stopped while sending",
            unsent,
            unknown,
        )
    return unsent + unknown
