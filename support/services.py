"""Writes of the support app: opening cases, moving them through their states, comments.

Every state change locks the case row first (`select_for_update`) and re-reads it, so a rule is
checked against the state that is true now, not the one a caller saw earlier. A customer acts
only on their own cases: each service given a `contact` checks it here, on the row it locked
(`core.identity.check_owner`); the tools pass the identified contact and check nothing.
"""

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.contrib.auth.base_user import AbstractBaseUser
from django.core.mail import EmailMessage
from django.db import connection, transaction
from django.template.loader import render_to_string
from django.utils import timezone, translation
from django.utils.translation import gettext_lazy as _

from core.errors import Conflict, NotInCompany, ValidationFailed
from core.idempotency import Intent, intent_since, once_per_intent
from core.identity import check_owner
from core.jobs import task_named
from core.mail import smtp_error_is_transient, smtp_error_summary
from core.models import Company, Contact, Conversation, StaffMembership
from core.reasons import reason_checked
from core.references import (
    insert_unless_reference_taken,
    insert_with_fresh_reference,
    reference_taken,
    reference_unique_fields,
)
from core.sql import insert_unless_conflict
from core.states import state_shown
from core.transactions import one_at_a_time
from support.case_messages import case_message_after
from support.guards import case_check_open, case_check_owner, case_guard, case_lock
from support.models import CUSTOMER_STATE_LABELS, Case, CaseComment, CaseMessage, SupportSettings
from support.selectors import (
    case_open_recent,
    case_open_recent_where,
    case_staff_recipients,
    case_unanswered_since_resolved,
    support_auto_close_days,
)

logger = logging.getLogger("garante.support")


@transaction.atomic
def support_settings_get(*, company: Company) -> SupportSettings:
    """The company's support settings, created with the defaults the first time."""
    support_settings, _created = SupportSettings.objects.get_or_create(company=company)
    return support_settings


def case_open(
    *,
    company: Company,
    contact: Contact,
    subject: str,
    description: str,
    channel: str = Case.Channel.AGENT,
    priority: str = Case.Priority.NORMAL,
    related_case: Case | None = None,
    conversation: Conversation | None = None,
    assignee: AbstractBaseUser | None = None,
) -> Case:
    """Open a case for a contact; staff hear about it by email once it is committed.

    `related_case` is an earlier case of the same contact (typically a closed one the customer
    still has trouble with: closed cases are never reopened).

    Not atomic of its own: every check comes before its one write, the INSERT, whose
    reference collision is retried without an error (`insert_unless_reference_taken`), so a
    savepoint around the whole would guard nothing, and inside a tool call's transaction it
    would cost two statements.
    """
    case = _case_open(
        company=company,
        contact=contact,
        subject=subject,
        description=description,
        channel=channel,
        priority=priority,
        related_case=related_case,
        conversation=conversation,
        assignee=assignee,
    )
    assert case is not None  # nothing stands in its way without `unless_open_since`
    return case


class _CaseStands(Exception):
    """The INSERT wrote nothing: a case of the customer's intent stands (`_case_open`)."""


