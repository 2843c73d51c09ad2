"""The direct YAML emitter (infra.yaml_emit) must write exactly PyYAML's bytes, or decline.

Rendered manifests are the files of the GitOps repository: a single byte of difference would rewrite
every file of the fleet on the next pass. So: every kind the platform renders goes through the emitter
(not the fallback) and matches PyYAML byte for byte, and random plain data -- awkward strings included:
numbers, bools, nulls, timestamps, indicators, quotes, unicode, long lines that fold, multi-line blocks --
either matches PyYAML or is declined (then `to_yaml` dumps it with PyYAML).
"""

from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infra import manifests, yaml_emit
from scheduling.models import Quota
from tenants.models import Phase
from tenants.reconcile import desired_manifests
from tenants.render import RenderContext, platform_targets, render_platform
from tests.support import factories

from .test_fleet import catalog  # noqa: F401 - the fixture


def _pyyaml(data: object) -> str:
    return yaml.dump(data, Dumper=manifests._Dumper, sort_keys=False, default_flow_style=False, width=120)


@pytest.mark.django_db
def test_every_rendered_kind_is_emitted_directly_and_byte_identical(catalog) -> None:  # noqa: F811
    rendered = []
    for level in ("untrusted", "standard", "trusted"):
        tenant = factories.tenant(f"emit-{level}", level, phase=Phase.READY)
        Quota.objects.create(tenant=tenant, flavor=catalog["mig"], nominal=2, borrowing_limit=1, lending_limit=0)
        rendered += desired_manifests(tenant)
    ctx = RenderContext.from_settings()
    for target in platform_targets(ctx):
        rendered += render_platform(target.ctx)
    kinds = set()
    for manifest in rendered:
        text = yaml_emit.emit(manifest, manifests._Dumper)
        assert text is not None, f"{manifest['kind']} fell back to PyYAML"
        assert text == _pyyaml(manifest), manifest["kind"]
        kinds.add(manifest["kind"])
    assert {"Namespace", "ResourceQuota", "HelmRelease", "ClusterQueue"} <= kinds


_WORDS = [
    "", " ", "a", "-", "-a", "- a", "a-", "?", "? a", ":", "a:", "a: b", "a:b", "a #b", "a#b", "#a", "&a", "*a", "!a",
    "|", ">", "'", '"', "%a", "@a", "`a", "{", "}", "[", "]", ",", "a,b", "~", "null", "Null", "NULL", "nUll",
    "true", "True", "TRUE", "tRue", "false", "yes", "Yes", "no", "NO", "on", "On", "off", "OFF", "y", "n", "Y",
    "0", "1", "-1", "+1", "01", "0x1F", "0o17", "0b101", "1_000", "1.5", "1e5", "1.0e+5", ".5", "1.", ".inf",
    "-.inf", ".nan", ".NaN", "1:20", "190:20:30", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "=", "<<",
    "---", "...", "--- a", "a\tb", "a\nb", "a\nb\n", "a\n\nb\n", "a\n", "\n", "a\n\n", " a\nb", "a \nb", "\ta\n",
    "a\n  b\n", "é", "naïve", "日本", "\x00", "\x85", "\u2028", "a b", "a  b", " a", "a ", "http://x.y/z",
    "app.kubernetes.io/name", "nvidia.com/gpu", "tenant-acme", "h100-3g", "A_B", "a/b", "a.b", "_a", "/a", ".a",
    "x" * 130, "word " * 30, "'quoted'", '"dq"', "a'b", 'a"b', "a\\b", "0.0.0.0/0", "10.0.0.0/8", "*", "a*",
]
_text = st.one_of(st.sampled_from(_WORDS), st.text(max_size=40),
                  st.text(alphabet="ab -:#'\"\n\t.0123456789yYnN", max_size=60),
                  st.builds(lambda a, b: f"{a} {b}", st.sampled_from(_WORDS), st.sampled_from(_WORDS)))
_scalar = st.one_of(_text, st.integers(), st.booleans(), st.none(),
                    st.floats(allow_nan=True, allow_infinity=True))
_data = st.recursive(
    _scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_text, inner, max_size=4)),
    max_leaves=30,
)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_text, _data, max_size=6))
def test_random_plain_data_is_pyyamls_bytes_or_declined(data: dict) -> None:
    text = yaml_emit.emit(data, manifests._Dumper)
    if text is not None:
        assert text == _pyyaml(data)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=6), st.integers(0, 5))
def test_deep_layouts_match(words: list[str], depth: int) -> None:
    # Every word as a key, a value, a list item, at every nesting (indent, "- " items, indentless lists).
    data: object = {w: w for w in words}
    for level in range(depth):
        data = {"k": [data, words, {"x": data}], "e": [] if level % 2 else {}} if level % 2 else {"m": data, "l": words}
    out = yaml_emit.emit(data, manifests._Dumper)  # type: ignore[arg-type]
    if out is not None:
        assert out == _pyyaml(data)


def test_equal_but_different_scalars_are_not_confused() -> None:
    # Memoised by value: 0.0 == -0.0 and True == 1 == 1.0 must still be written as themselves.
    for data in ({"a": 0.0, "b": -0.0}, {"a": -0.0, "b": 0.0}, {"a": 1, "b": True, "c": 1.0, "d": "1"}):
        assert yaml_emit.emit(data, manifests._Dumper) == _pyyaml(data)


def test_common_manifest_shapes_are_not_declined() -> None:
    manifest = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "labels": {"app.kubernetes.io/managed-by": "gpufleet"}},
                "data": {"script": "line 1\nline 2\n", "port": "8080", "list": ["a", 1, True, None, {}, []]}}
    assert yaml_emit.emit(manifest, manifests._Dumper) == _pyyaml(manifest)
    assert manifests.to_yaml(manifest) == _pyyaml(manifest)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["a", "bb", "word", "x" * 50, "it's", "-", "#x", "a:b", ""]), min_size=10,
                max_size=60), st.sampled_from([" ", "  "]), st.integers(0, 6))
def test_long_values_fold_like_libyaml(words: list[str], sep: str, depth: int) -> None:
    value = sep.join(words).strip() or "x"
    data: object = {"key": value, "items": [value, {"k": value}]}
    for _ in range(depth):
        data = {"nested": data, "list": [data]}
    out = yaml_emit.emit(data, manifests._Dumper)  # type: ignore[arg-type]
    if "'" not in value and '"' not in value and not value.startswith(("-", "#")):
        assert out is not None, "plain long values are folded here, not declined"
    if out is not None:
        assert out == _pyyaml(data)


def test_a_capacity_rule_sized_expression_folds_like_libyaml() -> None:
    # The capacity rules list every tenant's ClusterQueue: 100,000s of characters with few spaces.
    queues = "|".join(f"tenant-team-{i:05d}" for i in range(5000))
    expr = f'sum by (flavor) (kueue_pending_workloads{{cluster_queue=~"{queues}"}}) > 0 and on () vector(1) == 1'
    data = {"spec": {"groups": [{"rules": [{"expr": expr, "for": "30m"}, {"expr": f"x {queues} y  z {queues}"}]}]}}
    out = yaml_emit.emit(data, manifests._Dumper)
    assert out is not None and out == _pyyaml(data)
