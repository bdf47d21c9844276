"""Checking a code: one attempt taken per guess, durably, and the challenge locked at the last;
and answering a challenge by its one-tap link, with the same checks and effect as its code."""

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.durable import decided_once, durably, keeps_evidence
from core.errors import PermissionRefused, ValidationFailed
from core.metrics import CODES_LOCKED, CODES_VERIFIED, CODES_WRONG
from core.models import Company, Contact, Conversation, SecurityEvent, VerificationChallenge
from core.verification.budget import wrong_codes_budget_close, wrong_codes_spent
from core.verification.codes import CODE_DIGITS, code_hmac

Purpose = VerificationChallenge.Purpose
Status = VerificationChallenge.Status
Delivery = VerificationChallenge.Delivery
Form = Company.VerificationForm


def _latest_challenge(
    conversation: Conversation, contact: Contact, purpose: str
) -> VerificationChallenge | None:
    return (
        VerificationChallenge.objects.filter(
            conversation=conversation, contact=contact, purpose=purpose
        )
        .exclude(Q(status=Status.SUPERSEDED) | Q(delivery_status=Delivery.NOT_SENT))
        .order_by("-created_at", "-pk")
        .first()
    )


def pending_identification_challenge(conversation: Conversation) -> VerificationChallenge | None:
    """The latest code of an identification in verified mode in this conversation, whether
    it went to a customer, was withheld or belongs to nobody: they answer alike."""
    return (
        VerificationChallenge.objects.filter(
            conversation=conversation, purpose=VerificationChallenge.Purpose.IDENTIFICATION
        )
        .exclude(status=Status.SUPERSEDED)
        .order_by("-created_at", "-pk")
        .first()
    )


def _alarm_since(challenge: VerificationChallenge, conversation: Conversation) -> bool:
    """Whether an identity alarm of the conversation came after the challenge was issued
    (durable events, which the refused call's rollback leaves). Reads only."""
    return SecurityEvent.objects.filter(
        company_id=conversation.company_id,
        conversation_key=conversation.external_id,
        kind__in=SecurityEvent.VERIFICATION_DROPPING,
        created_at__gte=challenge.created_at,
    ).exists()


def _voided_by_an_alarm(challenge: VerificationChallenge, conversation: Conversation) -> bool:
    """Whether an identity alarm of the conversation came after the code was issued (and so,
    as for a verification, the code no longer counts); the code is then marked revoked,
    durably."""
    voided = _alarm_since(challenge, conversation)
    if voided:
        durably(
            lambda: VerificationChallenge.objects.filter(
                pk=challenge.pk, status=Status.ACTIVE
            ).update(status=Status.REVOKED)
        )
    return voided


def verification_locked(**extras: object) -> PermissionRefused:
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
        return verification_locked()
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
    return verification_locked()  # active, but out of attempts


def code_well_formed(code: str) -> str:
    """The code as typed, without spaces: ValidationFailed unless it is six digits."""
    code = "".join((code or "").split())
    if len(code) != CODE_DIGITS or not code.isdigit():
        raise ValidationFailed(
            _("El código tiene seis cifras. ¿Puede repetirlo?"), code="invalid_code_format"
        )
    return code


