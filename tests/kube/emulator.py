"""kmock's Kubernetes API emulator, served from a background thread for our synchronous client.

kmock is asyncio-based; the official `kubernetes` client blocks. The emulator therefore runs its own
event loop in a thread and the test talks to it over real HTTP on 127.0.0.1, exactly as the backend
talks to a real API server.

Two gaps of the emulator are bridged here, and only these (docs/kubernetes-backend.md lists what the
emulator still cannot prove):
- server-side apply creates a missing object (kmock answers a PATCH to a missing object with 404);
- paths of Namespace objects themselves (/api/v1/namespaces/<name>) are read by kmock as "inside
  namespace <name>"; they are parsed as the `namespaces` resource instead.
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


class SSAEmulator(kmock.KubernetesEmulator):  # type: ignore[misc]
    async def _handle(self, request: Any) -> Any:
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
