"""Staff admin for the core models, and the per-company scoping every admin in Garante uses."""

import functools
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.utils import NotRelationField, get_fields_from_path
from django.contrib.auth import get_permission_codename, get_user_model
from django.core.exceptions import FieldDoesNotExist
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils import formats, timezone
from django.utils.translation import gettext_lazy as _
from django_fsm_log.admin import StateLogInline
from django_fsm_log.models import StateLog

from core.errors import GaranteError
from core.models import (
    Company,
    Contact,
    Conversation,
    GatewayCredential,
    SecurityEvent,
    StaffMembership,
    StepUpPolicy,
    VerificationChallenge,
    default_step_up_actions,
)
from core.roles import staff_company_ids, staff_membership_remove, staff_membership_set
from core.services import gateway_credential_issue, gateway_credential_revoke
from core.step_up import step_up_actions
from core.verification import challenge_issue, challenge_resend, challenge_revoke


def _per_company(model: type) -> bool:
    """Whether the model's rows each belong to one company (a `company` field)."""
    return any(f.name == "company" for f in model._meta.fields)


def _company_checked_form(
    form: type[forms.ModelForm], model_admin: "CompanyScopedAdmin", request: HttpRequest
) -> type[forms.ModelForm]:
    """`form`, whose validation ends with `model_admin.check_company` on the row it built."""

    def _post_clean(self: forms.ModelForm) -> None:
        form._post_clean(self)
        if not self.errors:
            model_admin.check_company(request, self)

    return type(form)(form.__name__, (form,), {"_post_clean": _post_clean})


class CompanyScopedAdmin(admin.ModelAdmin):
    """Shows staff only their companies' rows and offers only their companies' related rows,
    and lets them act on a row only as their role in its company allows.

    `company_path` is the lookup from the model to its Company ("company", "quote__company",
    "pk" for the company itself). Per row, the view, change and delete permissions are those
    of the staff member's role in the row's company (`staff_company_ids`); a new row may be
    added only to a company whose role grants the add permission. A saved form is checked
    too: a row never moves to another company, and what it refers to (a contact, a service, a
    staff member) belongs to the row's own company. Actions run only on the selected rows of
    companies whose role grants the action's permissions (`action_permissions` maps an
    action's custom permission to the one it needs).
    """

    company_path = "company"
    action_permissions: dict[str, str] = {}

    def company_permission(self, action: str) -> str:
        """The permission ("app_label.codename") an action needs on this admin's model."""
        if action in self.action_permissions:
            return self.action_permissions[action]
        if action not in ("view", "add", "change", "delete"):
            action = "change"
        return f"{self.opts.app_label}.{get_permission_codename(action, self.opts)}"

    def allowed_company_ids(self, request: HttpRequest, *actions: str) -> set[int] | None:
        """The companies where the staff member may do any of `actions` on this model; None
        means all (superusers)."""
        allowed: set[int] = set()
        for action in actions:
            ids = staff_company_ids(request, self.company_permission(action))
            if ids is None:
                return None
            allowed.update(ids)
        return allowed

    def company_id_of(self, obj: Any) -> int | None:
        """The id of the company `obj` belongs to, following `company_path`."""
        *hops, last = self.company_path.split("__")
        for hop in hops:
            obj = getattr(obj, hop, None)
            if obj is None:
                return None
        return obj.pk if last == "pk" else getattr(obj, f"{last}_id", None)

    def _may(self, request: HttpRequest, obj: Any, *actions: str) -> bool:
        if obj is None:
            return True
        allowed = self.allowed_company_ids(request, *actions)
        return allowed is None or self.company_id_of(obj) in allowed

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request)
        ids = self.allowed_company_ids(request, "view", "change")
        if ids is None:
            return queryset
        return queryset.filter(**{f"{self.company_path}__in": ids})

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_view_permission(request, obj) and self._may(
            request, obj, "view", "change"
        )

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_change_permission(request, obj) and self._may(request, obj, "change")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_delete_permission(request, obj) and self._may(request, obj, "delete")

    def has_add_permission(self, request: HttpRequest) -> bool:
        allowed = self.allowed_company_ids(request, "add")
        return super().has_add_permission(request) and (allowed is None or bool(allowed))

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        readonly = super().get_readonly_fields(request, obj)
        if obj is not None and _per_company(self.model) and "company" not in readonly:
            return (*readonly, "company")
        return readonly

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs):
        form = _company_checked_form(
            super().get_form(request, obj, change=change, **kwargs), self, request
        )
        allowed = self.allowed_company_ids(request, "add")
        company = form.base_fields.get("company")  # the subclass's own fields, built anew
        if obj is None and allowed is not None and company is not None:
            company.queryset = company.queryset.filter(pk__in=allowed)
        return form

    def get_actions(self, request: HttpRequest) -> dict:
        return {
            name: (self._scoped_action(func), name, description)
            for name, (func, name, description) in super().get_actions(request).items()
        }

    def _scoped_action(self, func: Callable) -> Callable:
        actions = getattr(func, "allowed_permissions", None) or ("change",)

        @functools.wraps(func)
        def scoped(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet):
            for action in actions:
                ids = self.allowed_company_ids(request, action)
                if ids is not None:
                    queryset = queryset.filter(**{f"{self.company_path}__in": ids})
            return func(modeladmin, request, queryset)

        return scoped

    def check_company(self, request: HttpRequest, form: forms.ModelForm) -> None:
        """Add to `form` the errors of a row that would leave its company, belong to one where
        the staff member may not add or change it, or refer to another company's things."""
        instance = form.instance
        company_id = self.company_id_of(instance)
        if company_id is None:
            return  # the form's own errors say what is missing
        if instance.pk is not None:
            stored = (
                type(instance)
                ._default_manager.filter(pk=instance.pk)
                .values_list(self.company_path, flat=True)
                .first()
            )
            if stored is not None and stored != company_id:
                form.add_error(None, _("A record cannot move to another company."))
                return
        allowed = self.allowed_company_ids(request, "change" if instance.pk else "add")
        if allowed is not None and company_id not in allowed:
            form.add_error(None, _("Your role in this company does not allow this."))
            return
        for name, value in list(form.cleaned_data.items()):
            try:
                field = instance._meta.get_field(name)
            except FieldDoesNotExist:
                continue
            if not field.is_relation or value is None:
                continue
            related = field.related_model
            values = list(value) if field.many_to_many else [value]
            if related is get_user_model() and instance._meta.model is not StaffMembership:
                users = [u.pk for u in values]
                staff = StaffMembership.objects.filter(user__in=users, company_id=company_id)
                if staff.count() != len(set(users)):
                    form.add_error(name, _("Choose a staff member of this record's company."))
            elif _per_company(related) and any(v.company_id != company_id for v in values):
                form.add_error(name, _("Choose one of this record's company."))

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        ids = staff_company_ids(request)
        if ids is not None:
            related = db_field.related_model
            if related is Company:
                kwargs["queryset"] = Company.objects.filter(pk__in=ids)
            elif _per_company(related):
                kwargs["queryset"] = related._default_manager.filter(company__in=ids)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        ids = staff_company_ids(request)
        related = db_field.related_model
        if ids is not None and _per_company(related):
            kwargs["queryset"] = related._default_manager.filter(company__in=ids)
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def get_list_filter(self, request: HttpRequest) -> list:
        """A filter on a related field offers only what the staff member's own rows refer to,
        so the sidebar never lists other companies, their professionals or their staff."""
        filters = list(super().get_list_filter(request))
        if staff_company_ids(request) is None:
            return filters
        return [_related_only(self.model, spec) for spec in filters]


