"""How lists are ordered and cut into pages (a module of its own: DRF imports the default
pagination class while it defines its generic views).

Pages are keyset pages: a page is the `limit` rows after (or before) the last row the previous
page showed, compared on the list's ordering fields and then the primary key. Unlike an
OFFSET, a row written between two requests neither repeats a row nor hides one: a new row
falls in its place in the order, and a row whose ordering field changed (ordering=updated_at)
moves to where the next pages still reach it. The position travels as an opaque, signed
cursor in the `next` and `previous` links.
"""

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

from django.core import signing
from django.core.exceptions import FieldDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import F, OrderBy, Q, QuerySet
from django.utils.translation import gettext_lazy as _
from rest_framework import serializers
from rest_framework.filters import OrderingFilter
from rest_framework.pagination import BasePagination
from rest_framework.request import Request
from rest_framework.response import Response

_CURSOR_SALT = "integration.pagination.cursor"


def _refuse(parameter: str, message: Any, code: str) -> serializers.ValidationError:
    return serializers.ValidationError({parameter: [message]}, code=code)


class StableOrdering(OrderingFilter):
    """The requested ordering (only among the view's `ordering_fields`: anything else is
    refused, not ignored), then the primary key, so that every row has one place."""

    def get_ordering(self, request: Request, queryset: QuerySet, view: Any) -> list[str]:
        params = request.query_params.get(self.ordering_param)
        if params is None or not params.strip():
            ordering = list(self.get_default_ordering(view) or [])
        else:
            ordering = [term.strip() for term in params.split(",")]
            allowed = set(getattr(view, "ordering_fields", None) or [])
            wrong = [term for term in ordering if term.removeprefix("-") not in allowed]
            if wrong or len({term.removeprefix("-") for term in ordering}) != len(ordering):
                raise _refuse(
                    self.ordering_param,
                    _("Ordene por uno de estos campos: %(fields)s.")
                    % {"fields": ", ".join(sorted(allowed))},
                    "invalid_ordering",
                )
        descending = bool(ordering) and ordering[-1].startswith("-")
        return [*ordering, "-pk" if descending else "pk"]

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        # One field, ascending or descending (several, comma-separated, are taken too, but
        # the schema lists the single ones rather than a pattern that allows repeats).
        fields = getattr(view, "ordering_fields", None) or []
        return [
            {
                "name": self.ordering_param,
                "required": False,
                "in": "query",
                "description": "The field to order by; `-` in front for descending.",
                "schema": {"type": "string", "enum": [*fields, *(f"-{f}" for f in fields)]},
            }
        ]


@dataclass(frozen=True)
class _Key:
    """One ordering field: its name and direction. NULLs always come last."""

    name: str
    descending: bool

    def order(self, backwards: bool) -> OrderBy:
        descending = self.descending != backwards
        # Walking backwards reverses everything, the place of NULLs included.
        nulls = {"nulls_first": True} if backwards else {"nulls_last": True}
        return F(self.name).desc(**nulls) if descending else F(self.name).asc(**nulls)


def _after(keys: list[_Key], values: list[Any], backwards: bool) -> Q:
    """Rows strictly after `values` in the order of `keys` (the last key is the primary key,
    never NULL); before them when walking backwards."""
    condition = Q(pk__in=[])
    equal = Q()
    for key, value in zip(keys, values, strict=True):
        descending = key.descending != backwards
        nulls_last = not backwards
        if value is None:
            beyond = Q(pk__in=[]) if nulls_last else Q(**{f"{key.name}__isnull": False})
            same = Q(**{f"{key.name}__isnull": True})
        else:
            beyond = Q(**{f"{key.name}__{'lt' if descending else 'gt'}": value})
            if nulls_last:
                beyond |= Q(**{f"{key.name}__isnull": True})
            same = Q(**{key.name: value})
        condition |= equal & beyond
        equal &= same
    return condition


