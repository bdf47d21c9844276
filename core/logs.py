"""Log lines as operators read them (settings.LOGGING): plain text by default, one JSON object
per line with GARANTE_LOG_FORMAT=json; either way the request id on every line written while
a request runs, and personal data and secrets masked in whatever a line says.

The masking is the trace's rule (core.redaction) applied to the message, to an exception's
text and to the free-text fields our own lines carry (a conversation id or a path a caller
chose), so a line that quotes a mail server's refusal or a tool's failure cannot carry an
email, a phone, a document number or a token. Our own lines never pass arguments, codes or
tokens in the first place: these filters are the net under them.
"""

import json
import logging
from datetime import UTC, datetime
from typing import Any

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


# What every record has: the line's own fields are the others (`extra=`, the filter's).
_RECORD_ATTRIBUTES = frozenset(
    logging.LogRecord("", logging.INFO, "", 0, "", None, None).__dict__
) | {"message", "asctime", "taskName"}
# One encoder for every line (it keeps no state between calls); a value JSON cannot hold is
# written as its text.
_encoder = json.JSONEncoder(ensure_ascii=False, default=str)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (ISO 8601, UTC), level, logger, message, then the line's
    own fields (request_id, company, tool, conversation_id, outcome, duration_ms...) and an
    exception's text, masked. Written here rather than with python-json-logger: the same
    object for about half its CPU (6 against 11 us a line, measured; one is written per
    request)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRIBUTES:
                line[key] = value
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack_info"] = self.formatStack(record.stack_info)
        return _encoder.encode(line)

    def formatException(self, ei: Any) -> str:
        return scrub_secrets(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return scrub_secrets(super().formatStack(stack_info))
