"""The exposure ledger: which public references each conversation has seen (seed 1 §3.1, §4).

Read tools record every reference they return; write tools record the reference of what they
create. A mutation resolves the reference it is given only among what its own conversation
(of its own company) saw: exactly, by a unique suffix ("the one ending in 9Q") or by a label
("2026-12-01 10:00"). Nothing else is accepted, so the order of calls within a turn cannot
make a mutation act on something the customer was never shown.
"""

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Q
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from core.errors import Ambiguous, ValidationFailed
from core.identity import check_owner
from core.models import Company, Contact, Conversation
from core.outcome import dumps
from core.references import normalize_reference
from core.sql import Statement, column, execute_all, send_or_keep
from tooling.models import ExposedReference

MIN_SUFFIX_LENGTH = 2
MAX_CANDIDATES = 10
_SPACES = re.compile(r"\s+")
_ISO_SEPARATOR = re.compile(r"(?<=\d)t(?=\d)")


LedgerKind = ExposedReference.Kind


class LedgerScope(Protocol):
    """What the ledger reads of a call (a tooling.context.ToolContext, which offers tools
    these lookups as ctx.seen and ctx.show): its company, its conversation, and what its
    answer says it shows."""

    company: Company
    shown: list

    @property
    def conversation(self) -> Conversation: ...


@dataclass(frozen=True)
class LedgerEntry:
    """A reference as the conversation saw it. `data` is for the tool's own use and is never
    shown to the customer through the ledger (candidates carry reference and label only)."""

    reference: str
    label: str = ""
    data: dict[str, Any] | None = field(default=None, compare=False)


def label_key(label: str) -> str:
    """The matching form of a label: case, spacing and the ISO "T" do not count."""
    key = _SPACES.sub(" ", (label or "").strip().casefold())
    return _ISO_SEPARATOR.sub(" ", key)[:200]


def ledger_show(ctx: LedgerScope, kind: LedgerKind, entries: Iterable[LedgerEntry]) -> None:
    """A tool's word that its answer shows these references. They are recorded once the
    answer is final (`ledger_record_shown`): the output cap may drop a listing's tail, and a
    reference the customer was never shown must not be resolvable."""
    ctx.shown.append((LedgerKind(kind), list(entries)))


def ledger_record_shown(ctx: LedgerScope, text: str) -> None:
    """Record what the call's answer, as sent (`text`, the capped JSON), shows of what its
    tool said it would show: the call's last writes, which a write's idempotency engine sends
    with its stored answer (core.sql.send_or_keep)."""
    for kind, entries in ctx.shown:
        statement = _record_statement(ctx, kind, [e for e in entries if dumps(e.reference) in text])
        if statement is not None:
            send_or_keep(statement)
    ctx.shown.clear()


def ledger_record(ctx: LedgerScope, kind: LedgerKind, entries: Iterable[LedgerEntry]) -> None:
    """Remember that this conversation has been shown (or has created) these references.
    Tools say what they show with `ledger_show` instead."""
    statement = _record_statement(ctx, kind, entries)
    if statement is not None:
        execute_all([statement])


def _record_statement(
    ctx: LedgerScope, kind: LedgerKind | str, entries: Iterable[LedgerEntry]
) -> Statement | None:
    kind = LedgerKind(kind)  # one of the set, and its plain text for the statement
    rows: dict[str, tuple[str, str, str, dict[str, Any]]] = {}
    for entry in entries:
        reference = normalize_reference(entry.reference)
        if reference:
            rows[reference] = (
                reference,
                entry.label[:200],
                label_key(entry.label),
                entry.data or {},
            )
    if not rows:
        return None
    return _upsert(ctx, kind.value, list(rows.values()))


# An upsert's rows share the call's values (its company, conversation, kind and instant), sent
# once per statement; each row has its own values of the others.
_CALL_FIELDS = ("company", "conversation", "kind", "created_at", "last_seen_at")
_ROW_FIELDS = ("reference", "label", "label_key", "data")
_UPSERT_KEY = ("conversation", "kind", "reference")
_UPSERT_UPDATES = ("label", "label_key", "data", "last_seen_at")
# A reference shown again unchanged within this long is not written again, so `last_seen_at`
# is true to within it. An agent repeating a search rewrote the same rows on every call:
# each rewrite a new row version (the label_key index rules out HOT updates) and a row lock
# held until its commit, so repeated searches of one conversation queued behind each other.
LAST_SEEN_RESOLUTION = timedelta(minutes=1)


def _upsert(ctx: LedgerScope, kind: str, rows: list[tuple]) -> Statement:
    """INSERT ... ON CONFLICT DO UPDATE as one statement, of the rows that are new, changed or
    last seen more than LAST_SEEN_RESOLUTION ago (when none is, the statement writes nothing
    and its commit waits for no WAL flush). Every read tool that shows references writes the
    ledger, so it is one round trip, with no transaction of its own around it (Django's
    bulk_create opens one: BEGIN and COMMIT around a single statement), without the ORM's
    query compilation and without a model instance per row (docs/performance.md)."""
    # Resolved once: every attribute read through Django's `connection` proxy is a lookup of
    # the thread's connection, and preparing a page of ten rows' values reads it some fifty
    # times (a third of their preparation's CPU).
    db = connections[DEFAULT_DB_ALIAS]
    return Statement(_upsert_sql(len(rows)), _upsert_params(ctx, kind, rows, db))


