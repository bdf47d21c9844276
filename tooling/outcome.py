"""A tool call's outcome, as every surface answers it (MCP, the REST mirror, the integration
API) and as the trace records it."""

from dataclasses import dataclass
from typing import Any

from tooling.output import dumps


@dataclass(frozen=True)
class Outcome:
    body: dict[str, Any]
    is_error: bool
    status: int
    replayed: bool = False
    error_type: str | None = None
    # The body's JSON text as it goes on the wire, when the call already wrote it (the output
    # cap measures it, a replay has it stored): the answer reuses it instead of encoding again.
    text: str | None = None

    def body_text(self) -> str:
        return self.text if self.text is not None else dumps(self.body)
