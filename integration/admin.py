"""Staff admin for integration credentials: issued with the token shown once, revocable."""

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from core.admin import CompanyScopedAdmin
from integration.models import IntegrationCredential
from integration.services import integration_credential_issue, integration_credential_revoke


@admin.register(IntegrationCredential)
class IntegrationCredentialAdmin(CompanyScopedAdmin):
    list_display = [
        "name",
        "company",
        "scope",
        "token_prefix",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["scope", "company"]
    search_fields = ["name", "token_prefix"]
    fields = [
        "company",
        "name",
        "scope",
        "token_prefix",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    readonly_fields = ["token_prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> list[str]:
        # A token keeps the company and scope it was issued with; issue another to change them.
        if obj is not None:
            return [*self.readonly_fields, "company", "scope"]
        return self.readonly_fields

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        credential, token = integration_credential_issue(
            company=obj.company, name=obj.name, scope=obj.scope
        )
        obj.pk = credential.pk
        obj.token_prefix = credential.token_prefix
        obj.token_hash = credential.token_hash
        obj.created_at = credential.created_at
        messages.warning(
            request,
            _("Copy this token now; it will not be shown again: %(token)s") % {"token": token},
        )

    @admin.action(description=_("Revoke selected credentials"), permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> None:
        revoked = 0
        for credential in queryset.filter(revoked_at__isnull=True):
            integration_credential_revoke(credential=credential)
            revoked += 1
        self.message_user(request, _("Revoked %(n)d credential(s).") % {"n": revoked})
