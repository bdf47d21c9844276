"""Gateway authentication shared by the MCP endpoint and the REST tool mirror."""

from django.http import HttpRequest

from core.models import Company
from core.selectors import gateway_company_authenticate


def bearer_token(request: HttpRequest) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def gateway_company(request: HttpRequest) -> Company | None:
    """The company whose active gateway token the request bears, or None."""
    return gateway_company_authenticate(bearer_token(request))
