"""Fields the resources share: money and state labels in answers, strict amounts and instants
in requests."""

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.utils.translation import gettext_lazy as _
from drf_spectacular.drainage import set_override
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.states import StateLabels, state_shown
from sales import money


@extend_schema_field({"type": "string", "example": "53.33"})
class MoneyField(serializers.Field):
    """An amount as a string with exactly its currency's decimals (the `currency` attribute of
    the same object)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def get_attribute(self, instance: Any) -> tuple[Decimal | None, str]:
        return super().get_attribute(instance), instance.currency

    def to_representation(self, value: tuple[Decimal | None, str]) -> str | None:
        amount, currency = value
        return None if amount is None else money.to_wire(amount, currency)


@extend_schema_field({"type": "string", "example": "cancelada"})
class StateLabelField(serializers.Field):
    """The state as the customer reads it, in the company's language (next to `state`)."""

    def __init__(self, labels: StateLabels, **kwargs: Any) -> None:
        self.labels = labels
        kwargs["read_only"] = True
        kwargs.setdefault("source", "state")
        super().__init__(**kwargs)

    def to_representation(self, value: str) -> str:
        return state_shown(value, self.labels)["state_label"]


class AmountInput(serializers.DecimalField):
    """A non-negative amount given as a JSON string of plain digits ("53.33"), read by the
    rule every API reads amounts by (sales.money.amount_from_text: as many digits as a money
    column holds), as the document says: DRF alone would also take a number, an exponent
    ("1e2"), spaces or a sign."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            max_digits=money.STORED_MAX_DIGITS,
            decimal_places=money.STORED_DECIMAL_PLACES,
            min_value=Decimal(0),
            **kwargs,
        )
        set_override(
            self,
            "field",
            {
                "type": "string",
                "format": "decimal",
                "pattern": money.AMOUNT_TEXT,
                "example": "53.33",
            },
        )

    def to_internal_value(self, data: Any) -> Decimal:
        try:
            money.amount_from_text(data)
        except ValueError:
            self.fail("invalid")
        return super().to_internal_value(data)


LOCAL_TIME_HELP = "ISO 8601; without an offset it is the company's local time."


class InstantField(serializers.DateTimeField):
    """An instant in ISO 8601 (without an offset: the company's local time), within years
    FIRST_YEAR..LAST_YEAR: services add durations to it and the fingerprint reads it in UTC,
    which near the calendar's ends would overflow (answered as an outage, not as bad input)."""

    FIRST_YEAR = 1900
    LAST_YEAR = 9998
    default_error_messages = {"invalid_date": _("Esa fecha está fuera del rango admitido.")}

    def to_internal_value(self, value: Any) -> datetime:
        try:
            instant = super().to_internal_value(value)
            in_utc = instant.astimezone(UTC)
        except OverflowError:
            self.fail("invalid_date")
        except serializers.ValidationError as error:
            if error.get_codes() == ["overflow"]:  # DRF's own: in the company's zone
                self.fail("invalid_date")
            raise
        if not self.FIRST_YEAR <= in_utc.year <= self.LAST_YEAR:
            self.fail("invalid_date")
        return instant
