"""Check 6: every answer of the run, errors included, inspected for size, ids, leaks and secrets."""

import json
import re

from tooling.certification.answers import walk
from tooling.certification.exchange import Contact, Exchange
from tooling.certification.scenario import Scenario

OUTPUT_LIMIT = 3000

_UUID = re.compile(
    r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[1-8][0-9a-fA-F]{3}-?[89abAB][0-9a-fA-F]{3}-?[0-9a-fA-F]{12}"
)
_ID_KEY = re.compile(r"^(id|pk|uuid)$|_(id|pk|uuid)$", re.IGNORECASE)
_REFERENCE = re.compile(r"\b[A-Z]{2}-[0-9A-Z]{6}\b")
_LEAKS = ("Traceback (most recent call last)", 'File "/', "site-packages", "django.db.")
# Keys of read and write answers that name an entity of the speaker (not slots: those are
# public, the same for everybody).
_OWNED_REFERENCE_KEYS = ("appointment", "reference")
# Check 6's rows: the kind of problem each counts, its name and what it proves.
ROWS = (
    ("size", "responses at most 3,000 characters", "the Gateway never has to cut an answer"),
    ("ids", "no internal ids", "no primary keys or UUIDs reach the agent"),
    (
        "third",
        "no other customer's data",
        "no name, document, phone, email or entity reference of another customer",
    ),
    ("secrets", "no secrets or traces", "no token, stack trace or internal path"),
)

Problems = list[tuple[str, str]]


def response_problems(
    exchange: Exchange,
    *,
    others: list[Contact],
    foreign_references: set[str] = frozenset(),
    secrets_: tuple[str, ...] = (),
) -> Problems:
    """What check 6 objects to in one response, as (kind, detail); empty when it is clean.

    Kinds: "size" (over 3,000 characters), "ids" (keys named id/pk/uuid or ending in
    _id/_pk/_uuid, UUIDs anywhere), "third" (another customer's private data or entity
    references; what the caller itself sent in this call is not a leak) and "secrets" (the
    token, stack traces, internal paths).
    """
    structured = json.dumps(exchange.body, ensure_ascii=False, separators=(",", ":"))
    haystack = f"{exchange.text}\n{structured}"
    return [
        *_size_problems(exchange.text, structured),
        *_id_problems(exchange, haystack),
        *_third_party_problems(exchange, haystack, others, foreign_references),
        *_secret_problems(haystack, secrets_),
    ]


def _size_problems(text: str, structured: str) -> Problems:
    problems = []
    if len(text) > OUTPUT_LIMIT:
        problems.append(("size", f"{len(text)} characters (max {OUTPUT_LIMIT})"))
    if len(structured) > OUTPUT_LIMIT:
        problems.append(("size", f"structured content of {len(structured)} characters"))
    return problems


def _id_problems(exchange: Exchange, haystack: str) -> Problems:
    problems = [
        ("ids", f"internal id key {path!r}")
        for path, key, _value in walk(exchange.body)
        if _ID_KEY.search(key)
    ]
    if uuid := _UUID.search(haystack):
        problems.append(("ids", f"a UUID {uuid.group(0)}"))
    return problems


def _third_party_problems(
    exchange: Exchange, haystack: str, others: list[Contact], foreign_references: set[str]
) -> Problems:
    problems = []
    sent = json.dumps(exchange.arguments, ensure_ascii=False).casefold()
    for contact in others:
        for pattern in contact.private_patterns():
            found = pattern.search(haystack)
            if found and found.group(0).casefold() not in sent:
                problems.append(("third", f"{contact.label}'s data {found.group(0)!r}"))
    for reference in sorted(foreign_references):
        if reference in haystack and reference.casefold() not in sent:
            problems.append(("third", f"another customer's reference {reference}"))
    return problems


def _secret_problems(haystack: str, secrets_: tuple[str, ...]) -> Problems:
    problems = [
        ("secrets", "the gateway token") for secret in secrets_ if secret and secret in haystack
    ]
    problems += [("secrets", f"internal detail {leak!r}") for leak in _LEAKS if leak in haystack]
    return problems


def owned_references(exchanges: list[Exchange]) -> dict[Contact, set[str]]:
    """References each customer's own conversations were given for their entities."""
    owned: dict[Contact, set[str]] = {}
    for exchange in exchanges:
        if exchange.speaker is None or exchange.is_error:
            continue
        mine = owned.setdefault(exchange.speaker, set())
        for _path, key, value in walk(exchange.body):
            is_reference = isinstance(value, str) and _REFERENCE.fullmatch(value)
            if key in _OWNED_REFERENCE_KEYS and is_reference:
                mine.add(value)
    return owned


def inspect_responses(s: Scenario) -> None:
    """Check 6's rows, over every exchange of the run: one row per kind of problem."""
    exchanges = s.gw.exchanges
    problems = run_problems(s, exchanges)
    largest = max(exchanges, key=lambda e: len(e.text), default=None)
    for kind, name, proves in ROWS:
        with s.probe(6, name, proves) as row:
            row.sent = f"{len(exchanges)} responses of this run"
            row.passed = bool(exchanges) and not problems[kind]
            if problems[kind]:
                row.got = f"{len(problems[kind])} found, e.g. {problems[kind][0]}"
            elif kind == "size" and largest is not None:
                row.got = f"largest {len(largest.text)} characters ({largest.tool})"
            else:
                row.got = "none found"


def run_problems(s: Scenario, exchanges: list[Exchange]) -> dict[str, list[str]]:
    """Every problem of every response by kind, each as "what was sent → what is wrong".
    Another customer is anyone but the conversation's speaker, with the references their own
    conversations were given."""
    owned = owned_references(exchanges)
    problems: dict[str, list[str]] = {kind: [] for kind, _name, _proves in ROWS}
    for exchange in exchanges:
        others = [c for c in s.contacts if c != exchange.speaker]
        foreign = set().union(*(refs for c, refs in owned.items() if c != exchange.speaker))
        for kind, detail in response_problems(
            exchange, others=others, foreign_references=foreign, secrets_=(s.token,)
        ):
            problems[kind].append(f"{exchange.sent()} → {detail}")
    return problems
