"""Public references in bodies and answers: the one lookup a response draws them from, the
output field that shows one, and the input field that takes one."""

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.references import normalize_reference
from integration.services import REFERENCE_KINDS, public_references_assign

REFERENCE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9-]{0,31}$"


class ReferenceBook:
    """The public references of contacts, services and professionals one response shows,
    looked up (and drawn the first time) in one query per kind."""

    def __init__(self, company: Any) -> None:
        self.company = company
        self._known: dict[str, dict[int, str]] = {kind: {} for kind in REFERENCE_KINDS}

    def prefetch(self, kind: str, ids: Any) -> None:
        missing = {pk for pk in ids if pk is not None} - self._known[kind].keys()
        if missing:
            self._known[kind].update(
                public_references_assign(company=self.company, kind=kind, ids=missing)
            )

    def get(self, kind: str, pk: int | None) -> str | None:
        if pk is None:
            return None
        self.prefetch(kind, [pk])
        return self._known[kind].get(pk)


@extend_schema_field({"type": "string", "example": "CT-7K2F9Q"})
class ReferenceField(serializers.Field):
    """The public reference of a contact, service or professional (from `source`, an id)."""

    def __init__(self, kind: str, **kwargs: Any) -> None:
        self.kind = kind
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def to_representation(self, value: int) -> str | None:
        return self.context["references"].get(self.kind, value)


class ReferenceInput(serializers.RegexField):
    """A public reference given in a body (e.g. "AP-7K2F9Q"), stored upper-case."""

    def __init__(self, example: str, **kwargs: Any) -> None:
        kwargs.setdefault("max_length", 32)
        kwargs.setdefault("help_text", f"Public reference, e.g. {example}.")
        super().__init__(REFERENCE_PATTERN, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        return normalize_reference(super().to_internal_value(data))
