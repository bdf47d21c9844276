"""Support's sections of the customer's file (core.contact_file): their cases, and what they
were sent about them."""

from datetime import datetime

from django.utils.translation import gettext_lazy as _
from django.utils.translation import npgettext

from core.contact_file import FileRow, FileSection, by_contact, contact_file_section, shown_at
from core.models import Contact
from support.models import Case
from support.selectors import contact_case_messages_file, contact_cases_file


@contact_file_section(position=40, visible_with=Case)
def cases(contact: Contact, now: datetime, limit: int) -> FileSection:
    total, open_, latest = contact_cases_file(contact=contact, limit=limit)
    return FileSection(
        key="cases",
        title=_("Cases"),
        total=total,
        note=npgettext("cases", "%(n)d open", "%(n)d open", open_) % {"n": open_},
        columns=[_("reference"), _("subject"), _("state"), _("created")],
        rows=[
            FileRow(
                c,
                [c.reference, c.subject, c.get_state_display(), shown_at(c.created_at, contact)],
            )
            for c in latest
        ],
        empty=_("No cases yet."),
        list_model=Case,
        list_query=by_contact(contact),
        add_model=Case,
        add_label=_("New case"),
    )


@contact_file_section(position=72, visible_with=Case)
def case_messages(contact: Contact, now: datetime, limit: int) -> FileSection:
    """What the customer was sent about their cases (as on the case's own page); each row links
    to its case."""
    total, latest = contact_case_messages_file(contact=contact, limit=limit)
    return FileSection(
        key="case_messages",
        title=_("Case messages"),
        total=total,
        columns=[_("case"), _("message"), _("sent to"), _("status"), _("sent")],
        rows=[
            FileRow(
                m.case,
                [
                    m.case.reference,
                    m.get_kind_display(),
                    f"{m.get_channel_display()} {m.masked_destination}".strip(),
                    m.get_status_display(),
                    shown_at(m.sent_at, contact),
                ],
            )
            for m in latest
        ],
        empty=_("No message about a case was sent to this contact."),
    )
