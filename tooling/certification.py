"""The certification self-check: play the Gateway over real MCP and prove the seed's seven checks.

`Certification(url, token, contacts=[...]).run()` connects with the official `mcp` SDK client, as
the platform's Gateway would (bearer token, `com.asixto/conversationId` and a deterministic
`com.asixto/idempotencyKey` derived from the conversation, the tool and its arguments), and
drives a scripted set of conversations through the tools. Every probe becomes a `Row`: the
check it belongs to, what was sent, what came back, and whether that proves the guarantee.
Effects are never assumed: each "one effect" or "no effect" is counted through a read.

It refuses any company that is not a declared sandbox, before any write: the probe is a read
(`list_services`) sent with the sandbox-only fault switch `_meta["com.garante/fault"] =
"database"`. A sandbox company honours it (its database access fails for real and the answer is
SYSTEM); a production company ignores it, so a success means production.

The row evaluations (`verdict_*`, `response_problems`) are pure functions over `Exchange`s, so
tests can feed them wrong answers and see them fail.
"""

import hashlib
import json
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

import anyio
import httpx2
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from core.errors import ErrorType

CONVERSATION_KEY = "com.asixto/conversationId"
IDEMPOTENCY_KEY = "com.asixto/idempotencyKey"
FAULT_KEY = "com.garante/fault"
OUTPUT_LIMIT = 3000
CANONICAL_ERROR_TYPES = frozenset(t.value for t in ErrorType)
MODES = ("legacy", "2026-07-28", "auto")

CHECKS = {
    1: ("1", "Same idempotency key twice: the effect happens once"),
    2: ("2", "An identifier that does not own the entity: PERMISSION"),
    3: ("3", "A transition on a terminal entity: VALIDATION with the current state"),
    4: ("3.1", "A mutation with a reference this conversation's reads never returned: rejected"),
    5: ("4", "A busy slot and an altered amount: rejected"),
    6: ("5", "Every response: no internal ids, no third-party data, at most 3,000 characters"),
    7: ("6", "No results is a success; missing data is NOT_FOUND; a dependency down is SYSTEM"),
}

_UUID = re.compile(
    r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[1-8][0-9a-fA-F]{3}-?[89abAB][0-9a-fA-F]{3}-?[0-9a-fA-F]{12}"
)
_ID_KEY = re.compile(r"^(id|pk|uuid)$|_(id|pk|uuid)$", re.IGNORECASE)
_REFERENCE = re.compile(r"\b[A-Z]{2}-[0-9A-Z]{6}\b")
# Each state a probe needs, as the machine value first and the Spanish label after it: list
# tools filter on one of them (whichever their schema declares) and answers show one or both.
STATES = {
    "scheduled": ("scheduled", "agendada"),
    "cancelled": ("cancelled", "cancelada"),
    "attended": ("attended", "atendida"),
    "sent": ("sent", "enviada"),
    "accepted": ("accepted", "aceptada"),
    "rejected": ("rejected", "rechazada"),
    "expired": ("expired", "vencida"),
    "open": ("open", "abierto"),
    "closed": ("closed", "cerrado"),
}
_LEAKS = ("Traceback (most recent call last)", 'File "/', "site-packages", "django.db.")
# Keys of read and write answers that name an entity of the speaker (not slots: those are
# public, the same for everybody).
_OWNED_REFERENCE_KEYS = ("appointment", "reference")


class Refused(Exception):
    """Certification cannot run against this server (not a sandbox, unreachable, bad token)."""


class Blocked(Exception):
    """A probe cannot run because something it needs was not obtained earlier."""


# --- what the Gateway sent and got --------------------------------------------------------


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
        args = ", ".join(f"{k}={_short(v)}" for k, v in self.arguments.items())
        extra = []
        if FAULT_KEY in self.meta:
            extra.append(f"fault={self.meta[FAULT_KEY]}")
        return f"{self.tool}({args})" + (f" [{', '.join(extra)}]" if extra else "")

    def got(self) -> str:
        if self.rpc_error is not None:
            return f"JSON-RPC error {self.rpc_error}"
        if not self.is_error:
            return "success " + _short(self.body, 90)
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


def _short(value: Any, limit: int = 40) -> str:
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


# --- row evaluations: pure, so tests can feed them wrong answers --------------------------

Verdict = tuple[bool, str]


def verdict_success(exchange: Exchange) -> Verdict:
    if exchange.is_error or exchange.rpc_error is not None:
        return False, f"expected success, got {exchange.got()}"
    return True, exchange.got()


def verdict_error(exchange: Exchange, *types: str, codes: tuple[str, ...] = ()) -> Verdict:
    """An isError tool result of one of `types` (and, if given, one of `codes`)."""
    got = exchange.got()
    if not exchange.is_error or exchange.error_type not in types:
        return False, f"expected {' or '.join(types)}, got {got}"
    if codes and exchange.body.get("code") not in codes:
        return False, f"expected code {' or '.join(codes)}, got {got}"
    return True, got


def verdict_names_field(exchange: Exchange, field: str) -> Verdict:
    """An argument the tool's schema refuses: a VALIDATION tool result (not a protocol error,
    which clients seldom show the model) whose problems name the field."""
    passed, got = verdict_error(exchange, ErrorType.VALIDATION, codes=("invalid_arguments",))
    if not passed:
        return passed, got
    named = [p.get("field") for p in exchange.body.get("problems") or [] if isinstance(p, dict)]
    if field not in named:
        return False, f"{got}; the problems name {named or 'no field'}, not {field}"
    return True, f"{got}; names {field}"


def verdict_once(first: Exchange, second: Exchange, before: int, after: int) -> Verdict:
    """Two calls with the same key: both succeed with the same answer, and a read counts
    exactly one new effect."""
    for exchange in (first, second):
        if exchange.is_error or exchange.rpc_error is not None:
            return False, f"a call failed: {exchange.got()}"
    if first.text != second.text:
        return False, f"answers differ: {_short(first.text, 60)} vs {_short(second.text, 60)}"
    if after - before != 1:
        return False, f"identical answers, but the read counts {before} → {after} (want +1)"
    return True, f"identical answers; the read counts {before} → {after}"


