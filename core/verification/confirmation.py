"""The customer confirms what cannot be undone: a code sent to their own channel, bound to one
action on one exact target in one conversation, used once by that action.

A company lists in its policy (StepUpPolicy.confirm_actions) the tools whose effect its
customer confirms. Such a tool's service calls `confirmation_require` after its own guards
(the record's state, a slot still free), inside the call's transaction and before any effect:

- the conversation holds an *answered* confirmation of this very action and target (its code
  checked, or the one-tap link of the challenge tapped), not used yet and answered within the
  code's lifetime: it is used now, in the call's transaction, and the action goes on;
- else, with a `code`: it is checked against the conversation's pending confirmation of this
  action and target, as any code is (one attempt taken durably per guess, five at most, the
  contact's budget of wrong codes; core.verification.check), then used; a code of another
  conversation, action or target finds nothing pending here, or is wrong;
- else a code is sent (core.verification.issue.confirmation_challenge_issue, within the send
  limits) and ConfirmationRequired is raised, naming the masked channel.

The message carries the code, a one-tap link or both, as the company chose for the channel
(Company.VerificationForm, the step-up's setting). Tapping the link answers the challenge
(`CONFIRMATION_LINK_ANSWER`, registered by core's AppConfig) and does nothing else: neither
the action, which the model's next call with the same arguments does by finding the answered
challenge above, nor a verification of the conversation. A link still waiting for its tap is
not sent again by a call without a code: a new one would replace the one the customer is
about to tap.

What the model can set (the code) only answers the challenge; nothing skips it. The use
commits with the effect, so an effect that fails leaves the confirmation for its retry, and a
replay of the call under its idempotency key never reaches here.
"""

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import rfc8785
from django.conf import settings
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.durable import decided_once, keeps_evidence
from core.errors import ConfirmationRequired, ValidationFailed
from core.identity.step_up import confirm_actions
from core.metrics import CODES_VERIFIED
from core.models import Company, Contact, Conversation, SecurityEvent, VerificationChallenge
from core.verification.check import LinkAnswer, challenge_use, code_accept, code_well_formed
from core.verification.issue import confirmation_challenge_issue

Purpose = VerificationChallenge.Purpose
Status = VerificationChallenge.Status
Delivery = VerificationChallenge.Delivery
Form = Company.VerificationForm

SUMMARY_MAX_LENGTH = VerificationChallenge._meta.get_field("action_summary").max_length


@dataclass(frozen=True)
class ConfirmedAction:
    """One action on one exact target: the tool (`action`), the record's public `reference`
    and the `arguments` that make it this action and not another (the new start of a move).
    `summary` is what the customer is told they confirm, in their company's language."""

    action: str
    reference: str
    summary: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        """SHA-256 of the action's canonical JSON (RFC 8785): the summary, wording only, is
        not part of it."""
        value = {"action": self.action, "reference": self.reference, "arguments": self.arguments}
        return hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def confirmation_needed(*, company_id: int, action: str) -> bool:
    """Whether the company has its customer confirm `action` (the process-cached policy)."""
    return action in confirm_actions(company_id=company_id)


def confirmation_require(
    *,
    conversation: Conversation,
    contact: Contact,
    target: ConfirmedAction,
    code: str | None,
    now: datetime | None = None,
) -> None:
    """Return when the customer confirmed `target` (see the module's docstring), using their
    confirmation up in the caller's transaction; else raise. Costs nothing but the policy's
    cached read when the company does not ask it for this action."""
    if not confirmation_needed(company_id=conversation.company_id, action=target.action):
        return
    _confirmed(conversation=conversation, contact=contact, target=target, code=code, now=now)


@keeps_evidence
def _confirmed(
    *,
    conversation: Conversation,
    contact: Contact,
    target: ConfirmedAction,
    code: str | None,
    now: datetime | None,
) -> None:
    now = now or timezone.now()
    bound = VerificationChallenge.objects.filter(
        conversation=conversation,
        contact=contact,
        purpose=Purpose.CONFIRMATION,
        action=target.action,
        action_digest=target.digest,
    )
    answered = _answered(bound, now)
    if answered is not None:
        _refuse_if_voided(answered, conversation)
        _use(answered, now)
        return
    # As the call first found it: its later runs (core.durable) see the attempt it took.
    pending = decided_once(
        lambda: (
            bound.exclude(Q(status=Status.SUPERSEDED) | Q(delivery_status=Delivery.NOT_SENT))
            .order_by("-created_at", "-pk")
            .first()
        )
    )
    if code is None:
        if pending is not None and _awaiting_tap(pending, now):
            _remind(pending)
        _ask(conversation=conversation, contact=contact, target=target)
    code = code_well_formed(code)
    if pending is None:
        # A code sent for another request, another conversation, or none at all: nothing here
        # takes it, and nothing is guessed at.
        raise ValidationFailed(
            _(
                "Ese código no es el de esta operación. Si quiere hacerla, le envío un código "
                "para confirmarla."
            ),
            code="no_confirmation_pending",
        )
    if pending.sent_as == Form.LINK:
        # No code went out: every guess would be wrong, and none takes an attempt.
        raise ValidationFailed(
            _(
                "Le enviamos un enlace, no un código: cuando lo haya abierto y pulsado el "
                "botón, vuelva a pedirlo sin código."
            ),
            code="link_sent",
        )
    code_accept(pending, conversation, code, now)
    challenge_use(pending, now)
    _use(pending, now)
    CODES_VERIFIED.inc()


