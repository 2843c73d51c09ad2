"""The contributor registry: the one place where apps plug into each other's pipelines.

`tenants` owns the reconcile pipeline (load a view, render, apply, record); `scheduling`, `billing` and
`tenants.isolation` add to it without `tenants` importing them. Each app declares what it adds in a
module `<app>.contributions` holding one immutable tuple, `CONTRIBUTIONS`, of `Contribution`s; the
registry collects every installed app's tuple on first use, checks it, and serves each extension point's
contributions as a tuple in their declared `order` (ties broken by name, never by import order). The set
of extension points is closed: a contribution to a name not listed below is an error at collection, and
so is asking for one.

Nothing here imports an app (this is the bottom layer): the protocols speak of tenants, views and
contexts as opaque objects; the concrete types live in `tenants`.

Extension points (what a contributor receives -> returns; when it runs)
-------------------------------------------------------------------------
Render (tenants.render; pure: no I/O, the same inputs give the same output):

- `render_context`: () -> {key: value} merged into RenderContext.extra. Platform-wide inputs every
  tenant's render reads (the GPU catalog, the isolation settings); read once per reconcile or fleet pass.
- `platform_render_context`: the same, for inputs only the platform's own objects read (their keys start
  with "_" or are left out of a `tenants_only` context): loaded only when the platform is rendered.
- `tenant_section`: (view, ctx) -> [manifest]. One per `name` (unique): the objects a tenant owns.
- `platform_section`: (ctx) -> [manifest]. One per `name` (unique): cluster-wide platform objects.
- `quota_hard`: (view, ctx) -> {quota key: quantity}, added to the tenant's backstop ResourceQuota.
- `namespace_labels`: (view, ctx) -> {label: value}, added to the tenant's host namespace.
- `vcluster_values`: (view, ctx, values) -> None; adds to the tenant's vcluster.yaml in place.
- `placements`: at most one. (view, ctx) -> [Placed]: the host clusters a tenant is delivered to, home
  first, each with its narrowed view and context. None contributed: one cluster, the root layout.
- `placement_wrappers`: (inner placements function) -> placements function. Applied in order around
  the `placements` contribution (MultiKueue marks each placement with the cluster's dispatch role).
- `platform_targets`: at most one. (ctx) -> [Placed] with no view: every cluster the platform's own
  objects go to. None contributed: one cluster, the root layout.

Reconcile (tenants.reconcile, tenants.fleet):

- `view_loader`: (tenants) -> {tenant pk: value}, batch-first: a fleet pass calls it once per chunk, a
  single reconcile with a batch of one. `name` is the TenantView field the value fills. Loaders may
  share rows within one call through `tenants.reconcile.shared_rows`.
- `condition`: (tenants) -> {tenant pk: condition dict}, batch-first like `view_loader`: merged into the
  tenant's status after a successful apply (the fleet pass computes them per chunk ahead of applying).
- `placement_status`: (tenant, placed, error or None) -> None, after delivering a tenant to one host cluster.
- `platform_status`: (target, error or None) -> None, after delivering the platform's objects to one cluster.
- `chunk_scope`: (tenants) -> context manager entered by a fleet pass around each chunk it reconciles
  (and its commit): contributors preload what their hooks read and batch their writes.
- `kube_clusters`: at most one. () -> ([(name, tree, kube API, kubeconfig reference)], tree of the
  cluster gpufleet runs in): the Kubernetes backend holds one client per cluster.

Tenant actions and tools:

- `on_request`: (tenant) -> None, inside `tenants.actions.request_tenant`'s transaction; raising
  ActionError refuses the request.
- `demo_seeder`: (users by name, tenants by name) -> None, run by `gpufleet demo`; idempotent.
- `impact_check`: (tenant, allowed GPU modes) -> [line], one per configured thing the modes disallow.
- `kubeconfig_ca`: (tenant) -> PEM text or None; asked in order, the first answer wins.
- `kubeconfig_placements`: at most one. (tenant) -> [(cluster, home)]: the contexts a kubeconfig lists.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Any, Protocol


class RegistryError(LookupError):
    """An unknown extension point, or contributions that break a point's rules."""


