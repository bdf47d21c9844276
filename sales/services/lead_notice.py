"""Telling a company's sales staff of a new opportunity, and the salesperson it is assigned to,
by email, once each: the notice is sent by a Celery task after the commit that opened or
assigned it, the opportunity's row records that it went out (or why it never will), and a beat
sweep enqueues again a notice whose task was lost (the broker was down at commit). Sent as
core.security sends staff notices (core.mail)."""

import logging
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from core.jobs import task_named
from core.l10n import datetime_shown
from core.mail import admin_link, staff_email_send
from core.transactions import one_at_a_time
from sales.models import Opportunity, SalesSettings
from sales.selectors import sales_staff

logger = logging.getLogger("garante.sales")

# A notice still unsent this long after its opportunity is taken for lost and enqueued again by
# the sweep, for as long as the window lasts (a lead older than that is on the dashboard).
NOTICE_GRACE = timedelta(minutes=2)
NOTICE_WINDOW = timedelta(days=1)


def opportunity_team_notify_on_commit(*, opportunity_id: int) -> None:
    """Email the sales staff once the transaction that opened the opportunity commits.

    robust=True: a broker outage must not turn the customer's answer into an error; it is
    logged, and the notice, still unsent on its row, is enqueued again by the sweep."""

    def notify() -> None:
        task_named("sales.tasks.opportunity_team_notify").delay(opportunity_id=opportunity_id)

    transaction.on_commit(notify, robust=True)


def opportunity_team_notify(*, opportunity_id: int) -> int:
    """Email the company's sales staff about a new opportunity; returns the emails sent (0 or
    1: one message, every recipient in Bcc).

    Safe to repeat and to run twice at once (a second delivery waits for the first and finds
    it sent). A transient mail error is raised for the task to retry; a refusal for good
    settles the notice with its reason kept, shown on the opportunity's page."""
    with one_at_a_time(Opportunity, opportunity_id):
        opportunity = (
            Opportunity.objects.select_related("company", "contact", "owner")
            .filter(pk=opportunity_id, team_notified_at__isnull=True, team_notice_error="")
            .first()
        )
        if opportunity is None:
            return 0
        recipients = sorted(
            {
                email
                for email in sales_staff(company_ids=[opportunity.company_id]).values_list(
                    "email", flat=True
                )
                if email
            }
        )
        if not recipients:
            logger.warning("opportunity %s: no sales staff with an email", opportunity.reference)
            _settled(opportunity, error="no sales staff with an email")
            return 0
        company = opportunity.company
        with translation.override(company.language), timezone.override(company.tz):
            subject, body = _notice_text(opportunity)
        error = staff_email_send(subject=subject, body=body, recipients=recipients)
        if error:
            logger.error("opportunity %s: staff email refused (%s)", opportunity.reference, error)
            _settled(opportunity, error=error)
            return 0
        _settled(opportunity)
        return 1


def _notice_text(opportunity: Opportunity) -> tuple[str, str]:
    """The subject and body, in the active language and time zone."""
    pickup = (
        SalesSettings.objects.filter(company_id=opportunity.company_id)
        .values_list("lead_pickup_hours", flat=True)
        .first()
    ) or SalesSettings.DEFAULT_LEAD_PICKUP_HOURS
    subject = _("New lead %(reference)s: %(title)s") % {
        "reference": opportunity.reference,
        "title": opportunity.title,
    }
    body = render_to_string(
        "sales/new_lead_email.txt",
        {
            "opportunity": opportunity,
            "from_customer": opportunity.conversation_id is not None,
            "came_in": datetime_shown(opportunity.created_at),
            "pickup_hours": pickup,
            "url": admin_link(reverse("admin:sales_opportunity_change", args=[opportunity.pk])),
        },
    )
    return subject, body


def _settled(opportunity: Opportunity, *, error: str = "") -> None:
    fields = {"team_notice_error": error[:200]} if error else {"team_notified_at": timezone.now()}
    Opportunity.objects.filter(
        pk=opportunity.pk, team_notified_at__isnull=True, team_notice_error=""
    ).update(**fields)