def _case_open(
    *,
    company: Company,
    contact: Contact,
    subject: str,
    description: str,
    channel: str = Case.Channel.AGENT,
    priority: str = Case.Priority.NORMAL,
    related_case: Case | None = None,
    conversation: Conversation | None = None,
    assignee: AbstractBaseUser | None = None,
    unless_open_since: datetime | None = None,
) -> Case | None:
    """`case_open`; with `unless_open_since`, None, having written and told nothing, when the
    contact has a case the agent opened since then that is still open (`case_open_recent`).
    On PostgreSQL that is looked for by the INSERT itself (WHERE NOT EXISTS), so a first case
    costs no statement more: call it under the intent's lock (`case_open_once`)."""
    subject, description = subject.strip(), description.strip()
    if not subject:
        raise ValidationFailed(
            _("Indique en pocas palabras de qué trata el caso."), code="subject_required"
        )
    if not description:
        raise ValidationFailed(
            _("Describa el problema para poder abrir el caso."), code="description_required"
        )
    _check_lengths(subject=subject, description=description)
    NotInCompany.check(
        contact.company_id, company.pk, _("No encontré ese contacto."), code="contact_not_found"
    )
    if related_case is not None:
        NotInCompany.check(
            related_case.company_id, company.pk, _("No encontré ese caso."), code="case_not_found"
        )
        check_owner(contact=contact, owner_id=related_case.contact_id)
    if assignee is not None:
        _check_staff_of(company=company, user=assignee)
    case = Case(
        company=company,
        contact=contact,
        subject=subject,
        description=description,
        channel=channel,
        priority=priority,
        related_case=related_case,
        conversation=conversation,
        assignee=assignee,
    )
    insert = insert_unless_reference_taken
    if unless_open_since is not None and connection.vendor != "postgresql":
        # Write transactions run one at a time there: a look of its own is as good.
        if case_open_recent(company=company, contact=contact, since=unless_open_since):
            return None
    elif unless_open_since is not None:
        insert = _insert_unless_open_since(company, contact, unless_open_since)
    try:
        insert_with_fresh_reference(case, prefix=Case.REFERENCE_PREFIX, insert=insert)
    except _CaseStands:
        return None
    _notify_staff_on_commit(case_id=case.pk)
    return case


def _insert_unless_open_since(
    company: Company, contact: Contact, since: datetime
) -> Callable[[Case], bool]:
    """An `insert` for `insert_with_fresh_reference` (PostgreSQL) that writes nothing and
    raises _CaseStands when a case of `case_open_recent` stands, looked for by the INSERT
    itself; a taken reference writes nothing and is drawn again."""
    stands = case_open_recent_where(company=company, contact=contact, since=since)

    def insert(case: Case) -> bool:
        if insert_unless_conflict(case, unique=reference_unique_fields(Case), unless_exists=stands):
            return True
        if reference_taken(case):
            return False
        raise _CaseStands

    return insert


def case_open_once(
    *,
    company: Company,
    contact: Contact,
    subject: str,
    description: str,
    related_case: Case | None = None,
    conversation: Conversation | None = None,
    new_case: bool = False,
    now: datetime | None = None,
    held: bool = False,
) -> Case:
    """A customer's case (`case_open`), unless it may duplicate one: free text is never an
    intent, so any case of the same customer opened by the agent (from any conversation)
    within the company's window and still open makes this one a possible duplicate,
    CONFLICT `possible_duplicate` naming that case (reference, subject), and nothing is
    opened or told to staff. The agent then adds a
    comment to that case, or says it is another problem with `new_case` (which, like no
    window, opens one every time). One at a time per customer (core.idempotency.intent), so
    calls at once open one case: under the intent's lock, which the caller says it `held`
    (the tool API's read of the conversation took it: ctx.customer_intent_held) or which is
    taken here, the INSERT opens the case unless one stands (no statement of its own)."""
    now = now or timezone.now()
    since = intent_since(company, "open_case", now)

    def make(unless_open_since: datetime | None) -> Case | None:
        return _case_open(
            company=company,
            contact=contact,
            subject=subject,
            description=description,
            related_case=related_case,
            conversation=conversation,
            unless_open_since=unless_open_since,
        )

    if since is None or new_case:
        case = make(None)
        assert case is not None
        return case
    done = once_per_intent(
        Intent.of("open_case", company=company, contact=contact),
        find=lambda: case_open_recent(company=company, contact=contact, since=since),
        make=lambda: make(since),
        held=held,
        make_looks=True,
    )
    if done.already_done:
        raise _possible_duplicate(done.record)
    return done.record


def _possible_duplicate(case: Case) -> Conflict:
    return Conflict(
        _(
            "Ya tiene un caso abierto hace poco: «%(subject)s» (%(reference)s). Si es el mismo "
            "problema, lo añadimos a ese caso; si es otro, lo abrimos como un caso nuevo."
        )
        % {"subject": case.subject, "reference": case.reference},
        code="possible_duplicate",
        case=case.reference,
        subject=case.subject,
        **state_shown(case.state, CUSTOMER_STATE_LABELS),
    )


