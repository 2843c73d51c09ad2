"""A small evaluator of CiliumNetworkPolicy / CiliumClusterwideNetworkPolicy objects: is a flow allowed?

No Cilium agent can run here, so the tests ask the rendered policies what they MEAN: given a source pod
(namespace, labels, namespace labels) and a destination (a pod, an IP address, a DNS name or an entity),
would Cilium let the packet through? The rules modelled are the documented ones (docs.cilium.io,
"Layer 3 policies", "Deny policies", "Endpoint selectors in namespaced policies"; cilium/cilium
pkg/policy/api/selector.go for the `k8s:` label source):

* A flow needs the source's EGRESS to allow it and, when the destination is a pod, the destination's
  INGRESS to allow it.
* A policy selects endpoints with `endpointSelector`; a namespaced policy (CNP) only endpoints of its
  own namespace; a clusterwide one (CCNP) any endpoint.
* For each direction: if a selected policy has a deny rule matching the peer, the flow is denied (deny
  wins over allow). Else, if the endpoint is in default-deny for that direction (a selecting policy has
  rules of that direction and does not set `enableDefaultDeny.<direction>: false`), an allow rule must
  match. Else the flow is allowed.
* Peer selectors in a namespaced policy (`fromEndpoints`/`toEndpoints`) match only endpoints of the
  policy's namespace unless they name `io.kubernetes.pod.namespace` themselves; `{}` is "this namespace".
* Pod identity labels: the pod's labels, `io.kubernetes.pod.namespace`, and
  `io.cilium.k8s.namespace.labels.<key>` for each namespace label. A selector key may carry the source
  prefix `k8s:` or `any:`; both match the same label here.
* Entities: `world` is everything outside the cluster (IP addresses and DNS names here), `cluster` is
  every pod plus the host and the kube-apiserver, `all` is everything. `toCIDR`/`toCIDRSet` (with
  `except`) match IP destinations, `toFQDNs` (`matchName`, `matchPattern` with `*`) DNS names.
* `toPorts`: a rule with ports matches only a flow to one of them (a flow without a port matches none).

Not modelled (not rendered by gpufleet): L7 rules beyond the DNS proxy, `fromRequires`/`toRequires`,
`toServices`, `toGroups`, node selectors, ICMP rules, CIDR-selected pods.
"""

from __future__ import annotations

import fnmatch
import ipaddress
from dataclasses import dataclass, field
from typing import Any

NAMESPACE = "io.kubernetes.pod.namespace"
NS_LABEL_PREFIX = "io.cilium.k8s.namespace.labels."


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: dict[str, str] = field(default_factory=dict)
    namespace_labels: dict[str, str] = field(default_factory=dict)

    def identity(self) -> dict[str, str]:
        ident = dict(self.labels)
        ident[NAMESPACE] = self.namespace
        ident.update({NS_LABEL_PREFIX + k: v for k, v in self.namespace_labels.items()})
        return ident


@dataclass(frozen=True)
class Ip:
    address: str  # outside the cluster


@dataclass(frozen=True)
class Fqdn:
    name: str  # outside the cluster


@dataclass(frozen=True)
class Entity:
    name: str  # "kube-apiserver", "host", "remote-node"


Peer = Pod | Ip | Fqdn | Entity


def _key(key: str) -> str:
    for source in ("k8s:", "any:"):
        if key.startswith(source):
            return key[len(source):]
    return key


def selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A Kubernetes LabelSelector (matchLabels + matchExpressions) over identity labels."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(_key(key)) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = _key(expr["key"]), expr["operator"], expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
        if op not in {"In", "NotIn", "Exists", "DoesNotExist"}:
            raise ValueError(f"unknown operator {op}")
    return True


def _names_namespace(selector: dict[str, Any]) -> bool:
    keys = [_key(k) for k in selector.get("matchLabels") or {}]
    keys += [_key(e["key"]) for e in selector.get("matchExpressions") or []]
    return NAMESPACE in keys


def _policies(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] in {"CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy"}]


def _selects(policy: dict[str, Any], pod: Pod) -> bool:
    if policy["kind"] == "CiliumNetworkPolicy" and policy["metadata"].get("namespace") != pod.namespace:
        return False
    return selector_matches(policy["spec"].get("endpointSelector") or {}, pod.identity())


