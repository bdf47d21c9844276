"""Reading a customer's identifier: a document, a phone or an email, in its stored form."""

from dataclasses import dataclass

from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from core.errors import ValidationFailed
from core.normalize import normalize_document, normalize_email, normalize_phone

IDENTIFIER_KINDS = ("document", "phone", "email")
# The Contact field holding each kind of identifier.
CONTACT_FIELD = {"document": "document_number", "phone": "phone", "email": "email"}


@dataclass(frozen=True)
class Identifier:
    kind: str
    value: str


def normalize_identifier(kind: str, raw: str, country: str) -> Identifier:
    """One identifier of a known kind in its stored form (ValidationFailed if invalid)."""
    if kind == "document":
        return Identifier(kind, normalize_document(raw, country))
    if kind == "phone":
        return Identifier(kind, normalize_phone(raw, country))
    if kind == "email":
        return Identifier(kind, normalize_email(raw))
    raise ValidationFailed(_("Ese tipo de dato no sirve para identificarle."), code="invalid_kind")


def identifier_readings(raw: str, country: str) -> list[Identifier]:
    """Every way an identifier of unknown kind can be read ("600111222" may be a phone or a
    document number). ValidationFailed if it is none of them."""
    raw = (raw or "").strip()
    if "@" in raw:
        return [normalize_identifier("email", raw, country)]
    readings = []
    for kind in ("document", "phone"):
        try:
            readings.append(normalize_identifier(kind, raw, country))
        except ValidationFailed:
            continue
    if not readings:
        raise ValidationFailed(
            _("Necesito su documento, su teléfono o su correo tal como los tiene registrados."),
            code="invalid_identifier",
        )
    return readings


def contact_matching(readings: list[Identifier]) -> Q:
    query = Q(pk__in=[])
    for reading in readings:
        query |= Q(**{CONTACT_FIELD[reading.kind]: reading.value})
    return query
