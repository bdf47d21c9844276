"""Staff admin for the core models, and the per-company scoping every admin in Garante uses."""

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from core.models import Company, Contact, Conversation, GatewayCredential, StaffMembership
from core.services import gateway_credential_issue, gateway_credential_revoke


def staff_company_ids(request: HttpRequest) -> list[int] | None:
    """The companies a staff user may see; None means all (superusers)."""
    user = request.user
    if user.is_superuser:
        return None
    cached = getattr(request, "_garante_company_ids", None)
    if cached is None:
        cached = list(
            StaffMembership.objects.filter(user=user).values_list("company_id", flat=True)
        )
        request._garante_company_ids = cached  # type: ignore[attr-defined]
    return cached


class CompanyScopedAdmin(admin.ModelAdmin):
    """Shows staff only their companies' rows and offers only their companies' related rows.

    `company_path` is the lookup from the model to its Company ("company", "quote__company").
    """

    company_path = "company"

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request)
        ids = staff_company_ids(request)
        if ids is None:
            return queryset
        return queryset.filter(**{f"{self.company_path}__in": ids})

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        ids = staff_company_ids(request)
        if ids is not None:
            related = db_field.related_model
            if related is Company:
                kwargs["queryset"] = Company.objects.filter(pk__in=ids)
            elif any(f.name == "company" for f in related._meta.fields):
                kwargs["queryset"] = related._default_manager.filter(company__in=ids)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        ids = staff_company_ids(request)
        related = db_field.related_model
        if ids is not None and any(f.name == "company" for f in related._meta.fields):
            kwargs["queryset"] = related._default_manager.filter(company__in=ids)
        return super().formfield_for_manytomany(db_field, request, **kwargs)


@admin.register(Company)
class CompanyAdmin(CompanyScopedAdmin):
    company_path = "pk"
    list_display = ["name", "environment", "timezone", "language", "currency"]
    list_filter = ["environment"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = admin.ModelAdmin.get_queryset(self, request)
        ids = staff_company_ids(request)
        return queryset if ids is None else queryset.filter(pk__in=ids)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser


@admin.register(StaffMembership)
class StaffMembershipAdmin(CompanyScopedAdmin):
    list_display = ["user", "company", "role"]
    list_filter = ["role", "company"]


@admin.register(Contact)
class ContactAdmin(CompanyScopedAdmin):
    list_display = ["__str__", "company", "document_number", "phone", "email", "created_at"]
    list_filter = ["company"]
    search_fields = ["first_name", "last_name", "document_number", "phone", "email"]

    def save_model(self, request, obj, form, change):
        from core.normalize import normalize_document, normalize_email, normalize_phone

        country = obj.company.country
        obj.document_number = (
            normalize_document(obj.document_number, country) if obj.document_number else ""
        )
        obj.phone = normalize_phone(obj.phone, country) if obj.phone else ""
        obj.email = normalize_email(obj.email) if obj.email else ""
        super().save_model(request, obj, form, change)


@admin.register(GatewayCredential)
class GatewayCredentialAdmin(CompanyScopedAdmin):
    list_display = ["name", "company", "token_prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["company"]
    fields = ["company", "name", "token_prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["token_prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        credential, token = gateway_credential_issue(company=obj.company, name=obj.name)
        obj.pk = credential.pk
        obj.token_prefix = credential.token_prefix
        obj.token_hash = credential.token_hash
        messages.warning(
            request,
            _("Copy this token now; it will not be shown again: %(token)s") % {"token": token},
        )

    @admin.action(description=_("Revoke selected credentials"))
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> None:
        for credential in queryset:
            gateway_credential_revoke(credential=credential)
        self.message_user(request, _("Revoked %(n)d credential(s).") % {"n": queryset.count()})


@admin.register(Conversation)
class ConversationAdmin(CompanyScopedAdmin):
    list_display = ["external_id", "company", "contact", "identified_at", "last_seen_at"]
    list_filter = ["company"]
    search_fields = ["external_id"]
    readonly_fields = [f.name for f in Conversation._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
