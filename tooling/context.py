"""What a tool handler knows about the call it serves."""

from dataclasses import dataclass, field
from functools import cache, cached_property

from django.db import connection

from core.models import Company, Contact, Conversation
from core.sql import column, insert_unless_conflict, selected


@dataclass
class CallMeta:
    """The Gateway's `_meta` keys (or their HTTP header equivalents on REST surfaces)."""

    conversation_id: str | None = None
    idempotency_key: str | None = None
    fault: str | None = None


@dataclass
class ToolContext:
    company: Company
    meta: CallMeta
    surface: str = "mcp"
    extra: dict = field(default_factory=dict)
    # What the handler's answer shows, for the exposure ledger (tooling.ledger.ledger_show).
    shown: list = field(default_factory=list, repr=False)
    _conversation_inserted: bool = field(default=False, init=False, repr=False)

    @cached_property
    def conversation(self) -> Conversation:
        """The conversation of this call, created on first sight.

        Fetched with its identified contact (every sensitive tool reads it) and handed this
        call's company, so neither costs a query of its own.
        """
        conversation = _conversation_read(self.company, self.meta.conversation_id)
        if conversation is None:
            conversation, inserted = _conversation_create(self.company, self.meta.conversation_id)
            self._conversation_inserted = inserted and connection.in_atomic_block
        conversation.company = self.company
        return conversation

    @property
    def conversation_is_new(self) -> bool:
        """Whether this call inserted its conversation inside a transaction (a write tool's):
        until that transaction ends the row is this call's alone and holds what was inserted.
        Ask within that transaction only; the flag is not cleared when it ends."""
        return self.conversation is not None and self._conversation_inserted


@cache
def _conversation_sql(vendor: str) -> str:
    """select_related("contact") of the conversation of (company, external id), as SQL built
    once per process (`vendor` keys the quoting)."""
    quote = connection.ops.quote_name
    table, contacts = quote(Conversation._meta.db_table), quote(Contact._meta.db_table)
    return (
        f"SELECT {selected(Conversation).columns}, {selected(Contact).columns} FROM {table} "
        f"LEFT JOIN {contacts} ON {contacts}.{column(Contact, 'id')} "
        f"= {table}.{column(Conversation, 'contact')} "
        f"WHERE {table}.{column(Conversation, 'company')} = %s "
        f"AND {table}.{column(Conversation, 'external_id')} = %s"
    )


def _conversation_read(company: Company, external_id: str) -> Conversation | None:
    """The conversation with its identified contact, or None. As select_related("contact")
    would read it, without the ORM compiling the query on every call: its hottest read."""
    with connection.cursor() as cursor:
        cursor.execute(_conversation_sql(connection.vendor), [company.pk, external_id])
        row = cursor.fetchone()
    if row is None:
        return None
    conversation_columns = selected(Conversation)
    split = len(conversation_columns.fields)
    conversation = conversation_columns.instance(row[:split])
    contact = None
    if conversation.contact_id is not None:
        contact = selected(Contact).instance(row[split:])
    Conversation.contact.field.set_cached_value(conversation, contact)
    return conversation


def _conversation_create(company: Company, external_id: str) -> tuple[Conversation, bool]:
    """Insert the conversation, or read the one a concurrent call of it just committed; and
    whether it was inserted here.

    INSERT ... ON CONFLICT DO NOTHING waits on the unique index for a twin's uncommitted insert
    like get_or_create's INSERT does, but a conflict is an empty result instead of an error, so
    no savepoint is needed to keep the enclosing transaction usable.
    """
    if connection.vendor != "postgresql":
        return Conversation.objects.get_or_create(company=company, external_id=external_id)
    conversation = Conversation(company=company, external_id=external_id)
    if insert_unless_conflict(conversation, unique=("company", "external_id")):
        return conversation, True
    twin = Conversation.objects.select_related("contact").get(
        company=company, external_id=external_id
    )
    return twin, False
