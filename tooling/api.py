"""The REST mirror of every tool (POST /api/tools/<name>), served by django-ninja with OpenAPI.

Same registry, same execution path and idempotency engine as MCP; the Gateway's `_meta` keys
become the `Idempotency-Key` and `X-Conversation-Id` headers (seed 2 rules for the key).
"""

import logging
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy as _
from ninja import NinjaAPI, Swagger
from ninja.errors import AuthenticationError, HttpError
from ninja.parser import Parser
from ninja.security import HttpBearer

from core.errors import (
    RULE_CODES,
    GaranteError,
    PermissionRefused,
    ValidationFailed,
)
from core.idempotency import HTTP_KEY_PATTERN
from core.models import Conversation
from core.outcome import error_response, json_response, outcome_response
from core.request_json import loads
from core.selectors import gateway_company_authenticate
from tooling.context import CallMeta
from tooling.execution import call_tool, database_unavailable
from tooling.http import is_json_media_type
from tooling.registry import Tool, ToolErrorOut, registry

logger = logging.getLogger("garante.tools")


class GatewayBearer(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Any:
        company = gateway_company_authenticate(token)
        request.company = company  # type: ignore[attr-defined]
        return company


class UnsupportedMediaType(ValidationFailed):
    def __init__(self) -> None:
        super().__init__(
            _("Envíe el cuerpo como application/json."),
            code="unsupported_media_type",
            http_status=415,
        )


class StrictJSONParser(Parser):
    """Bodies parsed as MCP's are (core.request_json.loads): NaN and Infinity are malformed JSON,
    and only a body sent as application/json (UTF-8) is read at all."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        if not is_json_media_type(request.META.get("CONTENT_TYPE")):
            raise UnsupportedMediaType()
        return loads(request.body)


_PARSER = StrictJSONParser()

api = NinjaAPI(
    title="Garante tool API",
    version="1.0",
    description="Every Gateway tool as a plain HTTP endpoint, with Idempotency-Key semantics.",
    urls_namespace="api",
    parser=_PARSER,
    # Swagger UI's files come from django-ninja's static files (config.settings); its default
    # validator badge would send the schema's URL to an outside service.
    docs=Swagger(settings={"validatorUrl": None}),
    # The 422 codes a well-formed call may still get: the data's state, not the call's shape.
    openapi_extra={"info": {"x-rule-codes": sorted(RULE_CODES)}},
)


@api.exception_handler(AuthenticationError)
def on_unauthenticated(request: HttpRequest, exc: Exception) -> HttpResponse:
    error = PermissionRefused(
        _("Credenciales no válidas."), code="unauthenticated", http_status=401
    )
    return json_response(error.as_dict(), 401, {"WWW-Authenticate": "Bearer"})


@api.exception_handler(RequestDataTooBig)
def on_too_large(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    return error_response(
        ValidationFailed(
            _("La petición es demasiado grande."), code="body_too_large", http_status=413
        )
    )


@api.exception_handler(HttpError)
def on_http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    # ninja raises HttpError(400) when the parser fails, whatever it raised (kept as the cause).
    if isinstance(exc.__cause__, UnsupportedMediaType):
        return error_response(exc.__cause__)
    message = (
        _("El cuerpo de la petición no es JSON válido.")
        if exc.status_code == 400
        else _("La petición no es válida.")
    )
    code = "malformed_json" if exc.status_code == 400 else "bad_request"
    return error_response(ValidationFailed(message, code=code, http_status=exc.status_code))


@api.exception_handler(GaranteError)
def on_business_error(request: HttpRequest, exc: GaranteError) -> HttpResponse:
    # Raised outside call_tool: by an input validator while ninja parses the body.
    return error_response(exc)


@api.exception_handler(DatabaseError)
def on_database_down(request: HttpRequest, exc: Exception) -> HttpResponse:
    logger.exception("database failure outside a tool call")
    return error_response(database_unavailable())


@api.get("/ping", tags=["health"], summary="Liveness probe (no database)")
def ping(request: HttpRequest) -> dict[str, bool]:
    return {"ok": True}


# What a conversation's row holds, as call_tool checks it (invalid_conversation_id beyond).
CONVERSATION_ID_MAX_LENGTH = Conversation._meta.get_field("external_id").max_length

_READ_ERRORS = {
    400: "malformed_json: the body is not JSON.",
    401: "Missing or invalid token (with WWW-Authenticate: Bearer).",
    403: "PERMISSION: not the customer's, identity not established, step-up needed.",
    404: "NOT_FOUND.",
    409: "AMBIGUOUS (with `candidates`).",
    413: "body_too_large.",
    415: "unsupported_media_type: send the body as application/json (UTF-8).",
    422: "VALIDATION: bad arguments, missing_conversation_id, a terminal state (`state`).",
    503: "SYSTEM: a dependency is down; retry later.",
}
_WRITE_ERRORS = {
    **_READ_ERRORS,
    409: "AMBIGUOUS, idempotency_conflict, or request_in_progress (with Retry-After).",
    410: "idempotency_expired.",
    422: "VALIDATION: bad arguments, missing or invalid Idempotency-Key, "
    "missing_conversation_id, a terminal state (`state`).",
}


def _openapi_extra(tool: Tool) -> dict[str, Any]:
    """The headers and error answers of a tool's route, as the endpoint really demands and
    answers them (the headers are read by hand so that their absence is answered by the one
    engine, with its own codes, rather than by ninja's validation)."""
    parameters = [
        {
            "name": "X-Conversation-Id",
            "in": "header",
            "required": True,
            "description": "The conversation the call belongs to (binds identity and ledger).",
            # As call_tool checks it: present and not empty (missing_conversation_id), at most
            # what its row holds (invalid_conversation_id).
            "schema": {"type": "string", "minLength": 1, "maxLength": CONVERSATION_ID_MAX_LENGTH},
        }
    ]
    if tool.write:
        parameters.append(
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": True,
                "description": "One key per logical operation; reuse it, unchanged, to retry.",
                "schema": {"type": "string", "pattern": HTTP_KEY_PATTERN.pattern},
            }
        )
    errors = _WRITE_ERRORS if tool.write else _READ_ERRORS
    # The bodies come from `response=` (mount_tools); these are the statuses' descriptions.
    responses = {status: {"description": text} for status, text in errors.items()}
    responses[200] = {"description": "The tool's answer (its MCP structuredContent)."}
    # The body is documented here, not declared to ninja: ninja would parse and validate it
    # once more before call_tool does (the one validation, with the tool's own answers).
    # Nothing required: no body at all stands for {} (as MCP's omitted arguments).
    request_body = {
        "required": bool(tool.input_schema.get("required")),
        "content": {"application/json": {"schema": _inlined(tool.input_schema)}},
    }
    return {"parameters": parameters, "responses": responses, "requestBody": request_body}


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema with its local definitions ("#/$defs/...") written in place, so it reads
    the same inside the OpenAPI document, whose root is not the schema's."""
    definitions = schema.get("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            reference = node.get("$ref", "")
            if reference.startswith("#/$defs/"):
                return inline(definitions[reference.removeprefix("#/$defs/")])
            return {key: inline(value) for key, value in node.items() if key != "$defs"}
        if isinstance(node, list):
            return [inline(item) for item in node]
        return node

    return inline(schema)


def _tool_response(tool: Tool, request: HttpRequest) -> HttpResponse:
    """One call of `tool` from its HTTP request: the headers in place of MCP's `_meta`, the
    body, parsed once, as the arguments (call_tool validates them, and checks the key, as for
    MCP)."""
    # call_tool answers a missing conversation as over MCP (missing_conversation_id).
    conversation_id = request.headers.get("X-Conversation-Id")
    idempotency_key = request.headers.get("Idempotency-Key")
    try:
        arguments = _PARSER.parse_body(request) if request.body else {}
    except GaranteError as error:  # not sent as JSON
        return error_response(error)
    except ValueError:
        return error_response(
            ValidationFailed(
                _("El cuerpo de la petición no es JSON válido."),
                code="malformed_json",
                http_status=400,
            )
        )
    meta = CallMeta(conversation_id=conversation_id, idempotency_key=idempotency_key)
    outcome = call_tool(tool, company=request.auth, arguments=arguments, meta=meta, surface="rest")
    return outcome_response(outcome)


def _tool_endpoint(tool: Tool):
    def endpoint(request: HttpRequest) -> HttpResponse:
        return _tool_response(tool, request)

    endpoint.__name__ = f"tool_{tool.name.replace('.', '_').replace('-', '_')}"
    return endpoint


_URL_NAME_PREFIX = "tool-"


def mount_tools() -> None:
    for tool in registry.all():
        api.post(
            f"/tools/{tool.name}",
            auth=GatewayBearer(),
            tags=["tools"],
            summary=tool.title,
            description=tool.description,
            operation_id=f"tool_{tool.name}",
            url_name=f"{_URL_NAME_PREFIX}{tool.name}",
            response={
                200: tool.output,
                frozenset(_WRITE_ERRORS if tool.write else _READ_ERRORS): ToolErrorOut,
            },
            openapi_extra=_openapi_extra(tool),
        )(_tool_endpoint(tool))


mount_tools()
