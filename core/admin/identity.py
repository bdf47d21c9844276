"""Staff admin for who is talking: contacts, conversations, step-up, codes (security events:
core.admin.security_events)."""

import re

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from core.admin.contact_file import ContactFileAdmin
from core.admin.export import CsvExportAdmin
from core.admin.scoping import CompanyScopedAdmin
from core.admin.transitions import RecordRulesAdmin
from core.errors import GaranteError, ValidationFailed
from core.models import (
    Contact,
    Conversation,
    StepUpPolicy,
    VerificationChallenge,
    default_confirm_actions,
    default_step_up_actions,
)
from core.process_cache import change_seen_everywhere
from core.sms_policy import sms_phone_normalize
from core.step_up_choices import confirm_choices, step_up_choices
from core.verification.issue import challenge_issue, challenge_resend, challenge_revoke


def contact_search_fields(path: str = "") -> list[str]:
    """What staff find a customer by (name, document, phone, email), from a model that reaches
    the contact by `path` ("contact__" from an appointment, a quote, a case)."""
    return [f"{path}{name}" for name in CONTACT_SEARCH]


CONTACT_SEARCH = ("first_name", "last_name", "document_number", "phone", "email")


class ContactAdminForm(forms.ModelForm):
    """A phone staff type in is refused as every other way in refuses it: one the company may
    not text (core.sms_policy), shown by the field. Checked only when it changes, so a contact
    saved before the rule can still be edited."""

    class Meta:
        model = Contact
        fields = [
            "company",
            "first_name",
            "last_name",
            "document_number",
            "phone",
            "email",
            "sms_opt_out",
            "email_opt_out",
        ]

    def clean(self) -> dict:
        cleaned = super().clean()
        company = cleaned.get("company") or getattr(self.instance, "company", None)
        phone = cleaned.get("phone")
        if company is not None and phone and "phone" in self.changed_data:
            try:
                cleaned["phone"] = sms_phone_normalize(company=company, raw=phone)
            except ValidationFailed as refusal:
                self.add_error("phone", str(refusal.user_message))
        return cleaned


@admin.register(Contact)
class ContactAdmin(ContactFileAdmin, CsvExportAdmin, CompanyScopedAdmin):
    form = ContactAdminForm
    export_fields = ["first_name", "last_name", "document_number", "phone", "email", "created_at"]
    list_display = ["__str__", "company", "document_number", "phone", "email", "created_at"]
    list_filter = ["company"]
    search_fields = [*contact_search_fields(), "integration_reference__reference"]

    def save_model(self, request, obj, form, change):
        from core.normalize import normalize_document, normalize_email, normalize_phone

        country = obj.company.country
        obj.document_number = (
            normalize_document(obj.document_number, country) if obj.document_number else ""
        )
        obj.phone = normalize_phone(obj.phone, country) if obj.phone else ""
        obj.email = normalize_email(obj.email) if obj.email else ""
        super().save_model(request, obj, form, change)


@admin.register(Conversation)
class ConversationAdmin(RecordRulesAdmin, CompanyScopedAdmin):
    read_only_records = True  # the trace is evidence; codes are sent by the actions
    list_display = ["external_id", "company", "contact", "identified_at", "last_seen_at"]
    list_filter = ["company"]
    # The contact is optional (an unidentified conversation), so Django's own select_related of
    # list_display's foreign keys would leave it out: a query per row.
    list_select_related = ["company", "contact"]
    search_fields = ["external_id"]
    # How the customer identified is shown by its label in the staff member's language.
    readonly_fields = [
        "identified_via_shown" if f.name == "identified_via" else f.name
        for f in Conversation._meta.fields
    ]
    exclude = ["identified_via"]
    actions = ["send_code_by_sms", "send_code_by_email"]
    action_permissions = {"issue_code": "core.add_verificationchallenge"}

    @admin.display(description=_("identified via"))
    def identified_via_shown(self, conversation: Conversation) -> str:
        labels = {
            "document": _("document number"),
            "phone": _("phone"),
            "email": _("email"),
            "link": _("a link sent to the customer"),
        }
        via = conversation.identified_via
        return str(labels.get(via, via)) if via else "—"

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

    confirm_actions = forms.MultipleChoiceField(
        label=_("Actions the customer confirms with a code"),
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text=_(
            "Each time, a code is sent to the customer's own phone (else email) for that very "
            "action, and nothing is done until they give it back in the same conversation."
        ),
    )

    class Meta:
        model = StepUpPolicy
        fields = ["company"]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        actions = self.instance.actions if self.instance.pk else default_step_up_actions()
        self.fields["actions_text"].initial = "\n".join(actions)
        # The tools that ask it (tooling registers them), read now: tools register at start-up.
        confirmable = confirm_choices()
        self.fields["confirm_actions"].choices = [(name, name) for name in confirmable]
        confirmed = self.instance.confirm_actions if self.instance.pk else default_confirm_actions()
        self.fields["confirm_actions"].initial = [n for n in confirmed if n in confirmable]

    def clean_actions_text(self) -> list[str]:
        names = [line.strip() for line in self.cleaned_data["actions_text"].splitlines()]
        names = [n for n in names if n]
        invalid = [n for n in names if not _TOOL_NAME.match(n)]
        if invalid:
            raise forms.ValidationError(
                _("Not a tool name: %(names)s"), params={"names": ", ".join(invalid)}
            )
        # A name the tools do not check would protect nothing while seeming to.
        can_ask = step_up_choices()
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
        self.instance.confirm_actions = sorted(self.cleaned_data["confirm_actions"])
        return super().save(commit=commit)


