"""Reading tool answers: their lists, the entities in them and the states they show."""

import secrets
from collections.abc import Iterator
from typing import Any

from tooling.certification.exchange import Blocked, Exchange

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
# The alphabet of public references (no 0, 1, I, L, O, U), for ones that exist nowhere.
REFERENCE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTVWXYZ"


def items(exchange: Exchange, what: str) -> list[dict[str, Any]]:
    """The `items` of a list answer; Blocked (naming `what`) if the call gave none."""
    if exchange.is_error or not isinstance(exchange.body, dict):
        raise Blocked(f"{what} failed: {exchange.got()}")
    found = exchange.body.get("items")
    if not isinstance(found, list):
        raise Blocked(f"{what} answered no list")
    return found


def find(entries: list[dict[str, Any]], key: str, value: str) -> dict[str, Any] | None:
    return next((entry for entry in entries if entry.get(key) == value), None)


def shown_states(item: dict[str, Any] | None) -> set[str]:
    """Every way an answer shows an entity's state: value, older "status", and label."""
    if not item:
        return set()
    return {str(item[k]) for k in ("state", "status", "state_label", "status_label") if k in item}


def in_state(item: dict[str, Any] | None, state: str) -> bool:
    synonyms = {s.casefold() for s in STATES.get(state, (state,))}
    return any(shown.casefold() in synonyms for shown in shown_states(item))


def walk(value: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    """Every (path, key, value) of a JSON document."""
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            yield here, str(key), item
            yield from walk(item, here)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from walk(item, f"{path}[{index}]")


def invented_reference(prefix: str) -> str:
    """A well-formed public reference (`AP-…`, `QT-…`) made up here, never read from an answer."""
    return f"{prefix}-" + "".join(secrets.choice(REFERENCE_ALPHABET) for _ in range(6))
