"""Staff admin for integration credentials: the one credential admin (core.admin.CredentialAdmin)
with the scope each token is issued with."""

from django.contrib import admin

from core.admin import CredentialAdmin
from integration.models import IntegrationCredential


@admin.register(IntegrationCredential)
class IntegrationCredentialAdmin(CredentialAdmin):
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
    fields = [
        "company",
        "name",
        "scope",
        "token_prefix",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
