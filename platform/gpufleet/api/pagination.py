"""Cursor pagination on every list: `{"next", "previous", "results"}`, `?limit=` (1-500, default 50).

A cursor (unlike an offset) does not skip or repeat rows when rows are added or removed between pages,
which is what an automation client walking a whole collection needs. Order is stable: by primary key,
i.e. creation order, the same on every page.
"""

from rest_framework.pagination import CursorPagination


class Pagination(CursorPagination):
    ordering = "pk"
    page_size = 50
    page_size_query_param = "limit"
    max_page_size = 500
