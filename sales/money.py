"""Money as Decimal in a currency's minor units: rounding, wire strings, amounts for people."""

import re
from decimal import ROUND_HALF_UP, Decimal
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, WithJsonSchema

from core.l10n import money_shown

# ISO 4217 minor-unit exponents that differ from the usual 2. Units of account with 4 decimals
# (CLF, UYW) are left out on purpose: nobody quotes in them and the columns keep 3 decimals.
_MINOR_UNITS = {
    "BIF": 0,
    "CLP": 0,
    "DJF": 0,
    "GNF": 0,
    "ISK": 0,
    "JPY": 0,
    "KMF": 0,
    "KRW": 0,
    "PYG": 0,
    "RWF": 0,
    "UGX": 0,
    "VND": 0,
    "VUV": 0,
    "XAF": 0,
    "XOF": 0,
    "XPF": 0,
    "BHD": 3,
    "IQD": 3,
    "JOD": 3,
    "KWD": 3,
    "LYD": 3,
    "OMR": 3,
    "TND": 3,
}
DEFAULT_MINOR_UNITS = 2
# Decimal places of every money column: enough for the 3-decimal currencies above.
STORED_DECIMAL_PLACES = 3
STORED_MAX_DIGITS = 14
# Every stored amount is below this (eleven digits before the point).
STORED_AMOUNT_LIMIT = Decimal(10) ** (STORED_MAX_DIGITS - STORED_DECIMAL_PLACES)

# An amount as a caller sends it, to the tools and to the integration API alike: a string of
# plain digits with an optional decimal part, as many of each as a money column holds (the
# models' DecimalField: STORED_MAX_DIGITS, STORED_DECIMAL_PLACES of them decimals). No sign,
# exponent or blank, which Decimal() itself would take. A larger or finer amount could never
# be one the system computed, so it is bad input, refused before any service runs.
AMOUNT_TEXT = (
    rf"^[0-9]{{1,{STORED_MAX_DIGITS - STORED_DECIMAL_PLACES}}}"
    rf"(?:\.[0-9]{{1,{STORED_DECIMAL_PLACES}}})?$"
)
AMOUNT_TEXT_PROBLEM = (
    f'an amount as plain digits with an optional decimal part, like "53.33": at most '
    f"{STORED_MAX_DIGITS - STORED_DECIMAL_PLACES} digits before the point and "
    f"{STORED_DECIMAL_PLACES} after it"
)


def amount_from_text(text: Any) -> Decimal:
    """The amount a caller wrote (AMOUNT_TEXT), or ValueError(AMOUNT_TEXT_PROBLEM)."""
    if not isinstance(text, str) or not re.fullmatch(AMOUNT_TEXT, text):
        raise ValueError(AMOUNT_TEXT_PROBLEM)
    return Decimal(text)


def _amount_given(value: Any) -> Any:
    # Text is read by the one rule. A JSON number, which tool callers may send, is held to the
    # column's range by the Field below, not to its decimals: a binary float has no exact
    # decimals to count (53.33 is 53.3299999...), and any but the total is refused anyway.
    return amount_from_text(value) if isinstance(value, str) else value


# The pydantic type of an amount argument (the tools'; the integration API's DRF field is
# integration.serializers.fields.AmountInput, on the same rule). Its schema is written out:
# pydantic cannot render bounds set after a validator of its own.
Amount = Annotated[
    Decimal,
    BeforeValidator(_amount_given),
    Field(ge=0, lt=STORED_AMOUNT_LIMIT),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "number", "minimum": 0, "exclusiveMaximum": int(STORED_AMOUNT_LIMIT)},
                {"type": "string", "pattern": AMOUNT_TEXT},
            ]
        }
    ),
]


def is_currency_code(code: str) -> bool:
    """Whether `code` has the shape of an ISO 4217 code: three capital letters A to Z."""
    return len(code) == 3 and code.isascii() and code.isalpha() and code.isupper()


def minor_units(currency: str) -> int:
    """How many decimals an amount in this currency has (2 unless ISO 4217 says otherwise)."""
    return _MINOR_UNITS.get(currency.upper(), DEFAULT_MINOR_UNITS)


def quantize(amount: Decimal | int, currency: str) -> Decimal:
    """The amount rounded half-up to the currency's minor units."""
    exponent = Decimal(1).scaleb(-minor_units(currency))
    return Decimal(amount).quantize(exponent, rounding=ROUND_HALF_UP)


def is_exact(amount: Decimal, currency: str) -> bool:
    """Whether the amount already has no more decimals than the currency allows."""
    return quantize(amount, currency) == amount


def to_wire(amount: Decimal, currency: str) -> str:
    """The amount as it travels in JSON: a string with exactly the currency's decimals."""
    return str(quantize(amount, currency))


def shown(amount: Decimal | None, currency: str) -> str:
    """The amount as people read it in the active language, everywhere (admin, emails, SMS,
    customer pages, tools' messages): the currency's own decimals and symbol where the
    locale's convention puts them ("249,00 €" in Spanish, "€249.00" in English), core.l10n's
    one money format."""
    if amount is None:
        return money_shown(None, currency)
    return money_shown(quantize(amount, currency), currency)


# What customers read is what staff read: one format (core.l10n).
spoken = shown
