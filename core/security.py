"""Telling a company's staff about a security event that needs them: a burst of failed
identifications on one of its gateway credentials (core.identity), a contact whose daily budget
of wrong verification codes is spent (core.verification.budget)."""

import logging
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.core.mail import EmailMessage
from django.db import transaction
from django.template.loader import render_to_string
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from core.jobs import task_named
from core.mail import smtp_error_is_transient, smtp_error_summary
from core.models import SecurityEvent
from core.transactions import one_at_a_time

logger = logging.getLogger("garante.security")

# The events staff are emailed about, each with its email's template.
_TEMPLATES = {
    SecurityEvent.Kind.IDENTIFICATION_BURST: "core/email/identification_burst.txt",
    SecurityEvent.Kind.WRONG_CODES_BUDGET_SPENT: "core/email/wrong_codes_budget_spent.txt",
}
NOTIFIED_KINDS = tuple(_TEMPLATES)
# A notice still unsent this long after its event is taken for lost (the broker was down at
# commit) and enqueued again by the sweep, for as long as the window lasts.
NOTICE_GRACE = timedelta(minutes=2)
NOTICE_WINDOW = timedelta(days=1)


def security_event_notify_on_commit(*, event_id: int) -> None:
    """Email staff about the event once the transaction that records it commits.

    robust=True: a broker outage must not turn the call's answer into an error; it is logged,
    and the notice, still unsent on its row, is enqueued again by the beat sweep
    (`security_event_notices_resend`).
    """

    def notify() -> None:
        task_named("core.tasks.security_event_notify_staff").delay(event_id=event_id)

    transaction.on_commit(notify, robust=True)


def security_event_staff_recipients(*, company_id: int) -> list[str]:
    """The company's active staff with an email."""
    staff = (
        get_user_model()
        .objects.filter(memberships__company_id=company_id, is_active=True)
        .exclude(email="")
    )
    return sorted(staff.values_list("email", flat=True).distinct())


def security_event_staff_notify(*, event_id: int) -> int:
    """Email the company's staff about a security event; returns the messages sent.

    Run by the Celery task after commit, and again by the sweep for a notice that never went
    out. Safe to repeat and to run twice at once (a second delivery waits for the first and
    finds it sent). A transient mail error is raised for the task to retry; a refusal for good
    settles the notice with the error kept, and is logged.
    """
    with one_at_a_time(SecurityEvent, event_id):
        event = (
            SecurityEvent.objects.select_related("company", "credential")
            .filter(pk=event_id, kind__in=NOTIFIED_KINDS, staff_notified_at__isnull=True)
            .first()
        )
        if event is None:
            return 0
        recipients = security_event_staff_recipients(company_id=event.company_id)
        if not recipients:
            logger.warning("security event %s: no staff member with an email", event_id)
            _notified(event)
            return 0
        with translation.override(event.company.language):
            subject = _subject(event)
            body = render_to_string(_TEMPLATES[event.kind], {"event": event})
        subject = " ".join(subject.split())[:200]
        message = EmailMessage(
            subject=subject,
            body=body,
            bcc=recipients,
            headers={"To": "undisclosed-recipients:;"},
        )
        try:
            sent = message.send()
        except OSError as exc:  # SMTPException is one
            if smtp_error_is_transient(exc):
                raise
            error = smtp_error_summary(exc)
            logger.error("security event %s: staff email refused for good (%s)", event_id, error)
            _notified(event, error=error)
            return 0
        _notified(event)
        return sent


def _subject(event: SecurityEvent) -> str:
    if event.kind == SecurityEvent.Kind.WRONG_CODES_BUDGET_SPENT:
        return _("Security alert: too many wrong verification codes for %(contact)s") % {
            "contact": str(event.contact) if event.contact else "-"
        }
    return _("Security alert: failed identifications on %(credential)s") % {
        "credential": event.credential.name if event.credential else "-"
    }


def _notified(event: SecurityEvent, *, error: str = "") -> None:
    detail = dict(event.detail or {})
    if error:
        detail["staff_notice_error"] = error
    SecurityEvent.objects.filter(pk=event.pk, staff_notified_at__isnull=True).update(
        staff_notified_at=timezone.now(), detail=detail
    )


def security_event_notices_pending(*, now: datetime, limit: int = 200) -> list[int]:
    """The events whose staff email never went out (its task lost), oldest first."""
    return list(
        SecurityEvent.objects.filter(
            kind__in=NOTIFIED_KINDS,
            staff_notified_at__isnull=True,
            created_at__lte=now - NOTICE_GRACE,
            created_at__gt=now - NOTICE_WINDOW,
        )
        .order_by("created_at")
        .values_list("pk", flat=True)[:limit]
    )
