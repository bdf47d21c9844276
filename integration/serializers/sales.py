"""The catalog, quotes (their state at the instant, their priced lines) and opportunities."""

from decimal import Decimal
from typing import Any

from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from integration.serializers.fields import AmountInput, MoneyField, StateLabelField
from integration.serializers.references import ReferenceField, ReferenceInput
from integration.serializers.strict import StrictSerializer
from sales import money
from sales.models import Opportunity, Quote
from sales.services import (
    MAX_LINE_QUANTITY,
    MAX_QUOTE_LINES,
    OPPORTUNITY_STATE_LABELS,
    QUOTE_STATE_LABELS,
)


def _quote_state_now(quote: Quote) -> str:
    """A quote's state at this instant: an open quote past its validity is expired even
    before the beat task records it (as the sales services and the tools read it)."""
    return quote.effective_state(timezone.now())


class QuoteStateField(serializers.ChoiceField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=Quote.State.choices, source="*", read_only=True, **kwargs)

    def to_representation(self, quote: Quote) -> str:
        return _quote_state_now(quote)


class QuoteStateLabelField(StateLabelField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(QUOTE_STATE_LABELS, source="*", **kwargs)

    def to_representation(self, quote: Quote) -> str:
        return super().to_representation(_quote_state_now(quote))


class ProductOut(serializers.Serializer):
    sku = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()
    unit = serializers.CharField()
    tax_rate = serializers.DecimalField(max_digits=5, decimal_places=2)
    active = serializers.BooleanField()
    unit_price = serializers.SerializerMethodField()
    currency = serializers.SerializerMethodField()
    track_stock = serializers.BooleanField()
    quantity_available = serializers.SerializerMethodField()

    @extend_schema_field({"type": "string", "nullable": True, "example": "12.50"})
    def get_unit_price(self, product: Any) -> str | None:
        price = getattr(product, "unit_price", None)
        currency = self.context.get("currency")
        return None if price is None or currency is None else money.to_wire(price, currency)

    @extend_schema_field({"type": "string", "nullable": True, "example": "EUR"})
    def get_currency(self, product: Any) -> str | None:
        return self.context.get("currency")

    @extend_schema_field({"type": "integer", "nullable": True})
    def get_quantity_available(self, product: Any) -> int | None:
        return product.quantity_available if product.track_stock else None


@extend_schema_field(OpenApiTypes.STR)
class LineAmountField(serializers.Field):
    """An amount of a quote line, in its quote's currency: a line does not carry the currency,
    so QuoteOut passes it in the context."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["read_only"] = True
        super().__init__(**kwargs)

    def to_representation(self, amount: Decimal) -> str:
        return money.to_wire(amount, self.context["currency"])


class QuoteLineOut(serializers.Serializer):
    """A line's amounts, named as the tool API's quote lines name them: which are tax excluded
    and which tax included says itself."""

    sku = serializers.CharField()
    name = serializers.CharField()
    quantity = serializers.IntegerField()
    unit_price_excl_tax = LineAmountField(source="unit_price", help_text="Tax excluded.")
    tax_rate = serializers.DecimalField(
        max_digits=5, decimal_places=2, help_text="In percent (21.00)."
    )
    subtotal_excl_tax = LineAmountField(
        source="subtotal", help_text="Quantity times unit price, tax excluded."
    )
    tax = LineAmountField()
    total_incl_tax = LineAmountField(source="total", help_text="Tax included.")


class QuoteOut(serializers.Serializer):
    reference = serializers.CharField()
    state = QuoteStateField()
    state_label = QuoteStateLabelField()
    contact = ReferenceField("contact", source="contact_id")
    opportunity = serializers.CharField(source="opportunity.reference", allow_null=True)
    currency = serializers.CharField()
    subtotal = MoneyField()
    tax_total = MoneyField()
    total = MoneyField()
    valid_until = serializers.DateTimeField()
    lines = serializers.SerializerMethodField()
    rejection_reason = serializers.CharField()
    created_at = serializers.DateTimeField()
    sent_at = serializers.DateTimeField(allow_null=True)
    resolved_at = serializers.DateTimeField(allow_null=True)
    delivered_at = serializers.DateTimeField(allow_null=True)
    cancelled_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(QuoteLineOut(many=True))
    def get_lines(self, quote: Quote) -> list[dict[str, Any]]:
        context = {**self.context, "currency": quote.currency}
        return QuoteLineOut(quote.lines.all(), many=True, context=context).data


class QuoteItemIn(StrictSerializer):
    sku = serializers.CharField(max_length=64)
    quantity = serializers.IntegerField(min_value=1, max_value=MAX_LINE_QUANTITY)


class ExpectedTotal(AmountInput):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault(
            "help_text",
            "The total (tax included) the caller believes; refused with the real one if not.",
        )
        super().__init__(required=False, **kwargs)


class QuoteIn(StrictSerializer):
    contact = ReferenceInput("CT-7K2F9Q")
    # A ListField, not many=True, so that the document states its bounds (minItems, maxItems).
    items = serializers.ListField(child=QuoteItemIn(), min_length=1, max_length=MAX_QUOTE_LINES)
    expected_total = ExpectedTotal()
    opportunity = ReferenceInput("OP-7K2F9Q", required=False)
    send = serializers.BooleanField(
        required=False, help_text="Send it at once (default true); false keeps a draft."
    )


class QuoteAcceptIn(StrictSerializer):
    expected_total = ExpectedTotal()


class QuoteDeliverIn(StrictSerializer):
    items = serializers.ListField(
        child=QuoteItemIn(),
        min_length=1,
        max_length=MAX_QUOTE_LINES,
        required=False,
        help_text="What was handed over, checked against the order (delivered whole).",
    )


class QuoteRejectIn(StrictSerializer):
    reason = serializers.CharField(max_length=300, required=False, allow_blank=True)


class OpportunityOut(serializers.Serializer):
    reference = serializers.CharField()
    state = serializers.ChoiceField(choices=Opportunity.State.choices)
    state_label = StateLabelField(OPPORTUNITY_STATE_LABELS)
    contact = ReferenceField("contact", source="contact_id")
    title = serializers.CharField()
    notes = serializers.CharField()
    amount = MoneyField()
    currency = serializers.CharField()
    lost_reason = serializers.CharField()
    created_at = serializers.DateTimeField()
    closed_at = serializers.DateTimeField(allow_null=True)


class OpportunityIn(StrictSerializer):
    contact = ReferenceInput("CT-7K2F9Q")
    title = serializers.CharField(max_length=200)
    notes = serializers.CharField(max_length=4000, required=False, allow_blank=True)
    amount = AmountInput(required=False)
    currency = serializers.RegexField(r"^[A-Za-z]{3}$", required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # The service rounds the amount to the currency (half up), which may carry it past
        # what the column holds: refused here as bad input, not left to the database.
        if "amount" in attrs:
            currency = attrs.get("currency") or self.context["company"].currency
            if money.quantize(attrs["amount"], currency) >= money.STORED_AMOUNT_LIMIT:
                raise serializers.ValidationError(
                    {"amount": [_("El importe supera el máximo que podemos registrar.")]},
                    code="amount_too_large",
                )
        return attrs


class OpportunityLoseIn(StrictSerializer):
    reason = serializers.CharField(max_length=300)
