"""Staff admin for security events: a page a manager can read, with the event's details as
labelled fields in their language (never the stored JSON), the conversation and the gateway
credential it concerns linked, and, for a burst on a credential still active, the way to
revoke it (the credential's confirmation page, core.admin.credentials)."""

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from core.admin.scoping import CompanyScopedAdmin
from core.admin.transitions import RecordRulesAdmin
from core.models import Conversation, GatewayCredential, SecurityEvent


def _identifier_kind(value: Any) -> str:
    labels = {"document": _("document number"), "phone": _("phone"), "email": _("email")}
    return str(labels.get(value, value))


def _identifier_kinds(value: Any) -> str:
    values = value if isinstance(value, list) else [value]
    return ", ".join(_identifier_kind(v) for v in values)


def _minutes(value: Any) -> str:
    return ngettext("%(n)s minute", "%(n)s minutes", _count(value)) % {"n": value}


def _hours(value: Any) -> str:
    return ngettext("%(n)s hour", "%(n)s hours", _count(value)) % {"n": value}


def _sms(value: Any) -> str:
    return ngettext("%(n)s SMS", "%(n)s SMS", _count(value)) % {"n": value}


def _count(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _channel(value: Any) -> str:
    return str({"sms": _("SMS"), "email": _("email")}.get(value, value))


def _during(value: Any) -> str:
    return str({"identify_contact": _("identifying the customer")}.get(value, value))


def _refused(value: Any) -> str:
    return str({"too_many_attempts": _("too many failed identifications")}.get(value, value))


def _plain(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


# Every key the code writes into SecurityEvent.detail (core.identity, core.verification,
# core.services, core.sms_policy, core.security), with its label and how its value reads.
DETAIL_FIELDS: dict[str, tuple[Any, Callable[[Any], str]]] = {
    "failures": (_("failed identifications allowed"), _plain),
    "window_minutes": (_("counted over"), _minutes),
    "window_hours": (_("counted over"), _hours),
    "via": (_("identifier given"), _identifier_kind),
    "read_as": (_("identifier read as"), _identifier_kinds),
    "during": (_("while"), _during),
    "refused": (_("refused for"), _refused),
    "channel": (_("channel"), _channel),
    "attempts": (_("attempts allowed"), _plain),
    "wrong_codes": (_("wrong codes allowed"), _plain),
    "field": (_("detail changed"), _identifier_kind),
    "budget": (_("hourly budget"), _sms),
    "staff_notice_error": (_("staff email not sent"), _plain),
}


def security_event_details(event: SecurityEvent) -> list[tuple[str, str]]:
    """The event's details as (label, value) pairs in the active language, in the order above;
    a key written by a later version and not listed here still shows, under its own name."""
    detail = event.detail if isinstance(event.detail, dict) else {}
    known = [key for key in DETAIL_FIELDS if key in detail]
    unknown = sorted(key for key in detail if key not in DETAIL_FIELDS)
    shown = []
    for key in known:
        label, read = DETAIL_FIELDS[key]
        shown.append((str(label), read(detail[key])))
    for key in unknown:
        shown.append((key.replace("_", " "), _plain(detail[key])))
    return shown


def _admin_url(name: str, *args: Any) -> str:
    try:
        return reverse(f"admin:{name}", args=args)
    except NoReverseMatch:
        return ""


@admin.register(SecurityEvent)
class SecurityEventAdmin(RecordRulesAdmin, CompanyScopedAdmin):
    read_only_records = True
    change_form_template = "admin/core/securityevent/change_form.html"
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
    # The digest counts failures per identifier value; it means nothing to a reader, and the
    # stored JSON is shown as labelled fields instead.
    fields = [
        "created_at",
        "kind",
        "company",
        "conversation_shown",
        "contact",
        "claimed_contact",
        "credential",
        "details_shown",
        "staff_notified_at",
    ]
    readonly_fields = fields
    date_hierarchy = "created_at"

    @admin.display(description=_("details"))
    def details_shown(self, event: SecurityEvent) -> SafeString | str:
        details = security_event_details(event)
        if not details:
            return "—"
        rows = format_html_join(
            "", "<tr><th scope='row'>{}</th><td>{}</td></tr>", ((k, v) for k, v in details)
        )
        return format_html("<table class='garante-event-details'>{}</table>", rows)

    @admin.display(description=_("conversation"))
    def conversation_shown(self, event: SecurityEvent) -> SafeString | str:
        conversation = (
            Conversation.objects.filter(
                company_id=event.company_id, external_id=event.conversation_key
            )
            .values_list("pk", flat=True)
            .first()
        )
        url = _admin_url("core_conversation_change", conversation) if conversation else ""
        if not url:
            return event.conversation_key or "—"
        return format_html("<a href='{}'>{}</a>", url, event.conversation_key)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None
    ):
        event = self.get_object(request, object_id)
        context = {**(extra_context or {}), **self._credential_context(request, event)}
        return super().change_view(request, object_id, form_url, context)

    def _credential_context(self, request: HttpRequest, event: SecurityEvent | None) -> dict:
        """For a burst: its credential, whether it is still active, and the confirmation page
        that revokes it if this staff member may (the credential admin's own permission)."""
        if event is None or event.kind != SecurityEvent.Kind.IDENTIFICATION_BURST:
            return {}
        credential = GatewayCredential.objects.filter(
            pk=event.credential_id, company_id=event.company_id
        ).first()
        if credential is None:
            return {}
        credential_admin = self.admin_site.get_model_admin(GatewayCredential)
        may_revoke = credential_admin.has_change_permission(request, credential)
        may_view = credential_admin.has_view_permission(request, credential)
        return {
            "burst_credential": credential,
            "burst_credential_url": (
                _admin_url("core_gatewaycredential_change", credential.pk) if may_view else ""
            ),
            "burst_revoke_url": (
                _admin_url("core_gatewaycredential_revoke", credential.pk)
                if may_revoke and credential.revoked_at is None
                else ""
            ),
        }
