"""`gpufleet doctor`, per host cluster: what each registered cluster needs that the tree does not install
(issue 26 review findings F4, F5, F9, F11). Pure checks over the cluster's catalog and, when the doctor can read
that cluster, its answers through `read` (scheduling.doctor).

- F5: every GPU flavor a cluster offers has a node pool there (or nodes already carrying the flavor's labels).
- F9/F11: the CRDs of the prerequisites (scheduling.prerequisites.cluster_prerequisites) are served.
- F4: Karpenter runs with the `NodeOverlay` feature gate on wherever a MIG/HAMi pool needs NodeOverlays.

A cluster the doctor cannot read is one failed finding that says so and lists what was not checked: a partial
view never reads as a healthy cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from infra.errors import InfraError
from scheduling.nodepools import render as nodepools

from .doctor import Finding, Read, _fail, _ok, check_crd
from .inputs import ClusterSpec
from .prerequisites import COMPONENTS, KARPENTER, VM_OPERATOR, cluster_prerequisites

# Where the Karpenter chart's controller runs: the `karpenter` namespace (the platform's PLATFORM_NAMESPACES) or
# `kube-system` (Karpenter's getting-started guide).
KARPENTER_DEPLOYMENTS = (("karpenter", "karpenter"), ("kube-system", "karpenter"))
# Karpenter v1.14.1's default when neither `--feature-gates` nor FEATURE_GATES sets it
# (kubernetes-sigs/karpenter@v1.14.1:pkg/operator/options/options.go:134): NodeOverlay is off.
KARPENTER_DEFAULT_GATES = ("NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,"
                           "StaticCapacity=false,CapacityBuffer=false")
GATE = "NodeOverlay"
# What the global checks (scheduling.doctor.check_crds, check_node_overlay) already report for the cluster the
# command's kubeconfig reads: not reported twice.
LOCAL_COVERED = frozenset({name for c in (*COMPONENTS, KARPENTER, VM_OPERATOR) for name, _ in c.crds}
                          | {"nodeoverlays.karpenter.sh"})


@dataclass(frozen=True)
class Target:
    """A registered cluster as the doctor sees it: its catalog, how to read it (None: no way configured) and
    whether it is the cluster the command's own kubeconfig reads."""

    spec: ClusterSpec
    read: Read | None
    local: bool = False


def _bool(value: str) -> bool | None:
    """Go's strconv.ParseBool, which k8s.io/component-base's MapStringBool uses for each gate."""
    if value in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if value in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def parse_gates(text: str) -> dict[str, bool | None]:
    out: dict[str, bool | None] = {}
    for item in text.split(","):
        key, _, value = item.strip().partition("=")
        if key.strip():
            out[key.strip()] = _bool(value.strip())
    return out


def _flag(args: Sequence[str]) -> str | None:
    """The last `--feature-gates` on the command line (Go's flag package: one or two dashes, `=` or a space)."""
    found = None
    for i, arg in enumerate(args):
        for prefix in ("--feature-gates", "-feature-gates"):
            if arg == prefix and i + 1 < len(args):
                found = args[i + 1]
            elif arg.startswith(prefix + "="):
                found = arg[len(prefix) + 1:]
    return found


def node_overlay_gate(deployment: dict[str, Any]) -> tuple[bool | None, str]:
    """(is NodeOverlay on, where that was read). None: the Deployment does not say (valueFrom, a bad value).
    The flag wins over the environment variable, which wins over the built-in default (options.go:134)."""
    containers = ((deployment.get("spec") or {}).get("template") or {}).get("spec", {}).get("containers") or []
    container = next((c for c in containers if c.get("name") == "controller"), containers[0] if containers else {})
    text, source = KARPENTER_DEFAULT_GATES, "Karpenter's default (options.go:134)"
    for env in container.get("env") or []:
        if env.get("name") == "FEATURE_GATES":
            if "value" not in env:
                return None, "FEATURE_GATES comes from valueFrom, which the doctor does not resolve"
            text, source = env.get("value") or "", f"FEATURE_GATES={env.get('value')!r}"
    flag = _flag([*(container.get("command") or []), *(container.get("args") or [])])
    if flag is not None:
        text, source = flag, f"--feature-gates={flag}"
    gates = parse_gates(text)
    if GATE not in gates:
        # A set string without the key keeps Karpenter's default for that gate: off.
        return False, f"{source} (no {GATE}: off by default)"
    if gates[GATE] is None:
        return None, f"{source}: {GATE} has no boolean value"
    return gates[GATE], source


def check_flavor_pools(spec: ClusterSpec, read: Read | None) -> list[Finding]:
    """F5: a GPU flavor offered on a cluster without a pool there is a ResourceFlavor Kueue admits into while no
    node ever appears. The model records no static nodes (ClusterFlavor.capacity is units to sell, not nodes), so
    when the cluster can be read, nodes already carrying the flavor's labels count as its static capacity."""
    cat = spec.catalog
    out = []
    nodes: list[dict[str, Any]] | None = None
    for flavor in cat.flavors:
        check = f"pools/{spec.name}/{flavor.name}"
        pools = [p.name for p in nodepools.pools_of(flavor, cat)]
        if pools:
            out.append(_ok(check, f"flavor {flavor.name} on cluster {spec.name}: NodePool {', '.join(pools)}"))
            continue
        wanted = nodepools.flavor_node_labels(flavor)
        unread = ""
        if read is not None and nodes is None:
            try:
                nodes = (read("/api/v1/nodes") or {}).get("items", [])
            except InfraError as exc:
                nodes, unread = [], f" (its nodes could not be read: {exc})"
        static = sorted(n["metadata"]["name"] for n in nodes or []
                        if wanted.items() <= ((n.get("metadata") or {}).get("labels") or {}).items())
        if static:
            out.append(_ok(check, f"flavor {flavor.name} on cluster {spec.name}: no NodePool, static node(s) "
                                  f"{', '.join(static)}"))
            continue
        out.append(_fail(check, f"flavor {flavor.name} ({flavor.mode}) is offered on cluster {spec.name} but no "
                                f"node pool there provides it{unread}: Kueue admits its workloads and no node "
                                "ever runs them",
                         f"gpufleet nodepool create <name> --flavor {flavor.name} --cluster {spec.name} "
                         "--gpu-limit N (or stop offering it: gpufleet cluster offer)"))
    return out