def _wire(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return value


class Pagination(BasePagination):
    """`limit` rows (default 20, at most 100) from the `cursor` of a `next` or `previous`
    link; answers count (of the whole filtered list), next, previous, results."""

    default_limit = 20
    max_limit = 100
    limit_query_param = "limit"
    cursor_query_param = "cursor"
    query_parameters = (limit_query_param, cursor_query_param)

    def paginate_queryset(self, queryset: QuerySet, request: Request, view: Any = None) -> list:
        self.request = request
        limit = self._limit(request)
        self.keys = [
            _Key(term.removeprefix("-"), term.startswith("-"))
            for term in queryset.query.order_by
            if isinstance(term, str)
        ]
        if not self.keys or self.keys[-1].name != "pk":
            self.keys.append(_Key("pk", False))
        self.ordering = [("-" if k.descending else "") + k.name for k in self.keys]
        self.count = queryset.count()
        backwards, position = self._position(request, queryset)
        if position is not None:
            queryset = queryset.filter(_after(self.keys, position, backwards))
        rows = list(queryset.order_by(*(k.order(backwards) for k in self.keys))[: limit + 1])
        more = len(rows) > limit
        rows = rows[:limit]
        if backwards:
            rows.reverse()
        first, last = (rows[0], rows[-1]) if rows else (None, None)
        # Past the end the other way there is always something when we came from a cursor.
        self.next = last if (more if not backwards else position is not None) else None
        self.previous = first if (more if backwards else position is not None) else None
        return rows

    def get_paginated_response(self, data: Any) -> Response:
        return Response(
            {
                "count": self.count,
                "next": self._link(self.next, backwards=False),
                "previous": self._link(self.previous, backwards=True),
                "results": data,
            }
        )

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        link = {"type": "string", "nullable": True, "format": "uri"}
        return {
            "type": "object",
            "required": ["count", "next", "previous", "results"],
            "properties": {
                "count": {"type": "integer", "description": "Rows matching the filters."},
                "next": {**link, "description": "The next page, or null at the end."},
                "previous": {**link, "description": "The previous page, or null."},
                "results": schema,
            },
        }

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {
                "name": self.limit_query_param,
                "in": "query",
                "required": False,
                "description": f"Rows per page (default {self.default_limit}).",
                "schema": {"type": "integer", "minimum": 1, "maximum": self.max_limit},
            },
            {
                "name": self.cursor_query_param,
                "in": "query",
                "required": False,
                "description": "Opaque position, from a `next` or `previous` link.",
                "schema": {"type": "string"},
            },
        ]

    # --- Parameters and cursors -------------------------------------------------------------

    def _limit(self, request: Request) -> int:
        raw = request.query_params.get(self.limit_query_param)
        if raw is None:
            return self.default_limit
        if not raw.isdigit() or not 1 <= int(raw) <= self.max_limit:
            raise _refuse(
                self.limit_query_param,
                _("Indique un número entre 1 y %(max)s.") % {"max": self.max_limit},
                "invalid_pagination",
            )
        return int(raw)

    def _position(self, request: Request, queryset: QuerySet) -> tuple[bool, list[Any] | None]:
        raw = request.query_params.get(self.cursor_query_param)
        if raw is None:
            return False, None
        try:
            cursor = signing.loads(raw, salt=_CURSOR_SALT)
            backwards, ordering, values = cursor["b"], cursor["o"], cursor["v"]
            if ordering != self.ordering or len(values) != len(self.keys):
                raise ValueError("a cursor of another ordering")
            model = queryset.model._meta
            fields = [model.pk if k.name == "pk" else model.get_field(k.name) for k in self.keys]
            position = [
                None if v is None else f.to_python(v) for f, v in zip(fields, values, strict=True)
            ]
        except (
            signing.BadSignature,
            KeyError,
            TypeError,
            ValueError,
            FieldDoesNotExist,
            DjangoValidationError,
        ):
            # Anything but a cursor we made for this ordering: ask to start again.
            raise _refuse(
                self.cursor_query_param,
                _("Ese cursor no es válido para esta lista; vuelva a la primera página."),
                "invalid_pagination",
            ) from None
        return bool(backwards), position

    def _link(self, row: Any, *, backwards: bool) -> str | None:
        if row is None:
            return None
        values = [_wire(getattr(row, key.name)) for key in self.keys]
        cursor = signing.dumps({"b": backwards, "o": self.ordering, "v": values}, salt=_CURSOR_SALT)
        params = {k: v for k, v in self.request.query_params.items() if k != "cursor"}
        params[self.cursor_query_param] = cursor
        url = self.request.build_absolute_uri(self.request.path)
        return f"{url}?{urlencode(params)}"
