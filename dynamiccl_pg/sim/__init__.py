"""The simulator harness: scenario files, runs through the real learner, reports and plots.

The simulator itself is C++ (csrc/sim, exposed as dynamiccl_pg._C.sim); this package parses
and validates scenario files, runs them and turns results into tables, JSON and PNGs.
Command line: ``python -m dynamiccl_pg sim --scenario FILE|DIR [--out DIR]``.
"""

from .scenario import Scenario, ScenarioError, load_scenario, parse_scenario, scenario_files

__all__ = ["Scenario", "ScenarioError", "load_scenario", "parse_scenario", "scenario_files"]
