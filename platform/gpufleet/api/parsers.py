"""The API's JSON parser: a body nested beyond any real payload is a 400, not a RecursionError (500).

Python's json module recurses once per nesting level, so 1,000 nested `[` exhausted the interpreter's
stack inside DRF's parser on every write route. No gpufleet payload is deeper than a few levels.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_DEPTH = 32


def depth_exceeds(value: Any, limit: int) -> bool:
    """Whether `value` nests lists/objects deeper than `limit` (iterative: cannot recurse itself)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


class BoundedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_DEPTH} levels") from exc
        if depth_exceeds(data, MAX_DEPTH):
            raise ParseError(f"JSON parse error - nested deeper than {MAX_DEPTH} levels")
        return data
