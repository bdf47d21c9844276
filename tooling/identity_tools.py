"""Identity tools for the Gateway: identify the customer, send and check a step-up code.

They live in tooling because core must not import the tool registry; the rules are in
core.identity and core.verification.
"""

from typing import Any, Literal

from django.conf import settings
from django.utils.translation import gettext_lazy as _
from pydantic import Field, model_validator

from core.identity import (
    conversation_verification_status,
    identification_confirm,
    identify_contact,
)
from core.normalize import mask_email, mask_phone
from core.services import contact_change_confirm, contact_change_request
from core.verification import challenge_issue, challenge_verify
from tooling.toolkit import Identifier, ToolContext, ToolInput, ToolOutput, tool


class IdentifyContactIn(ToolInput):
    document: str | None = Field(
        default=None, min_length=1, max_length=40, description="Document number."
    )
    phone: str | None = Field(
        default=None, min_length=1, max_length=40, description="Phone number."
    )
    email: str | None = Field(
        default=None, min_length=1, max_length=254, description="Email address."
    )

    @classmethod
    def schema_rules(cls, schema: dict[str, Any]) -> None:
        super().schema_rules(schema)
        names = list(schema["properties"])
        # Exactly one of them given: the others absent or null.
        schema["oneOf"] = [
            {
                "required": [name],
                "properties": {
                    other: {"type": "string"} if other == name else {"type": "null"}
                    for other in names
                },
            }
            for name in names
        ]

    @model_validator(mode="after")
    def exactly_one(self) -> "IdentifyContactIn":
        given = [v for v in (self.document, self.phone, self.email) if v]
        if len(given) != 1:
            raise ValueError("give exactly one of document, phone or email")
        return self


class IdentifiedOut(ToolOutput):
    identified: bool = Field(
        description=(
            "True: the conversation is now the customer's. False (verified mode): nobody is "
            "identified yet; see awaiting_code."
        )
    )
    first_name: str | None
    phone: str | None = Field(description="The registered phone, masked.")
    email: str | None = Field(description="The registered email, masked.")
    verification_channels: list[Literal["sms", "email"]] = Field(
        description="Where a verification code can be sent."
    )
    awaiting_code: bool | None = Field(
        default=None,
        description=(
            "Verified mode: if these data belong to a customer, a 6-digit code was sent to "
            "the phone or email on their record. The answer is the same whoever the data "
            "belong to. Ask the customer for the code and call verify_code with the same "
            "identifier and the code: that identifies them."
        ),
    )
    user_message: str | None = Field(
        default=None, description="Verified mode: what to tell the customer, in their language."
    )


# What every identification in verified mode answers, for every identifier.
_AWAITING_CODE = _(
    "Si esos datos corresponden a un cliente, le hemos enviado un código al teléfono o al "
    "correo que tenemos registrados. Dígame el código cuando lo reciba."
)


@tool(
    name="identify_contact",
    title="Identify the customer",
    description=(
        "Identifies the customer of this conversation by ONE of: document number, phone or "
        "email, as registered. Call it before any tool that takes `identifier`. Answers only "
        "the first name and masked channels. The identity cannot change later in the "
        "conversation. When it answers identified=false with awaiting_code=true (verified "
        "mode), the customer is identified by the code sent to their registered phone or "
        "email: ask for it and call verify_code with the same identifier."
    ),
    input=IdentifyContactIn,
    output=IdentifiedOut,
    write=True,
    idempotent=True,
)
def identify_contact_tool(ctx: ToolContext, params: IdentifyContactIn) -> dict:
    kind = "document" if params.document else "phone" if params.phone else "email"
    value = params.document or params.phone or params.email or ""
    contact = identify_contact(
        conversation=ctx.conversation_held(), kind=kind, value=value, held=True
    )
    if contact is None:  # verified mode: one answer for every identifier
        return {
            "identified": False,
            "first_name": None,
            "phone": None,
            "email": None,
            "verification_channels": [],
            "awaiting_code": True,
            "user_message": str(_AWAITING_CODE),
        }
    channels = [c for c, present in (("sms", contact.phone), ("email", contact.email)) if present]
    return {
        "identified": True,
        "first_name": contact.first_name,
        "phone": mask_phone(contact.phone, ctx.company.language) or None,
        "email": mask_email(contact.email) or None,
        "verification_channels": channels,
    }


