"""kmock's Kubernetes API emulator, served from a background thread for our synchronous client.

kmock is asyncio-based; the official `kubernetes` client blocks. The emulator therefore runs its own
event loop in a thread and the test talks to it over real HTTP on 127.0.0.1, exactly as the backend
talks to a real API server.

Three gaps of the emulator are bridged here, and only these (docs/kubernetes-backend.md lists what the
emulator still cannot prove):
- server-side apply creates a missing object (kmock answers a PATCH to a missing object with 404);
- paths of Namespace objects themselves (/api/v1/namespaces/<name>) are read by kmock as "inside
  namespace <name>"; they are parsed as the `namespaces` resource instead;
- the Eviction subresource (POST /api/v1/namespaces/<ns>/pods/<name>/eviction) is served the way the
  API server serves it: the pod is deleted only when every PodDisruptionBudget selecting it allows one
  more disruption, otherwise 429 with the API server's message (the disruption controller's
  `disruptionsAllowed`, computed here on the spot from the pods that are Running and not terminating).
"""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any

import kmock
from kmock._internal import parsing

APPLY = "application/apply-patch+yaml"
_NAMESPACE_PATH = re.compile(r"^/api/v1/namespaces(?:/([^/]+))?/?$")
_original_parse_path = parsing.parse_path


def _parse_path(path: str) -> parsing.ParsedPath:
    match = _NAMESPACE_PATH.match(path)
    if match:
        return parsing.ParsedPath(group="", version="v1", plural="namespaces", namespace=None, name=match.group(1))
    return _original_parse_path(path)


