"""`Cache-Control: no-store` on every authenticated response (issue 27 item 10).

What a signed-in user or an API token sees -- a new token's secret, a kubeconfig, invoices, a tenant's
members -- must not be kept by the browser's disk cache, a shared proxy or a CDN, where the next user of the
machine or the proxy's other clients could read it. Anonymous pages (the sign-in page, static files) keep
their own caching. ETag / If-None-Match revalidation still works: a client that sends If-None-Match gets its
304; no-store only stops anyone from storing the body.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_cache_control


class NoStoreForAuthenticatedMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # Read after the view: DRF authenticates a token inside the view and sets the user on this request.
        user = getattr(request, "user", None)
        if (user is not None and user.is_authenticated) or "HTTP_AUTHORIZATION" in request.META:
            patch_cache_control(response, private=True, no_store=True)
        return response
