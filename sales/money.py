"""Money as Decimal in a currency's minor units: rounding, wire strings and spoken amounts."""

from decimal import ROUND_HALF_UP, Decimal

from babel.core import UnknownLocaleError
from babel.numbers import format_currency
from django.conf import settings
from django.utils import formats, translation

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


def spoken(amount: Decimal, currency: str) -> str:
    """The amount formatted for a customer in the active language (e.g. "1.234,50 EUR")."""
    places = minor_units(currency)
    number = formats.number_format(
        quantize(amount, currency), decimal_pos=places, use_l10n=True, force_grouping=True
    )
    return f"{number} {currency.upper()}"


def shown(amount: Decimal | None, currency: str) -> str:
    """The amount as staff read it in their language: the currency's own decimals and symbol
    where the locale's convention puts them ("249,00 €" in Spanish, "€249.00" in English)."""
    if amount is None:
        return "—"
    code = currency.upper()
    locale = translation.to_locale(translation.get_language() or settings.LANGUAGE_CODE)
    try:
        return format_currency(quantize(amount, code), code, locale=locale)
    except (UnknownLocaleError, ValueError):
        return spoken(amount, code)
