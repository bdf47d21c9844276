"""Issuing a code to a contact's own channel or to a new one, within the send limits; revoking
one.

The challenge is committed first, in a transaction of its own (core.durable), and its delivery
task published right after that commit, so a broker that cannot be reached is known to the
caller. A code of
an identification in verified mode is written in the call's own transaction, the same for
a customer's identifier and for nobody's, and admitted to a channel (or withheld) by its
delivery task, where the send limits and budgets are checked.
"""

import logging
import secrets
import zlib
from datetime import datetime, timedelta

import kombu.exceptions
import redis.exceptions
from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, QuerySet
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.customer_links import LINK_CONVERSATION_VIA
from core.durable import decided_once, durably
from core.errors import PermissionRefused, SystemUnavailable, ValidationFailed
from core.jobs import task_named
from core.metrics import CODES_ISSUED
from core.models import Company, Contact, Conversation, VerificationChallenge
from core.normalize import mask_email, mask_phone
from core.transactions import int32
from core.verification.budget import wrong_codes_retry_after
from core.verification.check import verification_locked
from core.verification.codes import CODE_DIGITS, MODULUS, code_hmac, seal_code
from core.verification.links import verification_link_digest, verification_link_key

logger = logging.getLogger("garante.verification")

Channel = VerificationChallenge.Channel
Purpose = VerificationChallenge.Purpose
Status = VerificationChallenge.Status
Delivery = VerificationChallenge.Delivery
Form = Company.VerificationForm

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


def _sends(queryset: QuerySet) -> QuerySet:
    """The codes that count towards a send limit.

    A step-up code revoked before it left (the broker unreachable, staff) does not count; one
    superseded before its worker sent it does: requests sent at once each supersede the last,
    and would otherwise each make room for another past the limit. A code of an
    identification in verified mode counts once its delivery task admitted it to a channel
    (`identification_code_admit`, one at a time per contact), never while queued or when
    withheld: it is written for every identifier alike, nobody's included."""
    return queryset.exclude(status=Status.REVOKED, delivery_status=Delivery.NOT_SENT).exclude(
        purpose=Purpose.IDENTIFICATION, delivery_status__in=[Delivery.QUEUED, Delivery.NOT_SENT]
    )


def _send_limit_retry_after(queryset, limit: int, period: timedelta, now: datetime) -> int | None:
    recent = list(
        _sends(queryset.filter(created_at__gt=now - period))
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
    per_contact = (contact.company.verification_codes_per_contact_per_hour, timedelta(hours=1))
    checks = [(challenges.filter(contact=contact), per_contact)]
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


def _link_digest(nonce: str) -> str:
    return verification_link_digest(verification_link_key(nonce))


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
    Earlier active codes of the same conversation stop working. The message carries the code,
    a one-tap link or both, as the company chose for the channel (`_sent_as`,
    core.verification.links); the challenge says which (`sent_as`).
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
        sent_as=_sent_as(contact.company, channel, conversation),
    )


def _sent_as(company: Company, channel: str, conversation: Conversation | None) -> str:
    """What a step-up's or a confirmation's message carries: the company's choice for the
    channel, or the code where a link cannot work: without the site's public address (no URL
    to send), without a conversation to answer in (staff's resend of a code of none), or for a
    customer page's own conversation (core.customer_links.link_conversation), whose page asks
    for the code in its own form."""
    form = company.verification_form(channel)
    if form == Form.CODE:
        return form
    if conversation is None or conversation.identified_via == LINK_CONVERSATION_VIA:
        return Form.CODE
    if not settings.GARANTE_PUBLIC_URL:
        logger.warning(
            "verification by link is on for %s but GARANTE_PUBLIC_URL is not set: code sent",
            channel,
        )
        return Form.CODE
    return form


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


def confirmation_challenge_issue(
    *,
    contact: Contact,
    conversation: Conversation,
    action: str,
    action_digest: str,
    action_summary: str,
) -> VerificationChallenge:
    """Create a code with which `contact` confirms one action (a tool name) on one exact
    target (`action_digest`, core.verification.confirmation), told to them as
    `action_summary`, and hand it to the delivery task; to their registered phone, else their
    registered email (ValidationFailed `confirmation_unavailable` with neither). The message
    carries the code, a one-tap link or both, as the company chose for that channel, the same
    setting as a step-up's (`_sent_as`): tapping the link answers the confirmation.

    The same send limits as every code apply (per contact, per conversation, the wrong-code
    budget). It supersedes the conversation's earlier code for that same action and target
    only: a code for another of the customer's requests keeps working. Broker failures as
    challenge_issue."""
    channel = Channel.SMS if contact.phone else Channel.EMAIL
    destination = _destination(contact, channel)
    if not destination:
        raise ValidationFailed(
            _(
                "No tenemos un teléfono ni un correo suyos registrados para que confirme esta "
                "operación. Una persona del equipo puede hacerla por usted."
            ),
            code="confirmation_unavailable",
        )
    return _issue(
        contact=contact,
        channel=channel,
        destination=destination,
        purpose=Purpose.CONFIRMATION,
        conversation=conversation,
        issued_by=None,
        sent_as=_sent_as(contact.company, channel, conversation),
        binding={
            "action": action,
            "action_digest": action_digest,
            "action_summary": action_summary,
        },
    )