def code_accept(
    challenge: VerificationChallenge,
    conversation: Conversation,
    code: str,
    now: datetime,
) -> None:
    """Take one of the challenge's attempts and compare `code` with it; raise unless it is
    the challenge's code and the challenge still takes guesses. The last wrong one locks it,
    and so does the wrong guess that spends the contact's budget of wrong codes
    (core.verification.budget), after which the code takes no guess. The challenge is not
    used up here (`challenge_use`). A code issued before an identity alarm of the
    conversation takes no guess (`code_revoked`). A challenge of nobody (an identification in
    verified mode) goes through every step alike and never matches."""
    if challenge.status != Status.ACTIVE or challenge.expires_at <= now:
        raise _refused(challenge.status, expired=challenge.expires_at <= now)
    if _voided_by_an_alarm(challenge, conversation):
        raise _refused(Status.REVOKED, expired=False)
    # As the call first found it: its later runs (core.durable) count its own attempt.
    spent = decided_once(
        lambda: (
            challenge.issued_by_id is None
            and challenge.contact_id is not None
            and wrong_codes_spent(challenge.contact_id, now)
        )
    )
    if spent and wrong_codes_budget_close(
        challenge=challenge, conversation_key=conversation.external_id, now=now
    ):
        raise verification_locked()  # spent by guesses at the contact's other codes
    attempts, status = _take_attempt(challenge, now)
    if attempts is None:
        raise _refused(status, expired=challenge.expires_at <= now)
    maximum = settings.GARANTE_VERIFICATION_MAX_ATTEMPTS
    expected = code_hmac(nonce=challenge.nonce, contact_id=challenge.contact_id or 0, code=code)
    matched = hmac.compare_digest(expected, challenge.code_hmac)
    if not matched or challenge.contact_id is None:
        closed = challenge.contact_id is not None and wrong_codes_budget_close(
            challenge=challenge, conversation_key=conversation.external_id, now=now
        )
        locked = closed or (attempts >= maximum and _lock_challenge(challenge, conversation))
        CODES_WRONG.inc()
        if locked:
            CODES_LOCKED.inc()
            raise verification_locked()
        raise ValidationFailed(
            _("El código no es correcto."), code="wrong_code", attempts_left=maximum - attempts
        )


def challenge_use(challenge: VerificationChallenge, now: datetime) -> None:
    """Mark the challenge used, in the caller's transaction; raise if it no longer may be."""
    # Conditional: a concurrent last wrong guess may have locked it, or a twin call used it.
    used = VerificationChallenge.objects.filter(
        pk=challenge.pk, status=Status.ACTIVE, expires_at__gt=now
    ).update(status=Status.VERIFIED, verified_at=now)
    if not used:
        raise (
            verification_locked()
            if VerificationChallenge.objects.filter(pk=challenge.pk, status=Status.LOCKED).exists()
            else ValidationFailed(
                _("Ese código ya no es válido. Si lo necesita, le envío otro."), code="code_used"
            )
        )
    challenge.status, challenge.verified_at = Status.VERIFIED, now


@keeps_evidence
def challenge_verify(
    *, conversation: Conversation, contact: Contact, code: str
) -> VerificationChallenge:
    """Check a code against the latest step-up challenge of this conversation for this
    contact; on success mark the conversation verified for
    settings.GARANTE_VERIFICATION_VALID_FOR.

    Each code compared uses up one of the challenge's attempts first (`_take_attempt`); the
    last one wrong locks it. A code sent to a new phone or email (a contact change) never
    verifies the conversation: it proves the new channel, not who the customer is."""
    code = code_well_formed(code)
    # As the call first found it: its later runs (core.durable) see what its evidence changed.
    challenge = decided_once(lambda: _latest_challenge(conversation, contact, Purpose.STEP_UP))
    if challenge is None:
        raise ValidationFailed(
            _("No hay ningún código pendiente. Primero tengo que enviarle uno."),
            code="no_code_pending",
        )
    if challenge.sent_as == Form.LINK:
        # No code went out: every guess would be wrong, and the customer has a link to tap.
        raise ValidationFailed(
            _(
                "Le enviamos un enlace, no un código: ábralo en su teléfono o correo y pulse "
                "el botón. Después podemos seguir."
            ),
            code="link_sent",
        )
    now = timezone.now()
    code_accept(challenge, conversation, code, now)
    challenge_use(challenge, now)
    _conversation_verify(challenge, conversation, now)
    CODES_VERIFIED.inc()
    return challenge


def _conversation_verify(
    challenge: VerificationChallenge, conversation: Conversation, now: datetime
) -> None:
    """What a step-up challenge answered does: the conversation verified for a short time."""
    conversation.verified_at = now
    conversation.verified_until = now + settings.GARANTE_VERIFICATION_VALID_FOR
    conversation.save(update_fields=["verified_at", "verified_until"])


# --- Answering by link ---------------------------------------------------------------------


@dataclass(frozen=True)
class LinkAnswer:
    """What tapping the link of a challenge of one purpose does, and what its page says.

    `effect(challenge, conversation, now)` runs in the tap's transaction once the challenge
    is used, as the right code's effect runs after verify_code: it raises a typed error to
    refuse (then nothing of the tap stays, the challenge included). The texts are lazy:
    the page shows them in the company's language."""

    effect: Callable[[VerificationChallenge, Conversation, datetime], None]
    heading: str
    text: str
    button: str
    done: str


