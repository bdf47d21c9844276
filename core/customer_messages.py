"""The one way a message owed to a customer is written, sent once and recorded.

Three kinds of message are owed to customers: an appointment's (agenda.appointment_messages), a
case's (support.case_messages) and a settled quote's or order's (sales.quote_messages). Each app
keeps its own rows (its message model), claims a row under the locks its own record needs,
decides whether the message still applies, and composes its text in the company's language.
What is the same for all three lives here:

- the channel a contact is reached on, and why there is none (no phone or email, opted out);
- writing a message in the transaction of the change that owes it, published at commit;
- the send through core.outbound (the SMS policy, the sandbox's outbox, transient or final
  refusals), its outcome recorded on the row: sent, retrying, failed, or unknown when the
  worker was stopped while the provider held it (never sent again: it may have arrived);
- the Celery task's options and its retry that only records a message that left while the
  database was down;
- the beat sweep that publishes again a message lost on its way (a broker down at commit) and
  settles as unknown one whose worker stopped while sending, row by row (core.sweeps).

A message model has the fields `company`, `kind`, `channel`, `status`, `error`, `queued_at`,
`claimed_at`, `attempts`, `masked_destination`, `provider_message_id`, `provider_status` and
`sent_at`, with these statuses and channels' values.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.db import DatabaseError, InterfaceError, OperationalError, models, transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.models import Company, Contact
from core.normalize import mask_email, mask_phone
from core.outbound import OutboundRefused, OutboundTransient, SentUnrecorded, message_send
from core.sweeps import sweep

SMS, EMAIL = "sms", "email"
SCHEDULED = "scheduled"  # a reminder waiting for its time (agenda)
QUEUED, SENDING, RETRYING = "queued", "sending", "retrying"
SENT, FAILED, NOT_SENT, UNKNOWN = "sent", "failed", "not_sent", "unknown"

# A queued message whose task has not claimed it after this long was lost on its way: the
# sweep publishes it again (the claim makes a copy that does arrive harmless). Longer than all
# of the task's retries.
LOST_AFTER = timedelta(minutes=15)
# A message still `sending` this long after its claim had its worker stopped in the middle:
# whether it reached the customer is unknown (it is never sent again).
SENDING_STALE_AFTER = timedelta(minutes=15)
RETRIES = 5

# Why a message was not sent, as staff read it in the admin: stored in English and translated
# when shown (a provider's own detail, "SMTP 550", is shown as it came).
NO_CHANNEL = "no phone or email"
OPTED_OUT = "opted out"
REASONS_SHOWN = {
    NO_CHANNEL: _("the customer has no phone or email"),
    OPTED_OUT: _("the customer opted out of messages on every channel they have"),
    "no email": _("the customer no longer has an email"),
    "no phone": _("the customer no longer has a phone"),
}


def reason_shown(error: str, own: dict[str, Any] | None = None) -> str:
    """Why a message was not sent, in the staff member's language when it is one of ours or of
    the app's (`own`)."""
    return str({**REASONS_SHOWN, **(own or {})}.get(error, error))


# --- The channel -------------------------------------------------------------------------------


def channel_for(contact: Contact, *, first: str) -> tuple[str, str]:
    """The contact's channel, `first` (SMS or EMAIL) when they have it, else the other, each
    unless they opted out of it; and why there is none."""
    reachable = {
        SMS: bool(contact.phone) and not contact.sms_opt_out,
        EMAIL: bool(contact.email) and not contact.email_opt_out,
    }
    for channel in (first, EMAIL if first == SMS else SMS):
        if reachable[channel]:
            return channel, ""
    if contact.email or contact.phone:
        return "", OPTED_OUT
    return "", NO_CHANNEL


def channel_gone(contact: Contact, channel: str) -> str:
    """Why the contact can no longer be reached on `channel` ('' if they can): read again when
    a message is claimed, since they may have opted out or lost it meanwhile."""
    if channel == EMAIL and (contact.email_opt_out or not contact.email):
        return OPTED_OUT if contact.email_opt_out else "no email"
    if channel == SMS and (contact.sms_opt_out or not contact.phone):
        return OPTED_OUT if contact.sms_opt_out else "no phone"
    return ""


def destination(contact: Contact, channel: str, language: str) -> tuple[str, str]:
    """Where a message goes on its channel, and that address masked for staff."""
    if channel == SMS:
        return contact.phone, mask_phone(contact.phone, language)
    return contact.email, mask_email(contact.email)


# --- Written with the change that owes it ------------------------------------------------------