def verdict_terminal(exchange: Exchange, shown: dict[str, Any]) -> Verdict:
    """VALIDATION carrying the current state, as the read `shown` (an item) showed it."""
    passed, got = verdict_error(exchange, ErrorType.VALIDATION)
    if not passed:
        return passed, got
    wanted = shown_states(shown)
    if str(exchange.body.get("state")) not in wanted:
        return False, f"{got}; want the state the read showed ({' / '.join(sorted(wanted))})"
    return True, got


def verdict_refused_without_effect(
    exchange: Exchange, unchanged: bool, *types: str, codes: tuple[str, ...] = ()
) -> Verdict:
    passed, got = verdict_error(exchange, *types, codes=codes)
    if not passed:
        return passed, got
    if not unchanged:
        return False, f"{got}, but a read shows the entity changed"
    return True, f"{got}; a read shows no change"


def verdict_foreign(exchange: Exchange, unchanged: bool) -> Verdict:
    """Another customer's entity: the owner check (PERMISSION) or, before it, the exposure
    ledger (VALIDATION reference_not_seen) must refuse, and nothing may change."""
    if exchange.error_type == ErrorType.PERMISSION:
        return verdict_refused_without_effect(exchange, unchanged, ErrorType.PERMISSION)
    passed, got = verdict_refused_without_effect(
        exchange, unchanged, ErrorType.VALIDATION, codes=("reference_not_seen",)
    )
    if not passed:
        return False, f"expected PERMISSION (or the ledger's reference_not_seen), got {got}"
    return True, got + " (caught by the ledger before the owner check)"


def stated_total(exchange: Exchange) -> Decimal | None:
    """The real total an amount refusal states, if it states one in its message."""
    body = exchange.body if isinstance(exchange.body, dict) else {}
    try:
        total = Decimal(str(body.get("total")))
    except InvalidOperation:
        return None
    message = str(body.get("user_message", ""))
    spoken = {f"{total:.2f}", f"{total:.2f}".replace(".", ",")}
    return total if any(s in message for s in spoken) else None


def verdict_altered_amount(exchange: Exchange, real_total: Decimal | None) -> Verdict:
    """VALIDATION whose message states the real total (`real_total` when known)."""
    passed, got = verdict_error(exchange, ErrorType.VALIDATION)
    if not passed:
        return passed, got
    stated = stated_total(exchange)
    if stated is None:
        return False, f"{got}; the message does not state the real total"
    if real_total is not None and stated != real_total:
        return False, f"{got}; states {stated}, the real total is {real_total}"
    return True, f"{got}; message: {_short(exchange.body.get('user_message'), 70)}"


def verdict_altered_then_real(
    altered: Exchange, confirmed: Exchange | None, created: set[str]
) -> Verdict:
    """An invented total is refused stating the real one; quoting again at the stated total
    succeeds with exactly that total (so it is the system's own), and a read shows that only
    this second quote was created."""
    passed, got = verdict_altered_amount(altered, None)
    if not passed:
        return passed, got
    real = stated_total(altered)
    if confirmed is None or confirmed.is_error or not isinstance(confirmed.body, dict):
        return False, f"{got}; quoting at the stated total failed: {confirmed and confirmed.got()}"
    if str(confirmed.body.get("total")) != str(real):
        return False, f"{got}; quoting at it gives a total of {confirmed.body.get('total')}"
    if created != {confirmed.body.get("reference")}:
        return False, f"{got}; the read shows {len(created)} new quotes (want 1)"
    return True, f"{got}; only the quote at {real} was created"


def verdict_error_shapes(errors: list[Exchange]) -> Verdict:
    """Every error answer has one of the six canonical types and a message for the customer."""
    bad = [
        e
        for e in errors
        if e.error_type not in CANONICAL_ERROR_TYPES
        or not isinstance(e.body, dict)
        or not str(e.body.get("user_message") or "").strip()
    ]
    if not errors:
        return False, "no error answers were collected"
    if bad:
        examples = "; ".join(f"{e.sent()} → {e.got()}" for e in bad[:3])
        return False, f"{len(bad)} without a canonical type or user_message: {examples}"
    return True, f"types seen: {', '.join(sorted({str(e.error_type) for e in errors}))}"


def verdict_empty_list(exchange: Exchange) -> Verdict:
    passed, got = verdict_success(exchange)
    if not passed:
        return passed, got
    body = exchange.body
    if not isinstance(body, dict) or body.get("items") != [] or body.get("count") != 0:
        return False, f"expected a success with an empty list, got {_short(body, 80)}"
    return True, "success, items=[] count=0"


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    """Every (path, key, value) of a JSON document."""
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            yield here, str(key), item
            yield from _walk(item, here)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]")


def response_problems(
    exchange: Exchange,
    *,
    others: list[Contact],
    foreign_references: set[str] = frozenset(),
    secrets_: tuple[str, ...] = (),
) -> list[tuple[str, str]]:
    """What check 6 objects to in one response, as (kind, detail); empty when it is clean.

    Kinds: "size" (over 3,000 characters), "ids" (keys named id/pk/uuid or ending in
    _id/_pk/_uuid, UUIDs anywhere), "third" (another customer's private data or entity
    references; what the caller itself sent in this call is not a leak) and "secrets" (the
    token, stack traces, internal paths).
    """
    problems: list[tuple[str, str]] = []
    text = exchange.text
    if len(text) > OUTPUT_LIMIT:
        problems.append(("size", f"{len(text)} characters (max {OUTPUT_LIMIT})"))
    structured = json.dumps(exchange.body, ensure_ascii=False, separators=(",", ":"))
    if len(structured) > OUTPUT_LIMIT:
        problems.append(("size", f"structured content of {len(structured)} characters"))
    for path, key, _value in _walk(exchange.body):
        if _ID_KEY.search(key):
            problems.append(("ids", f"internal id key {path!r}"))
    haystack = f"{text}\n{structured}"
    if uuid := _UUID.search(haystack):
        problems.append(("ids", f"a UUID {uuid.group(0)}"))
    sent = json.dumps(exchange.arguments, ensure_ascii=False).casefold()
    for contact in others:
        for pattern in contact.private_patterns():
            found = pattern.search(haystack)
            if found and found.group(0).casefold() not in sent:
                problems.append(("third", f"{contact.label}'s data {found.group(0)!r}"))
    for reference in sorted(foreign_references):
        if reference in haystack and reference.casefold() not in sent:
            problems.append(("third", f"another customer's reference {reference}"))
    for secret in secrets_:
        if secret and secret in haystack:
            problems.append(("secrets", "the gateway token"))
    for leak in _LEAKS:
        if leak in haystack:
            problems.append(("secrets", f"internal detail {leak!r}"))
    return problems


