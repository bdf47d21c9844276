"""Messages to customers about their cases: staff's public replies, the resolution notice and
the notice that staff closed the case.

support.services calls `case_message_after` in the transaction of a staff member's public reply,
of every resolution and of a close by staff, whoever makes it (the admin, the integration API),
with the note or reason staff gave, which the message tells: the message is
written there as a `CaseMessage`, and its task is published once that transaction commits, as
the appointment messages are (agenda.appointment_messages) and through the same gate
(core.outbound.message_send: the SMS policy, the sandbox's outbox, transient or final refusals).
Internal notes are never sent, and never appear in what is sent.

The channel is email when the customer has one, since an email carries the thread (the case's
description and its public messages, never an internal note); else an SMS with a short notice
and the case's reference, for the customer to read the rest through the agent. A customer who
opted out of a channel (Contact.email_opt_out, sms_opt_out) gets nothing on it: the other one
is used if they have it, and the opt-out is read again when the message is sent. A customer
with no channel left gets nothing, and the message is recorded `not_sent` with the reason,
which the admin shows staff at once.

The send task claims the message (queued or retrying -> sending) under its row lock, so a
second worker or a second copy of the task sends nothing. The beat sweep publishes again a
message lost on its way (a broker down at commit) and settles one whose worker stopped while
sending as `unknown` (never sent again: it may have reached the customer).
"""

import logging
from datetime import datetime

from django.db import DatabaseError
from django.template.loader import render_to_string
from django.utils import timezone, translation
from django.utils.translation import gettext as _g
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from core import customer_messages
from core.customer_messages import MessagesSweepResult
from core.jobs import task_named
from core.l10n import datetime_shown
from core.models import Contact
from support.models import CUSTOMER_STATE_LABELS, Case, CaseComment, CaseMessage
from support.selectors import support_auto_close_days

logger = logging.getLogger("garante.support.messages")

Kind = CaseMessage.Kind
Channel = CaseMessage.Channel
Status = CaseMessage.Status
SEND_TASK = "support.case_message_send"

# How many of the latest public messages an email quotes: a long thread is summed up by its
# latest part, and the customer reads the whole through the agent.
THREAD_IN_EMAIL = 10
# Why a message was not sent, beyond core.customer_messages' reasons (stored in English,
# translated when shown).
REASONS_SHOWN = {"case reopened": _("the case was reopened before the notice left")}


def reason_shown(error: str) -> str:
    """Why a message was not sent, in the staff member's language when it is one of ours (a
    provider's own detail, "SMTP 550", is shown as it came)."""
    return customer_messages.reason_shown(error, REASONS_SHOWN)


# --- Written with the reply or the resolution (support.services) ---------------------------------


def channel_for(contact: Contact) -> tuple[str, str]:
    """The contact's channel for case messages, and why there is none: email (it carries the
    thread), else SMS, each unless they opted out of it."""
    return customer_messages.channel_for(contact, first=Channel.EMAIL)


def case_message_after(
    case: Case,
    kind: str,
    *,
    comment: CaseComment | None = None,
    reason: str = "",
    now: datetime | None = None,
) -> CaseMessage:
    """Write the message a public reply (`comment`), a resolution or a close of `case` owes
    its customer, in the caller's transaction, and publish it once that commits; `reason` is
    the note staff gave (plain text, core.reasons), told in it. Returned, so the caller can
    tell staff at once when it cannot be sent (`status` not_sent, `error` why)."""
    return customer_messages.message_write(
        CaseMessage,
        contact=case.contact,
        first=Channel.EMAIL,
        publish=publish,
        now=now or timezone.now(),
        company_id=case.company_id,
        case=case,
        comment=comment,
        kind=kind,
        reason=reason,
    )


def publish(message_id: int) -> None:
    task_named(SEND_TASK).delay(message_id)


# --- Sent by the task ----------------------------------------------------------------------------


def _author(comment: CaseComment, company_name: str) -> str:
    if comment.by_customer:
        return _g("Usted")
    user = comment.author_user
    name = user.first_name if user is not None else ""
    return f"{name} ({company_name})" if name else company_name


def _when(instant: datetime) -> str:
    return datetime_shown(instant)


def _thread(message: CaseMessage) -> tuple[list[dict[str, str]], bool]:
    """The public messages the email quotes, oldest first (up to the reply it carries), and
    whether earlier ones were left out. The case's description opens it as the customer's
    first message. Internal notes are never read here."""
    case = message.case
    public = case.comments.filter(public=True).select_related("author_user", "author_contact")
    if message.comment_id is not None:
        public = public.filter(pk__lte=message.comment_id)
    latest = list(public.order_by("-created_at", "-pk")[: THREAD_IN_EMAIL + 1])
    earlier = len(latest) > THREAD_IN_EMAIL
    entries = [
        {
            "author": _author(comment, case.company.name),
            "when": _when(comment.created_at),
            "body": comment.body,
        }
        for comment in reversed(latest[:THREAD_IN_EMAIL])
    ]
    if not earlier:
        entries.insert(
            0, {"author": _g("Usted"), "when": _when(case.created_at), "body": case.description}
        )
    return entries, earlier