_LINK_ANSWERS: dict[str, LinkAnswer] = {
    Purpose.STEP_UP: LinkAnswer(
        effect=_conversation_verify,
        heading=_("Confirme que es usted"),
        text=_(
            "Pulse el botón para confirmar que es usted quien habla con %(company)s. Si no lo "
            "ha pedido usted, cierre esta página: no se hará nada."
        ),
        button=_("Sí, soy yo"),
        done=_("Listo, ya está confirmado. Vuelva a la conversación para seguir."),
    ),
}


def link_answer_register(purpose: str, answer: LinkAnswer) -> None:
    """Let the challenges of `purpose` be answered by link (an app's AppConfig.ready():
    a confirmation of an action, say), with the same checks as a step-up's."""
    _LINK_ANSWERS[purpose] = answer


def link_answer(purpose: str) -> LinkAnswer | None:
    """What tapping a link of `purpose` does (None: such challenges take no link)."""
    return _LINK_ANSWERS.get(purpose)


def _link_refused(status: str, *, expired: bool) -> Exception:
    """Why a challenge in this state takes no tap: the link's words for `_refused`'s."""
    if status == Status.LOCKED:
        return verification_locked()
    if status == Status.VERIFIED:
        return ValidationFailed(
            _("Este enlace ya se usó: solo sirve una vez."), code="link_used", state=status
        )
    if status == Status.SUPERSEDED:
        return ValidationFailed(
            _("Este enlace se sustituyó por otro más reciente. Abra el del último mensaje."),
            code="link_superseded",
            state=status,
        )
    if status == Status.REVOKED:
        return ValidationFailed(
            _("Este enlace se anuló por seguridad. Si lo necesita, pida otro en la conversación."),
            code="link_revoked",
            state=status,
        )
    if expired:
        return ValidationFailed(
            _("Este enlace caducó. Si lo necesita, pida otro en la conversación."),
            code="link_expired",
            state="expired",
        )
    return verification_locked()


def _link_state_refusal(challenge: VerificationChallenge, now: datetime) -> Exception | None:
    if challenge.status != Status.ACTIVE or challenge.expires_at <= now:
        return _link_refused(challenge.status, expired=challenge.expires_at <= now)
    return None


def challenge_link_refusal(challenge: VerificationChallenge, *, now: datetime) -> Exception | None:
    """Why this challenge's link takes no tap now, or None; reads only (a GET's page: an alarm
    is told here, and the challenge revoked by the tap that finds it)."""
    refusal = _link_state_refusal(challenge, now)
    if refusal is not None:
        return refusal
    conversation = challenge.conversation
    if conversation is not None and _alarm_since(challenge, conversation):
        return _link_refused(Status.REVOKED, expired=False)
    return None


@keeps_evidence
def challenge_answer_by_link(*, challenge: VerificationChallenge) -> VerificationChallenge:
    """Answer `challenge` by its link, exactly as its right code would be: the same checks
    (active, not expired, not voided by an identity alarm of its conversation:
    `_voided_by_an_alarm`), the same status change (`challenge_use`) and the same effect,
    its purpose's (`LinkAnswer`; a step-up verifies the conversation). Single use: a second
    tap finds it used. Nothing is guessed here (the link's HMAC tag was checked before the
    challenge was read), so no attempt is taken.

    Bound to the challenge's own conversation, and to its contact: a conversation that has
    since been bound to somebody else, or lost, is not verified by it."""
    answer = _LINK_ANSWERS.get(challenge.purpose)
    conversation = challenge.conversation
    if (
        answer is None
        or challenge.sent_as == Form.CODE
        or conversation is None
        or conversation.contact_id != challenge.contact_id
    ):
        raise ValidationFailed(
            _("Este enlace no sirve para confirmar nada. Pida otro en la conversación."),
            code="link_invalid",
        )
    now = timezone.now()
    # Its state as of now, locked: a second tap (another tab, a double submit under another
    # form) waits here and then finds it used.
    current = VerificationChallenge.objects.select_for_update().get(pk=challenge.pk)
    refusal = _link_state_refusal(current, now)
    if refusal is not None:
        raise refusal
    if _voided_by_an_alarm(current, conversation):
        raise _link_refused(Status.REVOKED, expired=False)
    try:
        challenge_use(current, now)
    except ValidationFailed:
        raise _link_refused(Status.VERIFIED, expired=False) from None
    answer.effect(current, conversation, now)
    CODES_VERIFIED.inc()
    return current


