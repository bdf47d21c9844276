"""How lists are cut into pages and ordered (a module of its own: DRF imports the default
pagination class while it defines its generic views)."""

from typing import Any

from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _
from rest_framework import serializers
from rest_framework.filters import OrderingFilter
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

MAX_OFFSET = 1_000_000


class Pagination(LimitOffsetPagination):
    """`limit` (default 20, at most 100) and `offset`; answers count, next, previous, results."""

    default_limit = 20
    max_limit = 100

    def get_offset(self, request: Request) -> int:
        offset = super().get_offset(request)
        if offset > MAX_OFFSET:
            # A larger OFFSET is no page anyone reads, and the database would refuse huge ones.
            raise serializers.ValidationError({"offset": [_("Como máximo 1000000.")]})
        return offset


class StableOrdering(OrderingFilter):
    """The requested ordering, then the primary key, so pages never overlap or skip rows."""

    def get_ordering(self, request: Request, queryset: QuerySet, view: Any) -> list[str]:
        ordering = list(super().get_ordering(request, queryset, view) or [])
        descending = bool(ordering) and ordering[-1].startswith("-")
        return [*ordering, "-pk" if descending else "pk"]