@transaction.atomic
def case_update(
    *,
    case: Case,
    priority: str,
    assignee: AbstractBaseUser | None,
    internal_notes: str,
    subject: str | None = None,
) -> Case:
    """Staff triage: priority, assignee, internal notes (and a clearer subject)."""
    case = case_lock(case)
    if assignee is not None:
        _check_staff_of(company=case.company, user=assignee)
    if priority not in Case.Priority.values:
        raise ValidationFailed(code="invalid_priority")
    case.priority = priority
    case.assignee = assignee
    case.internal_notes = internal_notes
    if subject is not None and subject.strip():
        case.subject = subject.strip()[:200]
    case.save(update_fields=["priority", "assignee", "internal_notes", "subject", "updated_at"])
    return case


@transaction.atomic
def case_comment_add(
    *,
    case: Case,
    body: str,
    author_contact: Contact | None = None,
    author_user: AbstractBaseUser | None = None,
    public: bool = True,
) -> CaseComment:
    """Add a comment from the customer or from staff.

    A closed case takes no comments. A customer's comment is always public, moves a case that
    was waiting on them back to in progress, and is emailed to staff after commit. A staff
    member's public comment is a reply the customer is sent (support.case_messages): its
    `customer_message` says whether it could be, and why not.
    """
    if (author_contact is None) == (author_user is None):
        raise ValueError("a comment has exactly one author: a contact or a staff user")
    body = body.strip()
    if not body:
        raise ValidationFailed(_("El comentario está vacío."), code="comment_empty")
    if len(body) > 4000:
        raise ValidationFailed(
            _("El comentario es demasiado largo (máximo 4000 caracteres)."), code="comment_too_long"
        )
    case = case_lock(case)
    case_check_owner(author_contact, case)
    case_check_open(case)
    if author_contact is not None and case.state == Case.State.WAITING_CUSTOMER:
        case.resume(description="customer answered")
        case.save(update_fields=["state", "updated_at"])
    comment = CaseComment.objects.create(
        case=case,
        author_contact=author_contact,
        author_user=author_user,
        body=body,
        public=True if author_contact is not None else public,
    )
    if author_contact is not None:
        _notify_staff_on_commit(case_id=case.pk, comment_id=comment.pk)
    elif comment.public:
        case_message_after(case, CaseMessage.Kind.REPLY, comment=comment)
    return comment


# Staff transitions (admin buttons). `by` is the staff user, recorded in the history.


@transaction.atomic
def case_start(*, case: Case, by: AbstractBaseUser | None = None) -> Case:
    return _transition(case, "start", by=by)


@transaction.atomic
def case_wait_for_customer(*, case: Case, by: AbstractBaseUser | None = None) -> Case:
    return _transition(case, "wait_for_customer", by=by)


@transaction.atomic
def case_resume(*, case: Case, by: AbstractBaseUser | None = None) -> Case:
    return _transition(case, "resume", by=by)


@transaction.atomic
def case_resolve(*, case: Case, by: AbstractBaseUser | None = None, reason: str = "") -> Case:
    """in_progress or waiting_customer -> resolved; the customer is told (support.case_messages),
    with staff's resolution note (`reason`, plain text, core.reasons, kept in the history too)
    when there is one, and has the company's auto-close period to say it is not fixed."""
    reason = reason_checked(reason)
    case = _transition(case, "resolve", by=by, description=reason or None)
    case_message_after(case, CaseMessage.Kind.RESOLVED, reason=reason)
    return case


