"""Pure catalog rules: resource names, GPU-equivalent weights and units per physical GPU."""

from __future__ import annotations

from decimal import Decimal

import pytest

from scheduling.catalog import rules as catalog


@pytest.mark.parametrize(
    ("mode", "profile", "mem", "cores", "weight", "per_gpu", "resources"),
    [
        ("whole", "", None, None, "1", 1, ["nvidia.com/gpu"]),
        ("mig", "1g.10gb", None, None, "0.1429", 7, ["nvidia.com/mig-1g.10gb"]),
        ("mig", "2g.20gb", None, None, "0.2857", 3, ["nvidia.com/mig-2g.20gb"]),
        ("mig", "3g.40gb", None, None, "0.4286", 2, ["nvidia.com/mig-3g.40gb"]),
        ("mig", "7g.80gb", None, None, "1", 1, ["nvidia.com/mig-7g.80gb"]),
        ("hami", "", 25, None, "0.25", 4, ["nvidia.com/gpu", "nvidia.com/gpumem-percentage"]),
        ("hami", "", 25, 50, "0.5", 2, ["nvidia.com/gpu", "nvidia.com/gpucores", "nvidia.com/gpumem-percentage"]),
    ],
)
def test_weights_units_and_resources(mode, profile, mem, cores, weight, per_gpu, resources) -> None:
    w = catalog.default_weight(mode, profile, mem, cores)
    assert w == Decimal(weight)
    assert catalog.units_per_gpu(w) == per_gpu
    assert catalog.covered_resources(mode, profile, mem, cores) == resources


@pytest.mark.parametrize(("mode", "profile", "mem"), [("mig", "8g.1gb", None), ("hami", "", 0), ("tpu", "", None)])
def test_bad_flavor_specs_are_refused(mode, profile, mem) -> None:
    with pytest.raises(ValueError):
        catalog.default_weight(mode, profile, mem)
