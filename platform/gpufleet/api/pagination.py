"""Cursor pagination on every list: `{"next", "previous", "results"}`, `?limit=` (1-500, default 50).

A cursor (unlike an offset) does not skip or repeat rows when rows are added or removed between pages,
which is what an automation client walking a whole collection needs. Order is stable: by primary key,
i.e. creation order, the same on every page.

`?limit=` is held to what the OpenAPI document says (an integer from 1 to 500, ASCII digits): DRF's own
parsing fell back to the default page for `0`, `-1` or `abc` and took `U+FF15` (a full-width 5, which
Python's int() reads) as 5, so a client's typo silently changed what a page held. A bad value is a 400
naming `limit` (issue 27, strict types).
"""

from __future__ import annotations

import re
from typing import Any

from rest_framework import exceptions
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request

_DIGITS = re.compile(r"[0-9]{1,6}", re.ASCII)


class Pagination(CursorPagination):
    ordering = "pk"
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 500

    def get_page_size(self, request: Request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        if not _DIGITS.fullmatch(raw) or not 1 <= int(raw) <= self.max_page_size:
            shown = raw if len(raw) <= 20 else raw[:20] + "…"
            raise exceptions.ValidationError(
                {self.page_size_query_param: [f"must be a whole number from 1 to {self.max_page_size}, "
                                              f"in ASCII digits: {shown!r}"]})
        return int(raw)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {**parameter.get("schema", {}), "type": "integer", "minimum": 1,
                                       "maximum": self.max_page_size}
        return parameters