def message_write(
    model: type[models.Model],
    *,
    contact: Contact,
    first: str,
    publish: Callable[[int], None],
    now: datetime,
    **fields: Any,
) -> Any:
    """Write the message a change owes `contact`, in the caller's transaction, on their channel
    (`first` when they have it), and publish it once that commits; written `not_sent` with the
    reason when they have no channel left, for the caller to tell staff at once."""
    channel, why = channel_for(contact, first=first)
    message = model.objects.create(
        channel=channel,
        status=NOT_SENT if why else QUEUED,
        error=why,
        queued_at=None if why else now,
        **fields,
    )
    if message.status == QUEUED:
        message_id = message.pk
        # robust: a broker that is down must not turn the committed change into an error; the
        # message stays queued and the sweep publishes it again (LOST_AFTER).
        transaction.on_commit(lambda: publish(message_id), robust=True)
    return message


# --- Sent by the task --------------------------------------------------------------------------


def claim(
    model: type[models.Model],
    message_id: int,
    now: datetime,
    *,
    related: tuple[str, ...],
    no_longer_applies: Callable[[Any], str],
    logger: logging.Logger,
    what: str,
) -> Any | None:
    """Take the message for sending (queued or retrying -> sending), once: None if it is not
    claimable (sent, being sent, dropped) or no longer applies (then it is dropped, with the
    reason `no_longer_applies` gives). The message's row is locked while its record and the
    contact (`related`) are read again."""
    with transaction.atomic():
        message = (
            model.objects.select_for_update(of=("self",))
            .select_related(*related)
            .filter(pk=message_id, status__in=[QUEUED, RETRYING])
            .first()
        )
        if message is None:
            return None
        why = no_longer_applies(message)
        if why:
            message.status, message.error = NOT_SENT, why
            message.save(update_fields=["status", "error"])
            logger.info("%s %s dropped: %s", what, message_id, why)
            return None
        message.status, message.claimed_at = SENDING, now
        message.attempts = F("attempts") + 1
        message.save(update_fields=["status", "claimed_at", "attempts"])
    return message


def composing_failed(model: type[models.Model], message_id: int) -> None:
    """Give a claimed message back for the task's retry when the database failed while its
    text was composed (before anything was sent)."""
    model.objects.filter(pk=message_id, status=SENDING).update(status=RETRYING)


def send_and_record(
    model: type[models.Model],
    *,
    message: Any,
    company: Company,
    to: str,
    masked: str,
    subject: str,
    body: str,
    last_try: bool,
    logger: logging.Logger,
    what: str,
    headers: dict[str, str] | None = None,
) -> str:
    """Send a claimed message and record its outcome: "sent", "failed" or "unknown". A
    transient failure before the last try marks it retrying and raises OutboundTransient for
    the task's retry; a message that left but could not be recorded raises SentUnrecorded, for
    a retry that records it and sends nothing. `what` names the message in the log lines
    ("case message")."""
    label = f"{what} {message.pk}"
    rows = model.objects.filter(pk=message.pk)
    try:
        sent = message_send(
            company=company,
            channel=message.channel,
            to=to,
            subject=subject,
            body=body,
            headers=headers,
        )
    except OutboundTransient as exc:
        rows.update(status=FAILED if last_try else RETRYING, error=exc.detail)
        logger.warning("%s: transient delivery error %s", label, exc)
        if last_try:
            return FAILED
        raise
    except OutboundRefused as exc:
        rows.update(status=FAILED, error=exc.detail)
        logger.warning("%s: delivery refused %s", label, exc)
        return FAILED
    except SoftTimeLimitExceeded:
        # Stopped while the provider had it: whether it arrived cannot be known, and sending
        # it again could send it twice.
        rows.update(status=UNKNOWN, error="time limit reached while sending")
        logger.error("%s: time limit reached while sending", label)
        return UNKNOWN
    logger.info("%s (%s) sent by %s", label, message.kind, message.channel)
    recorded = {
        "masked_destination": masked[:254],
        "provider_message_id": sent.provider_message_id,
        "provider_status": sent.provider_status,
    }
    try:
        record_sent(model, message_id=message.pk, **recorded)
    except DatabaseError as exc:
        raise SentUnrecorded(recorded) from exc
    return SENT


def record_sent(
    model: type[models.Model],
    *,
    message_id: int,
    masked_destination: str,
    provider_message_id: str,
    provider_status: str,
) -> None:
    """Record a message as sent (unconditionally: over an `unknown` the sweep wrote while the
    record waited for a database that had stopped answering)."""
    model.objects.filter(pk=message_id).update(
        status=SENT,
        error="",
        masked_destination=masked_destination,
        provider_message_id=provider_message_id,
        provider_status=provider_status,
        sent_at=timezone.now(),
    )


