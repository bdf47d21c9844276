"""The one error shape, as the OpenAPI document describes it (core.boundary builds it)."""

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from core.boundary import MAX_PROBLEMS


class ProblemOut(serializers.Serializer):
    field = serializers.CharField(help_text="The field's dotted path, e.g. items.0.quantity.")
    message = serializers.CharField(help_text="What is wrong with it.")


class FieldErrorOut(serializers.Serializer):
    field = serializers.CharField()
    problem = serializers.CharField()


@extend_schema_serializer(deprecate_fields=["errors"])
class ErrorOut(serializers.Serializer):
    error_type = serializers.ChoiceField(
        choices=["VALIDATION", "NOT_FOUND", "PERMISSION", "AMBIGUOUS", "CONFLICT", "SYSTEM"]
    )
    user_message = serializers.CharField(
        help_text="For the end customer, in the company's language.",
    )
    code = serializers.CharField(help_text="Stable machine code, e.g. invalid_idempotency_key.")
    problems = ProblemOut(
        many=True,
        required=False,
        help_text=f"Each field that is wrong, at most {MAX_PROBLEMS} (as every Garante API).",
    )
    problems_omitted = serializers.IntegerField(
        required=False, help_text="How many more problems there were than `problems` lists."
    )
    errors = FieldErrorOut(
        many=True,
        required=False,
        help_text=(
            "Deprecated alias of `problems` ({field, problem}), cut alike; "
            "removed in the next release (CHANGELOG.md)."
        ),
    )
    state = serializers.CharField(required=False)
    retry_after_seconds = serializers.IntegerField(required=False)
    retry_with_same_key = serializers.BooleanField(
        required=False, help_text="SYSTEM database_unavailable: the same request is safe again."
    )
    effect_may_have_happened = serializers.BooleanField(
        required=False,
        help_text="SYSTEM database_unavailable: the failure came while the write was committing.",
    )
