"""What counts as personal data or a secret in free text, and how it is masked: the one rule of
the conversation trace (tooling.trace), the log lines (core.logs) and error reports
(config.sentry).

A text is read once, left to right, by one pattern whose alternatives are tried in order at
each place. What operators need and is never personal (UUIDs such as Celery's task ids, long
hex ids such as request ids, dates, decimals such as durations, IPv4 addresses) is matched
first and kept whole, so that no masking rule bites into it; then emails and numbers long
enough to be a phone or a document are masked and, for logs and error reports, credentials
too: bearer tokens, the project's tokens, signed values and other token-shaped words,
`code=`/`'token': ...` pairs, query strings, and digit strings quoted as a code is.
"""

import re

# Keys whose values identify a person: shown as their kind and last two characters.
IDENTIFIER_KEYS = frozenset({"identifier", "document", "document_number", "phone", "email"})
# Keys whose values are secrets: nothing of them is kept.
SECRET_KEYS = frozenset({"code", "confirmation_code", "password", "token", "secret", "pin", "otp"})
# Names of secrets where a text writes `name=value` or `'name': 'value'` (a query string, a
# dict's repr, a header): their values are hidden.
_SECRET_NAMES = (
    r"confirmation_code|code|otp|pin|password|passwd|token|secret|signature|sig|api_?key|access_token"
    r"|refresh_token|sessionid|csrftoken|csrfmiddlewaretoken|authorization"
)
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"

# (name, pattern, whether it masks a credential: only scrub_secrets applies those), in the
# order they are tried at each place of a text. The first ones start only where a word does
# (_compiled): a scan then skips the inside of words at the cost of one look behind.
_WORD_START_RULES: list[tuple[str, str, bool]] = [
    ("bearer", r"(?i:bearer)\s+\S+", True),
    ("project_token", r"g[ti]_[A-Za-z0-9_-]{16,}", True),
    (
        "secret_pair",
        r"(?=[AaCcOoPpTtSsRr])"  # the names' first letters: most words fail here at once
        r"(?P<secret_name>(?i:(?:" + _SECRET_NAMES + r")\b)['\"]?\s*[:=]\s*['\"]?)"
        r"(?:(?i:bearer|basic|token)\s+)?[^\s'\",;&})\]]+",
        True,
    ),
    ("uuid", r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b", False),
    ("hex_id", r"(?=[0-9a-f]{16})(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{16,}\b", False),
    # A signed value (django.core.signing's `value:signature`, `value:time:signature`) or a
    # random credential (secrets.token_urlsafe): 20 or more URL-safe characters; masked when
    # they mix cases with digits, '-' or '_' (_token_like). An email's local part is not one.
    (
        "token_like",
        r"(?<![.-])(?=[\w.:-]{20})(?:[\w.-]+:){0,2}[A-Za-z0-9_-]{20,}(?![\w.+%-]*(?:@|%40))",
        True,
    ),
    ("email", r"[\w.+-]++(?:@|%40)[\w-]+(?:\.[\w-]+)+", False),
    ("date", r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}/\d{1,2}/\d{2,4}", False),
    ("ipv4", rf"{_OCTET}\.{_OCTET}\.{_OCTET}\.{_OCTET}\b(?!\.\d)", False),
    ("decimal", r"(?<![.+])\d+\.\d+(?![\d.])", False),
]
_ANYWHERE_RULES: list[tuple[str, str, bool]] = [
    # A query string (of a URL, a path, a request's repr): what a form or a filter sent.
    ("query", r"\?(?<=[\w/]\?)[\w.~%+-]+=[^\s'\"<>]*", True),
    # A code as a repr or a JSON text writes a string of digits: '482913'.
    ("quoted_digits", r"(?P<quote>['\"])\d{4,8}(?P=quote)", True),
    # Seven or more digits, possibly grouped by spaces, dots, dashes or brackets (and a
    # document number's letter): a phone or a document number, inside a word too (X1234567L).
    ("number", r"\+?\d(?:[\s().-]*\d){6,}(?:[.-]?[A-Za-z](?![A-Za-z]))?", False),
]
_KEPT = frozenset({"uuid", "hex_id", "date", "ipv4", "decimal"})
# What a text needs for any rule to apply; most of a line's fields (names, a method, an
# outcome) have none of it and are returned at once.
_MAY_APPLY = re.compile(r"[\d@?:=]|(?i:bearer)|[A-Za-z0-9_-]{20}")


def _compiled(*, secrets: bool, tokens: bool = True) -> re.Pattern[str]:
    def alternatives(rules: list[tuple[str, str, bool]]) -> str:
        return "|".join(
            f"(?P<{name}>{pattern})"
            for name, pattern, credential in rules
            if (secrets or not credential) and (tokens or name != "token_like")
        )

    return re.compile(
        f"(?<!\\w)(?:{alternatives(_WORD_START_RULES)})|{alternatives(_ANYWHERE_RULES)}"
    )


_TEXT = _compiled(secrets=False)
_SECRETS = _compiled(secrets=True)
_SECRETS_BUT_TOKENS = _compiled(secrets=True, tokens=False)


def _token_like(text: str) -> bool:
    word = text.rsplit(":", 1)[-1]
    return (
        any(c.isupper() for c in word)
        and any(c.islower() for c in word)
        and any(c.isdigit() or c in "-_" for c in word)
    )


def _masked(match: re.Match[str]) -> str:
    kind = match.lastgroup
    text = match.group(0)
    if kind in _KEPT:
        return text
    if kind == "token_like":
        # A long word that is no credential (a snake_case name) may still hold a number.
        return "[token]" if _token_like(text) else _SECRETS_BUT_TOKENS.sub(_masked, text)
    if kind == "bearer":
        return "Bearer [token]"
    if kind == "project_token":
        return "[token]"
    if kind == "secret_pair":
        return match.group("secret_name") + "[hidden]"
    if kind == "email":
        return "[email]"
    if kind == "query":
        return "?[query]"
    if kind == "quoted_digits":
        return f"{match.group('quote')}[number]{match.group('quote')}"
    return "[number]"


def scrub_text(text: str) -> str:
    """Free text with anything that looks like an email, a phone or a document number masked."""
    if not _MAY_APPLY.search(text):
        return text
    return _TEXT.sub(_masked, text)


def scrub_secrets(text: str) -> str:
    """`scrub_text`, and credentials masked too: for text that may hold a request, a header or
    a task's arguments (a log line, an error report)."""
    if not _MAY_APPLY.search(text):
        return text
    return _SECRETS.sub(_masked, text)
