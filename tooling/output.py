"""The one output cap: every tool result, error included, fits in 3,000 characters of JSON."""

import json
from collections.abc import Iterable, Sequence
from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _

# One encoder for every answer: json.dumps with options builds a new one per call, which costs
# a cheap tool call's answer a quarter of its encoding time. An encoder keeps no state between
# calls, so threads share it.
_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(payload: Any) -> str:
    """The JSON text of a payload, as it goes on the wire (compact, UTF-8 kept)."""
    return _encoder.encode(payload)


def page(rows: Iterable[Any], limit: int) -> tuple[list[Any], bool]:
    """The first `limit` rows and whether more exist. Pass a queryset sliced to limit + 1."""
    items = list(rows)
    return items[:limit], len(items) > limit


def listing(items: Sequence[dict[str, Any]], *, has_more: bool, **extra: Any) -> dict[str, Any]:
    """The shape every list tool answers with."""
    return {"items": list(items), "count": len(items), "has_more": has_more, **extra}


def capped(payload: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A result shrunk to the character cap, and its JSON text as it goes on the wire.

    A listing loses items from its tail and says more exist; anything else that is still too
    large is replaced by a short result saying so (never cut mid-JSON).
    """
    limit = settings.GARANTE_OUTPUT_MAX_CHARS
    text = dumps(payload)
    if len(text) <= limit:
        return payload, text
    items = payload.get("items")
    if isinstance(items, list):
        shrunk = dict(payload, items=list(items), has_more=True, truncated=True)
        while shrunk["items"] and len(dumps(shrunk)) > limit:
            shrunk["items"].pop()
            shrunk["count"] = len(shrunk["items"])
        text = dumps(shrunk)
        if len(text) <= limit:
            return shrunk, text
    if "error_type" in payload:
        short = {
            "error_type": payload["error_type"],
            "user_message": str(payload.get("user_message", ""))[:500],
            "code": payload.get("code", ""),
        }
        return short, dumps(short)
    too_long = {
        "truncated": True,
        "message": _(
            "La respuesta era demasiado larga. Pida menos elementos o sea más específico."
        ),
    }
    return too_long, dumps(too_long)
