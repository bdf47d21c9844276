"""What counts as personal data or a secret in free text, and how it is masked: the one rule of
the conversation trace (tooling.trace), the log lines (core.logs) and error reports
(config.sentry)."""

import re

# Keys whose values identify a person: shown as their kind and last two characters.
IDENTIFIER_KEYS = frozenset({"identifier", "document", "document_number", "phone", "email"})
# Keys whose values are secrets: nothing of them is kept.
SECRET_KEYS = frozenset({"code", "password", "token", "secret", "pin", "otp"})

_EMAIL = re.compile(r"[^\s@]+@[^\s@]+")
# Seven or more digits, possibly grouped by spaces, dots, dashes or brackets: a phone or a
# document number. Dates (2026-12-01, 01/12/2026) are kept, they are what staff look for.
_LONG_NUMBER = re.compile(r"\+?\d(?:[\s().-]*\d){6,}[A-Za-z]?")
_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}/\d{1,2}/\d{2,4}")
# A bearer credential as it travels (an Authorization header's value) and the project's own
# tokens by their prefixes (gateway gt_, integration gi_), wherever they stand in a text.
_BEARER = re.compile(r"(?i)\bbearer\s+\S+")
_TOKEN = re.compile(r"\bg[ti]_[A-Za-z0-9_-]{16,}")


def scrub_text(text: str) -> str:
    """Free text with anything that looks like an email, a phone or a document number masked."""
    text = _EMAIL.sub("[email]", text)
    return _LONG_NUMBER.sub(lambda m: m.group(0) if _DATE.search(m.group(0)) else "[number]", text)


def scrub_secrets(text: str) -> str:
    """`scrub_text`, and bearer credentials and the project's tokens masked too: for text that
    may hold a request's headers (a log line, an error report)."""
    if "earer" in text or "_" in text:
        text = _TOKEN.sub("[token]", _BEARER.sub("Bearer [token]", text))
    return scrub_text(text)
