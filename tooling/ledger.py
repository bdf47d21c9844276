"""The exposure ledger: which public references each conversation has seen (seed 1 §3.1, §4).

Read tools record every reference they return; write tools record the reference of what they
create. A mutation resolves the reference it is given only among what its own conversation
(of its own company) saw: exactly, by a unique suffix ("the one ending in 9Q") or by a label
("2026-12-01 10:00"). Nothing else is accepted, so the order of calls within a turn cannot
make a mutation act on something the customer was never shown.
"""

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from core.errors import Ambiguous, ValidationFailed
from core.identity import check_owner
from core.models import Contact
from core.references import normalize_reference
from core.sql import column, insert_parts
from tooling.context import ToolContext
from tooling.models import ExposedReference

MIN_SUFFIX_LENGTH = 2
MAX_CANDIDATES = 10
_SPACES = re.compile(r"\s+")
_ISO_SEPARATOR = re.compile(r"(?<=\d)t(?=\d)")


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


def ledger_record(ctx: ToolContext, kind: str, entries: Iterable[LedgerEntry]) -> None:
    """Remember that this conversation has been shown (or has created) these references."""
    rows: dict[str, ExposedReference] = {}
    for entry in entries:
        reference = normalize_reference(entry.reference)
        if not reference:
            continue
        rows[reference] = ExposedReference(
            company=ctx.company,
            conversation=ctx.conversation,
            kind=kind,
            reference=reference,
            label=entry.label[:200],
            label_key=label_key(entry.label),
            data=entry.data or {},
        )
    if rows:
        _upsert(list(rows.values()))


_UPSERT_KEY = ("conversation", "kind", "reference")
_UPSERT_UPDATES = ("label", "label_key", "data", "last_seen_at")


def _upsert(rows: list[ExposedReference]) -> None:
    """INSERT ... ON CONFLICT DO UPDATE as one statement. Every read tool that shows references
    writes the ledger, so it is one round trip, with no transaction of its own around it
    (Django's bulk_create opens one: BEGIN and COMMIT around a single statement) and without
    the ORM's query compilation, about half the CPU of this write (docs/performance.md)."""
    insert = insert_parts(rows)
    key = ", ".join(column(ExposedReference, name) for name in _UPSERT_KEY)
    updates = ", ".join(
        f"{column(ExposedReference, name)} = EXCLUDED.{column(ExposedReference, name)}"
        for name in _UPSERT_UPDATES
    )
    sql = (
        f"INSERT INTO {insert.table} {insert.columns} {insert.values(len(rows))} "
        f"ON CONFLICT ({key}) DO UPDATE SET {updates}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, insert.params)


def _entry(row: ExposedReference) -> LedgerEntry:
    return LedgerEntry(reference=row.reference, label=row.label, data=row.data)


def ledger_resolve(ctx: ToolContext, kind: str, given: str) -> LedgerEntry:
    """The entry of `kind` this conversation saw that `given` designates.

    Exact reference first; otherwise every entry whose reference ends with `given` or whose
    label matches it. None: ValidationFailed("reference_not_seen"); several: Ambiguous with
    the candidates (references and labels only).
    """
    seen = ExposedReference.objects.filter(
        company=ctx.company, conversation=ctx.conversation, kind=kind
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
    ctx: ToolContext,
    kind: str,
    given: str,
    *,
    contact: Contact,
    owner_of: Callable[[str], int | None],
) -> LedgerEntry:
    """`ledger_resolve` for a mutation of the speaker's own entity.

    A reference this conversation never saw is refused as usual, except when it is exactly
    another customer's entity (`owner_of(reference)` gives its contact id): then ownership is
    the truthful answer, PERMISSION, so the agent escalates instead of asking again. The
    caller still checks the owner of the entity it resolves.
    """
    try:
        return ledger_resolve(ctx, kind, given)
    except ValidationFailed as error:
        if error.code == "reference_not_seen":
            owner_id = owner_of(normalize_reference(given or ""))
            if owner_id is not None:
                check_owner(contact=contact, owner_id=owner_id)
        raise
