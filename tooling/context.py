"""What a tool handler knows about the call it serves, and what it may ask of the platform
(the identified customer, the step-up check, the exposure ledger)."""

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache, cached_property

from django.db import connection, transaction

from core.idempotency import (
    INTENT_BOUND,
    intent_lock_columns,
    intent_wait,
    intent_wait_bound,
    lock_base,
)
from core.identity import contact_for_conversation, require_step_up
from core.models import Company, Contact, Conversation
from core.sql import column, insert_unless_conflict, selected
from core.verification import ConfirmedAction, confirmation_require
from tooling.ledger import (
    LedgerEntry,
    LedgerKind,
    ledger_resolve,
    ledger_resolve_owned,
    ledger_show,
)


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
    # The step-up action the called tool declares (None: none), which require_step_up checks.
    step_up_action: str | None = None
    # What the handler's answer shows, for the exposure ledger (tooling.ledger.ledger_show).
    shown: list = field(default_factory=list, repr=False)
    # The operation of the called tool's intent when that intent is its customer alone (a tool
    # declared `customer_intent=True`): the conversation's read takes its lock.
    customer_intent: str | None = None
    # The customer whose intent's lock the conversation's read took, if it took one.
    _intent_held_for: int | None = field(default=None, init=False, repr=False)
    _conversation_inserted: bool = field(default=False, init=False, repr=False)
    _contact: Contact | None = field(default=None, init=False, repr=False)
    # Whether this call's step-up check ran (a deferred one is held to it: tooling.execution).
    step_up_checked: bool = field(default=False, init=False, repr=False)
    # A tool declared `confirmation=True`: its name (the action a policy may list) and the
    # code the call brought; whether the handler asked the confirmation (tooling.execution).
    confirmation_action: str | None = None
    confirmation_code: str | None = field(default=None, repr=False)
    confirmation_checked: bool = field(default=False, init=False, repr=False)

    @cached_property
    def conversation(self) -> Conversation:
        """The conversation of this call, created on first sight.

        Fetched with its identified contact (every sensitive tool reads it) and handed this
        call's company, so neither costs a query of its own.
        """
        base = None
        if (
            self.customer_intent is not None
            and connection.vendor == "postgresql"
            and not transaction.get_autocommit()
        ):
            base = lock_base(self.customer_intent, self.company.pk, {})
        conversation = _conversation_read(self.company, self.meta.conversation_id, base)
        if conversation is not None and base is not None:
            self._intent_held_for = conversation.contact_id
        if conversation is None:
            conversation, inserted = _conversation_create(self.company, self.meta.conversation_id)
            self._conversation_inserted = inserted and not transaction.get_autocommit()
        conversation.company = self.company
        return conversation

    @property
    def conversation_is_new(self) -> bool:
        """Whether this call inserted its conversation inside a transaction (a write tool's):
        until that transaction ends the row is this call's alone and holds what was inserted.
        Ask within that transaction only; the flag is not cleared when it ends."""
        return self.conversation is not None and self._conversation_inserted

    def conversation_held(self) -> Conversation:
        """The conversation of this call, held by the call's transaction until it ends, with
        its identified contact: inserted by it on first sight (`conversation_is_new`), or read
        under its row lock (FOR NO KEY UPDATE, which durable inserts referring to the row do
        not wait for). For a write that decides on the conversation's identity one call at a
        time (an identification): the INSERT comes first, so a new conversation costs one
        statement, and a concurrent twin's waits on it. On SQLite, whose write transactions
        run one at a time, and outside a transaction, it is `conversation`."""
        if connection.vendor != "postgresql" or transaction.get_autocommit():
            return self.conversation
        external_id = self.meta.conversation_id
        conversation = Conversation(company=self.company, external_id=external_id)
        inserted = insert_unless_conflict(conversation, unique=("company", "external_id"))
        if not inserted:
            conversation = (
                Conversation.objects.select_for_update(no_key=True, of=("self",))
                .select_related("contact")
                .get(company=self.company, external_id=external_id)
            )
            contact = conversation.contact
            if conversation.contact_id is not None and (
                contact is None or contact.pk != conversation.contact_id
            ):
                # The lock waited for a commit that changed the conversation's contact: the
                # row is re-read as it is now, the joined contact may be the one of before.
                conversation.contact = Contact.objects.get(pk=conversation.contact_id)
        conversation.company = self.company
        self.__dict__["conversation"] = conversation  # `conversation`, cached
        self._conversation_inserted = inserted
        return conversation

    @property
    def customer_intent_held(self) -> bool:
        """Whether this call holds the lock of its tool's intent (`customer_intent`) for
        `contact`, taken by the statement that read the conversation, until the call's
        transaction ends: the service then takes none (core.idempotency.once_per_intent's
        `held`). Ask after the identity check (a tool declared `identified=True`)."""
        return self._intent_held_for is not None and self._intent_held_for == self.contact.pk

    @property
    def contact(self) -> Contact:
        """The customer this conversation identified as, checked against the call's
        `identifier` before the handler runs (a tool declared `identified=True`)."""
        if self._contact is None:
            raise RuntimeError("ctx.contact is for tools declared with identified=True")
        return self._contact

    def identify(self, identifier: str) -> Contact:
        """Check `identifier` against the conversation's identified customer and keep them as
        `contact` (core.identity.contact_for_conversation: PERMISSION when it is not theirs).
        The platform calls it for a tool declared `identified=True`."""
        self._contact = contact_for_conversation(
            conversation=self.conversation, identifier=identifier
        )
        return self._contact

    def require_step_up(self) -> None:
        """PERMISSION `verification_required` when the company's policy lists this tool's
        step-up action and the conversation is not verified now. The platform asks it before
        the handler; a tool declared `step_up_deferred=True` asks it itself, where its own
        order needs (e.g. passed as a service's `authorize`)."""
        if self.step_up_action is None:
            raise RuntimeError("ctx.require_step_up is for tools declared with step_up")
        self.step_up_checked = True
        require_step_up(conversation=self.conversation, action=self.step_up_action)

    def confirm(self, *, reference: str, summary: str, **arguments: str | int) -> None:
        """The customer's own confirmation of this tool's action on `reference` (with the
        `arguments` that make it this action, e.g. a move's new start), when the company's
        policy asks it: the answered confirmation is used up, or the call's code checked and
        used, or a code is sent and PERMISSION `confirmation_required` raised
        (core.verification.confirmation). `summary` is what the customer's message says they
        confirm, in the company's language. Call it after the action's own guards and before
        its effect, inside the call's transaction (a service's `authorize`)."""
        if self.confirmation_action is None:
            raise RuntimeError("ctx.confirm is for tools declared with confirmation=True")
        self.confirmation_checked = True
        confirmation_require(
            conversation=self.conversation,
            contact=self.contact,
            target=ConfirmedAction(
                action=self.confirmation_action,
                reference=reference,
                summary=summary,
                arguments=arguments,
            ),
            code=self.confirmation_code,
        )

    def show(self, kind: LedgerKind, entries: Iterable[LedgerEntry]) -> None:
        """Say that the answer shows these references: those still in it once capped become
        resolvable by `seen` in later calls of this conversation."""
        ledger_show(self, kind, entries)

    def seen(
        self,
        kind: LedgerKind,
        given: str,
        *,
        owner: Callable[[str], int | None] | None = None,
        contact: Contact | None = None,
    ) -> LedgerEntry:
        """The entry of `kind` this conversation was shown that `given` designates: its
        reference, a unique ending of it or its label (VALIDATION `reference_not_seen`
        otherwise, AMBIGUOUS when several match).

        With `owner` (a reference's owner's contact id, or None), for a mutation of the
        speaker's own entity: a reference never seen that is exactly another customer's is
        PERMISSION instead, so the agent escalates. The speaker is `contact`, by default the
        identified `self.contact`. Whose the resolved entity is, the service or selector the
        tool passes the contact to checks."""
        if owner is None:
            return ledger_resolve(self, kind, given)
        speaker = contact if contact is not None else self.contact
        return ledger_resolve_owned(self, kind, given, contact=speaker, owner_of=owner)


