"""Gateway authentication shared by the MCP endpoint and the REST tool mirror."""

from django.http import HttpRequest

from core.models import Company
from core.selectors import gateway_company_authenticate


def request_header(request: HttpRequest, name: str) -> str | None:
    """A request header by its HTTP name, read from META: on the tool path this is cheaper
    than `request.headers`, which first builds a mapping of every header of the request."""
    return request.META.get("HTTP_" + name.upper().replace("-", "_"))


def bearer_token(request: HttpRequest) -> str:
    scheme, _, token = (request_header(request, "Authorization") or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def gateway_company(request: HttpRequest) -> Company | None:
    """The company whose active gateway token the request bears, or None."""
    return gateway_company_authenticate(bearer_token(request))
