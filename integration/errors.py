"""One JSON error shape for the integration API: the canonical body of core.errors
({error_type, user_message, code, ...}) with its HTTP status, whatever raised it — a service,
DRF itself (validation, authentication, routing, throttling) or a database outage. Never a
500 page: anything unexpected is SYSTEM (503), logged here with its trace."""

import logging
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import Http404, HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy as _
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions
from rest_framework.views import set_rollback

from core.errors import (
    GaranteError,
    NotFound,
    PermissionRefused,
    SystemUnavailable,
    ValidationFailed,
)
from core.outcome import error_outcome, outcome_response

logger = logging.getLogger("garante.integration")

MAX_FIELD_ERRORS = 20
# Field-level codes a client may branch on: the first one found becomes the error's `code`
# (other field problems answer `invalid_request`, their details in `errors`).
FIELD_CODES = (
    "unknown_parameter",
    "invalid_ordering",
    "invalid_pagination",
    "invalid_date",
    "invalid_date_range",
    "amount_too_large",
)


def field_errors(detail: Any, prefix: str = "") -> list[dict[str, str]]:
    """DRF's nested validation detail as a flat list of {field, problem}."""
    if isinstance(detail, dict):
        found = []
        for name, value in detail.items():
            field = "" if name == "non_field_errors" else str(name)
            found += field_errors(
                value, f"{prefix}.{field}" if prefix and field else prefix or field
            )
        return found
    if isinstance(detail, list):
        if all(isinstance(item, str) for item in detail):
            return [{"field": prefix or "(body)", "problem": str(item)} for item in detail]
        found = []
        for index, item in enumerate(detail):
            if item:
                found += field_errors(item, f"{prefix}.{index}" if prefix else str(index))
        return found
    return [{"field": prefix or "(body)", "problem": str(detail)}]


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


def _code(exc: exceptions.APIException, default: str) -> str:
    codes = exc.get_codes()
    return codes if isinstance(codes, str) and codes != "error" else default


def as_garante_error(exc: Exception) -> GaranteError:
    """The canonical error of any exception a view (or its authentication) raised."""
    if isinstance(exc, GaranteError):
        return exc
    if isinstance(exc, Http404):
        return NotFound(_("No encontré lo que busca."), code="not_found")
    if isinstance(exc, DjangoPermissionDenied):
        return PermissionRefused(_("No tiene permiso para hacer eso."), code="permission_denied")
    if isinstance(exc, exceptions.ValidationError):
        return ValidationFailed(
            _("Los datos enviados no son válidos."),
            code=_field_code(exc.get_codes()) or "invalid_request",
            errors=field_errors(exc.detail)[:MAX_FIELD_ERRORS],
        )
    if isinstance(exc, exceptions.ParseError):
        return ValidationFailed(
            _("El cuerpo de la petición no es JSON válido."), code="malformed_json", http_status=400
        )
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        return PermissionRefused(
            _("Credenciales no válidas."), code="unauthenticated", http_status=exc.status_code
        )
    if isinstance(exc, exceptions.PermissionDenied):
        return _permission_refused(exc)
    if isinstance(exc, exceptions.NotFound):
        return NotFound(_("No encontré lo que busca."), code="not_found")
    if isinstance(exc, exceptions.Throttled):
        return PermissionRefused(
            _("Demasiadas peticiones. Espere un momento antes de volver a intentarlo."),
            code="throttled",
            http_status=429,
            retry_after_seconds=max(1, int(exc.wait or 1)),
        )
    if isinstance(exc, exceptions.MethodNotAllowed):
        return ValidationFailed(
            _("Ese método no está permitido aquí."), code="method_not_allowed", http_status=405
        )
    if isinstance(exc, exceptions.UnsupportedMediaType):
        return ValidationFailed(
            _("Envíe el cuerpo como application/json."),
            code="unsupported_media_type",
            http_status=415,
        )
    if isinstance(exc, exceptions.NotAcceptable):
        return ValidationFailed(
            _("Solo se responde en JSON."), code="not_acceptable", http_status=406
        )
    if isinstance(exc, exceptions.APIException) and exc.status_code < 500:
        return ValidationFailed(
            _("La petición no es válida."),
            code=_code(exc, "bad_request"),
            http_status=exc.status_code,
        )
    if isinstance(exc, RequestDataTooBig):
        # Django refuses to read a body over DATA_UPLOAD_MAX_MEMORY_SIZE (the tool mirror's 413).
        return ValidationFailed(
            _("La petición es demasiado grande."), code="body_too_large", http_status=413
        )
    if isinstance(exc, DatabaseError):
        logger.exception("database failure in the integration API")
        return SystemUnavailable(code="database_unavailable")
    logger.exception("unexpected failure in the integration API")
    return SystemUnavailable()


def _permission_refused(exc: exceptions.PermissionDenied) -> PermissionRefused:
    """A refusal DRF raised itself: its text is English and internal, so the client gets a
    fixed translated message (ours raise PermissionRefused, with their own message)."""
    if "CSRF" in str(exc.detail):
        return PermissionRefused(
            _(
                "Falta el token de seguridad de la sesión. "
                "Recargue la página y vuelva a intentarlo."
            ),
            code="csrf_failed",
        )
    return PermissionRefused(_("No tiene permiso para hacer eso."), code="permission_denied")


def error_response(error: GaranteError) -> HttpResponse:
    response = outcome_response(error_outcome(error))
    if error.http_status == 401:
        response["WWW-Authenticate"] = "Bearer"
    return response


def exception_handler(exc: Exception, context: dict[str, Any]) -> HttpResponse:
    """DRF's EXCEPTION_HANDLER: every failure becomes the canonical JSON error."""
    set_rollback()
    return error_response(as_garante_error(exc))


@csrf_exempt  # it changes nothing: a POST to an unknown path is a 404, not a CSRF page
def not_found_view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """Unknown paths under /api/v1/ answer the JSON 404, not Django's HTML page."""
    return error_response(NotFound(_("No encontré lo que busca."), code="not_found"))
