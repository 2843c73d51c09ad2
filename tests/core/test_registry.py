"""The contributor registry (gpufleet.core.registry): closed, ordered, batch-first, and the only hook point."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import pytest

from gpufleet.core import registry
from gpufleet.core.registry import Contribution, RegistryError
from tenants.models import Phase, Tenant
from tenants.render import TenantView
from tests.support import factories

from .hook_scan import hook_collections, ready_appends, scan

REPO = Path(__file__).resolve().parents[2]


def first(view: object, ctx: object) -> list:
    return []


def second(view: object, ctx: object) -> list:
    return []


# --- closed ------------------------------------------------------------------------------------------


def test_an_unknown_extension_point_is_an_error() -> None:
    with pytest.raises(RegistryError, match="unknown extension point 'tenant_sections'"):
        Contribution("tenant_sections", first, name="x")
    with pytest.raises(RegistryError):
        registry.contributions("VIEW_EXTRAS")
    with pytest.raises(RegistryError):
        registry.one("no_such_point")


def test_every_installed_app_declares_only_known_points() -> None:
    # Collection checks each app's tuple; every point answers, and contributions are the declared type.
    for point in registry.EXTENSION_POINTS:
        assert all(isinstance(c, Contribution) and c.point == point for c in registry.contributions(point))


def test_a_single_point_takes_one_contribution() -> None:
    with pytest.raises(RegistryError, match="placements takes one contribution"):
        registry.arrange([Contribution("placements", first), Contribution("placements", second)])
    with pytest.raises(RegistryError, match="not a single-contribution"):
        registry.one("tenant_section")


def test_named_points_need_unique_names() -> None:
    with pytest.raises(RegistryError, match="unique name"):
        registry.arrange([Contribution("tenant_section", first, name="a"),
                          Contribution("tenant_section", second, name="a")])
    with pytest.raises(RegistryError, match="unique name"):
        registry.arrange([Contribution("view_loader", first)])


def test_a_contributions_module_must_declare_a_tuple_of_contributions(tmp_path: Path, monkeypatch) -> None:
    package = tmp_path / "someapp"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "contributions.py").write_text(textwrap.dedent("""
        from gpufleet.core.registry import Contribution
        CONTRIBUTIONS = [Contribution("on_request", print)]  # a list: mutable, refused
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(RegistryError, match="must be a tuple"):
        registry._declared(["someapp"])
    assert registry._declared(["tenants.isolation"]) == (), "an app without the module contributes nothing"


# --- explicit order ----------------------------------------------------------------------------------


def test_order_is_the_declared_order_never_the_declaration_sequence() -> None:
    contributions = [Contribution("tenant_section", second, order=10, name="b"),
                     Contribution("tenant_section", first, order=20, name="a"),
                     Contribution("tenant_section", first, order=10, name="a2")]
    arranged = {tuple(c.name for c in registry.arrange(p)["tenant_section"])
                for p in itertools.permutations(contributions)}
    assert arranged == {("a2", "b", "a")}, "by order, then by name, whatever came first"


def test_the_products_render_order_is_pinned() -> None:
    # The order sections and hooks ran in before the registry (import order then): a change shows here.
    assert [c.name for c in registry.contributions("tenant_section")] == [
        "namespace", "resource-quota", "limit-range", "vcluster", "gpu-admission", "network", "node-isolation",
        "vcluster-serving-ca", "scheduling", "multikueue"]
    assert [c.name for c in registry.contributions("platform_section")] == [
        "helm-repositories", "cilium-baseline", "prerequisites", "scheduling", "fleetops"]
    assert [f.__qualname__ for f in registry.functions("vcluster_values")] == [
        "extend_values", "replicate_services", "reserved_pools_values"]
    assert [f.__module__ for f in registry.functions("render_context")] == [
        "tenants.isolation.config", "scheduling.inputs", "scheduling.clusters.multikueue_render"]
    assert [f.__qualname__ for f in registry.functions("demo_seeder")] == [
        "seed_catalog", "seed_clusters", "seed_billing"]


def test_extended_adds_for_the_block_only() -> None:
    before = registry.contributions("impact_check")
    added = Contribution("impact_check", lambda tenant, allowed: ["x"])
    with registry.extended(added):
        assert registry.contributions("impact_check") == (*before, added)
    assert registry.contributions("impact_check") == before


def test_the_multikueue_wrap_is_chosen_by_the_registry() -> None:
    from scheduling.clusters import delivery, multikueue_render

    assert registry.one("placements") is delivery.placed_for_tenant
    assert registry.functions("placement_wrappers") == (multikueue_render.wrap,)


def test_view_loaders_fill_declared_tenant_view_fields() -> None:
    fields = set(TenantView.__dataclass_fields__)
    assert {c.name for c in registry.contributions("view_loader")} <= fields


# --- batch-first: a batch of one equals a batch of many ---------------------------------------------


def _normalised(value: object) -> object:
    # A condition's transition time is "now" when computed; the reconcile's merge keeps an older one.
    return {**value, "lastTransitionTime": ""} if isinstance(value, dict) and "lastTransitionTime" in value else value


@pytest.mark.django_db
def test_every_batch_loader_gives_for_a_batch_of_one_what_it_gives_in_a_batch_of_many() -> None:
    from scheduling import actions as sched
    from tenants.isolation import actions as isolation_actions

    model = sched.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    flavor = sched.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=64)
    tenants = [factories.tenant(f"b-{level}", level, phase=Phase.READY) for level in ("untrusted", "standard",
                                                                                         "trusted")]
    sched.set_quota(tenants[2], flavor=flavor.name, nominal=4, borrowing_limit=1)
    sched.create_endpoint(tenants[2], "chat", model="llama-3-8b", tier="standard")
    isolation_actions.set_tenant_isolation(tenants[1], allowed_modes=["whole"], egress_cidrs=["10.1.0.0/16"])
    fresh = list(Tenant.objects.filter(pk__in=[t.pk for t in tenants]).order_by("pk"))
    loaders = [*registry.contributions("view_loader"), *registry.contributions("condition")]
    assert {c.fn.__qualname__ for c in loaders} >= {"scheduling_many", "views_many", "gpu_modes_conditions_many",
                                                    "gpu_workloads_conditions_many"}
    for loader in loaders:
        many = loader.fn(fresh)
        assert set(many) == {t.pk for t in fresh}, loader
        for tenant in fresh:
            assert _normalised(loader.fn([tenant])[tenant.pk]) == _normalised(many[tenant.pk]), (loader, tenant.slug)


# --- no hook list left --------------------------------------------------------------------------------


def test_the_product_has_no_module_level_mutable_collection_of_callables() -> None:
    assert scan(REPO) == {}, "a hook point belongs in gpufleet.core.registry; a fixed table in a MappingProxyType"
    assert ready_appends(REPO) == [], "contributions are declared (<app>.contributions), not appended in ready()"


def test_the_scan_finds_what_it_looks_for() -> None:
    source = textwrap.dedent("""
        from collections.abc import Callable
        def f(): ...
        VIEW_EXTRAS: list = []
        HOOKS: list[Callable[[], None]] = []
        TABLE = {"a": f}
        LAMBDAS = [lambda: 1]
        FINE = ("a", f)
        CACHE: dict[str, int] = {}
        LABELS = {"a": "b"}
    """)
    assert [hit.split(":")[0] for hit in hook_collections(source)] == ["VIEW_EXTRAS", "HOOKS", "TABLE", "LAMBDAS"]
