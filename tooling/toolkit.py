"""The toolkit: everything a tool module needs from the platform, and the only tooling module
it imports (tests/tooling/test_toolkit_imports.py holds every tools.py to it).

A tool is a function in its app's `tools.py`, declared with `@tool` and autodiscovered:

    class CloseCaseIn(ToolInput):
        identifier: Identifier
        case: str = Field(min_length=1, max_length=32)

    @tool(name="close_case", title=..., description=..., input=CloseCaseIn,
          output=CaseOut, write=True, identified=True, step_up=True)
    def close_case(ctx: ToolContext, params: CloseCaseIn) -> dict:
        entry = ctx.seen(LedgerKind.CASE, params.case, owner=owner_of_case)
        case = case_close(..., contact=ctx.contact)  # the service checks the case is theirs
        ctx.show(LedgerKind.CASE, [LedgerEntry(case.reference, case.subject)])
        return {...}

The platform validates the arguments, runs writes once per idempotency key in a transaction,
checks what the tool declares (identity, then step-up) before the handler, holds a tool
declared `confirmation=True` to asking `ctx.confirm(...)` before it acts, caps the answer,
records what it shows and maps errors (core.errors) to results. docs/tools.md says more.
"""

from core.outcome import dumps
from tooling.context import ToolContext
from tooling.ledger import LedgerEntry, LedgerKind
from tooling.output import Cursor, ListOutput, PagedListOutput, listing, page
from tooling.registry import (
    CONFIRMATION_HELP,
    ConfirmationCode,
    Identifier,
    ToolInput,
    ToolOutput,
    tool,
)

__all__ = [
    "CONFIRMATION_HELP",
    "ConfirmationCode",
    "Cursor",
    "Identifier",
    "LedgerEntry",
    "LedgerKind",
    "ListOutput",
    "PagedListOutput",
    "ToolContext",
    "ToolInput",
    "ToolOutput",
    "dumps",
    "listing",
    "page",
    "tool",
]
