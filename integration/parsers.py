"""The integration API's JSON body parser: DRF's, reading the body as every API does
(core.request_json), so a body the tool API refuses as malformed is refused here alike."""

from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser as _DrfJSONParser

from core.request_json import loads


class JSONParser(_DrfJSONParser):
    """application/json, decoded with its declared charset (UTF-8 unless said), then read by
    core.request_json.loads: deep nesting, NaN, numbers too large for a float and lone
    surrogates are malformed (400 `malformed_json`), not an outage."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            return loads(stream.read().decode(encoding))
        except (ValueError, LookupError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
