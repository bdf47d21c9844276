"""Support tools for the Gateway: thin wrappers over support selectors and services.

Every tool takes the identifier the customer identified with; write tools act only on cases
this conversation has seen (the exposure ledger) and that belong to that customer. Outputs
carry public references and what the customer may read: never internal comments, priority,
internal notes, other customers' data or staff beyond a first name.
"""

from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from pydantic import Field

from core.errors import NotFound, ValidationFailed
from core.states import state_filter, state_shown
from support.models import CUSTOMER_STATE_LABELS, Case, CaseComment
from support.selectors import case_get, case_list, case_owner_id, case_public_comments
from support.services import case_close, case_comment_add, case_open_once, case_reopen
from tooling.toolkit import (
    CONFIRMATION_HELP,
    ConfirmationCode,
    Cursor,
    Identifier,
    LedgerEntry,
    LedgerKind,
    PagedListOutput,
    ToolContext,
    ToolInput,
    ToolOutput,
    listing,
    page,
    tool,
)

# Long texts are clipped so a case with its latest comments fits the 3,000-character cap.
DESCRIPTION_CHARS = 500
COMMENT_CHARS = 280
COMMENTS_SHOWN = 5

CaseReference = Field(
    min_length=2,
    max_length=32,
    description="The case reference (e.g. CS-7K2F9Q), or its last characters, as shown before.",
)
Message = Field(min_length=1, max_length=4000, description="The customer's words.")


class OpenCaseIn(ToolInput):
    identifier: Identifier
    subject: str = Field(min_length=1, max_length=200, description="A short title.")
    description: str = Field(min_length=1, max_length=4000, description="What happens.")
    related_case: str | None = Field(
        default=None,
        max_length=32,
        description="An earlier case of this customer this one follows up (a closed case "
        "cannot be reopened: open a new one linked to it).",
    )
    new_case: bool = Field(
        default=False,
        description="Only after a possible_duplicate answer, when the customer confirms this "
        "is another problem than the case it named: opens a new case anyway.",
    )


class ListMyCasesIn(ToolInput):
    identifier: Identifier
    state: state_filter(CUSTOMER_STATE_LABELS) | None = Field(
        default=None, description="Only cases in this state (Spanish labels accepted too)."
    )
    limit: int = Field(default=10, ge=1, le=20, description="Maximum number of cases.")
    cursor: str | None = Cursor


class CaseIn(ToolInput):
    identifier: Identifier
    case: str = CaseReference


class ConfirmCaseResolvedIn(CaseIn):
    confirmation_code: ConfirmationCode


class CaseMessageIn(CaseIn):
    message: str = Message


class CaseOut(ToolOutput):
    reference: str = Field(description="The case's reference.")
    subject: str
    state: str = Field(description="Machine state.")
    state_label: str = Field(description="The state as the customer is told it.")
    opened_at: str = Field(description="Local date and time, YYYY-MM-DD HH:MM.")
    updated_at: str = Field(description="Local date and time, YYYY-MM-DD HH:MM.")


class OpenedCaseOut(CaseOut):
    related_case: str | None = Field(description="The earlier case this one follows up.")


class CasesOut(PagedListOutput):
    items: list[CaseOut]


class CaseMessageOut(ToolOutput):
    from_: str = Field(alias="from", description="Who wrote it: the customer or staff's name.")
    at: str = Field(description="Local date and time, YYYY-MM-DD HH:MM.")
    text: str


class CaseDetailOut(CaseOut):
    description: str
    handled_by: str | None = Field(description="First name of who handles it.")
    related_case: str | None
    resolved_at: str | None = Field(description="Local date and time it was resolved.")
    messages: list[CaseMessageOut] = Field(description="The latest messages, oldest first.")
    earlier_messages: bool = Field(description="Whether older messages exist.")


class CommentedCaseOut(CaseOut):
    message_added: bool


@tool(
    name="open_case",
    title="Open a support case",
    description=(
        "Opens a support case for the identified customer and answers its reference. "
        "To follow up a closed case, pass its reference as related_case. If the customer "
        "opened a case a short while ago that is still open, the answer is the error "
        "possible_duplicate naming it (case, subject) and nothing is opened: ask the customer; "
        "for the same problem use add_case_comment on that case (get_case shows it), for "
        "another one call again with new_case: true."
    ),
    input=OpenCaseIn,
    output=OpenedCaseOut,
    write=True,
    identified=True,
    step_up=True,
    customer_intent=True,  # case_open_once's intent: the customer alone
)
def open_case(ctx: ToolContext, params: OpenCaseIn) -> dict:
    related = _seen_case(ctx, params.related_case) if params.related_case else None
    case = case_open_once(
        company=ctx.company,
        contact=ctx.contact,
        subject=params.subject,
        description=params.description,
        related_case=related,
        conversation=ctx.conversation,
        new_case=params.new_case,
        held=ctx.customer_intent_held,
    )
    ctx.show(LedgerKind.CASE, [_ledger_entry(case)])
    return _case_summary(ctx, case) | {"related_case": related.reference if related else None}


@tool(
    name="list_my_cases",
    title="List my support cases",
    description=(
        "Lists the identified customer's support cases, newest first, with their state and "
        "state_label (what to tell the customer)."
    ),
    input=ListMyCasesIn,
    output=CasesOut,
    identified=True,
    step_up=True,
)
def list_my_cases(ctx: ToolContext, params: ListMyCasesIn) -> dict:
    cases = page(
        case_list(company=ctx.company, contact=ctx.contact, state=params.state),
        params.limit,
        params.cursor,
    )
    ctx.show(LedgerKind.CASE, [_ledger_entry(case) for case in cases.rows])
    return listing(
        [_case_summary(ctx, case) for case in cases.rows],
        has_more=cases.has_more,
        start=cases.start,
    )