@transaction.atomic
def case_close(
    *,
    case: Case,
    by: AbstractBaseUser | None = None,
    contact: Contact | None = None,
    reason: str = "",
    authorize: Callable[[], None] | None = None,
) -> Case:
    """resolved -> closed: the customer (`contact`) confirmed the fix, or staff close it,
    giving a `reason` (plain text, core.reasons) kept in the history. A close by staff (the
    admin, the integration API) is told to the customer with the reason
    (support.case_messages); the customer closing it themselves is told nothing more.
    `authorize`, if given, runs once the case may be closed, before it is (the customer's
    confirmation)."""
    reason = reason_checked(reason)
    description = "customer confirmed the fix" if contact is not None else reason or None
    case = _transition(
        case, "close", by=by, contact=contact, description=description, authorize=authorize
    )
    if contact is None:
        case_message_after(case, CaseMessage.Kind.CLOSED, reason=reason)
    return case


@transaction.atomic
def case_reopen(
    *,
    case: Case,
    by: AbstractBaseUser | None = None,
    contact: Contact | None = None,
    message: str = "",
) -> Case:
    """resolved -> in_progress: it is not fixed. The customer's explanation becomes a comment."""
    description = "customer: not fixed" if contact is not None else None
    case = _transition(case, "reopen", by=by, contact=contact, description=description)
    if contact is not None and message.strip():
        case_comment_add(case=case, body=message, author_contact=contact)
    return case


@transaction.atomic
def case_close_if_unanswered(*, case_id: int, now: datetime | None = None) -> bool:
    """Close a resolved case whose customer stayed silent past the company's period.

    Re-checked under the row lock: the customer may have answered since the sweep listed it.
    """
    now = now or timezone.now()
    case = Case.objects.select_for_update().filter(pk=case_id).first()
    if case is None or case.state != Case.State.RESOLVED or case.resolved_at is None:
        return False
    cutoff = now - timedelta(days=support_auto_close_days(company_id=case.company_id))
    if case.resolved_at > cutoff:
        return False
    if not case_unanswered_since_resolved(Case.objects.filter(pk=case.pk)).exists():
        return False
    case.close(description="closed automatically: no answer from the customer")
    case.closed_at = now
    case.save(update_fields=["state", "closed_at", "updated_at"])
    return True


def case_staff_notify(*, case_id: int, comment_id: int | None = None) -> int:
    """Email staff about a new case, or about a customer's comment; returns messages sent.

    Run by the Celery task after commit, and again by the sweep for a notice that never went
    out (`case_staff_notices_pending`). Safe to repeat, and to run twice at once: a notice
    already sent is not sent again, and a second delivery of one notice waits for the first
    (only a crash between the send and its commit sends it twice). Internal and staff
    comments are never mailed.

    A transient mail error (a 4yz reply, the network) is raised, for the task to retry; a
    refusal for good (5yz) settles the notice with nothing sent, and is logged.
    """
    notice_model = Case if comment_id is None else CaseComment
    with one_at_a_time(notice_model, case_id if comment_id is None else comment_id):
        return _staff_notify(case_id=case_id, comment_id=comment_id)


def _staff_notify(*, case_id: int, comment_id: int | None) -> int:
    case = (
        Case.objects.select_related("company", "contact", "assignee", "related_case")
        .filter(pk=case_id)
        .first()
    )
    if case is None:
        return 0
    comment = None
    if comment_id is not None:
        comment = CaseComment.objects.filter(pk=comment_id, case=case).first()
        if comment is None or not comment.by_customer or comment.staff_notified_at is not None:
            return 0
    elif case.staff_notified_at is not None:
        return 0
    notice: Case | CaseComment = comment or case
    recipients = case_staff_recipients(case=case)
    if not recipients:
        # Nobody to tell: settled as it is, or the sweep would ask again all day.
        logger.warning("case %s: no staff member with an email to notify", case.reference)
        _staff_notified(notice)
        return 0
    with translation.override(case.company.language):
        if comment is None:
            subject = _("[%(reference)s] New case: %(subject)s")
            template = "support/email/case_opened.txt"
        else:
            subject = _("[%(reference)s] Customer comment: %(subject)s")
            template = "support/email/customer_comment.txt"
        subject = str(subject) % {"reference": case.reference, "subject": case.subject}
        body = render_to_string(template, {"case": case, "comment": comment})
    # One line only: a subject with a newline is refused by Django's mail.
    subject = " ".join(subject.split())[:200]
    try:
        sent = _staff_email(subject=subject, body=body, recipients=recipients).send()
    except OSError as exc:  # SMTPException is one
        if smtp_error_is_transient(exc):
            raise  # the task retries it; past its retries, the sweep enqueues it again
        # Refused for good (550 no such mailbox, 554 rejected): sending it again cannot
        # help, so the notice is settled like one nobody can receive, and the sweep skips it.
        error = smtp_error_summary(exc)
        logger.error(
            "case %s: staff email refused for good (%s); not retried", case.reference, error
        )
        _staff_notified(notice, error=error)
        return 0
    _staff_notified(notice)
    return sent


