"""The integration API's errors: DRF's EXCEPTION_HANDLER and the JSON 404 of unknown paths,
both answered by core.boundary (the mapping and the body every API shares). Never a 500
page: anything unexpected is SYSTEM (503), logged here with its trace."""

import logging
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.views import set_rollback

from core.boundary import as_garante_error, error_response, not_found

logger = logging.getLogger("garante.integration")


def exception_handler(exc: Exception, context: dict[str, Any]) -> HttpResponse:
    """DRF's EXCEPTION_HANDLER: every failure becomes the canonical JSON error."""
    set_rollback()
    error = as_garante_error(exc, logger=logger, where="the integration API")
    problems = error.extras.get("problems")
    if problems is not None:
        # `errors` ({field, problem}): this API's deprecated alias of `problems`, kept for one
        # release (CHANGELOG.md) and cut alike by the output cap (core.outcome).
        error.extras["errors"] = [{"field": p["field"], "problem": p["message"]} for p in problems]
    return error_response(error, context.get("request"))


@csrf_exempt  # it changes nothing: a POST to an unknown path is a 404, not a CSRF page
def not_found_view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
    """Unknown paths under /api/v1/ answer the JSON 404, not Django's HTML page."""
    return error_response(not_found(), request)
