"""Support cases in answers and in an opening."""

from rest_framework import serializers

from integration.serializers.fields import StateLabelField
from integration.serializers.references import ReferenceField, ReferenceInput
from integration.serializers.strict import StrictSerializer
from support.models import CUSTOMER_STATE_LABELS as CASE_STATE_LABELS
from support.models import Case


class CaseOut(serializers.Serializer):
    reference = serializers.CharField()
    state = serializers.ChoiceField(choices=Case.State.choices)
    state_label = StateLabelField(CASE_STATE_LABELS)
    contact = ReferenceField("contact", source="contact_id")
    subject = serializers.CharField()
    description = serializers.CharField()
    channel = serializers.ChoiceField(choices=Case.Channel.choices)
    priority = serializers.ChoiceField(choices=Case.Priority.choices)
    related_case = serializers.CharField(source="related_case.reference", allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    closed_at = serializers.DateTimeField(allow_null=True)


class CaseIn(StrictSerializer):
    contact = ReferenceInput("CT-7K2F9Q")
    subject = serializers.CharField(max_length=200)
    description = serializers.CharField(max_length=4000)
    channel = serializers.ChoiceField(choices=Case.Channel.choices, required=False)
    priority = serializers.ChoiceField(choices=Case.Priority.choices, required=False)
    related_case = ReferenceInput("CS-7K2F9Q", required=False)
