"""HTTP for the tool surfaces (MCP and the REST tool mirror): which bodies are JSON. A body is
read by core.request_json, as the integration API reads its own; every API's answers are
written by core.outcome."""


def is_json_media_type(content_type: str | None) -> bool:
    """Whether a request's Content-Type is JSON as both tool surfaces take it:
    `application/json`, with no parameter but an optional `charset=utf-8` (RFC 8259 JSON is
    UTF-8; MCP's transport answers 415 to anything else)."""
    media_type, *parameters = (content_type or "").split(";")
    if media_type.strip().lower() != "application/json":
        return False
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() != "charset" or value.strip().strip('"').lower() != "utf-8":
            return False
    return True
