"""The MCP endpoint (POST /mcp): stateless Streamable HTTP, JSON responses, both protocol eras.

One plain Django view, thin: transport checks (method, Origin, size) -> JSON-RPC envelope
(validated with `mcp_types`) -> bearer auth -> era routing -> one method handler -> one JSON
response. Tools run through `tooling.execution.call_tool`, the same path as the REST mirror.

Eras, on one endpoint:
- legacy (2025-11-25, 2025-06-18, 2025-03-26; no `MCP-Protocol-Version` header means
  2025-03-26): `initialize`, `ping`, `tools/list`, `tools/call`; notifications get 202.
- modern (2026-07-28): no handshake; every request carries `_meta` protocol keys mirrored in
  the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers; `server/discover`.
A request is modern when its version header names a non-handshake version, or when it has no
version header but its `_meta` carries the modern protocol-version key (then the missing
header is a mismatch). Everything else is legacy, as in the reference SDK's router.

HTTP statuses: transport-level rejections (parse error, invalid envelope, unsupported version)
are 400 in both eras. Dispatch errors follow each era's clients: modern maps -32602/-32020/
-32022 to 400 and -32601 to 404 (the 2026-07-28 table); legacy answers them with 200, because
older clients drop the JSON-RPC body of a 4xx. A missing, wrong or revoked token is 401 with
`WWW-Authenticate: Bearer` and JSON-RPC error -32010 (an implementation-defined code).
Business errors are tool results with `isError: true`, never JSON-RPC errors; so are arguments
that fail a tool's input schema (spec 2025-11-25, SEP-1303: the model reads a tool result and
can correct its call, while clients seldom pass it a protocol error). -32602 stays for what the
protocol itself rejects: an unknown tool, malformed params, the 2026-07-28 `_meta` keys. An
error's `data`, where it has one, is the canonical error body (core.boundary): -32602's lists
`problems` as a tool result does.
"""

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pydantic
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, UnreadablePostError
from django.views.decorators.csrf import csrf_exempt
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)
from mcp_types import methods as mcp_methods
from mcp_types.jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    JSONRPCNotification,
    JSONRPCRequest,
    jsonrpc_message_adapter,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, KNOWN_PROTOCOL_VERSIONS

from core.boundary import (
    as_garante_error,
    bearer_challenge,
    body_too_large,
    malformed_json,
    method_not_allowed,
    problem,
    problems_error,
    pydantic_problems_error,
    unauthenticated,
    unsupported_media_type,
)
from core.errors import GaranteError
from core.models import Company
from core.outcome import Outcome, dumps, error_outcome, json_response, text_response
from core.request_json import is_json_media_type, loads
from tooling.auth import decode_header_value, gateway_company, request_header
from tooling.context import CallMeta
from tooling.execution import call_tool, company_language
from tooling.registry import registry

logger = logging.getLogger("garante.mcp")

LEGACY_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")  # newest first
MODERN_VERSIONS = ("2026-07-28",)
HEADERLESS_VERSION = "2025-03-26"
assert set(LEGACY_VERSIONS + MODERN_VERSIONS) <= set(KNOWN_PROTOCOL_VERSIONS)

SERVER_INFO = {"name": "garante", "title": "Garante", "version": "0.1.0"}
CAPABILITIES = {"tools": {"listChanged": False}}
# The tool list changes only with a deployment; a few minutes of client caching is safe.
TOOLS_TTL_MS = 300_000
DISCOVER_TTL_MS = 3_600_000

UNAUTHENTICATED = -32010  # implementation-defined band (-32000..-32019), unused by the SDKs

# The Gateway's `_meta` keys on tools/call.
IDEMPOTENCY_KEY = "com.asixto/idempotencyKey"
CONVERSATION_KEY = "com.asixto/conversationId"
FAULT_KEY = "com.garante/fault"

VERSION_HEADER = "MCP-Protocol-Version"
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"
# Method -> the params key mirrored in Mcp-Name (2026-07-28 transports).
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}

MODERN_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
}
LEGACY_STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, UNSUPPORTED_PROTOCOL_VERSION: 400}


RequestId = int | str


