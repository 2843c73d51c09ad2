"""A deterministic discrete-event simulator of the three layers the platform configures.

Pure: no Django, no I/O, no clock, no global random. `simulate(scenario, seed)` gives the same outputs,
byte for byte, for the same scenario and seed. Adapters that read the platform's database live outside
this package (`scheduling/simulation/inputs.py`). The model, its assumptions and its limits are in
docs/simulator.md.
"""

from .engine import simulate
from .outputs import compare_runs, render_table
from .presets import PRESETS, run_preset
from .scenario import ScenarioError, load_scenario, parse_scenario

__all__ = ["PRESETS", "ScenarioError", "compare_runs", "load_scenario", "parse_scenario", "render_table",
           "run_preset", "simulate"]
