"""The row evaluations: pure functions over `Exchange`s, so tests can feed them wrong answers."""

from decimal import Decimal, InvalidOperation
from typing import Any

from core.errors import ErrorType
from tooling.certification.answers import shown_states
from tooling.certification.exchange import Exchange, short

CANONICAL_ERROR_TYPES = frozenset(t.value for t in ErrorType)

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
        return False, f"answers differ: {short(first.text, 60)} vs {short(second.text, 60)}"
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
    grouped = f"{total:,.2f}"  # 1,077.23; in Spanish 1.077,23 (core.l10n's money format)
    spoken = {
        f"{total:.2f}",
        f"{total:.2f}".replace(".", ","),
        grouped,
        grouped.translate(str.maketrans(",.", ".,")),
    }
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
    return True, f"{got}; message: {short(exchange.body.get('user_message'), 70)}"


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
        return False, f"expected a success with an empty list, got {short(body, 80)}"
    return True, "success, items=[] count=0"
