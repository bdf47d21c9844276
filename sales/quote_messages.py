"""Messages to customers when staff settle their quote or order: the order cancelled, the quote
recorded as rejected, or withdrawn, each with the reason staff gave.

sales.services calls `quote_message_after` in the transaction of the change when staff make it
(the admin, the integration API): never when the customer did it themselves (they rejected it in
the conversation or on the quote's page and know), nor for a quote that expired by itself past
its validity (the beat task: its email said until when it held, as Odoo's quotations do), nor
for a draft the customer never received. The message is written there as a `QuoteMessage` and
its task is published once that transaction commits, as the case messages are
(support.case_messages) and through the same gate (core.outbound.message_send: the SMS policy,
the sandbox's outbox, transient or final refusals).

The channel is email when the customer has one (the quote itself went by email), else an SMS,
each unless they opted out of it (Contact.email_opt_out, sms_opt_out; read again when the
message is sent). A customer with no channel left gets nothing, and the message is recorded
`not_sent` with the reason, which the admin shows staff at once.

The send task claims the message (queued or retrying -> sending) under its row lock, so a
second worker or a second copy of the task sends nothing; a unique (quote, kind) keeps a second
write from happening at all. The beat sweep publishes again a message lost on its way and
settles one whose worker stopped while sending as `unknown` (never sent again).
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.db import DatabaseError, transaction
from django.db.models import F, Q
from django.utils import timezone, translation
from django.utils.translation import gettext as _g
from django.utils.translation import gettext_lazy as _

from core.jobs import task_named
from core.models import Contact
from core.normalize import mask_email, mask_phone
from core.outbound import OutboundRefused, OutboundTransient, SentUnrecorded, message_send
from core.sweeps import sweep
from sales import money
from sales.models import Quote, QuoteMessage

logger = logging.getLogger("garante.sales.messages")

Kind = QuoteMessage.Kind
Channel = QuoteMessage.Channel
Status = QuoteMessage.Status
SEND_TASK = "sales.quote_message_send"

LOST_AFTER = timedelta(minutes=15)
SENDING_STALE_AFTER = timedelta(minutes=15)

# Why a message was not sent, as staff read it (stored in English, translated when shown).
NO_CHANNEL = "no phone or email"
OPTED_OUT = "opted out"
REASONS_SHOWN = {
    NO_CHANNEL: _("the customer has no phone or email"),
    OPTED_OUT: _("the customer opted out of messages on every channel they have"),
    "no email": _("the customer no longer has an email"),
    "no phone": _("the customer no longer has a phone"),
}


def reason_shown(error: str) -> str:
    """Why a message was not sent, in the staff member's language when it is one of ours."""
    return str(REASONS_SHOWN.get(error, error))


def channel_for(contact: Contact) -> tuple[str, str]:
    """The contact's channel for these messages, and why there is none: email, else SMS,
    each unless they opted out of it. What the confirmation page tells staff too."""
    if contact.email and not contact.email_opt_out:
        return Channel.EMAIL, ""
    if contact.phone and not contact.sms_opt_out:
        return Channel.SMS, ""
    if contact.email or contact.phone:
        return "", OPTED_OUT
    return "", NO_CHANNEL


# --- Written with the change (sales.services) ----------------------------------------------------


def quote_message_after(
    quote: Quote, kind: str, *, reason: str = "", now: datetime | None = None
) -> QuoteMessage:
    """Write the message staff's change (`kind`) of `quote` owes its customer, in the caller's
    transaction (holding the quote's row lock), and publish it once that commits. `reason`
    (plain text, core.reasons) is told in it."""
    now = now or timezone.now()
    channel, why = channel_for(quote.contact)
    message = QuoteMessage.objects.create(
        company_id=quote.company_id,
        quote=quote,
        kind=kind,
        reason=reason,
        channel=channel,
        status=Status.NOT_SENT if why else Status.QUEUED,
        error=why,
        queued_at=None if why else now,
    )
    if message.status == Status.QUEUED:
        message_id = message.pk
        # robust: a broker that is down must not undo the committed change; the sweep
        # publishes the message again (LOST_AFTER).
        transaction.on_commit(lambda: publish(message_id), robust=True)
    return message


def publish(message_id: int) -> None:
    task_named(SEND_TASK).delay(message_id)


