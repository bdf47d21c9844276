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
from datetime import datetime

from django.db import DatabaseError
from django.utils import timezone, translation
from django.utils.translation import gettext as _g

from core import customer_messages
from core.customer_messages import MessagesSweepResult
from core.jobs import task_named
from core.models import Contact
from sales import money
from sales.models import Quote, QuoteMessage

logger = logging.getLogger("garante.sales.messages")

Kind = QuoteMessage.Kind
Channel = QuoteMessage.Channel
Status = QuoteMessage.Status
SEND_TASK = "sales.quote_message_send"


def reason_shown(error: str) -> str:
    """Why a message was not sent, in the staff member's language when it is one of ours."""
    return customer_messages.reason_shown(error)


def channel_for(contact: Contact) -> tuple[str, str]:
    """The contact's channel for these messages, and why there is none: email, else SMS,
    each unless they opted out of it. What the confirmation page tells staff too."""
    return customer_messages.channel_for(contact, first=Channel.EMAIL)


# --- Written with the change (sales.services) ----------------------------------------------------


def quote_message_after(
    quote: Quote, kind: str, *, reason: str = "", now: datetime | None = None
) -> QuoteMessage:
    """Write the message staff's change (`kind`) of `quote` owes its customer, in the caller's
    transaction (holding the quote's row lock), and publish it once that commits. `reason`
    (plain text, core.reasons) is told in it."""
    return customer_messages.message_write(
        QuoteMessage,
        contact=quote.contact,
        first=Channel.EMAIL,
        publish=publish,
        now=now or timezone.now(),
        company_id=quote.company_id,
        quote=quote,
        kind=kind,
        reason=reason,
    )


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


def _claim(message_id: int, now: datetime) -> QuoteMessage | None:
    """Take the message for sending, once; dropped if the customer can no longer be reached
    on its channel (core.customer_messages.claim)."""
    return customer_messages.claim(
        QuoteMessage,
        message_id,
        now,
        related=("quote__company", "quote__contact"),
        no_longer_applies=lambda message: customer_messages.channel_gone(
            message.quote.contact, message.channel
        ),
        logger=logger,
        what="quote message",
    )


def quote_message_deliver(*, message_id: int, last_try: bool, now: datetime | None = None) -> str:
    """Send one quote message, once (run by its Celery task): "sent", "failed", "unknown"
    (core.customer_messages.send_and_record), or "skipped" when there was nothing to send."""
    now = now or timezone.now()
    message = _claim(message_id, now)
    if message is None:
        return "skipped"
    company = message.quote.company
    try:
        subject, body = message_text(message)
    except DatabaseError:
        customer_messages.composing_failed(QuoteMessage, message_id)
        raise
    to, masked = customer_messages.destination(
        message.quote.contact, message.channel, company.language
    )
    return customer_messages.send_and_record(
        QuoteMessage,
        message=message,
        company=company,
        to=to,
        masked=masked,
        subject=subject,
        body=body,
        last_try=last_try,
        logger=logger,
        what="quote message",
    )


# --- The beat sweep ------------------------------------------------------------------------------


def quote_messages_sweep(*, now: datetime | None = None, batch: int = 500) -> MessagesSweepResult:
    """Publish again the messages lost on their way, and settle those whose worker stopped
    while sending (core.customer_messages.messages_sweep)."""
    return customer_messages.messages_sweep(
        QuoteMessage,
        names=("sales.messages_publish", "sales.messages_settle"),
        publish=publish,
        now=now or timezone.now(),
        batch=batch,
    )
