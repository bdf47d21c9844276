"""Staff admin for the core models, and the scoping and transition wiring every admin uses.

Django's autodiscovery imports this package: importing the modules below registers the core
models' admins. Other apps' admin modules import the shared bases from here.
"""

from core.admin.credentials import CredentialAdmin, GatewayCredentialAdmin
from core.admin.export import CsvExportAdmin
from core.admin.identity import (
    ContactAdmin,
    ConversationAdmin,
    StepUpPolicyAdmin,
    VerificationChallengeAdmin,
    contact_search_fields,
)
from core.admin.outbox import OutboxMessageAdmin
from core.admin.scoping import CompanyScopedAdmin, staff_scoped, values_filter
from core.admin.security_events import SecurityEventAdmin
from core.admin.tenants import CompanyAdmin, StaffMembershipAdmin
from core.admin.transitions import (
    RecordRulesAdmin,
    ServiceTransitionsAdmin,
    TransitionHistoryInline,
)

__all__ = [
    "CompanyAdmin",
    "CompanyScopedAdmin",
    "ContactAdmin",
    "ConversationAdmin",
    "CredentialAdmin",
    "CsvExportAdmin",
    "GatewayCredentialAdmin",
    "OutboxMessageAdmin",
    "RecordRulesAdmin",
    "SecurityEventAdmin",
    "ServiceTransitionsAdmin",
    "StaffMembershipAdmin",
    "StepUpPolicyAdmin",
    "TransitionHistoryInline",
    "VerificationChallengeAdmin",
    "contact_search_fields",
    "staff_scoped",
    "values_filter",
]
