"""Staff admin for support: the case queue, transition buttons and comments, all via services."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from core.admin import (
    CompanyScopedAdmin,
    CsvExportAdmin,
    ServiceTransitionsAdmin,
    TransitionHistoryInline,
    contact_search_fields,
)
from core.admin.confirmation import Confirmation, customer_told, nothing_sent
from core.l10n import datetime_shown
from core.models import StaffMembership
from core.roles import staff_company_ids
from core.states import state_in_sentence
from support import selectors, services
from support.case_messages import channel_for, reason_shown
from support.models import Case, CaseComment, CaseMessage, SupportSettings


class AssigneeFilter(admin.SimpleListFilter):
    title = _("assignee")
    parameter_name = "assignee"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        assigned = (
            get_user_model()
            .objects.filter(assigned_cases__in=model_admin.get_queryset(request))
            .distinct()
            .order_by("username")
        )
        return [
            ("me", _("Assigned to me")),
            ("none", _("Unassigned")),
            *[(str(user.pk), user.get_full_name() or user.get_username()) for user in assigned],
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if value == "me":
            return queryset.filter(assignee=request.user)
        if value == "none":
            return queryset.filter(assignee__isnull=True)
        if value and value.isdigit():
            return queryset.filter(assignee_id=int(value))
        return queryset


class CaseAdminForm(forms.ModelForm):
    class Meta:
        model = Case
        fields = [
            "company",
            "contact",
            "subject",
            "description",
            "channel",
            "priority",
            "assignee",
            "related_case",
            "internal_notes",
        ]

    def clean(self) -> dict[str, Any]:
        # The service enforces this too; checking here turns it into a form error, not a 500.
        data = super().clean()
        company = data.get("company") or getattr(self.instance, "company", None)
        assignee = data.get("assignee")
        if (
            company is not None
            and assignee is not None
            and not StaffMembership.objects.filter(company=company, user=assignee).exists()
        ):
            self.add_error("assignee", _("That user is not staff of this company."))
        contact = data.get("contact")
        if company is not None and contact is not None and contact.company_id != company.pk:
            self.add_error("contact", _("That contact belongs to another company."))
        related = data.get("related_case")
        if related is not None and contact is not None and related.contact_id != contact.pk:
            self.add_error("related_case", _("The related case must be of the same contact."))
        return data


class CommentVisibilityField(forms.TypedChoiceField):
    """Internal note or public reply, as two radio buttons; a note unless chosen otherwise."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            choices=[
                (False, _("Internal note (staff only)")),
                (True, _("Public reply (emailed or texted to the customer)")),
            ],
            coerce=lambda value: value in (True, "True"),
            empty_value=False,
            required=False,
            initial=False,
            widget=forms.RadioSelect,
            label=_("Send as"),
            **kwargs,
        )

    def has_changed(self, initial: Any, data: Any) -> bool:
        # The choice alone is no new comment: the empty form under the thread is left out of
        # the save unless something is written in it.
        return False


class CaseCommentForm(forms.ModelForm):
    public = CommentVisibilityField()

    class Meta:
        model = CaseComment
        fields = ["body", "public"]


class CaseCommentInline(admin.StackedInline):
    """The thread, oldest first, each message marked public or internal; new ones are added
    through the service (a public one is sent to the customer), old ones never edited."""

    model = CaseComment
    form = CaseCommentForm
    extra = 1
    can_delete = False
    fields = ["author", "created_at", "body", "public"]
    readonly_fields = ["author", "created_at"]
    verbose_name = _("comment")
    verbose_name_plural = _("conversation with the customer (public replies are sent to them)")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).select_related("author_user", "author_contact")

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # No comments before the case exists (add form) or after it closed (terminal).
        return obj is not None and obj.state != Case.State.CLOSED

    @admin.display(description=_("author"))
    def author(self, comment: CaseComment) -> str:
        if comment.author_contact_id:
            return _("%(name)s (customer)") % {"name": comment.author_contact}
        if comment.author_user_id:
            return comment.author_user.get_full_name() or comment.author_user.get_username()
        return "—"


def _close_effect(case: Case) -> list[str]:
    """Closing ends it for good; the customer is told, with the reason, on the channel the
    message would take now (support.case_messages)."""
    channel, why = channel_for(case.contact)
    name = str(case.contact)
    return [
        _("The case is closed for good: a new problem needs a new case."),
        customer_told(name, channel) if channel else nothing_sent(name, why),
    ]


