"""Fault tests: each stops or breaks a real component and checks nothing is lost, stuck or a 500.

The list of faults survived is the list of modules here; docs/operations.md says, for each, what the
platform does and what an operator sees and does.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from gpufleet.celery import app


@contextmanager
def publishing_to(url: str) -> Iterator[None]:
    """Point this process's Celery publisher at `url` for the block (a fresh connection pool each way)."""

    def switch(to: str) -> None:
        # Drop (do not close) the cached pools: kombu's global pool registry may still hand them out.
        app._pool = None
        app.amqp._producer_pool = None
        # The write URL is what publishing uses (broker_url itself is pinned by the Django settings).
        app.conf.broker_write_url = to

    previous = app.conf.broker_write_url
    switch(url)
    try:
        yield
    finally:
        switch(previous)