class TransitionHistoryInline(StateLogInline):
    """django-fsm-log's history of an object, in the staff's language: which button, from
    which state to which, who, when. Read-only, newest first."""

    fields = ["when", "transition_shown", "from_state", "to_state", "by_shown", "note"]
    verbose_name = _("state change")
    verbose_name_plural = _("state history")

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> list[str]:
        return self.fields

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        return True  # whoever may see the object may see its history

    @admin.display(description=_("when"))
    def when(self, log: StateLog) -> str:
        return formats.date_format(timezone.localtime(log.timestamp), "SHORT_DATETIME_FORMAT")

    @admin.display(description=_("note"))
    def note(self, log: StateLog) -> str:
        return log.description or "—"

    @admin.display(description=_("action"))
    def transition_shown(self, log: StateLog) -> str:
        method = getattr(log.content_type.model_class(), log.transition, None)
        meta = getattr(method, "_django_fsm", None)
        for transition in getattr(meta, "transitions", {}).values():
            if transition.custom.get("label"):
                return str(transition.custom["label"])
        return log.transition

    @admin.display(description=_("from"))
    def from_state(self, log: StateLog) -> str:
        return log.get_source_state_display() or "—"

    @admin.display(description=_("to"))
    def to_state(self, log: StateLog) -> str:
        return log.get_state_display()

    @admin.display(description=_("by"))
    def by_shown(self, log: StateLog) -> str:
        if log.by is None:
            return _("the conversational agent or the system")
        return f"{log.by.get_full_name() or log.by.get_username()} ({log.by.get_username()})"


