"""Log lines as operators read them (settings.LOGGING, also in Celery's worker and beat,
config.celery): plain text by default, one JSON object per line with GARANTE_LOG_FORMAT=json;
either way the request id on every line written while a request runs, the task's id on every
line written while a Celery task runs, and personal data and secrets masked in every field.

Masking goes by the record's structure, not only its message (`mask_record`): the message's
arguments (a mapping's values by their keys), every field a line carries besides the standard
ones (Django's `request`, Celery's `data` with a task's args and kwargs, `extra=` fields), the
exception's and the stack's text. A request is written as its method and path, never its query
string; a key that names a secret or an identifier hides its value whatever it is; text goes
through core.redaction's rule; numbers, booleans and None are kept (counts, durations, ids,
statuses: phones and document numbers are strings everywhere in the project). Our own lines
never pass arguments, codes or tokens in the first place: this is the net under them.
"""

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from celery import current_task
from django.http import HttpRequest

from core.redaction import IDENTIFIER_KEYS, SECRET_KEYS, scrub_secrets
from core.request_log import ALREADY_MASKED, current_request, loggable_path

# Keys whose values a line never shows, whatever their shape.
_HIDDEN_KEYS = SECRET_KEYS | IDENTIFIER_KEYS | {"authorization", "destination", "to"}
# How deep a field's nested mappings and lists are followed; deeper is one mark.
_MAX_DEPTH = 4
# What every record has: a line's own fields are the others (`extra=`, the filter's).
_RECORD_ATTRIBUTES = frozenset(
    logging.LogRecord("", logging.INFO, "", 0, "", None, None).__dict__
) | {"message", "asctime", "taskName"}
# Set on a record once masked, so that a filter and a formatter both on the way mask it once;
# the request line (core.request_log) comes with it set, masked by its writer.
_MASKED = ALREADY_MASKED


def masked(value: Any, key: str = "", depth: int = 0) -> Any:
    """`value` as a log line may show it (see the module's docstring)."""
    if value is None or (isinstance(value, str) and not value):
        return value
    if key.lower() in _HIDDEN_KEYS:
        return "[hidden]"
    if isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return scrub_secrets(value)
    if isinstance(value, HttpRequest):
        return f"{value.method} {loggable_path(value, value.path)}"
    if isinstance(value, Mapping | list | tuple | set | frozenset):
        if depth >= _MAX_DEPTH:
            return "[…]"
        if isinstance(value, Mapping):
            return {str(k): masked(v, str(k), depth + 1) for k, v in value.items()}
        return [masked(item, key, depth + 1) for item in value]
    return scrub_secrets(str(value))


def _masked_args(args: Any) -> Any:
    # A mapping is the one argument of a `%(name)s` message (Celery's trace lines); a tuple
    # holds the `%s` ones. Only what a string's text would not show masked is changed here.
    if isinstance(args, Mapping):
        return {k: masked(v, str(k)) for k, v in args.items()}
    if isinstance(args, tuple):
        return tuple(
            masked(a) if isinstance(a, HttpRequest | Mapping | list | set) else a for a in args
        )
    return args


def mask_record(record: logging.LogRecord) -> None:
    """Mask everything of `record` a line may show, in place (once)."""
    fields = record.__dict__
    if fields.get(_MASKED):
        return
    fields[_MASKED] = True
    if record.args:
        record.args = _masked_args(record.args)
        try:
            message = record.getMessage()
        except (TypeError, ValueError, KeyError):
            # A hidden value where the message wanted a number (`%(code)d`): the arguments are
            # not shown rather than shown unmasked.
            message = f"{record.msg} [arguments hidden]"
    else:
        message = str(record.msg)
    request = fields.get("request")
    if isinstance(request, HttpRequest) and request.path in message:
        # Django's own lines ("Not Found: /path") name the path a link's credential may be in.
        message = message.replace(request.path, loggable_path(request, request.path))
    record.msg = scrub_secrets(message)
    record.args = None
    for key, value in list(fields.items()):
        if key not in _RECORD_ATTRIBUTES and key != _MASKED:
            fields[key] = masked(value, key)
    if record.exc_text:
        # Formatted (and cached) by a handler before ours.
        record.exc_text = scrub_secrets(record.exc_text)


class RequestContextFilter(logging.Filter):
    """Stamps the request id (and the company, once known), or the running Celery task's id
    and name, on a record; and masks it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.__dict__.get(_MASKED) and hasattr(record, "request_id"):
            return True  # the request line: stamped and masked by its writer
        state = current_request()
        if state is not None:
            if not hasattr(record, "request_id"):
                record.request_id = state.request_id
            if getattr(record, "company", None) is None and state.company_id is not None:
                record.company = state.company_id
        task = current_task
        if task and not hasattr(record, "task_id"):
            # The proxy is empty outside a task (a request, a command, the worker's own lines).
            record.task_id = task.request.id
            record.task_name = task.name
        mask_record(record)
        return True


class PlainFormatter(logging.Formatter):
    """The readable console line (`make demo`): the message masked as in JSON lines."""

    def format(self, record: logging.LogRecord) -> str:
        mask_record(record)
        return super().format(record)

    def formatException(self, ei: Any) -> str:
        return scrub_secrets(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return scrub_secrets(super().formatStack(stack_info))


# One encoder for every line (it keeps no state between calls); a value JSON cannot hold is
# written as its text.
_encoder = json.JSONEncoder(ensure_ascii=False, default=str)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (ISO 8601, UTC), level, logger, message, then the line's
    own fields (request_id, company, tool, conversation_id, outcome, duration_ms, task_id...)
    and an exception's text, masked. Written here rather than with python-json-logger: the
    same object for about half its CPU (6 against 11 us a line, measured; one is written per
    request)."""

    def format(self, record: logging.LogRecord) -> str:
        mask_record(record)
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRIBUTES and key != _MASKED:
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
