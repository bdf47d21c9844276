"""The integration API's JSON body parser: DRF's, taking the bodies every API takes
(core.request_json), so a body the tool API refuses is refused here alike."""

from typing import Any

from rest_framework.exceptions import ParseError, UnsupportedMediaType
from rest_framework.parsers import JSONParser as _DrfJSONParser

from core.request_json import is_json_media_type, loads


class JSONParser(_DrfJSONParser):
    """application/json in UTF-8 (a charset parameter may say so, no other), read by
    core.request_json.loads: another charset is 415 `unsupported_media_type` as on the tool
    API; bytes that are not UTF-8, deep nesting, NaN, numbers too large for a float and lone
    surrogates are malformed (400 `malformed_json`), not an outage."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        if not is_json_media_type(media_type):
            raise UnsupportedMediaType(media_type or "")
        try:
            return loads(stream.read())
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
