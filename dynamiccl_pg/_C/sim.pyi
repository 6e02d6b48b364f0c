"""
NCCL collective simulator driving the real learner
"""
from __future__ import annotations
import collections.abc
import dynamiccl_pg._C
import typing
__all__: list[str] = ['ArmCost', 'CostTotals', 'RecoveryResult', 'ScenarioSpec', 'SimResult', 'StateEvent', 'StateResult', 'arm_costs', 'calls_per_step', 'ddp_buckets', 'run', 'scenario_schema', 'spec_from_dict', 'spec_problems']
class ArmCost:
    @property
    def name(self) -> str:
        ...
    @property
    def prior_us(self) -> float:
        ...
    @property
    def truth_us(self) -> float:
        ...
class CostTotals:
    @property
    def calls(self) -> int:
        ...
    @property
    def default_us(self) -> float:
        ...
    @property
    def learned_us(self) -> float:
        ...
    @property
    def oracle_us(self) -> float:
        ...
    @property
    def probes(self) -> int:
        ...
    @property
    def rounds(self) -> int:
        ...
    @property
    def rounds_us(self) -> float:
        ...
class RecoveryResult:
    @property
    def calls(self) -> int:
        ...
    @property
    def episode(self) -> int:
        ...
    @property
    def group(self) -> str:
        ...
    @property
    def needs_switch(self) -> bool:
        ...
    @property
    def op(self) -> str:
        ...
    @property
    def ratio_at_start(self) -> float:
        ...
    @property
    def role(self) -> str:
        ...
    @property
    def size_bin(self) -> int:
        ...
    @property
    def step(self) -> int:
        ...
class ScenarioSpec:
    pass
class SimResult:
    @property
    def after_convergence(self) -> CostTotals:
        ...
    @property
    def groups(self) -> list[str]:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def policies(self) -> list:
        ...
    @property
    def recoveries(self) -> list[RecoveryResult]:
        ...
    @property
    def roles(self) -> dict:
        ...
    @property
    def states(self) -> list[StateResult]:
        ...
    @property
    def step_default_us(self) -> list[float]:
        ...
    @property
    def step_learned_us(self) -> list[float]:
        ...
    @property
    def step_oracle_us(self) -> list[float]:
        ...
    @property
    def step_time_default_us(self) -> list[float]:
        ...
    @property
    def step_time_learned_us(self) -> list[float]:
        ...
    @property
    def step_time_oracle_us(self) -> list[float]:
        ...
    @property
    def steps(self) -> int:
        ...
    @property
    def total(self) -> CostTotals:
        ...
class StateEvent:
    @property
    def call(self) -> int:
        ...
    @property
    def from_arm(self) -> str:
        ...
    @property
    def step(self) -> int:
        ...
    @property
    def to_arm(self) -> str:
        ...
    @property
    def what(self) -> str:
        ...
class StateResult:
    @property
    def after_convergence(self) -> CostTotals:
        ...
    @property
    def alarms(self) -> int:
        ...
    @property
    def arms(self) -> int:
        ...
    @property
    def calls_to_converge(self) -> int:
        ...
    @property
    def default_arm(self) -> str:
        ...
    @property
    def events(self) -> list[StateEvent]:
        ...
    @property
    def group(self) -> str:
        ...
    @property
    def incumbent(self) -> str:
        ...
    @property
    def op(self) -> str:
        ...
    @property
    def oracle_arm(self) -> str:
        ...
    @property
    def role(self) -> str:
        ...
    @property
    def size_bin(self) -> int:
        ...
    @property
    def totals(self) -> CostTotals:
        ...
def arm_costs(spec: ScenarioSpec, group: str, op: str, bytes: typing.SupportsInt | typing.SupportsIndex, step: typing.SupportsInt | typing.SupportsIndex = 0) -> list[ArmCost]:
    """
    Arms a scenario's group offers for one call, with NCCL's nominal and the true cost.
    """
def calls_per_step(spec: ScenarioSpec) -> int:
    ...
def ddp_buckets(param_bytes: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], cap_bytes: typing.SupportsInt | typing.SupportsIndex, first_cap_bytes: typing.SupportsInt | typing.SupportsIndex) -> list[int]:
    """
    DDP's bucket sizes (issue order) for parameter sizes.
    """
def run(spec: ScenarioSpec, prior: dynamiccl_pg._C.PriorModel = None, rules_off: collections.abc.Sequence[str] = []) -> SimResult:
    """
    Run a scenario through the learner (with a learned prior: a PriorModel; with the learner rules named in rules_off switched off, to measure what they buy); returns a SimResult.
    """
def scenario_schema() -> dict:
    """
    The scenario file format as nested dicts (csrc/sim/scenario_schema.cpp).
    """
def spec_from_dict(validated: dict) -> ScenarioSpec:
    """
    A ScenarioSpec from a scenario dict that passed dynamiccl_pg.sim.scenario's checks.
    """
def spec_problems(spec: ScenarioSpec) -> list[tuple[str, str]]:
    """
    Broken rules that relate several keys: [(key path, what is wrong)].
    """
