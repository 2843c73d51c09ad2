"""A GPU node pool launches only instance types of its flavor's exact GPU model (issue 26).

The instance types' labels are transcribed from karpenter-provider-aws@v1.14.1:website/content/en/docs/
reference/instance-types.md (p4d.24xlarge at 25159-25180, p4de.24xlarge at 25195-25216, p5.48xlarge):
both A100 types carry `instance-gpu-name: a100`; only the memory tells them apart. Karpenter launches an
instance type only if its labels satisfy every NodePool requirement (kubernetes-sigs/karpenter@v1.14.1
pkg/scheduling/requirements.go, `Requirements.Compatible`)."""

from __future__ import annotations

from decimal import Decimal

from scheduling.inputs import Catalog, FlavorSpec, NodePoolSpec
from scheduling.nodepools.render import requirements

INSTANCE_TYPES = {
    "p4d.24xlarge": {"karpenter.k8s.aws/instance-gpu-name": "a100", "karpenter.k8s.aws/instance-gpu-memory": "40960",
                     "karpenter.k8s.aws/instance-gpu-count": "8"},
    "p4de.24xlarge": {"karpenter.k8s.aws/instance-gpu-name": "a100",
                      "karpenter.k8s.aws/instance-gpu-memory": "81920", "karpenter.k8s.aws/instance-gpu-count": "8"},
    "p5.48xlarge": {"karpenter.k8s.aws/instance-gpu-name": "h100", "karpenter.k8s.aws/instance-gpu-memory": "81920",
                    "karpenter.k8s.aws/instance-gpu-count": "8"},
}
COMMON = {"kubernetes.io/arch": "amd64", "karpenter.sh/capacity-type": "on-demand"}


def launchable(reqs: list[dict]) -> set[str]:
    out = set()
    for name, labels in INSTANCE_TYPES.items():
        labels = {**labels, **COMMON, "node.kubernetes.io/instance-type": name}
        if all(r["operator"] == "In" and labels.get(r["key"]) in r["values"] for r in reqs):
            out.add(name)
    return out


def pool(model: str, memory_mib: int, instance_types: list[str] | None = None) -> NodePoolSpec:
    flavor = FlavorSpec(name=model, gpu_model=model, product_label="", mode="whole", mig_profile="",
                        memory_percent=None, cores_percent=None, weight=Decimal(1), capacity=8, node_labels={},
                        tolerations=[], taints=[], gpu_memory_mib=memory_mib)
    return NodePoolSpec(name=f"{model}-whole", flavor=flavor, instance_types=instance_types or [],
                        capacity_types=["on-demand"], gpu_limit=16, node_class="gpu",
                        consolidation_policy="WhenEmpty", consolidate_after="1h")


def test_an_a100_80gb_pool_never_launches_a100_40gb_instances() -> None:
    assert launchable(requirements(pool("a100-80gb", 81920), Catalog())) == {"p4de.24xlarge"}
    assert launchable(requirements(pool("a100-40gb", 40960), Catalog())) == {"p4d.24xlarge"}
    assert launchable(requirements(pool("h100-80gb", 81920), Catalog())) == {"p5.48xlarge"}


def test_the_memory_requirement_is_aws_only() -> None:
    other = Catalog(node_class_group="karpenter.azure.com", node_class_kind="AKSNodeClass")
    keys = {r["key"] for r in requirements(pool("a100-80gb", 81920, ["Standard_ND96amsr_A100_v4"]), other)}
    assert not {k for k in keys if k.startswith("karpenter.k8s.aws/")}