# A send task is retried, with exponential backoff and jitter, for transient errors only: the
# provider's, and the database's (a claim that committed before the connection failed leaves
# the message `sending`, and the retry sends nothing). acks_late stays off: a redelivered copy
# would find the message claimed anyway, and the claim is what keeps it single. The hard limit
# is past the SMTP and SMS timeouts (10 s each); the soft one, reached while the provider holds
# the message, settles it as unknown rather than sending it again.
SEND_TASK_OPTIONS = {
    "bind": True,
    "ignore_result": True,
    "acks_late": False,
    "autoretry_for": (OutboundTransient, OperationalError, InterfaceError),
    "retry_backoff": True,
    "retry_backoff_max": 300,
    "retry_jitter": True,
    "max_retries": RETRIES,
    "soft_time_limit": 45,
    "time_limit": 60,
}


def send_task_run(
    task: Any,
    message_id: int,
    sent: dict[str, str] | None,
    *,
    model: type[models.Model],
    deliver: Callable[..., str],
    logger: logging.Logger,
    what: str,
) -> str:
    """The body of a send task: deliver the message, or, given `sent` by an earlier try whose
    message left while the database was down, only record it."""
    if sent is not None:
        record_sent(model, message_id=message_id, **sent)
        return SENT
    try:
        return deliver(message_id=message_id, last_try=task.request.retries >= task.max_retries)
    except SentUnrecorded as exc:
        logger.warning("%s %s: sent, recording it is retried", what, message_id)
        raise task.retry_after_backoff(
            args=(message_id,), kwargs={"sent": exc.sent}, exc=exc.__cause__
        ) from exc


# --- The beat sweep ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MessagesSweepResult:
    queued: int  # messages due (a reminder's time) or lost on their way, published
    settled: int  # messages stopped while sending, settled as unknown
    failed: int  # rows that raised (logged, counted): still due, the next run tries them again


def lost(now: datetime) -> Q:
    """Messages queued (or waiting for a retry) longer than any task would take to claim them."""
    return Q(status__in=[QUEUED, RETRYING], queued_at__lte=now - LOST_AFTER)


def _publish_due(
    model: type[models.Model],
    message_id: int,
    now: datetime,
    due: Callable[[datetime], Q],
    publish: Callable[[int], None],
) -> bool:
    """Publish one due message (a scheduled one becomes queued); whether it did. Claimed with
    a conditional UPDATE first, so two sweeps at once (two beats, a restarted one) publish it
    once; put back as it was if the broker cannot take it, for the next run."""
    with transaction.atomic():
        before = (
            model.objects.filter(due(now), pk=message_id).values_list("status", "queued_at").first()
        )
        if before is None:
            return False  # queued, sent or dropped meanwhile
        status, queued_at = before
        claimed = model.objects.filter(
            due(now), pk=message_id, status=status, queued_at=queued_at
        ).update(status=QUEUED if status == SCHEDULED else status, queued_at=now)
    if not claimed:
        return False  # another sweep took it
    try:
        publish(message_id)
    except Exception:
        model.objects.filter(pk=message_id, queued_at=now).update(
            status=status, queued_at=queued_at
        )
        raise
    return True


def _settle_stopped(model: type[models.Model], message_id: int, now: datetime) -> bool:
    # A transaction (a savepoint inside a caller's) of its own: a row that fails rolls back
    # alone and the sweep goes on to the next.
    with transaction.atomic():
        return bool(
            model.objects.filter(
                pk=message_id, status=SENDING, claimed_at__lte=now - SENDING_STALE_AFTER
            ).update(status=UNKNOWN, error="stopped while sending")
        )


def messages_sweep(
    model: type[models.Model],
    *,
    names: tuple[str, str],
    publish: Callable[[int], None],
    now: datetime,
    due: Callable[[datetime], Q] = lost,
    order_by: tuple[str, ...] = ("queued_at", "pk"),
    batch: int = 500,
) -> MessagesSweepResult:
    """Publish the messages `due` (by default those lost on their way), and settle those whose
    worker stopped while sending: row by row (core.sweeps, under `names`: the publishing's and
    the settling's), so a row that fails is logged and counted, stays due for the next run,
    and the others go on."""
    open_messages = model.objects.filter(status__in=[SCHEDULED, QUEUED, RETRYING, SENDING])
    due_ids = list(
        open_messages.filter(due(now)).order_by(*order_by).values_list("pk", flat=True)[:batch]
    )
    queued = sweep(names[0], due_ids, lambda pk: _publish_due(model, pk, now, due, publish))
    stopped = list(
        open_messages.filter(status=SENDING, claimed_at__lte=now - SENDING_STALE_AFTER).values_list(
            "pk", flat=True
        )[:batch]
    )
    settled = sweep(names[1], stopped, lambda pk: _settle_stopped(model, pk, now))
    return MessagesSweepResult(
        queued=queued.done, settled=settled.done, failed=queued.failed + settled.failed
    )
