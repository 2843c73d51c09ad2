"""One Kubernetes client per host cluster, behind the ordinary backend interface.

The owner string names the cluster (its tree prefix: `clusters/train/tenant:acme`), so `apply(owner, manifests)`
goes to that cluster's API. Clients are built on first use from a reference to the credentials -- a kubeconfig
file the deployment mounts (from a Secret), or the pod's own service account for the cluster gpufleet runs in --
never from credentials stored in the database.

A cluster that does not answer at all (UnreachableError: refused, timed out, no route) is remembered as down
for the rest of this backend's life (one fleet pass, one task): its other owners fail fast with the same reason
instead of each waiting for its own timeout, and every other cluster carries on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..backend import ApplyResult, Backend
from ..errors import PermanentError, TransientError, UnreachableError
from ..manifests import Manifest, ObjectRef, Owner

if TYPE_CHECKING:
    from .backend import KubeAccess


class ClusterUnreachable(UnreachableError):
    reason = "ClusterUnreachable"


class PerClusterBackend:
    name = "kubernetes"
    ordered_teardown = True

    def __init__(self, clusters: dict[str, Callable[[], Backend]], *, names: dict[str, str] | None = None,
                 local_tree: str = "") -> None:
        """`clusters`: tree -> a function building that cluster's backend (called once, on first use).
        `names`: tree -> cluster name, for messages. `local_tree`: the cluster gpufleet itself runs in (where
        the Secrets it reads live)."""
        self._factories = dict(clusters)
        self._names = dict(names or {})
        self._local = f"{local_tree}/platform" if local_tree else "platform"
        self._backends: dict[str, Backend] = {}
        self.down: dict[str, str] = {}

    def _label(self, tree: str) -> str:
        return self._names.get(tree) or tree or "the default cluster"

    def backend_for(self, owner: str) -> tuple[str, Backend]:
        tree = Owner.parse(owner).tree
        if tree in self.down:
            raise ClusterUnreachable(f"cluster {self._label(tree)} is unreachable: {self.down[tree]}", delay=30)
        if tree not in self._backends:
            factory = self._factories.get(tree)
            if factory is None:
                raise PermanentError(f"no Kubernetes API is configured for {self._label(tree)} (owner {owner!r})")
            self._backends[tree] = factory()
        return tree, self._backends[tree]

    def _call(self, owner: str, fn: Callable[[Backend], Any]) -> Any:
        tree, backend = self.backend_for(owner)
        try:
            return fn(backend)
        except UnreachableError as exc:
            self.down[tree] = str(exc)
            raise ClusterUnreachable(f"cluster {self._label(tree)} is unreachable: {exc}", delay=exc.delay) from exc
        except TransientError as exc:
            if _no_answer(exc):
                self.down[tree] = str(exc)
                raise ClusterUnreachable(f"cluster {self._label(tree)} is unreachable: {exc}",
                                         delay=exc.delay) from exc
            raise

    def apply(self, owner: str, manifests: list[Manifest], *, message: str = "") -> ApplyResult:
        return self._call(owner, lambda b: b.apply(owner, manifests, message=message))  # type: ignore[no-any-return]

    def owned(self, owner: str) -> list[str]:
        return self._call(owner, lambda b: b.owned(owner))  # type: ignore[no-any-return]

    def owned_refs(self, owner: str) -> list[ObjectRef]:
        return self._call(owner, lambda b: b.owned_refs(owner))  # type: ignore[attr-defined,no-any-return]

    def prune(self, owner: str, select: Callable[[ObjectRef], bool] | None = None) -> ApplyResult:
        return self._call(owner, lambda b: b.prune(owner, select))  # type: ignore[attr-defined,no-any-return]

    def read_secret(self, namespace: str, name: str) -> dict[str, str] | None:
        """Secrets gpufleet reads (OpenBao's Kubernetes auth) live on the cluster it runs in: the root owner."""
        return self._call(self._local, lambda b: b.read_secret(namespace, name))  # type: ignore[attr-defined,no-any-return]

    def read(self, path: str) -> dict[str, Any] | None:
        return self._call(self._local, lambda b: b.read(path))  # type: ignore[attr-defined,no-any-return]


def _no_answer(exc: TransientError) -> bool:
    """The Kubernetes backend reports transport failures (refused, reset, timed out) as TransientError with
    the exception's type in the message; HTTP answers (409, 429, 5xx) carry 'HTTP <status>'."""
    return "HTTP " not in str(exc)


def kubeconfig_path(reference: str, directory: str) -> str:
    """Where the kubeconfig a cluster's `kubeconfig_secret` names is mounted: an absolute path as is, else the
    Secret's name under `directory` (the chart mounts each cluster Secret as <directory>/<name>/kubeconfig)."""
    if reference.startswith("/"):
        return reference
    if not reference or "/" in reference or reference.startswith("."):
        raise PermanentError(f"kubeconfig reference {reference!r} must be an absolute path or a Secret name")
    return f"{directory.rstrip('/')}/{reference}/kubeconfig"


def from_references(clusters: Iterable[tuple[str, str, str, str]], access: KubeAccess, *,
                    local_tree: str = "") -> PerClusterBackend:
    """(name, tree, kube_api, kubeconfig reference) per cluster. No reference: `access` (the platform's
    kubeconfig or the pod's service account: the cluster gpufleet runs in); `kube_api`, when set, overrides
    the server URL."""
    from .backend import KubernetesBackend

    directory = access.cluster_kubeconfig_dir
    factories: dict[str, Callable[[], Backend]] = {}
    names: dict[str, str] = {}

    def build(reference: str, kube_api: str) -> Callable[[], Backend]:
        def make() -> Backend:
            if not reference:
                backend = KubernetesBackend.from_access(access)
            else:
                from kubernetes import config

                try:
                    api = config.new_client_from_config(config_file=kubeconfig_path(reference, directory))
                except (config.ConfigException, OSError) as exc:
                    raise PermanentError(f"cannot load the kubeconfig {reference!r}: {exc}") from exc
                backend = KubernetesBackend(api, field_manager=access.field_manager or "gpufleet")
            if kube_api:
                backend.api.configuration.host = kube_api
            return backend  # type: ignore[return-value]

        return make

    for name, tree, kube_api, reference in clusters:
        factories[tree] = build(reference, kube_api)
        names[tree] = name
    return PerClusterBackend(factories, names=names, local_tree=local_tree)
