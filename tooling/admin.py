"""Staff admin for the conversation trace: tool calls, what each conversation was shown, and the
conversation page listing its calls in order ("why did the assistant say that?").

Read-only: the trace is evidence. Times are shown in each call's company local time.
"""

import json
from datetime import date
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.translation import gettext_lazy as _

from core.admin import CompanyScopedAdmin, RecordRulesAdmin, values_filter
from core.admin import ConversationAdmin as CoreConversationAdmin
from core.errors import ErrorType
from core.l10n import date_shown, datetime_shown
from core.models import Company, Conversation
from tooling.models import ExposedReference, ToolCall
from tooling.registry import registry

# How many calls the conversation page lists; the full list is one link away.
CONVERSATION_PAGE_CALLS = 200


def _local(instant: Any, company: Company, seconds: bool = True) -> str:
    return datetime_shown(instant, company.tz, seconds=seconds)


def label_shown(label: str) -> str:
    """A reference's label as staff read it: the label the agent was given, whose date (a
    quote's, in ISO 8601 for the machine) is in the staff member's date shape."""
    try:
        return date_shown(date.fromisoformat(label))
    except ValueError:
        return label


def tool_calls_url(conversation: Conversation) -> str:
    query = urlencode(
        {
            "company__id__exact": conversation.company_id,
            "conversation_key": conversation.external_id,
        }
    )
    return f"{reverse('admin:tooling_toolcall_changelist')}?{query}"


class ReadOnlyAdmin(RecordRulesAdmin, CompanyScopedAdmin):
    # Trimmed by retention (tooling.tasks), never by hand.
    read_only_records = True

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    list_display = [
        "called_at",
        "tool",
        "outcome_shown",
        "error_type",
        "code",
        "latency",
        "replayed",
        "surface",
        "conversation_link",
        "company",
    ]
    # Filters offer values known to the code, and dates by period (created_at is indexed):
    # neither reads every row of the log, as a filter of a field without choices or a date
    # hierarchy would (a scan of millions of rows on every page).
    list_filter = [
        "outcome",
        values_filter("error_type", _("error type"), lambda: [(t, t) for t in ErrorType]),
        "replayed",
        values_filter("surface", _("surface"), lambda: [("mcp", "MCP"), ("rest", "REST")]),
        values_filter("tool", _("tool"), lambda: [(t.name, t.name) for t in registry.all()]),
        "company",
        "created_at",
    ]
    search_fields = ["conversation_key", "tool", "code", "idempotency_key"]
    list_select_related = ["company"]
    list_per_page = 100
    fields = [
        "company",
        "conversation_link",
        "called_at",
        "tool",
        "surface",
        "outcome_shown",
        "error_type",
        "code",
        "latency",
        "replayed",
        "result_count",
        "idempotency_key",
        "arguments_shown",
    ]
    readonly_fields = fields

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        # The conversation page links here filtered by its external id.
        return lookup == "conversation_key" or super().lookup_allowed(lookup, value, request)

    def get_ordering(self, request: HttpRequest) -> list[str]:
        # One conversation reads top to bottom, as it happened; the whole log newest first.
        if "conversation_key" in request.GET:
            return ["created_at", "id"]
        return ["-created_at", "-id"]

    @admin.display(description=_("called at (local)"), ordering="created_at")
    def called_at(self, call: ToolCall) -> str:
        return _local(call.created_at, call.company)

    @admin.display(description=_("outcome"), ordering="outcome")
    def outcome_shown(self, call: ToolCall) -> str:
        colour = "var(--message-success-bg)" if call.outcome == "ok" else "var(--message-error-bg)"
        return format_html(
            '<span style="background:{};padding:1px 6px;border-radius:4px">{}</span>',
            colour,
            call.get_outcome_display(),
        )

    @admin.display(description=_("latency"), ordering="latency_ms")
    def latency(self, call: ToolCall) -> str:
        return f"{call.latency_ms:.0f} ms"

    @admin.display(description=_("conversation"))
    def conversation_link(self, call: ToolCall) -> str:
        if not call.conversation_key:
            return "—"
        query = urlencode(
            {"company__id__exact": call.company_id, "conversation_key": call.conversation_key}
        )
        return format_html(
            '<a href="{}?{}">{}</a>',
            reverse("admin:tooling_toolcall_changelist"),
            query,
            call.conversation_key[:40],
        )

    @admin.display(description=_("arguments (redacted)"))
    def arguments_shown(self, call: ToolCall) -> str:
        return format_html(
            "<pre>{}</pre>", json.dumps(call.arguments, indent=2, ensure_ascii=False)
        )


