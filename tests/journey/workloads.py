"""What a tenant creates inside its virtual cluster: the pods of a gang training Job, an inference
endpoint's pod, and a non-GPU system pod (a CoreDNS-like add-on). Every pod is written to pass Pod
Security `restricted` (what an untrusted tenant must write anyway), so refusals come from the platform."""

from __future__ import annotations

from typing import Any

GPU = {
    "whole": {"nvidia.com/gpu": 1},
    "mig": {"nvidia.com/mig-3g.40gb": 1},
    "hami": {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 25, "nvidia.com/gpumem-percentage": 25},
}
SECURE = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
          "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}


def pod(name: str, *, limits: dict[str, Any], requests: dict[str, Any] | None = None,
        labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
        namespace: str = "ml") -> dict[str, Any]:
    resources: dict[str, Any] = {"limits": dict(limits)}
    if requests:
        resources["requests"] = dict(requests)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {}),
                         "annotations": dict(annotations or {})},
            "spec": {"restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                                     "securityContext": dict(SECURE), "resources": resources}]}}


def training_pod(mode: str, *, size: int = 2, cpu: str = "8", **labels: str) -> dict[str, Any]:
    """One pod of a gang: the Job's template carries Kueue's pod-group label and count, because inside a
    vCluster only the pods reach the host (see steps/kueue.py)."""
    return pod("train-0", limits={**GPU[mode], "cpu": cpu, "memory": "64Gi"},
               labels={"kueue.x-k8s.io/pod-group-name": "train", **labels},
               annotations={"kueue.x-k8s.io/pod-group-total-count": str(size)})


def inference_pod(mode: str, **labels: str) -> dict[str, Any]:
    """vLLM's pod: GPU limit, cpu/memory requests and deliberately no memory limit."""
    return pod("chat-7d9f-abcde", limits=dict(GPU[mode]), requests={"cpu": "4", "memory": "32Gi"},
               labels={"app": "chat", **labels})


def system_pod() -> dict[str, Any]:
    return pod("coredns-6d8f-xyz", limits={"memory": "170Mi"}, requests={"cpu": "20m", "memory": "64Mi"},
               labels={"k8s-app": "kube-dns"}, namespace="kube-system")
