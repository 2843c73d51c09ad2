"""What every resource and data source shares: the configured client, errors turned into diagnostics,
and an object type for nested attributes."""

from __future__ import annotations

import functools
import json
import traceback
from collections.abc import Callable
from typing import Any

from tf.types import TfType

from .client import ApiError, Client


class NotConfigured(Exception):
    pass


class Object(TfType):
    """A cty object with fixed attribute types (tf 1.2 ships list/set/map but no object)."""

    def __init__(self, attributes: dict[str, TfType]) -> None:
        self.attributes = attributes

    def encode(self, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {k: t.encode(value.get(k)) for k, t in self.attributes.items()}

    def decode(self, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {k: t.decode(value.get(k)) for k, t in self.attributes.items()}

    def tf_type(self) -> bytes:
        inner = {k: json.loads(t.tf_type()) for k, t in self.attributes.items()}
        return json.dumps(["object", inner], separators=(",", ":")).encode()


def report(diags: Any, summary: str, exc: BaseException, attributes: set[str]) -> None:
    """One diagnostic per field the API named (on that attribute when the schema has it), else one overall."""
    if isinstance(exc, ApiError) and exc.fields:
        for name, reasons in exc.fields.items():
            top = name.split(".")[0].split("[")[0]
            path = [top] if top in attributes else None
            label = name if path is None else top
            diags.add_error(f"{summary}: {label} {'; '.join(reasons)}", f"HTTP {exc.status}: {exc.detail}",
                            path=path)
        return
    if isinstance(exc, ApiError):
        diags.add_error(f"{summary}: {exc.detail}", f"HTTP {exc.status}" if exc.status else "")
        return
    if isinstance(exc, (TimeoutError, NotConfigured)):
        diags.add_error(f"{summary}: {exc}")
        return
    diags.add_error(f"{summary}: unexpected {type(exc).__name__}: {exc}", traceback.format_exc())


def guarded(summary: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Turn any exception of a resource operation into an error diagnostic (never a crashed plugin).

    The wrapped method's first argument after self is the context carrying `diagnostics`. A method that
    already has a partial result to keep (a created object) stores it in `self.partial`, which is returned.
    """

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def run(self: Any, ctx: Any, *args: Any) -> Any:
            # A failed read or update keeps the state Terraform has (never "gone" because of an error).
            self.partial = args[0] if fn.__name__ in ("read", "update") and args else None
            try:
                return fn(self, ctx, *args)
            except Exception as exc:  # every failure must reach Terraform as a diagnostic
                attributes = {a.name for a in self.get_schema().attributes}
                report(ctx.diagnostics, summary, exc, attributes)
                return self.partial

        return run

    return wrap


class Base:
    """Resources and data sources are built with the provider instance (tf calls `klass(provider)`)."""

    def __init__(self, provider: Any) -> None:
        self.provider = provider
        self.partial: Any = None

    @property
    def client(self) -> Client:
        client = getattr(self.provider, "client", None)
        if client is None:
            raise NotConfigured("the provider is not configured: set endpoint and token (or GPUFLEET_ENDPOINT "
                                "and GPUFLEET_TOKEN)")
        return client  # type: ignore[no-any-return]


def split_key(diags: Any, key: str, what: str) -> tuple[str, str] | None:
    """An import id `<tenant slug>/<name>`."""
    parts = key.split("/")
    if len(parts) != 2 or not all(parts):
        diags.add_error(f"import id must be <tenant slug>/<{what}>", f"got {key!r}")
        return None
    return parts[0], parts[1]


def gone(exc: ApiError) -> bool:
    return exc.status == 404