def check_prerequisite_crds(spec: ClusterSpec, read: Read, *, external_secrets: bool, rule_kind: str = "",
                            skip: Iterable[str] = ()) -> list[Finding]:
    """F9/F11: the CRDs no HelmRelease of the tree installs are served on the cluster."""
    skipped = set(skip)
    out = []
    for need in cluster_prerequisites(spec.catalog, external_secrets=external_secrets, rule_kind=rule_kind):
        if need.crd in skipped:
            continue
        out.append(check_crd(
            read, f"prerequisites/{spec.name}/{need.crd}", need.crd, need.version,
            missing=f"{need.crd} is not installed on cluster {spec.name}: {need.why} are refused",
            install=f"install {need.component} on cluster {spec.name} (docs/operator-guide.md, Prerequisites)",
            upgrade=f"upgrade {need.component} on cluster {spec.name}", ok=f" ({need.component})"))
    return out


def check_node_overlay_gate(spec: ClusterSpec, read: Read) -> list[Finding]:
    """F4: NodeOverlays are ignored unless Karpenter runs with NodeOverlay=true (off by default), so a MIG/HAMi
    pod is 'incompatible with all instance types' and no node is launched."""
    check = f"karpenter/feature-gates/{spec.name}"
    overlaid = [p.name for p in spec.catalog.node_pools if nodepools.overlay_capacity(p)]
    if not overlaid:
        return [_ok(check, f"no MIG/HAMi pool on cluster {spec.name}: NodeOverlay not needed")]
    found = None
    for namespace, name in KARPENTER_DEPLOYMENTS:
        found = read(f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
        if found is not None:
            break
    where = " or ".join(f"{ns}/{n}" for ns, n in KARPENTER_DEPLOYMENTS)
    fix = "set settings.featureGates.nodeOverlay=true in Karpenter's chart values (FEATURE_GATES NodeOverlay=true)"
    if found is None:
        return [_fail(check, f"cannot check the NodeOverlay gate on cluster {spec.name}: no Deployment {where} "
                             f"(pools {', '.join(overlaid)} need it)",
                      f"check Karpenter's Deployment by hand; {fix}")]
    enabled, source = node_overlay_gate(found)
    if enabled is None:
        return [_fail(check, f"cannot check the NodeOverlay gate on cluster {spec.name}: {source}",
                      f"check Karpenter's Deployment by hand; {fix}")]
    if not enabled:
        return [_fail(check, f"NodeOverlay is off on cluster {spec.name} ({source}): pools {', '.join(overlaid)} "
                             "never get a node for a MIG/HAMi pod", fix)]
    return [_ok(check, f"NodeOverlay=true on cluster {spec.name} ({source})")]


def _not_checked(spec: ClusterSpec, external_secrets: bool, rule_kind: str) -> str:
    crds = [p.crd for p in cluster_prerequisites(spec.catalog, external_secrets=external_secrets, rule_kind=rule_kind)]
    overlay = any(nodepools.overlay_capacity(p) for p in spec.catalog.node_pools)
    return ", ".join([*crds, *(["Karpenter's NodeOverlay gate"] if overlay else [])])


def check_cluster(target: Target, *, external_secrets: bool, rule_kind: str = "") -> list[Finding]:
    spec = target.spec
    out = check_flavor_pools(spec, None)
    check = f"cluster/{spec.name}"
    fix = (f"give cluster {spec.name} a kubeconfig the doctor can read (kubeconfig_secret mounted under "
           "GPUFLEET_CLUSTER_KUBECONFIG_DIR) or run the doctor with --kubeconfig against it")
    if target.read is None:
        return [*out, _fail(check, f"cannot check cluster {spec.name}: no way to read it is configured; not "
                                   f"checked: {_not_checked(spec, external_secrets, rule_kind)}", fix)]
    read = target.read
    try:
        out = check_flavor_pools(spec, read)
        crds = check_prerequisite_crds(spec, read, external_secrets=external_secrets, rule_kind=rule_kind,
                                       skip=LOCAL_COVERED if target.local else ())
        gate = check_node_overlay_gate(spec, read)
    except InfraError as exc:
        return [*out, _fail(check, f"cannot check cluster {spec.name}: {exc}; not checked: "
                                   f"{_not_checked(spec, external_secrets, rule_kind)}", fix)]
    return [*out, _ok(check, f"cluster {spec.name} read"), *crds, *gate]


def cluster_checks(targets: Callable[[], list[Target]], *, external_secrets: bool,
                   rule_kind: str = "") -> list[tuple[str, Callable[[], list[Finding]]]]:
    """One named check for all registered clusters (scheduling.doctor.diagnose's `more`). `rule_kind`: the kind of
    the capacity rule the platform renders (FleetSettings.rule_kind)."""
    def run() -> list[Finding]:
        return [f for target in targets()
                for f in check_cluster(target, external_secrets=external_secrets, rule_kind=rule_kind)]

    return [("clusters", run)]
