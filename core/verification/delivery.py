"""Delivering a code by SMS or email, once (run by the Celery task), and settling lost ones."""

import logging
from datetime import datetime, timedelta
from enum import StrEnum

from django.conf import settings
from django.db import DatabaseError
from django.db.models import F
from django.utils import timezone, translation
from django.utils.translation import gettext as _g

from core.metrics import CODES_DELIVERY_FAILED, CODES_SENT
from core.models import Company, VerificationChallenge
from core.outbound import (
    OutboundRefused,
    OutboundTransient,
    SentUnrecorded,
    message_send,
)
from core.verification.codes import unseal_code
from core.verification.issue import identification_code_admit
from core.verification.links import verification_link_url

logger = logging.getLogger("garante.verification")

Status = VerificationChallenge.Status
Delivery = VerificationChallenge.Delivery
Form = Company.VerificationForm


class DeliveryOutcome(StrEnum):
    SENT = "sent"
    RETRY = "retry"
    FAILED = "failed"
    SKIPPED = "skipped"


def _message_text(challenge: VerificationChallenge, code: str) -> tuple[str, str]:
    minutes = int(settings.GARANTE_VERIFICATION_CODE_TTL.total_seconds() // 60)
    company = challenge.company
    values = {"company": company.name, "code": code, "minutes": minutes}
    with translation.override(company.language):
        if challenge.purpose == VerificationChallenge.Purpose.CONTACT_CHANGE:
            # Received by whoever holds the new phone or email: maybe not our customer at all,
            # so it says what the code would do, and that ignoring it changes nothing.
            subject = _g("Confirme su nuevo dato de contacto en %(company)s") % values
            if challenge.channel == VerificationChallenge.Channel.SMS:
                body = _g(
                    "%(company)s: para registrar este teléfono como su nuevo teléfono de "
                    "contacto, su código es %(code)s. Caduca en %(minutes)d minutos. Si no lo "
                    "ha pedido usted, ignore este mensaje: no se cambiará nada."
                )
            else:
                body = _g(
                    "%(company)s: para registrar esta dirección como su nuevo correo de "
                    "contacto, su código es %(code)s. Caduca en %(minutes)d minutos. Si no lo "
                    "ha pedido usted, ignore este mensaje: no se cambiará nada."
                )
            return subject, body % values
        if challenge.purpose == VerificationChallenge.Purpose.CONFIRMATION:
            # Says what the code does, in the words stored when it was issued: the customer
            # gives it only for what they asked, whatever the conversation tells them.
            values["action"] = challenge.action_summary
            subject = _g("Confirme su operación en %(company)s") % values
            link = challenge.sent_as != Form.CODE
            values["url"] = verification_link_url(challenge) if link else ""
            if not values["url"]:
                body = _g(
                    "%(company)s: para confirmar que quiere %(action)s, su código es %(code)s. "
                    "Caduca en %(minutes)d minutos. Si no lo ha pedido usted, no lo comparta: "
                    "no se hará nada."
                )
            elif challenge.sent_as == Form.LINK:
                body = _g(
                    "%(company)s: para confirmar que quiere %(action)s, abra este enlace y "
                    "pulse el botón: %(url)s  Caduca en %(minutes)d minutos. Si no lo ha "
                    "pedido usted, no lo abra: no se hará nada."
                )
            else:
                body = _g(
                    "%(company)s: para confirmar que quiere %(action)s, su código es %(code)s; "
                    "o abra este enlace y pulse el botón: %(url)s  Caduca en %(minutes)d "
                    "minutos. Si no lo ha pedido usted, no lo comparta: no se hará nada."
                )
            return subject, body % values
        url = "" if challenge.sent_as == Form.CODE else verification_link_url(challenge)
        if url:
            # The URL stands apart, with spaces around it, so that no message app takes the
            # text's punctuation into the link.
            values["url"] = url
            subject = _g("Confirme que es usted en %(company)s") % values
            if challenge.sent_as == Form.LINK:
                body = _g(
                    "%(company)s: para confirmar que es usted, abra este enlace y pulse el "
                    "botón: %(url)s  Caduca en %(minutes)d minutos. Si no lo ha pedido usted, "
                    "ignore este mensaje."
                )
            else:
                body = _g(
                    "%(company)s: su código de verificación es %(code)s. También puede "
                    "confirmar que es usted abriendo este enlace: %(url)s  Caduca en "
                    "%(minutes)d minutos. Si no lo ha pedido usted, ignore este mensaje."
                )
            return subject, body % values
        subject = _g("Su código de verificación de %(company)s") % values
        body = (
            _g(
                "%(company)s: su código de verificación es %(code)s. Caduca en %(minutes)d "
                "minutos. Si no lo ha pedido usted, ignore este mensaje."
            )
            % values
        )
    return subject, body


def challenge_deliver_once(*, challenge_id: int, sealed_code: str, last_try: bool) -> str:
    """Claim the challenge's delivery and hand the message to its channel, once.

    The claim is a conditional UPDATE (queued or retrying -> sending), so a duplicated task
    message or a second worker finds nothing to do. A code that expired, was revoked or was
    superseded before it could leave is not sent. Everything the message needs is read before
    the claim, so nothing but the send itself stands between a claim and its outcome: a
    database failure before the claim leaves the delivery claimable by the retry, and one
    after the send is retried as a record (`SentUnrecorded`).
    """
    challenge = VerificationChallenge.objects.select_related("company").filter(pk=challenge_id)
    challenge = challenge.first()
    if challenge is None or challenge.contact_id is None:
        # Gone, or the code of an identification of nobody: published only so that it is
        # published alike, settled when it was written.
        return DeliveryOutcome.SKIPPED
    if challenge.sent_as != Form.CODE and not verification_link_url(challenge):
        # The site's public address was removed after the link was issued: no link can be
        # written, so its code goes instead, and verify_code takes it (it refuses a code of a
        # challenge sent as a link only).
        logger.warning("verification %s: no public address for its link; code sent", challenge_id)
        VerificationChallenge.objects.filter(pk=challenge_id).update(
            sent_as=Form.CODE, link_digest=""
        )
        challenge.sent_as, challenge.link_digest = Form.CODE, ""
    subject, body = _message_text(challenge, unseal_code(sealed_code, challenge.nonce))
    claimable = VerificationChallenge.objects.filter(
        pk=challenge_id, delivery_status__in=[Delivery.QUEUED, Delivery.RETRYING]
    )
    first_try = challenge.delivery_status == Delivery.QUEUED
    if challenge.purpose == VerificationChallenge.Purpose.IDENTIFICATION and first_try:
        # Issued alike for every identifier: the send limits and budgets are checked here.
        claimed = identification_code_admit(challenge_id=challenge_id)
        if not claimed:
            return DeliveryOutcome.SKIPPED
    else:
        claimed = claimable.filter(status=Status.ACTIVE, expires_at__gt=timezone.now()).update(
            delivery_status=Delivery.SENDING, delivery_attempts=F("delivery_attempts") + 1
        )
    if not claimed:
        unsent = claimable.update(
            delivery_status=Delivery.NOT_SENT, delivery_error="no longer valid"
        )
        if not unsent:
            # Claimed already: by a duplicate of this task, or by this task's own earlier try
            # whose claim committed while its answer was lost. Whether that try sent is not
            # known here; the settling sweep marks it unknown once the code expired.
            logger.info("verification code %s: claimed already, not sent again", challenge_id)
        return DeliveryOutcome.SKIPPED
    try:
        sent = message_send(
            company=challenge.company,
            channel=challenge.channel,
            to=challenge.destination,
            subject=subject,
            body=body,
        )
    except OutboundTransient as exc:
        status = Delivery.FAILED if last_try else Delivery.RETRYING
        VerificationChallenge.objects.filter(pk=challenge_id).update(
            delivery_status=status, delivery_error=exc.detail
        )
        logger.warning("verification code %s: transient delivery error %s", challenge_id, exc)
        if last_try:
            CODES_DELIVERY_FAILED.inc()
        return DeliveryOutcome.FAILED if last_try else DeliveryOutcome.RETRY
    except OutboundRefused as exc:
        VerificationChallenge.objects.filter(pk=challenge_id).update(
            delivery_status=Delivery.FAILED, delivery_error=exc.detail
        )
        logger.warning("verification code %s: delivery refused %s", challenge_id, exc)
        CODES_DELIVERY_FAILED.inc()
        return DeliveryOutcome.FAILED
    recorded = {"message_id": sent.provider_message_id, "provider_status": sent.provider_status}
    logger.info("verification code %s delivered by %s", challenge_id, challenge.channel)
    CODES_SENT.inc()
    try:
        challenge_delivery_record_sent(challenge_id=challenge_id, **recorded)
    except DatabaseError as exc:
        raise SentUnrecorded(recorded) from exc
    return DeliveryOutcome.SENT


def challenge_delivery_record_sent(
    *, challenge_id: int, message_id: str, provider_status: str
) -> None:
    """Record a code's message as sent (unconditionally: over an `unknown` the settling sweep
    wrote while the send was still under way)."""
    VerificationChallenge.objects.filter(pk=challenge_id).update(
        delivery_status=Delivery.SENT,
        delivery_error="",
        provider_message_id=message_id,
        provider_status=provider_status,
        sent_at=timezone.now(),
    )


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
