"""Messages to customers about their cases: staff's public replies and the resolution notice.

support.services calls `case_message_after` in the transaction of a staff member's public reply
and of every resolution, whoever makes it (the admin, the integration API): the message is
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
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.db import DatabaseError, transaction
from django.db.models import F, Q
from django.template.loader import render_to_string
from django.utils import timezone, translation
from django.utils.translation import gettext as _g
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from core.jobs import task_named
from core.l10n import datetime_shown
from core.models import Contact
from core.normalize import mask_email, mask_phone
from core.outbound import OutboundRefused, OutboundTransient, SentUnrecorded, message_send
from core.sweeps import sweep
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
# A queued message whose task has not claimed it after this long was lost on its way: the
# sweep publishes it again (the claim makes a copy that does arrive harmless). Longer than all
# of the task's retries.
LOST_AFTER = timedelta(minutes=15)
# A message still `sending` this long after its claim had its worker stopped in the middle:
# whether it reached the customer is unknown (it is never sent again).
SENDING_STALE_AFTER = timedelta(minutes=15)

# Why a message was not sent, as staff read it in the admin (stored in English, like the
# appointment messages' reasons, and translated when shown).
NO_CHANNEL = "no phone or email"
OPTED_OUT = "opted out"
REASONS_SHOWN = {
    NO_CHANNEL: _("the customer has no phone or email"),
    OPTED_OUT: _("the customer opted out of messages on every channel they have"),
    "no email": _("the customer no longer has an email"),
    "no phone": _("the customer no longer has a phone"),
    "case reopened": _("the case was reopened before the notice left"),
}


def reason_shown(error: str) -> str:
    """Why a message was not sent, in the staff member's language when it is one of ours (a
    provider's own detail, "SMTP 550", is shown as it came)."""
    return str(REASONS_SHOWN.get(error, error))


# --- Written with the reply or the resolution (support.services) ---------------------------------


def channel_for(contact: Contact) -> tuple[str, str]:
    """The contact's channel for case messages, and why there is none: email (it carries the
    thread), else SMS, each unless they opted out of it."""
    if contact.email and not contact.email_opt_out:
        return Channel.EMAIL, ""
    if contact.phone and not contact.sms_opt_out:
        return Channel.SMS, ""
    if contact.email or contact.phone:
        return "", OPTED_OUT
    return "", NO_CHANNEL


