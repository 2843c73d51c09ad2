"""The cold pass's pure work -- render, validate, serialise -- done ahead in worker processes.

A cold start of 10,000 tenants renders, validates and serialises 160,000 objects: about half of the
pass's CPU, and pure (render.py does no I/O; validation and YAML are functions of the objects). The
fleet pass (tenants.fleet) forks workers once it knows the context, hands each chunk's views to one of
them, and reconciles chunk i while the workers render chunks i+1 and i+2 on the other core. A worker
returns, per tenant, exactly what `reconcile._reconcile_tenant` would compute from that view before it
writes: per placement the files (`desired_files`) and the backend's token, the applied digest, the
object keys, and the validation problems. The reconcile still takes the lock, reads the row and uses a
`Prerendered` only if the locked row gives the same view and the same placements; anything else (a
render that raised, a row changed meanwhile) is rendered inline, as before.

Workers are `os.fork()`ed children that never touch the database, the broker or git: they inherit the
loaded schemas and the context, read views from a pipe, write results back, and leave with `os._exit`
(no inherited finaliser runs, so the parent's database connection is never closed by a child). Each
worker has at most one chunk in flight, so a send never waits on a worker that is itself sending.
"""

from __future__ import annotations

import os
import resource
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from typing import Any

from infra.backend import AppliesFiles
from infra.manifests import ref

from .backends import get_schema_registry
from .render import Placed, RenderContext, TenantView, placed_digest, render_placed

# What a worker reports when it leaves: CPU seconds and peak RSS (kB), summed over the pass's workers
# (benchmarks/reconcile.py prints them: a child's CPU is otherwise only in RUSAGE_CHILDREN, with git's).
WORKER_USAGE: dict[str, float] = {"cpu": 0.0, "peak_rss_kb": 0.0, "workers": 0}


def target(placed: Placed) -> tuple[str, str, bool, str]:
    """What identifies a placement in a `Prerendered` (the `Placed` itself holds the narrowed context)."""
    return (placed.cluster, placed.tree, placed.home, placed.refused)


@dataclass(frozen=True)
class Prerendered:
    """One tenant's render for one view (see the module docstring); `problems` non-empty: nothing else."""

    view: TenantView
    targets: tuple[tuple[str, str, bool, str], ...]
    files: tuple[dict[str, bytes], ...] = ()
    tokens: tuple[object, ...] = ()
    digest: str = ""
    keys: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def objects(self) -> int:
        return sum(len(files) for files in self.files)


def prerender(view: TenantView, ctx: RenderContext, backend: Any) -> Prerendered:
    """What `_reconcile_tenant` computes from `view` before writing, for a backend with `desired_files` and
    `token_of_files` (GitOps). Raises what rendering raises."""
    rendered = render_placed(view, ctx)
    targets = tuple(target(p) for p, _ in rendered)
    manifests = [m for _, objects in rendered for m in objects]
    problems = get_schema_registry().validate(manifests)
    if problems:
        return Prerendered(view, targets, problems=tuple(str(p) for p in problems[:20]))
    files = tuple(backend.desired_files(objects) for _, objects in rendered)
    return Prerendered(
        view, targets, files=files, tokens=tuple(backend.token_of_files(f) for f in files),
        digest=placed_digest(rendered), keys=tuple(dict.fromkeys(ref(m).key for m in manifests)),
    )


def supported(backend: Any) -> bool:
    return isinstance(backend, AppliesFiles)


_DEAD = -1  # `_Worker.busy` of a worker that died

# How long the pass waits for a worker's chunk (a chunk is a few seconds of CPU even on a loaded machine).
# A worker that does not answer by then -- e.g. hung on a lock some thread of the parent held when it was
# forked -- is killed and treated as dead, so its chunk renders inline and the pass never waits forever.
TAKE_TIMEOUT_SECONDS = 300.0


