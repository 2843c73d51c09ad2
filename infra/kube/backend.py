"""Kubernetes backend: server-side apply (fieldManager=gpufleet), prune by owner label, ordered.

Same interface as the GitOps backend (`infra.backend.Backend`). Apply runs in `KIND_ORDER`
(namespaces and cluster-wide classes before what lives in them or refers to them); pruning runs
backwards, one kind rank at a time, and does not go on to a lower rank while objects of a higher
one still exist (finalizers): the namespace is deleted last, after everything in it is gone.

Failures are sorted for the task: a conflict, throttling, a 5xx or a timeout is a `TransientError`
(the task retries with backoff); a rejected object (400, 422) or missing permission is a
`PermanentError` carrying the API server's own message, which lands on the tenant's conditions.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException

from ..backend import ApplyResult
from ..errors import PermanentError, TransientError
from ..manifests import (
    INSTALLS_CRDS,
    Manifest,
    ObjectRef,
    Owner,
    installed_crds,
    is_installer,
    kind_rank,
    ref,
    sort_manifests,
)
from .resources import PRUNE_KINDS, Resource, discovery_path, parse_resource_list

APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
TRANSIENT_STATUSES = {409, 429, 500, 502, 503, 504}
# What the server needs to finish deleting (finalizers) before the next rank may go.
WAIT_DELAY = 5.0
# A HelmRelease installs its chart's CRDs asynchronously (helm-controller); until they are Established the
# custom resources of those CRDs wait, and the task retries after this long.
CRD_WAIT_DELAY = 15.0
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"


def bootstrap_order(manifests: list[Manifest]) -> list[Manifest]:
    """Namespaces, then what installs CRDs (sources, and the HelmReleases that say which CRDs they install),
    then everything else -- each part in KIND_ORDER. A tenant's vCluster release installs no CRD and stays
    last, after the quotas and policies its pods must meet."""

    def stage(m: Manifest) -> int:
        if m.get("kind") == "Namespace":
            return 0
        annotations = (m.get("metadata") or {}).get("annotations") or {}
        if is_installer(m) and (m.get("kind") != "HelmRelease" or INSTALLS_CRDS in annotations):
            return 1
        return 2

    return sorted(manifests, key=stage)  # stable: KIND_ORDER within each stage


def status_message(status: int, body: Any, what: str) -> str:
    """The API server's own words (a Status object's `message`), prefixed with what we tried."""
    message = ""
    if isinstance(body, dict):
        message = str(body.get("message") or body.get("reason") or "")
    return f"{what}: HTTP {status}: {message or 'no message'}"


def raise_for_status(status: int, body: Any, what: str, retry_after: str | None = None) -> None:
    if 200 <= status < 300:
        return
    message = status_message(status, body, what)
    if status in TRANSIENT_STATUSES:
        delay = 5.0
        if retry_after and retry_after.isdigit():
            delay = max(1.0, float(retry_after))
        raise TransientError(message, delay=delay)
    raise PermanentError(message)



@dataclass(frozen=True)
class KubeAccess:
    """How to reach the Kubernetes API. infra reads no setting itself: the platform fills this in from its own
    (GPUFLEET_KUBECONFIG, GPUFLEET_KUBE_CONTEXT, GPUFLEET_KUBE_FIELD_MANAGER, GPUFLEET_CLUSTER_KUBECONFIG_DIR)."""

    kubeconfig: str = ""  # empty: the pod's service account
    context: str = ""  # empty: the kubeconfig's current context
    field_manager: str = "gpufleet"
    # Where each other host cluster's kubeconfig Secret is mounted, as <dir>/<secret>/kubeconfig (clusters.py).
    cluster_kubeconfig_dir: str = "/var/run/gpufleet/clusters"


class KubernetesBackend:
    name = "kubernetes"
    # The teardown may (and should) run step by step: the API really deletes things in order.
    ordered_teardown = True

    def __init__(
        self,
        api_client: ApiClient,
        *,
        field_manager: str = "gpufleet",
        timeout: tuple[float, float] = (5.0, 30.0),
        prune_kinds: Iterable[tuple[str, str]] = PRUNE_KINDS,
    ) -> None:
        self.api = api_client
        self.field_manager = field_manager
        self.timeout = timeout
        self.prune_kinds = tuple(prune_kinds)
        # groupVersion -> kind -> Resource; None when the server does not serve that groupVersion.
        self._discovered: dict[str, dict[str, Resource] | None] = {}

    @classmethod
    def from_access(cls, access: KubeAccess) -> KubernetesBackend:
        """`access.kubeconfig` (+ its context) when set, else the pod's service account."""
        from kubernetes import config

        try:
            if access.kubeconfig:
                api = config.new_client_from_config(config_file=access.kubeconfig, context=access.context or None)
            else:
                configuration = Configuration()
                config.load_incluster_config(client_configuration=configuration)
                api = ApiClient(configuration)
        except config.ConfigException as exc:
            raise PermanentError(f"cannot configure the Kubernetes client: {exc}") from exc
        return cls(api, field_manager=access.field_manager or "gpufleet")

    # --- HTTP -----------------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> tuple[int, Any, str | None]:
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        what = f"{method} {path}"
        try:
            request = self.api.param_serialize(
                method, path, query_params=query or [], header_params=headers, body=body,
                auth_settings=["BearerToken"],
            )
            response = self.api.call_api(*request, _request_timeout=self.timeout)
            raw = response.read()
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # timeouts, refused, reset
            raise TransientError(f"{what}: {type(exc).__name__}: {exc}") from exc
        except ApiException as exc:  # the client's own transport failures (TLS) come as status 0
            raise TransientError(f"{what}: {exc.reason}") from exc
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            data = {"message": raw[:500].decode(errors="replace")}
        return response.status, data, response.getheader("Retry-After")

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        status, data, retry_after = self._request(method, path, **kwargs)
        raise_for_status(status, data, f"{method} {path}", retry_after)
        return data

    # --- discovery ------------------------------------------------------------------------------

    def _group_version(self, api_version: str) -> dict[str, Resource] | None:
        if api_version not in self._discovered:
            path = discovery_path(api_version)
            status, data, retry_after = self._request("GET", path)
            if status == 404:
                self._discovered[api_version] = None
            else:
                raise_for_status(status, data, f"GET {path}", retry_after)
                self._discovered[api_version] = parse_resource_list(api_version, data)
        return self._discovered[api_version]

    def resource(self, api_version: str, kind: str) -> Resource | None:
        served = self._group_version(api_version)
        return None if served is None else served.get(kind)

    def _require(self, obj: ObjectRef) -> Resource:
        found = self.resource(obj.api_version, obj.kind)
        if found is None:
            raise PermanentError(f"the cluster does not serve {obj.kind} in {obj.api_version} (CRD not installed?)")
        return found

    # --- the Backend interface ------------------------------------------------------------------

    def apply(self, owner: str, manifests: list[Manifest], *, message: str = "") -> ApplyResult:
        own = Owner.parse(owner)
        desired = sort_manifests(manifests)
        keys = [ref(m) for m in desired]
        if len(set(keys)) != len(keys):
            raise PermanentError("two rendered objects share one identity")
        for manifest in desired:
            labels = (manifest.get("metadata") or {}).get("labels") or {}
            missing = {k: v for k, v in own.labels.items() if labels.get(k) != v}
            if missing:
                # Pruning finds our objects by these labels; an unlabelled object would leak forever.
                raise PermanentError(f"{ref(manifest)} lacks the owner labels {missing}")
        existing = self._owned_objects(own, extra_kinds={(k.api_version, k.kind) for k in keys})
        # Identity without the version: one object is served under every version of its group.
        found = {identity(obj): item for obj, item in existing.items()}
        wanted = {identity(obj) for obj in keys}
        created: list[str] = []
        updated: list[str] = []
        unchanged: list[str] = []
        installs = installed_crds(desired)
        waiting: list[str] = []
        for manifest in bootstrap_order(desired):
            obj = ref(manifest)
            pending = self._crds_pending(obj, installs)
            if pending:
                waiting.append(f"{obj.key} (CRD {', '.join(pending)})")
                continue
            before = found.get(identity(obj))
            after = self._server_side_apply(obj, manifest)
            if before is None:
                created.append(obj.key)
            elif _changed(before, after):
                updated.append(obj.key)
            else:
                unchanged.append(obj.key)
        if waiting:
            # Everything else is applied; what waits is retried, never a PermanentError: on a fresh cluster the
            # CRDs come with the releases just applied (docs/compatibility.md, "B2 bootstrap order").
            raise TransientError("applied all but " + "; ".join(waiting) + ": waiting for the CRDs their "
                                 "HelmReleases install to be Established", delay=CRD_WAIT_DELAY)
        pruned = self._prune([obj for obj in existing if identity(obj) not in wanted])
        return ApplyResult(created=created, updated=updated, unchanged=unchanged, pruned=pruned)

    def _crds_pending(self, obj: ObjectRef, installs: dict[str, str]) -> list[str]:
        """The CRDs of `obj`'s group that a HelmRelease of this apply installs and that are not Established yet
        (empty when the kind is served, or no release of ours installs it: then `_require` says so as before)."""
        if self.resource(obj.api_version, obj.kind) is not None:
            return []
        ours = sorted(name for name in installs if name.partition(".")[2] == obj.group)
        if not ours:
            return []
        pending = [name for name in ours if not self.crd_established(name)]
        if not pending:  # Established since discovery was read: read it again
            self._discovered.pop(obj.api_version, None)
            if self.resource(obj.api_version, obj.kind) is not None:
                return []
            return [f"{name} established but {obj.kind} not served in {obj.api_version}" for name in ours]
        return [f"{name} from HelmRelease {installs[name]}" for name in pending]

    def crd_established(self, name: str) -> bool:
        """The CRD exists and its Established condition is True (the API server serves its kinds)."""
        status, data, retry_after = self._request("GET", CRD_PATH + name)
        if status == 404:
            return False
        raise_for_status(status, data, f"GET {CRD_PATH}{name}", retry_after)
        conditions = ((data or {}).get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    def prune(self, owner: str, select: Callable[[ObjectRef], bool] | None = None) -> ApplyResult:
        """Delete the owner's objects that `select` picks (all when None), in reverse KIND_ORDER.

        The ordered teardown deletes with this instead of re-applying a shrinking desired set: a
        deletion step never writes (so an object the API now rejects cannot block a teardown).
        """
        existing = self._owned_objects(Owner.parse(owner))
        return ApplyResult(pruned=self._prune([obj for obj in existing if select is None or select(obj)]))

    def read(self, path: str) -> dict[str, Any] | None:
        """GET one API path (an object or a list): the body, or None when the server answers 404.
        Read-only; used by `gpufleet doctor` to inspect a cluster's configuration."""
        status, data, retry_after = self._request("GET", path)
        if status == 404:
            return None
        raise_for_status(status, data, f"GET {path}", retry_after)
        return data if isinstance(data, dict) else {}

    def read_secret(self, namespace: str, name: str) -> dict[str, str] | None:
        """A Secret's decoded data, or None when it does not exist (yet)."""
        path = f"/api/v1/namespaces/{namespace}/secrets/{name}"
        status, data, retry_after = self._request("GET", path)
        if status == 404:
            return None
        raise_for_status(status, data, f"GET {path}", retry_after)
        try:
            return {k: base64.b64decode(v).decode() for k, v in (data.get("data") or {}).items()}
        except (ValueError, UnicodeDecodeError) as exc:
            raise PermanentError(f"GET {path}: undecodable secret data: {exc}") from exc

    def owned(self, owner: str) -> list[str]:
        return sorted(obj.key for obj in self._owned_objects(Owner.parse(owner)))

    def owned_refs(self, owner: str) -> list[ObjectRef]:
        return sorted(self._owned_objects(Owner.parse(owner)))

    # --- internals ------------------------------------------------------------------------------

    def _server_side_apply(self, obj: ObjectRef, manifest: Manifest) -> dict[str, Any]:
        resource = self._require(obj)
        path = resource.object_path(obj.name, obj.namespace if resource.namespaced else "")
        # force=true: gpufleet is the source of truth for the fields it renders; another manager's
        # conflicting value is taken over instead of failing the whole reconcile.
        query = [("fieldManager", self.field_manager), ("force", "true")]
        data = self._call("PATCH", path, query=query, body=manifest, content_type=APPLY_CONTENT_TYPE)
        return data if isinstance(data, dict) else {}

    def _owned_objects(
        self, own: Owner, extra_kinds: set[tuple[str, str]] | None = None
    ) -> dict[ObjectRef, dict[str, Any]]:
        selector = ",".join(f"{k}={v}" for k, v in sorted(own.labels.items()))
        found: dict[ObjectRef, dict[str, Any]] = {}
        # One listing per group/kind; the version the desired manifests use wins over the allowlist's.
        versions: dict[tuple[str, str], str] = {}
        for api_version, kind in [*self.prune_kinds, *sorted(extra_kinds or set())]:
            versions[(_group(api_version), kind)] = api_version
        for (_, kind), api_version in sorted(versions.items()):
            resource = self.resource(api_version, kind)
            if resource is None:
                continue  # the cluster does not serve it, so nothing of that kind can be ours
            data = self._call("GET", resource.collection_path(), query=[("labelSelector", selector)])
            for item in data.get("items") or []:
                meta = item.get("metadata") or {}
                labels = meta.get("labels") or {}
                # Check the labels ourselves too: never prune on the strength of a selector alone.
                if any(labels.get(k) != v for k, v in own.labels.items()):
                    continue
                obj = ObjectRef(api_version, kind, str(meta.get("namespace") or ""), str(meta.get("name")))
                found[obj] = item
        return found

    def _prune(self, doomed: list[ObjectRef]) -> list[str]:
        """Delete in reverse apply order, one rank at a time, waiting for each rank to be gone."""
        pruned: list[str] = []
        by_rank: dict[int, list[ObjectRef]] = {}
        for obj in doomed:
            by_rank.setdefault(kind_rank(obj.kind), []).append(obj)
        for rank in sorted(by_rank, reverse=True):
            batch = sorted(by_rank[rank])
            for obj in batch:
                resource = self._require(obj)
                path = resource.object_path(obj.name, obj.namespace if resource.namespaced else "")
                status, data, retry_after = self._request(
                    "DELETE", path, query=[("propagationPolicy", "Foreground")]
                )
                if status != 404:  # already gone is what we wanted
                    raise_for_status(status, data, f"DELETE {path}", retry_after)
                pruned.append(obj.key)
            remaining = [obj for obj in batch if self._exists(obj)]
            if remaining and rank != min(by_rank):
                # Finalizers still run; deleting what they live in now would orphan them.
                names = ", ".join(o.key for o in remaining)
                raise TransientError(f"waiting for {names} to be deleted before pruning further", WAIT_DELAY)
        return pruned

    def _exists(self, obj: ObjectRef) -> bool:
        resource = self._require(obj)
        path = resource.object_path(obj.name, obj.namespace if resource.namespaced else "")
        status, data, retry_after = self._request("GET", path)
        if status == 404:
            return False
        raise_for_status(status, data, f"GET {path}", retry_after)
        return True


def _group(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


def identity(obj: ObjectRef) -> tuple[str, str, str, str]:
    return (obj.group, obj.kind, obj.namespace, obj.name)


def _changed(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """A real API server bumps resourceVersion only on a real change; without one, compare bodies."""
    old = str((before.get("metadata") or {}).get("resourceVersion", ""))
    new = str((after.get("metadata") or {}).get("resourceVersion", ""))
    if old and new:
        return old != new
    return json.dumps(before, sort_keys=True, default=str) != json.dumps(after, sort_keys=True, default=str)
