"""Input checks shared by the scheduling actions. Each returns field -> reasons; nothing is written."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from gpufleet import k8s_names
from infra.manifests import tree_is_safe
from tenants.models import TrustLevel


def count(value: Any, field: str, errors: dict[str, list[str]], *, optional: bool = False) -> int | None:
    """A non-negative integer (ints or digit strings; never bools, floats or negative numbers)."""
    if value is None or value == "":
        if not optional:
            errors[field] = ["is required"]
        return None
    if isinstance(value, bool) or isinstance(value, float):
        errors[field] = ["must be a whole number"]
        return None
    if isinstance(value, str):
        if not re.fullmatch(r"-?\d+", value.strip()):
            errors[field] = ["must be a whole number"]
            return None
        value = int(value)
    if not isinstance(value, int):
        errors[field] = ["must be a whole number"]
        return None
    if value < 0:
        errors[field] = ["must not be negative"]
        return None
    if value > 1_000_000:
        errors[field] = ["is implausibly large (at most 1000000)"]
        return None
    return value


def decimal(value: Any, field: str, errors: dict[str, list[str]], *, low: Decimal, high: Decimal,
            default: Decimal | None = None) -> Decimal | None:
    if value is None or value == "":
        if default is None:
            errors[field] = ["is required"]
        return default
    if isinstance(value, bool):
        errors[field] = ["must be a number"]
        return None
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        errors[field] = ["must be a number"]
        return None
    if not number.is_finite() or not low <= number <= high:
        errors[field] = [f"must be between {low} and {high}"]
        return None
    return number


def name(value: Any, field: str, errors: dict[str, list[str]], *, max_length: int = 63) -> str:
    """An object name (flavor, cohort, node pool, tier, endpoint): a DNS-1123 label, full match."""
    if problems := k8s_names.dns1123_label(value, max_length=max_length):
        errors[field] = problems
        return ""
    return value


def label_value(text: str) -> str:
    """The Kubernetes label value GPU feature discovery uses for a product name (spaces -> '-')."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text.strip()).strip("-._")[:63].strip("-._")


def labels(value: Any, field: str, errors: dict[str, list[str]]) -> None:
    if value is not None:
        k8s_names.check(k8s_names.labels, value, field, errors)


def taints(value: Any, field: str, errors: dict[str, list[str]]) -> None:
    if value is not None:
        k8s_names.check(lambda v: k8s_names.each(k8s_names.taint, v, "taints"), value, field, errors)


def tolerations(value: Any, field: str, errors: dict[str, list[str]]) -> None:
    if value is not None:
        k8s_names.check(lambda v: k8s_names.each(k8s_names.toleration, v, "tolerations"), value, field, errors)


def trust_levels(value: Any, field: str, errors: dict[str, list[str]]) -> list[str]:
    """A list of tenant trust levels (empty or None: every level), sorted, without repeats."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        errors[field] = ["must be a list of trust levels"]
        return []
    unknown = [v for v in value if v not in TrustLevel.values]
    if unknown:
        errors[field] = [f"unknown trust level {unknown[0]!r}; one of {', '.join(TrustLevel.values)}"]
        return []
    return sorted(set(value))


GITOPS_PATH_MAX = 200
_GITOPS_SEGMENT = re.compile(r"^[A-Za-z0-9._-]+$")
# The repository's root layout of a single-cluster installation: a cluster's tree may not be inside it.
_GITOPS_RESERVED = ("platform", "tenants")


def gitops_path(value: Any, field: str, errors: dict[str, list[str]]) -> str:
    """A cluster's folder in the GitOps repository ("" = the default clusters/<name>). The one check every
    write path runs (API POST and PATCH, CLI, Terraform through the API): a value the backend cannot write
    (infra.manifests.tree_is_safe) would fail every reconcile of the cluster."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        errors[field] = ["must be a string"]
        return ""
    if len(value) > GITOPS_PATH_MAX:
        errors[field] = [f"must be at most {GITOPS_PATH_MAX} characters"]
    elif (not tree_is_safe(value) or not all(_GITOPS_SEGMENT.match(part) for part in value.split("/"))
            or value.split("/")[0] in _GITOPS_RESERVED):
        errors[field] = ["must be a relative folder like clusters/<name>: letters, digits, '.', '_' and '-' in "
                         "each segment, no segment starting with '.' (no .git, no '..'), not under platform/ or "
                         "tenants/"]
    return value
