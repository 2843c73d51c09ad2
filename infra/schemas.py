"""Validate rendered manifests before anything is written.

- Custom resources against the upstream CRD schemas (openAPIV3Schema of the served version), made
  strict: `additionalProperties: false` is added wherever a schema lists `properties` and leaves
  extra keys open, so a misspelled field fails here instead of being pruned silently by the server.
- Core kinds with `kubernetes-validate` (the upstream OpenAPI schemas, strict variant).
- A Flux HelmRelease of the vCluster chart: its `spec.values` against the chart's values.schema.json.

The upstream files come from a reference directory (GPUFLEET_REFERENCE_DIR); they are data we do not
ship. Without it, CRD and values checks are reported as not performed, never as passed.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from .manifests import Manifest, content_key, ref

try:  # a compiled validator (Rust) for the common case, an object that is valid; optional
    import jsonschema_rs
except ImportError:  # pragma: no cover - then every object takes the pure-Python path
    jsonschema_rs = None

# Upstream CRDs are megabytes of YAML: libyaml's safe loader parses them ~10x faster when present.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Remembered verdicts (by exact manifest content) before the memo is cleared and refilled.
_VERDICTS_MAX = 100_000

# Upstream CRD schemas mark these as free-form on purpose (x-kubernetes-preserve-unknown-fields).
_PRESERVE = "x-kubernetes-preserve-unknown-fields"
VCLUSTER_CHART = "vcluster"


@dataclass(frozen=True)
class Problem:
    object: str
    message: str

    def __str__(self) -> str:
        return f"{self.object}: {self.message}"


def strict(schema: Any) -> Any:
    """A copy of an OpenAPI schema with additionalProperties: false wherever properties are listed."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: strict(value) for key, value in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get(_PRESERVE)
        # Only typed objects: branches of oneOf/anyOf/allOf (Cilium's "endpointSelector or
        # nodeSelector") list `properties` without a type as mere markers and must stay open.
        and out.get("type") == "object"
    ):
        out["additionalProperties"] = False
    return out


def _to_jsonschema(schema: Any) -> Any:
    """OpenAPI v3 `nullable` is not JSON Schema; express it as a type union."""
    if isinstance(schema, list):
        return [_to_jsonschema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _to_jsonschema(value) for key, value in schema.items()}
    pattern = out.get("pattern")
    if isinstance(pattern, str) and pattern.startswith("^(?i)"):
        # Go's RE2 takes a flag group anywhere (Kueue's AdmissionCheck parameters.kind: `^(?i)[a-z]...`);
        # Python only at the very start, where it means the same.
        out["pattern"] = "(?i)^" + pattern[len("^(?i)"):]
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"] if isinstance(out["type"], str) else [*out["type"], "null"]
    return out


