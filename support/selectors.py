"""Reads of the support app: cases, their public comments, who to tell, what is due to close."""

from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import BooleanField, Count, Exists, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.utils.translation import gettext_lazy as _

from core.errors import NotFound
from core.identity import check_owner
from core.models import Company, Contact
from core.references import normalize_reference
from core.sql import qualified
from support.models import Case, CaseComment, CaseMessage, SupportSettings


def case_list(
    *, company: Company, contact: Contact | None = None, state: str | None = None
) -> QuerySet[Case]:
    """The company's cases, newest first; optionally one contact's and in one state."""
    cases = Case.objects.filter(company=company).select_related("contact", "assignee")
    if contact is not None:
        cases = cases.filter(contact=contact)
    if state:
        cases = cases.filter(state=state)
    return cases.order_by("-created_at", "-pk")


def case_open_recent(*, company: Company, contact: Contact, since: datetime) -> Case | None:
    """The contact's latest case opened through a conversation (the agent's, whichever one:
    not staff's) since `since` and not resolved yet: what a second case asked for soon after
    may duplicate (core.idempotency.intent), or None."""
    where, params = case_open_recent_where(company=company, contact=contact, since=since)
    return (
        Case.objects.filter(RawSQL(where, params, output_field=BooleanField()))
        .order_by("-created_at", "-pk")
        .first()
    )


def case_open_recent_where(
    *, company: Company, contact: Contact, since: datetime
) -> tuple[str, list[Any]]:
    """`case_open_recent`'s rule as an SQL condition on the case table and its parameters,
    written once for the selector and for the INSERT that opens a case unless one stands
    (support.services.case_open_once; core.sql.insert_unless_conflict's `unless_exists`)."""
    states = (Case.State.OPEN, Case.State.IN_PROGRESS, Case.State.WAITING_CUSTOMER)
    return (
        f"{qualified(Case, 'company')} = %s AND {qualified(Case, 'contact')} = %s "
        f"AND {qualified(Case, 'conversation')} IS NOT NULL "
        f"AND {qualified(Case, 'state')} IN ({', '.join(['%s'] * len(states))}) "
        f"AND {qualified(Case, 'created_at')} >= %s",
        [
            company.pk,
            contact.pk,
            *[str(state) for state in states],
            Case._meta.get_field("created_at").get_db_prep_value(since, connection),
        ],
    )


def case_get(*, company: Company, reference: str, contact: Contact | None = None) -> Case:
    """The company's case with this exact public reference, or NotFound; with `contact`,
    PermissionRefused when it is another customer's (a customer reads only their own)."""
    case = (
        Case.objects.select_related("contact", "assignee", "related_case")
        .filter(company=company, reference=normalize_reference(reference))
        .first()
    )
    if case is None:
        raise NotFound(_("No encontré ese caso."), code="case_not_found")
    if contact is not None:
        check_owner(contact=contact, owner_id=case.contact_id)
    return case


def case_owner_id(*, company: Company, reference: str) -> int | None:
    """The contact id of the company's case with exactly this reference, if there is one."""
    return (
        Case.objects.filter(company=company, reference=normalize_reference(reference))
        .values_list("contact_id", flat=True)
        .first()
    )


def case_public_comments(*, case: Case, limit: int) -> tuple[list[CaseComment], bool]:
    """The latest `limit` comments the customer may read, oldest first, and whether more exist."""
    latest = list(
        case.comments.filter(public=True)
        .select_related("author_user", "author_contact")
        .order_by("-created_at", "-pk")[: limit + 1]
    )
    return list(reversed(latest[:limit])), len(latest) > limit


def case_message_latest(*, case: Case, kind: str) -> CaseMessage | None:
    """The latest message of `kind` written to the case's customer, if any."""
    return case.messages.filter(kind=kind).order_by("-created_at", "-pk").first()


