"""The JSON lines the project's logging writes while a test runs (tests/config/test_logs.py,
test_log_masking.py)."""

import io
import json
import logging
from collections.abc import Iterator

import pytest
from django.conf import settings

from core.logs import JsonFormatter, RequestContextFilter


class Lines:
    """The JSON lines the project's formatter and filter write while a test runs."""

    def __init__(self, stream: io.StringIO) -> None:
        self.stream = stream
        self._levels: dict[logging.Logger, int] = {}

    @property
    def text(self) -> str:
        return self.stream.getvalue()

    def all(self) -> list[dict]:
        return [json.loads(line) for line in self.text.splitlines() if line.strip()]

    def events(self, event: str) -> list[dict]:
        return [line for line in self.all() if line.get("event") == event]

    def at_info(self, *names: str) -> None:
        """Let these loggers' INFO lines through for the rest of the test."""
        for name in names:
            logger = logging.getLogger(name)
            self._levels.setdefault(logger, logger.level)
            logger.setLevel(logging.INFO)

    def restore(self) -> None:
        for logger, level in self._levels.items():
            logger.setLevel(level)


@pytest.fixture
def json_lines() -> Iterator[Lines]:
    """A handler built as settings.LOGGING builds its JSON one, on the root logger, with the
    per-request and per-call loggers at INFO (the test settings keep the root at WARNING)."""
    options = {k: v for k, v in settings.LOGGING["formatters"]["json"].items() if k != "()"}
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(**options))
    handler.addFilter(RequestContextFilter())
    root = logging.getLogger()
    lines = Lines(stream)
    root.addHandler(handler)
    lines.at_info("garante.requests", "garante.tools")
    try:
        yield lines
    finally:
        root.removeHandler(handler)
        lines.restore()
