"""What the Gateway sent and got, and what the run reports: one row per probe, per check."""

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

CONVERSATION_KEY = "com.asixto/conversationId"
IDEMPOTENCY_KEY = "com.asixto/idempotencyKey"
FAULT_KEY = "com.garante/fault"

CHECKS = {
    1: ("1", "Same idempotency key twice: the effect happens once"),
    2: ("2", "An identifier that does not own the entity: PERMISSION"),
    3: ("3", "A transition on a terminal entity: VALIDATION with the current state"),
    4: ("3.1", "A mutation with a reference this conversation's reads never returned: rejected"),
    5: ("4", "A busy slot and an altered amount: rejected"),
    6: ("5", "Every response: no internal ids, no third-party data, at most 3,000 characters"),
    7: ("6", "No results is a success; missing data is NOT_FOUND; a dependency down is SYSTEM"),
}


class Refused(Exception):
    """Certification cannot run against this server (not a sandbox, unreachable, bad token)."""


class Blocked(Exception):
    """A probe cannot run because something it needs was not obtained earlier."""


@dataclass(frozen=True)
class Contact:
    """A sandbox customer as the operator declared it: their identifier and private data."""

    first_name: str
    last_name: str
    document_number: str
    phone: str = ""
    email: str = ""

    @property
    def identifier(self) -> str:
        return self.document_number

    @property
    def label(self) -> str:
        return f"{self.first_name} {self.last_name}".strip()

    def private_patterns(self) -> list[re.Pattern[str]]:
        """What must never reach another customer: full name, last name, document, phone,
        email. A bare first name is not checked (it is a common word, e.g. 'Ana' in
        'semana')."""
        literals = [self.label, self.document_number, self.email, self.phone]
        if self.phone.startswith("+") and len(self.phone) > 9:
            literals.append(self.phone[-9:])  # the national number, as it is often written
        patterns = [re.compile(re.escape(x), re.IGNORECASE) for x in literals if x]
        if len(self.last_name) >= 3:
            patterns.append(re.compile(rf"(?<!\w){re.escape(self.last_name)}(?!\w)"))
        return patterns


@dataclass
class Exchange:
    """One tools/call as the Gateway sent it and as the server answered."""

    conversation: str
    tool: str
    arguments: dict[str, Any]
    meta: dict[str, Any]
    is_error: bool
    text: str
    body: Any
    speaker: Contact | None = None
    rpc_error: str | None = None

    @property
    def error_type(self) -> str | None:
        if self.rpc_error is not None:
            return "JSON-RPC"
        if self.is_error and isinstance(self.body, dict):
            return self.body.get("error_type")
        return None

    def sent(self) -> str:
        args = ", ".join(f"{k}={short(v)}" for k, v in self.arguments.items())
        extra = []
        if FAULT_KEY in self.meta:
            extra.append(f"fault={self.meta[FAULT_KEY]}")
        return f"{self.tool}({args})" + (f" [{', '.join(extra)}]" if extra else "")

    def got(self) -> str:
        if self.rpc_error is not None:
            return f"JSON-RPC error {self.rpc_error}"
        if not self.is_error:
            return "success " + short(self.body, 90)
        body = self.body if isinstance(self.body, dict) else {}
        parts = [str(body.get("error_type")), str(body.get("code", ""))]
        if "state" in body:
            parts.append(f"state={body['state']}")
        if "total" in body:
            parts.append(f"total={body['total']}")
        return " ".join(p for p in parts if p)

    def as_dict(self) -> dict[str, Any]:
        return {
            "conversation": self.conversation,
            "tool": self.tool,
            "arguments": self.arguments,
            "meta": self.meta,
            "is_error": self.is_error,
            "rpc_error": self.rpc_error,
            "text": self.text,
        }


def short(value: Any, limit: int = 40) -> str:
    """`value` as one line of at most `limit` characters, for a row of the table."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class Row:
    check: int
    probe: str
    proves: str
    sent: str = ""
    got: str = ""
    passed: bool = False


@dataclass
class Report:
    url: str
    mode: str
    started_at: str
    rows: list[Row] = field(default_factory=list)
    exchanges: list[Exchange] = field(default_factory=list)
    refused: str | None = None

    @property
    def passed(self) -> bool:
        return self.refused is None and all(self.check_passed(n) for n in CHECKS)

    def check_passed(self, check: int) -> bool:
        rows = [r for r in self.rows if r.check == check]
        return bool(rows) and all(r.passed for r in rows)

    def as_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "mode": self.mode,
            "started_at": self.started_at,
            "refused": self.refused,
            "passed": self.passed,
            "checks": [
                {
                    "check": number,
                    "seed_row": seed_row,
                    "title": title,
                    "passed": self.check_passed(number),
                    "rows": [asdict(r) for r in self.rows if r.check == number],
                }
                for number, (seed_row, title) in CHECKS.items()
            ],
            "exchanges": [e.as_dict() for e in self.exchanges],
        }
