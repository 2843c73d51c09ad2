"""Helpers over rendered manifests (plain dicts): identity, ordering, canonical YAML, digests."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from .yaml_emit import emit

Manifest = dict[str, Any]

# Apply order: things others live in or refer to come first (namespaces, CRD-defined classes and
# flavors), workloads' policies next, the vCluster release last. Teardown runs it backwards.
KIND_ORDER = [
    "Namespace",
    "ResourceFlavor",
    "Cohort",
    "Topology",
    "WorkloadPriorityClass",
    "PriorityClass",
    "CiliumClusterwideNetworkPolicy",
    "ClusterPolicy",
    "NodePool",
    "NodeOverlay",
    "ResourceQuota",
    "LimitRange",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterQueue",
    "Queue",
    "LocalQueue",
    "CiliumNetworkPolicy",
    "NetworkPolicy",
    "Policy",
    # The vCluster's serving CA (an ExternalSecret) before the release that mounts it.
    "ExternalSecret",
    "HelmRepository",
    "OCIRepository",
    "HelmRelease",
    # Platform-owned inference endpoints: the scaled Deployment exists before its autoscaler.
    "Service",
    "Deployment",
    "VMServiceScrape",
    "ScaledObject",
]


# Objects that install CRDs (a HelmRelease's chart, and the sources it is fetched from): on a fresh cluster they
# must be applied -- and their CRDs Established -- before any custom resource of those CRDs (docs/compatibility.md,
# "B2 bootstrap order"). (group, kind).
INSTALLER_KINDS = frozenset({
    ("helm.toolkit.fluxcd.io", "HelmRelease"),
    ("source.toolkit.fluxcd.io", "HelmRepository"),
    ("source.toolkit.fluxcd.io", "OCIRepository"),
})
# On a HelmRelease: the CRDs its chart installs, comma-separated (`<plural>.<group>`), so whoever applies the
# tree (the kube backend, `gpufleet doctor`) knows what to wait for without knowing the chart.
INSTALLS_CRDS = "gpufleet.io/installs-crds"


def is_installer(manifest: Mapping[str, Any]) -> bool:
    api_version = str(manifest.get("apiVersion", ""))
    return (api_version.rpartition("/")[0], str(manifest.get("kind", ""))) in INSTALLER_KINDS


def installed_crds(manifests: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """CRD name -> the HelmRelease (namespace/name) whose chart installs it, from INSTALLS_CRDS."""
    found: dict[str, str] = {}
    for m in manifests:
        meta = m.get("metadata") or {}
        for crd in str((meta.get("annotations") or {}).get(INSTALLS_CRDS, "")).split(","):
            if crd.strip():
                found[crd.strip()] = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    return found

@dataclass(frozen=True, order=True)
class ObjectRef:
    api_version: str
    kind: str
    namespace: str
    name: str

    @property
    def group(self) -> str:
        return self.api_version.split("/")[0] if "/" in self.api_version else ""

    @property
    def key(self) -> str:
        return f"{self.kind}.{self.group or 'core'}/{self.namespace or '-'}/{self.name}"

    def __str__(self) -> str:
        return self.key


def ref(manifest: Mapping[str, Any]) -> ObjectRef:
    meta = manifest.get("metadata", {})
    return ObjectRef(
        api_version=str(manifest.get("apiVersion", "")),
        kind=str(manifest.get("kind", "")),
        namespace=str(meta.get("namespace", "") or ""),
        name=str(meta.get("name", "")),
    )


def kind_rank(kind: str) -> int:
    try:
        return KIND_ORDER.index(kind)
    except ValueError:
        return len(KIND_ORDER)


def sort_manifests(manifests: Iterable[Manifest]) -> list[Manifest]:
    """Apply order, then a stable order by identity, so output never depends on input order."""
    return sorted(manifests, key=lambda m: (kind_rank(str(m.get("kind"))), ref(m)))


# libyaml's emitter (PyYAML's manylinux wheels bundle it) is several times faster than the pure-Python
# one, and serialising is most of a cold reconcile. Both emit the same YAML for what we render; they
# differ only in how they fold very long double-quoted strings with tabs, which manifests do not carry.
class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    pass


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    # Multi-line strings (scripts, embedded YAML) read far better as block literals in a git diff.
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str_presenter)


_Dumper.ignore_aliases = lambda self, data: True  # type: ignore[method-assign]


def content_key(manifest: Mapping[str, Any]) -> bytes:
    """A short key for a manifest's exact content: values, their types and key order.

    `repr` of the JSON-like values manifests hold (dict, list, str, int, float, bool, None) is
    unambiguous ('1' vs 1 vs True vs 1.0) and keeps dict order, which the YAML keeps too.
    """
    return hashlib.blake2b(repr(manifest).encode(), digest_size=16).digest()


# Serialising is the dominant cost of a no-op reconcile (PyYAML's emitter is pure Python): a fleet
# renders the same objects every pass, so remember the YAML of each distinct content (bounded).
_YAML_CACHE: dict[bytes, str] = {}
_YAML_CACHE_MAX = 100_000


def to_yaml(manifest: Mapping[str, Any]) -> str:
    """Canonical YAML for one object: key order as rendered, no aliases, stable across runs."""
    key = content_key(manifest)
    text = _YAML_CACHE.get(key)
    if text is None:
        # The direct emitter writes the same bytes ~10x faster; PyYAML for anything it does not write.
        text = emit(manifest, _Dumper)
        if text is None:
            text = yaml.dump(manifest, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)
        if len(_YAML_CACHE) >= _YAML_CACHE_MAX:
            _YAML_CACHE.clear()  # cheaper than LRU bookkeeping on every hit; refills in one pass
        _YAML_CACHE[key] = text
    return text


def to_yaml_stream(manifests: Iterable[Manifest]) -> str:
    return "".join(f"---\n{to_yaml(m)}" for m in manifests)


def digest(manifests: Iterable[Manifest]) -> str:
    return hashlib.sha256(to_yaml_stream(manifests).encode()).hexdigest()


MANAGED_BY = {"app.kubernetes.io/managed-by": "gpufleet"}
TENANT_LABEL = "gpufleet.io/tenant"
OWNER_LABEL = "gpufleet.io/owner"


def tree_is_safe(tree: str) -> bool:
    """A cluster's folder in the GitOps repository that the backend can write: relative, no empty, '.' or '..'
    segment, and no segment starting with '.' (`.git`, `.git/hooks`: git's own files). The one rule; the
    write paths check it through scheduling.validation.gitops_path before a row is ever stored."""
    return not (tree.startswith("/") or tree.endswith("/")
                or any(part in ("", ".", "..") or part.startswith(".") for part in tree.split("/")))


@dataclass(frozen=True)
class Owner:
    """Who owns a set of rendered objects: one tenant, or the platform (cluster-wide objects), on one host
    cluster. `tree` is that cluster's folder in the GitOps repository (`clusters/<name>`); the owner string
    carries it as a prefix (`clusters/train/tenant:acme`, `clusters/train/platform`). No tree is the root
    layout of a single-cluster installation from before clusters (`tenant:acme`, `platform`). The labels do
    not depend on the tree: the same tenant's objects on two clusters are labelled alike."""

    kind: str  # "tenant" | "platform"
    name: str = ""
    tree: str = ""

    @classmethod
    def parse(cls, text: str) -> Owner:
        tree, _, local = text.rpartition("/")
        if tree and not tree_is_safe(tree):
            raise ValueError(f"not an owner: {text!r} (bad cluster folder {tree!r})")
        if local == "platform":
            return cls("platform", tree=tree)
        kind, _, name = local.partition(":")
        if kind != "tenant" or not name or name.startswith("."):
            raise ValueError(f"not an owner: {text!r} (expected '[<tree>/]platform' or '[<tree>/]tenant:<slug>')")
        return cls("tenant", name, tree)

    def __str__(self) -> str:
        local = "platform" if self.kind == "platform" else f"tenant:{self.name}"
        return f"{self.tree}/{local}" if self.tree else local

    @property
    def path(self) -> str:
        """Folder in the GitOps repository."""
        local = "platform" if self.kind == "platform" else f"tenants/{self.name}"
        return f"{self.tree}/{local}" if self.tree else local

    @property
    def labels(self) -> dict[str, str]:
        """Labels that mark (and select, for pruning) every object this owner has."""
        if self.kind == "platform":
            return {**MANAGED_BY, OWNER_LABEL: "platform"}
        return {**MANAGED_BY, TENANT_LABEL: self.name}