def _resolve_effect(case: Case) -> list[str]:
    """Resolving tells the customer (with staff's note, if any), who may still say it is not
    fixed before the case closes by itself."""
    channel, why = channel_for(case.contact)
    name = str(case.contact)
    days = selectors.support_auto_close_days(company_id=case.company_id)
    effect = [
        _(
            "The case is marked resolved: if %(name)s does not answer within %(days)d days, "
            "it closes by itself."
        )
        % {"name": name, "days": days}
    ]
    if not channel:
        return [*effect, nothing_sent(name, why)]
    if channel == CaseMessage.Channel.SMS:
        told = _("%(name)s will receive an SMS saying the case is resolved, with your note.")
    else:
        told = _(
            "%(name)s will receive an email saying the case is resolved, with the thread and "
            "your note."
        )
    return [*effect, told % {"name": name}]


RESOLVE_CONFIRMATION = Confirmation(
    reasons=[],
    effect=_resolve_effect,
    bulk_label=_("Resolve the selected cases"),
    reason_required=False,
    reversible=True,
    details_label=_("Resolution note for the customer"),
)


CLOSE_CONFIRMATION = Confirmation(
    reasons=[
        ("solved", _("Solved, confirmed by the customer")),
        ("no_answer", _("No answer from the customer")),
        ("duplicate", _("Duplicate of another case")),
    ],
    effect=_close_effect,
    bulk_label=_("Close the selected cases"),
)


class CaseMessageInline(admin.TabularInline):
    """What the customer was sent about this case (support.case_messages), each with its
    delivery state: read-only, oldest first."""

    model = CaseMessage
    extra = 0
    can_delete = False
    fields = [
        "kind",
        "reply",
        "reason",
        "channel",
        "masked_destination",
        "status",
        "sent",
        "attempts",
        "why",
    ]
    readonly_fields = fields
    verbose_name = _("message to the customer")
    verbose_name_plural = _("messages to the customer")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).select_related("comment")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return True  # whoever may see the case may see what its customer was sent

    @admin.display(description=_("reply"))
    def reply(self, message: CaseMessage) -> str:
        if message.comment is None:
            return "—"
        body = " ".join(message.comment.body.split())
        return body if len(body) <= 60 else f"{body[:59]}…"

    @admin.display(description=_("sent"))
    def sent(self, message: CaseMessage) -> str:
        # The page renders in the company's time zone (CompanyLocalTimeMixin).
        if message.sent_at is None:
            return "—"
        return datetime_shown(message.sent_at)

    @admin.display(description=_("why not sent / error"))
    def why(self, message: CaseMessage) -> str:
        return reason_shown(message.error) if message.error else "—"


# The channel as a sentence names it ("by email", "by SMS"), not as a column heading does.
CHANNEL_WORDS = {CaseMessage.Channel.EMAIL: _("email"), CaseMessage.Channel.SMS: _("SMS")}


def _tell_staff_of(
    request: HttpRequest, message: CaseMessage | None, *, kind: str = CaseMessage.Kind.REPLY
) -> None:
    """Say whether the customer is being told: by which channel, or why they cannot be (the
    reply, the resolution or the close is kept all the same)."""
    if message is None:
        return
    name = message.case.contact.first_name
    if message.status == CaseMessage.Status.NOT_SENT:
        text = {
            CaseMessage.Kind.RESOLVED: _(
                "The case is resolved, but %(name)s could not be told: %(reason)s."
            ),
            CaseMessage.Kind.CLOSED: _(
                "The case is closed, but %(name)s could not be told: %(reason)s."
            ),
        }.get(kind, _("The reply is saved, but it could not be sent to %(name)s: %(reason)s."))
        shown = text % {"name": name, "reason": reason_shown(message.error)}
        messages.warning(request, shown)
        return
    text = {
        CaseMessage.Kind.RESOLVED: _(
            "%(name)s is being told by %(channel)s that the case is resolved."
        ),
        CaseMessage.Kind.CLOSED: _(
            "%(name)s is being told by %(channel)s that the case is closed."
        ),
    }.get(kind, _("The reply is being sent to %(name)s by %(channel)s."))
    shown = text % {"name": name, "channel": CHANNEL_WORDS[message.channel]}
    messages.info(request, shown)