@dataclass
class _Worker:
    pid: int
    conn: Connection
    busy: int | None = None  # the chunk it is rendering


@dataclass
class Prerenderer:
    """Forked workers rendering chunks of views ahead (`submit`, then `take` in any order)."""

    ctx: RenderContext
    backend: Any
    workers: int
    _pool: list[_Worker] = field(default_factory=list)
    _next: int = 0

    def start(self) -> None:
        for _ in range(self.workers):
            parent, child = Pipe()
            pid = os.fork()
            if pid == 0:  # the child: never returns into the caller's code
                code = 1
                try:
                    parent.close()
                    _serve(child, self.ctx, self.backend)
                    code = 0
                finally:
                    os._exit(code)
            child.close()
            self._pool.append(_Worker(pid, parent))

    def submit(self, index: int, views: list[TenantView]) -> bool:
        """Hand chunk `index` to an idle worker; False if none is idle (the caller renders inline)."""
        idle = [w for w in self._pool if w.busy is None]
        if not idle:
            return False
        worker = idle[self._next % len(idle)]
        self._next += 1
        try:
            worker.conn.send((index, views))
        except OSError:  # it died: never handed work again; the chunk renders inline
            worker.busy = _DEAD
            return False
        worker.busy = index
        return True

    def take(self, index: int) -> dict[str, Prerendered]:
        """The chunk's results by slug (waits for its worker); {} if it was never submitted."""
        worker = next((w for w in self._pool if w.busy == index), None)
        if worker is None:
            return {}
        try:
            if not worker.conn.poll(TAKE_TIMEOUT_SECONDS):
                os.kill(worker.pid, signal.SIGKILL)  # our own child, by its pid: stuck
                raise EOFError(f"prerender worker {worker.pid} gave no answer in {TAKE_TIMEOUT_SECONDS:.0f} s")
            got, results = worker.conn.recv()
        except (EOFError, OSError):  # it died or hung: never handed work again (`close` reaps it)
            worker.busy = _DEAD
            raise
        worker.busy = None
        if got != index:  # cannot happen with one chunk in flight per worker; never use another chunk's
            raise RuntimeError(f"prerender worker answered chunk {got}, expected {index}")
        return results  # type: ignore[no-any-return]

    def close(self) -> None:
        """Stop the workers (each reports its CPU and peak RSS) and reap them."""
        for worker in self._pool:
            try:
                if worker.busy == _DEAD:
                    raise EOFError
                if worker.busy is not None:
                    worker.conn.recv()  # a chunk nobody took: drain it so the worker can read the stop
                worker.conn.send(None)
                cpu, rss = worker.conn.recv()
                WORKER_USAGE["cpu"] += cpu
                WORKER_USAGE["peak_rss_kb"] = max(WORKER_USAGE["peak_rss_kb"], rss)
                WORKER_USAGE["workers"] += 1
            except (EOFError, OSError):
                os.kill(worker.pid, signal.SIGKILL)  # our own child, by its pid; gone or stuck
            finally:
                worker.conn.close()
                os.waitpid(worker.pid, 0)
        self._pool.clear()


@contextmanager
def workers(ctx: RenderContext, backend: Any, count: int) -> Iterator[Prerenderer]:
    pool = Prerenderer(ctx, backend, count)
    try:
        pool.start()
        yield pool
    finally:
        pool.close()


def _serve(conn: Connection, ctx: RenderContext, backend: Any) -> None:
    # The parent's handlers (Celery's) must not run in a child; a signal simply ends it.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    while True:
        message = conn.recv()
        if message is None:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            conn.send((usage.ru_utime + usage.ru_stime, usage.ru_maxrss))
            return
        index, views = message
        results: dict[str, Prerendered] = {}
        for view in views:
            try:
                results[view.slug] = prerender(view, ctx, backend)
            except Exception:  # noqa: S112 - the reconcile renders it again inline and reports the error there
                continue
        conn.send((index, results))