def _peer_selector_matches(policy: dict[str, Any], selector: dict[str, Any], peer: Peer) -> bool:
    if not isinstance(peer, Pod):
        return False
    if (policy["kind"] == "CiliumNetworkPolicy" and not _names_namespace(selector)
            and peer.namespace != policy["metadata"]["namespace"]):
        return False
    return selector_matches(selector, peer.identity())


def _entity_matches(entities: list[str], peer: Peer) -> bool:
    for entity in entities:
        if entity == "all":
            return True
        if entity == "world" and isinstance(peer, Ip | Fqdn):
            return True
        if entity == "cluster" and isinstance(peer, Pod | Entity):
            return True
        if isinstance(peer, Entity) and entity == peer.name:
            return True
    return False


def _cidr_matches(rule: dict[str, Any], peer: Peer, plain: str, with_except: str) -> bool:
    if not isinstance(peer, Ip):
        return False
    address = ipaddress.ip_address(peer.address)

    def inside(cidr: str) -> bool:
        net = ipaddress.ip_network(cidr)
        return net.version == address.version and address in net

    if any(inside(c) for c in rule.get(plain) or []):
        return True
    for item in rule.get(with_except) or []:
        if inside(item["cidr"]) and not any(inside(e) for e in item.get("except") or []):
            return True
    return False


def _fqdn_matches(rule: dict[str, Any], peer: Peer) -> bool:
    if not isinstance(peer, Fqdn):
        return False
    name = peer.name.rstrip(".").lower()
    for item in rule.get("toFQDNs") or []:
        if "matchName" in item and item["matchName"].rstrip(".").lower() == name:
            return True
        if "matchPattern" in item:
            pattern = item["matchPattern"].rstrip(".").lower()
            # Cilium: '*' matches any run of DNS characters within one label ... or across labels for a
            # leading "*."; a bare "*" matches every name.
            if pattern == "*" or fnmatch.fnmatchcase(name, pattern):
                return True
    return False


def _ports_match(rule: dict[str, Any], port: int | None, protocol: str) -> bool:
    if "toPorts" not in rule:
        return True
    if port is None:
        return False
    for entry in rule["toPorts"]:
        for p in entry.get("ports") or []:
            if int(p["port"]) == port and p.get("protocol", "ANY") in {"ANY", protocol}:
                return True
    return False


def _rule_matches(policy: dict[str, Any], rule: dict[str, Any], peer: Peer, direction: str,
                  port: int | None, protocol: str) -> bool:
    side = "from" if direction == "ingress" else "to"
    matched = (
        any(_peer_selector_matches(policy, s, peer) for s in rule.get(f"{side}Endpoints") or [])
        or _entity_matches(rule.get(f"{side}Entities") or [], peer)
        or _cidr_matches(rule, peer, f"{side}CIDR", f"{side}CIDRSet")
        or (direction == "egress" and _fqdn_matches(rule, peer))
    )
    return matched and _ports_match(rule, port, protocol)


def _direction_allows(objects: list[dict[str, Any]], pod: Pod, peer: Peer, direction: str,
                      port: int | None, protocol: str) -> bool:
    selecting = [p for p in _policies(objects) if _selects(p, pod)]
    for policy in selecting:
        for rule in policy["spec"].get(f"{direction}Deny") or []:
            if _rule_matches(policy, rule, peer, direction, port, protocol):
                return False
    default_deny = False
    for policy in selecting:
        spec = policy["spec"]
        has_rules = bool(spec.get(direction) or spec.get(f"{direction}Deny"))
        switch = (spec.get("enableDefaultDeny") or {}).get(direction)
        if switch is True or (has_rules and switch is not False):
            default_deny = True
    if not default_deny:
        return True
    return any(_rule_matches(policy, rule, peer, direction, port, protocol)
               for policy in selecting for rule in policy["spec"].get(direction) or [])


def allowed(objects: list[dict[str, Any]], source: Pod, destination: Peer, *, port: int | None = None,
            protocol: str = "TCP") -> bool:
    """Would Cilium, enforcing `objects`, let `source` open a connection to `destination`?"""
    if not _direction_allows(objects, source, destination, "egress", port, protocol):
        return False
    if isinstance(destination, Pod):
        return _direction_allows(objects, destination, source, "ingress", port, protocol)
    return True


def egress_allowed(objects: list[dict[str, Any]], source: Pod, destination: Peer, *, port: int | None = None,
                   protocol: str = "TCP") -> bool:
    """The source side alone (what the source's own policies permit, whatever the destination has)."""
    return _direction_allows(objects, source, destination, "egress", port, protocol)