def message_text(message: CaseMessage) -> tuple[str, str]:
    """The subject (for email) and the text of a message, in the company's language and
    time zone: an email quotes the thread; an SMS is a short notice with the case's reference
    (nothing else of the customer's, since a phone's lock screen shows it)."""
    case = message.case
    company = case.company
    with translation.override(company.language), timezone.override(company.tz):
        values = {"company": company.name, "reference": case.reference}
        days = support_auto_close_days(company_id=company.pk)
        if message.kind == Kind.REPLY:
            subject = _g("%(company)s: respuesta a su caso %(reference)s") % values
        elif message.kind == Kind.CLOSED:
            subject = _g("%(company)s: su caso %(reference)s está cerrado") % values
        else:
            subject = _g("%(company)s: su caso %(reference)s está resuelto") % values
        told = ""
        if message.reason:
            # A resolution's note says what was done; a close's reason, why.
            told = (
                _g("Resolución: %(note)s")
                if message.kind == Kind.RESOLVED
                else _g("Motivo: %(note)s")
            ) % {"note": message.reason.rstrip(".")} + "."
        if message.channel == Channel.SMS:
            if message.kind == Kind.CLOSED:
                body = _g(
                    "%(company)s: hemos cerrado su caso %(reference)s. Si necesita algo más, "
                    "escriba a nuestro asistente y abriremos uno nuevo."
                )
                body %= values
                return subject, f"{body} {told}".strip()
            if message.kind == Kind.REPLY:
                body = _g(
                    "%(company)s: le hemos respondido en su caso %(reference)s. Para leer la "
                    "respuesta o contestar, escriba a nuestro asistente con esa referencia."
                )
            else:
                body = ngettext(
                    "%(company)s: hemos resuelto su caso %(reference)s. Si el problema sigue, "
                    "díganoslo a través de nuestro asistente; si no, el caso se cerrará en "
                    "%(days)d día.",
                    "%(company)s: hemos resuelto su caso %(reference)s. Si el problema sigue, "
                    "díganoslo a través de nuestro asistente; si no, el caso se cerrará en "
                    "%(days)d días.",
                    days,
                )
            body %= {**values, "days": days}
            return subject, f"{body} {told}".strip()
        thread, earlier = _thread(message)
        body = render_to_string(
            "support/email/customer_thread.txt",
            {
                "case": case,
                "company": company,
                "contact": case.contact,
                "resolved": message.kind == Kind.RESOLVED,
                "closed": message.kind == Kind.CLOSED,
                "reason": message.reason.rstrip("."),
                "state_label": CUSTOMER_STATE_LABELS[case.state],
                "thread": thread,
                "earlier": earlier,
                "days": days,
            },
        )
    return subject, body


def _no_longer_applies(message: CaseMessage, case: Case) -> str:
    """Why a message is not to be sent any more, at the instant of its claim ('' if it is)."""
    if message.kind == Kind.RESOLVED and case.state not in (Case.State.RESOLVED, Case.State.CLOSED):
        return "case reopened"
    return customer_messages.channel_gone(case.contact, message.channel)


def _claim(message_id: int, now: datetime) -> CaseMessage | None:
    return customer_messages.claim(
        CaseMessage,
        message_id,
        now,
        related=("case__company", "case__contact"),
        no_longer_applies=lambda message: _no_longer_applies(message, message.case),
        logger=logger,
        what="case message",
    )


def case_message_deliver(*, message_id: int, last_try: bool, now: datetime | None = None) -> str:
    """Send one case message, once (run by its Celery task): its outcome, "sent", "failed",
    "unknown" (core.customer_messages.send_and_record), or "skipped" when there was nothing
    to send."""
    now = now or timezone.now()
    message = _claim(message_id, now)
    if message is None:
        return "skipped"
    company = message.case.company
    try:
        # Composed after the claim, so the thread holds every public message written before
        # it left; a database failure here gives the message back for the retry.
        subject, body = message_text(message)
        to, masked = customer_messages.destination(
            message.case.contact, message.channel, company.language
        )
    except DatabaseError:
        customer_messages.composing_failed(CaseMessage, message_id)
        raise
    return customer_messages.send_and_record(
        CaseMessage,
        message=message,
        company=company,
        to=to,
        masked=masked,
        subject=subject,
        body=body,
        last_try=last_try,
        logger=logger,
        what="case message",
    )


# --- The beat sweep ------------------------------------------------------------------------------


def case_messages_sweep(*, now: datetime | None = None, batch: int = 500) -> MessagesSweepResult:
    """Publish again the messages lost on their way, and settle those whose worker stopped
    while sending (core.customer_messages.messages_sweep)."""
    return customer_messages.messages_sweep(
        CaseMessage,
        names=("support.messages_publish", "support.messages_settle"),
        publish=publish,
        now=now or timezone.now(),
        batch=batch,
    )