def _never_matching(schema: Any) -> Any:
    """A copy where a `pattern` Python's `re` cannot compile (Cilium's "^\\PC*$") never matches: the
    compiled check then rejects any value that reaches it, and `jsonschema` decides those, as before."""
    if isinstance(schema, list):
        return [_never_matching(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _never_matching(value) for key, value in schema.items()}
    if isinstance(out.get("pattern"), str):
        try:
            re.compile(out["pattern"])
        except re.error:
            out["pattern"] = r"[^\s\S]"
    return out


class FastCheck:
    """A compiled copy of a schema that answers "valid?" ~50x faster than `jsonschema` (a cold start
    validates 160,000 distinct objects at 10,000 tenants). Only "valid" is trusted: any object it
    rejects, and every message, comes from `jsonschema` itself, so a stricter or failing fast check costs
    time, never a verdict. Formats are not asserted, as `jsonschema` does not without a format checker."""

    def __init__(self, schema: Any, resources: tuple[Any, ...] = ()) -> None:
        """`resources`: schemas `schema` refers to by their `$id` (kubernetes-validate's definitions)."""
        self.validator = None
        if jsonschema_rs is not None:
            try:
                registry = jsonschema_rs.Registry([(r["$id"], _never_matching(r)) for r in resources])
                self.validator = jsonschema_rs.validator_for(
                    _never_matching(schema), validate_formats=False, registry=registry
                )
            except Exception:  # a schema the compiled validator cannot take: the pure-Python path only
                self.validator = None

    def valid(self, instance: Any) -> bool:
        if self.validator is None:
            return False
        try:
            return bool(self.validator.is_valid(instance))
        except Exception:
            return False


class SchemaRegistry:
    def __init__(self, reference_dir: str | Path | None, kubernetes_version: str = "1.33") -> None:
        self.reference_dir = Path(reference_dir) if reference_dir else None
        self.kubernetes_version = kubernetes_version

    @property
    def available(self) -> bool:
        return bool(self.reference_dir and (self.reference_dir / "crds" / "index.json").is_file())

    @functools.cached_property
    def _crd_files(self) -> dict[tuple[str, str], Path]:
        if not self.available:
            return {}
        assert self.reference_dir is not None
        index = json.loads((self.reference_dir / "crds" / "index.json").read_text())
        return {(entry["group"], entry["kind"]): self.reference_dir / entry["file"] for entry in index}

    @functools.lru_cache(maxsize=256)  # noqa: B019 - one registry per process; bounded
    def crd_validator(self, api_version: str, kind: str) -> jsonschema.protocols.Validator | None:
        group, _, version = api_version.rpartition("/")
        path = self._crd_files.get((group, kind))
        if path is None:
            return None
        crd = yaml.load(path.read_text(), Loader=_SafeLoader)  # noqa: S506 - a safe loader (libyaml's)
        for entry in crd["spec"]["versions"]:
            if entry["name"] == version:
                if not entry.get("served", False):
                    raise LookupError(f"{api_version} {kind} is not served by the upstream CRD")
                schema = _to_jsonschema(strict(copy.deepcopy(entry["schema"]["openAPIV3Schema"])))
                cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
                self._fast[id(schema)] = FastCheck(schema if "$schema" in schema else
                                                   {**schema, "$schema": cls.META_SCHEMA["$schema"]})
                return cls(schema)
        served = [v["name"] for v in crd["spec"]["versions"] if v.get("served")]
        raise LookupError(f"{kind} has no version {version!r} upstream (served: {', '.join(served)})")

    def knows(self, group: str, kind: str) -> bool:
        return (group, kind) in self._crd_files

    @functools.cached_property
    def vcluster_values_validator(self) -> jsonschema.protocols.Validator | None:
        if not self.reference_dir:
            return None
        path = self.reference_dir / "vcluster" / "values.schema.json"
        if not path.is_file():
            return None
        schema = json.loads(path.read_text())
        validator = jsonschema.validators.validator_for(schema)(schema)
        self._fast[id(validator.schema)] = FastCheck(schema if "$schema" in schema else
                                                     {**schema, "$schema": type(validator).META_SCHEMA["$schema"]})
        return validator

    @functools.cached_property
    def _fast(self) -> dict[int, FastCheck]:
        """Compiled checks by `id` of the schema their jsonschema validator holds (kept alive by it)."""
        return {}

    def _fast_valid(self, validator: Any, instance: Any) -> bool:
        check = self._fast.get(id(validator.schema))
        return check is not None and check.valid(instance)

    def validate(self, manifests: Iterable[Manifest]) -> list[Problem]:
        problems: list[Problem] = []
        for manifest in manifests:
            problems.extend(self.validate_cached(manifest))
        return problems

    @functools.cached_property
    def _verdicts(self) -> dict[bytes, tuple[Problem, ...]]:
        return {}

    def validate_cached(self, manifest: Manifest) -> tuple[Problem, ...]:
        """`validate_one`, remembered by exact content: a periodic reconcile re-renders identical objects."""
        key = content_key(manifest)
        verdict = self._verdicts.get(key)
        if verdict is None:
            verdict = tuple(self.validate_one(manifest))
            if len(self._verdicts) >= _VERDICTS_MAX:
                self._verdicts.clear()
            self._verdicts[key] = verdict
        return verdict

    def validate_one(self, manifest: Manifest) -> list[Problem]:
        obj = ref(manifest)
        name = obj.key
        problems: list[Problem] = []
        if not obj.api_version or not obj.kind or not obj.name:
            return [Problem(name, "apiVersion, kind and metadata.name are required")]
        if not self.knows(obj.group, obj.kind) and _is_core_group(obj.group):
            problems.extend(self._validate_core(manifest, name))
        else:
            problems.extend(self._validate_custom(manifest, name))
        if obj.kind == "HelmRelease" and _chart_name(manifest) == VCLUSTER_CHART:
            problems.extend(self._validate_vcluster_values(manifest, name))
        return problems

    def _validate_core(self, manifest: Manifest, name: str) -> list[Problem]:
        try:
            validator = self.core_validator(str(manifest.get("apiVersion")), str(manifest.get("kind")))
        except kubernetes_validate.SchemaNotFoundError:
            return [Problem(name, f"unknown core kind {manifest.get('apiVersion')} {manifest.get('kind')}")]
        if self._fast_valid(validator, manifest):
            return []
        error = jsonschema.exceptions.best_match(validator.iter_errors(manifest))
        if error is None:
            return []
        path = ".".join(str(p) for p in error.path)
        return [Problem(name, f"{path or '(root)'}: {error.message}")]

    @functools.lru_cache(maxsize=128)  # noqa: B019 - one registry per process; bounded
    def core_validator(self, api_version: str, kind: str) -> jsonschema.protocols.Validator:
        """kubernetes-validate's strict schema for a core kind, loaded once (its `validate` re-reads
        and re-parses the JSON files on every call, which dominated a cold reconcile)."""
        from kubernetes_validate import utils
        from referencing import Registry, Resource

        wanted = utils.major_minor(self.kubernetes_version.lstrip("v"))
        version = [v for v in utils.all_versions() if utils.major_minor(v) <= wanted][-1]
        group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
        folder = f"kubernetes-json-schema/v{version}-local-strict"
        try:
            schema = utils.schema_contents(f"{folder}/{kind.lower()}-{group_version}.json", wanted)
        except FileNotFoundError as exc:
            raise kubernetes_validate.SchemaNotFoundError(
                version=wanted, kind=kind, api_version=api_version
            ) from exc
        definitions = utils.schema_contents(f"{folder}/_definitions.json", wanted)
        registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
        validator = jsonschema.validators.Draft202012Validator(schema, registry=registry)
        if "$id" in definitions:
            self._fast[id(validator.schema)] = FastCheck(schema, (definitions,))
        return validator

    def _validate_custom(self, manifest: Manifest, name: str) -> list[Problem]:
        if not self.available:
            return []  # reported by `coverage()`; never claimed as passed
        try:
            validator = self.crd_validator(str(manifest["apiVersion"]), str(manifest["kind"]))
        except LookupError as exc:
            return [Problem(name, str(exc))]
        if validator is None:
            return [Problem(name, "no upstream CRD schema for this kind")]
        if self._fast_valid(validator, manifest):
            return []
        return [
            Problem(name, f"{'.'.join(str(p) for p in err.absolute_path) or '(root)'}: {err.message}")
            for err in sorted(validator.iter_errors(manifest), key=lambda e: list(map(str, e.absolute_path)))
        ]

    def _validate_vcluster_values(self, manifest: Manifest, name: str) -> list[Problem]:
        validator = self.vcluster_values_validator
        if validator is None:
            return []
        values = manifest.get("spec", {}).get("values", {})
        if self._fast_valid(validator, values):
            return []
        return [
            Problem(name, f"spec.values.{'.'.join(str(p) for p in err.absolute_path)}: {err.message}")
            for err in validator.iter_errors(values)
        ]


def _chart_name(manifest: Manifest) -> str:
    chart = manifest.get("spec", {}).get("chart", {}).get("spec", {})
    return str(chart.get("chart", ""))


_CORE_GROUPS = {"", "apps", "batch", "policy", "autoscaling"}


def _is_core_group(group: str) -> bool:
    """Groups served by kube-apiserver itself (rbac.authorization.k8s.io, networking.k8s.io, ...)."""
    return group in _CORE_GROUPS or group.endswith(".k8s.io")
