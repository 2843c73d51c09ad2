"""Pausing CPython's automatic (cyclic) garbage collector around bulk work that builds no reference cycles.

Why: the collector runs whenever allocated container objects outnumber freed ones by a threshold, and each
older-generation pass traverses every tracked object alive at that moment. Collecting a month of usage
allocates millions of short-lived lists and tuples (a TSDB answer's decoded JSON is one list per point, the
totals one list per tenant-hour) while the process holds hundreds of thousands of longer-lived ones, so the
passes cost more than the work itself: a three-cluster month (benchmarks/billing.py) took 6.4 CPU-s of
Python with the collector running and 1.9 with it paused, with identical results. Reference counting still
frees everything that is not part of a cycle at once; cyclic garbage made meanwhile waits for the next
pass after the pause.

The switch is process-wide (`gc.disable`), so pauses are counted: overlapping pauses from several threads
keep the collector off until the last one ends, and it is switched back on only if it was on when the first
began (a process that turned it off itself keeps it off).
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_restore = False


@contextmanager
def paused() -> Iterator[None]:
    """Automatic garbage collection off for the duration of the block (explicit `gc.collect()` still works)."""
    global _depth, _restore
    with _lock:
        if _depth == 0:
            _restore = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _restore:
                gc.enable()
