"""Telling a company's staff about a security event that needs them: a contact whose daily
budget of wrong verification codes is spent (core.verification.budget), to all its staff; a
burst of failed identifications on one of its gateway credentials (core.identity) and its
hourly SMS budget reached (core.sms_policy), to its administrators, who alone may revoke the
credential or change the budget (the burst's email links to the credential's page)."""

import logging
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from core.jobs import task_named
from core.mail import admin_link, staff_email_send
from core.models import SecurityEvent, StaffMembership
from core.transactions import one_at_a_time

logger = logging.getLogger("garante.security")

# The events staff are emailed about.
NOTIFIED_KINDS = (
    SecurityEvent.Kind.IDENTIFICATION_BURST,
    SecurityEvent.Kind.WRONG_CODES_BUDGET_SPENT,
    SecurityEvent.Kind.SMS_BUDGET_REACHED,
)
# Those only the company's administrators are emailed about: what they alone may act on in
# the admin (gateway credentials, the company's SMS settings). Telling everyone else of a
# credential they cannot see only asks them to do what they cannot.
ADMINS_ONLY_KINDS = (
    SecurityEvent.Kind.IDENTIFICATION_BURST,
    SecurityEvent.Kind.SMS_BUDGET_REACHED,
)
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


def security_event_staff_recipients(*, company_id: int, admins_only: bool = False) -> list[str]:
    """The company's active staff with an email (only its administrators, if `admins_only`)."""
    memberships = StaffMembership.objects.filter(company_id=company_id)
    if admins_only:
        memberships = memberships.filter(role=StaffMembership.Role.ADMIN)
    staff = (
        get_user_model()
        .objects.filter(pk__in=memberships.values("user_id"), is_active=True)
        .exclude(email="")
    )
    return sorted(staff.values_list("email", flat=True).distinct())


def _notice_text(event: SecurityEvent) -> tuple[str, str]:
    """The subject and body of an event's email, in the active language."""
    if event.kind == SecurityEvent.Kind.WRONG_CODES_BUDGET_SPENT:
        subject = _("Security alert: too many wrong verification codes for %(contact)s") % {
            "contact": str(event.contact) if event.contact else "-"
        }
        return subject, render_to_string(
            "core/email/wrong_codes_budget_spent.txt", {"event": event}
        )
    if event.kind == SecurityEvent.Kind.SMS_BUDGET_REACHED:
        subject = _("Alert: %(company)s reached its hourly SMS budget") % {
            "company": event.company.name
        }
        return subject, render_to_string("core/email/sms_budget_reached.txt", {"event": event})
    subject = _("Security alert: failed identifications on %(credential)s") % {
        "credential": event.credential.name if event.credential else "-"
    }
    links = {}
    if event.credential_id is not None:
        links = {
            "credential_url": admin_link(
                reverse("admin:core_gatewaycredential_change", args=[event.credential_id])
            ),
            "revoke_url": admin_link(
                reverse("admin:core_gatewaycredential_revoke", args=[event.credential_id])
            ),
        }
    return subject, render_to_string(
        "core/email/identification_burst.txt", {"event": event, **links}
    )


def security_event_staff_notify(*, event_id: int) -> int:
    """Email the company's staff about a security event; returns the messages sent.

    Run by the Celery task after commit, and again by the sweep for a notice that never went
    out. Safe to repeat and to run twice at once (a second delivery waits for the first and
    finds it sent). A transient mail error is raised for the task to retry; a refusal for good
    settles the notice with the error kept, and is logged.
    """
    with one_at_a_time(SecurityEvent, event_id):
        event = (
            SecurityEvent.objects.select_related("company", "credential", "contact")
            .filter(pk=event_id, kind__in=NOTIFIED_KINDS, staff_notified_at__isnull=True)
            .first()
        )
        if event is None:
            return 0
        recipients = security_event_staff_recipients(
            company_id=event.company_id, admins_only=event.kind in ADMINS_ONLY_KINDS
        )
        if not recipients:
            logger.warning("security event %s: no staff member with an email", event_id)
            _notified(event)
            return 0
        with translation.override(event.company.language):
            subject, body = _notice_text(event)
        error = staff_email_send(subject=subject, body=body, recipients=recipients)
        if error:
            logger.error("security event %s: staff email refused for good (%s)", event_id, error)
            _notified(event, error=error)
            return 0
        _notified(event)
        return 1


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
