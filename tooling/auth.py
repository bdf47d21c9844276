"""The Gateway's request headers, for the MCP endpoint and the REST tool mirror: the bearer
token's company, and a header value MCP may send base64-encoded."""

import base64
import binascii
import re

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


_BASE64_SENTINEL = re.compile(r"^=\?base64\?(?P<payload>.*)\?=$")


def decode_header_value(value: str | None) -> str | None:
    """A header value as sent, or the UTF-8 text inside `=?base64?...?=`; None if malformed."""
    if value is None:
        return None
    match = _BASE64_SENTINEL.fullmatch(value)
    if match is None:
        return value
    payload = match["payload"]
    try:
        raw = base64.b64decode(payload, validate=True)
    except binascii.Error:
        return None
    if base64.b64encode(raw).decode("ascii") != payload:
        return None  # non-canonical base64 never matches the body by accident
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
