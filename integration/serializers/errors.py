"""The one error shape, as the OpenAPI document describes it (integration.errors builds it)."""

from rest_framework import serializers


class FieldErrorOut(serializers.Serializer):
    field = serializers.CharField()
    problem = serializers.CharField()


class ErrorOut(serializers.Serializer):
    error_type = serializers.ChoiceField(
        choices=["VALIDATION", "NOT_FOUND", "PERMISSION", "AMBIGUOUS", "CONFLICT", "SYSTEM"]
    )
    user_message = serializers.CharField(
        help_text="For the end customer, in the company's language.",
    )
    code = serializers.CharField(help_text="Stable machine code, e.g. invalid_idempotency_key.")
    errors = FieldErrorOut(many=True, required=False)
    state = serializers.CharField(required=False)
    retry_after_seconds = serializers.IntegerField(required=False)