# --- Sent by the task ----------------------------------------------------------------------------


def message_text(message: QuoteMessage) -> tuple[str, str]:
    """The subject (for email) and the text, in the company's language: what happened to which
    quote or order, the reason, and where to ask. An SMS says no amount (a lock screen shows
    it)."""
    quote = message.quote
    company = quote.company
    with translation.override(company.language), timezone.override(company.tz):
        values = {"company": company.name, "reference": quote.reference}
        subject, sentence = {
            Kind.ORDER_CANCELLED: (
                _g("%(company)s: su pedido %(reference)s está cancelado"),
                _g("hemos cancelado su pedido %(reference)s; no se entregará."),
            ),
            Kind.QUOTE_REJECTED: (
                _g("%(company)s: cotización %(reference)s rechazada"),
                _g("hemos registrado que rechaza la cotización %(reference)s."),
            ),
            Kind.QUOTE_WITHDRAWN: (
                _g("%(company)s: cotización %(reference)s retirada"),
                _g("hemos retirado la cotización %(reference)s; ya no se puede aceptar."),
            ),
        }[message.kind]
        subject, sentence = subject % values, sentence % values
        told = (
            _g("Motivo: %(reason)s") % {"reason": message.reason.rstrip(".")} + "."
            if message.reason
            else ""
        )
        ask = (
            _g(
                "Si tiene alguna pregunta, escriba a nuestro asistente indicando la referencia "
                "%(reference)s."
            )
            % values
        )
        if message.channel == Channel.SMS:
            return subject, " ".join(filter(None, [f"{company.name}: {sentence}", told, ask]))
        greeting = _g("Hola, %(name)s:") % {"name": quote.contact.first_name}
        total = _g("Importe: %(total)s.") % {"total": money.spoken(quote.total, quote.currency)}
        lines = [greeting, "", f"{company.name}: {sentence}", total]
        if told:
            lines.append(told)
        lines += ["", ask, _g("No responda a este correo: nadie lo lee."), "", company.name, ""]
    return subject, "\n".join(lines)


def _no_longer_applies(message: QuoteMessage, quote: Quote) -> str:
    """Why a message is not to be sent any more, at the instant of its claim ('' if it is)."""
    contact = quote.contact
    if message.channel == Channel.EMAIL and (contact.email_opt_out or not contact.email):
        return OPTED_OUT if contact.email_opt_out else "no email"
    if message.channel == Channel.SMS and (contact.sms_opt_out or not contact.phone):
        return OPTED_OUT if contact.sms_opt_out else "no phone"
    return ""


def _claim(message_id: int, now: datetime) -> QuoteMessage | None:
    """Take the message for sending (queued or retrying -> sending), once: None if it is not
    claimable (sent, being sent, dropped) or no longer applies (then it is dropped)."""
    with transaction.atomic():
        message = (
            QuoteMessage.objects.select_for_update(of=("self",))
            .select_related("quote__company", "quote__contact")
            .filter(pk=message_id, status__in=[Status.QUEUED, Status.RETRYING])
            .first()
        )
        if message is None:
            return None
        why = _no_longer_applies(message, message.quote)
        if why:
            message.status, message.error = Status.NOT_SENT, why
            message.save(update_fields=["status", "error"])
            logger.info("quote message %s dropped: %s", message_id, why)
            return None
        message.status, message.claimed_at = Status.SENDING, now
        message.attempts = F("attempts") + 1
        message.save(update_fields=["status", "claimed_at", "attempts"])
    return message