@tool(
    name="get_case",
    title="Show a support case",
    description=(
        "Shows one of the identified customer's cases: state, description, who handles it "
        "and the latest messages the customer can read."
    ),
    input=CaseIn,
    output=CaseDetailOut,
    identified=True,
    step_up=True,
)
def get_case(ctx: ToolContext, params: CaseIn) -> dict:
    case = _case_for_reading(ctx, params.case)
    comments, more = case_public_comments(case=case, limit=COMMENTS_SHOWN)
    related = case.related_case
    ctx.show(LedgerKind.CASE, [_ledger_entry(c) for c in (case, related) if c is not None])
    return _case_summary(ctx, case) | {
        "description": _clip(case.description, DESCRIPTION_CHARS),
        "handled_by": case.assignee.first_name or None if case.assignee else None,
        "related_case": related.reference if related else None,
        "resolved_at": _local(ctx, case.resolved_at),
        "messages": [_comment(ctx, comment) for comment in comments],
        "earlier_messages": more,
    }


@tool(
    name="add_case_comment",
    title="Add a message to a support case",
    description=(
        "Adds the customer's message to one of their cases. A closed case takes no messages: "
        "offer to open a new case linked to it."
    ),
    input=CaseMessageIn,
    output=CommentedCaseOut,
    write=True,
    identified=True,
    step_up=True,
)
def add_case_comment(ctx: ToolContext, params: CaseMessageIn) -> dict:
    case = _seen_case(ctx, params.case)
    comment = case_comment_add(case=case, body=params.message, author_contact=ctx.contact)
    return _case_summary(ctx, comment.case) | {"message_added": True}


@tool(
    name="confirm_case_resolved",
    title="Confirm a support case is solved",
    description=(
        "The customer confirms a resolved case is solved; the case is closed for good. "
        + CONFIRMATION_HELP
    ),
    input=ConfirmCaseResolvedIn,
    output=CaseOut,
    write=True,
    destructive=True,
    identified=True,
    step_up=True,
    confirmation=True,
)
def confirm_case_resolved(ctx: ToolContext, params: ConfirmCaseResolvedIn) -> dict:
    case = _seen_case(ctx, params.case)
    case = case_close(
        case=case,
        contact=ctx.contact,
        authorize=lambda: ctx.confirm(
            reference=case.reference,
            summary=_("cerrar su caso %(reference)s") % {"reference": case.reference},
        ),
    )
    return _case_summary(ctx, case)


@tool(
    name="report_case_not_fixed",
    title="Report a resolved case is not fixed",
    description=(
        "The customer says a resolved case is not actually fixed; it goes back to the team "
        "with the customer's explanation."
    ),
    input=CaseMessageIn,
    output=CaseOut,
    write=True,
    identified=True,
    step_up=True,
)
def report_case_not_fixed(ctx: ToolContext, params: CaseMessageIn) -> dict:
    case = _seen_case(ctx, params.case)
    case = case_reopen(case=case, contact=ctx.contact, message=params.message)
    return _case_summary(ctx, case)


# Reference resolution and output shaping shared by the tools above.


def _seen_case(ctx: ToolContext, given: str) -> Case:
    """A case this conversation was shown (or created); another customer's exact reference
    is PERMISSION. Whose it is, the service it goes to checks (given `contact`)."""
    entry = ctx.seen(
        LedgerKind.CASE,
        given,
        owner=lambda reference: case_owner_id(company=ctx.company, reference=reference),
    )
    return case_get(company=ctx.company, reference=entry.reference)


def _case_for_reading(ctx: ToolContext, given: str) -> Case:
    """A read may name any case by its full reference, or loosely one the conversation saw;
    the customer's own only (case_get checks it)."""
    try:
        return case_get(company=ctx.company, reference=given, contact=ctx.contact)
    except NotFound:
        pass
    try:
        entry = ctx.seen(LedgerKind.CASE, given)
    except ValidationFailed as error:
        if error.code != "reference_not_seen":
            raise
        raise NotFound(_("No encontré ese caso."), code="case_not_found") from None
    return case_get(company=ctx.company, reference=entry.reference, contact=ctx.contact)


def _ledger_entry(case: Case) -> LedgerEntry:
    return LedgerEntry(reference=case.reference, label=case.subject)


def _case_summary(ctx: ToolContext, case: Case) -> dict[str, Any]:
    return {
        "reference": case.reference,
        "subject": _clip(case.subject, 120),
        **state_shown(case.state, CUSTOMER_STATE_LABELS),
        "opened_at": _local(ctx, case.created_at),
        "updated_at": _local(ctx, case.updated_at),
    }


def _comment(ctx: ToolContext, comment: CaseComment) -> dict[str, Any]:
    if comment.by_customer:
        author = str(_("usted"))
    else:
        first_name = comment.author_user.first_name if comment.author_user else ""
        author = first_name or str(_("equipo de soporte"))
    return {
        "from": author,
        "at": _local(ctx, comment.created_at),
        "text": _clip(comment.body, COMMENT_CHARS),
    }


def _local(ctx: ToolContext, moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return timezone.localtime(moment, ctx.company.tz).strftime("%Y-%m-%d %H:%M")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
