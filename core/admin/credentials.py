"""Staff admin for bearer credentials of every kind: issued with the token shown once,
rotated, revoked; the Gateway's here, the integration API's in integration.admin."""

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from core.admin.scoping import CompanyScopedAdmin
from core.credentials.services import credential_issue, credential_revoke, credential_rotate
from core.errors import GaranteError
from core.models import GatewayCredential
from core.process_cache import change_seen_everywhere


class CredentialAdmin(CompanyScopedAdmin):
    """One kind of core.models.BearerCredential. Saving a new row issues it through
    core.credentials and shows its token once; a token keeps the company and the kind's
    ISSUE_FIELDS it was issued with (issue or rotate another to change them); revoking and
    rotating are actions. A kind's admin adds its ISSUE_FIELDS to the lists."""

    list_display = ["name", "company", "token_prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["company"]
    search_fields = ["name", "token_prefix"]
    fields = ["company", "name", "token_prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["token_prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke", "rotate"]

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> Any:
        readonly = super().get_readonly_fields(request, obj)
        if obj is not None:
            return [*readonly, "company", *self.model.ISSUE_FIELDS]
        return readonly

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        credential, token = credential_issue(
            self.model,
            company=obj.company,
            name=obj.name,
            **{field: getattr(obj, field) for field in self.model.ISSUE_FIELDS},
        )
        obj.pk = credential.pk
        obj.name = credential.name
        obj.token_prefix = credential.token_prefix
        obj.token_hash = credential.token_hash
        obj.created_at = credential.created_at
        messages.warning(
            request,
            _("Copy this token now; it will not be shown again: %(token)s") % {"token": token},
        )

    def revoked_message(self, revoked: int) -> str:
        """What staff are told once `revoked` credentials are revoked."""
        return _("Revoked %(n)d credential(s).") % {"n": revoked}

    @admin.action(description=_("Revoke selected credentials"), permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> None:
        revoked = 0
        for credential in queryset.filter(revoked_at__isnull=True):
            credential_revoke(credential=credential)
            revoked += 1
        self.message_user(request, self.revoked_message(revoked))

    @admin.action(
        description=_("Rotate selected credentials (a new token each, the old one revoked)"),
        permissions=["change"],
    )
    def rotate(self, request: HttpRequest, queryset: QuerySet) -> None:
        rotated = 0
        for credential in queryset.filter(revoked_at__isnull=True):
            try:
                replacement, token = credential_rotate(credential=credential)
            except GaranteError as refusal:  # revoked by a colleague a moment ago
                self.message_user(request, str(refusal.user_message), level=messages.ERROR)
                continue
            messages.warning(
                request,
                _("New token for %(name)s; copy it now, it will not be shown again: %(token)s")
                % {"name": replacement.name, "token": token},
            )
            rotated += 1
        if rotated:
            self.message_user(request, self.revoked_message(rotated))


@admin.register(GatewayCredential)
class GatewayCredentialAdmin(CredentialAdmin):
    def revoked_message(self, revoked: int) -> str:
        # Other processes may answer from their authentication cache until they are told.
        return _("Revoked %(n)d credential(s); every server refuses them %(when)s.") % {
            "n": revoked,
            "when": change_seen_everywhere(),
        }
