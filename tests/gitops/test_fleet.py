"""The fleet pass behind reconcile_all and the sync: batched loaders, cheap no-op, one commit per chunk."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from gpufleet.core import registry
from infra.gitops import GitOpsBackend
from infra.manifests import to_yaml_stream
from scheduling import actions as sched
from scheduling.inputs import load_tenant
from tenants import reconcile
from tenants.fleet import reconcile_fleet
from tenants.isolation import actions as isolation_actions
from tenants.isolation.config import tenant_extras
from tenants.models import Phase, Tenant
from tenants.render import RenderContext, render_tenant
from tenants.tasks import reconcile_all
from tests.support import factories
from tests.support.services import need_binary, need_reference

from .helpers import commits, git, status

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def catalog(db):
    model = sched.create_gpu_model("h100-80gb", "NVIDIA H100 80GB HBM3", 81559, "NVIDIA-H100-80GB-HBM3")
    return {
        "whole": sched.create_flavor("h100", gpu_model=model.name, mode="whole", capacity=64),
        "mig": sched.create_flavor("h100-3g", gpu_model=model.name, mode="mig", mig_profile="3g.40gb", capacity=64),
        "hami": sched.create_flavor("h100-q", gpu_model=model.name, mode="hami", memory_percent=25,
                                    cores_percent=25, capacity=64),
    }


def ready_tenants(count: int, trust_level: str = "trusted", prefix: str = "team") -> list[Tenant]:
    return [factories.tenant(f"{prefix}-{i}", trust_level, phase=Phase.READY) for i in range(count)]


def test_batch_loaders_match_the_per_tenant_loaders(catalog, eager_tasks, gitops_repo: Path) -> None:
    need_binary("git")
    need_reference()
    tenants = [factories.tenant(f"t-{level}", level, phase=Phase.READY)
               for level in ("untrusted", "standard", "trusted")]
    trusted, standard = tenants[2], tenants[1]
    cohort = sched.create_cohort("research")
    sched.set_tenant_scheduling(trusted, cohort=cohort.name, fair_sharing_weight="2.5")
    for flavor, nominal in (("hami", 8), ("whole", 2), ("mig", 3)):  # out of name order on purpose
        sched.set_quota(trusted, flavor=catalog[flavor].name, nominal=nominal, borrowing_limit=1)
    sched.set_quota(standard, flavor=catalog["mig"].name, nominal=1, lending_limit=0)
    sched.create_endpoint(trusted, "chat", model="llama-3-8b", tier="standard")
    sched.create_endpoint(trusted, "batch", model="llama-3-70b", tier="batch")
    isolation_actions.set_tenant_isolation(standard, allowed_modes=["whole"], egress_cidrs=["10.1.0.0/16"])
    fresh = list(Tenant.objects.filter(pk__in=[t.pk for t in tenants]).order_by("pk"))

    loaders = {c.name: c.fn for c in registry.contributions("view_loader")}
    assert {"scheduling", "isolation"} <= set(loaders), "the scheduling and isolation batch loaders are registered"
    views = reconcile.tenant_views(fresh)
    ctx = RenderContext.from_settings()
    for tenant in fresh:
        one = reconcile.tenant_view(tenant)  # a batch of one
        assert views[tenant.pk] == one, tenant.slug
        for name, load in loaders.items():  # every loader, outside tenant_views' shared rows too
            assert load(fresh)[tenant.pk] == load([tenant])[tenant.pk] == getattr(one, name), (name, tenant.slug)
        # The per-tenant loaders (their own queries, one tenant at a time) agree with the batch ones.
        assert views[tenant.pk].scheduling == load_tenant(tenant)["scheduling"], tenant.slug
        assert views[tenant.pk].isolation == tenant_extras(tenant)["isolation"], tenant.slug
        # Same values and the same order (dict order shows in YAML): byte-identical renders.
        assert to_yaml_stream(render_tenant(views[tenant.pk], ctx)) == to_yaml_stream(render_tenant(one, ctx))


def test_noop_pass_costs_a_constant_number_of_queries(catalog, gitops_repo: Path) -> None:
    need_binary("git")
    need_reference()

    def noop_queries() -> int:
        reconcile_all()  # brings everything up to date (cold or after adding tenants)
        head = git(gitops_repo, "rev-parse", "HEAD")
        with CaptureQueriesContext(connection) as queries:
            assert reconcile_all() == Tenant.objects.live().count()
        assert git(gitops_repo, "rev-parse", "HEAD") == head, "a no-op pass must not commit"
        return len(queries)

    ready_tenants(3, prefix="a")
    small = noop_queries()
    ready_tenants(6, prefix="b")
    assert noop_queries() == small, "queries must not grow with the number of tenants (no N+1)"


def test_cold_pass_is_one_commit_for_many_tenants(catalog, gitops_repo: Path) -> None:
    need_binary("git")
    need_reference()
    tenants = ready_tenants(12)
    for tenant in tenants[:4]:
        sched.set_quota(tenant, flavor=catalog["whole"].name, nominal=1)  # bumps their generation
    reconcile_all()
    first = commits(gitops_repo)

    assert reconcile_all() == 12
    assert commits(gitops_repo) == first, "second pass is a no-op"
    assert status(gitops_repo) == ""
    subjects = git(gitops_repo, "log", "--format=%s").splitlines()
    # The repository's first commit, the platform's, then ONE commit for all twelve tenants.
    assert len(subjects) == 3 and subjects[0] == "reconcile all tenants: 12 tenants"
    for tenant in Tenant.objects.filter(pk__in=[t.pk for t in tenants]):
        assert tenant.phase == Phase.READY and tenant.observed_generation == tenant.generation
        folder = gitops_repo / "clusters/default/tenants" / tenant.slug
        assert (folder / f"namespace.core_tenant-{tenant.slug}.yaml").exists()


def test_pass_repairs_drift_and_reconciles_only_what_changed(catalog, gitops_repo: Path) -> None:
    need_binary("git")
    need_reference()
    tenants = ready_tenants(5)
    reconcile_all()
    before = commits(gitops_repo)
    slug = tenants[2].slug
    victim = gitops_repo / "clusters/default/tenants" / slug / f"namespace.core_tenant-{slug}.yaml"
    victim.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: hijacked}\n")
    git(gitops_repo, "commit", "-q", "-am", "edit by hand")
    stamp = {t.slug: t.last_reconciled_at for t in Tenant.objects.all()}

    reconcile_all()

    assert commits(gitops_repo) == before + 2  # the hand edit, then one repair
    assert "repair drift (1 objects)" in git(gitops_repo, "log", "-1", "--format=%s")
    assert git(gitops_repo, "show", "--name-only", "--format=", "HEAD").split() == [
        str(victim.relative_to(gitops_repo))
    ]
    # Clean tenants were verified (stamped) without being re-applied one by one.
    assert all(t.last_reconciled_at > stamp[t.slug] for t in Tenant.objects.all())


class _NoCheapCompare(GitOpsBackend):
    """A backend like the Kubernetes one: it can apply, but cannot tell cheaply whether it must."""

    in_sync = None  # type: ignore[assignment]
    batch = None  # type: ignore[assignment]


def test_backends_without_a_cheap_comparison_keep_the_per_tenant_fan_out(catalog, gitops_repo: Path) -> None:
    need_binary("git")
    need_reference()
    tenants = ready_tenants(3)
    result = reconcile_fleet(_NoCheapCompare(gitops_repo))
    assert result.deferred == sorted(t.pk for t in tenants)
    assert result.tenants == 3 and not result.outcomes and not result.clean
    assert not (gitops_repo / "clusters/default/tenants").exists(), "deferred tenants are applied by their own tasks"


def test_batch_loaders_share_the_isolation_rows_within_one_call_only(catalog) -> None:
    tenants = [factories.tenant(f"s-{level}", level, phase=Phase.READY) for level in ("untrusted", "trusted")]
    fresh = list(Tenant.objects.filter(pk__in=[t.pk for t in tenants]).order_by("pk"))
    with CaptureQueriesContext(connection) as queries:
        reconcile.tenant_views(fresh)
    isolation = [q for q in queries.captured_queries if "tenantisolation" in q["sql"].lower()]
    assert len(isolation) == 1, "both batch loaders read the same rows: once per call"
    # The next call reads them again: rows are never served from an earlier call.
    isolation_actions.set_tenant_isolation(fresh[1], allowed_modes=["whole"])
    views = reconcile.tenant_views(fresh)
    assert views[fresh[1].pk] == reconcile.tenant_view(fresh[1])