# --- the protocols ----------------------------------------------------------------------------------


class ContextLoader(Protocol):
    def __call__(self) -> Mapping[str, Any]: ...


class TenantSection(Protocol):
    def __call__(self, view: Any, ctx: Any) -> list[dict[str, Any]]: ...


class PlatformSection(Protocol):
    def __call__(self, ctx: Any) -> list[dict[str, Any]]: ...


class ViewMapping(Protocol):
    """quota_hard, namespace_labels."""

    def __call__(self, view: Any, ctx: Any) -> Mapping[str, str]: ...


class ValuesHook(Protocol):
    def __call__(self, view: Any, ctx: Any, values: dict[str, Any]) -> None: ...


class PlacementsFn(Protocol):
    def __call__(self, view: Any, ctx: Any) -> list[Any]: ...


class PlacementWrapper(Protocol):
    def __call__(self, inner: PlacementsFn) -> PlacementsFn: ...


class PlatformTargets(Protocol):
    def __call__(self, ctx: Any) -> list[Any]: ...


class BatchLoader(Protocol):
    """view_loader, condition: batch-first, a single tenant is a batch of one."""

    def __call__(self, tenants: Sequence[Any]) -> Mapping[int, Any]: ...


class PlacementStatus(Protocol):
    def __call__(self, tenant: Any, placed: Any, error: Exception | None) -> None: ...


class PlatformStatus(Protocol):
    def __call__(self, target: Any, error: Exception | None) -> None: ...


class ChunkScope(Protocol):
    def __call__(self, tenants: Sequence[Any]) -> Any: ...  # a context manager


class KubeClusters(Protocol):
    def __call__(self) -> tuple[Sequence[tuple[str, str, str, str]], str]: ...


class TenantHook(Protocol):
    """on_request."""

    def __call__(self, tenant: Any) -> None: ...


class DemoSeeder(Protocol):
    def __call__(self, users: dict[str, Any], tenants: dict[str, Any]) -> None: ...


class ImpactCheck(Protocol):
    def __call__(self, tenant: Any, allowed: frozenset[str]) -> list[str]: ...


class CaProvider(Protocol):
    def __call__(self, tenant: Any) -> str | None: ...


class KubeconfigPlacements(Protocol):
    def __call__(self, tenant: Any) -> Sequence[tuple[str, bool]]: ...


# --- the points ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExtensionPoint:
    name: str
    protocol: type
    # At most one contribution (a second is an error, not a silent "first wins").
    single: bool = False
    # Every contribution carries a `name`, unique within the point (sections; a view loader's field).
    named: bool = False


EXTENSION_POINTS: Mapping[str, ExtensionPoint] = MappingProxyType({p.name: p for p in (
    ExtensionPoint("render_context", ContextLoader),
    ExtensionPoint("platform_render_context", ContextLoader),
    ExtensionPoint("tenant_section", TenantSection, named=True),
    ExtensionPoint("platform_section", PlatformSection, named=True),
    ExtensionPoint("quota_hard", ViewMapping),
    ExtensionPoint("namespace_labels", ViewMapping),
    ExtensionPoint("vcluster_values", ValuesHook),
    ExtensionPoint("placements", PlacementsFn, single=True),
    ExtensionPoint("placement_wrappers", PlacementWrapper),
    ExtensionPoint("platform_targets", PlatformTargets, single=True),
    ExtensionPoint("view_loader", BatchLoader, named=True),
    ExtensionPoint("condition", BatchLoader),
    ExtensionPoint("placement_status", PlacementStatus),
    ExtensionPoint("platform_status", PlatformStatus),
    ExtensionPoint("chunk_scope", ChunkScope),
    ExtensionPoint("kube_clusters", KubeClusters, single=True),
    ExtensionPoint("on_request", TenantHook),
    ExtensionPoint("demo_seeder", DemoSeeder),
    ExtensionPoint("impact_check", ImpactCheck),
    ExtensionPoint("kubeconfig_ca", CaProvider),
    ExtensionPoint("kubeconfig_placements", KubeconfigPlacements, single=True),
)})


