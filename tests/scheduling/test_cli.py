"""The fixed CLI names used by acceptance checks: gpu-model, flavor, quota, endpoint, nodepool, render."""

from __future__ import annotations

import json
from io import StringIO

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from scheduling.models import Flavor, Quota
from tests.support import factories

pytestmark = pytest.mark.django_db


def cli(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_cli_catalog_quota_endpoint_and_platform_render() -> None:
    factories.tenant("acme", "standard", phase="ready")
    cli("gpu-model", "create", "a100-80gb", "--dcgm-name", "NVIDIA A100-SXM4-80GB", "--memory-mib", "81920")
    flavor = json.loads(cli("flavor", "create", "a100-2g", "--gpu-model", "a100-80gb", "--mode", "mig",
                            "--mig-profile", "2g.20gb", "--capacity", "21"))
    assert flavor["resource_name"] == "nvidia.com/mig-2g.20gb" and flavor["weight"] == "0.2857"
    cli("flavor", "create", "a100", "--gpu-model", "a100-80gb", "--mode", "whole", "--capacity", "8",
        "--node-label", "gpufleet.io/pool=a100", "--taint", "gpufleet.io/reserved=ml:NoSchedule")
    with pytest.raises(CommandError, match="--taint"):
        cli("flavor", "create", "y", "--gpu-model", "a100-80gb", "--mode", "whole", "--taint", "bad")
    with pytest.raises(CommandError, match="gpu_model: unknown GPU model"):
        cli("flavor", "create", "x", "--gpu-model", "nope", "--mode", "whole")
    with pytest.raises(CommandError, match="mig_profile"):
        cli("flavor", "create", "x", "--gpu-model", "a100-80gb", "--mode", "mig", "--mig-profile", "9g.1gb")
    quota = json.loads(cli("quota", "set", "acme", "--flavor", "a100-2g", "--nominal", "7", "--lending-limit", "3"))
    assert quota == {"tenant": "acme", "cluster": "default", "flavor": "a100-2g", "nominal": 7,
                     "borrowing_limit": None, "lending_limit": 3}
    with pytest.raises(CommandError, match="lending_limit: must not exceed"):
        cli("quota", "set", "acme", "--flavor", "a100", "--nominal", "1", "--lending-limit", "2")
    with pytest.raises(CommandError, match="nominal: over capacity"):
        cli("quota", "set", "acme", "--flavor", "a100", "--nominal", "9")
    assert Quota.objects.count() == 1
    endpoint = json.loads(cli("endpoint", "create", "acme", "chat", "--model", "llama-3-8b", "--tier", "standard"))
    assert endpoint["tier"] == "standard" and endpoint["deployment"] == "chat"
    with pytest.raises(CommandError, match="triggers: DCGM_FI_DEV_GPU_UTIL is refused"):
        cli("endpoint", "create", "acme", "x", "--model", "m", "--tier", "batch",
            "--trigger-metric", "DCGM_FI_DEV_GPU_UTIL")
    out, err = StringIO(), StringIO()
    call_command("nodepool", "create", "a100-spot", "--flavor", "a100", "--gpu-limit", "8",
                 "--consolidation-policy", "WhenEmptyOrUnderutilized", "--allow-underutilized", stdout=out, stderr=err)
    assert "WARNING" in err.getvalue() and json.loads(out.getvalue())["warnings"]
    platform = list(yaml.safe_load_all(cli("render", "--platform", "--validate")))
    kinds = {m["kind"] for m in platform}
    assert {"ResourceFlavor", "Cohort", "WorkloadPriorityClass", "Queue", "NodePool"} <= kinds
    flavors = {m["metadata"]["name"]: m["spec"] for m in platform if m["kind"] == "ResourceFlavor"}
    assert set(flavors) == {"a100", "a100-2g", "gpufleet-host"}  # the last carries cpu/memory quota
    assert flavors["a100"]["nodeTaints"] == [{"key": "gpufleet.io/reserved", "value": "ml", "effect": "NoSchedule"}]
    assert flavors["a100"]["nodeLabels"]["gpufleet.io/pool"] == "a100"
    assert {"key": "gpufleet.io/reserved", "operator": "Equal", "value": "ml", "effect": "NoSchedule"} in (
        flavors["a100"]["tolerations"])
    tenant = list(yaml.safe_load_all(cli("render", "--tenant", "acme", "--validate")))
    assert {"ClusterQueue", "LocalQueue", "ScaledObject"} <= {m["kind"] for m in tenant}
    assert Flavor.objects.count() == 2


def test_gpu_model_label_defaults_to_the_gfd_product_value() -> None:
    model = json.loads(cli("gpu-model", "create", "h100", "--dcgm-name", "NVIDIA H100 80GB HBM3",
                           "--memory-mib", "81559"))
    assert model["node_label_value"] == "NVIDIA-H100-80GB-HBM3"
    with pytest.raises(CommandError, match="node_label_value"):
        cli("gpu-model", "create", "h200", "--dcgm-name", "NVIDIA H200", "--memory-mib", "1",
            "--node-label", "bad value!")
    with pytest.raises(CommandError, match="node_labels"):
        cli("flavor", "create", "h100", "--gpu-model", "h100", "--mode", "whole", "--node-label", "k=bad value")


def test_sla_tiers_are_data_and_rerender_endpoints() -> None:
    from scheduling.models import SlaTier
    from tenants.models import Tenant
    from tenants.reconcile import desired_manifests

    assert {t["name"]: t["min_replicas"] for t in json.loads(cli("endpoint", "tiers"))} == {
        "critical": 1, "standard": 0, "batch": 0}
    tenant = factories.tenant("acme", "standard", phase="ready")
    cli("endpoint", "create", "acme", "chat", "--model", "m", "--tier", "standard")
    generation = Tenant.objects.get(pk=tenant.pk).generation
    changed = json.loads(cli("endpoint", "tier", "standard", "--prewarm-start", "0 6 * * 1-5", "--max-replicas", "6"))
    assert changed["prewarm_start"] == "0 6 * * 1-5" and changed["max_replicas"] == 6
    assert Tenant.objects.get(pk=tenant.pk).generation == generation + 1
    scaled = next(m for m in desired_manifests(tenant) if m["kind"] == "ScaledObject")
    assert scaled["spec"]["maxReplicaCount"] == 6
    assert scaled["spec"]["triggers"][2]["metadata"]["start"] == "0 6 * * 1-5"
    for args, field in ((("--prewarm-start", "every morning"), "prewarm_start"),
                        (("--min-replicas", "5", "--max-replicas", "2"), "max_replicas"),
                        (("--prewarm-end", ""), "prewarm_end")):
        with pytest.raises(CommandError, match=field):
            cli("endpoint", "tier", "standard", *args)
    assert SlaTier.objects.get(name="standard").max_replicas == 6
    with pytest.raises(CommandError, match="prewarm_start"):  # at zero with nothing to wake it (issue 26)
        cli("endpoint", "tier", "overnight", "--min-replicas", "0", "--cooldown-seconds", "7200")
    json.loads(cli("endpoint", "tier", "overnight", "--min-replicas", "0", "--cooldown-seconds", "7200",
                   "--prewarm-start", "0 22 * * *", "--prewarm-end", "0 6 * * *"))
    assert SlaTier.objects.filter(name="overnight").exists()


def test_nodepool_create_on_a_cluster() -> None:
    """Issue 26, F5: the doctor's fix for a flavor offered without a pool names the cluster."""
    from scheduling.clusters import actions as cluster_actions

    cli("gpu-model", "create", "h100", "--dcgm-name", "NVIDIA H100 80GB HBM3", "--memory-mib", "81559")
    cli("flavor", "create", "h100", "--gpu-model", "h100", "--mode", "whole", "--capacity", "8")
    cluster_actions.create_cluster("training", kubeconfig_secret="gpufleet-cluster-training")
    pool = json.loads(cli("nodepool", "create", "training-h100", "--flavor", "h100", "--gpu-limit", "8",
                          "--cluster", "training"))
    assert pool["cluster"] == "training"
    assert json.loads(cli("nodepool", "create", "h100", "--flavor", "h100", "--gpu-limit", "8"))["cluster"] == (
        "default")
    with pytest.raises(CommandError, match="cluster: unknown cluster 'nowhere'"):
        cli("nodepool", "create", "x", "--flavor", "h100", "--gpu-limit", "8", "--cluster", "nowhere")