@cache
def _conversation_sql(vendor: str, intent: bool) -> str:
    """select_related("contact") of the conversation of (company, external id), as SQL built
    once per process (`vendor` keys the quoting). With `intent`, the statement also takes the
    lock of an intent of the customer it reads (core.idempotency.intent_lock_columns) and
    always answers one row, all NULL without the conversation, so that the lock's bound is
    reset whatever it finds."""
    quote = connection.ops.quote_name
    table, contacts = quote(Conversation._meta.db_table), quote(Contact._meta.db_table)
    columns = f"{selected(Conversation).columns}, {selected(Contact).columns}"
    joined = (
        f"LEFT JOIN {contacts} ON {contacts}.{column(Contact, 'id')} "
        f"= {table}.{column(Conversation, 'contact')}"
    )
    where = (
        f"{table}.{column(Conversation, 'company')} = %s "
        f"AND {table}.{column(Conversation, 'external_id')} = %s"
    )
    if not intent:
        return f"SELECT {columns} FROM {table} {joined} WHERE {where}"
    lock = intent_lock_columns(f"{table}.{column(Conversation, 'contact')}")
    return f"SELECT {columns}, {lock} FROM {INTENT_BOUND} LEFT JOIN {table} ON {where} {joined}"


def _conversation_read(
    company: Company, external_id: str, intent_base: int | None = None
) -> Conversation | None:
    """The conversation with its identified contact, or None. As select_related("contact")
    would read it, without the ORM compiling the query on every call: its hottest read.
    With `intent_base` (an intent's `lock_base`; PostgreSQL, inside a transaction), the read
    also takes that intent's lock for the conversation's customer, bounded
    (core.idempotency.intent_wait)."""
    params: list = [company.pk, external_id]
    if intent_base is not None:
        params = [intent_base, intent_wait_bound(), *params]
    sql = _conversation_sql(connection.vendor, intent_base is not None)
    waits = intent_wait() if intent_base is not None else contextlib.nullcontext()
    with waits, connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None or row[0] is None:
        return None
    conversation_columns, contact_columns = selected(Conversation), selected(Contact)
    split = len(conversation_columns.fields)
    conversation = conversation_columns.instance(row[:split])
    contact = None
    if conversation.contact_id is not None:
        contact = contact_columns.instance(row[split : split + len(contact_columns.fields)])
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
