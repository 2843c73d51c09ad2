"""Keep a web worker's startup objects out of the garbage collector's full passes (`gc.freeze()`).

Why: CPython's collector stops every thread of the process (it holds the GIL) for the whole of a pass, and a
full (generation 2) pass visits every tracked object the process holds. A gunicorn worker holds ~100,000 of
them after importing gpufleet.wsgi and ~155,000 once the URLconf, views and serializers are loaded -- modules,
classes, functions, URL patterns, settings -- which live as long as the process and are never garbage.
Visiting them costs 55-95 ms of CPU per full pass (100-135 ms in a worker on a loaded machine), and every
request in flight in that process waits for it: with gthread's 4 threads per process that is the p99 of an
API that otherwise answers in 1-2 ms (benchmarks/history/api.md, "Round 4": the quota list's tail). Requests
make cyclic garbage (Django's and DRF's request, view and resolver objects refer to each other), so full
passes come every few thousand requests.

`gc.freeze()` moves every object tracked at that moment to a permanent generation that no pass visits: a
full pass then visits only what was created since (the answer cache, per-class plans, request garbage).
Nothing is lost -- frozen objects are still freed by reference counting, only cycles among them are never
collected, and what is frozen here is the startup state a worker keeps anyway.

Done per worker, after fork (gunicorn imports the WSGI module in each worker; with `--preload` it would run
once in the master, which is as good: children inherit the permanent generation). GPUFLEET_GC_FREEZE=0
turns it off (to measure the difference, benchmarks/api.py `--set config.extraEnv.GPUFLEET_GC_FREEZE=0`).
"""

from __future__ import annotations

import gc

from gpufleet.core import conf


def load_urlconf() -> None:
    """Import what the first request would import: the URLconf and through it every view and serializer
    module, and build the reverse lookup tables -- so they exist before the freeze, not after it."""
    from django.urls import get_resolver

    resolver = get_resolver()
    _ = resolver.url_patterns  # imports the URLconf; include() imports each included module
    _ = resolver.reverse_dict  # populates the resolver (and its nested resolvers') lookup tables


def settle_startup_objects() -> int:
    """Load the URLconf, collect what startup left as garbage, freeze the rest; the objects frozen.

    Returns 0 and freezes nothing when GPUFLEET_GC_FREEZE is off."""
    if not conf.GC_FREEZE:
        return 0
    load_urlconf()
    gc.collect()  # startup's own cyclic garbage would otherwise be frozen too, and never freed
    gc.freeze()
    return gc.get_freeze_count()