def opportunity_team_notices_pending(*, now: datetime, limit: int = 200) -> list[int]:
    """The opportunities whose sales staff email never went out (its task lost), oldest
    first."""
    return list(
        Opportunity.objects.filter(
            team_notified_at__isnull=True,
            team_notice_error="",
            created_at__lte=now - NOTICE_GRACE,
            created_at__gt=now - NOTICE_WINDOW,
        )
        .order_by("created_at")
        .values_list("pk", flat=True)[:limit]
    )


# --- The salesperson a lead is assigned to ------------------------------------------------------


def opportunity_owner_assigned(opportunity: Opportunity, *, by: Any, now: datetime) -> None:
    """Record, on `opportunity` (in memory: the caller saves `OWNER_NOTICE_FIELDS`), who must
    be told of its new owner: the owner by email once the caller's transaction commits, unless
    they took it themselves (`by`), who has nothing to learn. No owner: nothing to tell."""
    opportunity.owner_notice_error = ""
    took_it = opportunity.owner is None or (by is not None and opportunity.owner_id == by.pk)
    opportunity.owner_notified_at = now if took_it else None
    if not took_it:
        opportunity_id = opportunity.pk

        def notify() -> None:
            task_named("sales.tasks.opportunity_owner_notify").delay(opportunity_id=opportunity_id)

        transaction.on_commit(notify, robust=True)


OWNER_NOTICE_FIELDS = ["owner_notified_at", "owner_notice_error"]


def opportunity_owner_notify(*, opportunity_id: int) -> int:
    """Email the salesperson the opportunity is assigned to, with a link to it; returns the
    emails sent (0 or 1). Once per assignment: the row records it sent (or refused for good,
    with the reason shown on its page), and assigning it again starts over. Safe to repeat and
    to run twice at once. A transient mail error is raised for the task to retry."""
    with one_at_a_time(Opportunity, opportunity_id):
        opportunity = (
            Opportunity.objects.select_related("company", "contact", "owner")
            .filter(
                pk=opportunity_id,
                owner__isnull=False,
                owner_notified_at__isnull=True,
                owner_notice_error="",
            )
            .first()
        )
        if opportunity is None:
            return 0
        email = opportunity.owner.email
        if not email:
            logger.warning("opportunity %s: its owner has no email", opportunity.reference)
            _owner_settled(opportunity, error="the salesperson has no email")
            return 0
        company = opportunity.company
        with translation.override(company.language), timezone.override(company.tz):
            subject = _("Lead %(reference)s assigned to you: %(title)s") % {
                "reference": opportunity.reference,
                "title": opportunity.title,
            }
            body = render_to_string(
                "sales/lead_assigned_email.txt",
                {
                    "opportunity": opportunity,
                    "came_in": datetime_shown(opportunity.created_at),
                    "url": admin_link(
                        reverse("admin:sales_opportunity_change", args=[opportunity.pk])
                    ),
                },
            )
        error = staff_email_send(subject=subject, body=body, recipients=[email])
        if error:
            logger.error("opportunity %s: owner email refused (%s)", opportunity.reference, error)
            _owner_settled(opportunity, error=error)
            return 0
        _owner_settled(opportunity)
        return 1


def _owner_settled(opportunity: Opportunity, *, error: str = "") -> None:
    # Conditional on the same assignment: one made meanwhile keeps its own notice to send.
    fields = {"owner_notice_error": error[:200]} if error else {"owner_notified_at": timezone.now()}
    Opportunity.objects.filter(
        pk=opportunity.pk,
        owner_id=opportunity.owner_id,
        assigned_at=opportunity.assigned_at,
        owner_notified_at__isnull=True,
        owner_notice_error="",
    ).update(**fields)


def opportunity_owner_notices_pending(*, now: datetime, limit: int = 200) -> list[int]:
    """The assigned opportunities whose owner's email never went out (its task lost)."""
    return list(
        Opportunity.objects.filter(
            owner__isnull=False,
            owner_notified_at__isnull=True,
            owner_notice_error="",
            assigned_at__lte=now - NOTICE_GRACE,
            assigned_at__gt=now - NOTICE_WINDOW,
        )
        .order_by("assigned_at")
        .values_list("pk", flat=True)[:limit]
    )
