"""Staff admin for idempotency records, read-only and per company (registered by core.apps)."""

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from core.admin import CompanyScopedAdmin
from core.models import IdempotencyRecord


class _RecordChangeList(ChangeList):
    """The list never loads the stored answers: they can be long and carry customer data."""

    def get_queryset(self, request: HttpRequest, exclude_parameters=None) -> QuerySet:
        return (
            super()
            .get_queryset(request, exclude_parameters)
            .defer("response")
            .annotate(
                has_response=ExpressionWrapper(
                    Q(response__isnull=False), output_field=BooleanField()
                )
            )
        )


@admin.register(IdempotencyRecord)
class IdempotencyRecordAdmin(CompanyScopedAdmin):
    """What was executed once and replayed since. Records are evidence, not data to edit:
    changing or deleting one would let a retry execute the operation again."""

    list_display = [
        "operation",
        "company",
        "created_at",
        "replay_until",
        "expires_at",
        "replay_count",
        "last_replayed_at",
        "replayable",
    ]
    # The table holds every key of the replay window, millions on a busy Gateway: the list reads
    # only what an index serves. Newest first by primary key (the order of creation); dates by
    # period rather than a date hierarchy, no filter of distinct operations and no sorting by
    # other columns (each a scan of every row); a search finds one key, or one operation's
    # records, by exact match.
    list_filter = ["company", "created_at"]
    search_fields = ["key", "operation"]
    search_help_text = _("An idempotency key, or an operation's name, exactly.")
    ordering = ["-id"]
    sortable_by: list[str] = []
    show_full_result_count = False
    list_select_related = ["company"]
    fields = [
        "company",
        "operation",
        "key",
        "fingerprint",
        "created_at",
        "replay_until",
        "expires_at",
        "replay_count",
        "last_replayed_at",
        "status_code",
        "response",
    ]
    readonly_fields = fields

    def get_changelist(self, request: HttpRequest, **kwargs) -> type[ChangeList]:
        return _RecordChangeList

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(Q(key=term) | Q(operation=term)), False

    @admin.display(boolean=True, description=_("replayable"))
    def replayable(self, record: IdempotencyRecord) -> bool:
        """Whether the answer is still stored (False: a tombstone that answers "expired")."""
        return record.has_response  # type: ignore[attr-defined]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
