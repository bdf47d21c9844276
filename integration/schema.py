"""OpenAPI 3 for the integration API (drf-spectacular): the description of its contract, the
Idempotency-Key header, the one error shape, and the authentication schemes."""

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema

from core.errors import RULE_CODES
from core.idempotency import HTTP_KEY_PATTERN
from integration.serializers.errors import ErrorOut

API_DESCRIPTION = """
The REST API for a company's own systems (website, ERP, call-centre software). It runs the
same services as the conversational agent's tools: the same guards, availability, pricing and
stock rules, and the same idempotency engine.

**Authentication.** `Authorization: Bearer <token>` of an integration credential (created in
the staff admin, shown once). A credential belongs to one company and every query is scoped to
it: another company's reference is simply *not found* (404). A `read` credential cannot write
(403 PERMISSION). Logged-in staff can use the browsable API on their companies, doing what
their role in the chosen company allows, as in the admin (403 `role_not_allowed` otherwise).

**References.** Entities are addressed by public references (`AP-7K2F9Q`, `QT-…`, `OP-…`,
`CS-…`, `CT-…` for contacts, `SV-…` services, `PR-…` professionals) and products by SKU;
never by internal ids.

**Idempotency-Key (required on every POST).** Every write (`POST`: creations and state
transitions) must carry an `Idempotency-Key` header matching
`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`. We require it rather than treat a request without one as
a separate, non-repeatable write: a client that cannot replay a write after a timeout would
otherwise create duplicates. Generate a new UUID per logical operation, store it with the full
request before the first send, and reuse both unchanged on every retry.

| situation | answer |
|---|---|
| key missing | 422 `missing_idempotency_key` |
| key malformed | 422 `invalid_idempotency_key` |
| same key, same request, done | the original status and body, `X-Idempotency-Replayed: true` |
| same key, different request (body or target) | 409 `idempotency_conflict` |
| same key, first request still running | 409 `request_in_progress` with `Retry-After` |
| same key, replay window over | 410 `idempotency_expired` |

Keys belong to the company: all its credentials share one namespace (switching credentials
does not start a new one). The comparison uses the validated request: key order and spacing do
not count; values, array order and null-versus-omitted do. Only successes are stored: a failed
write (422, 404, ...) may be retried with the same key. Completed operations replay for at
least 7 days.

**Errors.** Every error has one JSON shape, the same as the agent's tool API: `error_type`
(VALIDATION 422, NOT_FOUND 404, PERMISSION 401/403/429, AMBIGUOUS 409, CONFLICT 409/410,
SYSTEM 503), `user_message` (for the end customer, in the company's language), a stable
`code`, and extras such as `state`, `retry_after_seconds` or `problems`. `problems` lists each
field that is wrong as `{"field", "message"}`, at most 20, and `problems_omitted` says how
many more there were. **Deprecated:** `errors`, the same list as `{"field", "problem"}`, is
still sent for one release and then removed: read `problems`. A dependency outage is 503
SYSTEM: retry later (a database outage says `retry_with_same_key` and
`effect_may_have_happened`).

**Lists** take `limit` (1 to 100, default 20), `ordering` (one of the list's ordering fields,
`-` for descending), and filters; dates are local days of the company (`date_from`, `date_to`,
inclusive). An unknown parameter, ordering field or a bad `limit` is refused (422
`unknown_parameter`, `invalid_ordering`, `invalid_pagination`), never ignored. Pages are
keyset pages: follow the `next` (and `previous`) links, which carry an opaque `cursor`; rows
created or changed while you page are neither repeated nor skipped. `count` is the number of
rows matching the filters. Times are ISO 8601 in the company's time zone; a time without an
offset is read as the company's local time.
"""