@admin.register(Case)
class CaseAdmin(CsvExportAdmin, ServiceTransitionsAdmin, CompanyScopedAdmin):
    export_fields = [
        "reference",
        "subject",
        "state",
        "priority",
        "channel",
        "contact__first_name",
        "contact__last_name",
        "contact__phone",
        "contact__email",
        "assignee__username",
        "created_at",
        "resolved_at",
        "closed_at",
    ]
    autocomplete_fields = ["contact", "related_case"]
    form = CaseAdminForm
    fsm_services = {
        "start": lambda case, user: services.case_start(case=case, by=user),
        "wait_for_customer": lambda case, user: services.case_wait_for_customer(case=case, by=user),
        "resume": lambda case, user: services.case_resume(case=case, by=user),
        "resolve": lambda case, user, reason: services.case_resolve(
            case=case, by=user, reason=reason
        ),
        "reopen": lambda case, user: services.case_reopen(case=case, by=user),
        "close": lambda case, user, reason: services.case_close(case=case, by=user, reason=reason),
    }
    fsm_confirmations = {"resolve": RESOLVE_CONFIRMATION, "close": CLOSE_CONFIRMATION}
    list_display = [
        "reference",
        "subject",
        "contact",
        "state",
        "priority",
        "assignee",
        "channel",
        "created_at",
        "updated_at",
    ]
    list_filter = ["state", "priority", AssigneeFilter, "channel", "company"]
    list_select_related = ["contact", "assignee"]
    search_fields = ["reference", "subject", *contact_search_fields("contact__")]
    date_hierarchy = "created_at"
    inlines = [CaseCommentInline, CaseMessageInline, TransitionHistoryInline]
    add_fields = [
        "company",
        "contact",
        "subject",
        "description",
        "channel",
        "priority",
        "assignee",
        "related_case",
        "internal_notes",
    ]
    change_fields = [
        "reference",
        "state",
        "company",
        "contact",
        "channel",
        "subject",
        "description",
        "priority",
        "assignee",
        "related_case",
        "internal_notes",
        "conversation",
        "created_at",
        "updated_at",
        "resolved_at",
        "closed_at",
        "staff_notified_at",
        "staff_notice_error",
    ]
    # Once open, only triage fields change; the customer's own words and links stay as given.
    change_readonly_fields = [
        "reference",
        "company",
        "contact",
        "channel",
        "description",
        "related_case",
        "conversation",
        "created_at",
        "updated_at",
        "resolved_at",
        "closed_at",
        "staff_notified_at",
        "staff_notice_error",
    ]

    def get_fields(self, request: HttpRequest, obj: Case | None = None) -> list[str]:
        return self.change_fields if obj is not None else self.add_fields

    def get_readonly_fields(self, request: HttpRequest, obj: Case | None = None) -> tuple:
        readonly = super().get_readonly_fields(request, obj)
        return (*readonly, *self.change_readonly_fields) if obj is not None else readonly

    def get_inlines(self, request: HttpRequest, obj: Case | None) -> list:
        return self.inlines if obj is not None else []

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "assignee":
            ids = staff_company_ids(request)
            users = get_user_model().objects.filter(memberships__isnull=False)
            if ids is not None:
                users = users.filter(memberships__company__in=ids)
            kwargs["queryset"] = users.distinct().order_by("username")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: HttpRequest, obj: Case, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            services.case_update(
                case=obj,
                priority=data["priority"],
                assignee=data.get("assignee"),
                internal_notes=data.get("internal_notes", ""),
                subject=data.get("subject"),
            )
            return
        case = services.case_open(
            company=data["company"],
            contact=data["contact"],
            subject=data["subject"],
            description=data["description"],
            channel=data["channel"],
            priority=data["priority"],
            related_case=data.get("related_case"),
            assignee=data.get("assignee"),
        )
        if data.get("internal_notes"):
            case = services.case_update(
                case=case,
                priority=case.priority,
                assignee=case.assignee,
                internal_notes=data["internal_notes"],
            )
        # The admin goes on with `obj` (redirect, history): make it the case just created.
        obj.pk = case.pk
        obj.reference = case.reference
        obj._state.adding = False

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        if formset.model is not CaseComment:
            formset.save()
            return
        created = []
        for comment_form in formset.extra_forms:
            if not comment_form.has_changed() or not comment_form.cleaned_data.get("body"):
                continue
            created.append(
                services.case_comment_add(
                    case=formset.instance,
                    body=comment_form.cleaned_data["body"],
                    author_user=request.user,
                    public=comment_form.cleaned_data.get("public", False),
                )
            )
        # The admin's change message reads these, which formset.save() would have set.
        formset.new_objects, formset.changed_objects, formset.deleted_objects = created, [], []
        for comment in created:
            if comment.public:
                _tell_staff_of(request, comment.customer_message)

    def fsm_confirmed_done(self, request: HttpRequest, done: Case, name: str) -> None:
        kind = {"resolve": CaseMessage.Kind.RESOLVED, "close": CaseMessage.Kind.CLOSED}.get(name)
        if kind is not None:
            latest = selectors.case_message_latest(case=done, kind=kind)
            _tell_staff_of(request, latest, kind=kind)

    def fsm_done_message(self, case: Case) -> str:
        return _("Case %(reference)s is now %(state)s.") % {
            "reference": case.reference,
            "state": state_in_sentence(case.get_state_display()),
        }


@admin.register(SupportSettings)
class SupportSettingsAdmin(CompanyScopedAdmin):
    list_display = ["company", "auto_close_after_days"]
