"""Staff admin for the sandbox outbox: what a sandbox company would have sent its customers."""

from django.contrib import admin
from django.http import HttpRequest

from core.admin.scoping import CompanyScopedAdmin
from core.admin.transitions import RecordRulesAdmin
from core.models import OutboxMessage


@admin.register(OutboxMessage)
class OutboxMessageAdmin(RecordRulesAdmin, CompanyScopedAdmin):
    """Read-only: the messages are what the sandbox did, kept as evidence (a verification code
    is read here to verify it, as a customer would read it on their phone)."""

    read_only_records = True
    list_display = ["created_at", "company", "channel", "destination", "subject", "body"]
    list_filter = ["channel", "company"]
    search_fields = ["destination", "subject", "body"]
    list_select_related = ["company"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj=None) -> list[str]:
        return [f.name for f in OutboxMessage._meta.fields]
