"""Create (idempotently) the declared sandbox: a test company, staff login, token and demo data.

Each domain app may provide `<app>/sandbox.py` with `seed(company)`; it is called here, so the
sandbox grows with the apps without this command knowing them.
"""

import importlib
import importlib.util
import os

from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from core.models import (
    Company,
    GatewayCredential,
    StaffMembership,
    StepUpPolicy,
    default_confirm_actions,
    default_step_up_actions,
)
from core.services import contact_create, gateway_credential_issue, gateway_credential_revoke

SANDBOX_SLUG = "sandbox"
SANDBOX_CREDENTIAL = "sandbox gateway"
# The tools the certification's checks (tooling/certification) call that a company may have
# its customer confirm: each check makes its call once and reads the answer, so a confirmation
# asked of the customer would fail checks that pass. The sandbox never asks it for them,
# whatever the defaults or an earlier policy say; tests/tooling/test_confirmation.py holds
# this list to the checks' calls.
CERTIFIED_UNCONFIRMED = ("cancel_appointment", "reject_quote", "reschedule_appointment")
CONTACTS = [
    {
        "first_name": "Ana",
        "last_name": "García",
        "document_number": "12345678Z",
        "phone": "+34600111222",
        "email": "ana@example.com",
    },
    {
        "first_name": "Bruno",
        "last_name": "López",
        "document_number": "X1234567L",
        "phone": "+34600333444",
        "email": "bruno@example.com",
    },
]


class Command(BaseCommand):
    help = "Create or refresh the sandbox company, its gateway token and demo data."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--admin-user", default="admin")
        parser.add_argument("--admin-password", default="admin")
        parser.add_argument(
            "--admin-email",
            default="",
            help="The staff login's email, where staff notices (new cases, customers' "
            "comments) go; without one they are settled unsent.",
        )
        parser.add_argument(
            "--base-url", default="http://127.0.0.1:8000", help="Where the server will listen."
        )
        parser.add_argument(
            "--keep-token",
            action="store_true",
            help="Keep the gateway token given in the GARANTE_SANDBOX_TOKEN environment "
            "variable (not an argument, which every local user can list) while it is the "
            "sandbox's and not revoked; otherwise issue a new one as without this option.",
        )

    @transaction.atomic
    def handle(self, *args: object, **options: object) -> None:
        company, _ = Company.objects.get_or_create(
            slug=SANDBOX_SLUG,
            defaults={
                "name": "Garante Sandbox",
                "environment": Company.Environment.SANDBOX,
                "timezone": "Europe/Madrid",
            },
        )
        if not company.is_sandbox:
            raise SystemExit("refusing: the 'sandbox' company is not a sandbox environment")
        for data in CONTACTS:
            if not company.contacts.filter(document_number=data["document_number"]).exists():
                contact_create(company=company, **data)
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            username=options["admin_user"], defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password(options["admin_password"])
        if options["admin_email"]:
            user.email = options["admin_email"]
        if created or options["admin_email"]:
            user.save()
        StaffMembership.objects.get_or_create(
            user=user, company=company, defaults={"role": StaffMembership.Role.ADMIN}
        )
        _confirmation_off_for_the_checks(company)
        for app in apps.get_app_configs():
            module_name = f"{app.name}.sandbox"
            if importlib.util.find_spec(module_name) is not None:
                importlib.import_module(module_name).seed(company)
        active = GatewayCredential.objects.filter(
            company=company, name=SANDBOX_CREDENTIAL, revoked_at__isnull=True
        )
        token = os.environ.get("GARANTE_SANDBOX_TOKEN", "") if options["keep_token"] else ""
        if not token or not active.filter(token_hash=GatewayCredential.hash_token(token)).exists():
            # A token is shown only once, so without one to keep each run issues a fresh one
            # and revokes the old.
            for old in active:
                gateway_credential_revoke(credential=old)
            _, token = gateway_credential_issue(company=company, name=SANDBOX_CREDENTIAL)
        base = str(options["base_url"]).rstrip("/")
        self.stdout.write(
            "\n".join(
                [
                    "",
                    "Garante sandbox ready.",
                    f"  MCP endpoint:  {base}/mcp",
                    f"  REST tools:    {base}/api/tools/<name>   (OpenAPI: {base}/api/docs)",
                    f"  Gateway token: {token}",
                    f"  Admin:         {base}/admin/  user '{options['admin_user']}'"
                    + (f" password '{options['admin_password']}'" if created else ""),
                    "",
                ]
            )
        )


def _confirmation_off_for_the_checks(company: Company) -> None:
    """Keep the certified tools out of the sandbox's confirmation policy, leaving the rest of
    it as staff set it. A company without a policy row follows the settings' defaults, so a
    row is written only when those would ask a confirmation of a certified tool."""
    policy = StepUpPolicy.objects.filter(company=company).first()
    confirmed = policy.confirm_actions if policy is not None else default_confirm_actions()
    kept = [action for action in confirmed if action not in CERTIFIED_UNCONFIRMED]
    if kept == list(confirmed):
        return
    if policy is None:
        policy = StepUpPolicy(company=company, actions=default_step_up_actions())
    policy.confirm_actions = kept
    policy.save()
