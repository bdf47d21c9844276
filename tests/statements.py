"""The SQL a tool call sends, as readable shapes: shared by the statement-budget tests (and
`plan_nodes`, a walk of a PostgreSQL plan, for the tests of what a query scans).

Budget tests pin the statements of a call's own work, from the idempotency key lookup to the
COMMIT of its transaction (what follows is the call's trace and on_commit tasks that production
hands to the broker). Authentication and the trace are other code's budget and left out.
"""

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.models import Company
from core.outcome import Outcome
from tooling.context import CallMeta
from tooling.execution import call_tool
from tooling.registry import registry

_WRITTEN = re.compile(r'^(?:INSERT INTO|UPDATE|DELETE FROM) "(\w+)"')
_FROM = re.compile(r' FROM "(\w+)"')
_LOCK = re.compile(r" FOR (NO KEY )?UPDATE( OF [\w\", ]+)?$")
_OTHER_BUDGETS = ('"tooling_toolcall"', '"core_gatewaycredential"')
_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT", "SET")


def _main_table(sql: str) -> str | None:
    """The table a statement reads or writes: for a SELECT, the first FROM outside every
    parenthesis (a subquery's FROM does not count; a UNION is named by its first branch), or,
    for a SELECT from subqueries only, the first table of the first of them."""
    if not sql.startswith(("SELECT", "(SELECT")):
        match = _WRITTEN.match(sql)
        return match.group(1) if match else None
    start = 1 if sql.startswith("(") else 0
    matches = list(_FROM.finditer(sql))
    for match in matches:
        if sql[start : match.start()].count("(") == sql[start : match.start()].count(")"):
            return match.group(1)
    return matches[0].group(1) if matches else None


_INTENT_HELD = re.compile(r'^SELECT .* AS intent_bound LEFT JOIN "(\w+)"')
_WITH_WRITE = re.compile(r'(INSERT INTO|UPDATE|DELETE FROM) "(\w+)"')


def shape(sql: str) -> str:
    """A statement as "VERB table" (transaction control as itself, row locks named), for
    readable asserts; writes sent as one (core.sql.execute_all) as their shapes joined by " + ",
    in the order written."""
    if sql.startswith("WITH "):
        writes = [f"{verb.split()[0]} {name}" for verb, name in _WITH_WRITE.findall(sql)]
        assert len(writes) > 1, f"unexpected statement: {sql[:120]}"
        return " + ".join(writes)
    for control in _CONTROL:
        if sql == control or sql.startswith(control + " "):
            return control
    if sql.startswith("SELECT pg_advisory_xact_lock("):
        return "LOCK intent"  # core.idempotency.intent_lock: one call of an intent at a time
    held = _INTENT_HELD.search(sql)
    if held:  # a read that takes an intent's lock too (core.idempotency.intent_lock_columns)
        return f"SELECT {held.group(1)} + LOCK intent"
    table = _main_table(sql)
    assert table, f"unexpected statement: {sql[:120]}"
    lock = _LOCK.search(sql)
    suffix = "" if lock is None else " FOR NO KEY UPDATE" if lock.group(1) else " FOR UPDATE"
    return f"{sql.lstrip('(').split()[0]} {table}{suffix}"


def call_statements(
    company: Company,
    tool: str,
    arguments: dict[str, Any],
    *,
    conversation_id: str,
    key: bool | str = True,
) -> tuple[Outcome, list[str]]:
    """Call a tool in process as the Gateway does (a fresh idempotency key, none if `key` is
    False, or the key given); return its outcome and the SQL of its own work, up to its
    COMMIT."""
    if key is True:
        key = uuid.uuid4().hex
    meta = CallMeta(conversation_id=conversation_id, idempotency_key=key or None)
    with CaptureQueriesContext(connection) as captured:
        outcome = call_tool(
            registry.get(tool), company=company, arguments=arguments, meta=meta, surface="mcp"
        )
    statements = [
        query["sql"]
        for query in captured.captured_queries
        if not any(table in query["sql"] for table in _OTHER_BUDGETS)
    ]
    if "COMMIT" in statements:
        statements = statements[: statements.index("COMMIT") + 1]
    return outcome, statements


# The transaction's brackets are not counted (docs/performance.md, bench/load.py).
_BRACKETS = ("BEGIN", "COMMIT")


@dataclass(frozen=True)
class Budget:
    """What a call may send: at most `at_most` statements besides BEGIN and COMMIT (a ceiling,
    not the exact SQL), among them `includes` in this order: the writes and locks that make
    the call what it is."""

    at_most: int
    includes: tuple[str, ...]

    def check(self, shapes: list[str]) -> None:
        counted = len([shape for shape in shapes if shape not in _BRACKETS])
        assert counted <= self.at_most, f"{counted} > {self.at_most}: {shapes}"
        remaining = iter(shapes)
        missing = [step for step in self.includes if step not in remaining]
        assert not missing, f"missing, in order, {missing}: {shapes}"


def essential(shape_text: str) -> bool:
    """Whether a statement's shape is one a budget names: a write, a row lock or a bracket."""
    return shape_text.startswith(("INSERT", "UPDATE", "DELETE", "BEGIN", "COMMIT")) or (
        " FOR " in shape_text
    )


def plan_nodes(plan: dict) -> Iterator[dict]:
    """Every node of a PostgreSQL plan (EXPLAIN's JSON format), the root first."""
    yield plan
    for child in plan.get("Plans", []):
        yield from plan_nodes(child)