def values_filter(
    field: str, title: object, values: Callable[[], Iterable[tuple[str, object]]]
) -> type[admin.SimpleListFilter]:
    """A list filter on `field` offering a set of values known to the code (`values()`: pairs
    of value and label). Django's own filter of a field without choices reads the distinct
    values from the table on every page: a scan of every row, seconds on a log of millions."""

    class ValuesFilter(admin.SimpleListFilter):
        parameter_name = field

        def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
            return list(values())

        def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
            value = self.value()
            return queryset if value is None else queryset.filter(**{field: value})

    ValuesFilter.title = title
    return ValuesFilter


class _OwnCompaniesRelatedFilter(admin.RelatedFieldListFilter):
    """A filter on a company, or on a per-company model (a professional, a service), offering
    the staff member's companies' own: what their rows can refer to, read from that small
    table instead of from the distinct values of every row listed (a scan of the whole log)."""

    def field_choices(self, field, request: HttpRequest, model_admin: admin.ModelAdmin) -> list:
        related = field.related_model
        ids = staff_company_ids(request) or []
        rows = related._default_manager.filter(
            **{"pk__in" if related is Company else "company__in": ids}
        )
        ordering = self.field_admin_ordering(field, request, model_admin)
        return [(row.pk, str(row)) for row in rows.order_by(*ordering)]


def _related_only(model: type, spec: object) -> object:
    if not isinstance(spec, str):
        return spec
    try:
        field = get_fields_from_path(model, spec)[-1]
    except (FieldDoesNotExist, NotRelationField):
        return spec
    if not field.is_relation:
        return spec
    related = field.related_model
    if related is Company or _per_company(related):
        return (spec, _OwnCompaniesRelatedFilter)
    return (spec, admin.RelatedOnlyFieldListFilter)