def case_staff_recipients(*, case: Case) -> list[str]:
    """Who hears about the case: its assignee while they are active staff of the case's
    company with an email, else all that company's active staff with one.

    An assignee who left the company (or moved to another) stays on the case until someone
    reassigns it; the customer's words must not follow them out."""
    staff = (
        get_user_model()
        .objects.filter(memberships__company_id=case.company_id, is_active=True)
        .exclude(email="")
    )
    if case.assignee_id is not None:
        assignee = staff.filter(pk=case.assignee_id).values_list("email", flat=True).first()
        if assignee:
            return [assignee]
    return sorted(staff.values_list("email", flat=True).distinct())


def support_auto_close_days(*, company_id: int) -> int:
    """The company's auto-close period, or the default when it never set one."""
    days = (
        SupportSettings.objects.filter(company_id=company_id)
        .values_list("auto_close_after_days", flat=True)
        .first()
    )
    return days if days is not None else SupportSettings.DEFAULT_AUTO_CLOSE_DAYS


def case_unanswered_since_resolved(cases: QuerySet[Case]) -> QuerySet[Case]:
    """Narrow to cases the customer has not written on since they were resolved."""
    answered = CaseComment.objects.filter(
        case=OuterRef("pk"), author_contact__isnull=False, created_at__gt=OuterRef("resolved_at")
    )
    return cases.exclude(Exists(answered))


def case_ids_due_for_auto_close(*, now: datetime) -> list[int]:
    """Resolved cases whose customer stayed silent for their company's auto-close period."""
    due: list[int] = []
    company_ids = (
        Case.objects.filter(state=Case.State.RESOLVED)
        .order_by()
        .values_list("company_id", flat=True)
        .distinct()
    )
    for company_id in company_ids:
        cutoff = now - timedelta(days=support_auto_close_days(company_id=company_id))
        resolved = Case.objects.filter(
            company_id=company_id, state=Case.State.RESOLVED, resolved_at__lte=cutoff
        )
        due.extend(case_unanswered_since_resolved(resolved).values_list("pk", flat=True))
    return due


# A staff notice still unsent this long after its case or comment was written has lost its
# task (the broker was down at commit, the mail server kept refusing it); older than the
# window, it is no longer news worth an email.
STAFF_NOTICE_GRACE = timedelta(minutes=15)
STAFF_NOTICE_WINDOW = timedelta(days=1)


def case_staff_notices_pending(*, now: datetime, limit: int = 200) -> list[tuple[int, int | None]]:
    """Staff emails that never went out: (case id, None) for a new case, (case id, comment
    id) for a customer's comment, oldest first, at most `limit` of each."""
    written = Q(created_at__lte=now - STAFF_NOTICE_GRACE, created_at__gt=now - STAFF_NOTICE_WINDOW)
    cases = (
        Case.objects.filter(written, staff_notified_at__isnull=True)
        .order_by("created_at")
        .values_list("pk", flat=True)[:limit]
    )
    comments = (
        CaseComment.objects.filter(
            written, author_contact__isnull=False, staff_notified_at__isnull=True
        )
        .order_by("created_at")
        .values_list("case_id", "pk")[:limit]
    )
    return [(case_id, None) for case_id in cases] + list(comments)


def contact_cases_file(*, contact: Contact, limit: int) -> tuple[int, int, list[Case]]:
    """The contact's cases for their file (core.contact_file): how many, how many still open
    (neither resolved nor closed), in one query, and the `limit` newest."""
    cases = Case.objects.filter(company_id=contact.company_id, contact=contact)
    settled = Q(state__in=[Case.State.RESOLVED, Case.State.CLOSED])
    counts = cases.aggregate(total=Count("pk"), open=Count("pk", filter=~settled))
    return counts["total"], counts["open"], list(cases.order_by("-created_at", "-pk")[:limit])


def contact_case_messages_file(*, contact: Contact, limit: int) -> tuple[int, list[CaseMessage]]:
    """How many messages the contact was sent (or is to be sent) about their cases, and the
    `limit` newest, with their case."""
    messages = CaseMessage.objects.filter(company_id=contact.company_id, case__contact=contact)
    latest = messages.select_related("case").order_by("-created_at", "-pk")[:limit]
    return messages.count(), list(latest)
