"""The API's body parsers: what no route can take is refused here, once, naming the field.

- Nesting: Python's json module recurses once per nesting level, so 1,000 nested `[` exhausted the interpreter's
  stack inside DRF's parser on every write route (a 500). No gpufleet payload is deeper than a few levels: deeper
  than MAX_DEPTH is a 400.
- NUL (U+0000) in any string or key: PostgreSQL refuses it in text and in jsonb, so it reached the database as a
  500 on routes that store or look up what they were sent (fleet notices, scale-to-zero). A 400 naming the field
  (`finding.pod`, `tags[2]`). Query parameters and path values are checked by gpufleet.requestguard.
- Size: the body's declared length is checked against DATA_UPLOAD_MAX_MEMORY_SIZE by gpufleet.requestguard
  before a parser runs (a 413).
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser

from gpufleet.requestguard import NUL, NUL_REASON

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


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def nul_fields(value: Any) -> list[str]:
    """The fields (dotted paths, `[i]` for list items, sorted) whose key or text holds a NUL."""
    found: set[str] = set()
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                name = _join(path, str(key).replace(NUL, "\\x00"))
                if NUL in str(key):
                    found.add(name)
                stack.append((child, name))
        elif isinstance(item, list):
            stack.extend((child, f"{path}[{index}]") for index, child in enumerate(item))
        elif isinstance(item, str) and NUL in item:
            found.add(path)
    return sorted(found)


def refuse_nul(data: Any) -> None:
    if fields := nul_fields(data):
        raise ValidationError({field: [NUL_REASON] for field in fields})


class BoundedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_DEPTH} levels") from exc
        if depth_exceeds(data, MAX_DEPTH):
            raise ParseError(f"JSON parse error - nested deeper than {MAX_DEPTH} levels")
        refuse_nul(data)
        return data


def _refuse_nul_in_form(data: Any) -> None:
    refuse_nul({key: values if len(values := data.getlist(key)) > 1 else data.get(key) for key in data})


class NulFreeFormParser(FormParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        data = super().parse(stream, media_type, parser_context)
        _refuse_nul_in_form(data)
        return data


class NulFreeMultiPartParser(MultiPartParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        parsed = super().parse(stream, media_type, parser_context)
        _refuse_nul_in_form(parsed.data)
        return parsed