class RpcError(Exception):
    """A JSON-RPC error answer; its HTTP status comes from the era's table unless given."""

    def __init__(
        self, code: int, message: str, *, data: Any = None, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.status = status


@dataclass(frozen=True)
class Route:
    """The era and protocol version a request is served under."""

    modern: bool
    version: str


# --- responses ---------------------------------------------------------------------------


def _error_response(
    request_id: RequestId | None,
    error: RpcError,
    *,
    modern: bool = False,
    headers: Mapping[str, str] | None = None,
) -> HttpResponse:
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data is not None:
        body["data"] = error.data
    status = error.status or (MODERN_STATUS if modern else LEGACY_STATUS).get(error.code, 200)
    return json_response({"jsonrpc": "2.0", "id": request_id, "error": body}, status, headers)


def _result_response(request_id: RequestId, result: str) -> HttpResponse:
    """A success answer around the result's JSON text, which the handler wrote."""
    return text_response(f'{{"jsonrpc":"2.0","id":{dumps(request_id)},"result":{result}}}')


# --- the view ----------------------------------------------------------------------------


@csrf_exempt
def mcp_endpoint(request: HttpRequest) -> HttpResponse:
    """POST /mcp. Never a 500 page: anything unexpected is logged and answered -32603."""
    message: HttpResponse | JSONRPCRequest | JSONRPCNotification | None = None
    try:
        message = _receive(request)
        if isinstance(message, HttpResponse):
            return message
        return _answer(request, message)
    except Exception:
        logger.exception("unexpected failure in the MCP endpoint")
        request_id = message.id if isinstance(message, JSONRPCRequest) else None
        return _error_response(request_id, RpcError(INTERNAL_ERROR, "Internal error"))


def _receive(request: HttpRequest) -> HttpResponse | JSONRPCRequest | JSONRPCNotification:
    """The one JSON-RPC message of this POST, or the HTTP answer that refuses it."""
    if request.method != "POST":
        return _error_response(
            None,
            RpcError(
                INVALID_REQUEST,
                "Method not allowed: use POST",
                data=_error_data(method_not_allowed()),
                status=405,
            ),
            headers={"Allow": "POST"},
        )
    if not _origin_allowed(request):
        return _error_response(None, RpcError(INVALID_REQUEST, "Origin not allowed", status=403))
    body = _read_body(request)
    if isinstance(body, HttpResponse):
        return body
    try:
        decoded = loads(body)
    except ValueError:
        return _error_response(None, _parse_error())
    try:
        return _envelope(decoded)
    except _EnvelopeRejected as rejected:
        return _error_response(rejected.request_id, RpcError(INVALID_REQUEST, str(rejected)))


def _answer(request: HttpRequest, message: JSONRPCRequest | JSONRPCNotification) -> HttpResponse:
    try:
        company = gateway_company(request)
    except DatabaseError as failure:
        down = as_garante_error(failure, logger=logger, where="an MCP request's authentication")
        return _outage_response(request, message, down)
    if company is None:
        return _unauthenticated(request, message)

    if isinstance(message, JSONRPCNotification):
        # Fire-and-forget: nothing in a stateless server acts on one. Only a version we do
        # not serve is worth telling the client about.
        requested = request_header(request, VERSION_HEADER)
        if requested is not None and requested not in LEGACY_VERSIONS + MODERN_VERSIONS:
            return _error_response(None, _unsupported_version(requested))
        accepted = HttpResponse(status=202)
        del accepted["Content-Type"]  # no body, so no type
        return accepted

    # The company is known from here on: its language for every message of the answer, a
    # -32602's `data` included, as a tool's outcome is (call_tool).
    with company_language(company):
        try:
            route = _route(request, message)
        except RpcError as error:
            return _error_response(message.id, error, modern=_looks_modern(request, message))
        try:
            result = _dispatch(company, message, route)
        except RpcError as error:
            return _error_response(message.id, error, modern=route.modern)
    return _result_response(message.id, result)


def _read_body(request: HttpRequest) -> bytes | HttpResponse:
    # The transport's one body type (as the reference SDK, which answers 415 too): a body
    # sent as text, form data or another charset is not JSON-RPC, whatever it holds.
    if not is_json_media_type(request.META.get("CONTENT_TYPE")):
        return _error_response(
            None,
            RpcError(
                INVALID_REQUEST,
                "Unsupported Media Type: Content-Type must be application/json",
                data=_error_data(unsupported_media_type()),
                status=415,
            ),
        )
    limit = settings.GARANTE_MCP_MAX_BODY_BYTES
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        return _too_large()
    try:
        body = request.body
    except RequestDataTooBig:
        return _too_large()
    except UnreadablePostError:
        return _error_response(None, _parse_error())
    if len(body) > limit:
        return _too_large()
    return body


def _too_large() -> HttpResponse:
    data = _error_data(body_too_large())
    return _error_response(
        None, RpcError(INVALID_REQUEST, "Request body too large", data=data, status=413)
    )


def _origin_allowed(request: HttpRequest) -> bool:
    """Browsers send Origin; a page on another site must not drive this endpoint (DNS
    rebinding). Clients that are not browsers send none."""
    origin = request_header(request, "Origin")
    if origin is None:
        return True
    allowed = {o.rstrip("/").lower() for o in settings.GARANTE_MCP_ALLOWED_ORIGINS}
    if origin.rstrip("/").lower() in allowed:
        return True
    host = request.META.get("HTTP_HOST", "").lower()
    return bool(host) and urlsplit(origin).netloc.lower() == host


class _EnvelopeRejected(Exception):
    """Not one valid JSON-RPC request or notification (-32600), with the id if one is usable."""

    def __init__(self, request_id: RequestId | None, message: str) -> None:
        super().__init__(message)
        self.request_id = request_id


def _envelope(decoded: Any) -> JSONRPCRequest | JSONRPCNotification:
    if not isinstance(decoded, dict):
        raise _EnvelopeRejected(
            None, "Body must be a single JSON-RPC request or notification (no batches)"
        )
    salvaged = decoded.get("id")
    request_id = salvaged if isinstance(salvaged, str) or type(salvaged) is int else None
    try:
        message = jsonrpc_message_adapter.validate_python(decoded)
    except pydantic.ValidationError:
        raise _EnvelopeRejected(request_id, "Invalid JSON-RPC request") from None
    # Key presence decides (JSON-RPC 2.0 §4.1): an object with a malformed id is a request
    # owed an error, not a notification to drop; a posted response is not ours to take.
    if "id" in decoded and not isinstance(message, JSONRPCRequest):
        raise _EnvelopeRejected(request_id, "Invalid JSON-RPC request")
    if "id" not in decoded and not isinstance(message, JSONRPCNotification):
        raise _EnvelopeRejected(None, "Invalid JSON-RPC request")
    return message


def _error_data(error: GaranteError) -> dict[str, Any]:
    """A JSON-RPC error's `data`: the canonical error body, as every API writes it."""
    return error_outcome(error).body


def _parse_error() -> RpcError:
    return RpcError(PARSE_ERROR, "Parse error", data=_error_data(malformed_json()))


def _invalid_params(
    message: str, field: str, *, says: str | None = None, code: str = "invalid_params"
) -> RpcError:
    """-32602 for one field of the params (what is wrong with it: `says`, else `message`), its
    `data` the canonical body as for every -32602 (a tool's arguments, the protocol's schema)."""
    invalid = problems_error([field], lambda name: problem(name, says or message), code=code)
    return RpcError(INVALID_PARAMS, message, data=_error_data(invalid))


def _unauthenticated(
    request: HttpRequest, message: JSONRPCRequest | JSONRPCNotification
) -> HttpResponse:
    return _error_response(
        message.id if isinstance(message, JSONRPCRequest) else None,
        RpcError(UNAUTHENTICATED, "Unauthorized", data=_error_data(unauthenticated()), status=401),
        headers={"WWW-Authenticate": bearer_challenge(request)},
    )


def _outage_response(
    request: HttpRequest, message: JSONRPCRequest | JSONRPCNotification, down: GaranteError
) -> HttpResponse:
    """The database is down before we know the company: a tools/call still gets a SYSTEM
    tool result (what the agent understands); anything else a JSON-RPC error with 503."""
    if isinstance(message, JSONRPCRequest) and message.method == "tools/call":
        try:
            route = _route(request, message)
            return _result_response(message.id, _tool_result(error_outcome(down), route))
        except RpcError as error:
            return _error_response(message.id, error, modern=_looks_modern(request, message))
    request_id = message.id if isinstance(message, JSONRPCRequest) else None
    return _error_response(
        request_id,
        RpcError(
            INTERNAL_ERROR, "Service temporarily unavailable", data=_error_data(down), status=503
        ),
        headers={"Retry-After": "5"},
    )


# --- era routing -------------------------------------------------------------------------


def _has_modern_envelope(params: Mapping[str, Any] | None) -> bool:
    meta = (params or {}).get("_meta")
    return isinstance(meta, Mapping) and PROTOCOL_VERSION_META_KEY in meta


def _looks_modern(request: HttpRequest, message: JSONRPCRequest) -> bool:
    header = request_header(request, VERSION_HEADER)
    if header is not None:
        return header not in HANDSHAKE_PROTOCOL_VERSIONS
    return message.method != "initialize" and _has_modern_envelope(message.params)


def _route(request: HttpRequest, message: JSONRPCRequest) -> Route:
    if _looks_modern(request, message):
        return Route(modern=True, version=_modern_ladder(request, message))
    header = request_header(request, VERSION_HEADER)
    if header in LEGACY_VERSIONS:
        return Route(modern=False, version=header)
    if header is None or message.method == "initialize":
        # initialize negotiates its version in the body; a header there means nothing yet.
        return Route(modern=False, version=HEADERLESS_VERSION)
    raise _unsupported_version(header)


def _modern_ladder(request: HttpRequest, message: JSONRPCRequest) -> str:
    """The 2026-07-28 request checks, in the reference SDK's order; the version on success."""
    params = message.params or {}
    meta = params.get("_meta")
    if not isinstance(meta, Mapping):
        raise _invalid_params(
            f"params._meta must be an object carrying {PROTOCOL_VERSION_META_KEY!r} and "
            f"{CLIENT_CAPABILITIES_META_KEY!r}",
            "_meta",
        )
    missing = [
        k for k in (PROTOCOL_VERSION_META_KEY, CLIENT_CAPABILITIES_META_KEY) if k not in meta
    ]
    if missing:
        raise _invalid_params(
            f"params._meta is missing the required key(s): {', '.join(missing)}",
            f"_meta.{missing[0]}",
        )
    version = meta[PROTOCOL_VERSION_META_KEY]
    header = request_header(request, VERSION_HEADER)
    if header is None or header != version:
        raise RpcError(
            HEADER_MISMATCH, f"{VERSION_HEADER} header does not match params._meta protocol version"
        )
    if request_header(request, METHOD_HEADER) != message.method:
        raise RpcError(HEADER_MISMATCH, f"{METHOD_HEADER} header does not match the method")
    name_key = NAME_BEARING.get(message.method)
    named = params.get(name_key) if name_key is not None else None
    if named is not None and decode_header_value(request_header(request, NAME_HEADER)) != named:
        raise RpcError(HEADER_MISMATCH, f"{NAME_HEADER} header does not match params.{name_key}")
    if not isinstance(version, str):
        raise _invalid_params(
            "The protocol version in params._meta must be a string",
            f"_meta.{PROTOCOL_VERSION_META_KEY}",
        )
    if version not in MODERN_VERSIONS:
        raise _unsupported_version(version)
    return version


def _unsupported_version(requested: str) -> RpcError:
    supported = LEGACY_VERSIONS if requested in HANDSHAKE_PROTOCOL_VERSIONS else MODERN_VERSIONS
    return RpcError(
        UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version",
        data={"supported": list(supported), "requested": requested},
    )


# --- dispatch ----------------------------------------------------------------------------


def _dispatch(company: Company, message: JSONRPCRequest, route: Route) -> str:
    """The JSON text of the method's result, or RpcError."""
    method, params = message.method, message.params
    try:
        # Validated against the version's schema only: nothing here reads the parsed model.
        mcp_methods.validate_client_request(method, route.version, params)
    except KeyError:
        raise _method_not_found(method) from None
    except pydantic.ValidationError as exc:
        invalid = pydantic_problems_error(
            exc.errors(include_url=False, include_context=False, include_input=False),
            code="invalid_params",
            root="(params)",
        )
        raise RpcError(
            INVALID_PARAMS, f"Invalid params for {method}", data=_error_data(invalid)
        ) from None
    handler = HANDLERS.get(method)
    if handler is None:
        raise _method_not_found(method)
    return handler(company, params or {}, route)


def _method_not_found(method: str) -> RpcError:
    return RpcError(METHOD_NOT_FOUND, f"Method not found: {method[:128]}")


def _shape(method: str, route: Route, result: dict[str, Any]) -> str:
    """The per-version wire shape, as JSON text; modern results carry resultType and the
    serverInfo stamp."""
    if route.modern:
        result = {
            "resultType": "complete",
            **result,
            "_meta": {SERVER_INFO_META_KEY: dict(SERVER_INFO)},
        }
    try:
        return dumps(mcp_methods.serialize_server_result(method, route.version, result))
    except pydantic.ValidationError:
        # Our bug, not the client's; the detail (which echoes the result) stays in the log.
        logger.exception("invalid %s result for protocol %s", method, route.version)
        raise RpcError(INTERNAL_ERROR, "Internal error") from None


def _initialize(company: Company, params: dict[str, Any], route: Route) -> str:
    requested = params.get("protocolVersion")
    negotiated = requested if requested in LEGACY_VERSIONS else LEGACY_VERSIONS[0]
    result = {
        "protocolVersion": negotiated,
        "capabilities": CAPABILITIES,
        "serverInfo": dict(SERVER_INFO),
    }
    return _shape("initialize", Route(modern=False, version=negotiated), result)


def _ping(company: Company, params: dict[str, Any], route: Route) -> str:
    return _shape("ping", route, {})


def _discover(company: Company, params: dict[str, Any], route: Route) -> str:
    # The same for every caller, so shared caches may keep it.
    result = {
        "supportedVersions": list(MODERN_VERSIONS),
        "capabilities": CAPABILITIES,
        "ttlMs": DISCOVER_TTL_MS,
        "cacheScope": "public",
    }
    return _shape("server/discover", route, result)


def tool_entry(tool: Any) -> dict[str, Any]:
    """A registered tool as tools/list describes it (before per-version shaping)."""
    return {
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.listed_output_schema,
        "annotations": tool.annotations,
    }


def _list_tools(company: Company, params: dict[str, Any], route: Route) -> str:
    if params.get("cursor") is not None:
        # We never hand out a cursor: the whole list is one page.
        raise _invalid_params("Invalid cursor", "cursor")
    result: dict[str, Any] = {"tools": [tool_entry(t) for t in registry.all()]}
    if route.modern:
        # Private: the list is served per credential, so shared caches must not reuse it.
        result.update(ttlMs=TOOLS_TTL_MS, cacheScope="private")
    return _shape("tools/list", route, result)


def _call(company: Company, params: dict[str, Any], route: Route) -> str:
    name = params["name"]
    tool = registry.get(name)
    if tool is None:
        raise _invalid_params(
            f"Unknown tool: {name[:128]}",
            "name",
            says="No tool with this name.",
            code="unknown_tool",
        )
    meta = params.get("_meta") or {}
    call_meta = CallMeta(
        conversation_id=meta.get(CONVERSATION_KEY),
        idempotency_key=meta.get(IDEMPOTENCY_KEY),
        fault=meta.get(FAULT_KEY),
    )
    try:
        outcome = call_tool(
            tool,
            company=company,
            # Omitted (or null, as some clients send it) is no arguments at all.
            arguments=params.get("arguments") or {},
            meta=call_meta,
            surface="mcp",
        )
    except Exception as failure:
        # call_tool maps every failure itself; this is the last line before the wire.
        with company_language(company):
            where = f"calling tool {tool.name} over MCP"
            outcome = error_outcome(as_garante_error(failure, logger=logger, where=where))
    return _tool_result(outcome, route)


def _tool_result(outcome: Outcome, route: Route) -> str:
    """A tools/call result: the body once as text content and once as structured content,
    validated and dumped by mcp_types like every other method's result."""
    result = {
        "content": [{"type": "text", "text": outcome.body_text()}],
        "structuredContent": outcome.body,
        "isError": outcome.is_error,
    }
    return _shape("tools/call", route, result)


HANDLERS: dict[str, Callable[[Company, dict[str, Any], Route], str]] = {
    "initialize": _initialize,
    "ping": _ping,
    "server/discover": _discover,
    "tools/list": _list_tools,
    "tools/call": _call,
}