def owned_references(exchanges: list[Exchange]) -> dict[Contact, set[str]]:
    """References each customer's own conversations were given for their entities."""
    owned: dict[Contact, set[str]] = {}
    for exchange in exchanges:
        if exchange.speaker is None or exchange.is_error:
            continue
        mine = owned.setdefault(exchange.speaker, set())
        for _path, key, value in _walk(exchange.body):
            is_reference = isinstance(value, str) and _REFERENCE.fullmatch(value)
            if key in _OWNED_REFERENCE_KEYS and is_reference:
                mine.add(value)
    return owned


# --- the Gateway ---------------------------------------------------------------------------


def gateway_key(conversation: str, tool: str, arguments: dict[str, Any]) -> str:
    """Deterministic per logical operation, like the Gateway's: conversation, tool and the
    argument signature (the company is implied by the token). A repeated call repeats it."""
    signature = json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(f"{conversation}\n{tool}\n{signature}".encode()).hexdigest()
    return f"gw-{digest[:48]}"


class Gateway:
    """Tool calls over one SDK client, recorded as `Exchange`s."""

    def __init__(self, client: Client, writes: set[str], contacts: list[Contact]) -> None:
        self.client = client
        self.writes = writes
        self.contacts = contacts
        self.exchanges: list[Exchange] = []
        self.speakers: dict[str, Contact] = {}

    async def call(
        self,
        conversation: str,
        tool: str,
        arguments: dict[str, Any] | None = None,
        *,
        fault: str | None = None,
    ) -> Exchange:
        arguments = dict(arguments or {})
        meta: dict[str, Any] = {CONVERSATION_KEY: conversation}
        if tool in self.writes:
            meta[IDEMPOTENCY_KEY] = gateway_key(conversation, tool, arguments)
        if fault is not None:
            meta[FAULT_KEY] = fault
        exchange = Exchange(conversation, tool, arguments, meta, True, "", None)
        exchange.speaker = self.speakers.get(conversation)
        try:
            result = await self.client.call_tool(tool, arguments, meta=meta)
        except MCPError as error:
            exchange.rpc_error = f"{error.error.code}: {error.error.message}"
            exchange.body = {"jsonrpc_error": error.error.code}
        else:
            exchange.is_error = bool(result.is_error)
            texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
            exchange.text = texts[0] if texts else ""
            exchange.body = result.structured_content
            if exchange.body is None and exchange.text:
                try:
                    exchange.body = json.loads(exchange.text)
                except ValueError:
                    exchange.body = exchange.text
        if tool == "identify_contact" and not exchange.is_error:
            # From now on this conversation speaks for that customer (for check 6).
            given = {str(v).casefold() for v in arguments.values()}
            for contact in self.contacts:
                mine = {contact.document_number, contact.email, contact.phone}
                if given & {x.casefold() for x in mine if x}:
                    exchange.speaker = self.speakers[conversation] = contact
        self.exchanges.append(exchange)
        return exchange

    async def identify(self, conversation: str, contact: Contact) -> Exchange:
        exchange = await self.call(
            conversation, "identify_contact", {"document": contact.document_number}
        )
        if exchange.is_error:
            raise Blocked(f"identify_contact as {contact.label} failed: {exchange.got()}")
        return exchange