def _issue(
    *,
    contact: Contact,
    channel: str,
    destination: str,
    purpose: str,
    conversation: Conversation | None,
    issued_by,
    binding: dict[str, str] | None = None,
    sent_as: str = Company.VerificationForm.CODE,
) -> VerificationChallenge:
    binding = binding or {}
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
        if purpose == Purpose.CONFIRMATION:
            earlier = earlier.filter(action_digest=binding["action_digest"])
        earlier.update(status=Status.SUPERSEDED)
        challenge = VerificationChallenge.objects.create(
            company_id=contact.company_id,
            contact=contact,
            conversation=conversation,
            purpose=purpose,
            channel=channel,
            destination=destination,
            masked_destination=_mask(channel, destination, contact.company.language),
            nonce=nonce,
            code_hmac=code_hmac(nonce=nonce, contact_id=contact.pk, code=code),
            sent_as=sent_as,
            link_digest="" if sent_as == Form.CODE else _link_digest(nonce),
            expires_at=now + settings.GARANTE_VERIFICATION_CODE_TTL,
            issued_by=issued_by,
            created_at=now,
            **binding,
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
    working); a change's code to the same new phone or email. Not for an identification in
    verified mode: its conversation is bound by its own code only, which the customer gets
    again by identifying again; nor for a confirmation, which the customer's own request in
    the conversation asks for again."""
    if challenge.purpose == Purpose.IDENTIFICATION:
        raise ValidationFailed(
            _(
                "Ese código era de una identificación: para recibir otro, el cliente vuelve a "
                "identificarse en la conversación."
            ),
            code="not_resendable",
        )
    if challenge.purpose == Purpose.CONFIRMATION:
        # Bound to one request of one conversation: the customer asks for it again there.
        raise ValidationFailed(
            _(
                "Ese código confirmaba una operación del cliente: para recibir otro, el cliente "
                "vuelve a pedirla en la conversación."
            ),
            code="not_resendable",
        )
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


def _identification_channel(contact: Contact | None, kind: str) -> tuple[str, str]:
    """Where an identification's code goes: the email on record when the customer typed
    their email, else the phone on record, else the email on record; never a value typed
    that is not on the record. ("", nobody's, or no channel on record: nothing is sent.)"""
    if contact is None:
        return (Channel.EMAIL if kind == "email" else Channel.SMS), ""
    if kind == "email" and contact.email:
        return Channel.EMAIL, contact.email
    if contact.phone:
        return Channel.SMS, contact.phone
    if contact.email:
        return Channel.EMAIL, contact.email
    return Channel.SMS, ""


def identification_challenge_issue(
    *,
    conversation: Conversation,
    contact: Contact | None,
    identifier_kind: str,
    identifier_digest: str,
    credential_id: int | None,
    now: datetime,
) -> VerificationChallenge:
    """The code of an identification in verified mode, in the caller's transaction: for the
    contact whose identifier the conversation typed, to their own registered channel, or,
    for nobody's identifier (`contact` None), a code that goes nowhere and that no guess
    matches. Both are written by the same statements and published to the delivery task
    alike once the call commits, so that neither the answer, its statements nor its time
    tell them apart; the task sends a customer's code within the send limits and budgets
    (`identification_code_admit`) and withholds it past them, silently.

    The conversation is not bound: verify_code binds it with the right code. Earlier codes of
    the conversation stop working."""
    channel, destination = _identification_channel(contact, identifier_kind)
    # Settled at once when there is nowhere to send it (the same INSERT, other values): its
    # delivery task then finds nothing to do, and writes nothing, under an enumeration.
    unsendable = _unsendable(contact.pk if contact else None, destination)
    code = f"{secrets.randbelow(MODULUS):0{CODE_DIGITS}d}"
    nonce = secrets.token_hex(16)
    VerificationChallenge.objects.filter(conversation=conversation, status=Status.ACTIVE).update(
        status=Status.SUPERSEDED
    )
    challenge = VerificationChallenge.objects.create(
        company_id=conversation.company_id,
        contact=contact,
        conversation=conversation,
        purpose=Purpose.IDENTIFICATION,
        credential_id=credential_id,
        identifier_kind=identifier_kind,
        identifier_digest=identifier_digest,
        channel=channel,
        destination=destination,
        masked_destination=_mask(channel, destination, conversation.company.language),
        nonce=nonce,
        code_hmac=code_hmac(nonce=nonce, contact_id=contact.pk if contact else 0, code=code),
        expires_at=now + settings.GARANTE_VERIFICATION_CODE_TTL,
        created_at=now,
        delivery_status=Delivery.NOT_SENT if unsendable else Delivery.QUEUED,
        delivery_error=unsendable,
    )
    sealed = seal_code(code, nonce)

    def publish() -> None:
        try:
            _publish(challenge.pk, sealed)
        except _BrokerUnreachable as exc:
            # The answer is given (the same for everyone); the code never leaves, and the
            # settling sweep marks it not sent once it expired.
            logger.error(
                "identification code %s not queued: broker unreachable (%s)", challenge.pk, exc
            )

    # robust: whatever befalls the publication (an eager task's error in the demo), the
    # answer stays the one every identifier gets; it is logged.
    transaction.on_commit(publish, robust=True)
    return challenge


# The first key of a credential's advisory lock on its verified-mode budget.
_BUDGET_LOCK_SPACE = int32(zlib.crc32(b"garante.verification.credential-budget"))


def _unsendable(contact_id: int | None, destination: str) -> str:
    """Why an identification's code can go nowhere ("" if it can)."""
    if contact_id is None:
        return "nobody has that identifier"
    if not destination:
        return "no phone or email on record"
    return ""


def _withheld_because(challenge: VerificationChallenge, now: datetime) -> str:
    """Why an identification's code may not go now ("" if it may): called holding the
    credential's budget lock and the contact's row."""
    unsendable = _unsendable(challenge.contact_id, challenge.destination)
    if unsendable:
        return unsendable
    company = challenge.company
    challenges = VerificationChallenge.objects.exclude(pk=challenge.pk)
    limit, period = settings.GARANTE_VERIFICATION_LOCKS_PER_CONTACT
    locked = challenges.filter(contact_id=challenge.contact_id, status=Status.LOCKED)
    if _send_limit_retry_after(locked, limit, period, now) is not None:
        return "the customer's codes are locked"
    hour = timedelta(hours=1)
    checks = [
        (
            challenges.filter(contact_id=challenge.contact_id),
            (company.verification_codes_per_contact_per_hour, hour),
            "over the customer's hourly limit",
        ),
        (
            challenges.filter(conversation_id=challenge.conversation_id),
            settings.GARANTE_VERIFICATION_SENDS_PER_CONVERSATION,
            "over the conversation's limit",
        ),
    ]
    if challenge.credential_id is not None:
        checks.append(
            (
                challenges.filter(
                    credential_id=challenge.credential_id, purpose=Purpose.IDENTIFICATION
                ),
                (company.verified_mode_codes_per_credential_per_hour, hour),
                "over the credential's hourly budget",
            )
        )
    for queryset, (limit, period), reason in checks:
        if limit == 0 or _send_limit_retry_after(queryset, limit, period, now) is not None:
            return reason
    return ""


def identification_code_admit(*, challenge_id: int) -> bool:
    """Admit a verified-mode identification's queued code to its channel (its delivery
    claimed) if the send limits and budgets allow it, or withhold it for good (not sent,
    the reason kept for staff). True when admitted: the caller sends it.

    One at a time per credential and per contact (PostgreSQL's advisory lock and the
    contact's row; SQLite has one writer), so codes admitted at once cannot pass a budget.
    A withheld code stays active: the conversation's guesses at it are answered as at any
    code, so that nothing tells a withheld one from a sent one."""
    now = timezone.now()
    with transaction.atomic():
        challenge = (
            VerificationChallenge.objects.select_related("company").filter(pk=challenge_id).first()
        )
        if challenge is None:
            return False
        if challenge.credential_id is not None and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_advisory_xact_lock(%s, %s)",
                    [_BUDGET_LOCK_SPACE, int32(challenge.credential_id)],
                )
        if challenge.contact_id is not None:
            list(
                Contact.objects.select_for_update(no_key=True)
                .filter(pk=challenge.contact_id)
                .values("pk")
            )
        queued = VerificationChallenge.objects.filter(
            pk=challenge_id, delivery_status=Delivery.QUEUED
        )
        reason = _withheld_because(challenge, now)
        if not reason:
            claimed = queued.filter(status=Status.ACTIVE, expires_at__gt=now).update(
                delivery_status=Delivery.SENDING, delivery_attempts=F("delivery_attempts") + 1
            )
            if claimed:
                return True
            reason = "no longer valid"
        queued.update(delivery_status=Delivery.NOT_SENT, delivery_error=reason)
        return False
