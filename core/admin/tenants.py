"""Staff admin for the tenants: companies and their staff memberships."""

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from core.admin.scoping import CompanyScopedAdmin
from core.models import Company, StaffMembership, sms_country_codes
from core.roles import staff_company_ids, staff_membership_remove, staff_membership_set


class CompanyForm(forms.ModelForm):
    class Meta:
        model = Company
        exclude: list[str] = []

    def clean_sms_countries(self) -> str:
        """ "es pt" or "ES,PT" is stored as "ES, PT" (the model's validator checks each)."""
        return ", ".join(sms_country_codes(self.cleaned_data.get("sms_countries") or ""))


@admin.register(Company)
class CompanyAdmin(CompanyScopedAdmin):
    company_path = "pk"
    form = CompanyForm
    list_display = ["name", "environment", "timezone", "language", "currency"]
    list_filter = ["environment"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    # Which companies exist, under which slug, and which are sandboxes (where the tool API's
    # fault switch works) are the platform operator's: a company's admin edits the rest. An
    # editable slug also told them, by its "already exists" error, other companies' slugs.
    operator_fields = ("slug", "environment")
    fieldsets = [
        (None, {"fields": ["name", "slug", "timezone", "language", "currency", "country"]}),
        (_("Environment"), {"fields": ["environment"]}),
        (
            _("Limits on failed identifications"),
            {
                "description": _(
                    "Each limit counts failed identifications in a sliding window. Past a "
                    "conversation's, that conversation is told to wait. Past a gateway "
                    "credential's or an identifier's, nobody is refused: identification goes "
                    "on in verified mode, the same answer for every identifier and a code to "
                    "the phone or email on the customer's record, until the failures leave "
                    "the window."
                ),
                "fields": [
                    ("identify_failures_per_conversation", "identify_conversation_window_minutes"),
                    ("identify_failures_per_credential", "identify_credential_window_minutes"),
                    ("identify_failures_per_identifier", "identify_identifier_window_minutes"),
                ],
            },
        ),
        (
            _("Budgets of verification codes"),
            {
                "description": _(
                    "What codes may cost in an hour. Past a budget the customer's answer is "
                    "the same and no code is sent; the dashboard shows the last hour's."
                ),
                "fields": [
                    "verified_mode_codes_per_credential_per_hour",
                    "verification_codes_per_contact_per_hour",
                ],
            },
        ),
        (
            _("How customers verify"),
            {
                "description": _(
                    "What a verification, or a customer's confirmation of an action, sends "
                    "to the customer's own phone or email: a code they read back to the "
                    "agent, a link they tap on their phone (no code passes through the chat; "
                    "needs the site's public address), or both. The same limits of codes "
                    "apply to links."
                ),
                "fields": ["verification_form_sms", "verification_form_email"],
            },
        ),
        (
            _("SMS"),
            {
                "description": _(
                    "Whom the company's SMS may reach (verification codes, appointment "
                    "messages, notices of changed details) and how many may leave in an "
                    "hour. A sandbox company's messages are never sent: they are kept in "
                    "its outbox."
                ),
                "fields": ["sms_countries", "sms_hourly_budget"],
            },
        ),
        (
            _("Repeated requests from the agent"),
            {
                "description": _(
                    "How long a customer's same request, asked again by the agent, is "
                    "answered with what already exists instead of being made twice."
                ),
                "fields": [
                    "quote_intent_window_minutes",
                    "sales_contact_intent_window_minutes",
                    "case_intent_window_minutes",
                ],
            },
        ),
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> Any:
        readonly = super().get_readonly_fields(request, obj)
        return readonly if request.user.is_superuser else (*readonly, *self.operator_fields)

    def get_prepopulated_fields(self, request: HttpRequest, obj=None) -> dict:
        return super().get_prepopulated_fields(request, obj) if request.user.is_superuser else {}


@admin.register(StaffMembership)
class StaffMembershipAdmin(CompanyScopedAdmin):
    """Memberships go through core.roles, which keeps the user's role groups in step."""

    list_display = ["user", "company", "role"]
    list_filter = ["role", "company"]

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> list[str]:
        return ["user", "company"] if obj is not None else []

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        ids = staff_company_ids(request)
        if db_field.name == "user" and ids is not None:
            # Colleagues, or accounts no company has taken on yet; never another company's staff.
            kwargs["queryset"] = (
                get_user_model()
                .objects.filter(
                    Q(memberships__company__in=ids) | Q(memberships__isnull=True),
                    is_superuser=False,
                )
                .distinct()
                .order_by("username")
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request, obj, form, change):
        membership = staff_membership_set(user=obj.user, company=obj.company, role=obj.role)
        obj.pk = membership.pk

    def delete_model(self, request, obj):
        staff_membership_remove(memberships=[obj])

    def delete_queryset(self, request, queryset):
        staff_membership_remove(memberships=queryset.select_related("user"))