PDB_VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels + matchExpressions In/NotIn/Exists/DoesNotExist) against labels."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _percent_or_int(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = int(value[:-1]) * total
        return -(-share // 100) if round_up else share // 100
    return int(value)


def disruptions_allowed(pdb: dict[str, Any], pods: list[dict[str, Any]]) -> int:
    """What the disruption controller would publish as status.disruptionsAllowed for these pods."""
    spec = pdb.get("spec") or {}
    selected = [p for p in pods if _selects(spec.get("selector") or {}, (p.get("metadata") or {}).get("labels") or {})]
    healthy = sum(1 for p in selected if (p.get("status") or {}).get("phase") == "Running"
                  and not (p.get("metadata") or {}).get("deletionTimestamp"))
    expected = len(selected)
    if "minAvailable" in spec:
        return healthy - _percent_or_int(spec["minAvailable"], expected, round_up=True)
    if "maxUnavailable" in spec:
        return _percent_or_int(spec["maxUnavailable"], expected, round_up=True) - (expected - healthy)
    return expected


class SSAEmulator(kmock.KubernetesEmulator):  # type: ignore[misc]
    async def _evict(self, request: Any) -> Any:
        from aiohttp import web
        from kmock._internal.k8s import KubernetesError, KubernetesObjectNotFoundError

        async with self._lock:
            pod_key = next((key for key in self._objects
                            if key[0].plural == "pods" and key[1] == request.namespace and key[2] == request.name
                            and not self._objects[key].deleted), None)
            if pod_key is None:
                raise KubernetesObjectNotFoundError()
            pod = self._objects[pod_key].raw
            pods = [obj.raw for key, obj in self._objects.items()
                    if key[0].plural == "pods" and key[1] == request.namespace and not obj.deleted]
            labels = (pod.get("metadata") or {}).get("labels") or {}
            for key, obj in self._objects.items():
                if key[0].plural != "poddisruptionbudgets" or key[1] != request.namespace or obj.deleted:
                    continue
                pdb = obj.raw
                if not _selects((pdb.get("spec") or {}).get("selector") or {}, labels):
                    continue
                if disruptions_allowed(pdb, pods) <= 0:
                    raise KubernetesError(status=429, reason="TooManyRequests", message=PDB_VIOLATION,
                                          details={"causes": [{"reason": "DisruptionBudget", "message":
                                                   f"The disruption budget {key[2]} needs more healthy pods"}]})
            self._objects[pod_key].delete()
            await self._buses[pod_key[0]].put({"type": "DELETED", "object": pod})
        return web.json_response({"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201},
                                 status=201)

    async def _handle(self, request: Any) -> Any:
        if request.subresource == "eviction" and str(request.method) in {"POST", "method.POST"}:
            return await self._evict(request)
        content_type = {k.lower(): v for k, v in request.headers.items()}.get("content-type", "")
        if (
            request.resource is not None
            and request.name is not None
            and str(request.method) in {"PATCH", "method.PATCH"}
            and content_type.startswith(APPLY)
            and isinstance(request.data, dict)
        ):
            key = (request.resource, request.namespace, request.name)
            async with self._lock:
                if key not in self._objects:
                    self._objects[key] = {}
                elif self._objects[key].deleted:
                    self._objects[key].create({})
        return await super()._handle(request)


# Kinds the backend may ask about, declared so discovery answers like a real server's.
RESOURCES: dict[str, tuple[str, bool]] = {
    "v1/namespaces": ("Namespace", False),
    "v1/resourcequotas": ("ResourceQuota", True),
    "v1/limitranges": ("LimitRange", True),
    "v1/serviceaccounts": ("ServiceAccount", True),
    "v1/configmaps": ("ConfigMap", True),
    "rbac.authorization.k8s.io/v1/roles": ("Role", True),
    "rbac.authorization.k8s.io/v1/rolebindings": ("RoleBinding", True),
    "kueue.x-k8s.io/v1beta2/clusterqueues": ("ClusterQueue", False),
    "kueue.x-k8s.io/v1beta2/localqueues": ("LocalQueue", True),
    "kueue.x-k8s.io/v1beta2/resourceflavors": ("ResourceFlavor", False),
    "cilium.io/v2/ciliumnetworkpolicies": ("CiliumNetworkPolicy", True),
    "kyverno.io/v1/policies": ("Policy", True),
    "source.toolkit.fluxcd.io/v1/helmrepositories": ("HelmRepository", True),
    "source.toolkit.fluxcd.io/v1/ocirepositories": ("OCIRepository", True),
    "helm.toolkit.fluxcd.io/v2/helmreleases": ("HelmRelease", True),
}


def _reference_crds() -> dict[str, tuple[str, bool]]:
    """Every CRD version in the upstream reference index, so a full reconcile finds what it applies."""
    import json

    from tests.support.services import REFERENCE_DIR

    index = REFERENCE_DIR / "crds" / "index.json"
    if not index.is_file():
        return {}
    found: dict[str, tuple[str, bool]] = {}
    for crd in json.loads(index.read_text()):
        for version in crd.get("versions", []):
            if version.get("served"):
                found[f"{crd['group']}/{version['name']}/{crd['plural']}"] = (crd["kind"], crd["scope"] == "Namespaced")
    return found


RESOURCES.update(_reference_crds())
RESOURCES.update({
    "rbac.authorization.k8s.io/v1/clusterroles": ("ClusterRole", False),
    "rbac.authorization.k8s.io/v1/clusterrolebindings": ("ClusterRoleBinding", False),
    "scheduling.k8s.io/v1/priorityclasses": ("PriorityClass", False),
    "networking.k8s.io/v1/networkpolicies": ("NetworkPolicy", True),
    "v1/secrets": ("Secret", True),
    # Read by `gpufleet doctor` (tests/kube/test_doctor.py).
    "v1/nodes": ("Node", False),
    "v1/services": ("Service", True),
    "apps/v1/deployments": ("Deployment", True),
    "apiextensions.k8s.io/v1/customresourcedefinitions": ("CustomResourceDefinition", False),
    "admissionregistration.k8s.io/v1/mutatingwebhookconfigurations": ("MutatingWebhookConfiguration", False),
    "karpenter.k8s.aws/v1/ec2nodeclasses": ("EC2NodeClass", False),
    # Node health remediation (scheduling.nodehealth) and pending explanations (scheduling.pending).
    "v1/pods": ("Pod", True),
    "v1/events": ("Event", True),
    "batch/v1/jobs": ("Job", True),
    "policy/v1/poddisruptionbudgets": ("PodDisruptionBudget", True),
})


class EmulatorThread:
    """Start/stop the emulator and its HTTP server on a loopback port in a thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.emulator: Any = None
        self.url = ""
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="kmock", daemon=True)
        self._error: BaseException | None = None

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._serve())
        except BaseException as exc:  # surfaced by start()
            self._error = exc
            self.ready.set()
        finally:
            self.loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with SSAEmulator() as emulator, kmock.Server(emulator, host="127.0.0.1") as server:
            for key, (kind, namespaced) in RESOURCES.items():
                emulator.resources[key] = kmock.ResourceInfo(
                    kind=kind, namespaced=namespaced, verbs={"get", "list", "patch", "delete"}
                )
            self.emulator = emulator
            self.url = str(server.url).rstrip("/")
            self.ready.set()
            await self._stop.wait()

    def start(self) -> EmulatorThread:
        parsing.parse_path = _parse_path
        self._thread.start()
        if not self.ready.wait(15):
            raise TimeoutError("kmock did not start")
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        parsing.parse_path = _original_parse_path

    def call(self, fn: Any) -> Any:
        """Run `fn()` on the emulator's loop (to change reactions while no request is in flight)."""

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)