@dataclass(frozen=True)
class Contribution:
    """`fn` added to extension point `point`. Lower `order` runs first; equal orders go by `name`, then by
    the function's qualified name, so the result never depends on which module was imported first."""

    point: str
    fn: Callable[..., Any]
    order: int = 100
    name: str = ""

    def __post_init__(self) -> None:
        if self.point not in EXTENSION_POINTS:
            raise RegistryError(f"unknown extension point {self.point!r} (known: {', '.join(EXTENSION_POINTS)})")

    @property
    def sort_key(self) -> tuple[int, str, str]:
        return (self.order, self.name, f"{self.fn.__module__}.{getattr(self.fn, '__qualname__', '')}")


# The module each app declares its contributions in, as `CONTRIBUTIONS: tuple[Contribution, ...]`.
CONTRIBUTIONS_MODULE = "contributions"


def _declared(app_names: Sequence[str]) -> tuple[Contribution, ...]:
    found: list[Contribution] = []
    for app in app_names:
        module_name = f"{app}.{CONTRIBUTIONS_MODULE}"
        if importlib.util.find_spec(module_name) is None:
            continue
        declared = getattr(importlib.import_module(module_name), "CONTRIBUTIONS", None)
        if not isinstance(declared, tuple) or not all(isinstance(c, Contribution) for c in declared):
            raise RegistryError(f"{module_name}.CONTRIBUTIONS must be a tuple of Contribution")
        found.extend(declared)
    return tuple(found)


def arrange(contributions: Sequence[Contribution]) -> Mapping[str, tuple[Contribution, ...]]:
    """Every point's contributions in order, checked against the point's rules."""
    by_point: dict[str, list[Contribution]] = {name: [] for name in EXTENSION_POINTS}
    for contribution in contributions:
        by_point[contribution.point].append(contribution)
    for name, found in by_point.items():
        point = EXTENSION_POINTS[name]
        if point.single and len(found) > 1:
            raise RegistryError(f"{name} takes one contribution, got {len(found)}")
        if point.named:
            names = [c.name for c in found]
            if "" in names or len(set(names)) != len(names):
                raise RegistryError(f"{name}: every contribution needs a unique name (got {names})")
        found.sort(key=lambda c: c.sort_key)
    return MappingProxyType({name: tuple(found) for name, found in by_point.items()})


@cache
def _collected() -> Mapping[str, tuple[Contribution, ...]]:
    from django.apps import apps

    return arrange(_declared([config.name for config in apps.get_app_configs()]))


# Contributions a test adds for a block (`extended`); an immutable tuple per context.
_EXTRA: ContextVar[tuple[Contribution, ...]] = ContextVar("registry_extra", default=())


def contributions(point: str) -> tuple[Contribution, ...]:
    """The point's contributions, in order."""
    if point not in EXTENSION_POINTS:
        raise RegistryError(f"unknown extension point {point!r}")
    extra = _EXTRA.get()
    if extra:
        return arrange((*_collected()[point], *(c for c in extra if c.point == point)))[point]
    return _collected()[point]


@cache
def _functions(point: str) -> tuple[Callable[..., Any], ...]:
    return tuple(c.fn for c in contributions(point))


def functions(point: str) -> tuple[Callable[..., Any], ...]:
    """The point's contributed functions, in order (render calls this per tenant and section: kept once)."""
    if _EXTRA.get():
        return tuple(c.fn for c in contributions(point))
    return _functions(point)


def one(point: str) -> Callable[..., Any] | None:
    """The contribution to a `single` point, or None."""
    found = EXTENSION_POINTS.get(point)
    if found is None or not found.single:
        raise RegistryError(f"{point!r} is not a single-contribution extension point")
    contributed = functions(point)
    return contributed[0] if contributed else None


@contextmanager
def extended(*added: Contribution) -> Iterator[None]:
    """Within the block, `added` count as declared too (tests: a contributor the product does not have)."""
    token = _EXTRA.set((*_EXTRA.get(), *added))
    try:
        yield
    finally:
        _EXTRA.reset(token)