def quote_message_deliver(*, message_id: int, last_try: bool, now: datetime | None = None) -> str:
    """Send one quote message, once (run by its Celery task): "sent", "failed", "unknown", or
    "skipped" when there was nothing to send. A transient failure before the last try marks it
    retrying and raises OutboundTransient for the task's retry; a message that left but could
    not be recorded raises SentUnrecorded, for a retry that records it and sends nothing."""
    now = now or timezone.now()
    message = _claim(message_id, now)
    if message is None:
        return "skipped"
    messages = QuoteMessage.objects.filter(pk=message_id)
    contact = message.quote.contact
    company = message.quote.company
    try:
        subject, body = message_text(message)
    except DatabaseError:
        messages.filter(status=Status.SENDING).update(status=Status.RETRYING)
        raise
    if message.channel == Channel.SMS:
        to, masked = contact.phone, mask_phone(contact.phone, company.language)
    else:
        to, masked = contact.email, mask_email(contact.email)
    try:
        sent = message_send(
            company=company, channel=message.channel, to=to, subject=subject, body=body
        )
    except OutboundTransient as exc:
        messages.update(status=Status.FAILED if last_try else Status.RETRYING, error=exc.detail)
        logger.warning("quote message %s: transient delivery error %s", message_id, exc)
        if last_try:
            return "failed"
        raise
    except OutboundRefused as exc:
        messages.update(status=Status.FAILED, error=exc.detail)
        logger.warning("quote message %s: delivery refused %s", message_id, exc)
        return "failed"
    except SoftTimeLimitExceeded:
        messages.update(status=Status.UNKNOWN, error="time limit reached while sending")
        logger.error("quote message %s: time limit reached while sending", message_id)
        return "unknown"
    recorded = {
        "masked_destination": masked[:254],
        "provider_message_id": sent.provider_message_id,
        "provider_status": sent.provider_status,
    }
    try:
        quote_message_record_sent(message_id=message_id, **recorded)
    except DatabaseError as exc:
        raise SentUnrecorded(recorded) from exc
    logger.info("quote message %s (%s) sent by %s", message_id, message.kind, message.channel)
    return "sent"


def quote_message_record_sent(
    *, message_id: int, masked_destination: str, provider_message_id: str, provider_status: str
) -> None:
    """Record a message as sent (unconditionally: over an `unknown` the sweep wrote while the
    record waited for a database that had stopped answering)."""
    QuoteMessage.objects.filter(pk=message_id).update(
        status=Status.SENT,
        error="",
        masked_destination=masked_destination,
        provider_message_id=provider_message_id,
        provider_status=provider_status,
        sent_at=timezone.now(),
    )


# --- The beat sweep ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MessagesSweepResult:
    queued: int
    settled: int
    failed: int


def _lost(now: datetime) -> Q:
    return Q(status__in=[Status.QUEUED, Status.RETRYING], queued_at__lte=now - LOST_AFTER)


def _publish_lost(message_id: int, now: datetime) -> bool:
    """Publish again one message lost on its way, claimed by a conditional UPDATE of
    `queued_at` (two sweeps at once publish it once); put back if the broker refuses it."""
    with transaction.atomic():
        queued_at = (
            QuoteMessage.objects.filter(_lost(now), pk=message_id)
            .values_list("queued_at", flat=True)
            .first()
        )
        if queued_at is None:
            return False
        claimed = QuoteMessage.objects.filter(
            _lost(now), pk=message_id, queued_at=queued_at
        ).update(queued_at=now)
    if not claimed:
        return False
    try:
        publish(message_id)
    except Exception:
        QuoteMessage.objects.filter(pk=message_id, queued_at=now).update(queued_at=queued_at)
        raise
    return True


def _settle_stopped(message_id: int, now: datetime) -> bool:
    with transaction.atomic():
        return bool(
            QuoteMessage.objects.filter(
                pk=message_id, status=Status.SENDING, claimed_at__lte=now - SENDING_STALE_AFTER
            ).update(status=Status.UNKNOWN, error="stopped while sending")
        )


def quote_messages_sweep(*, now: datetime | None = None, batch: int = 500) -> MessagesSweepResult:
    """Publish again the messages lost on their way, and settle those whose worker stopped
    while sending: row by row (core.sweeps)."""
    now = now or timezone.now()
    open_messages = QuoteMessage.objects.filter(status__in=QuoteMessage.OPEN_STATUSES)
    lost = list(
        open_messages.filter(_lost(now))
        .order_by("queued_at", "pk")
        .values_list("pk", flat=True)[:batch]
    )
    queued = sweep("sales.messages_publish", lost, lambda pk: _publish_lost(pk, now))
    stopped = list(
        open_messages.filter(
            status=Status.SENDING, claimed_at__lte=now - SENDING_STALE_AFTER
        ).values_list("pk", flat=True)[:batch]
    )
    settled = sweep("sales.messages_settle", stopped, lambda pk: _settle_stopped(pk, now))
    return MessagesSweepResult(
        queued=queued.done, settled=settled.done, failed=queued.failed + settled.failed
    )
