"""The error boundary of every API (MCP, the REST tool mirror, the integration API): whatever
Django, django-ninja, DRF or pydantic raise, mapped once to the canonical errors of core.errors.

- Field problems have one shape, `problems: [{field, message}]`, cut at MAX_PROBLEMS with
  `problems_omitted` saying how many more there were (the output cap may cut further,
  core.outcome.error_capped). Tool results, the integration API's bodies and MCP's -32602
  `data` all come from `problems_error`.
- The refusals every surface shares are built here only: 401 `unauthenticated` (with its
  RFC 6750 challenge), 405, 413, 415, 400 `malformed_json`.
- `as_garante_error` is the one mapping of any exception to its canonical error: a bug of
  ours (anything unexpected) is `InternalError`, a database failure `SystemUnavailable`.
- `error_response` is the one HTTP answer of an error.

Lives in core, below both APIs, because neither may import the other (docs/architecture.md).
"""

import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict, TypeVar

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, connection, transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from ninja import errors as ninja_errors
from rest_framework import exceptions as drf

from core.errors import (
    GaranteError,
    InternalError,
    NotFound,
    PermissionRefused,
    SystemUnavailable,
    ValidationFailed,
)
from core.idempotency import effect_may_have_happened
from core.outcome import error_outcome, outcome_response

# --- field problems -----------------------------------------------------------------------

# Problems listed at most, on every surface; the answer says how many more there were.
MAX_PROBLEMS = 20
# A problem's field and message as they can be shown: a field's name may be the caller's
# (an unknown argument), as long and as strange as they like.
FIELD_CHARS = 128
MESSAGE_CHARS = 300


class Problem(TypedDict):
    field: str
    message: str


def problem(field: str, message: str | Promise) -> Problem:
    """One field problem, its field's control characters replaced and both texts shortened;
    the caller's input itself is never echoed, only the names of its fields."""
    printable = "".join(c if c.isprintable() else "?" for c in field[: FIELD_CHARS + 1])
    return {
        "field": _shortened(printable, FIELD_CHARS),
        "message": _shortened(message, MESSAGE_CHARS),
    }


def _shortened(text: str | Promise, limit: int) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


T = TypeVar("T")


def problems_error(
    found: Sequence[T],
    describe: Callable[[T], Problem],
    *,
    code: str,
    message: str | Promise | None = None,
    **extras: Any,
) -> ValidationFailed:
    """VALIDATION listing the first MAX_PROBLEMS of `found` (each described only if listed,
    so a request with thousands of bad fields costs no more than one with twenty)."""
    return ValidationFailed(
        message,
        code=code,
        problems=[describe(item) for item in found[:MAX_PROBLEMS]],
        problems_omitted=max(0, len(found) - MAX_PROBLEMS) or None,
        **extras,
    )


# pydantic's prefixes of a validator's own message, which only repeat the type of failure.
_VALIDATOR_PREFIXES = ("Value error, ", "Assertion failed, ")


def pydantic_problems_error(
    errors: Sequence[Mapping[str, Any]],
    *,
    code: str,
    message: str | Promise | None = None,
    root: str,
    schema: Mapping[str, Any] | None = None,
) -> ValidationFailed:
    """The problems of a failed pydantic validation of the caller's input (`errors` as
    `ValidationError.errors(include_url=False, include_context=False, include_input=False)`
    gives them): each with its dotted path (`root` for the input as a whole) and what is
    wrong and what is accepted, the accepted names read from the input's JSON `schema`.

    Only where the caller's input is validated: a pydantic error anywhere else is our bug."""

    def describe(error: Mapping[str, Any]) -> Problem:
        loc = tuple(error["loc"])
        return problem(
            ".".join(str(part) for part in loc) or root, _pydantic_message(error, schema)
        )

    return problems_error(errors, describe, code=code, message=message)


