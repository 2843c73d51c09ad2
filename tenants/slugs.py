"""Tenant slug rules. The slug names the host namespace (`tenant-<slug>`) and every object, forever."""

from __future__ import annotations

import re

SLUG_MIN, SLUG_MAX = 3, 40
_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
# Names that would read as platform namespaces or collide with the `tenant-` prefix scheme:
# a slug "tenant-x" would give namespace "tenant-tenant-x", confusable with tenant "x"'s objects.
RESERVED_PREFIXES = ("tenant-", "kube-", "gpufleet", "system-")
RESERVED = {"default", "kube-system", "kube-public", "kube-node-lease", "platform", "admin", "api", "new"}


def slug_errors(slug: object) -> list[str]:
    """Reasons the slug is not acceptable; empty when it is."""
    if not isinstance(slug, str) or slug == "":
        return ["is required"]
    problems: list[str] = []
    if not slug.isascii():
        problems.append("must contain only ASCII lowercase letters, digits and '-'")
    elif not (SLUG_MIN <= len(slug) <= SLUG_MAX):
        problems.append(f"must be {SLUG_MIN} to {SLUG_MAX} characters long (got {len(slug)})")
    if slug.isascii() and not _DNS_LABEL.match(slug):
        if slug != slug.lower():
            problems.append("must be lowercase")
        elif slug.startswith("-") or slug.endswith("-"):
            problems.append("must start and end with a letter or digit")
        else:
            problems.append("must be a DNS-1123 label: lowercase letters, digits and '-'")
    if not problems:
        if slug in RESERVED:
            problems.append(f"'{slug}' is reserved")
        elif slug.startswith(RESERVED_PREFIXES):
            problems.append(f"must not start with {', '.join(repr(p) for p in RESERVED_PREFIXES)}")
    return problems
