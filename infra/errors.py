"""The two kinds of failure an adapter reports, so tasks know whether to retry."""

from __future__ import annotations


class InfraError(Exception):
    """Base class for adapter failures."""

    # The reason a status condition shows for this failure ("" -> the reconciler's generic one).
    reason: str = ""
    # A failure of the environment that is fixed outside gpufleet (a read-only or full volume): the status
    # records it like any PermanentError, and the task still tries again after this many seconds, with
    # backoff, so the fix takes effect within seconds instead of at the next periodic pass. None: no retry.
    retry_after: float | None = None


class TransientError(InfraError):
    """Worth retrying: a conflict, throttling, a 5xx or a timeout. `delay` is a hint in seconds."""

    def __init__(self, message: str, delay: float = 5.0) -> None:
        super().__init__(message)
        self.delay = delay


class UnreachableError(TransientError):
    """A transient failure where no answer came at all (no route, name not resolved, refused, timed out):
    often a wrong address rather than a busy service, so a person is told where to configure it."""


class PermanentError(InfraError):
    """Retrying will not help (bad input, forbidden, invalid object); shown to people as is."""


class AwaitingPublication(TransientError):
    """Applied and committed, but not yet where the cluster reads it (the GitOps remote)."""

    reason = "AwaitingPush"
