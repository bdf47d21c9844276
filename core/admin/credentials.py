"""Staff admin for bearer credentials of every kind: issued with the token shown once,
rotated, revoked after a confirmation page; the Gateway's here, the integration API's in
integration.admin."""

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
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
    rotating are actions. A kind's admin adds its ISSUE_FIELDS to the lists.

    Revoking cannot be undone and cuts off whoever holds the token, so it is confirmed on a
    page stating that effect, like Django's deletion: from the credential's page (its Revoke
    button, or the link a burst alert emails to the company's administrators) and from the
    list's action alike. Following the link changes nothing (mail scanners fetch links); only
    the page's POST revokes."""

    list_display = ["name", "company", "token_prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["company"]
    search_fields = ["name", "token_prefix"]
    fields = ["company", "name", "token_prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["token_prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke", "rotate"]
    change_form_template = "admin/core/credential_change_form.html"
    revoke_template = "admin/core/credential_revoke.html"

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

    def revoke_effect(self) -> str:
        """What revoking means for whoever holds the token, for the confirmation page."""
        return _(
            "Whoever uses the token is refused from then on, and that cannot be undone: issue "
            "a new credential for a caller that should go on."
        )

    @admin.action(description=_("Revoke selected credentials"), permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> HttpResponse | None:
        """The selected credentials still active, revoked once staff confirm on the page."""
        credentials = list(queryset.filter(revoked_at__isnull=True))
        if not credentials:
            self.message_user(request, self.revoked_message(0), messages.WARNING)
            return None
        if request.POST.get("post") != "yes":
            return self._revoke_confirmation(request, credentials, bulk=True)
        for credential in credentials:
            credential_revoke(credential=credential)
        self.message_user(request, self.revoked_message(len(credentials)))
        return None

    def get_urls(self) -> list:
        return [
            path(
                "<path:object_id>/revoke/",
                self.admin_site.admin_view(self.revoke_view),
                name=f"{self.opts.app_label}_{self.opts.model_name}_revoke",
            ),
            *super().get_urls(),
        ]

    def revoke_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """One credential's confirmation page (GET) and its revocation (POST)."""
        credential = self.get_object(request, object_id)
        if credential is None:
            raise Http404(_("No such credential."))
        if not self.has_change_permission(request, credential):
            raise PermissionDenied
        change_url = reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[credential.pk]
        )
        if credential.revoked_at is not None:
            # Revoked meanwhile (a colleague, another tab): said alone, nothing else done.
            self.message_user(
                request,
                _("%(name)s was already revoked.") % {"name": credential.name},
                messages.WARNING,
            )
            return HttpResponseRedirect(change_url)
        if request.method == "POST":
            credential_revoke(credential=credential)
            self.message_user(request, self.revoked_message(1), messages.SUCCESS)
            return HttpResponseRedirect(change_url)
        return self._revoke_confirmation(request, [credential], bulk=False)

    def _revoke_confirmation(
        self, request: HttpRequest, credentials: list, *, bulk: bool
    ) -> TemplateResponse:
        title = _("Revoke a credential?") if len(credentials) == 1 else _("Revoke credentials?")
        context = {
            **self.admin_site.each_context(request),
            "title": title,
            "opts": self.opts,
            "credentials": credentials,
            "object": credentials[0] if not bulk else None,
            "effect": self.revoke_effect(),
            "bulk": bulk,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, self.revoke_template, context)

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
    def revoke_effect(self) -> str:
        return _(
            "The gateway that uses this token is refused from then on (every server refuses it "
            "%(when)s), so the agent stops answering customers through it, and that cannot be "
            "undone: issue a new credential for your gateway if it should go on."
        ) % {"when": change_seen_everywhere()}

    def revoked_message(self, revoked: int) -> str:
        # Other processes may answer from their authentication cache until they are told.
        return _("Revoked %(n)d credential(s); every server refuses them %(when)s.") % {
            "n": revoked,
            "when": change_seen_everywhere(),
        }