def case_message_after(
    case: Case, kind: str, *, comment: CaseComment | None = None, now: datetime | None = None
) -> CaseMessage:
    """Write the message a public reply (`comment`) or a resolution of `case` owes its
    customer, in the caller's transaction, and publish it once that commits. Returned, so the
    caller can tell staff at once when it cannot be sent (`status` not_sent, `error` why)."""
    now = now or timezone.now()
    channel, why = channel_for(case.contact)
    message = CaseMessage.objects.create(
        company_id=case.company_id,
        case=case,
        comment=comment,
        kind=kind,
        channel=channel,
        status=Status.NOT_SENT if why else Status.QUEUED,
        error=why,
        queued_at=None if why else now,
    )
    if message.status == Status.QUEUED:
        message_id = message.pk
        # robust: a broker that is down must not turn the committed reply into an error; the
        # message stays queued and the sweep publishes it again (LOST_AFTER).
        transaction.on_commit(lambda: publish(message_id), robust=True)
    return message


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
        else:
            subject = _g("%(company)s: su caso %(reference)s está resuelto") % values
        if message.channel == Channel.SMS:
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
            return subject, body % {**values, "days": days}
        thread, earlier = _thread(message)
        body = render_to_string(
            "support/email/customer_thread.txt",
            {
                "case": case,
                "company": company,
                "contact": case.contact,
                "resolved": message.kind == Kind.RESOLVED,
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
    contact = case.contact
    if message.channel == Channel.EMAIL and (contact.email_opt_out or not contact.email):
        return OPTED_OUT if contact.email_opt_out else "no email"
    if message.channel == Channel.SMS and (contact.sms_opt_out or not contact.phone):
        return OPTED_OUT if contact.sms_opt_out else "no phone"
    return ""


def _claim(message_id: int, now: datetime) -> CaseMessage | None:
    """Take the message for sending (queued or retrying -> sending), once: None if it is not
    claimable (sent, being sent, dropped) or no longer applies (then it is dropped). The
    message's row is locked while the case and the contact are read again."""
    with transaction.atomic():
        message = (
            CaseMessage.objects.select_for_update(of=("self",))
            .select_related("case__company", "case__contact")
            .filter(pk=message_id, status__in=[Status.QUEUED, Status.RETRYING])
            .first()
        )
        if message is None:
            return None
        why = _no_longer_applies(message, message.case)
        if why:
            message.status, message.error = Status.NOT_SENT, why
            message.save(update_fields=["status", "error"])
            logger.info("case message %s dropped: %s", message_id, why)
            return None
        message.status, message.claimed_at = Status.SENDING, now
        message.attempts = F("attempts") + 1
        message.save(update_fields=["status", "claimed_at", "attempts"])
    return message


def _destination(message: CaseMessage) -> tuple[str, str]:
    """Where the message goes on its channel, and that address masked for staff."""
    contact = message.case.contact
    if message.channel == Channel.SMS:
        return contact.phone, mask_phone(contact.phone, message.case.company.language)
    return contact.email, mask_email(contact.email)


def case_message_deliver(*, message_id: int, last_try: bool, now: datetime | None = None) -> str:
    """Send one case message, once (run by its Celery task): its outcome, "sent", "failed",
    "unknown", or "skipped" when there was nothing to send. A transient failure before the
    last try marks it retrying and raises OutboundTransient for the task's retry; a message
    that left but could not be recorded raises SentUnrecorded, for a retry that records it
    and sends nothing."""
    now = now or timezone.now()
    message = _claim(message_id, now)
    if message is None:
        return "skipped"
    messages = CaseMessage.objects.filter(pk=message_id)
    try:
        # Composed after the claim, so the thread holds every public message written before
        # it left; a database failure here gives the message back for the retry.
        subject, body = message_text(message)
        to, masked = _destination(message)
    except DatabaseError:
        messages.filter(status=Status.SENDING).update(status=Status.RETRYING)
        raise
    try:
        sent = message_send(
            company=message.case.company,
            channel=message.channel,
            to=to,
            subject=subject,
            body=body,
        )
    except OutboundTransient as exc:
        status = Status.FAILED if last_try else Status.RETRYING
        messages.update(status=status, error=exc.detail)
        logger.warning("case message %s: transient delivery error %s", message_id, exc)
        if last_try:
            return "failed"
        raise
    except OutboundRefused as exc:
        messages.update(status=Status.FAILED, error=exc.detail)
        logger.warning("case message %s: delivery refused %s", message_id, exc)
        return "failed"
    except SoftTimeLimitExceeded:
        # Stopped while the provider had it: whether it arrived cannot be known, and sending
        # it again could send it twice.
        messages.update(status=Status.UNKNOWN, error="time limit reached while sending")
        logger.error("case message %s: time limit reached while sending", message_id)
        return "unknown"
    logger.info("case message %s (%s) sent by %s", message_id, message.kind, message.channel)
    recorded = {
        "masked_destination": masked[:254],
        "provider_message_id": sent.provider_message_id,
        "provider_status": sent.provider_status,
    }
    try:
        case_message_record_sent(message_id=message_id, **recorded)
    except DatabaseError as exc:
        raise SentUnrecorded(recorded) from exc
    return "sent"


def case_message_record_sent(
    *, message_id: int, masked_destination: str, provider_message_id: str, provider_status: str
) -> None:
    """Record a message as sent (unconditionally: over an `unknown` the sweep wrote while the
    record waited for a database that had stopped answering)."""
    CaseMessage.objects.filter(pk=message_id).update(
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
    queued: int  # lost messages published again
    settled: int  # messages stopped while sending, settled as unknown
    failed: int  # rows that raised (logged, counted): still due, the next run tries them again


def _lost(now: datetime) -> Q:
    return Q(status__in=[Status.QUEUED, Status.RETRYING], queued_at__lte=now - LOST_AFTER)


def _publish_lost(message_id: int, now: datetime) -> bool:
    """Publish again one message lost on its way; whether it did. Claimed with a conditional
    UPDATE of `queued_at` first, so two sweeps at once publish it once; put back as it was if
    the broker cannot take it, for the next run."""
    with transaction.atomic():
        before = CaseMessage.objects.filter(_lost(now), pk=message_id).values_list(
            "queued_at", flat=True
        )
        queued_at = before.first()
        if queued_at is None:
            return False  # claimed, sent or dropped meanwhile
        claimed = CaseMessage.objects.filter(_lost(now), pk=message_id, queued_at=queued_at).update(
            queued_at=now
        )
    if not claimed:
        return False  # another sweep took it
    try:
        publish(message_id)
    except Exception:
        CaseMessage.objects.filter(pk=message_id, queued_at=now).update(queued_at=queued_at)
        raise
    return True


def _settle_stopped(message_id: int, now: datetime) -> bool:
    # A transaction (a savepoint inside a caller's) of its own: a row that fails rolls back
    # alone and the sweep goes on to the next.
    with transaction.atomic():
        return bool(
            CaseMessage.objects.filter(
                pk=message_id, status=Status.SENDING, claimed_at__lte=now - SENDING_STALE_AFTER
            ).update(status=Status.UNKNOWN, error="stopped while sending")
        )


def case_messages_sweep(*, now: datetime | None = None, batch: int = 500) -> MessagesSweepResult:
    """Publish again the messages lost on their way, and settle those whose worker stopped
    while sending: row by row (core.sweeps), so a row that fails is logged and counted, stays
    due for the next run, and the others go on."""
    now = now or timezone.now()
    open_messages = CaseMessage.objects.filter(status__in=CaseMessage.OPEN_STATUSES)
    lost = list(
        open_messages.filter(_lost(now))
        .order_by("queued_at", "pk")
        .values_list("pk", flat=True)[:batch]
    )
    queued = sweep("support.messages_publish", lost, lambda pk: _publish_lost(pk, now))
    stopped = list(
        open_messages.filter(
            status=Status.SENDING, claimed_at__lte=now - SENDING_STALE_AFTER
        ).values_list("pk", flat=True)[:batch]
    )
    settled = sweep("support.messages_settle", stopped, lambda pk: _settle_stopped(pk, now))
    return MessagesSweepResult(
        queued=queued.done, settled=settled.done, failed=queued.failed + settled.failed
    )