def _pydantic_message(error: Mapping[str, Any], schema: Mapping[str, Any] | None) -> str:
    kind, message, loc = error["type"], str(error["msg"]), tuple(error["loc"])
    if kind == "missing":
        return "Required: this argument is missing."
    if kind == "extra_forbidden":
        if schema is None:
            return "Unknown argument."
        accepted = _accepted_names(schema, loc[:-1])
        return "Unknown argument. Accepted: " + (", ".join(accepted) or "none") + "."
    for prefix in _VALIDATOR_PREFIXES:
        message = message.removeprefix(prefix)
    if kind in ("model_type", "model_attributes_type", "dict_type") and not loc:
        return "The arguments must be a JSON object."
    return message


def _accepted_names(schema: Mapping[str, Any], loc: tuple[Any, ...]) -> list[str]:
    """The argument names the object at `loc` accepts, read from a JSON schema."""
    node: Mapping[str, Any] = schema
    for part in (*loc, None):
        while "$ref" in node:  # "#/$defs/Name", the only references pydantic writes
            node = schema.get("$defs", {}).get(node["$ref"].rsplit("/", 1)[-1], {})
        if part is None:
            break
        if isinstance(part, int):
            node = node.get("items", {})
        else:
            node = node.get("properties", {}).get(part, {})
    return list(node.get("properties", {}))


def _drf_problems(detail: Any, prefix: str = "") -> list[tuple[str, str]]:
    """DRF's nested validation detail as a flat list of (field, message)."""
    if isinstance(detail, dict):
        found = []
        for name, value in detail.items():
            field = "" if name == "non_field_errors" else str(name)
            found += _drf_problems(
                value, f"{prefix}.{field}" if prefix and field else prefix or field
            )
        return found
    if isinstance(detail, list):
        if all(isinstance(item, str) for item in detail):
            return [(prefix or "(body)", _drf_message(item)) for item in detail]
        found = []
        for index, item in enumerate(detail):
            if item:
                found += _drf_problems(item, f"{prefix}.{index}" if prefix else str(index))
        return found
    return [(prefix or "(body)", _drf_message(detail))]


# DRF's messages that repeat the value sent ('"<x>" is not a valid choice.', 'Invalid pk
# "<x>" - object does not exist.'), by their codes: a problem says what is wrong in words of
# ours instead, never the caller's text (a filter or a body may carry anything at all).
_DRF_ECHOING = {
    "invalid_choice": _("No es una de las opciones admitidas."),
    "does_not_exist": _("No existe ningún registro con ese valor."),
}
# A Django validator's message that names the value it refused ('“<x>” value must be a
# decimal number.').
VALUE_REFUSED = _("Ese valor no se admite aquí.")


def _drf_message(item: Any) -> str:
    replaced = _DRF_ECHOING.get(getattr(item, "code", None))
    return str(item if replaced is None else replaced)


def _django_problems(exc: DjangoValidationError) -> list[tuple[str, str]]:
    if not hasattr(exc, "error_dict"):  # raised without fields
        return [("(body)", message) for message in _django_messages(exc)]
    return [
        ("(body)" if name == "__all__" else name, message)
        for name, errors in exc.error_dict.items()
        for error in errors
        for message in _django_messages(error)
    ]


def _django_messages(exc: DjangoValidationError) -> list[str]:
    """Each message of `exc`, one that shows the value it refused (its `value` parameter)
    replaced by VALUE_REFUSED."""
    messages: list[str] = []
    for error in exc.error_list:
        value = (error.params or {}).get("value")
        shown = error.messages
        if value not in (None, "") and any(str(value) in message for message in shown):
            messages.append(str(VALUE_REFUSED))
        else:
            messages += shown
    return messages


# Field-level codes a client may branch on: the first one found becomes the error's `code`
# (other field problems answer `invalid_request`, their details in `problems`).
FIELD_CODES = (
    "unknown_parameter",
    "invalid_ordering",
    "invalid_pagination",
    "invalid_date",
    "invalid_date_range",
    "amount_too_large",
)