def _answered(bound, now: datetime) -> VerificationChallenge | None:
    """The latest confirmation of this action answered (by its code or its link) and not used,
    answered within the code's lifetime: the customer's yes does not wait for ever."""
    return (
        bound.filter(
            status=Status.VERIFIED,
            consumed_at__isnull=True,
            verified_at__gt=now - settings.GARANTE_VERIFICATION_CODE_TTL,
        )
        .order_by("-verified_at", "-pk")
        .first()
    )


def _refuse_if_voided(challenge: VerificationChallenge, conversation: Conversation) -> None:
    """An identity alarm of the conversation since the confirmation was asked voids it, as it
    voids a verification: whoever talks now may not be who confirmed."""
    voided = SecurityEvent.objects.filter(
        company_id=conversation.company_id,
        conversation_key=conversation.external_id,
        kind__in=SecurityEvent.VERIFICATION_DROPPING,
        created_at__gte=challenge.created_at,
    ).exists()
    if voided:
        raise ValidationFailed(
            _("Ese código se anuló. Si lo necesita, le envío otro."), code="code_revoked"
        )


def _use(challenge: VerificationChallenge, now: datetime) -> None:
    """Use the answered confirmation up, in the caller's transaction (with the effect); a twin
    call that used it first leaves nothing here."""
    used = VerificationChallenge.objects.filter(
        pk=challenge.pk, status=Status.VERIFIED, consumed_at__isnull=True
    ).update(consumed_at=now)
    if not used:
        raise ValidationFailed(
            _("Ese código ya se usó. Si lo necesita, le envío otro."), code="code_used"
        )


def _awaiting_tap(challenge: VerificationChallenge, now: datetime) -> bool:
    """Whether the customer has a link of this action still to tap."""
    return (
        challenge.sent_as != Form.CODE
        and challenge.status == Status.ACTIVE
        and challenge.expires_at > now
    )


def _ask(*, conversation: Conversation, contact: Contact, target: ConfirmedAction) -> None:
    """Send the customer a code, a link or both for this action and raise
    ConfirmationRequired."""
    challenge = confirmation_challenge_issue(
        contact=contact,
        conversation=conversation,
        action=target.action,
        action_digest=target.digest,
        action_summary=target.summary[:SUMMARY_MAX_LENGTH],
    )
    minutes = int(settings.GARANTE_VERIFICATION_CODE_TTL.total_seconds() // 60)
    raise _required(challenge, _SENT[challenge.sent_as], minutes)


def _remind(challenge: VerificationChallenge) -> None:
    """Raise ConfirmationRequired for the link already sent, sending nothing."""
    left = int((challenge.expires_at - timezone.now()).total_seconds() // 60)
    raise _required(challenge, _AWAITING, max(1, left))


# What the model is told it waits for, per form of the message sent.
_SENT = {
    Form.CODE: _(
        "Para hacerlo necesito que usted lo confirme: le he enviado un código a su "
        "%(sent_to)s. Cuando lo reciba, dígamelo (caduca en %(minutes)d minutos)."
    ),
    Form.LINK: _(
        "Para hacerlo necesito que usted lo confirme: le he enviado un enlace a su "
        "%(sent_to)s. Ábralo, pulse el botón y dígamelo cuando esté (caduca en %(minutes)d "
        "minutos)."
    ),
    Form.BOTH: _(
        "Para hacerlo necesito que usted lo confirme: le he enviado un código y un enlace a "
        "su %(sent_to)s. Dígame el código, o pulse el botón del enlace y dígamelo cuando "
        "esté (caduca en %(minutes)d minutos)."
    ),
}
_AWAITING = _(
    "Aún no se ha confirmado: el enlace que le envié a su %(sent_to)s sigue sin pulsarse. "
    "Ábralo, pulse el botón y dígamelo cuando esté (caduca en %(minutes)d minutos)."
)


def _required(challenge: VerificationChallenge, text, minutes: int) -> ConfirmationRequired:
    return ConfirmationRequired(
        text % {"sent_to": _sent_to(challenge), "minutes": minutes},
        channel=challenge.channel,
        sent_to=challenge.masked_destination,
        sent_as=challenge.sent_as,
        expires_in_minutes=minutes,
    )


def _sent_to(challenge: VerificationChallenge) -> str:
    if challenge.channel == VerificationChallenge.Channel.SMS:
        return challenge.masked_destination  # "teléfono terminado en 42", in its language
    return str(_("correo %(email)s") % {"email": challenge.masked_destination})


def _confirmation_answered(
    challenge: VerificationChallenge, conversation: Conversation, now: datetime
) -> None:
    """What a tapped confirmation link does besides marking its challenge answered (done by
    challenge_answer_by_link): nothing. The action waits for the model's next call, which
    runs the tool's guards against the record as it is then, and the conversation is not
    verified: the customer confirmed one action, not who is talking."""


# The page of a confirmation's link, in the words stored on its challenge (`%(action)s`).
CONFIRMATION_LINK_ANSWER = LinkAnswer(
    effect=_confirmation_answered,
    heading=_("Confirme su operación"),
    text=_(
        "Pulse el botón para confirmar que quiere %(action)s con %(company)s. Si no lo ha "
        "pedido usted, cierre esta página: no se hará nada."
    ),
    button=_("Sí, lo confirmo"),
    done=_(
        "Listo, queda confirmado. Vuelva a la conversación y dígalo: allí se hará, y se lo "
        "confirmaremos."
    ),
)