_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


@admin.register(StepUpPolicy)
class StepUpPolicyAdmin(CompanyScopedAdmin):
    form = StepUpPolicyForm
    list_display = ["company", "actions", "confirm_actions", "updated_at"]

    def save_model(self, request: HttpRequest, obj, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        self._tell_when_applied(request)

    def delete_model(self, request: HttpRequest, obj) -> None:
        super().delete_model(request, obj)
        self._tell_when_applied(request)

    def _tell_when_applied(self, request: HttpRequest) -> None:
        # Servers keep a company's policy a few seconds (core.identity.step_up.step_up_policies).
        self.message_user(
            request,
            _("Every server applies this change %(when)s.") % {"when": change_seen_everywhere()},
        )


# What our own code stores about a code's delivery (English, for the logs), as staff read it;
# a provider's own words ("queued", "SMTP 550") are shown as they came.
DELIVERY_WORDS_SHOWN = {
    "printed": _("printed in the server's log (no SMS provider set up)"),
    "written": _("written to a file (no SMS provider set up)"),
    "stored": _("kept in memory (no SMS provider set up)"),
    "no longer valid": _("the code was no longer valid"),
    "expired before delivery": _("the code expired before it could be sent"),
    "revoked before delivery": _("the code was revoked before it was sent"),
    "the worker stopped while sending; it may have left": _(
        "sending stopped before it finished; the code may have left"
    ),
    "nobody has that identifier": _("nobody has that identifier"),
    "no phone or email on record": _("the customer has no phone or email"),
    "the customer's codes are locked": _("the customer's codes are locked"),
    "over the customer's hourly limit": _("over the customer's hourly limit"),
    "over the conversation's limit": _("over the conversation's limit"),
    "over the credential's hourly budget": _("over the gateway credential's hourly budget"),
}


def delivery_words_shown(value: str) -> str:
    if not value:
        return "—"
    if value.startswith("broker unreachable"):
        return str(_("the message queue could not be reached"))
    return str(DELIVERY_WORDS_SHOWN.get(value, value))


@admin.register(VerificationChallenge)
class VerificationChallengeAdmin(RecordRulesAdmin, CompanyScopedAdmin):
    """Status, channel, masked destination, attempts and times; never the code, its HMAC or
    the full destination. Codes are issued from the conversation list (an action there)."""

    list_display = [
        "created_at",
        "contact",
        "purpose",
        "channel",
        "sent_as",
        "masked_destination",
        "status",
        "delivery_status",
        "attempts",
        "expires_at",
        "sent_at",
    ]
    list_filter = ["purpose", "status", "delivery_status", "channel", "company", "created_at"]
    search_fields = ["conversation__external_id", "contact__first_name", "contact__last_name"]
    list_select_related = ["contact"]
    fields = [
        "company",
        "contact",
        "conversation",
        "purpose",
        "credential",
        "identifier_kind",
        "action",
        "action_summary",
        "channel",
        "sent_as",
        "masked_destination",
        "status",
        "attempts",
        "created_at",
        "expires_at",
        "verified_at",
        "consumed_at",
        "delivery_status",
        "delivery_attempts",
        "delivery_error_shown",
        "provider_message_id",
        "provider_status_shown",
        "sent_at",
        "issued_by",
    ]
    actions = ["revoke", "resend"]
    read_only_records = True  # a sent code is a record; revoke and resend are actions

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> list[str]:
        return self.fields

    @admin.display(description=_("delivery error"))
    def delivery_error_shown(self, challenge: VerificationChallenge) -> str:
        return delivery_words_shown(challenge.delivery_error)

    @admin.display(description=_("provider status"))
    def provider_status_shown(self, challenge: VerificationChallenge) -> str:
        return delivery_words_shown(challenge.provider_status)

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