def _field_code(codes: Any) -> str | None:
    """The first of FIELD_CODES among a validation error's nested codes."""
    if isinstance(codes, dict):
        codes = list(codes.values())
    if isinstance(codes, list):
        for item in codes:
            found = _field_code(item)
            if found is not None:
                return found
        return None
    return codes if codes in FIELD_CODES else None


def _request_problems_error(
    found: list[tuple[str, str]], *, code: str = "invalid_request"
) -> ValidationFailed:
    """A request body's field problems."""
    return problems_error(
        found, lambda item: problem(*item), code=code, message=INVALID_REQUEST_MESSAGE
    )


INVALID_REQUEST_MESSAGE = _("Los datos enviados no son válidos.")


# --- the refusals every surface shares -----------------------------------------------------


def unauthenticated(http_status: int = 401) -> PermissionRefused:
    """401: no credential, or one that is wrong or revoked (see `bearer_challenge`). DRF
    answers 403 instead where no authentication class offers a challenge."""
    return PermissionRefused(
        _("Credenciales no válidas."), code="unauthenticated", http_status=http_status
    )


def bearer_challenge(request: HttpRequest) -> str:
    """The WWW-Authenticate of a 401 (RFC 6750): a bare challenge when no credentials came,
    invalid_token when they were wrong."""
    sent = request.META.get("HTTP_AUTHORIZATION")  # META: cheaper than building .headers
    return 'Bearer error="invalid_token"' if sent else "Bearer"


def method_not_allowed() -> ValidationFailed:
    return ValidationFailed(
        _("Ese método no está permitido aquí."), code="method_not_allowed", http_status=405
    )


def unsupported_media_type() -> ValidationFailed:
    return ValidationFailed(
        _("Envíe el cuerpo como application/json."), code="unsupported_media_type", http_status=415
    )


def body_too_large() -> ValidationFailed:
    return ValidationFailed(
        _("La petición es demasiado grande."), code="body_too_large", http_status=413
    )


def malformed_json() -> ValidationFailed:
    return ValidationFailed(
        _("El cuerpo de la petición no es JSON válido."), code="malformed_json", http_status=400
    )


def bad_request(status: int = 400) -> ValidationFailed:
    return ValidationFailed(_("La petición no es válida."), code="bad_request", http_status=status)


def not_found() -> NotFound:
    return NotFound(_("No encontré lo que busca."), code="not_found")


def permission_denied() -> PermissionRefused:
    return PermissionRefused(_("No tiene permiso para hacer eso."), code="permission_denied")


def database_unavailable(failure: DatabaseError | None = None) -> SystemUnavailable:
    """SYSTEM for a database failure, on every API, saying what the caller may do: the same
    call with the same key again is always safe (a committed effect is replayed, a
    rolled-back one runs), and whether the effect may have happened (the failure came while
    the call's transaction was committing; never before the call ran)."""
    return SystemUnavailable(
        code="database_unavailable",
        retry_with_same_key=True,
        effect_may_have_happened=failure is not None and effect_may_have_happened(failure),
    )


def discard_broken_connection() -> None:
    """After a database failure, make the next request reconnect instead of reusing a dead link."""
    # Never inside a transaction (a caller's, a test's): closing would end it. With no
    # connection there is nothing to discard, and checking would connect during an outage.
    if connection.connection is not None and transaction.get_autocommit():
        with contextlib.suppress(DatabaseError):
            connection.close_if_unusable_or_obsolete()


# --- the one mapping ------------------------------------------------------------------------


def error_for_status(status: int) -> GaranteError:
    """The canonical error of a page that Django or a library answered by itself with this
    status: a path no pattern matched, a method no view takes, a request refused before any
    view, a crash (a 5xx page is an exception nothing caught: our bug)."""
    if status == 404:
        return not_found()
    if status == 403:
        return permission_denied()
    if status == 405:
        return method_not_allowed()
    if status == 413:
        return body_too_large()
    if status == 415:
        return unsupported_media_type()
    if status >= 500:
        return InternalError()
    return bad_request(status)


