"""Normalisation of the identifiers a customer may give: document number, phone, email."""

import importlib
import re

import phonenumbers
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import validate_email
from django.utils import translation
from django.utils.translation import gettext_lazy as _
from stdnum.util import clean

from core.errors import ValidationFailed

# Personal identity documents python-stdnum knows, per country. A number that none of them
# accepts is still accepted in a compact generic form (passports, foreign ids).
_DOCUMENT_MODULES = {
    "ES": ("stdnum.es.dni", "stdnum.es.nie", "stdnum.es.nif"),
    "AR": ("stdnum.ar.dni", "stdnum.ar.cuit"),
    "CL": ("stdnum.cl.rut",),
    "CO": ("stdnum.co.nit",),
    "MX": ("stdnum.mx.curp", "stdnum.mx.rfc"),
    "PE": ("stdnum.pe.cui", "stdnum.pe.ruc"),
    "BR": ("stdnum.br.cpf",),
    "US": ("stdnum.us.ssn",),
}
_GENERIC_DOCUMENT = re.compile(r"^[A-Z0-9]{4,20}$")


def normalize_document(raw: str, country: str) -> str:
    """The canonical compact form of a document number, or ValidationFailed."""
    for module_name in _DOCUMENT_MODULES.get(country.upper(), ()):
        module = importlib.import_module(module_name)
        if module.is_valid(raw):
            return module.compact(raw)
    compact = clean(raw, " -./").upper()
    if not _GENERIC_DOCUMENT.match(compact):
        raise ValidationFailed(_("Ese número de documento no es válido."), code="invalid_document")
    return compact


def normalize_phone(raw: str, country: str) -> str:
    """The phone number in E.164, or ValidationFailed."""
    try:
        number = phonenumbers.parse(raw, country.upper())
    except phonenumbers.NumberParseException:
        number = None
    if number is None or not phonenumbers.is_valid_number(number):
        raise ValidationFailed(_("Ese número de teléfono no es válido."), code="invalid_phone")
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def normalize_email(raw: str) -> str:
    """The email address trimmed and lower-cased, or ValidationFailed."""
    email = raw.strip().lower()
    try:
        validate_email(email)
    except DjangoValidationError:
        raise ValidationFailed(
            _("Esa dirección de correo no es válida."), code="invalid_email"
        ) from None
    return email


def mask_phone(phone: str, language: str = "es") -> str:
    """The phone as a customer or staff member may be told it, in the company's `language`."""
    if not phone:
        return ""
    with translation.override(language):
        return translation.gettext("teléfono terminado en %(digits)s") % {"digits": phone[-2:]}


def mask_email(email: str) -> str:
    if not email or "@" not in email:
        return ""
    local, domain = email.split("@", 1)
    return f"{local[0]}***@{domain}"