@admin.register(Company)
class CompanyAdmin(CompanyScopedAdmin):
    company_path = "pk"
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
                    "Each limit counts failed identifications in a sliding window. Past "
                    "one, identification answers 'too many attempts' with the seconds to "
                    "wait, the same for every identifier."
                ),
                "fields": [
                    ("identify_failures_per_conversation", "identify_conversation_window_minutes"),
                    ("identify_failures_per_credential", "identify_credential_window_minutes"),
                    ("identify_failures_per_identifier", "identify_identifier_window_minutes"),
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

    @admin.action(description=_("Revoke selected credentials"), permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> None:
        revoked = 0
        for credential in queryset.filter(revoked_at__isnull=True):
            gateway_credential_revoke(credential=credential)
            revoked += 1
        self.message_user(
            request,
            _("Revoked %(n)d credential(s); every server refuses them within %(seconds)d seconds.")
            % {"n": revoked, "seconds": math.ceil(settings.GARANTE_PROCESS_CACHE_SECONDS)},
        )


@admin.register(Conversation)
class ConversationAdmin(CompanyScopedAdmin):
    list_display = ["external_id", "company", "contact", "identified_at", "last_seen_at"]
    list_filter = ["company"]
    # The contact is optional (an unidentified conversation), so Django's own select_related of
    # list_display's foreign keys would leave it out: a query per row.
    list_select_related = ["company", "contact"]
    search_fields = ["external_id"]
    readonly_fields = [f.name for f in Conversation._meta.fields]
    actions = ["send_code_by_sms", "send_code_by_email"]
    action_permissions = {"issue_code": "core.add_verificationchallenge"}

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_issue_code_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("core.add_verificationchallenge")

    def _issue(self, request: HttpRequest, queryset: QuerySet, channel: str) -> None:
        """Staff issue a code for the caller of each conversation, to the identified contact's
        own registered channel (the same service, limits and delivery as the tool)."""
        for conversation in queryset.select_related("contact"):
            if conversation.contact is None:
                self.message_user(
                    request,
                    _("%(c)s: nobody has identified in this conversation yet.")
                    % {"c": conversation},
                    messages.ERROR,
                )
                continue
            try:
                challenge = challenge_issue(
                    contact=conversation.contact,
                    channel=channel,
                    conversation=conversation,
                    issued_by=request.user,
                )
            except GaranteError as error:
                self.message_user(request, f"{conversation}: {error.user_message}", messages.ERROR)
                continue
            self.message_user(
                request,
                _("%(c)s: a code is on its way to %(to)s.")
                % {"c": conversation, "to": challenge.masked_destination},
            )

    @admin.action(description=_("Send a verification code by SMS"), permissions=["issue_code"])
    def send_code_by_sms(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._issue(request, queryset, "sms")

    @admin.action(description=_("Send a verification code by email"), permissions=["issue_code"])
    def send_code_by_email(self, request: HttpRequest, queryset: QuerySet) -> None:
        self._issue(request, queryset, "email")


class StepUpPolicyForm(forms.ModelForm):
    actions_text = forms.CharField(
        label=_("Actions that need a verification code"),
        widget=forms.Textarea(attrs={"rows": 6}),
        required=False,
        help_text=_("One tool name per line, e.g. accept_quote or update_contact_details."),
    )

    class Meta:
        model = StepUpPolicy
        fields = ["company"]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        actions = self.instance.actions if self.instance.pk else default_step_up_actions()
        self.fields["actions_text"].initial = "\n".join(actions)

    def clean_actions_text(self) -> list[str]:
        names = [line.strip() for line in self.cleaned_data["actions_text"].splitlines()]
        names = [n for n in names if n]
        invalid = [n for n in names if not _TOOL_NAME.match(n)]
        if invalid:
            raise forms.ValidationError(
                _("Not a tool name: %(names)s"), params={"names": ", ".join(invalid)}
            )
        # A name the tools do not check would protect nothing while seeming to.
        can_ask = step_up_actions()
        unable = [n for n in names if n not in can_ask]
        if unable:
            raise forms.ValidationError(
                _(
                    "Not a tool that acts for an identified customer, so it cannot ask for a "
                    "code: %(names)s"
                ),
                params={"names": ", ".join(unable)},
            )
        return sorted(set(names))

    def save(self, commit: bool = True) -> StepUpPolicy:
        self.instance.actions = self.cleaned_data["actions_text"]
        return super().save(commit=commit)


_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


@admin.register(StepUpPolicy)
class StepUpPolicyAdmin(CompanyScopedAdmin):
    form = StepUpPolicyForm
    list_display = ["company", "actions", "updated_at"]

    def save_model(self, request: HttpRequest, obj, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        self._tell_when_applied(request)

    def delete_model(self, request: HttpRequest, obj) -> None:
        super().delete_model(request, obj)
        self._tell_when_applied(request)

    def _tell_when_applied(self, request: HttpRequest) -> None:
        # Servers keep a company's policy for a few seconds (core.identity.step_up_policies).
        self.message_user(
            request,
            _("Every server applies this change within %(seconds)d seconds.")
            % {"seconds": math.ceil(settings.GARANTE_PROCESS_CACHE_SECONDS)},
        )


@admin.register(SecurityEvent)
class SecurityEventAdmin(CompanyScopedAdmin):
    list_display = [
        "created_at",
        "kind",
        "company",
        "conversation_key",
        "contact",
        "claimed_contact",
        "credential",
    ]
    list_filter = ["kind", "company"]
    search_fields = ["conversation_key"]
    list_select_related = ["company", "contact", "claimed_contact", "credential"]
    # The digest counts failures per identifier value; it means nothing to a reader.
    exclude = ["identifier_digest"]
    date_hierarchy = "created_at"

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> list[str]:
        return [f.name for f in SecurityEvent._meta.fields if f.name != "identifier_digest"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


@admin.register(VerificationChallenge)
class VerificationChallengeAdmin(CompanyScopedAdmin):
    """Status, channel, masked destination, attempts and times; never the code, its HMAC or
    the full destination. Codes are issued from the conversation list (an action there)."""

    list_display = [
        "created_at",
        "contact",
        "channel",
        "masked_destination",
        "status",
        "delivery_status",
        "attempts",
        "expires_at",
        "sent_at",
    ]
    list_filter = ["status", "delivery_status", "channel", "company"]
    search_fields = ["conversation__external_id", "contact__first_name", "contact__last_name"]
    list_select_related = ["contact"]
    fields = [
        "company",
        "contact",
        "conversation",
        "channel",
        "masked_destination",
        "status",
        "attempts",
        "created_at",
        "expires_at",
        "verified_at",
        "delivery_status",
        "delivery_attempts",
        "delivery_error",
        "provider_message_id",
        "provider_status",
        "sent_at",
        "issued_by",
    ]
    actions = ["revoke", "resend"]

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> list[str]:
        return self.fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description=_("Revoke selected codes"), permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet) -> None:
        revoked = sum(challenge_revoke(challenge=c) for c in queryset)
        self.message_user(request, _("Revoked %(n)d code(s).") % {"n": revoked})

    @admin.action(
        description=_("Resend: a new code to the same contact and channel"),
        permissions=["change"],
    )
    def resend(self, request: HttpRequest, queryset: QuerySet) -> None:
        for challenge in queryset.select_related("contact", "conversation"):
            try:
                fresh = challenge_resend(challenge=challenge, issued_by=request.user)
            except GaranteError as error:
                self.message_user(request, str(error.user_message), messages.ERROR)
                continue
            self.message_user(
                request,
                _("A new code is on its way to %(to)s.") % {"to": fresh.masked_destination},
            )
