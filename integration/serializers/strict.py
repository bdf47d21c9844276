"""Request bodies that refuse what their document does not describe: unknown fields, and
values of another JSON type than the field's."""

from collections.abc import Mapping
from typing import Any

from django.utils.translation import gettext_lazy as _
from rest_framework import serializers

# The JSON type each kind of input field takes (DRF would turn 0 into "0", "1" into 1 and
# "yes" into true): a body that does not match its document is refused, not coerced.
_JSON_TYPES: tuple[tuple[type[serializers.Field], tuple[type, ...]], ...] = (
    (serializers.BooleanField, (bool,)),
    (serializers.IntegerField, (int,)),
    (serializers.CharField, (str,)),
    (serializers.ChoiceField, (str,)),
    (serializers.DateTimeField, (str,)),
    (serializers.DateField, (str,)),
)


def _has_json_type(field: serializers.Field, value: Any) -> bool:
    if value is None:
        return True  # the field's allow_null decides
    for kind, types in _JSON_TYPES:
        if isinstance(field, kind):
            return isinstance(value, types) and not (bool not in types and type(value) is bool)
    return True


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, so a typo is an error rather than silently ignored,
    and values of another JSON type than the field's (strings are strings)."""

    default_error_messages = {"wrong_type": _("Este valor no es del tipo esperado.")}

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    {name: [_("Este campo no existe.")] for name in unknown}
                )
            mistyped = sorted(
                name
                for name, field in self.fields.items()
                if name in data and not field.read_only and not _has_json_type(field, data[name])
            )
            if mistyped:
                message = self.error_messages["wrong_type"]
                raise serializers.ValidationError({name: [message] for name in mistyped})
        return super().to_internal_value(data)


class EmptyIn(StrictSerializer):
    """A transition that takes no arguments (an empty JSON object, or no body)."""
