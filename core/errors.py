"""The six canonical error types: one exception class each, raised by services, shaped once.

`user_message` is for the end customer, in the company's language; it never carries internal
ids or traces. `code` is a stable machine code clients can branch on. Extras (`state`,
`candidates`, `retry_after_seconds`, ...) travel with the error to the wire.
"""

from enum import StrEnum
from typing import Any, ClassVar

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _


class ErrorType(StrEnum):
    VALIDATION = "VALIDATION"
    NOT_FOUND = "NOT_FOUND"
    PERMISSION = "PERMISSION"
    AMBIGUOUS = "AMBIGUOUS"
    CONFLICT = "CONFLICT"
    SYSTEM = "SYSTEM"


HTTP_STATUS = {
    ErrorType.VALIDATION: 422,
    ErrorType.NOT_FOUND: 404,
    ErrorType.PERMISSION: 403,
    ErrorType.AMBIGUOUS: 409,
    ErrorType.CONFLICT: 409,
    ErrorType.SYSTEM: 503,
}


class GaranteError(Exception):
    """A business error with a canonical type. Subclass per type; raise with a message."""

    error_type: ClassVar[ErrorType]
    default_message: ClassVar[str | Promise]
    default_code: ClassVar[str]

    def __init__(
        self,
        user_message: str | Promise | None = None,
        *,
        code: str | None = None,
        http_status: int | None = None,
        **extras: Any,
    ) -> None:
        self.user_message = user_message if user_message is not None else self.default_message
        self.code = code or self.default_code
        self.http_status = http_status or HTTP_STATUS[self.error_type]
        self.extras = extras
        super().__init__(str(self.user_message))

    def as_dict(self) -> dict[str, Any]:
        """The wire body: error_type, user_message (translated now), code, then the extras."""
        body: dict[str, Any] = {
            "error_type": self.error_type.value,
            "user_message": str(self.user_message),
            "code": self.code,
        }
        body.update({k: v for k, v in self.extras.items() if v is not None})
        return body


class ValidationFailed(GaranteError):
    error_type = ErrorType.VALIDATION
    default_message = _("Los datos enviados no son válidos.")
    default_code = "invalid"


class NotFound(GaranteError):
    error_type = ErrorType.NOT_FOUND
    default_message = _("No encontré lo que busca.")
    default_code = "not_found"


class NotInCompany(NotFound):
    """A record of another company than the caller's. Tenancy's one rule: another company's
    record is indistinguishable from a missing one, so this is NOT_FOUND with the message and
    code a missing record of that kind gets; only the server side (logs, tests) can tell the
    two apart, by this type.

    Lookups by reference filter by the company, so there another company's record is simply
    missing; `check` is for a record already in hand (passed in by a caller)."""

    @classmethod
    def check(
        cls, record_company_id: int, company_id: int, user_message: str | Promise, *, code: str
    ) -> None:
        """Raise unless the record (its `company_id`) is the company's."""
        if record_company_id != company_id:
            raise cls(user_message, code=code)


class PermissionRefused(GaranteError):
    error_type = ErrorType.PERMISSION
    default_message = _("No puedo hacer eso para la persona que me habla.")
    default_code = "permission_denied"


class ConfirmationRequired(PermissionRefused):
    """The company has the customer confirm this action themselves: a code bound to it was
    sent to their own channel (core.verification.confirmation), and the same call with that
    code (`confirmation_code`) does it; or a one-tap link went, and the same call without a
    code does it once the customer tapped it. Extras: `channel`, `sent_to` (masked),
    `sent_as` (`code`, `link` or `both`), `expires_in_minutes`."""

    default_message = _(
        "Para hacerlo necesito que usted lo confirme con un código que le he enviado."
    )
    default_code = "confirmation_required"


class Ambiguous(GaranteError):
    error_type = ErrorType.AMBIGUOUS
    default_message = _("Hay varias opciones que coinciden. ¿A cuál se refiere?")
    default_code = "ambiguous"


class Conflict(GaranteError):
    error_type = ErrorType.CONFLICT
    default_message = _("Esa operación ya se pidió con otros datos.")
    default_code = "conflict"


class SystemUnavailable(GaranteError):
    """A dependency is down (the database, the broker, a provider): retry later."""

    error_type = ErrorType.SYSTEM
    default_message = _(
        "Nuestro sistema no está disponible en este momento. Por favor, inténtelo más tarde."
    )
    default_code = "unavailable"


class InternalError(GaranteError):
    """Our own bug: an exception nothing expected, logged with its trace where it was caught.
    The caller gets the same SYSTEM answer as an outage (what it can do is the same: retry
    later), but the server side can tell the two apart, by this type."""

    error_type = ErrorType.SYSTEM
    default_message = SystemUnavailable.default_message
    default_code = SystemUnavailable.default_code


# VALIDATION codes (422) that a request well formed by the API's documents may still get:
# the stored data's state (a closed case, a taken slot, stock), a rule across fields or over
# time (a range's order, a cutoff, the calendar's supported years), or a cursor that is not
# this list's. Both OpenAPI documents publish them (`x-rule-codes` in `info`), so a client
# knows such a 422 is an answer about the data, not about the request's shape; any other 422
# to a request the document calls valid is a deviation of the document.
RULE_CODES = frozenset(
    {
        # states and transitions
        "invalid_transition",
        "invalid_state",
        "case_closed",
        "opportunity_lost",
        "cutoff_passed",
        "appointment_not_started",
        "nothing_to_change",
        # a phone or email change (core.services.contact_change_request / _confirm)
        "one_change_at_a_time",
        "already_current",
        "no_change_pending",
        # availability, catalogue and prices as stored
        "slot_unavailable",
        "slot_too_soon",
        "slot_in_past",
        "slot_beyond_horizon",
        "appointment_overlap",
        "professional_unavailable",
        "service_mismatch",
        "service_inactive",
        "total_mismatch",
        "price_list_outdated",
        "no_price_list",
        "insufficient_stock",
        "stock_below_reserved",
        # a delivery note against the order it delivers (sales.services.quote_deliver)
        "delivery_exceeds_reserved",
        "delivery_incomplete",
        "product_not_in_order",
        "amount_too_large",
        # who is who
        "contact_exists",
        "identifier_taken",
        "opportunity_of_another_contact",
        "identification_required",
        "identity_mismatch",
        "identity_switch",
        # a value JSON Schema cannot check: a document's check digit, a phone number's
        # validity in its country (phonenumbers), an email address as our validator reads it
        "invalid_document",
        "invalid_phone",
        "invalid_email",
        # an identifier that reads as none of the three (a tool's `identifier`)
        "invalid_identifier",
        # a reason as plain text (core.reasons): no markup, no control characters
        "reason_markup",
        "reason_control_characters",
        # a phone the company may not text (core.sms_policy): a country it does not serve, or
        # a number that is not a mobile (premium rate, shared cost, landline...)
        "phone_country_not_served",
        "phone_not_mobile",
        # time and position
        "invalid_date",
        "invalid_date_range",
        "invalid_period",
        "invalid_pagination",
        "invalid_cursor",
    }
)
