"""Kubernetes identifier rules, in one place: every name, label, taint or path segment the platform writes.

Each identifier a user or admin supplies (tenant slug, flavor, GPU model, endpoint, node pool, cohort, tier,
label keys and values, taints, tolerations) ends up in a Kubernetes object name, a label, a GitOps path or a
URL. The rules below are the apiserver's own (k8s.io/apimachinery/pkg/util/validation, validation.go:
IsDNS1123Label, IsDNS1123Subdomain, IsQualifiedName, IsValidLabelValue; taint effects from core/v1 types),
re-stated, and always checked with a FULL match: Python's `$` also matches before a trailing newline, which
is how `"abc\\n"` once became a tenant. Non-strings are refused (a JSON number is not a name), and so are
whitespace, control characters and non-ASCII look-alikes (Cyrillic U+0430 reads as `a`).

Every function returns the reasons the value is not acceptable; an empty list means it is.
"""

from __future__ import annotations

import re
from typing import Any

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists")

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(_LABEL)
DNS1123_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")

Errors = dict[str, list[str]]


def text_problems(value: object) -> list[str]:
    """What every identifier must be before its shape is checked: a string of visible ASCII."""
    if not isinstance(value, str):
        kind = "a number" if isinstance(value, int | float) and not isinstance(value, bool) else type(value).__name__
        return [f"must be a string, not {kind}"]
    if any(ch.isspace() for ch in value) or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        return ["must not contain whitespace or control characters"]
    if not value.isascii():
        return ["must contain only ASCII characters (no look-alike letters)"]
    return []


def dns1123_label(value: object, *, max_length: int = DNS1123_LABEL_MAX) -> list[str]:
    """An object name such as a namespace or a Service: lowercase letters, digits and '-'.

    Every rule the value breaks is listed ("Speech Lab!" breaks three), so a person fixes it in one go."""
    if not isinstance(value, str):
        return text_problems(value)
    if value == "":
        return ["is required"]
    problems: list[str] = []
    if any(ch.isspace() for ch in value) or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        problems.append("must not contain whitespace or control characters")
    if any(not ch.isascii() and not ch.isspace() for ch in value):  # non-ASCII spaces are reported above
        problems.append("must contain only ASCII characters (no look-alike letters)")
    if len(value) > max_length:
        problems.append(f"must be at most {max_length} characters (got {len(value)})")
    if DNS1123_LABEL.fullmatch(value):
        return problems
    if value != value.lower():
        problems.append("must be lowercase")
    # Characters no rule above already named (not whitespace, not uppercase, not non-ASCII).
    others = sorted({ch for ch in value if ch.isascii() and ch.isprintable() and not ch.isspace()
                     and not ch.isupper() and not (ch.isalnum() or ch == "-")})
    if others:
        shown = " ".join(repr(ch) for ch in others)
        problems.append(f"must be a DNS-1123 label: only lowercase letters, digits and '-' (not {shown})")
    if value[0] == "-" or value[-1] == "-":
        problems.append("must start and end with a letter or digit")
    return problems


def dns1123_subdomain(value: object) -> list[str]:
    """A dotted name such as a label-key prefix: DNS-1123 labels joined by '.', at most 253 characters."""
    if problems := text_problems(value):
        return problems
    assert isinstance(value, str)
    if value == "":
        return ["is required"]
    if len(value) > DNS1123_SUBDOMAIN_MAX or not DNS1123_SUBDOMAIN.fullmatch(value):
        return ["must be a DNS-1123 subdomain: lowercase labels joined by '.', at most 253 characters"]
    return []


def label_key(value: object) -> list[str]:
    """A label (or taint) key: an optional DNS subdomain prefix and '/', then a name of at most 63 chars."""
    if problems := text_problems(value):
        return problems
    assert isinstance(value, str)
    prefix, slash, name = value.rpartition("/")
    if slash and dns1123_subdomain(prefix):
        return [f"{value!r} is not a valid label key: the prefix must be a DNS subdomain"]
    if not name or len(name) > QUALIFIED_NAME_MAX or not _QUALIFIED_NAME.fullmatch(name):
        return [f"{value!r} is not a valid label key: a name of at most 63 letters, digits, '-', '_' or '.',"
                " starting and ending with a letter or digit"]
    return []


def label_value(value: object) -> list[str]:
    """A label value: empty, or at most 63 letters, digits, '-', '_' or '.', alphanumeric at both ends."""
    if problems := text_problems(value):
        return problems
    assert isinstance(value, str)
    if len(value) > LABEL_VALUE_MAX or not _LABEL_VALUE.fullmatch(value):
        return [f"{value!r} is not a valid label value: at most 63 letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit"]
    return []


def labels(value: object) -> list[str]:
    """A mapping of label keys to label values (node selectors, node labels)."""
    if not isinstance(value, dict):
        return ["must be a mapping of label keys to values"]
    for key, val in value.items():
        if problems := label_key(key):
            return problems
        if problems := label_value(val):
            return [f"{problems[0]} (for {key})"]
    return []


def taint(value: object) -> list[str]:
    """One node taint: {key, value?, effect} (core/v1 Taint)."""
    if not isinstance(value, dict):
        return ["each taint must be a mapping with key, value and effect"]
    unknown = sorted(set(value) - {"key", "value", "effect"})
    if unknown:
        return [f"unknown taint field(s): {', '.join(map(str, unknown))}"]
    if problems := label_key(value.get("key")):
        return [f"taint key: {problems[0]}"]
    if "value" in value and (problems := label_value(value["value"])):
        return [f"taint value: {problems[0]}"]
    if value.get("effect") not in TAINT_EFFECTS:
        return [f"taint effect must be one of {', '.join(TAINT_EFFECTS)}"]
    return []


def toleration(value: object) -> list[str]:
    """One pod toleration (core/v1 Toleration): an empty key is allowed only with operator Exists."""
    if not isinstance(value, dict):
        return ["each toleration must be a mapping"]
    unknown = sorted(set(value) - {"key", "operator", "value", "effect", "tolerationSeconds"})
    if unknown:
        return [f"unknown toleration field(s): {', '.join(map(str, unknown))}"]
    operator = value.get("operator", "Equal")
    if operator not in TOLERATION_OPERATORS:
        return [f"toleration operator must be one of {', '.join(TOLERATION_OPERATORS)}"]
    key = value.get("key", "")
    if key != "" and (problems := label_key(key)):
        return [f"toleration key: {problems[0]}"]
    if key == "" and operator != "Exists":
        return ["a toleration without a key must use operator Exists"]
    if operator == "Exists" and value.get("value", "") != "":
        return ["a toleration with operator Exists must not have a value"]
    if "value" in value and (problems := label_value(value["value"])):
        return [f"toleration value: {problems[0]}"]
    effect = value.get("effect", "")
    if effect != "" and effect not in TAINT_EFFECTS:
        return [f"toleration effect must be empty or one of {', '.join(TAINT_EFFECTS)}"]
    seconds = value.get("tolerationSeconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
        return ["tolerationSeconds must be a whole number"]
    return []


def each(rule: Any, value: object, what: str) -> list[str]:
    """Apply a per-item rule to a list (taints, tolerations)."""
    if not isinstance(value, list):
        return [f"must be a list of {what}"]
    for item in value:
        if problems := rule(item):
            return problems
    return []


def check(rule: Any, value: object, field: str, errors: Errors) -> None:
    """Record the rule's reasons under `field` (the actions' errors dict); nothing when the value is fine."""
    if problems := rule(value):
        errors[field] = problems