IDEMPOTENCY_KEY = OpenApiParameter(
    name="Idempotency-Key",
    type=OpenApiTypes.STR,
    location=OpenApiParameter.HEADER,
    required=True,
    pattern=HTTP_KEY_PATTERN.pattern,
    description="One key per logical operation; reuse it, with the same request, to retry.",
)
REPLAYED_HEADER = OpenApiParameter(
    name="X-Idempotency-Replayed",
    type=OpenApiTypes.STR,
    location=OpenApiParameter.HEADER,
    enum=["true"],
    description="Present on a replay of a stored answer.",
    response=[200, 201],
)
RETRY_AFTER_HEADER = OpenApiParameter(
    name="Retry-After",
    type=OpenApiTypes.INT,
    location=OpenApiParameter.HEADER,
    description="Seconds to wait before retrying with the same key and request.",
    response=[409, 429],
)

_READ_ERRORS = {
    401: OpenApiResponse(ErrorOut, "Missing or invalid credential."),
    403: OpenApiResponse(
        ErrorOut, "Not allowed (a staff member's role; csrf_failed without the CSRF token)."
    ),
    404: OpenApiResponse(ErrorOut, "Not found (or another company's)."),
    406: OpenApiResponse(ErrorOut, "not_acceptable: the answer is JSON only."),
    422: OpenApiResponse(
        ErrorOut,
        "Invalid parameters: unknown_parameter, invalid_ordering, invalid_pagination, "
        "invalid_date, or invalid_request (details in `problems`).",
    ),
    429: OpenApiResponse(ErrorOut, "Too many requests."),
    503: OpenApiResponse(ErrorOut, "A dependency is down; retry later."),
}
_WRITE_ERRORS = {
    **_READ_ERRORS,
    400: OpenApiResponse(ErrorOut, "malformed_json: the body is not JSON."),
    403: OpenApiResponse(
        ErrorOut,
        "Read-only credential, a staff member's role, csrf_failed, or not the customer's.",
    ),
    409: OpenApiResponse(ErrorOut, "idempotency_conflict or request_in_progress."),
    410: OpenApiResponse(ErrorOut, "idempotency_expired."),
    413: OpenApiResponse(ErrorOut, "body_too_large."),
    415: OpenApiResponse(ErrorOut, "unsupported_media_type: send application/json."),
    422: OpenApiResponse(
        ErrorOut,
        "Invalid request, key or transition (with `state`); amount_too_large, invalid_date.",
    ),
}


def read_schema(response: Any, **kwargs: Any) -> Any:
    return extend_schema(responses={200: response, **_READ_ERRORS}, **kwargs)


def write_schema(request: Any, response: Any, *, status: int = 200, **kwargs: Any) -> Any:
    parameters = [IDEMPOTENCY_KEY, REPLAYED_HEADER, RETRY_AFTER_HEADER]
    return extend_schema(
        request=request,
        responses={status: response, **_WRITE_ERRORS},
        parameters=parameters + kwargs.pop("parameters", []),
        **kwargs,
    )


def declare_rule_codes(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Postprocessing hook: the 422 codes a well-formed request may still get (core.errors)."""
    result["info"]["x-rule-codes"] = sorted(RULE_CODES)
    return result


# Text never holds a NUL character (PostgreSQL cannot store one; DRF's CharField refuses it).
TEXT_WITHOUT_NUL = "^[^\\u0000]*$"


def strict_request_bodies(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Postprocessing hook: request bodies refuse unknown fields and text with a NUL
    character, so say so in the schema."""
    for name, component in result.get("components", {}).get("schemas", {}).items():
        if name.endswith("Request") and component.get("type") == "object":
            component["additionalProperties"] = False
            for field in component.get("properties", {}).values():
                plain_text = "format" not in field and "enum" not in field
                if field.get("type") == "string" and plain_text and "pattern" not in field:
                    field["pattern"] = TEXT_WITHOUT_NUL
    return result


class IntegrationTokenScheme(OpenApiAuthenticationExtension):
    target_class = "integration.authentication.IntegrationTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An integration credential's token (read or read_write scope).",
        }


class StaffSessionScheme(OpenApiAuthenticationExtension):
    target_class = "integration.authentication.StaffSessionAuthentication"
    name = "staffSession"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {
            "type": "apiKey",
            "in": "cookie",
            "name": "sessionid",
            "description": "A logged-in staff member (browsable API); writes need the CSRF token.",
        }
