"""Who is talking: identification, ownership checks and step-up requirements (seed 1 §2).

The Gateway sends no authenticated end user. A conversation becomes bound to one contact by
`identify_contact` (core.identity.binding); every sensitive tool then takes that contact's
identifier as a parameter. The tool platform checks it (`contact_for_conversation`,
core.identity.ownership) and, when the company's policy lists the tool's action,
`require_step_up` (core.identity.step_up), before the handler runs: a tool declares both on
`@tool` (docs/tools.md). What it acts on is checked against its owner with `check_owner`.
Failed identifications are limited (core.identity.limits); past a limit shared with other
conversations, identification goes on in verified mode (core.identity.verified_mode). Callers
outside core import these names from here; core's own modules import them from the module
that defines them.
"""

from core.identity.binding import identify_contact
from core.identity.ownership import check_owner, contact_for_conversation, identified_contact
from core.identity.step_up import (
    VerificationStatus,
    confirm_actions,
    conversation_is_verified,
    conversation_verification_status,
    require_step_up,
    security_event_record,
    step_up_actions,
    step_up_policies,
)
from core.identity.verified_mode import identification_confirm

__all__ = [
    "VerificationStatus",
    "check_owner",
    "confirm_actions",
    "contact_for_conversation",
    "conversation_is_verified",
    "conversation_verification_status",
    "identification_confirm",
    "identified_contact",
    "identify_contact",
    "require_step_up",
    "security_event_record",
    "step_up_actions",
    "step_up_policies",
]