def _staff_email(*, subject: str, body: str, recipients: list[str]) -> EmailMessage:
    """One message, so one SMTP transaction: it goes to all or (on an error) to none, and a
    retry sends no one a second copy. Several recipients are Bcc: a staff member must not
    learn the others' addresses (an assignee who left stays on old cases' headers)."""
    if len(recipients) == 1:
        return EmailMessage(subject=subject, body=body, to=recipients)
    return EmailMessage(
        subject=subject,
        body=body,
        bcc=recipients,
        headers={"To": "undisclosed-recipients:;"},
    )


def _staff_notified(notice: Case | CaseComment, *, error: str = "") -> None:
    # Settles the notice: sent, nobody to tell, or refused for good (`error`, shown to staff);
    # the sweep skips it. An UPDATE of these columns only: telling staff is not a change of
    # the case (updated_at).
    type(notice).objects.filter(pk=notice.pk, staff_notified_at__isnull=True).update(
        staff_notified_at=timezone.now(), staff_notice_error=error
    )


# Helpers of the services above.


def _transition(
    case: Case,
    name: str,
    *,
    by: AbstractBaseUser | None,
    contact: Contact | None = None,
    description: str | None = None,
    authorize: Callable[[], None] | None = None,
) -> Case:
    """Lock, check owner and that the transition is allowed now, `authorize` it if given,
    apply it, stamp, save."""
    case = case_lock(case)
    case_check_owner(contact, case)
    method = getattr(case, name)
    case_guard(case, method)
    if authorize is not None:
        authorize()
    method(by=by, description=description)
    now = timezone.now()
    if case.state == Case.State.RESOLVED:
        case.resolved_at = now
    elif case.state == Case.State.CLOSED:
        case.closed_at = now
    else:
        # Back to work: the auto-close clock starts again at the next resolution.
        case.resolved_at = None
    case.save(update_fields=["state", "resolved_at", "closed_at", "updated_at"])
    return case


def _check_lengths(*, subject: str, description: str) -> None:
    if len(subject) > 200:
        raise ValidationFailed(
            _("El asunto es demasiado largo (máximo 200 caracteres)."), code="subject_too_long"
        )
    if len(description) > 4000:
        raise ValidationFailed(
            _("La descripción es demasiado larga (máximo 4000 caracteres)."),
            code="description_too_long",
        )


def _check_staff_of(*, company: Company, user: AbstractBaseUser) -> None:
    if not StaffMembership.objects.filter(company=company, user_id=user.pk).exists():
        raise ValidationFailed(
            _("That user is not staff of this company."), code="assignee_not_staff"
        )


def _notify_staff_on_commit(*, case_id: int, comment_id: int | None = None) -> None:
    """Email staff after commit, so a rolled-back case or comment never reaches anyone.

    robust=True: a broker outage after the commit must not turn the customer's already saved
    case into an error answer (the retry would replay the success anyway); it is logged, and
    the notice, still unsent on its row, is enqueued again by the beat sweep
    (`case_staff_notices_resend`).
    """

    # A plain function, not a partial: Django's robust on_commit logs the callable's
    # __qualname__, which a partial lacks, so a broker outage would escape instead of logging.
    def notify() -> None:
        task_named("support.tasks.case_notify_staff").delay(case_id=case_id, comment_id=comment_id)

    transaction.on_commit(notify, robust=True)
