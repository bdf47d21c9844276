"""The one output cap: every tool result fits in 3,000 characters of JSON (an error is capped
to the same limit where it is mapped, core.outcome); and the shapes of list answers."""

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from pydantic import Field

from core.errors import ValidationFailed
from core.outcome import dumps
from tooling.registry import ToolOutput

# A list tool's `cursor` argument: where its previous answer stopped. Cursors are positions in
# the list as the tool orders it (rows added meanwhile may shift a page by a few), made only by
# us, opaque to the model, and reach at most MAX_CURSOR_START rows deep.
Cursor = Field(
    default=None,
    max_length=16,
    description="To see more: the next_cursor of the previous answer of this same list.",
)
MAX_CURSOR_START = 10_000


@dataclass(frozen=True)
class Page:
    rows: list[Any]
    has_more: bool
    start: int


def page(rows: Sequence[Any], limit: int, cursor: str | None = None) -> Page:
    """`limit` rows from where `cursor` says (the start if None), and whether more exist.

    `rows` is a queryset (sliced here, so the database reads limit + 1 rows) or a sequence.
    """
    start = cursor_start(cursor)
    items = list(rows[start : start + limit + 1])
    return Page(items[:limit], len(items) > limit, start)


class ListOutput(ToolOutput):
    """What every list tool answers besides its items (subclasses declare `items`)."""

    count: int = Field(description="How many items this answer shows.")
    has_more: bool = Field(description="Whether more items exist than shown.")
    truncated: bool = Field(
        default=False,
        description="Present (true) when items were left out to keep the answer short.",
    )


class PagedListOutput(ListOutput):
    next_cursor: str | None = Field(
        description="Pass it back as `cursor` to continue the list; null at its end."
    )


def listing(
    items: Sequence[dict[str, Any]], *, has_more: bool, start: int | None = None, **extra: Any
) -> dict[str, Any]:
    """The shape every list tool answers with. A list given the `start` of its page (a tool
    taking a cursor) also says where the next page starts, `next_cursor` (None at the end);
    the cap keeps it true when it drops items."""
    payload = Listing(items=list(items), count=len(items), has_more=has_more, **extra)
    if start is not None:
        payload.start = start
        payload["next_cursor"] = _next_cursor(start, len(items), has_more)
    return payload


class Listing(dict):
    """A list tool's answer, knowing where its page started (not part of the JSON)."""

    start: int | None = None


def cursor_start(cursor: str | None) -> int:
    """The position a cursor made by `listing` stands for; VALIDATION for any other text."""
    if cursor is None:
        return 0
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        text = ""
    digits = text[1:]
    if not (text[:1] == "p" and digits.isascii() and digits.isdigit()):
        raise ValidationFailed(_INVALID_CURSOR, code="invalid_cursor", field="cursor")
    start = int(digits)
    if start > MAX_CURSOR_START:
        raise ValidationFailed(_INVALID_CURSOR, code="invalid_cursor", field="cursor")
    return start


_INVALID_CURSOR = gettext_lazy(
    "Esa continuación de la lista no es válida: pida la lista otra vez desde el principio."
)


def _next_cursor(start: int, shown: int, has_more: bool) -> str | None:
    following = start + shown
    if not has_more or following > MAX_CURSOR_START:
        return None
    return base64.urlsafe_b64encode(f"p{following}".encode()).decode("ascii").rstrip("=")


def capped(payload: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A result shrunk to the character cap, and its JSON text as it goes on the wire.

    A listing loses items from its tail and says more exist; anything else that is still too
    large is replaced by a short result saying so (never cut mid-JSON). Errors are not results:
    core.outcome.error_outcome caps them.
    """
    limit = settings.GARANTE_OUTPUT_MAX_CHARS
    text = dumps(payload)
    if len(text) <= limit:
        return payload, text
    items = payload.get("items")
    if isinstance(items, list):
        shrunk = dict(payload, items=list(items), has_more=True, truncated=True)
        start = getattr(payload, "start", None)
        while shrunk["items"] and len(dumps(shrunk)) > limit:
            shrunk["items"].pop()
            shrunk["count"] = len(shrunk["items"])
            if start is not None:
                shrunk["next_cursor"] = _next_cursor(start, shrunk["count"], True)
        text = dumps(shrunk)
        if len(text) <= limit:
            return shrunk, text
    too_long = {
        "truncated": True,
        "message": _(
            "La respuesta era demasiado larga. Pida menos elementos o sea más específico."
        ),
    }
    return too_long, dumps(too_long)
