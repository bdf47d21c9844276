"""The customer's file: what a contact's admin page shows beside the form, one section per kind
of record (appointments, quotes, cases, conversations, messages ...), each with its count.

Each app contributes its sections from its own `contact_file` module (found by autodiscovery,
core.apps) with `@contact_file_section(position, visible_with=Model)`; the admin
(core.admin.contact_file) calls a section only for staff whose role in the contact's company
may view `visible_with`, and adds the links. This module holds the registry, the shapes a
section returns, and core's own sections (conversations, codes, security events).
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Model
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from core.dashboard import local_datetime
from core.models import (
    Contact,
    Conversation,
    OutboxMessage,
    SecurityEvent,
    VerificationChallenge,
)
from core.selectors import (
    contact_codes_file,
    contact_conversations_file,
    contact_outbox_file,
    contact_security_events_file,
)

# Rows a section lists (per group, for a section in groups); the count covers them all.
FILE_ROWS = 5


@dataclass
class FileRow:
    """One record of the file. `record` is what the row links to (its admin page); `cells`
    are the columns' texts, the first shown as the link."""

    record: Model
    cells: list[str]
    group: str = ""  # a heading the rows fall under ("Upcoming", "Past or cancelled")


@dataclass
class FileSection:
    """A smart button and its section: the count of every record of the kind, the latest
    (or next) few, the filtered admin list of them all, and the action that adds one."""

    key: str
    title: str
    total: int
    columns: list[str]
    rows: list[FileRow] = field(default_factory=list)
    note: str = ""  # what the count hides ("2 upcoming", "1 open")
    empty: str = ""
    # The admin list of them all: `list_model`'s, filtered by `list_query` (the contact's
    # lookup, as Django's own related-object popups spell it, and any more).
    list_model: type[Model] | None = None
    list_query: dict[str, str] = field(default_factory=dict)
    # The action starting from the file: `add_model`'s add form, the contact preselected.
    add_model: type[Model] | None = None
    add_label: str = ""


# A section: given the contact, the instant and how many rows, its FileSection, or None when
# it does not apply to this contact (a sandbox's outbox for a production company's customer).
SectionFunction = Callable[[Contact, datetime, int], FileSection | None]


@dataclass(frozen=True)
class _Registered:
    position: int
    visible_with: type[Model]
    function: SectionFunction


_SECTIONS: dict[str, _Registered] = {}


def contact_file_section(
    position: int, *, visible_with: type[Model]
) -> Callable[[SectionFunction], SectionFunction]:
    """Show the decorated section in the contact's file, lower positions first, to staff who
    may view `visible_with` (its admin's view permission in the contact's company)."""

    def register(section: SectionFunction) -> SectionFunction:
        key = f"{section.__module__}.{section.__qualname__}"
        _SECTIONS[key] = _Registered(position, visible_with, section)
        return section

    return register


def sections_in_order() -> list[tuple[type[Model], SectionFunction]]:
    ordered = sorted(_SECTIONS.values(), key=lambda s: s.position)
    return [(s.visible_with, s.function) for s in ordered]


def shown_at(instant: datetime | None, contact: Contact) -> str:
    """An instant as the contact's company reads it (its zone, the locale's short format)."""
    return local_datetime(instant, contact.company)


def by_contact(contact: Contact, lookup: str = "contact") -> dict[str, str]:
    """The filter of an admin list to one contact's records (`lookup` leads to the contact)."""
    return {f"{lookup}__id__exact": str(contact.pk)}


@contact_file_section(position=60, visible_with=Conversation)
def conversations(contact: Contact, now: datetime, limit: int) -> FileSection:
    total, latest = contact_conversations_file(contact=contact, limit=limit)
    return FileSection(
        key="conversations",
        title=_("Conversations"),
        total=total,
        columns=[_("conversation"), _("identified at"), _("last seen")],
        rows=[
            FileRow(
                c,
                [
                    c.external_id,
                    shown_at(c.identified_at, contact),
                    shown_at(c.last_seen_at, contact),
                ],
            )
            for c in latest
        ],
        empty=_("No conversation with the agent yet."),
        list_model=Conversation,
        list_query=by_contact(contact),
    )


@contact_file_section(position=80, visible_with=VerificationChallenge)
def codes(contact: Contact, now: datetime, limit: int) -> FileSection:
    total, latest = contact_codes_file(contact=contact, limit=limit)
    return FileSection(
        key="codes",
        title=_("Verification codes"),
        total=total,
        columns=[_("created"), _("purpose"), _("sent to"), _("status"), _("delivery")],
        rows=[
            FileRow(
                c,
                [
                    shown_at(c.created_at, contact),
                    c.get_purpose_display(),
                    f"{c.get_channel_display()} {c.masked_destination}".strip(),
                    c.get_status_display(),
                    c.get_delivery_status_display(),
                ],
            )
            for c in latest
        ],
        empty=_("No verification code was sent to this contact."),
        list_model=VerificationChallenge,
        list_query=by_contact(contact),
    )


@contact_file_section(position=90, visible_with=SecurityEvent)
def security_events(contact: Contact, now: datetime, limit: int) -> FileSection:
    total, latest = contact_security_events_file(contact=contact, limit=limit)
    return FileSection(
        key="security",
        title=_("Security events"),
        total=total,
        columns=[_("when"), _("kind"), _("conversation")],
        rows=[
            FileRow(
                e, [shown_at(e.created_at, contact), e.get_kind_display(), e.conversation_key[:40]]
            )
            for e in latest
        ],
        empty=_("No security event names this contact."),
        list_model=SecurityEvent,
        list_query=by_contact(contact),
    )


@contact_file_section(position=85, visible_with=OutboxMessage)
def sandbox_outbox(contact: Contact, now: datetime, limit: int) -> FileSection | None:
    """A sandbox sends nothing for real: every message to its customers, whatever sent it, is
    kept in its outbox, which is then the whole of what the customer would have received."""
    if not contact.company.is_sandbox:
        return None
    total, latest = contact_outbox_file(contact=contact, limit=limit)
    return FileSection(
        key="outbox",
        title=_("Sandbox outbox"),
        total=total,
        columns=[_("created"), _("channel"), _("to"), _("text")],
        rows=[
            FileRow(
                m,
                [
                    shown_at(m.created_at, contact),
                    m.get_channel_display(),
                    m.destination,
                    Truncator(m.subject or m.body).chars(80),
                ],
            )
            for m in latest
        ],
        empty=_("Nothing was kept for this contact's phone or email."),
        list_model=OutboxMessage,
        list_query={
            "destination__in": ",".join(d for d in (contact.phone, contact.email) if d) or "-"
        },
    )
