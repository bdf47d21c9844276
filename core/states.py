"""How an entity's state reaches a customer: its FSM value plus a translated label.

Every tool output that shows a state, and every refused transition, carries the pair
`state` (the machine value, stable for the agent to branch on) and `state_label` (what the
customer reads, in the company's language). List tools filter by the machine values, declared
as an enum in their JSON Schema, and also take the labels loosely. Each app keeps its own
labels (value -> gettext_lazy text, Spanish source) and passes them here.
"""

import unicodedata
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal

from django.utils import translation
from django.utils.functional import Promise
from pydantic import BeforeValidator

StateLabels = Mapping[str, str | Promise]

# The labels' source language: a customer may use those words whatever the company's language.
_SOURCE_LANGUAGE = "es"


def state_shown(value: str, labels: StateLabels) -> dict[str, str]:
    """The `state` and `state_label` of an output or an error (label in the active language)."""
    value = str(value)
    return {"state": value, "state_label": str(labels[value])}


def state_in_sentence(label: Any) -> str:
    """A state's label as it reads inside a sentence ("está ahora cancelada"): its first
    letter lowered (the labels are capitalised to stand alone, in lists and buttons)."""
    text = str(label)
    return text[:1].lower() + text[1:]


def _fold(text: str) -> str:
    """Case-, accent-, underscore- and spacing-insensitive form, for loose matching."""
    decomposed = unicodedata.normalize("NFKD", text.replace("_", " "))
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(plain.casefold().split())


def state_parse(text: str, labels: StateLabels) -> str | None:
    """The state `text` names: its machine value, or its label in the active or the source
    language, ignoring case and accents ("Cancelada" -> "cancelled"); None if it names none."""
    wanted = _fold(text)
    with translation.override(_SOURCE_LANGUAGE):
        source_labels = {value: str(label) for value, label in labels.items()}
    for value, label in labels.items():
        if wanted in (_fold(str(value)), _fold(str(label)), _fold(source_labels[value])):
            return str(value)
    return None


def state_filter(labels: StateLabels, values: Iterable[str] | None = None) -> Any:
    """A pydantic type for a list tool's `state` filter.

    The schema lists the machine values (`values`, default every labelled state) as an enum; a
    label is turned into its value before that check, and anything else is refused by it.
    """
    allowed = tuple(str(v) for v in (values if values is not None else labels))
    subset = {v: labels[v] for v in allowed}

    def loosen(given: Any) -> Any:
        if isinstance(given, str):
            return state_parse(given, subset) or given
        return given

    return Annotated[Literal[allowed], BeforeValidator(loosen)]