@admin.register(ExposedReference)
class ExposedReferenceAdmin(ReadOnlyAdmin):
    """The exposure ledger: which public references each conversation has been shown."""

    list_display = ["reference", "kind", "label_shown", "conversation", "company", "created_at"]
    list_filter = ["kind", "company", "created_at"]
    search_fields = ["reference", "label", "conversation__external_id"]
    list_select_related = ["company", "conversation"]
    fields = [
        "company",
        "conversation",
        "kind",
        "reference",
        "label_shown",
        "created_at",
        "last_seen_at",
    ]
    readonly_fields = fields

    @admin.display(description=_("label"), ordering="label")
    def label_shown(self, reference: ExposedReference) -> str:
        return label_shown(reference.label)


admin.site.unregister(Conversation)


@admin.register(Conversation)
class ConversationAdmin(CoreConversationAdmin):
    """core's conversation admin, plus the conversation's trace and what it was shown."""

    list_display = [*CoreConversationAdmin.list_display, "trace_link"]
    readonly_fields = [*CoreConversationAdmin.readonly_fields, "tool_calls", "references_seen"]

    @admin.display(description=_("trace"))
    def trace_link(self, conversation: Conversation) -> str:
        return format_html('<a href="{}">{}</a>', tool_calls_url(conversation), _("tool calls"))

    @admin.display(description=_("tool calls, in order"))
    def tool_calls(self, conversation: Conversation) -> str:
        calls = list(
            ToolCall.objects.filter(
                company_id=conversation.company_id, conversation_key=conversation.external_id
            ).order_by("created_at", "id")[:CONVERSATION_PAGE_CALLS]
        )
        if not calls:
            return _("No tool calls recorded (or trimmed past the retention period).")
        company = conversation.company
        rows = format_html_join(
            "",
            '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>'
            "<td>{}</td><td><code>{}</code></td></tr>",
            (
                (
                    reverse("admin:tooling_toolcall_change", args=[c.pk]),
                    _local(c.created_at, company),
                    c.tool,
                    c.get_outcome_display(),
                    " · ".join(x for x in (c.error_type, c.code) if x) or "—",
                    f"{c.latency_ms:.0f} ms",
                    _("yes") if c.replayed else _("no"),
                    json.dumps(c.arguments, ensure_ascii=False)[:300],
                )
                for c in calls
            ),
        )
        return format_html(
            '<table class="garante-trace"><thead><tr><th>{}</th><th>{}</th><th>{}</th>'
            "<th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>{}</tbody></table>"
            '<p><a href="{}">{}</a></p>',
            _("called at (local)"),
            _("tool"),
            _("outcome"),
            _("error"),
            _("latency"),
            _("replayed"),
            _("arguments (redacted)"),
            rows,
            tool_calls_url(conversation),
            _("Open these calls in the tool-call list"),
        )

    @admin.display(description=_("references shown to this conversation"))
    def references_seen(self, conversation: Conversation) -> str:
        seen = ExposedReference.objects.filter(conversation=conversation).order_by("created_at")
        if not seen.exists():
            return "—"
        return format_html_join(
            ", ",
            "{} <small>({}{})</small>",
            (
                (r.reference, r.get_kind_display(), f", {label_shown(r.label)}" if r.label else "")
                for r in seen[:100]
            ),
        )