def as_garante_error(
    exc: BaseException, *, logger: logging.Logger, where: str = "the API"
) -> GaranteError:
    """The canonical error of any exception an API met. A database failure and anything
    unexpected are logged on `logger` with their trace ("... in `where`"); only what the
    caller may act on is told. A pydantic error reaching here is unexpected too: the
    caller's input is answered where it is parsed (`pydantic_problems_error`), so any other
    is our own model refusing our own data."""
    if isinstance(exc, GaranteError):
        return exc
    found = _refusal(exc)
    if found is not None:
        return found
    if isinstance(exc, DatabaseError):
        logger.error("database failure in %s", where, exc_info=exc)
        discard_broken_connection()
        return database_unavailable(exc)
    logger.error("unexpected failure in %s", where, exc_info=exc)
    return InternalError()


def _refusal(exc: BaseException) -> GaranteError | None:
    """The caller's mistake or a refusal that Django, django-ninja or DRF raised, or None."""
    if isinstance(exc, Http404 | drf.NotFound):
        return not_found()
    if isinstance(exc, DjangoPermissionDenied):
        return permission_denied()
    if isinstance(exc, RequestDataTooBig):
        # Django refuses to read a body over DATA_UPLOAD_MAX_MEMORY_SIZE.
        return body_too_large()
    if isinstance(exc, DjangoValidationError):
        return _request_problems_error(_django_problems(exc))
    if isinstance(exc, drf.APIException):
        return _drf_refusal(exc)
    if isinstance(exc, ninja_errors.AuthenticationError):
        return unauthenticated()
    if isinstance(exc, ninja_errors.ValidationError):
        return pydantic_problems_error(exc.errors, code="bad_request", root="(body)")
    if isinstance(exc, ninja_errors.HttpError):
        # ninja raises HttpError(400) when the parser fails, whatever it raised (the cause).
        if isinstance(exc.__cause__, GaranteError):
            return exc.__cause__
        return malformed_json() if exc.status_code == 400 else bad_request(exc.status_code)
    return None


def _drf_refusal(exc: drf.APIException) -> GaranteError | None:
    if isinstance(exc, drf.ValidationError):
        code = _field_code(exc.get_codes()) or "invalid_request"
        return _request_problems_error(_drf_problems(exc.detail), code=code)
    if isinstance(exc, drf.ParseError):
        return malformed_json()
    if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed):
        return unauthenticated(exc.status_code)
    if isinstance(exc, drf.PermissionDenied):
        # DRF's own text is English and internal, so the client gets a fixed translated
        # message (ours raise PermissionRefused, with their own message).
        if "CSRF" in str(exc.detail):
            return PermissionRefused(
                _(
                    "Falta el token de seguridad de la sesión. "
                    "Recargue la página y vuelva a intentarlo."
                ),
                code="csrf_failed",
            )
        return permission_denied()
    if isinstance(exc, drf.Throttled):
        return PermissionRefused(
            _("Demasiadas peticiones. Espere un momento antes de volver a intentarlo."),
            code="throttled",
            http_status=429,
            retry_after_seconds=max(1, int(exc.wait or 1)),
        )
    if isinstance(exc, drf.MethodNotAllowed):
        return method_not_allowed()
    if isinstance(exc, drf.UnsupportedMediaType):
        return unsupported_media_type()
    if isinstance(exc, drf.NotAcceptable):
        return ValidationFailed(
            _("Solo se responde en JSON."), code="not_acceptable", http_status=406
        )
    if exc.status_code < 500:
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) and codes != "error" else "bad_request"
        return ValidationFailed(
            _("La petición no es válida."), code=code, http_status=exc.status_code
        )
    return None


# --- the one answer -------------------------------------------------------------------------


def error_response(error: GaranteError, request: HttpRequest | None = None) -> HttpResponse:
    """The HTTP answer of an error on every API: its canonical body within the output cap,
    its status, and for a 401 the bearer challenge (`request` tells which)."""
    response = outcome_response(error_outcome(error))
    if error.http_status == 401:
        response["WWW-Authenticate"] = bearer_challenge(request) if request else "Bearer"
    return response
