"""Contacts (the company's customers) in answers and in a creation."""

from rest_framework import serializers

from integration.serializers.references import ReferenceField
from integration.serializers.strict import StrictSerializer


class ContactOut(serializers.Serializer):
    reference = ReferenceField("contact", source="pk")
    first_name = serializers.CharField()
    last_name = serializers.CharField()
    document_number = serializers.CharField()
    phone = serializers.CharField(help_text="E.164")
    email = serializers.CharField()
    created_at = serializers.DateTimeField()


class ContactIn(StrictSerializer):
    first_name = serializers.CharField(max_length=100)
    last_name = serializers.CharField(max_length=150, required=False, allow_blank=True)
    document_number = serializers.CharField(max_length=32, required=False, allow_blank=True)
    phone = serializers.CharField(max_length=40, required=False, allow_blank=True)
    email = serializers.EmailField(max_length=254, required=False, allow_blank=True)