def _innermost(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def _items(exchange: Exchange, what: str) -> list[dict[str, Any]]:
    if exchange.is_error or not isinstance(exchange.body, dict):
        raise Blocked(f"{what} failed: {exchange.got()}")
    items = exchange.body.get("items")
    if not isinstance(items, list):
        raise Blocked(f"{what} answered no list")
    return items


def _find(items: list[dict[str, Any]], key: str, value: str) -> dict[str, Any] | None:
    return next((item for item in items if item.get(key) == value), None)


def shown_states(item: dict[str, Any] | None) -> set[str]:
    """Every way an answer shows an entity's state: value, older "status", and label."""
    if not item:
        return set()
    return {str(item[k]) for k in ("state", "status", "state_label", "status_label") if k in item}


def in_state(item: dict[str, Any] | None, state: str) -> bool:
    synonyms = {s.casefold() for s in STATES.get(state, (state,))}
    return any(shown.casefold() in synonyms for shown in shown_states(item))


# --- the scripted run ----------------------------------------------------------------------


class Certification:
    """One certification run against one server and one sandbox company."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        contacts: list[Contact],
        mode: str = "legacy",
        timeout: float = 30,
        today: datetime | None = None,
    ) -> None:
        if len(contacts) < 2:
            raise ValueError("certification needs two sandbox contacts")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.url = url
        self.token = token
        self.ana, self.bruno = contacts[0], contacts[1]
        self.contacts = contacts
        self.mode = mode
        self.timeout = timeout
        self.today = (today or datetime.now(UTC)).date()
        self.run_id = secrets.token_hex(4)
        self.report = Report(url=url, mode=mode, started_at=datetime.now(UTC).isoformat())
        self.gw: Gateway
        self.state: dict[str, Any] = {}
        self.limits: dict[str, Any] = {}
        self.schemas: dict[str, dict[str, Any]] = {}

    # Probes --------------------------------------------------------------------------------

    @contextmanager
    def probe(self, check: int, name: str, proves: str) -> Iterator[Row]:
        """A row; anything that stops it (a missing precondition, a transport error) fails it
        with the reason instead of stopping the run."""
        row = Row(check=check, probe=name, proves=proves)
        self.report.rows.append(row)
        try:
            yield row
        except Blocked as blocked:
            row.passed, row.got = False, f"not run: {blocked}"
        except (MCPError, httpx2.HTTPError, OSError) as error:
            row.passed, row.got = False, f"transport failure: {error!r}"
        except Exception as error:  # an answer shaped so badly that the probe cannot read it
            row.passed, row.got = False, f"unreadable answer: {error!r}"

    @staticmethod
    def judge(row: Row, verdict: Verdict, *exchanges: Exchange, sent: str = "") -> None:
        row.passed, row.got = verdict
        row.sent = sent or " ; ".join(e.sent() for e in exchanges)

    def conversation(self, name: str) -> str:
        return f"certify-{self.run_id}-{name}"

    # Entry point ---------------------------------------------------------------------------

    def run(self) -> Report:
        try:
            anyio.run(self._run)
        except Refused as refused:
            self.report.refused = str(refused)
        return self.report

    async def _run(self) -> None:
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {self.token}"}, timeout=self.timeout
        )
        transport = Client(streamable_http_client(self.url, http_client=http), mode=self.mode)
        try:
            async with http, transport as client:
                await self._session(client)
        except BaseException as error:
            # The SDK runs in task groups, so a failure may arrive wrapped in a group.
            cause = _innermost(error)
            if isinstance(cause, Refused):
                raise cause from None
            if isinstance(cause, MCPError | httpx2.HTTPError | OSError):
                raise Refused(f"cannot talk MCP to {self.url}: {cause!r}") from None
            raise

    async def _session(self, client: Client) -> None:
        listing = await client.list_tools()
        writes = {
            t.name
            for t in listing.tools
            if not (t.annotations is not None and t.annotations.read_only_hint)
        }
        self.gw = Gateway(client, writes, self.contacts)
        # The largest page each list tool allows, from its own schema: reads that count
        # effects look at as much as the server lets them.
        self.schemas = {t.name: t.input_schema.get("properties") or {} for t in listing.tools}
        self.limits = {
            name: (properties.get("limit") or {}).get("maximum")
            for name, properties in self.schemas.items()
        }
        self.report.exchanges = self.gw.exchanges
        await self.preflight()
        sections = ((1, self.setup), (1, self.agenda), (5, self.sales), (1, self.support))
        for check, section in (*sections, (7, self.outcomes)):
            try:
                await section()
            except Blocked as blocked:
                # A step outside any probe failed: say so under the check it serves first.
                self.report.rows.append(
                    Row(check, f"{section.__name__}: preparation", "", got=f"not run: {blocked}")
                )
        self.inspect_responses()
        for number in CHECKS:
            if not any(r.check == number for r in self.report.rows):
                self.report.rows.append(Row(number, "(no probe ran)", "", got="not run"))

    def most(self, tool: str) -> dict[str, int]:
        """The `limit` argument asking `tool` for its largest page (none if it has no limit)."""
        maximum = self.limits.get(tool)
        return {"limit": maximum} if isinstance(maximum, int) else {}

    def state_filter(self, tool: str, state: str) -> dict[str, str]:
        """The argument that filters `tool`'s list by `state`, in the tool's own terms: its
        `state` (or older `status`) property, with an enum value or a word its description
        names."""
        schema = self.schemas.get(tool, {})
        prop = next((p for p in ("state", "status") if p in schema), None)
        if prop is None:
            return {}
        synonyms = STATES.get(state, (state,))
        spec = schema[prop]
        options = [o for o in spec.get("anyOf", [spec]) if isinstance(o, dict)]
        enum = [v for o in options for v in o.get("enum", [])]
        if enum:
            chosen = next((s for s in synonyms if s in enum), synonyms[0])
        else:
            text = str(spec.get("description", ""))
            chosen = next((s for s in synonyms if s in text), synonyms[0])
        return {prop: chosen}

    def need(self, name: str) -> Any:
        if name not in self.state:
            raise Blocked(f"needs {name}, which an earlier step could not obtain")
        return self.state[name]

    # Preflight: refuse anything that is not a sandbox, before any write -------------------------

    async def preflight(self) -> None:
        probe = self.conversation("preflight")
        plain = await self.gw.call(probe, "list_services", {"limit": 1})
        if plain.is_error or plain.rpc_error:
            raise Refused(f"list_services fails without any fault injected: {plain.got()}")
        faulted = await self.gw.call(probe, "list_services", {"limit": 1}, fault="database")
        if not faulted.is_error and faulted.rpc_error is None:
            raise Refused(
                "this company ignores the sandbox-only fault switch, so it is not a declared "
                "sandbox (environment=production): certification writes are refused"
            )
        if faulted.error_type != ErrorType.SYSTEM:
            raise Refused(f"unexpected answer to the sandbox probe: {faulted.got()}")
        with self.probe(
            7, "dependency down on a read → SYSTEM", "an outage is not 'we have nothing'"
        ) as row:
            self.judge(row, verdict_error(faulted, ErrorType.SYSTEM), faulted)

    # Setup: two customers, each in their own conversation -------------------------------------

    async def setup(self) -> None:
        """The conversations of the run: the first customer's main one, one that reads
        nothing (check 4), one that switches identity (check 2) and one that only reads
        terminal entities (check 3); and the second customer's."""
        self.a1, self.b1 = self.conversation("ana"), self.conversation("bruno")
        self.blind = self.conversation("ana-blind")
        self.switch = self.conversation("ana-switch")
        self.terminal = self.conversation("ana-terminal")
        for conversation in (self.a1, self.blind, self.switch, self.terminal):
            await self.gw.identify(conversation, self.ana)
        await self.gw.identify(self.b1, self.bruno)

    async def scheduled_at(self, conversation: str, contact: Contact, slot: dict) -> list[dict]:
        """The contact's scheduled appointments at the slot's local date and time."""
        listing = await self.gw.call(
            conversation,
            "list_my_appointments",
            {
                "identifier": contact.identifier,
                **self.state_filter("list_my_appointments", "scheduled"),
                **self.most("list_my_appointments"),
            },
        )
        items = _items(listing, "list_my_appointments")
        return [
            i
            for i in items
            if in_state(i, "scheduled")
            and i.get("date") == slot["date"]
            and i.get("time") == slot["time"]
            and i.get("professional") == slot.get("professional")
        ]

    async def cancelled_count(self, reference: str) -> int:
        """How many of the first customer's cancelled appointments carry this reference."""
        listing = await self.gw.call(
            self.a1,
            "list_my_appointments",
            {
                "identifier": self.ana.identifier,
                **self.state_filter("list_my_appointments", "cancelled"),
                **self.most("list_my_appointments"),
            },
        )
        items = _items(listing, "list_my_appointments")
        mine = (i for i in items if i.get("appointment") == reference)
        return sum(1 for i in mine if in_state(i, "cancelled"))

    async def appointment_shown(self, reference: str) -> dict[str, Any] | None:
        listing = await self.gw.call(
            self.a1,
            "list_my_appointments",
            {"identifier": self.ana.identifier, **self.most("list_my_appointments")},
        )
        found = _find(_items(listing, "list_my_appointments"), "appointment", reference)
        return found

    # Agenda: checks 1, 2, 3, 4, 5 ----------------------------------------------------------

    async def agenda(self) -> None:
        gw, ana, bruno = self.gw, self.ana, self.bruno
        services = _items(
            await gw.call(self.a1, "list_services", self.most("list_services")), "list_services"
        )
        window = {
            "from": (self.today + timedelta(days=7)).isoformat(),
            "to": (self.today + timedelta(days=20)).isoformat(),
            "limit": 3,
        }
        for service in services:
            args = {"service": service["name"], **window}
            found = await gw.call(self.a1, "find_available_slots", args)
            slots = _items(found, "find_available_slots")
            if len(slots) >= 2:
                break
        else:
            raise Blocked("no service has two free slots between 7 and 20 days from today")
        slot, other_slot = slots[0], slots[1]
        # The largest page of slots too, so check 6 measures the longest answer there is.
        await gw.call(
            self.a1, "find_available_slots", {**args, **self.most("find_available_slots")}
        )
        self.state["slot"] = slot
        # Bruno looks at the same slots before Ana books one (for the busy-slot check).
        seen_by_bruno = _items(
            await gw.call(self.b1, "find_available_slots", args), "find_available_slots"
        )
        book_args = {"identifier": ana.identifier, "service": args["service"], "slot": slot["slot"]}

        with self.probe(
            1,
            "same key twice: book_appointment",
            "a repeated booking returns the first answer and books once (counted by a read)",
        ) as row:
            before = len(await self.scheduled_at(self.a1, ana, slot))
            first = await gw.call(self.a1, "book_appointment", book_args)
            second = await gw.call(self.a1, "book_appointment", book_args)
            after = len(await self.scheduled_at(self.a1, ana, slot))
            self.judge(
                row,
                verdict_once(first, second, before, after),
                sent=f"{first.sent()} twice with the same {IDEMPOTENCY_KEY}",
            )
            if not first.is_error:
                self.state["appointment"] = first.body.get("appointment")

        with self.probe(
            5,
            "busy slot: book_appointment",
            "a slot taken since it was shown is refused, not double-booked",
        ) as row:
            mine = _find(seen_by_bruno, "slot", slot["slot"])
            if mine is None:
                raise Blocked("Bruno's search did not show the slot Ana booked")
            self.need("appointment")
            busy = await gw.call(
                self.b1,
                "book_appointment",
                {"identifier": bruno.identifier, "service": args["service"], "slot": slot["slot"]},
            )
            unchanged = (
                not await self.scheduled_at(self.b1, bruno, slot)
                and len(await self.scheduled_at(self.a1, ana, slot)) == 1
            )
            self.judge(
                row, verdict_refused_without_effect(busy, unchanged, ErrorType.VALIDATION), busy
            )

        blind = self.blind
        with self.probe(
            4,
            "unseen reference: cancel_appointment",
            "a mutation on the customer's own appointment, never shown in this conversation, "
            "is refused",
        ) as row:
            reference = self.need("appointment")
            attempt = await gw.call(
                blind,
                "cancel_appointment",
                {"identifier": ana.identifier, "appointment": reference},
            )
            unchanged = in_state(await self.appointment_shown(reference), "scheduled")
            self.judge(
                row,
                verdict_refused_without_effect(attempt, unchanged, ErrorType.VALIDATION),
                attempt,
            )
        with self.probe(
            4,
            "unseen slot: book_appointment",
            "a slot shown only in another conversation cannot be booked here",
        ) as row:
            attempt = await gw.call(
                blind,
                "book_appointment",
                {
                    "identifier": ana.identifier,
                    "service": args["service"],
                    "slot": other_slot["slot"],
                },
            )
            unchanged = not await self.scheduled_at(self.a1, ana, other_slot)
            self.judge(
                row,
                verdict_refused_without_effect(attempt, unchanged, ErrorType.VALIDATION),
                attempt,
            )
        with self.probe(
            4,
            "reference that exists nowhere: cancel_appointment",
            "an invented reference does not resolve: VALIDATION, never an action",
        ) as row:
            invented = "AP-" + "".join(
                secrets.choice("23456789ABCDEFGHJKMNPQRSTVWXYZ") for _ in range(6)
            )
            attempt = await gw.call(
                blind, "cancel_appointment", {"identifier": ana.identifier, "appointment": invented}
            )
            self.judge(row, verdict_error(attempt, ErrorType.VALIDATION), attempt)

        switch = self.switch
        with self.probe(
            2,
            "identity switch: cancel_appointment",
            "a conversation identified as one customer cannot act with another's identifier",
        ) as row:
            reference = self.need("appointment")
            shown = _items(
                await gw.call(
                    switch,
                    "list_my_appointments",
                    {"identifier": ana.identifier, **self.most("list_my_appointments")},
                ),
                "list_my_appointments",
            )
            if _find(shown, "appointment", reference) is None:
                raise Blocked("the booked appointment is not in the customer's list")
            attempt = await gw.call(
                switch,
                "cancel_appointment",
                {"identifier": bruno.identifier, "appointment": reference},
            )
            unchanged = in_state(await self.appointment_shown(reference), "scheduled")
            self.judge(
                row,
                verdict_refused_without_effect(attempt, unchanged, ErrorType.PERMISSION),
                attempt,
            )
        with self.probe(
            2,
            "identity switch on a read: list_my_appointments",
            "another customer's identifier does not open their data to this conversation",
        ) as row:
            attempt = await gw.call(
                switch,
                "list_my_appointments",
                {"identifier": bruno.identifier, **self.most("list_my_appointments")},
            )
            self.judge(row, verdict_error(attempt, ErrorType.PERMISSION), attempt)
        with self.probe(
            2,
            "another customer's appointment: cancel_appointment",
            "a customer cannot cancel an appointment that is not theirs",
        ) as row:
            reference = self.need("appointment")
            attempt = await gw.call(
                self.b1,
                "cancel_appointment",
                {"identifier": bruno.identifier, "appointment": reference},
            )
            unchanged = in_state(await self.appointment_shown(reference), "scheduled")
            self.judge(row, verdict_foreign(attempt, unchanged), attempt)

        with self.probe(
            1,
            "same key twice: cancel_appointment",
            "the key is looked up before the terminal-state guard: the retry of a cancellation "
            "that worked answers the same success, not 'already cancelled'",
        ) as row:
            reference = self.need("appointment")
            cancel_args = {"identifier": ana.identifier, "appointment": reference}
            before = await self.cancelled_count(reference)
            first = await gw.call(self.a1, "cancel_appointment", cancel_args)
            second = await gw.call(self.a1, "cancel_appointment", cancel_args)
            after = await self.cancelled_count(reference)
            self.judge(
                row,
                verdict_once(first, second, before, after),
                sent=f"{first.sent()} twice with the same {IDEMPOTENCY_KEY}",
            )
            if after:
                self.state["cancelled"] = reference

        terminal = self.terminal
        with self.probe(
            3,
            "cancelled appointment: cancel_appointment",
            "cancelling again is VALIDATION with the state the customer was shown",
        ) as row:
            reference = self.need("cancelled")
            listing = await gw.call(
                terminal,
                "list_my_appointments",
                {
                    "identifier": ana.identifier,
                    **self.state_filter("list_my_appointments", "cancelled"),
                    **self.most("list_my_appointments"),
                },
            )
            shown = _find(_items(listing, "list_my_appointments"), "appointment", reference)
            if shown is None:
                raise Blocked("the cancelled appointment is not in the customer's list")
            attempt = await gw.call(
                terminal,
                "cancel_appointment",
                {"identifier": ana.identifier, "appointment": reference},
            )
            self.judge(row, verdict_terminal(attempt, shown), attempt)
        with self.probe(
            3,
            "attended appointment: reschedule_appointment",
            "an attended appointment cannot be moved: VALIDATION with its state",
        ) as row:
            listing = await gw.call(
                terminal,
                "list_my_appointments",
                {
                    "identifier": ana.identifier,
                    **self.state_filter("list_my_appointments", "attended"),
                    **self.most("list_my_appointments"),
                },
            )
            attended = [
                i for i in _items(listing, "list_my_appointments") if in_state(i, "attended")
            ]
            if not attended:
                raise Blocked("the sandbox has no attended appointment for the first contact")
            slots = _items(await gw.call(terminal, "find_available_slots", args), "slots")
            if not slots:
                raise Blocked("no free slot to reschedule to")
            attempt = await gw.call(
                terminal,
                "reschedule_appointment",
                {
                    "identifier": ana.identifier,
                    "appointment": attended[0]["appointment"],
                    "slot": slots[0]["slot"],
                },
            )
            self.judge(row, verdict_terminal(attempt, attended[0]), attempt)

    # Sales: checks 2, 3, 4, 5 -----------------------------------------------------------------

    async def quote_shown(self, reference: str) -> dict[str, Any] | None:
        listing = await self.gw.call(
            self.a1,
            "list_my_quotes",
            {"identifier": self.ana.identifier, **self.most("list_my_quotes")},
        )
        found = _find(_items(listing, "list_my_quotes"), "reference", reference)
        return found

    async def sales(self) -> None:
        gw, ana, bruno = self.gw, self.ana, self.bruno
        products = _items(
            await gw.call(self.a1, "search_products", self.most("search_products")),
            "search_products",
        )
        product = next((p for p in products if p.get("in_stock")), None)
        if product is None:
            raise Blocked("the sandbox catalog has no product in stock")
        items = [{"sku": product["sku"], "quantity": 1}]

        with self.probe(
            5,
            "altered amount: create_quote",
            "a total the agent made up is refused with the real one, and nothing is created",
        ) as row:
            before = _items(
                await gw.call(
                    self.a1,
                    "list_my_quotes",
                    {"identifier": ana.identifier, **self.most("list_my_quotes")},
                ),
                "list_my_quotes",
            )
            altered = await gw.call(
                self.a1,
                "create_quote",
                {"identifier": ana.identifier, "items": items, "expected_total": "0.01"},
            )
            real = stated_total(altered)
            confirmed = None
            if real is not None:
                # The stated total must be the system's own: quoting with it succeeds.
                confirmed = await gw.call(
                    self.a1,
                    "create_quote",
                    {"identifier": ana.identifier, "items": items, "expected_total": str(real)},
                )
            after = _items(
                await gw.call(
                    self.a1,
                    "list_my_quotes",
                    {"identifier": ana.identifier, **self.most("list_my_quotes")},
                ),
                "list_my_quotes",
            )
            new = {q["reference"] for q in after} - {q["reference"] for q in before}
            verdict = verdict_altered_then_real(altered, confirmed, new)
            self.judge(row, verdict, *(e for e in (altered, confirmed) if e is not None))
            if verdict[0] and confirmed is not None:
                self.state["quote"] = confirmed.body["reference"]
                self.state["quote_total"] = real

        with self.probe(
            5,
            "altered amount: accept_quote",
            "accepting at a wrong total is refused with the real total; the quote stays open",
        ) as row:
            reference, real = self.need("quote"), self.need("quote_total")
            attempt = await gw.call(
                self.a1,
                "accept_quote",
                {"identifier": ana.identifier, "quote": reference, "expected_total": str(real + 1)},
            )
            verdict = verdict_altered_amount(attempt, real)
            if verdict[0] and not in_state(await self.quote_shown(reference), "sent"):
                verdict = (False, verdict[1] + "; but the quote is no longer sent")
            self.judge(row, verdict, attempt)

        with self.probe(
            2,
            "identity switch: reject_quote",
            "another customer's identifier is refused on a sales write",
        ) as row:
            reference = self.need("quote")
            switch = self.switch
            shown = _items(
                await gw.call(
                    switch,
                    "list_my_quotes",
                    {"identifier": ana.identifier, **self.most("list_my_quotes")},
                ),
                "list_my_quotes",
            )
            if _find(shown, "reference", reference) is None:
                raise Blocked("the new quote is not in the customer's list")
            attempt = await gw.call(
                switch, "reject_quote", {"identifier": bruno.identifier, "quote": reference}
            )
            unchanged = in_state(await self.quote_shown(reference), "sent")
            self.judge(
                row,
                verdict_refused_without_effect(attempt, unchanged, ErrorType.PERMISSION),
                attempt,
            )
        with self.probe(
            2,
            "another customer's quote: reject_quote",
            "a customer cannot resolve a quote that is not theirs",
        ) as row:
            reference = self.need("quote")
            attempt = await gw.call(
                self.b1, "reject_quote", {"identifier": bruno.identifier, "quote": reference}
            )
            unchanged = in_state(await self.quote_shown(reference), "sent")
            self.judge(row, verdict_foreign(attempt, unchanged), attempt)
        with self.probe(
            4,
            "unseen reference: reject_quote",
            "the customer's own quote, never shown in this conversation, cannot be resolved here",
        ) as row:
            reference = self.need("quote")
            attempt = await gw.call(
                self.blind, "reject_quote", {"identifier": ana.identifier, "quote": reference}
            )
            unchanged = in_state(await self.quote_shown(reference), "sent")
            self.judge(
                row,
                verdict_refused_without_effect(attempt, unchanged, ErrorType.VALIDATION),
                attempt,
            )

        # The run's quote is resolved now, so the sandbox keeps no open quote of ours.
        if "quote" in self.state:
            rejected = await gw.call(
                self.a1,
                "reject_quote",
                {"identifier": ana.identifier, "quote": self.state["quote"]},
            )
            if not rejected.is_error:
                self.state["rejected_quote"] = self.state["quote"]

        terminal = self.terminal
        for state, tool, wanted in (
            ("rejected", "reject_quote", "rejected_quote"),
            ("accepted", "accept_quote", None),
            ("expired", "accept_quote", None),
        ):
            with self.probe(
                3,
                f"{state} quote: {tool}",
                f"a {state} quote cannot be resolved again: VALIDATION with its state",
            ) as row:
                listing = await gw.call(
                    terminal,
                    "list_my_quotes",
                    {
                        "identifier": ana.identifier,
                        **self.state_filter("list_my_quotes", state),
                        **self.most("list_my_quotes"),
                    },
                )
                quotes = [q for q in _items(listing, "list_my_quotes") if in_state(q, state)]
                shown = _find(quotes, "reference", self.need(wanted)) if wanted else None
                if wanted is None:
                    shown = quotes[0] if quotes else None
                if shown is None:
                    raise Blocked(f"the first contact has no {state} quote in the sandbox")
                attempt = await gw.call(
                    terminal, tool, {"identifier": ana.identifier, "quote": shown["reference"]}
                )
                self.judge(row, verdict_terminal(attempt, shown), attempt)

    # Support: checks 1 (concurrent duplicates), 2, 3, 4 ----------------------------------------

    async def messages_with(self, case: str, text: str) -> int:
        shown = await self.gw.call(
            self.a1, "get_case", {"identifier": self.ana.identifier, "case": case}
        )
        if shown.is_error or not isinstance(shown.body, dict):
            raise Blocked(f"get_case failed: {shown.got()}")
        return sum(1 for m in shown.body.get("messages", []) if m.get("text") == text)

    async def support(self) -> None:
        gw, ana, bruno = self.gw, self.ana, self.bruno
        listing = await gw.call(
            self.a1,
            "list_my_cases",
            {
                "identifier": ana.identifier,
                **self.state_filter("list_my_cases", "open"),
                **self.most("list_my_cases"),
            },
        )
        open_cases = [c for c in _items(listing, "list_my_cases") if in_state(c, "open")]
        if not open_cases:
            raise Blocked("the first contact has no open case in the sandbox")
        case = open_cases[0]["reference"]

        with self.probe(
            1,
            "same key twice at once: add_case_comment",
            "two simultaneous calls with one key (a double emission in one turn) add one "
            "message and answer the same",
        ) as row:
            message = f"Mensaje de certificación {self.run_id}"
            comment = {"identifier": ana.identifier, "case": case, "message": message}
            before = await self.messages_with(case, message)
            answers: list[Exchange] = []

            async def send() -> None:
                answers.append(await gw.call(self.a1, "add_case_comment", comment))

            async with anyio.create_task_group() as group:
                group.start_soon(send)
                group.start_soon(send)
            after = await self.messages_with(case, message)
            self.judge(
                row,
                verdict_once(answers[0], answers[1], before, after),
                sent=f"{answers[0].sent()} twice at once with the same {IDEMPOTENCY_KEY}",
            )

        with self.probe(
            2,
            "identity switch: add_case_comment",
            "another customer's identifier is refused on a support write",
        ) as row:
            switch = self.switch
            shown = _items(
                await gw.call(
                    switch,
                    "list_my_cases",
                    {"identifier": ana.identifier, **self.most("list_my_cases")},
                ),
                "list_my_cases",
            )
            if _find(shown, "reference", case) is None:
                raise Blocked("the open case is not in the customer's list")
            message = f"Cambio de identidad {self.run_id}"
            attempt = await gw.call(
                switch,
                "add_case_comment",
                {"identifier": bruno.identifier, "case": case, "message": message},
            )
            unchanged = await self.messages_with(case, message) == 0
            self.judge(
                row,
                verdict_refused_without_effect(attempt, unchanged, ErrorType.PERMISSION),
                attempt,
            )
        with self.probe(
            2,
            "another customer's case: add_case_comment",
            "a customer cannot write on a case that is not theirs",
        ) as row:
            message = f"Caso ajeno {self.run_id}"
            attempt = await gw.call(
                self.b1,
                "add_case_comment",
                {"identifier": bruno.identifier, "case": case, "message": message},
            )
            unchanged = await self.messages_with(case, message) == 0
            self.judge(row, verdict_foreign(attempt, unchanged), attempt)
        with self.probe(
            2,
            "another customer's case: get_case",
            "a read of another customer's case by its exact reference shows nothing of it",
        ) as row:
            attempt = await gw.call(
                self.b1, "get_case", {"identifier": bruno.identifier, "case": case}
            )
            self.judge(
                row, verdict_error(attempt, ErrorType.PERMISSION, ErrorType.NOT_FOUND), attempt
            )
        with self.probe(
            4,
            "unseen reference: add_case_comment",
            "the customer's own case, never shown in this conversation, takes no message here",
        ) as row:
            message = f"Referencia no vista {self.run_id}"
            attempt = await gw.call(
                self.blind,
                "add_case_comment",
                {"identifier": ana.identifier, "case": case, "message": message},
            )
            unchanged = await self.messages_with(case, message) == 0
            self.judge(
                row,
                verdict_refused_without_effect(attempt, unchanged, ErrorType.VALIDATION),
                attempt,
            )
        with self.probe(
            3,
            "closed case: add_case_comment",
            "a closed case is not reopened by a message: VALIDATION with its state",
        ) as row:
            terminal = self.terminal
            listing = await gw.call(
                terminal,
                "list_my_cases",
                {
                    "identifier": ana.identifier,
                    **self.state_filter("list_my_cases", "closed"),
                    **self.most("list_my_cases"),
                },
            )
            closed = [c for c in _items(listing, "list_my_cases") if in_state(c, "closed")]
            if not closed:
                raise Blocked("the first contact has no closed case in the sandbox")
            attempt = await gw.call(
                terminal,
                "add_case_comment",
                {"identifier": ana.identifier, "case": closed[0]["reference"], "message": "Hola"},
            )
            self.judge(row, verdict_terminal(attempt, closed[0]), attempt)

    # Outcomes: check 7 (and 1: a failure is not stored) -------------------------------------------

    async def outcomes(self) -> None:
        gw, ana = self.gw, self.ana
        with self.probe(
            7, "no results: search_products", "a search that finds nothing is a success"
        ) as row:
            attempt = await gw.call(
                self.a1, "search_products", {"query": f"zzz certificación {self.run_id}"}
            )
            self.judge(row, verdict_empty_list(attempt), attempt)
        missing = "QT-" + "".join(
            secrets.choice("23456789ABCDEFGHJKMNPQRSTVWXYZ") for _ in range(6)
        )
        for tool, args in (
            ("get_quote", {"identifier": ana.identifier, "quote": missing}),
            (
                "find_available_slots",
                {"service": f"Servicio inexistente {self.run_id}", "from": "mañana"},
            ),
        ):
            with self.probe(
                7, f"missing data: {tool}", "something that does not exist is NOT_FOUND"
            ) as row:
                attempt = await gw.call(self.a1, tool, args)
                self.judge(row, verdict_error(attempt, ErrorType.NOT_FOUND), attempt)
        with self.probe(
            7,
            "missing data: identify_contact",
            "an unknown customer is NOT_FOUND, not an error of the system",
        ) as row:
            attempt = await gw.call(
                self.conversation("stranger"),
                "identify_contact",
                {"email": f"nadie-{self.run_id}@example.com"},
            )
            self.judge(row, verdict_error(attempt, ErrorType.NOT_FOUND), attempt)

        with self.probe(
            7,
            "bad arguments: list_services",
            "an argument outside the tool's schema is VALIDATION naming it, for the model to fix",
        ) as row:
            attempt = await gw.call(self.a1, "list_services", {"limit": 0})
            self.judge(row, verdict_names_field(attempt, "limit"), attempt)

        outage = self.conversation("outage")
        args = {"document": ana.document_number}
        with self.probe(
            7, "dependency down on a write: identify_contact", "an outage during a write is SYSTEM"
        ) as row:
            down = await gw.call(outage, "identify_contact", args, fault="database")
            self.judge(row, verdict_error(down, ErrorType.SYSTEM), down)
        with self.probe(
            1,
            "same key after a failure: identify_contact",
            "only successes are stored: the retry of a call that failed runs for real",
        ) as row:
            retry = await gw.call(outage, "identify_contact", args)
            self.judge(
                row,
                verdict_success(retry),
                retry,
                sent=f"{retry.sent()} (same key as the SYSTEM failure)",
            )
        with self.probe(
            7,
            "every error: canonical type and a user_message",
            "each of the six types, with a message for the customer",
        ) as row:
            errors = [e for e in gw.exchanges if e.is_error]
            self.judge(
                row, verdict_error_shapes(errors), sent=f"{len(errors)} error answers of this run"
            )

    # Check 6: inspect every response collected ---------------------------------------------

    def inspect_responses(self) -> None:
        exchanges = self.gw.exchanges
        owned = owned_references(exchanges)
        problems: dict[str, list[str]] = {"size": [], "ids": [], "third": [], "secrets": []}
        for exchange in exchanges:
            others = [c for c in self.contacts if c != exchange.speaker]
            foreign = set().union(*(refs for c, refs in owned.items() if c != exchange.speaker))
            for kind, detail in response_problems(
                exchange, others=others, foreign_references=foreign, secrets_=(self.token,)
            ):
                problems[kind].append(f"{exchange.sent()} → {detail}")
        largest = max(exchanges, key=lambda e: len(e.text), default=None)
        sent = f"{len(exchanges)} responses of this run"
        rows = (
            (
                "size",
                "responses at most 3,000 characters",
                "the Gateway never has to cut an answer",
            ),
            ("ids", "no internal ids", "no primary keys or UUIDs reach the agent"),
            (
                "third",
                "no other customer's data",
                "no name, document, phone, email or entity reference of another customer",
            ),
            ("secrets", "no secrets or traces", "no token, stack trace or internal path"),
        )
        for key, name, proves in rows:
            with self.probe(6, name, proves) as row:
                row.sent = sent
                row.passed = bool(exchanges) and not problems[key]
                if problems[key]:
                    row.got = f"{len(problems[key])} found, e.g. {problems[key][0]}"
                elif key == "size" and largest is not None:
                    row.got = f"largest {len(largest.text)} characters ({largest.tool})"
                else:
                    row.got = "none found"