def step_up_pending(conversation: Conversation, contact: Contact) -> VerificationChallenge | None:
    """The conversation's step-up challenge the customer may still answer (by code or by
    link), or None."""
    challenge = _latest_challenge(conversation, contact, Purpose.STEP_UP)
    if (
        challenge is None
        or challenge.status != Status.ACTIVE
        or challenge.expires_at <= timezone.now()
    ):
        return None
    return challenge


@keeps_evidence
def contact_change_code_check(
    *, conversation: Conversation, contact: Contact, code: str
) -> VerificationChallenge:
    """The conversation's pending contact change whose code this is, still unused (the
    caller uses it with `contact_change_code_use` or `contact_change_code_spend`).

    One attempt of that change's code is taken per call, as for a step-up code. A code of
    another conversation finds no change here (or is wrong): a change is bound to the
    conversation that asked for it. The code the customer's current channel received (their
    step-up code, already used) is wrong too, and said so: it proves the old channel, not the
    new one."""
    code = code_well_formed(code)
    # As the call first found it: its later runs (core.durable) see what its evidence changed
    # (the code spent when the new value turns out taken).
    challenge = decided_once(
        lambda: _latest_challenge(conversation, contact, Purpose.CONTACT_CHANGE)
    )
    if challenge is None:
        raise ValidationFailed(
            _(
                "No hay ningún cambio de teléfono o correo pendiente de confirmar. Primero "
                "dígame el nuevo dato y le enviaré un código."
            ),
            code="no_change_pending",
        )
    now = timezone.now()
    try:
        code_accept(challenge, conversation, code, now)
    except ValidationFailed as wrong:
        if wrong.code == "wrong_code" and _is_used_step_up_code(conversation, contact, code):
            raise ValidationFailed(
                _(
                    "Ese es el código que le enviamos a su teléfono o correo de siempre. Para "
                    "confirmar el cambio necesito el que enviamos al nuevo."
                ),
                code="code_for_current_channel",
                attempts_left=wrong.extras.get("attempts_left"),
            ) from None
        raise
    return challenge


def _is_used_step_up_code(conversation: Conversation, contact: Contact, code: str) -> bool:
    # Only a code already used: matching it tells nothing that could verify anybody.
    used = (
        VerificationChallenge.objects.filter(
            conversation=conversation,
            contact=contact,
            purpose=Purpose.STEP_UP,
            status=Status.VERIFIED,
        )
        .order_by("-created_at", "-pk")
        .first()
    )
    if used is None:
        return False
    expected = code_hmac(nonce=used.nonce, contact_id=contact.pk, code=code)
    return hmac.compare_digest(expected, used.code_hmac)


def contact_change_code_use(challenge: VerificationChallenge) -> None:
    """Use up a change's code in the caller's transaction (the change commits with it)."""
    challenge_use(challenge, timezone.now())
    CODES_VERIFIED.inc()


def contact_change_code_spend(challenge: VerificationChallenge) -> None:
    """Use up a change's code for good, whatever the caller's transaction does: its change
    was refused after the proof, and the same code must not ask again. Call only while the
    caller has not written the challenge's row (core.durable)."""
    now = timezone.now()
    durably(
        lambda: VerificationChallenge.objects.filter(pk=challenge.pk, status=Status.ACTIVE).update(
            status=Status.VERIFIED, verified_at=now
        )
    )


@keeps_evidence
def identification_challenge_verify(
    *, conversation: Conversation, challenge: VerificationChallenge, code: str
) -> VerificationChallenge:
    """Check a code against a verified-mode identification's challenge
    (`pending_identification_challenge`), as `challenge_verify` checks a step-up code; the
    caller binds the conversation to the challenge's contact when it is right."""
    now = timezone.now()
    code_accept(challenge, conversation, code_well_formed(code), now)
    challenge_use(challenge, now)
    CODES_VERIFIED.inc()
    return challenge
