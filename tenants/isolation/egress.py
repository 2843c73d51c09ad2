"""Validation of the egress exceptions a platform admin may grant a tenant (CIDRs, FQDN patterns)."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

MAX_ENTRIES = 64
# A DNS label; a pattern may start with "*." (Cilium matchPattern), nothing else is a wildcard we accept.
_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_FQDN = re.compile(rf"(\*\.)?({_LABEL}\.)+[a-z]{{2,63}}\.?")  # fullmatch: no "\n" tail


def cidr_errors(values: Any) -> list[str]:
    """Real networks only: host bits zero, no 'everything' (0.0.0.0/0 is what the policy withholds)."""
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return ["must be a list of CIDRs"]
    if len(values) > MAX_ENTRIES:
        return [f"at most {MAX_ENTRIES} entries"]
    problems = []
    for value in values:
        try:
            net = ipaddress.ip_network(value, strict=True)
        except ValueError as exc:
            problems.append(f"{value!r} is not a CIDR ({exc})")
            continue
        if net.prefixlen == 0:
            problems.append(f"{value!r} allows the whole internet; allow specific networks instead")
        elif "/" not in value:
            problems.append(f"{value!r} needs a prefix length, e.g. {value}/{net.max_prefixlen}")
    if len(set(values)) != len(values):
        problems.append("lists a CIDR twice")
    return problems


def fqdn_errors(values: Any) -> list[str]:
    """Lower-case DNS names, optionally with one leading '*.' (a subdomain wildcard)."""
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return ["must be a list of DNS names"]
    if len(values) > MAX_ENTRIES:
        return [f"at most {MAX_ENTRIES} entries"]
    problems = [
        f"{v!r} is not a DNS name or '*.'-prefixed pattern (lower case, no bare '*', no '*' inside)"
        for v in values
        if len(v) > 253 or not _FQDN.fullmatch(v)
    ]
    if len(set(values)) != len(values):
        problems.append("lists a name twice")
    return problems


def is_pattern(fqdn: str) -> bool:
    return "*" in fqdn
