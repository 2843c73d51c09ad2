"""Tenant slug rules. The slug names the host namespace (`tenant-<slug>`) and every object, forever.

The shape is the Kubernetes DNS-1123 label rule (gpufleet.k8s_names, a full match: no trailing newline,
whitespace, control characters or look-alike letters); on top of it come a length that leaves room for the
`tenant-` prefix and the reserved names below.
"""

from __future__ import annotations

from gpufleet import k8s_names

SLUG_MIN, SLUG_MAX = 3, 40
# Names that would read as platform namespaces or collide with the `tenant-` prefix scheme:
# a slug "tenant-x" would give namespace "tenant-tenant-x", confusable with tenant "x"'s objects.
RESERVED_PREFIXES = ("tenant-", "kube-", "gpufleet", "system-")
RESERVED = {"default", "kube-system", "kube-public", "kube-node-lease", "platform", "admin", "api", "new"}


def slug_errors(slug: object) -> list[str]:
    """Reasons the slug is not acceptable, every rule it breaks; empty when it is."""
    if slug is None or slug == "":
        return ["is required"]
    # The shape (at any length), then the slug's own, shorter length limit and the reserved names.
    problems = k8s_names.dns1123_label(slug, max_length=k8s_names.DNS1123_SUBDOMAIN_MAX)
    if not isinstance(slug, str):
        return problems
    if not SLUG_MIN <= len(slug) <= SLUG_MAX:
        problems.append(f"must be {SLUG_MIN} to {SLUG_MAX} characters long (got {len(slug)})")
    if slug in RESERVED:
        problems.append(f"'{slug}' is reserved")
    if slug.startswith(RESERVED_PREFIXES):
        problems.append(f"must not start with {', '.join(repr(p) for p in RESERVED_PREFIXES)}")
    return problems
