"""The REST mirror of every tool (POST /api/tools/<name>), served by django-ninja with OpenAPI.

Same registry, same execution path and idempotency engine as MCP; the Gateway's `_meta` keys
become the `Idempotency-Key` and `X-Conversation-Id` headers (seed 2 rules for the key).
"""

import logging
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI, Swagger
from ninja.errors import HttpError
from ninja.parser import Parser
from ninja.security import HttpBearer

from core.boundary import (
    as_garante_error,
    error_response,
    malformed_json,
    unsupported_media_type,
)
from core.errors import RULE_CODES, GaranteError
from core.idempotency import HTTP_KEY_PATTERN
from core.models import Conversation
from core.outcome import outcome_response
from core.request_json import is_json_media_type, loads
from core.selectors import gateway_company_authenticate
from tooling.context import CallMeta
from tooling.execution import call_tool
from tooling.registry import Tool, ToolErrorOut, registry

logger = logging.getLogger("garante.tools")


class GatewayBearer(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Any:
        company = gateway_company_authenticate(token)
        request.company = company  # type: ignore[attr-defined]
        return company


class StrictJSONParser(Parser):
    """Bodies parsed as MCP's are (core.request_json.loads): NaN and Infinity are malformed JSON,
    and only a body sent as application/json (UTF-8) is read at all."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        if not is_json_media_type(request.META.get("CONTENT_TYPE")):
            raise unsupported_media_type()
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


@api.exception_handler(Exception)
@api.exception_handler(Http404)
@api.exception_handler(HttpError)  # AuthenticationError too, and a parser's failure
def on_error(request: HttpRequest, exc: Exception) -> HttpResponse:
    """Whatever ninja met outside call_tool (which answers its own): the one mapping."""
    return error_response(
        as_garante_error(exc, logger=logger, where="the REST tool mirror"), request
    )


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
    409: "AMBIGUOUS, idempotency_conflict, request_in_progress (with Retry-After), or "
    "possible_duplicate (open_case: with the open `case` and its `subject`).",
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
    # No body at all stands for {} (as MCP's omitted arguments): required when {} is not
    # valid, because a field is required or each alternative requires one (identify_contact).
    schema = tool.input_schema
    alternatives = schema.get("oneOf") or schema.get("anyOf") or []
    empty_refused = bool(schema.get("required")) or (
        bool(alternatives) and all(branch.get("required") for branch in alternatives)
    )
    request_body = {
        "required": empty_refused,
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
        return error_response(error, request)
    except ValueError:
        return error_response(malformed_json(), request)
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