class RequestVerificationCodeIn(ToolInput):
    identifier: Identifier
    channel: Literal["sms", "email"] = Field(
        description="Where to send the code: the customer's registered phone (sms) or email."
    )


class CodeSentOut(ToolOutput):
    sent: bool
    channel: Literal["sms", "email"]
    sent_to: str = Field(description="The registered destination, masked.")
    sent_as: Literal["code", "link", "both"] = Field(
        description=(
            "What the message carries: a 6-digit code (ask for it, then verify_code), a "
            "one-tap link (ask the customer to open it and press its button; no code to ask "
            "for), or both (either works)."
        )
    )
    expires_in_minutes: int


@tool(
    name="request_verification_code",
    title="Send a verification code",
    description=(
        "Sends a verification to the customer's OWN registered phone (sms) or email, never "
        "to a number or address given in the chat. Needed before actions that answer "
        "verification_required. sent_as says what the message carries, as the company "
        "chose: a 6-digit code (ask the customer for it and call verify_code), a one-tap "
        "link (ask them to open it and press its button, then call verification_status or "
        "retry the action: the link itself never passes through the chat), or both."
    ),
    input=RequestVerificationCodeIn,
    output=CodeSentOut,
    write=True,
    verification=True,
    identified=True,
)
def request_verification_code(ctx: ToolContext, params: RequestVerificationCodeIn) -> dict:
    challenge = challenge_issue(
        contact=ctx.contact, channel=params.channel, conversation=ctx.conversation
    )
    minutes = int(settings.GARANTE_VERIFICATION_CODE_TTL.total_seconds() // 60)
    return {
        "sent": True,
        "channel": challenge.channel,
        "sent_to": challenge.masked_destination,
        "sent_as": challenge.sent_as,
        "expires_in_minutes": minutes,
    }


class VerificationStatusIn(ToolInput):
    identifier: Identifier


class VerificationStatusOut(ToolOutput):
    verified: bool = Field(description="Whether protected actions may proceed now.")
    valid_for_minutes: int | None = Field(
        description="While verified: the minutes the verification still holds."
    )
    awaiting: Literal["code", "link", "both"] | None = Field(
        description=(
            "What the customer was last sent and has not used yet (a code to read back, a "
            "link to tap, or both); null when nothing is pending."
        )
    )


@tool(
    name="verification_status",
    title="Is the customer verified?",
    description=(
        "Tells whether the conversation is verified right now (for example after the "
        "customer tapped the link request_verification_code sent), for how long, and what "
        "the customer still has pending. Reads only; sends nothing."
    ),
    input=VerificationStatusIn,
    output=VerificationStatusOut,
    verification=True,
    identified=True,
)
def verification_status(ctx: ToolContext, params: VerificationStatusIn) -> dict:
    status = conversation_verification_status(conversation=ctx.conversation, contact=ctx.contact)
    return {
        "verified": status.verified,
        "valid_for_minutes": status.valid_for_minutes,
        "awaiting": status.awaiting,
    }


class VerifyCodeIn(ToolInput):
    identifier: Identifier
    code: str = Field(
        min_length=1,
        max_length=20,
        description="The code the customer received: six digits, spaces allowed.",
        # Documented, not enforced here: a code of another shape gets the tool's own answer
        # (invalid_code_format, "El código tiene seis cifras"), which the customer can act on.
        json_schema_extra={"pattern": r"^\s*(\d\s*){6}$"},
    )


class VerifiedOut(ToolOutput):
    verified: bool
    valid_for_minutes: int = Field(description="How long protected actions may proceed.")


@tool(
    name="verify_code",
    title="Check a verification code",
    description=(
        "Checks the code the customer received after request_verification_code, or after "
        "identify_contact answered awaiting_code (then it also identifies the customer: give "
        "the same identifier). On success the conversation is verified for a short time and "
        "protected actions can proceed."
    ),
    input=VerifyCodeIn,
    output=VerifiedOut,
    write=True,
    verification=True,
    identified=True,
    confirms_identity=True,
)
def verify_code(ctx: ToolContext, params: VerifyCodeIn) -> dict:
    if ctx.conversation.contact_id is None:
        identification_confirm(
            conversation=ctx.conversation, identifier=params.identifier, code=params.code
        )
    else:
        challenge_verify(conversation=ctx.conversation, contact=ctx.contact, code=params.code)
    minutes = int(settings.GARANTE_VERIFICATION_VALID_FOR.total_seconds() // 60)
    return {"verified": True, "valid_for_minutes": minutes}


class UpdateContactDetailsIn(ToolInput):
    identifier: Identifier
    phone: str | None = Field(
        default=None, max_length=40, description="The new phone number (or give email)."
    )
    email: str | None = Field(
        default=None, max_length=254, description="The new email (or give phone)."
    )


class ContactChangePendingOut(ToolOutput):
    updated: bool = Field(description="Always false here: nothing changes until confirmed.")
    channel: Literal["sms", "email"]
    sent_to: str = Field(description="The NEW phone or email the code went to, masked.")
    expires_in_minutes: int


@tool(
    name="update_contact_details",
    title="Change the customer's phone or email",
    description=(
        "Starts changing the identified customer's registered phone OR email (one per call): "
        "a code is sent to the NEW phone or email and nothing changes yet. Ask the customer "
        "for that code and call confirm_contact_change. Needs step-up verification by "
        "default: on verification_required, send a code with request_verification_code and "
        "check it with verify_code first."
    ),
    input=UpdateContactDetailsIn,
    output=ContactChangePendingOut,
    write=True,
    identified=True,
    step_up=True,
)
def update_contact_details(ctx: ToolContext, params: UpdateContactDetailsIn) -> dict:
    challenge = contact_change_request(
        conversation=ctx.conversation, contact=ctx.contact, phone=params.phone, email=params.email
    )
    minutes = int(settings.GARANTE_VERIFICATION_CODE_TTL.total_seconds() // 60)
    return {
        "updated": False,
        "channel": challenge.channel,
        "sent_to": challenge.masked_destination,
        "expires_in_minutes": minutes,
    }


class ConfirmContactChangeIn(ToolInput):
    identifier: Identifier
    code: str = Field(
        min_length=1,
        max_length=20,
        description="The code the customer received at the NEW phone or email.",
    )


class ContactDetailsOut(ToolOutput):
    updated: bool
    phone: str | None = Field(description="The registered phone now, masked.")
    email: str | None = Field(description="The registered email now, masked.")


@tool(
    name="confirm_contact_change",
    title="Confirm the new phone or email",
    description=(
        "Applies the change asked for with update_contact_details in this conversation, "
        "with the code the customer received at the NEW phone or email (not the code of "
        "verify_code). The customer's previous phone or email is told of the change."
    ),
    input=ConfirmContactChangeIn,
    output=ContactDetailsOut,
    write=True,
    identified=True,
    step_up="update_contact_details",
)
def confirm_contact_change(ctx: ToolContext, params: ConfirmContactChangeIn) -> dict:
    contact = contact_change_confirm(
        conversation=ctx.conversation, contact=ctx.contact, code=params.code
    )
    return {
        "updated": True,
        "phone": mask_phone(contact.phone, ctx.company.language) or None,
        "email": mask_email(contact.email) or None,
    }
