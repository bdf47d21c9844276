"""Log lines as operators read them (settings.LOGGING): plain text by default, one JSON object
per line with GARANTE_LOG_FORMAT=json; either way the request id on every line written while
a request runs, and personal data and secrets masked in whatever a line says.

The masking is the trace's rule (core.redaction) applied to the message, to an exception's
text and to the free-text fields our own lines carry (a conversation id or a path a caller
chose), so a line that quotes a mail server's refusal or a tool's failure cannot carry an
email, a phone, a document number or a token. Our own lines never pass arguments, codes or
tokens in the first place: these filters are the net under them.
"""

import logging
from typing import Any

from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

from core.redaction import scrub_secrets
from core.request_log import current_request

# Fields of our own lines whose values come from the caller.
_FREE_TEXT_FIELDS = ("conversation_id", "path")


class RequestContextFilter(logging.Filter):
    """Stamps the request id (and the company, once known) on a record, and masks it."""

    def filter(self, record: logging.LogRecord) -> bool:
        state = current_request()
        if state is not None:
            if not hasattr(record, "request_id"):
                record.request_id = state.request_id
            if getattr(record, "company", None) is None and state.company_id is not None:
                record.company = state.company_id
        record.msg = scrub_secrets(record.getMessage())
        record.args = None
        fields = record.__dict__
        for name in _FREE_TEXT_FIELDS:
            value = fields.get(name)
            if isinstance(value, str):
                fields[name] = scrub_secrets(value)
        return True


class PlainFormatter(logging.Formatter):
    """The readable console line (`make demo`), its exceptions masked."""

    def formatException(self, ei: Any) -> str:
        return scrub_secrets(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return scrub_secrets(super().formatStack(stack_info))


class JsonFormatter(_JsonFormatter):
    """One JSON object per line (python-json-logger): time, level, logger, message and the
    line's own fields (request_id, company, tool, conversation_id, outcome, duration_ms...)."""

    def formatException(self, ei: Any) -> str:  # type: ignore[override]
        return scrub_secrets(super().formatException(ei))  # type: ignore[arg-type]

    def formatStack(self, stack_info: str) -> str:  # type: ignore[override]
        return scrub_secrets(super().formatStack(stack_info))  # type: ignore[arg-type]
