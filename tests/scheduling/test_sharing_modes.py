"""The sharing-mode registry (gpufleet.core.sharing) is the one definition of the GPU sharing modes: what the
catalogue, the isolation policy, routing, node pools, metering and the database derive from it is what they
defined by hand before (the literals below are those definitions)."""

from __future__ import annotations

import importlib

from billing.metering import usage
from billing.templatetags.billing_format import UNIT_HOURS
from gpufleet.core import sharing
from scheduling import routing
from scheduling.catalog import rules as catalog
from scheduling.models import Flavor
from scheduling.nodepools import render as nodepools
from tenants.isolation import policy, summary


def test_the_modes_and_their_order() -> None:
    assert sharing.NAMES == ("whole", "mig", "hami") == catalog.MODES == policy.MODES
    assert (usage.WHOLE, usage.MIG, usage.HAMI) == (catalog.WHOLE, catalog.MIG, catalog.HAMI)
    assert sharing.ordered(["hami", "whole", "nope", "mig"]) == ["whole", "mig", "hami"]


def test_the_simulator_knows_every_mode() -> None:
    # The simulator core may not import gpufleet (import contract): its scenario schema lists the modes itself.
    from scheduling.simulator.scenario import SCHEMA

    flavor = SCHEMA["properties"]["fleet"]["properties"]["flavors"]["items"]["properties"]
    assert tuple(flavor["mode"]["enum"]) == sharing.NAMES


def test_the_database_choices_are_the_registrys() -> None:
    assert Flavor._meta.get_field("mode").choices == [
        ("whole", "Whole GPU"), ("mig", "MIG instance"), ("hami", "HAMi share")]


def test_default_modes_are_the_seeded_ones() -> None:
    seed = importlib.import_module("tenants.migrations.0003_seed_allocation_policy")
    assert {level: frozenset(modes) for level, (modes, _) in seed.DEFAULTS.items()} == policy.DEFAULT_MODES


def test_resources_select_their_mode() -> None:
    assert policy.MODE_RESOURCES == {
        "whole": ("nvidia.com/gpu",), "mig": ("nvidia.com/mig-*",),
        "hami": ("nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores")}
    assert [policy.mode_of_resource(r) for r in ("nvidia.com/gpu", "nvidia.com/mig-3g.40gb",
                                                 "nvidia.com/gpucores", "cpu")] == ["whole", "mig", "hami", None]
    assert catalog.resource_name("mig", "1g.10gb") == "nvidia.com/mig-1g.10gb"
    assert catalog.resource_name("hami") == catalog.resource_name("whole") == "nvidia.com/gpu"


def test_routing_rules_are_the_hand_written_ones() -> None:
    hami = ["nvidia.com/gpumem", "nvidia.com/gpumem-percentage", "nvidia.com/gpucores"]
    mig, whole = ["nvidia.com/mig-*"], ["nvidia.com/gpu"]
    assert routing.GPU_PATTERNS == whole + mig + hami
    assert routing.KAI_PATTERNS == whole + mig and routing.HAMI_PATTERNS == hami
    res = routing.ALL_RESOURCES
    any_in = lambda v: {"key": res, "operator": "AnyIn", "value": v}  # noqa: E731
    none_of = lambda v: {"key": res, "operator": "AllNotIn", "value": v}  # noqa: E731
    expected = [("hami", [any_in(hami)]), ("mig", [any_in(mig), none_of(hami)]),
                ("whole", [any_in(whole), none_of(mig), none_of(hami)])]
    rules = routing.gpu_mode_rules()
    assert [(r["name"], r["preconditions"]["all"], r["mutate"]["patchStrategicMerge"]["spec"]["nodeSelector"])
            for r in rules] == [(f"{m}-gpu-pods-select-{m}-nodes", c, {"gpufleet.io/gpu-mode": m}) for m, c in expected]


def test_words_and_node_labels() -> None:
    assert UNIT_HOURS == {"whole": "GPU-hours", "mig": "MIG instance-hours", "hami": "GPU share-hours"}
    assert [summary.MODE_WORDS[m][0] for m in sharing.NAMES] == ["Whole GPUs", "MIG instances", "HAMi shares"]
    assert nodepools.HAMI_NODE_SELECTOR == {"gpu": "on", "gpufleet.io/gpu-mode": "hami"}
    assert nodepools.HAMI_NODE_LABELS == {"gpu": "on", "gpufleet.io/gpu-mode": "hami",
                                          "nvidia.com/gpu.deploy.device-plugin": "false"}
