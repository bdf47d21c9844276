"""Tenancy and the people Garante serves: companies, their staff, contacts and gateway tokens;
the identity checks of a conversation; and the idempotency records every API writes through
core.idempotency. One module per topic; every model is importable from here."""

from core.models.contacts import Contact, Conversation
from core.models.credentials import BearerCredential, GatewayCredential
from core.models.idempotency import IdempotencyRecord
from core.models.identity import (
    SecurityEvent,
    StepUpPolicy,
    VerificationChallenge,
    default_confirm_actions,
    default_step_up_actions,
)
from core.models.outbound import OutboxMessage, SmsSend
from core.models.tenancy import (
    Company,
    StaffMembership,
    sms_country_codes,
    validate_sms_countries,
    validate_timezone,
)

__all__ = [
    "BearerCredential",
    "Company",
    "Contact",
    "Conversation",
    "GatewayCredential",
    "IdempotencyRecord",
    "OutboxMessage",
    "SecurityEvent",
    "SmsSend",
    "StaffMembership",
    "StepUpPolicy",
    "VerificationChallenge",
    "default_confirm_actions",
    "default_step_up_actions",
    "sms_country_codes",
    "validate_sms_countries",
    "validate_timezone",
]