@functools.lru_cache(maxsize=64)  # one per number of rows; a tool shows at most 50
def _upsert_sql(rows: int) -> str:
    """The upsert of `rows` rows: the call's values selected beside each row's (one SELECT per
    row, UNION ALL), less the rows the conversation was shown, as they are, since the
    freshness bound. Sending the call's values once keeps a page of ten slots under the 50
    params up to which psycopg keeps a statement's parse (and halves the values it adapts).
    Params: the call's values in _CALL_FIELDS order, each row's in _ROW_FIELDS order, then the
    conversation, the kind and the freshness bound."""
    table = connection.ops.quote_name(ExposedReference._meta.db_table)
    call_columns = [column(ExposedReference, name) for name in _CALL_FIELDS]
    row_columns = [column(ExposedReference, name) for name in _ROW_FIELDS]
    first_row = "SELECT " + ", ".join(f"%s AS {name}" for name in row_columns)
    next_row = "SELECT " + ", ".join(["%s"] * len(row_columns))
    shown = " UNION ALL ".join([first_row] + [next_row] * (rows - 1))
    key = ", ".join(column(ExposedReference, name) for name in _UPSERT_KEY)
    updates = ", ".join(
        f"{column(ExposedReference, name)} = EXCLUDED.{column(ExposedReference, name)}"
        for name in _UPSERT_UPDATES
    )
    alike = [column(ExposedReference, name) for name in ("reference", "label", "data")]
    unchanged = " AND ".join(
        [
            f"seen.{column(ExposedReference, 'conversation')} = %s",
            f"seen.{column(ExposedReference, 'kind')} = %s",
            *(f"seen.{name} = shown.{name}" for name in alike),
            f"seen.{column(ExposedReference, 'last_seen_at')} >= %s",
        ]
    )
    # The WHERE also keeps SQLite from reading ON CONFLICT as the join condition of `shown`.
    return (
        f"INSERT INTO {table} ({', '.join(call_columns + row_columns)}) "
        f"SELECT {', '.join(['%s'] * len(call_columns) + row_columns)} FROM ({shown}) AS shown "
        f"WHERE NOT EXISTS (SELECT 1 FROM {table} AS seen WHERE {unchanged}) "
        f"ON CONFLICT ({key}) DO UPDATE SET {updates}"
    )


def _upsert_params(
    ctx: LedgerScope, kind: str, rows: list[tuple], db: BaseDatabaseWrapper
) -> list[Any]:
    """The statement's values, prepared as save() prepares an ExposedReference's (each field's
    `get_db_prep_save`; both timestamps the call's instant, as auto_now_add and auto_now set
    them), without building a model instance per row."""
    now = timezone.now()
    values = (ctx.company.pk, ctx.conversation.pk, kind, now, now)
    call = {
        name: _field(name).get_db_prep_save(value, db)
        for name, value in zip(_CALL_FIELDS, values, strict=True)
    }
    params = list(call.values())
    row_fields = [_field(name) for name in _ROW_FIELDS]
    for row in rows:
        params.extend(
            field.get_db_prep_save(value, db) for field, value in zip(row_fields, row, strict=True)
        )
    fresh_since = _field("last_seen_at").get_db_prep_save(now - LAST_SEEN_RESOLUTION, db)
    return [*params, call["conversation"], call["kind"], fresh_since]


def _field(name: str) -> Field:
    return ExposedReference._meta.get_field(name)


def _entry(row: ExposedReference) -> LedgerEntry:
    return LedgerEntry(reference=row.reference, label=row.label, data=row.data)


def ledger_resolve(ctx: LedgerScope, kind: LedgerKind, given: str) -> LedgerEntry:
    """The entry of `kind` this conversation saw that `given` designates.

    Exact reference first; otherwise every entry whose reference ends with `given` or whose
    label matches it. None: ValidationFailed("reference_not_seen"); several: Ambiguous with
    the candidates (references and labels only).
    """
    seen = ExposedReference.objects.filter(
        company=ctx.company, conversation=ctx.conversation, kind=LedgerKind(kind).value
    )
    reference = normalize_reference(given or "")
    if reference:
        exact = seen.filter(reference=reference).first()
        if exact is not None:
            return _entry(exact)
    loose = Q(pk__in=[])
    if len(reference) >= MIN_SUFFIX_LENGTH:
        loose |= Q(reference__endswith=reference)
    key = label_key(given or "")
    if key:
        loose |= Q(label_key=key)
    matches = list(seen.filter(loose).order_by("label_key", "reference")[: MAX_CANDIDATES + 1])
    if len(matches) == 1:
        return _entry(matches[0])
    if not matches:
        raise ValidationFailed(
            _(
                "No encuentro esa referencia entre lo que le he mostrado en esta conversación. "
                "Consultemos de nuevo para elegir una de la lista."
            ),
            code="reference_not_seen",
        )
    raise Ambiguous(
        _("Hay varias opciones que coinciden. ¿A cuál se refiere?"),
        code="ambiguous_reference",
        candidates=[
            {"reference": row.reference, "label": row.label} for row in matches[:MAX_CANDIDATES]
        ],
    )


def ledger_resolve_owned(
    ctx: LedgerScope,
    kind: LedgerKind,
    given: str,
    *,
    contact: Contact,
    owner_of: Callable[[str], int | None],
) -> LedgerEntry:
    """`ledger_resolve` for a mutation of the speaker's own entity.

    A reference this conversation never saw is refused as usual, except when it is exactly
    another customer's entity (`owner_of(reference)` gives its contact id): then ownership is
    the truthful answer, PERMISSION, so the agent escalates instead of asking again. The
    service or selector the entity goes to, given the contact, checks its owner.
    """
    try:
        return ledger_resolve(ctx, kind, given)
    except ValidationFailed as error:
        if error.code == "reference_not_seen":
            owner_id = owner_of(normalize_reference(given or ""))
            if owner_id is not None:
                check_owner(contact=contact, owner_id=owner_id)
        raise
