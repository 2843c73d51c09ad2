"""The schema published in docs/simulator.md is the one the simulator validates with."""

from __future__ import annotations

import json
import re
from pathlib import Path

from scheduling.simulator.scenario import SCHEMA

DOC = Path(__file__).resolve().parents[2] / "docs" / "simulator.md"


def test_published_schema_is_the_validating_schema():
    block = re.search(r"## Scenario JSON Schema.*?```json\n(.*?)```", DOC.read_text(), re.S)
    assert block is not None
    assert json.loads(block.group(1)) == SCHEMA
