"""Who is acting right now: a user (portal or API, maybe through a token), or a task.

Set once at the edge (middleware, API authentication, task entry) and read by `record()`, so that
actions never take an `actor` argument they could get wrong.
"""

from __future__ import annotations

import contextlib
import contextvars
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Actor:
    user_id: int | None = None
    token_id: int | None = None
    task: str = ""
    request_id: str = ""
    task_id: str = ""

    @property
    def label(self) -> str:
        if self.task:
            return f"task:{self.task}"
        if self.token_id:
            return f"user:{self.user_id} via token:{self.token_id}"
        if self.user_id:
            return f"user:{self.user_id}"
        return "system"


# Actor is frozen (immutable), so sharing one default instance is safe.
_current: contextvars.ContextVar[Actor] = contextvars.ContextVar(
    "gpufleet_actor", default=Actor()  # noqa: B039
)


def current_actor() -> Actor:
    return _current.get()


@contextlib.contextmanager
def acting(**fields: object) -> Iterator[Actor]:
    """Run a block as an actor; fields not given are inherited from the enclosing actor."""
    actor = replace(_current.get(), **fields)  # type: ignore[arg-type]
    token = _current.set(actor)
    try:
        yield actor
    finally:
        _current.reset(token)


def set_actor(**fields: object) -> None:
    """Amend the current actor for the rest of the enclosing `acting` block (e.g. once DRF knows the user)."""
    _current.set(replace(_current.get(), **fields))  # type: ignore[arg-type]


def new_request_id() -> str:
    return uuid.uuid4().hex
